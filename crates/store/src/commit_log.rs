//! `CommitLog`: every message, appended in arrival order to fixed-size `MappedFile` segments in
//! RocketMQ's record layout, made durable by one flusher (group commit under SYNC_FLUSH, an
//! interval under ASYNC_FLUSH) that publishes the flushed offset as a [`Watermark`], and
//! recovered after a crash by checking each record after the checkpoint.
//!
//! An append assigns offsets and hands the record's own buffer to the stage, all under the
//! put-message lock — no copy and no system call there. Whoever then finds no write in progress
//! writes the stage into the page cache and publishes the written end (readers and ASYNC_FLUSH
//! sends follow it); the flusher makes it durable with `fdatasync` and publishes the flushed
//! end (SYNC_FLUSH sends follow it). Under SYNC_FLUSH the write is `pwritev`: a sync of pages
//! dirtied through the mapping cost 2.7× as much on the reference disk (every sync must
//! write-protect each such page, with TLB shootdowns, and the writer then faults on it again —
//! `group_commit` in examples/ measures both), and SYNC_FLUSH pays a sync per send. Under
//! ASYNC_FLUSH, with a sync every 500 ms, the write is a copy into the mapping: a system call
//! per batch cost more than those rare syncs ([`WritePath`]).
//!
//! Owns: offset assignment (physical and per-queue), segment rolling, and the three threads
//! that keep blocking work off the append path — the flusher, the checkpointer and the segment
//! allocator (which creates the next segment before it is needed). Must never: do more under
//! the put-message lock than assign offsets, patch them into the pre-encoded record and copy it
//! into the page cache (no file creation, no fsync, and on the non-blocking path no wait for a
//! segment), or publish a flushed offset past bytes that are not durable.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::{Condvar, Mutex, RwLock};
use petrel_lock::{AdaptiveConfig, DEFAULT_BACKOFF_K, LockKind, PutMessageLock, acquire, new_lock};
use petrel_protocol::message::{
    BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2, PHYSICAL_OFFSET_POS, QUEUE_OFFSET_POS, RecordView, store_timestamp_pos,
};

use crate::checkpoint::{Changes, Checkpoint, QueueKey, mark_clean, mark_running};
use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;
use crate::numbering::Numbering;
use crate::recovery::{load_segments, recover};
use crate::stats::CommitLogStats;
use crate::wakeup::Wakeup;
use crate::watermark::{WaitError, Watermark};

/// Bytes of the end-of-segment filler: `[i32 remaining][i32 BLANK_MAGIC_CODE]`.
pub(crate) const BLANK_BYTES: u64 = 8;

/// Largest segment: the filler's `remaining`, always less than the segment's size, is an i32
/// (RocketMQ's `mappedFileSizeCommitLog` is an int too).
pub(crate) const MAX_SEGMENT_BYTES: u64 = 1 << 31;

/// When an append counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// Answer after the record is durable; one flush covers every waiter (group commit).
    Sync,
    /// Answer after the copy; the flusher runs on an interval.
    Async,
}

/// How the writer puts staged records into the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePath {
    /// `Mapping` under ASYNC_FLUSH, `Syscall` under SYNC_FLUSH.
    Auto,
    /// `pwritev`: what a sync must write back was written through the file, so `fdatasync`
    /// has no mapped pages to write-protect (the cheaper sync, for SYNC_FLUSH's every send).
    Syscall,
    /// A copy into the segment's mapping: no system call per batch (ASYNC_FLUSH, whose rare
    /// syncs can afford the write-protect cycle). Falls back to `Syscall` for a segment whose
    /// blocks are not all allocated.
    Mapping,
}

impl CommitLogConfig {
    /// Whether the writer copies into mappings, for this flush mode.
    #[must_use]
    pub fn writes_through_mapping(&self) -> bool {
        match self.write_path {
            WritePath::Auto => self.flush_mode == FlushMode::Async,
            WritePath::Syscall => false,
            WritePath::Mapping => true,
        }
    }
}

/// Where the commit log lives and how it flushes, rolls, locks and cleans up.
#[derive(Debug, Clone)]
pub struct CommitLogConfig {
    /// Directory holding the segments, the checkpoint and the abort marker.
    pub dir: PathBuf,
    /// Segment size (RocketMQ `mappedFileSizeCommitLog`, 1 GiB), at most 2 GiB.
    pub segment_size_bytes: u64,
    /// When an append counts as done: written, or durable.
    pub flush_mode: FlushMode,
    /// How long a SYNC_FLUSH append waits for its flush (RocketMQ `syncFlushTimeout`, 5 s).
    pub sync_flush_timeout: Duration,
    /// ASYNC_FLUSH interval (RocketMQ `flushIntervalCommitLog`, 500 ms).
    pub async_flush_interval: Duration,
    /// How often the checkpoint is rewritten; bounds what recovery must scan.
    pub checkpoint_interval: Duration,
    /// The put-message lock.
    pub lock: LockKind,
    /// Segments whose last write is older than this are deleted (RocketMQ `fileReservedTime`, 72 h).
    pub file_reserved_time: Duration,
    /// When the disk holding the log is fuller than this ratio, the oldest segments are deleted
    /// whatever their age (RocketMQ `diskMaxUsedSpaceRatio`, 0.75).
    pub disk_max_used_ratio: f64,
    /// Whether a disk past `disk_max_used_ratio` deletes unexpired segments at all (RocketMQ
    /// `cleanFileForciblyEnable`, true). Off, a full disk refuses appends instead of giving up
    /// the oldest messages.
    pub clean_forcibly: bool,
    /// Waiters the flushed watermark holds at most (SYNC_FLUSH sends waiting for the disk).
    pub max_flush_waiters: usize,
    /// Bytes handed to the writer thread and not yet written, at most; beyond it an append
    /// waits (or, on the non-blocking path, is handed back).
    pub max_staged_bytes: usize,
    /// How staged records reach the page cache.
    pub write_path: WritePath,
    /// Write zeros over each new segment before it is used (RocketMQ `warmMapedFileEnable`):
    /// its blocks are then written extents, and a flush carries no extent conversion.
    pub zero_fill_segments: bool,
    /// Recovery cuts the log at a damaged record even when valid records follow it (which
    /// are then lost); by default it refuses to start instead (see `recovery.rs`).
    pub truncate_corruption: bool,
    /// Every record below this offset is known to have reached the disk (a durable point
    /// recorded outside the commit log: under SYNC_FLUSH, where readers read only what is
    /// flushed, the dispatch checkpoint). Recovery never takes a bad record below it for a
    /// torn tail, whatever zeros it holds: it is damage.
    pub durable_below: u64,
    /// Light message queues (RocketMQ's `enableLmq`): records that name LMQs in
    /// `INNER_MULTI_DISPATCH` get an offset in each at append, and recovery and replicas count
    /// those queues' offsets from the records.
    pub lmq: bool,
    /// Light message queues the log creates at most (`maxLmqConsumeQueueNum`).
    pub max_lmq_queues: usize,
    /// Fault injection for tests: while set, every flush fails as if the disk returned EIO.
    #[doc(hidden)]
    pub inject_flush_failure: Option<Arc<AtomicBool>>,
    /// Fault injection for tests: every flush first sleeps this many milliseconds (a slow disk).
    #[doc(hidden)]
    pub inject_flush_delay_ms: Option<Arc<AtomicU64>>,
    /// Fault injection for tests: while set, the allocator prepares no segment.
    #[doc(hidden)]
    pub inject_allocator_pause: Option<Arc<AtomicBool>>,
    /// Fault injection for tests: while set, the writer thread writes nothing.
    #[doc(hidden)]
    pub inject_writer_pause: Option<Arc<AtomicBool>>,
}

