//! The commit log's background threads: the flusher (group commit), the checkpointer, the
//! writer (in `writer.rs`) and the segment allocator (in `allocator.rs`).
//!
//! The flusher makes `[flushed, published)` durable with one `fdatasync` per segment it spans, then
//! advances the flushed watermark, which completes every SYNC_FLUSH waiter it passes. Each flush
//! covers everything published before it started; under SYNC_FLUSH it starts again at once if
//! more was published meanwhile and sleeps (woken by the next append) only when there is none —
//! no fixed sleeps on the sync path.
//!
//! Owns: the flushed watermark's progress, the flush statistics and the checkpoint cadence.
//! Must never: advance the watermark past bytes that are not durable, keep trying after a flush
//! failed (the failure is final until restart: every waiter fails, appends are refused), or
//! write a checkpoint that claims more than is durable.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::checkpoint::Checkpoint;
use crate::commit_log::{CheckpointState, FlushMode, Shared};
use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;
use crate::watermark::WaitError;

/// Longest sleep of an idle SYNC_FLUSH flusher; appends wake it sooner (a safety net only).
const SYNC_IDLE_SLEEP: Duration = Duration::from_secs(1);

/// Makes everything published durable (on the calling thread); returns the new flushed offset.
pub(crate) fn flush_published(s: &Shared) -> Result<u64> {
    let from = s.flushed.get();
    let to = s.published.load(Ordering::Acquire);
    if to > from {
        flush_range(s, from, to)?;
        s.flushed.advance(to);
    }
    Ok(to)
}

fn flush_range(s: &Shared, from: u64, to: u64) -> Result<()> {
    if let Some(delay) = &s.config.inject_flush_delay_ms {
        std::thread::sleep(Duration::from_millis(delay.load(Ordering::Acquire)));
    }
    if s.config.inject_flush_failure.as_ref().is_some_and(|f| f.load(Ordering::Acquire)) {
        return Err(StoreError::io(&s.config.dir, std::io::Error::from_raw_os_error(libc::EIO)));
    }
    let size = s.config.segment_size_bytes;
    let segs: Vec<Arc<MappedFile>> = s
        .segments
        .read()
        .iter()
        .filter(|seg| seg.start_offset() + size > from && seg.start_offset() < to)
        .cloned()
        .collect();
    // `fdatasync` of each segment the range touches: its dirty pages are exactly what was
    // written since the last flush (and perhaps a little more, which is harmless).
    for seg in segs {
        seg.sync_data()?;
    }
    Ok(())
}

fn fail_flush(s: &Shared, err: &StoreError) {
    tracing::error!(error = %err, "flush failed; refusing further appends until restart");
    s.writable.store(false, Ordering::Release);
    s.flushed.fail(&format!("flush failed: {err}"));
}

/// One flush of `[flushed, published)`, counted; false when nothing was there.
fn flush_once(s: &Shared) -> bool {
    let from = s.flushed.get();
    let to = s.published.load(Ordering::Acquire);
    // Read after `published`: every record below `to` is counted now or was counted before.
    let records_before = s.stats.appended_records.load(Ordering::Acquire);
    if to <= from {
        return false;
    }
    let started = Instant::now();
    if let Err(e) = flush_range(s, from, to) {
        fail_flush(s, &e);
        return false;
    }
    // Counted before the waiters are released, so that what they see includes this flush.
    let flush_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    s.stats.flush_ns.record(flush_ns);
    s.stats.flushes.fetch_add(1, Ordering::Relaxed);
    s.stats.flushed_bytes.fetch_add(to - from, Ordering::Relaxed);
    let previous = s.stats.records_at_last_flush.swap(records_before, Ordering::AcqRel);
    s.stats.records_per_flush.record(records_before.saturating_sub(previous));
    s.flushed.advance(to);
    if s.config.flush_mode == FlushMode::Sync {
        s.notify_readable();
    }
    true
}

fn flush_loop(s: &Shared) {
    s.flusher_wakeup.register_current();
    let mut last_flush = Instant::now();
    loop {
        if s.abandon.load(Ordering::Acquire) {
            return;
        }
        let failed = s.flushed.failure().is_some();
        let shutting_down = s.shutdown.load(Ordering::Acquire);
        let due = match s.config.flush_mode {
            FlushMode::Sync => true,
            FlushMode::Async => {
                shutting_down || last_flush.elapsed() >= s.config.async_flush_interval || s.flush_requested.swap(false, Ordering::AcqRel)
            }
        };
        if due && !failed && flush_once(s) {
            last_flush = Instant::now();
            continue;
        }
        if due {
            last_flush = Instant::now();
        }
        if shutting_down {
            return;
        }
        match s.config.flush_mode {
            FlushMode::Sync if !failed => s.flusher_wakeup.sleep_unless(SYNC_IDLE_SLEEP, || {
                s.shutdown.load(Ordering::Acquire) || s.published.load(Ordering::SeqCst) > s.flushed.get()
            }),
            _ => {
                let wait = s.config.async_flush_interval.saturating_sub(last_flush.elapsed());
                s.flusher_wakeup.sleep_unless(wait.max(Duration::from_millis(1)), || {
                    s.shutdown.load(Ordering::Acquire) || s.flush_requested.load(Ordering::Acquire)
                });
            }
        }
    }
}

