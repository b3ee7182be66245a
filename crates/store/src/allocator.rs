//! The segment allocator: creates the next commit-log segment before the writer needs it
//! (`posix_fallocate`, mmap, directory fsync), so that a roll never creates a file under the
//! put-message lock on the append path.
//!
//! Owns: the prepared segment. Must never: spin on a failure (after a failed creation it waits
//! for an appender to ask again, or a second).

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

/// The segment start to prepare now, if any: once the writer is half way through its segment
/// (at once when it has none), so that an idle broker does not prepare (and zero-fill) a
/// segment it may never use.
fn wanted_now(s: &Shared) -> Option<u64> {
    if s.config.inject_allocator_pause.as_ref().is_some_and(|p| p.load(Ordering::Acquire)) {
        return None;
    }
    let next = s.next.lock();
    if next.ready.as_ref().is_some_and(|r| r.start_offset() == next.wanted) {
        return None;
    }
    let size = s.config.segment_size_bytes;
    let current_start = next.wanted.saturating_sub(size);
    let written = s.published.load(Ordering::Acquire);
    let half_way = written >= current_start + size / 2 || written < current_start || next.wanted == written;
    if !half_way && !next.retry_requested {
        return None;
    }
    let retry_due = next.error_at.is_none_or(|t| t.elapsed() >= RETRY_AFTER);
    (next.retry_requested || retry_due).then_some(next.wanted)
}

fn prepare_next(s: &Shared) {
    let Some(wanted) = wanted_now(s) else { return };
    // The first segment of an empty log is wanted at once: no zero-fill for it.
    let zero_fill = s.config.zero_fill_segments && wanted != s.published.load(Ordering::Acquire);
    let cancelled = || s.shutdown.load(Ordering::Acquire);
    let created = MappedFile::create_with(&s.config.dir, wanted, s.config.segment_size_bytes, cancelled, zero_fill);
    let mut next = s.next.lock();
    if next.wanted != wanted {
        // An empty log was moved to begin elsewhere (a replica joining a master) while this
        // segment was being created: nobody will want it.
        drop(next);
        if let Ok(f) = created {
            let path = f.path().to_owned();
            drop(f);
            let _ = std::fs::remove_file(path);
        }
        return;
    }
    next.attempts += 1;
    next.retry_requested = false;
    match created {
        Ok(f) => {
            next.ready = Some(Arc::new(f));
            next.error = None;
            next.error_at = None;
            s.stats.segments_prepared.fetch_add(1, Ordering::Relaxed);
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

/// The allocator thread's body.
pub(crate) fn allocator_loop(s: &Shared) {
    s.allocator_wakeup.register_current();
    while !s.shutdown.load(Ordering::Acquire) {
        prepare_next(s);
        s.allocator_wakeup
            .sleep_unless(IDLE_SLEEP, || s.shutdown.load(Ordering::Acquire) || wanted_now(s).is_some());
    }
}