impl CommitLogConfig {
    /// RocketMQ's defaults (1 GiB segments, ASYNC_FLUSH, the mutex) for a log in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> CommitLogConfig {
        CommitLogConfig {
            dir: dir.into(),
            segment_size_bytes: 1 << 30,
            flush_mode: FlushMode::Async,
            sync_flush_timeout: Duration::from_secs(5),
            async_flush_interval: Duration::from_millis(500),
            checkpoint_interval: Duration::from_secs(1),
            lock: LockKind::Mutex,
            file_reserved_time: Duration::from_secs(72 * 3600),
            disk_max_used_ratio: 0.75,
            clean_forcibly: true,
            max_flush_waiters: 65_536,
            zero_fill_segments: false,
            truncate_corruption: false,
            durable_below: 0,
            write_path: WritePath::Auto,
            max_staged_bytes: 64 << 20,
            lmq: false,
            max_lmq_queues: 20_000,
            inject_flush_failure: None,
            inject_flush_delay_ms: None,
            inject_allocator_pause: None,
            inject_writer_pause: None,
        }
    }
}

/// Where a record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    /// Log offset of the record's first byte.
    pub physical_offset: u64,
    /// The record's encoded size.
    pub size_bytes: u32,
    /// The record's position in its topic-queue.
    pub queue_offset: i64,
    /// Store timestamp patched into the record, in ms since the Unix epoch.
    pub store_timestamp_ms: i64,
}

impl AppendResult {
    /// The offset just past the record: what the flushed watermark must reach.
    #[must_use]
    pub fn end_offset(&self) -> u64 {
        self.physical_offset + u64::from(self.size_bytes)
    }
}

/// What recovery found when the log was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The previous run did not shut down cleanly.
    pub unclean: bool,
    /// Where the scan started (the checkpoint).
    pub scanned_from: u64,
    /// Where the valid log ends: the next append's offset.
    pub end_offset: u64,
    /// Records checked after the checkpoint.
    pub records_scanned: u64,
    /// Bytes after the last valid record that were cut.
    pub truncated_bytes: u64,
    /// Why the scan stopped where it did; `None` when it reached the end of the data.
    pub stop_reason: Option<String>,
    /// How long recovery took: loading the checkpoint and checking the records after it.
    pub elapsed: Duration,
}

/// Touched only under the put-message lock.
pub(crate) struct WriteState {
    pub(crate) current: Option<Arc<MappedFile>>,
    pub(crate) write_offset: u64,
    /// Every topic-queue's next queue offset, and the topics changed since the checkpoint
    /// last took them (the next delta block's content, see `checkpoint.rs`).
    pub(crate) numbering: Numbering,
    /// On a replica: where the parse of the master's byte stream stands.
    pub(crate) replica: crate::replica::ReplicaCursor,
}

/// The checkpoint's files: the base's generation and size, the deltas written since, and the
/// changes taken from the log that no block holds yet.
#[derive(Default)]
pub(crate) struct CheckpointState {
    pub(crate) generation: u64,
    pub(crate) base_bytes: u64,
    pub(crate) delta_bytes: u64,
    /// Taken for a block that could not be written: the next block carries them.
    pub(crate) carried: Changes,
    /// The offset the last base or block claimed.
    pub(crate) written_end: u64,
    /// A block failed part-way and stays in the file: only a new base goes on from here.
    pub(crate) needs_base: bool,
}

impl CheckpointState {
    /// Writes a new base of every queue at `end` (durable by now); the deltas of the old one go.
    pub(crate) fn store_base(&mut self, dir: &Path, end: u64, queue_offsets: BTreeMap<QueueKey, i64>) -> Result<()> {
        let base = Checkpoint {
            flushed_offset: end,
            queue_offsets,
            generation: self.generation + 1,
        };
        base.store(dir)?;
        // A full snapshot takes every change: none is carried.
        *self = CheckpointState {
            generation: base.generation,
            base_bytes: base.approximate_bytes(),
            written_end: end,
            ..CheckpointState::default()
        };
        Ok(())
    }
}

/// The segment the allocator prepares next, handed to the appender at a roll.
#[derive(Default)]
pub(crate) struct NextSegment {
    /// Start offset of the segment the writer needs next.
    pub(crate) wanted: u64,
    pub(crate) ready: Option<Arc<MappedFile>>,
    /// Why the last attempt failed (a full disk, say); cleared by a success.
    pub(crate) error: Option<String>,
    pub(crate) error_was_disk_full: bool,
    pub(crate) error_at: Option<Instant>,
    /// Attempts finished; a waiting appender waits for this to move.
    pub(crate) attempts: u64,
    /// An appender waits for a new attempt despite the last error.
    pub(crate) retry_requested: bool,
}

/// A run of log bytes waiting for the writer thread: a record (or a batch), or a segment's
/// filler, whose logical end is the segment's end.
pub(crate) struct Staged {
    pub(crate) offset: u64,
    pub(crate) bytes: Bytes,
    pub(crate) end: u64,
}

#[derive(Default)]
pub(crate) struct Stage {
    pub(crate) items: std::collections::VecDeque<Staged>,
    /// Bytes staged and not yet written.
    pub(crate) bytes: usize,
}

/// How an append may wait.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocking {
    /// Never: hand back [`StoreError::WouldBlock`] instead.
    No,
    /// For the next segment, and through page faults.
    Yes,
}

pub(crate) struct Shared {
    pub(crate) config: CommitLogConfig,
    lock: Box<dyn PutMessageLock>,
    write: UnsafeCell<WriteState>,
    pub(crate) segments: RwLock<Vec<Arc<MappedFile>>>,
    /// End of what the writer thread has written into the page cache: what readers may see.
    pub(crate) published: AtomicU64,
    /// The same end, for tasks waiting for it (ASYNC_FLUSH sends).
    pub(crate) written: Arc<Watermark>,
    /// End of what is durable.
    pub(crate) flushed: Arc<Watermark>,
    /// Records handed to the writer thread, in log order.
    pub(crate) stage: Mutex<Stage>,
    /// Where the checkpoint's files stand (one writer at a time: the checkpointer, or open and
    /// close).
    pub(crate) checkpoint: Mutex<CheckpointState>,
    /// Signalled when the writer made room in the stage.
    pub(crate) stage_space: Condvar,
    pub(crate) writer_wakeup: Wakeup,
    /// A thread is writing staged records (see `writer.rs`).
    pub(crate) writing: AtomicBool,
    pub(crate) writable: AtomicBool,
    pub(crate) stats: CommitLogStats,
    pub(crate) next: Mutex<NextSegment>,
    pub(crate) next_changed: Condvar,
    pub(crate) allocator_wakeup: Wakeup,
    pub(crate) flusher_wakeup: Wakeup,
    pub(crate) checkpoint_wakeup: Wakeup,
    /// Told when more of the log becomes readable (the store's dispatcher).
    pub(crate) on_readable: OnceLock<Arc<dyn Fn() + Send + Sync>>,
    /// Told, on the thread that published it, each time the written end moves (a master's HA
    /// server, which sends new bytes to its slaves from there instead of waking a thread).
    pub(crate) on_written: OnceLock<Arc<dyn Fn() + Send + Sync>>,
    /// When set, readers see nothing past this watermark either (a master whose consumers may
    /// only read what every in-sync replica holds: RocketMQ's confirmOffset).
    pub(crate) reader_gate: OnceLock<Arc<Watermark>>,
    /// Threads stop; the flusher flushes what is published first.
    pub(crate) shutdown: AtomicBool,
    /// An ASYNC_FLUSH flush is wanted before the interval ends (the page-cache budget).
    pub(crate) flush_requested: AtomicBool,
    /// Threads stop at once, as in a crash (drop without close).
    pub(crate) abandon: AtomicBool,
}

