//! Writing staged records: whoever finds no write in progress — usually the appender that just
//! staged its record, on its own thread, else the writer thread as a backstop — takes every
//! record staged so far (in log order), writes them into the segments' page cache (`pwritev`, a
//! batch per call, or under ASYNC_FLUSH a copy into the mapping), publishes the written end (which readers, the dispatcher, the
//! flusher and ASYNC_FLUSH sends follow), and goes on until the stage is empty. At low load an
//! append is written by its own thread with no hand-off; at high load one writer carries many.
//!
//! Owns: the written end and the "a write is in progress" flag. Must never: publish an end
//! before every byte below it is in the page cache, write out of log order, strand a staged
//! record (after clearing the flag the writer looks at the stage again), or go on after a
//! failed write (the failure is final until restart: every waiter fails, appends are refused).

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use crate::commit_log::{Shared, Staged};
use crate::error::{Result, StoreError};

/// Longest sleep of the backstop writer between looks at the stage.
const IDLE_SLEEP: Duration = Duration::from_millis(50);

/// Writes one batch, segment by segment; returns the batch's end.
fn write_batch(s: &Shared, batch: &[Staged]) -> Result<u64> {
    let size = s.config.segment_size_bytes;
    let mut i = 0;
    while i < batch.len() {
        let start = batch[i].offset;
        let seg = s
            .segment_at(start)
            .ok_or_else(|| StoreError::NotWritable(format!("no segment holds offset {start}")))?;
        let seg_end = seg.start_offset() + size;
        let mut runs: Vec<Bytes> = Vec::new();
        let mut at = start;
        while i < batch.len() && batch[i].offset < seg_end && batch[i].offset == at {
            runs.push(batch[i].bytes.clone());
            at = batch[i].end;
            i += 1;
        }
        assert!(!runs.is_empty(), "staged runs are contiguous within a segment, in log order");
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the segment holds `start` and is mapped whole, so pos fits usize"
        )]
        let pos = (start - seg.start_offset()) as usize;
        if s.config.writes_through_mapping() && seg.accepts_mapped_writes() {
            // SAFETY: only the thread holding the `writing` flag writes, and only past the
            // written end, which no reader passes until `publish`.
            unsafe { seg.copy_runs(pos, &runs) };
        } else {
            seg.pwritev(pos, &runs)?;
        }
    }
    Ok(batch.last().map_or(0, |b| b.end))
}

fn fail_write(s: &Shared, err: &StoreError) {
    tracing::error!(error = %err, "writing the commit log failed; refusing further appends until restart");
    s.writable.store(false, Ordering::Release);
    let reason = format!("write failed: {err}");
    s.written.fail(&reason);
    s.flushed.fail(&reason);
    s.stage_space.notify_all();
}

/// Writes everything staged, unless another thread is writing (it will write it). Returns
/// false when a write failed.
pub(crate) fn write_staged(s: &Shared) -> bool {
    loop {
        if s.writing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return true;
        }
        let ok = drain(s);
        s.writing.store(false, Ordering::Release);
        // Something staged after the last look and before the flag was cleared would be
        // stranded: look again.
        if !ok || s.stage.lock().items.is_empty() || paused(s) {
            return ok;
        }
    }
}

fn paused(s: &Shared) -> bool {
    s.config.inject_writer_pause.as_ref().is_some_and(|p| p.load(Ordering::Acquire))
}

/// Writes batches until the stage is empty; false when a write failed.
fn drain(s: &Shared) -> bool {
    loop {
        if paused(s) || s.written.failure().is_some() {
            return s.written.failure().is_none();
        }
        let batch: Vec<Staged> = std::mem::take(&mut s.stage.lock().items).into();
        if batch.is_empty() {
            return true;
        }
        let bytes: usize = batch.iter().map(|b| b.bytes.len()).sum();
        match write_batch(s, &batch) {
            Ok(end) => {
                s.publish(end);
                s.stage.lock().bytes -= bytes;
                s.stage_space.notify_all();
                s.notify_written();
            }
            Err(e) => {
                fail_write(s, &e);
                return false;
            }
        }
    }
}

/// The writer thread's body: a backstop that writes what appenders left staged (a paused test
/// writer, say); runs until shutdown, after the stage is empty.
pub(crate) fn writer_loop(s: &Shared) {
    s.writer_wakeup.register_current();
    loop {
        if s.abandon.load(Ordering::Acquire) {
            return;
        }
        let ok = write_staged(s);
        if s.shutdown.load(Ordering::Acquire) && (!ok || (s.stage.lock().items.is_empty() && !s.writing.load(Ordering::Acquire))) {
            return;
        }
        s.writer_wakeup.sleep_unless(IDLE_SLEEP, || {
            s.shutdown.load(Ordering::Acquire) || (!s.stage.lock().items.is_empty() && !paused(s))
        });
    }
}
