//! The page-cache budget: the store keeps the resident bytes of its own files (commit-log and
//! consume-queue segments) under a configured number, on any kernel, instead of letting every
//! written byte stay mapped until the container's memory limit kills the process.
//!
//! Every [`KEEP_INTERVAL`] a thread of its own measures what is resident (`mincore`). Above
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
    /// Consume-queue segments that are not their queue's newest (cold), and the newest ones.
    pub cq_cold: Vec<Arc<MappedFile>>,
    pub cq_hot: Vec<Arc<MappedFile>>,
}

fn resident(files: &[Arc<MappedFile>]) -> u64 {
    files.iter().map(|f| f.resident_bytes(0, f.len())).sum()
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
    let before = resident(&files.log) + resident(&files.cq_cold) + resident(&files.cq_hot);
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