// SAFETY: `write` is only accessed while holding `lock` (see `with_write_state`).
unsafe impl Sync for Shared {}

/// The commit log: appends, reads by offset, flushing and retention of its segments.
pub struct CommitLog {
    pub(crate) shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovery: RecoveryReport,
    closed: AtomicBool,
    /// Whether a segment (by its start offset) may leave the local disk: set when a cold tier
    /// holds the log's old segments, which then go only once the tier holds them.
    deletable: std::sync::OnceLock<RetentionGuard>,
}

/// Says whether the segment starting at an offset may be deleted locally.
pub type RetentionGuard = Arc<dyn Fn(u64) -> bool + Send + Sync>;

use petrel_kit::clock::now_ms;

impl Shared {
    /// Runs `f` on the write state under the put-message lock.
    pub(crate) fn with_write_state<R>(&self, f: impl FnOnce(&mut WriteState) -> R) -> R {
        let _guard = acquire(self.lock.as_ref());
        // SAFETY: the put-message lock is held, and this is the only way to reach `write`.
        f(unsafe { &mut *self.write.get() })
    }

    pub(crate) fn segment_at(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let segs = self.segments.read();
        let size = self.config.segment_size_bytes;
        let first = segs.first()?.start_offset();
        let idx = offset.checked_sub(first)? / size;
        segs.get(usize::try_from(idx).ok()?).cloned()
    }

    /// `(end, queue offsets)` at this moment, for a checkpoint's base.
    pub(crate) fn checkpoint_snapshot(&self) -> (u64, BTreeMap<QueueKey, i64>) {
        self.with_write_state(|w| (w.write_offset, w.numbering.snapshot()))
    }

    /// `(end, topics changed since the last call)` at this moment, for a delta block: under the
    /// put-message lock for as long as the changed topics take, not all of them.
    pub(crate) fn checkpoint_changes(&self) -> (u64, Changes) {
        self.with_write_state(|w| (w.write_offset, w.numbering.take_changes()))
    }

    /// Publishes a new written end (the writer thread) and wakes whoever follows it.
    pub(crate) fn publish(&self, end: u64) {
        self.published.store(end, Ordering::SeqCst);
        self.written.advance(end);
        match self.config.flush_mode {
            FlushMode::Sync => self.flusher_wakeup.wake(),
            FlushMode::Async => self.notify_readable(),
        }
    }

    /// Tells the written listener (a master's HA server) that the written end moved; called
    /// once the writer has also given the stage its room back, so that appenders waiting for
    /// room do not wait behind the listener's sends.
    pub(crate) fn notify_written(&self) {
        if let Some(f) = self.on_written.get() {
            f();
        }
    }

