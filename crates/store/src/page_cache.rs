//! The page-cache budget: the store keeps the resident bytes of its own files (commit-log and
//! consume-queue segments) under a configured number, on any kernel, instead of letting every
//! written byte stay mapped until the container's memory limit kills the process.
//!
//! Every [`KEEP_INTERVAL`] a thread of its own measures what is resident (`mincore`): each
//! file up to [`PAST_WRITTEN_BYTES`] past where it is written, and every [`FULL_PASS_EVERY`]th
//! pass each file whole. `mincore` over a range with no page-table entries looks every page
//! up in the page cache, and a 1 GiB commit-log segment, mapped whole and mostly unwritten,
//! cost a broker (a slave most of all, whose other work is small) a quarter to a third of its
//! CPU at 10,000 messages a second. Past the written end only the kernel's read-around puts
//! pages (a write fault through the mapping reads the window around it: `read_ahead_kb`, 8 MiB
//! on some disks), and the margin covers that; the whole-file pass finds what a larger window
//! or a rare writer past the end (a replica's log cut back zeroes the rest of its segment)
//! left resident. Above
//! [`RELEASE_FRACTION`] of the budget it releases what is durable and cold: commit-log ranges
//! below both the flushed offset and the hot window (the newest half of the budget, where
//! tailing consumers read), and every consume-queue segment but each queue's newest. Released
//! pages leave this process's page tables and, being clean, the page cache; a late reader
//! faults them back in, and the next pass releases them again. What cannot be released is
//! dirty data: when the budget is still exceeded and unflushed bytes exceed a quarter of it,
//! the store says it is busy (sends get `SYSTEM_BUSY` with RocketMQ's `[PC_SYNCHRONIZED]`
//! remark) and asks the flusher to flush now, so that memory stays bounded instead of growing.
//!
//! With a cold tier, the blocks its read cache holds are memory of the broker's too: they come
//! off the budget before the files get theirs (the broker keeps that cache at half the budget
//! at most).
//!
//! Owns: measuring, releasing, and the busy flag. Must never: release a range that is not
//! durable, or touch the newest part of the log that tailing consumers read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::mapped_file::MappedFile;

/// How often the budget is checked.
pub const KEEP_INTERVAL: Duration = Duration::from_millis(200);

/// Every this many passes, the files are measured whole, not only up to their written ends.
pub const FULL_PASS_EVERY: u64 = 25;

/// How far past a file's written end a pass measures: more than the read-around window of a
/// fault (`read_ahead_kb`, 128 KiB by default, 8 MiB on some virtual disks).
pub const PAST_WRITTEN_BYTES: usize = 16 << 20;

/// Release starts above this fraction of the budget, so that the budget itself is not crossed
/// between two checks.
pub const RELEASE_FRACTION: f64 = 0.75;

/// The budget's live figures, for metrics and GET_BROKER_RUNTIME_INFO.
#[derive(Debug, Default)]
pub struct PageCacheStats {
    /// The budget, bytes (0: none).
    pub budget_bytes: AtomicU64,
    /// Resident bytes of the store's files at the last check.
    pub resident_bytes: AtomicU64,
    /// Bytes the cold tier's read cache held at the last check: memory the budget holds too,
    /// so the files get what it leaves.
    pub tier_cache_bytes: AtomicU64,
    /// Passes that released something.
    pub releases: AtomicU64,
    /// Resident bytes those passes released, summed.
    pub released_bytes: AtomicU64,
    /// Sends refused because dirty data kept the cache over budget.
    pub busy_refusals: AtomicU64,
    /// Whether sends are being refused now.
    pub busy: AtomicBool,
}

/// The files a pass looks at.
pub(crate) struct Files {
    /// Commit-log segments, oldest first.
    pub log: Vec<Arc<MappedFile>>,
    pub segment_bytes: u64,
    /// Below this the log is durable.
    pub flushed: u64,
    /// End of what is written.
    pub written: u64,
    /// Consume-queue segments that are not their queue's newest (cold), and the newest ones
    /// with the bytes written in each.
    pub cq_cold: Vec<Arc<MappedFile>>,
    pub cq_hot: Vec<(Arc<MappedFile>, usize)>,
    /// Measure every file whole, not only up to its written end.
    pub whole: bool,
}