/// Below this many delta bytes the deltas are never folded into a new base. A fold reads the
/// base and every block back and rewrites the base: at 10,000 light queues changing every
/// second (about 300 KB a block) a 1 MiB floor folded every 3–4 s, 1.3 µs of CPU per message.
/// At 8 MiB a fold comes every half minute there, and a recovery still reads at most 8 MiB of
/// blocks past a small base (a large base folds at its own size, as before).
const MIN_FOLD_BYTES: u64 = 8 << 20;

/// Records the checkpoint every `checkpoint_interval`, off the flusher so that its fsyncs never
/// delay a group commit: takes `(end, topics changed)`, waits until `end` is durable, appends
/// a delta block (see `checkpoint.rs`), and folds the deltas into a new base once they are as
/// large as it.
fn checkpoint_loop(s: &Shared) {
    s.checkpoint_wakeup.register_current();
    let patience = s.config.async_flush_interval * 4 + Duration::from_secs(5);
    let mut failures = crate::repeated::Repeated::new("checkpoint not written; recovery would start at the previous one");
    loop {
        let started = Instant::now();
        while started.elapsed() < s.config.checkpoint_interval {
            if s.shutdown.load(Ordering::Acquire) {
                return;
            }
            let left = s.config.checkpoint_interval.saturating_sub(started.elapsed());
            s.checkpoint_wakeup
                .sleep_unless(left.max(Duration::from_millis(1)), || s.shutdown.load(Ordering::Acquire));
        }
        let mut state = s.checkpoint.lock();
        if state.needs_base {
            let (end, all) = s.checkpoint_snapshot();
            match wait_flushed_unless_stopping(s, end, patience) {
                Ok(()) => match state.store_base(&s.config.dir, end, all) {
                    Ok(()) => failures.succeeded(),
                    Err(e) => failures.failed(&e),
                },
                Err(WaitError::Failed(_)) => return,
                Err(_) => {}
            }
            continue;
        }
        let (end, changes) = s.checkpoint_changes();
        // Older changes first, so that a topic's newer offsets win.
        state.carried.extend(changes);
        if end == state.written_end && state.carried.is_empty() {
            continue;
        }
        match wait_flushed_unless_stopping(s, end, patience) {
            // A checkpoint that cannot be written (a full disk, say) only makes the next
            // recovery scan further back; it is no reason to stop taking messages.
            Ok(()) => match write_block(s, &mut state, end) {
                Ok(()) => failures.succeeded(),
                Err(e) => failures.failed(&e),
            },
            Err(WaitError::Failed(_)) => return,
            Err(_) => {}
        }
    }
}

/// Appends the block for `end` with the carried changes, then folds the deltas into a new base
/// if they have grown as large as it. The changes stay carried unless the block is durable.
fn write_block(s: &Shared, state: &mut CheckpointState, end: u64) -> Result<()> {
    let dir = &s.config.dir;
    match crate::checkpoint::append_delta(dir, state.generation, end, &state.carried) {
        Ok(bytes) => state.delta_bytes += bytes,
        Err(e) => {
            state.needs_base |= matches!(e, StoreError::CheckpointTorn(_));
            return Err(e);
        }
    }
    state.carried.clear();
    state.written_end = end;
    if state.delta_bytes < state.base_bytes.max(MIN_FOLD_BYTES) {
        return Ok(());
    }
    // A fold that fails leaves the deltas growing: a new base from the log's own state follows.
    state.needs_base = true;
    let mut base = Checkpoint::load(dir)?.ok_or_else(|| StoreError::Layout {
        path: dir.display().to_string(),
        reason: "the checkpoint's base vanished under its deltas".into(),
    })?;
    if base.flushed_offset != end {
        // The block just written did not load.
        return Err(StoreError::Layout {
            path: dir.display().to_string(),
            reason: format!("the checkpoint's deltas load to {} after a block for {end}", base.flushed_offset),
        });
    }
    base.generation = state.generation + 1;
    base.store(dir)?;
    state.generation = base.generation;
    state.base_bytes = base.approximate_bytes();
    state.delta_bytes = 0;
    state.needs_base = false;
    Ok(())
}

/// Waits for the flushed watermark to pass `end`, in short slices so that a stop (a crash in
/// tests: the flusher is gone and the watermark will not move) ends the wait at once.
fn wait_flushed_unless_stopping(s: &Shared, end: u64, patience: Duration) -> std::result::Result<(), WaitError> {
    const SLICE: Duration = Duration::from_millis(50);
    let started = Instant::now();
    loop {
        match s.flushed.wait_blocking(end, SLICE) {
            Err(WaitError::TimedOut { .. })
                if started.elapsed() < patience && !s.abandon.load(Ordering::Acquire) && !s.shutdown.load(Ordering::Acquire) => {}
            other => return other,
        }
    }
}

/// Starts the flusher, the checkpointer and the allocator.
pub(crate) fn spawn_threads(shared: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>> {
    let spawn = |name: &str, f: fn(&Shared)| {
        let s = shared.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(&s))
            .map_err(|e| StoreError::io(&shared.config.dir, e))
    };
    Ok(vec![
        spawn("commitlog-write", crate::writer::writer_loop)?,
        spawn("commitlog-flush", flush_loop)?,
        spawn("commitlog-ckpt", checkpoint_loop)?,
        spawn("commitlog-alloc", crate::allocator::allocator_loop)?,
    ])
}