    pub(crate) fn notify_readable(&self) {
        if let Some(f) = self.on_readable.get() {
            f();
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.writable.load(Ordering::Acquire) {
            Ok(())
        } else if let Some(reason) = self.flushed.failure().or_else(|| self.written.failure()) {
            Err(StoreError::NotWritable(format!("an earlier write or flush failed: {reason}")))
        } else {
            Err(StoreError::NotWritable("the commit log is closed".into()))
        }
    }

    /// Makes room for `size` bytes at the write offset, rolling to the prepared segment (with a
    /// filler handed to the writer) if the current one cannot hold them plus a filler. Nothing
    /// changes when it fails.
    fn room_for(&self, w: &mut WriteState, size: u64, blocking: Blocking) -> Result<()> {
        let seg_size = self.config.segment_size_bytes;
        if size + BLANK_BYTES > seg_size {
            return Err(StoreError::RecordTooLarge {
                size_bytes: usize::try_from(size).unwrap_or(usize::MAX),
                segment_bytes: seg_size,
            });
        }
        if let Some(cur) = &w.current {
            let pos = w.write_offset - cur.start_offset();
            if pos + size + BLANK_BYTES <= seg_size {
                return Ok(());
            }
        }
        let next_start = match &w.current {
            Some(cur) => cur.start_offset() + seg_size,
            None => {
                assert_eq!(w.write_offset % seg_size, 0, "without a current segment the log ends on a boundary");
                w.write_offset
            }
        };
        let next = self.take_next_segment(next_start, blocking)?;
        if let Some(cur) = w.current.take() {
            let pos = w.write_offset - cur.start_offset();
            let remaining = seg_size - pos;
            assert!(remaining >= BLANK_BYTES, "every append leaves room for the filler");
            let mut filler = Vec::with_capacity(8);
            #[expect(
                clippy::cast_possible_truncation,
                reason = "remaining < segment size <= MAX_SEGMENT_BYTES (checked at open), so it fits i32"
            )]
            let remaining = remaining as i32;
            filler.extend_from_slice(&remaining.to_be_bytes());
            filler.extend_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
            let end = cur.start_offset() + seg_size;
            self.stage_one(Staged {
                offset: w.write_offset,
                bytes: Bytes::from(filler),
                end,
            });
            w.write_offset = end;
        }
        assert_eq!(
            next.start_offset(),
            w.write_offset,
            "the prepared segment starts where the log ends"
        );
        self.segments.write().push(next.clone());
        w.current = Some(next);
        self.allocator_wakeup.wake();
        Ok(())
    }

    /// Hands a run of bytes to the writer thread (under the put-message lock, in log order).
    pub(crate) fn stage_one(&self, item: Staged) {
        let mut stage = self.stage.lock();
        stage.bytes += item.bytes.len();
        stage.items.push_back(item);
    }

    /// Waits (blocking) or refuses (non-blocking) while the stage has no room for `size` more.
    pub(crate) fn wait_for_stage_room(&self, size: usize, blocking: Blocking) -> Result<()> {
        let mut stage = self.stage.lock();
        // An empty stage takes a run of any size, so one larger than the bound still goes.
        while stage.bytes > 0 && stage.bytes + size > self.config.max_staged_bytes {
            if blocking == Blocking::No {
                self.stats.appends_would_block.fetch_add(1, Ordering::Relaxed);
                return Err(StoreError::WouldBlock("the writer is behind by maxStagedBytes"));
            }
            if self.written.failure().is_some() || self.abandon.load(Ordering::Acquire) {
                return Err(StoreError::NotWritable("the writer stopped".into()));
            }
            self.stage_space.wait_for(&mut stage, Duration::from_millis(100));
        }
        Ok(())
    }

    /// The prepared segment starting at `start`; waits for the allocator when blocking.
    pub(crate) fn take_next_segment(&self, start: u64, blocking: Blocking) -> Result<Arc<MappedFile>> {
        let mut next = self.next.lock();
        assert_eq!(next.wanted, start, "the allocator prepares the segment the writer needs");
        let mut waited = false;
        loop {
            if let Some(seg) = next.ready.take_if(|s| s.start_offset() == start) {
                next.wanted = start + self.config.segment_size_bytes;
                return Ok(seg);
            }
            if blocking == Blocking::No {
                self.stats.appends_would_block.fetch_add(1, Ordering::Relaxed);
                self.allocator_wakeup.wake();
                return Err(StoreError::WouldBlock("the next segment is not prepared yet"));
            }
            if waited && let Some(e) = next.error.clone() {
                return Err(if next.error_was_disk_full {
                    StoreError::DiskFull {
                        path: self.config.dir.join(crate::mapped_file::segment_name(start)).display().to_string(),
                        size_bytes: self.config.segment_size_bytes,
                    }
                } else {
                    StoreError::NotWritable(e)
                });
            }
            if !waited {
                self.stats.roll_waits.fetch_add(1, Ordering::Relaxed);
            }
            let seen = next.attempts;
            next.retry_requested = true;
            self.allocator_wakeup.wake_always();
            while next.attempts == seen {
                self.next_changed.wait_for(&mut next, Duration::from_millis(100));
                if self.shutdown.load(Ordering::Acquire) || self.abandon.load(Ordering::Acquire) {
                    return Err(StoreError::NotWritable("the commit log is closing".into()));
                }
            }
            waited = true;
        }
    }

    /// Assigns offsets to pre-encoded records, patches them in, and hands the buffer to the
    /// writer thread — all under the put-message lock, with no copy and no system call. A
    /// record for light message queues (`lmq` not empty: one record) also gets its offset in
    /// each of them, appended to its properties.
    fn stage_records(
        &self,
        records: &mut BytesMut,
        mut spans: Vec<(usize, usize, usize)>,
        to: &Target<'_>,
        blocking: Blocking,
    ) -> Result<Vec<AppendResult>> {
        self.check_writable()?;
        assert!(
            to.lmq.is_empty() || spans.len() == 1,
            "light message queues are named by single records"
        );
        let total = records.len() + to.lmq.len() * petrel_protocol::lmq::MAX_OFFSET_TEXT_BYTES + 32;
        self.wait_for_stage_room(total, blocking)?;
        let results = self.with_write_state(|w| -> Result<Vec<AppendResult>> {
            let started = Instant::now();
            // With light queues, room for their offsets at their longest: they are taken (and
            // their text known) only once nothing can refuse the append.
            let lmq_bytes = if to.lmq.is_empty() {
                0
            } else {
                self.check_lmq_room(w, to.lmq)?;
                petrel_protocol::lmq::offsets_property_max_bytes(to.lmq.len())
            };
            self.room_for(w, (records.len() + lmq_bytes) as u64, blocking)?;
            if !to.lmq.is_empty() {
                let property = take_lmq_offsets(w, to.lmq);
                append_property(records, to.properties_len_at, property.as_bytes());
                spans[0].1 = records.len();
            }
            // What is written: the records as they are now, with the offsets' property.
            let total = records.len();
            let base = w.write_offset;
            let next = w.numbering.next_mut(to.topic, to.queue_id);
            let store_timestamp_ms = now_ms();
            let mut out = Vec::with_capacity(spans.len());
            for (i, &(at, size, ts_pos)) in spans.iter().enumerate() {
                let queue_offset = *next + i as i64;
                let physical_offset = base + at as u64;
                patch_record(
                    &mut records[at..at + size],
                    queue_offset,
                    physical_offset,
                    store_timestamp_ms,
                    ts_pos,
                );
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "split_records took every size from a positive i32 size field"
                )]
                let size_bytes = size as u32;
                out.push(AppendResult {
                    physical_offset,
                    size_bytes,
                    queue_offset,
                    store_timestamp_ms,
                });
            }
            *next += spans.len() as i64;
            let seg_start = base - base % self.config.segment_size_bytes;
            let half = seg_start + self.config.segment_size_bytes / 2;
            if base < half && base + total as u64 >= half {
                // Half way through the segment: time to prepare the next one.
                self.allocator_wakeup.wake();
            }
            w.write_offset += total as u64;
            // Counted before the writer can see them: a flush that covers them counts them.
            self.stats.appended_records.fetch_add(spans.len() as u64, Ordering::Release);
            self.stage_one(Staged {
                offset: base,
                bytes: std::mem::take(records).freeze(),
                end: w.write_offset,
            });
            #[expect(clippy::cast_possible_truncation, reason = "time under the lock; u64 nanoseconds last 584 years")]
            let append_ns = started.elapsed().as_nanos() as u64;
            self.stats.append_ns.record(append_ns);
            Ok(out)
        })?;
        // Outside the lock: write what is staged now, ours included, unless a write is under
        // way (its writer takes ours too).
        if !crate::writer::write_staged(self) {
            return Err(StoreError::NotWritable("writing the commit log failed".into()));
        }
        Ok(results)
    }
}

impl Shared {
    /// Refuses a record named to the light message queues `names` that would create more of
    /// them than `max_lmq_queues` allows (under the put-message lock, before anything is taken).
    fn check_lmq_room(&self, w: &WriteState, names: &[String]) -> Result<()> {
        let count = w.numbering.lmq_queues();
        // Room for every name as a new queue: nothing to look up (at a million queues each
        // lookup is a cache miss, and the append takes one per name anyway).
        if count + names.len() <= self.config.max_lmq_queues {
            return Ok(());
        }
        let lmq_id = petrel_protocol::lmq::LMQ_QUEUE_ID;
        let new = names.iter().filter(|n| w.numbering.get(n, lmq_id).is_none()).count();
        if new > 0 && count + new > self.config.max_lmq_queues {
            return Err(StoreError::LmqQueuesExceeded { count, new });
        }
        Ok(())
    }
}

/// Takes the next offset of each light message queue in `names` for the one record named to
/// them (a new queue starts at 0), and returns the `INNER_MULTI_QUEUE_OFFSET` property that
/// says them: one numbering lookup per name.
fn take_lmq_offsets(w: &mut WriteState, names: &[String]) -> String {
    let lmq_id = petrel_protocol::lmq::LMQ_QUEUE_ID;
    let numbering = &mut w.numbering;
    let property = petrel_protocol::lmq::offsets_property(names.iter().map(|name| {
        let next = numbering.next_mut(name, lmq_id);
        let taken = *next;
        *next += 1;
        taken
    }));
    assert!(
        property.len() <= petrel_protocol::lmq::offsets_property_max_bytes(names.len()),
        "the room checked before the append holds the offsets"
    );
    property
}

/// Where records go: their topic and queue, and the light message queues a single record
/// is also dispatched to (with where its properties' length field lies).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The topic the records are stored in.
    pub topic: &'a str,
    /// The queue within it.
    pub queue_id: i32,
    /// Light message queues (`%LMQ%…`, each named once) the one record is dispatched to too.
    pub lmq: &'a [String],
    /// Byte position of the record's properties length (set by [`CommitLog`] when `lmq` is
    /// not empty).
    properties_len_at: usize,
}

impl<'a> Target<'a> {
    /// Records for `topic` / `queue_id` only.
    #[must_use]
    pub fn queue(topic: &'a str, queue_id: i32) -> Target<'a> {
        Target {
            topic,
            queue_id,
            lmq: &[],
            properties_len_at: 0,
        }
    }

    /// One record for `topic` / `queue_id` and the light message queues `lmq`.
    #[must_use]
    pub fn with_lmq(topic: &'a str, queue_id: i32, lmq: &'a [String]) -> Target<'a> {
        Target {
            topic,
            queue_id,
            lmq,
            properties_len_at: 0,
        }
    }
}