impl Files {
    /// The resident bytes of every file: up to [`PAST_WRITTEN_BYTES`] past each one's
    /// written end, or whole.
    fn resident(&self) -> u64 {
        let extent = |f: &MappedFile, written: usize| {
            if self.whole {
                f.len()
            } else {
                written.saturating_add(PAST_WRITTEN_BYTES).min(f.len())
            }
        };
        let log: u64 = self
            .log
            .iter()
            .map(|seg| {
                let written = usize::try_from(self.written.saturating_sub(seg.start_offset())).unwrap_or(usize::MAX);
                seg.resident_bytes(0, extent(seg, written))
            })
            .sum();
        let cq_cold: u64 = self.cq_cold.iter().map(|f| f.resident_bytes(0, f.len())).sum();
        let cq_hot: u64 = self
            .cq_hot
            .iter()
            .map(|(f, written)| f.resident_bytes(0, extent(f, *written)))
            .sum();
        log + cq_cold + cq_hot
    }
}

/// Releases `[0, to)` of `seg` if any of it is resident; returns the resident bytes of the
/// range before and after (each file is measured once before and, if released, once after).
fn release_cold(seg: &MappedFile, to: usize) -> (u64, u64) {
    let before = seg.resident_bytes(0, to);
    if before == 0 || !seg.release(0, to) {
        return (before, before);
    }
    (before, seg.resident_bytes(0, to))
}

/// One pass: measure, release what is cold if over the release line, set the busy flag.
/// `tier_cache_bytes` (what the cold tier's read cache holds now) comes off the budget first.
/// Returns whether the flusher should flush now.
pub(crate) fn keep(stats: &PageCacheStats, budget_bytes: u64, tier_cache_bytes: u64, files: &Files) -> bool {
    stats.budget_bytes.store(budget_bytes, Ordering::Relaxed);
    stats.tier_cache_bytes.store(tier_cache_bytes, Ordering::Relaxed);
    let budget_bytes = budget_bytes.saturating_sub(tier_cache_bytes);
    let before = files.resident();
    let mut now = before;
    if before as f64 > budget_bytes as f64 * RELEASE_FRACTION {
        let hot_from = files.written.saturating_sub(budget_bytes / 2);
        let cold_end = hot_from.min(files.flushed);
        let cold_log = files.log.iter().take_while(|s| s.start_offset() < cold_end).map(|s| {
            let to = usize::try_from((cold_end - s.start_offset()).min(files.segment_bytes))
                .expect("a segment is mapped whole, so its size fits usize");
            (s, to)
        });
        let cold_cq = files.cq_cold.iter().map(|s| (s, s.len()));
        let released: u64 = cold_log
            .chain(cold_cq)
            .map(|(seg, to)| {
                let (was, is) = release_cold(seg, to);
                was.saturating_sub(is)
            })
            .sum();
        now = before.saturating_sub(released);
        if released > 0 {
            stats.releases.fetch_add(1, Ordering::Relaxed);
            stats.released_bytes.fetch_add(released, Ordering::Relaxed);
        }
    }
    stats.resident_bytes.store(now, Ordering::Relaxed);
    let dirty = files.written.saturating_sub(files.flushed);
    let busy = now > budget_bytes && dirty > budget_bytes / 4;
    if stats.busy.swap(busy, Ordering::AcqRel) != busy {
        tracing::warn!(
            resident = now,
            budget = budget_bytes,
            dirty,
            busy,
            "page-cache budget: flow control changed"
        );
    }
    dirty > budget_bytes / 4
}

