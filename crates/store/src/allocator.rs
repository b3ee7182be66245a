//! The segment allocator: creates the next commit-log segment before the writer needs it
//! (`posix_fallocate`, mmap, directory fsync) and faults pages in ahead of the writer, so that
//! neither a roll nor a first touch ever happens under the put-message lock on the append path.
//!
//! Owns: the prepared segment and `populated_to`. Must never: change bytes (faulting in uses
//! `MADV_POPULATE_WRITE`, which leaves contents alone, so it may run beside the writer), or spin
//! on a failure (after a failed creation it waits for an appender to ask again, or a second).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::commit_log::Shared;
use crate::error::StoreError;
use crate::mapped_file::MappedFile;

/// Longest sleep of an idle allocator; appends wake it sooner.
const IDLE_SLEEP: Duration = Duration::from_secs(1);
/// Pause before retrying a creation that failed, unless an appender asks sooner.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Bytes faulted in per call, so a shutdown is noticed within one chunk.
const PREFAULT_CHUNK_BYTES: u64 = 1 << 20;

/// The segment start to prepare now, if any.
fn wanted_now(s: &Shared) -> Option<u64> {
    if s.config.inject_allocator_pause.as_ref().is_some_and(|p| p.load(Ordering::Acquire)) {
        return None;
    }
    let next = s.next.lock();
    if next.ready.as_ref().is_some_and(|r| r.start_offset() == next.wanted) {
        return None;
    }
    let retry_due = next.error_at.is_none_or(|t| t.elapsed() >= RETRY_AFTER);
    (next.retry_requested || retry_due).then_some(next.wanted)
}

fn prepare_next(s: &Shared) {
    let Some(wanted) = wanted_now(s) else { return };
    let size = s.config.segment_size_bytes;
    let window = s.config.prefault_bytes.min(size);
    let created = MappedFile::create(&s.config.dir, wanted, size).and_then(|f| {
        f.populate(0, window as usize)?;
        Ok(f)
    });
    let mut next = s.next.lock();
    next.attempts += 1;
    next.retry_requested = false;
    match created {
        Ok(f) => {
            assert_eq!(next.wanted, wanted, "only a roll moves the wanted segment, and it needs this one");
            next.ready = Some(Arc::new(f));
            next.ready_populated = window;
            next.error = None;
            next.error_at = None;
            s.stats.segments_prepared.fetch_add(1, Ordering::Relaxed);
            s.stats.prefaulted_bytes.fetch_add(window, Ordering::Relaxed);
        }
        Err(e) => {
            if next.error.is_none() {
                tracing::warn!(offset = wanted, error = %e, "cannot prepare the next commit-log segment");
            }
            next.error_was_disk_full = matches!(e, StoreError::DiskFull { .. });
            next.error = Some(e.to_string());
            next.error_at = Some(Instant::now());
        }
    }
    s.next_changed.notify_all();
}

/// `(segment, end of the range to fault in)` when the writer's segment needs pages faulted in.
fn prefault_target(s: &Shared) -> Option<(Arc<MappedFile>, u64)> {
    if s.config.prefault_bytes == 0 {
        return None;
    }
    let seg = s.segments.read().last().cloned()?;
    let seg_end = seg.start_offset() + s.config.segment_size_bytes;
    let write_at = s.published.load(Ordering::Acquire).max(seg.start_offset());
    let target = (write_at + s.config.prefault_bytes).min(seg_end);
    (s.populated_to.load(Ordering::Acquire) < target).then_some((seg, target))
}

fn prefault_current(s: &Shared) {
    let Some((seg, target)) = prefault_target(s) else { return };
    let start = seg.start_offset();
    let mut from = s.populated_to.load(Ordering::Acquire).max(start);
    while from < target && !s.shutdown.load(Ordering::Acquire) {
        let to = (from + PREFAULT_CHUNK_BYTES).min(target);
        if let Err(e) = seg.populate((from - start) as usize, (to - start) as usize) {
            // Let appends go ahead and take their own faults rather than wait for this forever.
            tracing::warn!(error = %e, "cannot fault commit-log pages in ahead of the writer");
            s.populated_to.fetch_max(start + s.config.segment_size_bytes, Ordering::AcqRel);
            return;
        }
        s.populated_to.fetch_max(to, Ordering::AcqRel);
        s.stats.prefaulted_bytes.fetch_add(to - from, Ordering::Relaxed);
        from = to;
    }
}

/// The allocator thread's body.
pub(crate) fn allocator_loop(s: &Shared) {
    s.allocator_wakeup.register_current();
    while !s.shutdown.load(Ordering::Acquire) {
        prepare_next(s);
        prefault_current(s);
        s.allocator_wakeup.sleep_unless(IDLE_SLEEP, || {
            s.shutdown.load(Ordering::Acquire) || wanted_now(s).is_some() || prefault_target(s).is_some()
        });
    }
}