/// Appends `property` (one encoded `name\u{1}value\u{2}`) to the properties of the record in
/// `record`, whose properties are its last bytes and whose length field is at `len_at`.
fn append_property(record: &mut BytesMut, len_at: usize, property: &[u8]) {
    let total = i32::from_be_bytes(record[0..4].try_into().expect("4 bytes"));
    let props = i16::from_be_bytes(record[len_at..len_at + 2].try_into().expect("2 bytes"));
    let grown_total = i32::try_from(total as usize + property.len()).expect("checked against the segment size");
    let grown_props = i16::try_from(props as usize + property.len()).expect("the sender's check leaves room for the offsets");
    record.extend_from_slice(property);
    record[0..4].copy_from_slice(&grown_total.to_be_bytes());
    record[len_at..len_at + 2].copy_from_slice(&grown_props.to_be_bytes());
}

/// The queue positions a record takes: its own queue's and, with light message queues on
/// (`lmq`), each one's its properties name (see [`petrel_protocol::lmq::dispatch_pairs`]).
pub(crate) fn positions<'a>(view: &RecordView<'a>, lmq: bool) -> impl Iterator<Item = (&'a str, i32, i64)> + use<'a> {
    let lmq_pairs = if lmq && petrel_protocol::lmq::topic_allows_lmq(view.topic) {
        petrel_protocol::lmq::dispatch_pairs(view.properties)
    } else {
        Vec::new()
    };
    std::iter::once((view.topic, view.queue_id, view.queue_offset)).chain(
        lmq_pairs
            .into_iter()
            .map(|(name, offset)| (name, petrel_protocol::lmq::LMQ_QUEUE_ID, offset)),
    )
}

/// Splits a buffer of back-to-back records into `(start, size, store-timestamp position)`,
/// checking each record's frame.
fn split_records(records: &[u8]) -> Result<Vec<(usize, usize, usize)>> {
    let mut spans = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let size = records
            .get(at..at + 4)
            .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
            .filter(|n| *n > 0 && at + *n as usize <= records.len())
            .ok_or_else(|| StoreError::BadRecord(format!("batch record at byte {at} overruns the batch")))? as usize;
        check_record_frame(&records[at..at + size])?;
        let sys_flag = i32::from_be_bytes(records[at + 36..at + 40].try_into().expect("4 bytes"));
        spans.push((at, size, store_timestamp_pos(sys_flag)));
        at += size;
    }
    Ok(spans)
}

impl CommitLog {
    /// Opens (creating if needed) the commit log in `config.dir`, recovering it first.
    pub fn open(config: CommitLogConfig) -> Result<CommitLog> {
        assert!(
            config.segment_size_bytes > 2 * BLANK_BYTES,
            "segments must hold at least a record and a filler"
        );
        if config.segment_size_bytes > MAX_SEGMENT_BYTES {
            return Err(StoreError::Layout {
                path: config.dir.display().to_string(),
                reason: format!(
                    "segment size {} exceeds {MAX_SEGMENT_BYTES} bytes, the most a segment's filler can record",
                    config.segment_size_bytes
                ),
            });
        }
        petrel_kit::fs::create_dir_durably(&config.dir).map_err(|e| StoreError::io(&config.dir, e))?;
        let unclean = mark_running(&config.dir)?;
        crate::mapped_file::remove_partial_segments(&config.dir)?;
        let started = Instant::now();
        let checkpoint = Checkpoint::load(&config.dir)?;
        let generation = checkpoint.as_ref().map_or(0, |c| c.generation);
        let (queue_offsets, mut report) = recover(&config, &load_segments(&config.dir, config.segment_size_bytes)?, checkpoint)?;
        report.unclean = unclean;
        report.elapsed = started.elapsed();
        tracing::info!(
            unclean,
            from = report.scanned_from,
            to = report.end_offset,
            records = report.records_scanned,
            truncated_bytes = report.truncated_bytes,
            stop = report.stop_reason.as_deref().unwrap_or("end of data"),
            elapsed_ms = u64::try_from(report.elapsed.as_millis()).unwrap_or(u64::MAX),
            "commit log recovered"
        );
        let shared = Arc::new(Self::shared_after_recovery(config, &queue_offsets, report.end_offset, generation)?);
        // The base is written from what recovery found, which the numbering was just built
        // from and no append has changed yet (the threads start below): a snapshot of the
        // numbering would copy and sort every queue's name again, about a third of a start
        // at a million queues.
        Self::write_base(&shared, &mut shared.checkpoint.lock(), report.end_offset, queue_offsets)?;
        let threads = crate::flusher::spawn_threads(&shared)?;
        Ok(CommitLog {
            shared,
            threads: Mutex::new(threads),
            recovery: report,
            closed: AtomicBool::new(false),
            deletable: std::sync::OnceLock::new(),
        })
    }

    fn shared_after_recovery(
        config: CommitLogConfig,
        queue_offsets: &BTreeMap<QueueKey, i64>,
        end: u64,
        generation: u64,
    ) -> Result<Shared> {
        // Recovery deleted what it cut; map what is left.
        let kept = load_segments(&config.dir, config.segment_size_bytes)?;
        let size = config.segment_size_bytes;
        let current = kept
            .iter()
            .find(|s| s.start_offset() <= end && end < s.start_offset() + size)
            .cloned();
        let wanted = current.as_ref().map_or(end - end % size, |c| c.start_offset() + size);
        Ok(Shared {
            lock: new_lock(config.lock, DEFAULT_BACKOFF_K, AdaptiveConfig::default()),
            write: UnsafeCell::new(WriteState {
                current,
                write_offset: end,
                numbering: Numbering::recovered(queue_offsets),
                replica: crate::replica::ReplicaCursor::at(end),
            }),
            segments: RwLock::new(kept),
            published: AtomicU64::new(end),
            written: Watermark::new("written", end, config.max_flush_waiters.max(1)),
            flushed: Watermark::new("flushed", end, config.max_flush_waiters.max(1)),
            stage: Mutex::new(Stage::default()),
            stage_space: Condvar::new(),
            writer_wakeup: Wakeup::default(),
            writing: AtomicBool::new(false),
            writable: AtomicBool::new(true),
            stats: CommitLogStats::default(),
            next: Mutex::new(NextSegment {
                wanted,
                ..NextSegment::default()
            }),
            next_changed: Condvar::new(),
            allocator_wakeup: Wakeup::default(),
            flusher_wakeup: Wakeup::default(),
            checkpoint_wakeup: Wakeup::default(),
            checkpoint: Mutex::new(CheckpointState {
                generation,
                ..CheckpointState::default()
            }),
            on_readable: OnceLock::new(),
            on_written: OnceLock::new(),
            reader_gate: OnceLock::new(),
            shutdown: AtomicBool::new(false),
            flush_requested: AtomicBool::new(false),
            abandon: AtomicBool::new(false),
            config,
        })
    }

    /// Flushes what is published and writes the checkpoint that now holds (used at open and
    /// close, when no flusher runs).
    fn write_checkpoint(s: &Shared) -> Result<()> {
        // Held across the snapshot: a delta block taken before it is never written after it.
        let mut state = s.checkpoint.lock();
        let (end, queue_offsets) = s.checkpoint_snapshot();
        Self::write_base(s, &mut state, end, queue_offsets)
    }

    /// Flushes what is published and writes `queue_offsets` as the base at `end`: the
    /// numbering's state there, which the caller vouches for.
    fn write_base(s: &Shared, state: &mut CheckpointState, end: u64, queue_offsets: BTreeMap<QueueKey, i64>) -> Result<()> {
        crate::flusher::flush_published(s)?;
        assert!(s.flushed.get() >= end, "a checkpoint never claims more than is durable");
        state.store_base(&s.config.dir, end, queue_offsets)
    }