/// The most the default budget is, whatever the memory: 1 GiB.
///
/// Why a cap: with a budget of a quarter of a 24 GiB machine nothing is ever released, and the
/// same send workload ran 4–7% slower at 7% more broker CPU per message than under a 256 MiB
/// or 1 GiB budget (docs/benchmarks.md, "The default page-cache budget"): pages the store
/// releases are handed back for the next segment's pages, where a store that never releases
/// takes cold pages from the whole machine. A consumer more than half the budget behind reads
/// from the disk (a lone read asks for its own pages only; one going in order gets a window
/// read ahead).
pub const DEFAULT_BUDGET_CAP_BYTES: u64 = 1 << 30;

/// The default budget: a quarter of the memory limit of the cgroup this process runs in (v2
/// `memory.max`, v1 `memory.limit_in_bytes`), else a quarter of the machine's memory, and at
/// most [`DEFAULT_BUDGET_CAP_BYTES`].
#[must_use]
pub fn default_budget_bytes() -> u64 {
    cgroup_limit_bytes()
        .or_else(total_memory_bytes)
        .map_or(DEFAULT_BUDGET_CAP_BYTES, |b| b / 4)
        .min(DEFAULT_BUDGET_CAP_BYTES)
}

fn cgroup_limit_bytes() -> Option<u64> {
    let groups = procfs::process::Process::myself().ok()?.cgroups().ok()?;
    for group in groups {
        let path = &group.pathname;
        let candidates = if group.controllers.is_empty() {
            vec![format!("/sys/fs/cgroup{path}/memory.max")]
        } else if group.controllers.iter().any(|c| c == "memory") {
            vec![
                format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"),
                // Inside a container the cgroup's own directory is mounted as the root.
                "/sys/fs/cgroup/memory/memory.limit_in_bytes".to_owned(),
            ]
        } else {
            continue;
        };
        for c in candidates {
            if let Some(limit) = std::fs::read_to_string(&c).ok().and_then(|v| v.trim().parse::<u64>().ok()) {
                // v1 reports "no limit" as a number near 2^63.
                if limit < (1 << 60) {
                    return Some(limit);
                }
            }
        }
    }
    None
}

fn total_memory_bytes() -> Option<u64> {
    use procfs::Current;
    Some(procfs::Meminfo::current().ok()?.mem_total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass measures each file up to a margin past its written end, and the whole-file pass
    /// also finds what lies resident beyond that (a replica's cut zeroing the rest of its
    /// segment, say).
    #[test]
    fn a_pass_measures_up_to_the_written_end_and_the_whole_pass_past_it() {
        const SEGMENT: usize = 64 << 20;
        const WRITTEN: usize = 1 << 20;
        const FAR: usize = 48 << 20;
        let dir = tempfile::tempdir().expect("a directory");
        let mapped = |name: &str| {
            let at = dir.path().join(name);
            std::fs::create_dir_all(&at).expect("a directory");
            Arc::new(MappedFile::create(&at, 0, SEGMENT as u64).expect("created"))
        };
        let (log, cq) = (mapped("log"), mapped("cq"));
        for f in [&log, &cq] {
            // SAFETY: nobody else reads or writes these files.
            unsafe {
                f.write_at(0, &vec![1_u8; WRITTEN]);
                f.write_at(FAR, &vec![2_u8; WRITTEN]);
            }
        }
        let files = |whole| Files {
            log: vec![log.clone()],
            segment_bytes: SEGMENT as u64,
            flushed: 0,
            written: WRITTEN as u64,
            cq_cold: Vec::new(),
            cq_hot: vec![(cq.clone(), WRITTEN)],
            whole,
        };
        // Each file's written MiB and the read-around of its write faults, not the far MiB.
        let near = files(false).resident();
        assert!(near >= 2 * WRITTEN as u64, "the written MiB of each file: {near} bytes");
        let near_max = 2 * (WRITTEN + PAST_WRITTEN_BYTES) as u64;
        assert!(near <= near_max, "nothing beyond the margin: {near} bytes, at most {near_max}");
        let whole = files(true).resident();
        assert!(
            whole >= near + 2 * WRITTEN as u64,
            "the whole pass finds the far MiB too: {whole} against {near}"
        );
    }
}