    /// What recovery found when the log was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The configuration the log was opened with.
    pub fn config(&self) -> &CommitLogConfig {
        &self.shared.config
    }

    /// The put-message lock's live statistics.
    pub fn lock_snapshot(&self) -> petrel_lock::LockSnapshot {
        self.shared.lock.snapshot()
    }

    /// The append and flush stages' statistics.
    pub fn stats(&self) -> &CommitLogStats {
        &self.shared.stats
    }

    /// The durable end of the log; SYNC_FLUSH sends wait on it.
    pub fn flushed_watermark(&self) -> &Arc<Watermark> {
        &self.shared.flushed
    }

    /// Registers what a segment must pass before retention deletes it (once; later calls are
    /// ignored): with a cold tier, that the tier holds it. A segment that does not pass stays,
    /// and so do the ones after it (the log is deleted oldest first), whatever their age or the
    /// disk's fill.
    pub fn set_retention_guard(&self, guard: RetentionGuard) {
        let _ = self.deletable.set(guard);
    }

    /// Registers what runs when more of the log becomes readable (once; later calls are ignored).
    pub fn set_readable_listener(&self, f: Arc<dyn Fn() + Send + Sync>) {
        let _ = self.shared.on_readable.set(f);
    }

    /// Registers what runs each time the written end moves, on the thread that moved it. It
    /// must not block: it runs on the append path. Only the first call registers; it returns
    /// whether this one did.
    pub fn set_written_listener(&self, f: Arc<dyn Fn() + Send + Sync>) -> bool {
        self.shared.on_written.set(f).is_ok()
    }

    /// The end of what is written into the page cache (readable, and what ASYNC_FLUSH sends
    /// wait for).
    pub fn written_watermark(&self) -> &Arc<Watermark> {
        &self.shared.written
    }

    /// Appends pre-encoded records of `topic`/`queue_id` (one, or a batch back to back) without
    /// blocking and without copying them: assigns the queue offsets, the physical offsets and
    /// the store timestamp, patches them in, and hands the buffer to the writer thread. The
    /// records are readable once [`CommitLog::written_watermark`] passes their end, durable once
    /// [`CommitLog::flushed_watermark`] does. The records' size, magic and CRC are the
    /// caller's (encoded before any lock). A batch gets consecutive queue offsets and lands
    /// contiguously in one segment (all or none). When the next segment is not prepared yet or
    /// the writer is behind by `max_staged_bytes`, nothing changes and
    /// [`StoreError::WouldBlock`] says to call [`CommitLog::append_owned`] off the async runtime.
    pub fn try_append_owned(&self, records: &mut BytesMut, topic: &str, queue_id: i32) -> Result<Vec<AppendResult>> {
        self.stage(records, Target::queue(topic, queue_id), Blocking::No)
    }

    /// [`CommitLog::try_append_owned`] that may block for the next segment or for room.
    pub fn append_owned(&self, records: &mut BytesMut, topic: &str, queue_id: i32) -> Result<Vec<AppendResult>> {
        self.stage(records, Target::queue(topic, queue_id), Blocking::Yes)
    }

    /// [`CommitLog::try_append_owned`] to a [`Target`]: with light message queues, the one
    /// record gets `INNER_MULTI_QUEUE_OFFSET` appended to its properties, so its size grows by
    /// at most [`petrel_protocol::lmq::offsets_property_max_bytes`].
    pub fn try_append_to(&self, records: &mut BytesMut, to: Target<'_>) -> Result<Vec<AppendResult>> {
        self.stage(records, to, Blocking::No)
    }

    /// [`CommitLog::try_append_to`] that may block for the next segment or for room.
    pub fn append_to(&self, records: &mut BytesMut, to: Target<'_>) -> Result<Vec<AppendResult>> {
        self.stage(records, to, Blocking::Yes)
    }

    fn stage(&self, records: &mut BytesMut, mut to: Target<'_>, blocking: Blocking) -> Result<Vec<AppendResult>> {
        // Split and check every record before taking the lock.
        let spans = split_records(records)?;
        if spans.is_empty() {
            return Ok(Vec::new());
        }
        if !to.lmq.is_empty() {
            to.properties_len_at = self.lmq_checks(records, &spans, to.lmq)?;
        }
        self.shared.stage_records(records, spans, &to, blocking)
    }

    /// Checks a record named to light message queues before the lock: LMQs are on, it is one
    /// record, its properties have room for the offsets, and each name is an LMQ named once.
    /// Returns where its properties' length field is.
    fn lmq_checks(&self, records: &[u8], spans: &[(usize, usize, usize)], names: &[String]) -> Result<usize> {
        if !self.shared.config.lmq {
            return Err(StoreError::BadRecord("light message queues are off (enableLmq=false)".into()));
        }
        if spans.len() != 1 {
            return Err(StoreError::BadRecord("a batch cannot name light message queues".into()));
        }
        for (i, name) in names.iter().enumerate() {
            if !petrel_protocol::lmq::is_lmq(name) || names[..i].contains(name) {
                return Err(StoreError::BadRecord(format!("{name} is not a light message queue named once")));
            }
        }
        let view = RecordView::parse(records).map_err(|e| StoreError::BadRecord(e.to_string()))?;
        let room = petrel_protocol::properties::MAX_PROPERTIES_BYTES.saturating_sub(view.properties.len());
        if room < petrel_protocol::lmq::offsets_property_max_bytes(names.len()) {
            return Err(StoreError::BadRecord(format!(
                "no room in the properties for the offsets of {} light message queues",
                names.len()
            )));
        }
        Ok(view.size_bytes - view.properties.len() - 2)
    }

    /// Forgets light message queue `name` if its next offset is still `next` (nothing was
    /// appended to it since the caller looked), running `then` under the put-message lock once
    /// it is forgotten; the queue's next message starts it again at offset 0, as RocketMQ's
    /// does after its queue is cleaned. Returns whether it was forgotten.
    pub(crate) fn forget_light_queue(&self, name: &str, next: i64, then: impl FnOnce()) -> bool {
        assert!(petrel_protocol::lmq::is_lmq(name), "only light message queues are forgotten");
        self.shared.with_write_state(|w| {
            if w.numbering.get(name, petrel_protocol::lmq::LMQ_QUEUE_ID) != Some(next) {
                return false;
            }
            // The next delta block says it went.
            w.numbering.forget(name);
            then();
            true
        })
    }

    /// The queue offset the log gives `topic` / `queue_id`'s next record; 0 for a queue it
    /// does not number (never seen, or forgotten).
    pub(crate) fn next_queue_offset_of(&self, topic: &str, queue_id: i32) -> i64 {
        self.shared.with_write_state(|w| w.numbering.get(topic, queue_id)).unwrap_or(0)
    }

    /// How many light message queues the log numbers now.
    #[must_use]
    pub fn light_queue_count(&self) -> usize {
        self.shared.with_write_state(|w| w.numbering.lmq_queues())
    }

    /// Appends one record (a copy of `record`, which is patched in place too) and waits,
    /// blocking this thread, until it is written (readable). For threads and tools.
    pub fn append(&self, record: &mut [u8], topic: &str, queue_id: i32) -> Result<AppendResult> {
        let mut results = self.append_batch(record, topic, queue_id)?;
        Ok(results.remove(0))
    }

    /// [`CommitLog::append`] for a batch of records back to back.
    pub fn append_batch(&self, records: &mut [u8], topic: &str, queue_id: i32) -> Result<Vec<AppendResult>> {
        let results = self.append_owned(&mut BytesMut::from(&records[..]), topic, queue_id)?;
        let spans = split_records(records)?;
        for (r, &(at, size, ts_pos)) in results.iter().zip(&spans) {
            patch_record(
                &mut records[at..at + size],
                r.queue_offset,
                r.physical_offset,
                r.store_timestamp_ms,
                ts_pos,
            );
        }
        if let Some(last) = results.last() {
            self.wait_written(last.end_offset())?;
        }
        Ok(results)
    }

    /// [`CommitLog::append`], then waits (blocking this thread) until the record is durable.
    pub fn append_durable(&self, record: &mut [u8], topic: &str, queue_id: i32) -> Result<AppendResult> {
        let result = self.append(record, topic, queue_id)?;
        self.wait_durable(result.end_offset())?;
        Ok(result)
    }

    /// Blocks until everything below `end` is written (readable).
    pub fn wait_written(&self, end: u64) -> Result<()> {
        let timeout = self.shared.config.sync_flush_timeout.max(Duration::from_secs(30));
        self.shared.written.wait_blocking(end, timeout).map_err(|e| match e {
            WaitError::Failed(reason) => StoreError::NotWritable(reason.to_string()),
            other => StoreError::NotWritable(other.to_string()),
        })
    }

    /// Blocks until everything below `end` is durable, or the SYNC_FLUSH timeout passes.
    pub fn wait_durable(&self, end: u64) -> Result<()> {
        let timeout = self.shared.config.sync_flush_timeout;
        self.shared.flushed.wait_blocking(end, timeout).map_err(|e| match e {
            WaitError::TimedOut { .. } => StoreError::FlushTimeout {
                offset: end,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            },
            WaitError::Failed(reason) => StoreError::FlushFailed(reason.to_string()),
            WaitError::Busy { .. } => StoreError::NotWritable(e.to_string()),
        })
    }

    /// Offset after the last record written (and visible to readers under ASYNC_FLUSH).
    pub fn max_offset(&self) -> u64 {
        self.shared.published.load(Ordering::Acquire)
    }

    /// Offset below which everything is durable.
    pub fn flushed_offset(&self) -> u64 {
        self.shared.flushed.get()
    }

    /// What readers may see: the durable end under SYNC_FLUSH (consumers must never get a
    /// message that a crash could still take back), the written end under ASYNC_FLUSH, and never
    /// past the reader gate when one is set.
    pub fn readable_end(&self) -> u64 {
        let end = match self.shared.config.flush_mode {
            FlushMode::Sync => self.flushed_offset(),
            FlushMode::Async => self.max_offset(),
        };
        self.shared.reader_gate.get().map_or(end, |gate| end.min(gate.get()))
    }

    /// The reader gate, if one is set.
    #[must_use]
    pub fn reader_gate_mark(&self) -> Option<Arc<Watermark>> {
        self.shared.reader_gate.get().cloned()
    }

    /// Where the reader gate stands, if one is set.
    #[must_use]
    pub fn reader_gate(&self) -> Option<u64> {
        self.shared.reader_gate.get().map(|g| g.get())
    }

    /// From now on readers see nothing past `gate` either (set once; later calls are ignored).
    /// Whoever advances `gate` calls [`CommitLog::wake_readers`].
    pub fn gate_readers_on(&self, gate: Arc<Watermark>) {
        let _ = self.shared.reader_gate.set(gate);
    }

    /// Tells the readers (the dispatcher) that more of the log may be readable.
    pub fn wake_readers(&self) {
        self.shared.notify_readable();
    }

    /// The bytes of the record starting at `offset`, if it lies below
    /// [`CommitLog::readable_end`]; `f` sees them in place (no copy).
    pub fn with_record<R>(&self, offset: u64, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let end = self.readable_end();
        if offset + BLANK_BYTES > end {
            return None;
        }
        let seg = self.shared.segment_at(offset)?;
        let seg_size = self.shared.config.segment_size_bytes;
        let pos = offset - seg.start_offset();
        // Any offset may come from a client (VIEW_MESSAGE_BY_ID): everything read must lie in
        // this segment and below the readable end, and start like a message.
        if pos + BLANK_BYTES > seg_size {
            return None;
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "pos < segment size, and a segment is mapped whole, so its size fits usize"
        )]
        let pos = pos as usize;
        let head = seg.slice(pos, 8);
        let size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
        let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
        if (magic != MAGIC_CODE_V1 && magic != MAGIC_CODE_V2)
            || size <= 0
            || offset + size as u64 > end
            || pos as u64 + size as u64 > seg_size
        {
            return None;
        }
        Some(f(seg.slice(pos, size as usize)))
    }

    /// Why the readable bytes at `offset` cannot be a record: neither a record's header nor a
    /// segment's filler starts there, or the size it claims does not fit its segment. `None`
    /// when a record or a filler starts there, or when too little is readable to tell — a
    /// record whose end is not readable yet (a confirm offset inside it) is no fault; the
    /// reader waits for it.
    #[must_use]
    pub fn unreadable_reason(&self, offset: u64) -> Option<String> {
        if offset + BLANK_BYTES > self.readable_end() {
            return None;
        }
        let seg = self.shared.segment_at(offset)?;
        let seg_size = self.shared.config.segment_size_bytes;
        let pos = offset - seg.start_offset();
        if pos + BLANK_BYTES > seg_size {
            return None;
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "pos < segment size, and a segment is mapped whole, so its size fits usize"
        )]
        let head = seg.slice(pos as usize, 8);
        let size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
        let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
        if magic == BLANK_MAGIC_CODE {
            return None;
        }
        if magic != MAGIC_CODE_V1 && magic != MAGIC_CODE_V2 {
            return Some(format!("no record starts at offset {offset} (magic code {magic:#010x})"));
        }
        if size <= 0 || pos + size as u64 > seg_size {
            return Some(format!(
                "the record at offset {offset} claims {size} bytes, which its segment cannot hold"
            ));
        }
        None
    }

    /// The record starting at `offset`, if it lies below [`CommitLog::readable_end`].
    pub fn read_record(&self, offset: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.with_record(offset, <[u8]>::to_vec))
    }

    /// Offset of the record after the one at `offset` (skipping a segment's filler); with a
    /// size of 0, `offset` itself or, if a filler starts there, the next segment.
    pub fn next_record_offset(&self, offset: u64, size_bytes: u32) -> u64 {
        let next = offset + u64::from(size_bytes);
        let size = self.shared.config.segment_size_bytes;
        let seg_start = next - next % size;
        let pos = next - seg_start;
        if pos + BLANK_BYTES > size {
            return seg_start + size;
        }
        if let Some(seg) = self.shared.segment_at(next)
            && next + BLANK_BYTES <= self.max_offset()
        {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "pos < segment size, and a segment is mapped whole, so its size fits usize"
            )]
            let magic = i32::from_be_bytes(seg.slice(pos as usize + 4, 4).try_into().expect("4 bytes"));
            if magic == BLANK_MAGIC_CODE {
                return seg_start + size;
            }
        }
        next
    }

    /// Offset of the oldest record still stored (the first segment's start).
    pub fn min_offset(&self) -> u64 {
        self.shared.segments.read().first().map_or(0, |s| s.start_offset())
    }

    /// Fraction of the log's file system in use.
    pub fn disk_used_ratio(&self) -> Result<f64> {
        disk_used_ratio(&self.shared.config.dir)
    }

    /// Bytes in use on the log's file system (its size less its free blocks, those reserved for
    /// root counted free), as RocketMQ's `rocketmq_storage_size` reports.
    pub fn disk_used_bytes(&self) -> Result<u64> {
        let space = disk_space(&self.shared.config.dir)?;
        Ok(space.total.saturating_sub(space.free))
    }

    /// Deletes the oldest segments that lie wholly below `keep_from` (what consume queues and
    /// the flush still need) and are older than `file_reserved_time` — or, while the disk is
    /// fuller than `disk_max_used_ratio` (and `clean_forcibly` allows it), one such segment
    /// whatever its age. The segment being written is never deleted. Returns how many went.
    pub fn delete_expired(&self, keep_from: u64) -> Result<usize> {
        let s = &self.shared;
        let size = s.config.segment_size_bytes;
        let limit = keep_from.min(s.flushed.get());
        let disk_full = s.config.clean_forcibly && disk_used_ratio(&s.config.dir)? > s.config.disk_max_used_ratio;
        let mut deleted = 0;
        loop {
            let victim = {
                let segs = s.segments.read();
                let (Some(first), true) = (segs.first(), segs.len() > 1) else {
                    break;
                };
                if first.start_offset() + size > limit {
                    break;
                }
                let age = std::fs::metadata(first.path())
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .unwrap_or_default();
                if age < s.config.file_reserved_time && !(disk_full && deleted == 0) {
                    break;
                }
                first.clone()
            };
            // Asked outside the segments' lock: the guard may read the whole file and call the
            // tier, and a segment roll must not wait behind it.
            if self.deletable.get().is_some_and(|may| !may(victim.start_offset())) {
                // Not in the cold tier yet: kept until it is (the disk-full guard then
                // refuses sends rather than lose it).
                break;
            }
            {
                let mut segs = s.segments.write();
                if !segs.first().is_some_and(|f| Arc::ptr_eq(f, &victim)) || segs.len() < 2 {
                    // The log changed while the guard was asked: the next pass decides again.
                    break;
                }
                segs.retain(|x| !Arc::ptr_eq(x, &victim));
            }
            // Readers holding the Arc keep their mapping; the file's blocks go once they drop it.
            std::fs::remove_file(victim.path()).map_err(|e| StoreError::io(victim.path(), e))?;
            tracing::info!(segment = %victim.path().display(), disk_full, "deleted an expired commit-log segment");
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Flushes, writes the checkpoint, stops the store's threads, removes the prepared segment
    /// nobody used and the abort marker. Appends after this fail; a second call does nothing.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.shared.writable.store(false, Ordering::Release);
        self.stop_threads(false);
        if let Some(unused) = self.shared.next.lock().ready.take() {
            let path = unused.path().to_owned();
            drop(unused);
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        }
        if let Some(reason) = self.shared.flushed.failure() {
            return Err(StoreError::FlushFailed(reason.to_string()));
        }
        Self::write_checkpoint(&self.shared)?;
        mark_clean(&self.shared.config.dir)
    }

    /// The segments, oldest first.
    pub fn segments_snapshot(&self) -> Vec<Arc<MappedFile>> {
        self.shared.segments.read().clone()
    }

    /// Asks the flusher to flush now rather than at the end of its interval.
    pub fn request_flush(&self) {
        self.shared.flush_requested.store(true, Ordering::Release);
        self.shared.flusher_wakeup.wake_always();
    }

    /// Stops every thread at once, as a crash would, and fails whoever waits: for tests that
    /// model a power failure at this instant (see `power_loss`). Nothing is written after it
    /// returns; the log must then be dropped, not used.
    #[doc(hidden)]
    pub fn halt_as_if_crashed(&self) {
        self.shared.writable.store(false, Ordering::Release);
        self.stop_threads(true);
        self.shared.written.fail("halted");
        self.shared.flushed.fail("halted");
        self.shared.stage_space.notify_all();
    }

    fn stop_threads(&self, abandon: bool) {
        let s = &self.shared;
        if abandon {
            s.abandon.store(true, Ordering::Release);
        }
        s.shutdown.store(true, Ordering::Release);
        for w in [&s.writer_wakeup, &s.flusher_wakeup, &s.allocator_wakeup, &s.checkpoint_wakeup] {
            w.wake_always();
        }
        s.next_changed.notify_all();
        s.stage_space.notify_all();
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for CommitLog {
    /// Without `close` this behaves like a crash: no final flush or checkpoint, and the abort
    /// marker stays.
    fn drop(&mut self) {
        self.stop_threads(true);
    }
}

fn disk_used_ratio(dir: &Path) -> Result<f64> {
    let space = disk_space(dir)?;
    Ok(if space.total == 0 {
        0.0
    } else {
        1.0 - space.available as f64 / space.total as f64
    })
}

/// A file system's size, its free bytes, and the free bytes unprivileged writers may use.
struct DiskSpace {
    total: u64,
    free: u64,
    available: u64,
}

fn disk_space(dir: &Path) -> Result<DiskSpace> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|e| StoreError::io(dir, std::io::Error::other(e)))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid C string and a buffer statvfs fills on success.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(StoreError::io(dir, std::io::Error::last_os_error()));
    }
    // SAFETY: statvfs returned 0, so the struct is filled.
    let st = unsafe { st.assume_init() };
    let block_bytes = st.f_frsize;
    Ok(DiskSpace {
        total: st.f_blocks.saturating_mul(block_bytes),
        free: st.f_bfree.saturating_mul(block_bytes),
        available: st.f_bavail.saturating_mul(block_bytes),
    })
}

/// Writes the offsets assigned under the lock into a pre-encoded record.
fn patch_record(record: &mut [u8], queue_offset: i64, physical_offset: u64, store_timestamp_ms: i64, ts_pos: usize) {
    record[QUEUE_OFFSET_POS..QUEUE_OFFSET_POS + 8].copy_from_slice(&queue_offset.to_be_bytes());
    record[PHYSICAL_OFFSET_POS..PHYSICAL_OFFSET_POS + 8].copy_from_slice(&(physical_offset as i64).to_be_bytes());
    record[ts_pos..ts_pos + 8].copy_from_slice(&store_timestamp_ms.to_be_bytes());
}

/// The record's size word must equal its length and its magic must be a message magic.
fn check_record_frame(record: &[u8]) -> Result<()> {
    if record.len() < 88 {
        return Err(StoreError::BadRecord(format!(
            "{} bytes is shorter than a record header",
            record.len()
        )));
    }
    let size = i32::from_be_bytes(record[0..4].try_into().expect("4 bytes"));
    let magic = i32::from_be_bytes(record[4..8].try_into().expect("4 bytes"));
    if size as usize != record.len() {
        return Err(StoreError::BadRecord(format!("size field {size} but {} bytes", record.len())));
    }
    if magic != MAGIC_CODE_V1 && magic != MAGIC_CODE_V2 {
        return Err(StoreError::BadRecord(format!("magic {magic:#x}")));
    }
    Ok(())
}

/// `flushDiskType` in broker.conf.
impl petrel_kit::config::ConfigValue for FlushMode {
    const EXPECTED: &'static str = "ASYNC_FLUSH or SYNC_FLUSH";
    fn parse(raw: &str) -> Option<Self> {
        match raw {
            "ASYNC_FLUSH" => Some(FlushMode::Async),
            "SYNC_FLUSH" => Some(FlushMode::Sync),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            FlushMode::Async => "ASYNC_FLUSH",
            FlushMode::Sync => "SYNC_FLUSH",
        }
        .to_owned()
    }
}
