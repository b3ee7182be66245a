//! `CommitLog`: every message, appended in arrival order to fixed-size `MappedFile` segments in
//! RocketMQ's record layout, flushed by group commit (SYNC_FLUSH) or on an interval
//! (ASYNC_FLUSH), and recovered after a crash by checking each record after the checkpoint.
//!
//! Owns: offset assignment (physical and per-queue), segment rolling, the flush thread, the
//! checkpoint cadence and recovery. Must never: acknowledge a SYNC_FLUSH append before its bytes
//! are durable, hand out bytes past the durable point under SYNC_FLUSH, or do more under the
//! put-message lock than assign offsets, patch them into the pre-encoded record and copy it.

use std::cell::UnsafeCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex, RwLock};
use petrel_lock::{AdaptiveConfig, DEFAULT_BACKOFF_K, LockKind, PutMessageLock, acquire, new_lock};
use petrel_protocol::message::{
    BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2, MessageExt, PHYSICAL_OFFSET_POS, QUEUE_OFFSET_POS, store_timestamp_pos,
};

use crate::checkpoint::{Checkpoint, QueueKey, mark_clean, mark_running};
use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;

/// Bytes of the end-of-segment filler: `[i32 remaining][i32 BLANK_MAGIC_CODE]`.
const BLANK_BYTES: u64 = 8;

/// When an append counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// Answer after the record is durable; one flush covers every waiter (group commit).
    Sync,
    /// Answer after the copy; a background thread flushes on an interval.
    Async,
}

#[derive(Debug, Clone)]
pub struct CommitLogConfig {
    pub dir: PathBuf,
    /// Segment size (RocketMQ `mappedFileSizeCommitLog`, 1 GiB).
    pub segment_size_bytes: u64,
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
    /// Fault injection for tests: while set, every flush fails as if the disk returned EIO.
    #[doc(hidden)]
    pub inject_flush_failure: Option<Arc<AtomicBool>>,
}

impl CommitLogConfig {
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
            inject_flush_failure: None,
        }
    }
}

/// Where a record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    pub physical_offset: u64,
    pub size_bytes: u32,
    pub queue_offset: i64,
    pub store_timestamp_ms: i64,
}

/// What recovery found when the log was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The previous run did not shut down cleanly.
    pub unclean: bool,
    /// Where the scan started (the checkpoint) and where the valid log ends.
    pub scanned_from: u64,
    pub end_offset: u64,
    pub records_scanned: u64,
    /// Bytes after the last valid record that were cut, and why the scan stopped there.
    pub truncated_bytes: u64,
    pub stop_reason: Option<String>,
    pub elapsed: Duration,
}

/// Touched only under the put-message lock.
struct WriteState {
    current: Option<Arc<MappedFile>>,
    write_offset: u64,
    queue_offsets: HashMap<String, BTreeMap<i32, i64>>,
}

impl WriteState {
    /// The next queue offset of a topic-queue (allocating only for a queue seen the first time).
    fn next_queue_offset(&mut self, topic: &str, queue_id: i32) -> &mut i64 {
        if !self.queue_offsets.contains_key(topic) {
            self.queue_offsets.insert(topic.to_owned(), BTreeMap::new());
        }
        self.queue_offsets
            .get_mut(topic)
            .expect("inserted above")
            .entry(queue_id)
            .or_insert(0)
    }

    fn snapshot_queue_offsets(&self) -> BTreeMap<QueueKey, i64> {
        self.queue_offsets
            .iter()
            .flat_map(|(t, qs)| qs.iter().map(move |(q, n)| ((t.clone(), *q), *n)))
            .collect()
    }
}

#[derive(Default)]
struct FlushState {
    requested: u64,
    flushed: u64,
    error: Option<String>,
    shutdown: bool,
}

struct Shared {
    config: CommitLogConfig,
    lock: Box<dyn PutMessageLock>,
    write: UnsafeCell<WriteState>,
    segments: RwLock<Vec<Arc<MappedFile>>>,
    /// End of the last complete record (or filler) written.
    published: AtomicU64,
    flushed: AtomicU64,
    flush: Mutex<FlushState>,
    flush_wake: Condvar,
    flush_done: Condvar,
    writable: AtomicBool,
}

// SAFETY: `write` is only accessed while holding `lock` (see `with_write_state`).
unsafe impl Sync for Shared {}

pub struct CommitLog {
    shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    recovery: RecoveryReport,
    closed: AtomicBool,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Shared {
    /// Runs `f` on the write state under the put-message lock.
    fn with_write_state<R>(&self, f: impl FnOnce(&mut WriteState) -> R) -> R {
        let _guard = acquire(self.lock.as_ref());
        // SAFETY: the put-message lock is held, and this is the only way to reach `write`.
        f(unsafe { &mut *self.write.get() })
    }

    fn segment_at(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let segs = self.segments.read();
        let size = self.config.segment_size_bytes;
        let first = segs.first()?.start_offset();
        let idx = offset.checked_sub(first)? / size;
        segs.get(idx as usize).cloned()
    }

    /// Makes everything published durable; returns the new flushed offset.
    fn flush_published(&self) -> Result<u64> {
        if self.config.inject_flush_failure.as_ref().is_some_and(|f| f.load(Ordering::Acquire)) {
            return Err(StoreError::io(&self.config.dir, std::io::Error::from_raw_os_error(libc::EIO)));
        }
        let from = self.flushed.load(Ordering::Acquire);
        let to = self.published.load(Ordering::Acquire);
        if to > from {
            let size = self.config.segment_size_bytes;
            let segs: Vec<Arc<MappedFile>> = self.segments.read().clone();
            for seg in segs.iter().filter(|s| s.start_offset() + size > from && s.start_offset() < to) {
                let lo = from.saturating_sub(seg.start_offset()) as usize;
                let hi = (to - seg.start_offset()).min(size) as usize;
                seg.flush_range(lo, hi)?;
            }
            self.flushed.store(to, Ordering::Release);
        }
        Ok(to)
    }

    /// Flushes and returns the checkpoint that now holds (the outer error is a flush failure).
    fn flush_for_checkpoint(&self) -> Result<Checkpoint> {
        let (end, queue_offsets) = self.with_write_state(|w| (w.write_offset, w.snapshot_queue_offsets()));
        // Flushing now covers `end`: everything published when the snapshot was taken.
        let flushed = self.flush_published()?;
        debug_assert!(flushed >= end);
        Ok(Checkpoint {
            flushed_offset: end,
            queue_offsets,
        })
    }

    fn write_checkpoint(&self) -> Result<()> {
        self.flush_for_checkpoint()?.store(&self.config.dir)
    }

    fn fail_flush(&self, err: &StoreError) {
        tracing::error!(error = %err, "flush failed; refusing further appends");
        self.writable.store(false, Ordering::Release);
        let mut st = self.flush.lock();
        st.error = Some(err.to_string());
        self.flush_done.notify_all();
    }

    /// The flush thread: group commit for SYNC_FLUSH, an interval for ASYNC_FLUSH.
    fn flush_loop(self: Arc<Self>) {
        let mut last_checkpoint = Instant::now();
        loop {
            {
                let mut st = self.flush.lock();
                if st.shutdown {
                    return;
                }
                match self.config.flush_mode {
                    FlushMode::Sync => {
                        if st.requested <= st.flushed {
                            self.flush_wake.wait_for(&mut st, Duration::from_millis(10));
                        }
                    }
                    FlushMode::Async => {
                        self.flush_wake.wait_for(&mut st, self.config.async_flush_interval);
                    }
                }
                if st.shutdown {
                    return;
                }
                if st.error.is_some() {
                    continue;
                }
            }
            match self.flush_published() {
                Ok(flushed) => {
                    let mut st = self.flush.lock();
                    st.flushed = st.flushed.max(flushed);
                    self.flush_done.notify_all();
                }
                Err(e) => {
                    self.fail_flush(&e);
                    continue;
                }
            }
            if last_checkpoint.elapsed() >= self.config.checkpoint_interval {
                last_checkpoint = Instant::now();
                match self.flush_for_checkpoint() {
                    Err(e) => self.fail_flush(&e),
                    // A checkpoint that cannot be written (a full disk, say) only makes the next
                    // recovery scan further back; it is no reason to stop taking messages.
                    Ok(cp) => {
                        if let Err(e) = cp.store(&self.config.dir) {
                            tracing::warn!(error = %e, "checkpoint not written; recovery would start at the previous one");
                        }
                    }
                }
            }
        }
    }

    fn wait_flushed(&self, end: u64) -> Result<()> {
        let deadline = Instant::now() + self.config.sync_flush_timeout;
        let mut st = self.flush.lock();
        if st.requested < end {
            st.requested = end;
            self.flush_wake.notify_one();
        }
        loop {
            if let Some(e) = &st.error {
                return Err(StoreError::FlushFailed(e.clone()));
            }
            if st.flushed >= end {
                return Ok(());
            }
            if self.flush_done.wait_until(&mut st, deadline).timed_out() && st.flushed < end {
                return Err(StoreError::FlushTimeout {
                    offset: end,
                    timeout_ms: self.config.sync_flush_timeout.as_millis() as u64,
                });
            }
        }
    }
}

impl CommitLog {
    /// Opens (creating if needed) the commit log in `config.dir`, recovering it first.
    pub fn open(config: CommitLogConfig) -> Result<CommitLog> {
        assert!(
            config.segment_size_bytes > 2 * BLANK_BYTES,
            "segments must hold at least a record and a filler"
        );
        std::fs::create_dir_all(&config.dir).map_err(|e| StoreError::io(&config.dir, e))?;
        let unclean = mark_running(&config.dir)?;
        crate::mapped_file::remove_partial_segments(&config.dir)?;
        let started = Instant::now();
        let checkpoint = Checkpoint::load(&config.dir)?;
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
            elapsed_ms = report.elapsed.as_millis() as u64,
            "commit log recovered"
        );
        // Recovery deleted what it cut; map what is left.
        let kept = load_segments(&config.dir, config.segment_size_bytes)?;
        let end = report.end_offset;
        let size = config.segment_size_bytes;
        let mut by_topic: HashMap<String, BTreeMap<i32, i64>> = HashMap::new();
        for ((t, q), n) in queue_offsets {
            by_topic.entry(t).or_default().insert(q, n);
        }
        let state = WriteState {
            current: kept
                .iter()
                .find(|s| s.start_offset() <= end && end < s.start_offset() + size)
                .cloned(),
            write_offset: end,
            queue_offsets: by_topic,
        };
        let shared = Arc::new(Shared {
            lock: new_lock(config.lock, DEFAULT_BACKOFF_K, AdaptiveConfig::default()),
            write: UnsafeCell::new(state),
            segments: RwLock::new(kept),
            published: AtomicU64::new(end),
            flushed: AtomicU64::new(end),
            flush: Mutex::new(FlushState {
                requested: end,
                flushed: end,
                ..FlushState::default()
            }),
            flush_wake: Condvar::new(),
            flush_done: Condvar::new(),
            writable: AtomicBool::new(true),
            config,
        });
        shared.write_checkpoint()?;
        let worker = shared.clone();
        let flusher = std::thread::Builder::new()
            .name("commitlog-flush".into())
            .spawn(move || worker.flush_loop())
            .map_err(|e| StoreError::io(&shared.config.dir, e))?;
        Ok(CommitLog {
            shared,
            flusher: Mutex::new(Some(flusher)),
            recovery: report,
            closed: AtomicBool::new(false),
        })
    }

    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    pub fn config(&self) -> &CommitLogConfig {
        &self.shared.config
    }

    /// The put-message lock's live statistics.
    pub fn lock_snapshot(&self) -> petrel_lock::LockSnapshot {
        self.shared.lock.snapshot()
    }

    /// Appends one pre-encoded record of `topic`/`queue_id`. The record's size, magic and CRC
    /// are the caller's (encoded before any lock); this assigns the queue offset, the physical
    /// offset and the store timestamp, patches them in, copies the record, and — under
    /// SYNC_FLUSH — waits until it is durable.
    pub fn append(&self, record: &mut [u8], topic: &str, queue_id: i32) -> Result<AppendResult> {
        let s = &self.shared;
        if !s.writable.load(Ordering::Acquire) {
            return Err(StoreError::NotWritable("an earlier flush failed".into()));
        }
        check_record_frame(record)?;
        let size = record.len();
        let sys_flag = i32::from_be_bytes(record[36..40].try_into().expect("4 bytes"));
        let ts_pos = store_timestamp_pos(sys_flag);
        let result = s.with_write_state(|w| -> Result<AppendResult> {
            let (seg, pos) = room_for(s, w, size as u64)?;
            let physical_offset = w.write_offset;
            let next = w.next_queue_offset(topic, queue_id);
            let queue_offset = *next;
            let store_timestamp_ms = now_ms();
            patch_record(record, queue_offset, physical_offset, store_timestamp_ms, ts_pos);
            // SAFETY: under the put-message lock, past the published offset.
            unsafe { seg.write_at(pos, record) };
            *next += 1;
            w.write_offset += size as u64;
            s.published.store(w.write_offset, Ordering::Release);
            Ok(AppendResult {
                physical_offset,
                size_bytes: size as u32,
                queue_offset,
                store_timestamp_ms,
            })
        })?;
        if s.config.flush_mode == FlushMode::Sync {
            s.wait_flushed(result.physical_offset + size as u64)?;
        }
        Ok(result)
    }

    /// Appends a batch: `records` holds pre-encoded records back to back, all of `topic` /
    /// `queue_id`. They get consecutive queue offsets and land contiguously in one segment
    /// under one acquisition of the put-message lock (all or none); under SYNC_FLUSH the call
    /// returns once the whole batch is durable. Returns one result per record.
    pub fn append_batch(&self, records: &mut [u8], topic: &str, queue_id: i32) -> Result<Vec<AppendResult>> {
        let s = &self.shared;
        if !s.writable.load(Ordering::Acquire) {
            return Err(StoreError::NotWritable("an earlier flush failed".into()));
        }
        // Split and check every record before taking the lock.
        let mut spans = Vec::new();
        let mut at = 0;
        while at < records.len() {
            let size = records
                .get(at..at + 4)
                .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
                .filter(|n| *n > 0 && at + *n as usize <= records.len())
                .ok_or_else(|| StoreError::BadRecord(format!("batch record at byte {at} overruns the batch")))?
                as usize;
            check_record_frame(&records[at..at + size])?;
            let sys_flag = i32::from_be_bytes(records[at + 36..at + 40].try_into().expect("4 bytes"));
            spans.push((at, size, store_timestamp_pos(sys_flag)));
            at += size;
        }
        if spans.is_empty() {
            return Ok(Vec::new());
        }
        let total = records.len();
        let results = s.with_write_state(|w| -> Result<Vec<AppendResult>> {
            let (seg, pos) = room_for(s, w, total as u64)?;
            let base = w.write_offset;
            let next = w.next_queue_offset(topic, queue_id);
            let store_timestamp_ms = now_ms();
            let mut out = Vec::with_capacity(spans.len());
            for (i, (at, size, ts_pos)) in spans.iter().enumerate() {
                let queue_offset = *next + i as i64;
                let physical_offset = base + *at as u64;
                patch_record(
                    &mut records[*at..*at + *size],
                    queue_offset,
                    physical_offset,
                    store_timestamp_ms,
                    *ts_pos,
                );
                out.push(AppendResult {
                    physical_offset,
                    size_bytes: *size as u32,
                    queue_offset,
                    store_timestamp_ms,
                });
            }
            // SAFETY: under the put-message lock, past the published offset.
            unsafe { seg.write_at(pos, records) };
            *next += spans.len() as i64;
            w.write_offset += total as u64;
            s.published.store(w.write_offset, Ordering::Release);
            Ok(out)
        })?;
        if s.config.flush_mode == FlushMode::Sync {
            s.wait_flushed(results[0].physical_offset + total as u64)?;
        }
        Ok(results)
    }

    /// Offset after the last record written (and visible to readers under ASYNC_FLUSH).
    pub fn max_offset(&self) -> u64 {
        self.shared.published.load(Ordering::Acquire)
    }

    pub fn flushed_offset(&self) -> u64 {
        self.shared.flushed.load(Ordering::Acquire)
    }

    /// What readers may see: the durable end under SYNC_FLUSH (consumers must never get a
    /// message that a crash could still take back), the written end under ASYNC_FLUSH.
    pub fn readable_end(&self) -> u64 {
        match self.shared.config.flush_mode {
            FlushMode::Sync => self.flushed_offset(),
            FlushMode::Async => self.max_offset(),
        }
    }

    /// The record starting at `offset`, if it lies below [`CommitLog::readable_end`].
    pub fn read_record(&self, offset: u64) -> Result<Option<Vec<u8>>> {
        let end = self.readable_end();
        if offset + BLANK_BYTES > end {
            return Ok(None);
        }
        let Some(seg) = self.shared.segment_at(offset) else {
            return Ok(None);
        };
        let pos = (offset - seg.start_offset()) as usize;
        let head = seg.slice(pos, 8);
        let size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
        let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
        if magic == BLANK_MAGIC_CODE || size <= 0 || offset + size as u64 > end {
            return Ok(None);
        }
        Ok(Some(seg.slice(pos, size as usize).to_vec()))
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

    /// Deletes the oldest segments that lie wholly below `keep_from` (what consume queues and
    /// the flush still need) and are older than `file_reserved_time` — or, while the disk is
    /// fuller than `disk_max_used_ratio`, one such segment whatever its age. The segment being
    /// written is never deleted. Returns how many segments went.
    pub fn delete_expired(&self, keep_from: u64) -> Result<usize> {
        let s = &self.shared;
        let size = s.config.segment_size_bytes;
        let limit = keep_from.min(s.flushed.load(Ordering::Acquire));
        let disk_full = disk_used_ratio(&s.config.dir)? > s.config.disk_max_used_ratio;
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
            s.segments.write().retain(|x| !Arc::ptr_eq(x, &victim));
            // Readers holding the Arc keep their mapping; the file's blocks go once they drop it.
            std::fs::remove_file(victim.path()).map_err(|e| StoreError::io(victim.path(), e))?;
            tracing::info!(segment = %victim.path().display(), disk_full, "deleted an expired commit-log segment");
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Flushes, writes the checkpoint, stops the flush thread and removes the abort marker.
    /// Appends after this fail; a second call does nothing.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.shared.writable.store(false, Ordering::Release);
        self.shutdown_flusher();
        self.shared.write_checkpoint()?;
        mark_clean(&self.shared.config.dir)
    }

    fn shutdown_flusher(&self) {
        {
            let mut st = self.shared.flush.lock();
            st.shutdown = true;
            self.shared.flush_wake.notify_all();
        }
        if let Some(h) = self.flusher.lock().take() {
            let _ = h.join();
        }
    }
}

impl Drop for CommitLog {
    /// Without `close` this behaves like a crash: no final checkpoint, the abort marker stays.
    fn drop(&mut self) {
        self.shutdown_flusher();
    }
}

fn disk_used_ratio(dir: &Path) -> Result<f64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|e| StoreError::io(dir, std::io::Error::other(e)))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid C string and a buffer statvfs fills on success.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(StoreError::io(dir, std::io::Error::last_os_error()));
    }
    // SAFETY: statvfs returned 0, so the struct is filled.
    let st = unsafe { st.assume_init() };
    let total = st.f_blocks as f64;
    Ok(if total == 0.0 { 0.0 } else { 1.0 - st.f_bavail as f64 / total })
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

/// The segment and position for a record of `size` bytes, rolling (with a filler) if the
/// current segment cannot hold it plus a filler.
fn room_for(s: &Shared, w: &mut WriteState, size: u64) -> Result<(Arc<MappedFile>, usize)> {
    let seg_size = s.config.segment_size_bytes;
    if size + BLANK_BYTES > seg_size {
        return Err(StoreError::RecordTooLarge {
            size_bytes: size as usize,
            segment_bytes: seg_size,
        });
    }
    if let Some(cur) = &w.current {
        let pos = w.write_offset - cur.start_offset();
        if pos + size + BLANK_BYTES <= seg_size {
            return Ok((cur.clone(), pos as usize));
        }
        let remaining = seg_size - pos;
        debug_assert!(remaining >= BLANK_BYTES, "every append leaves room for the filler");
        let mut filler = [0u8; 8];
        filler[0..4].copy_from_slice(&(remaining as i32).to_be_bytes());
        filler[4..8].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
        // SAFETY: under the put-message lock, past the published offset.
        unsafe { cur.write_at(pos as usize, &filler) };
        w.write_offset = cur.start_offset() + seg_size;
        s.published.store(w.write_offset, Ordering::Release);
        w.current = None;
    }
    // A full disk fails here, before anything is written, and the next append tries again.
    let seg = Arc::new(MappedFile::create(&s.config.dir, w.write_offset, seg_size)?);
    s.segments.write().push(seg.clone());
    w.current = Some(seg.clone());
    Ok((seg, 0))
}

/// Opens every segment of `dir`, checking names, sizes and contiguity.
fn load_segments(dir: &Path, size: u64) -> Result<Vec<Arc<MappedFile>>> {
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))? {
        let path = entry.map_err(|e| StoreError::io(dir, e))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) {
            found.push((name.parse().expect("20 digits"), path));
        }
    }
    found.sort();
    let mut segs = Vec::with_capacity(found.len());
    for (i, (offset, path)) in found.iter().enumerate() {
        if offset % size != 0 || (i > 0 && *offset != found[i - 1].0 + size) {
            return Err(StoreError::Layout {
                path: path.display().to_string(),
                reason: format!("segment start {offset} is not contiguous with a segment size of {size}"),
            });
        }
        segs.push(Arc::new(MappedFile::open(path, *offset, size)?));
    }
    Ok(segs)
}

/// Scans from the checkpoint, validating each record, and cuts everything after the last valid
/// one. Only what follows the checkpoint is read, so the time does not grow with the log.
/// Appends are sequential, so bytes written past the recovered end are contiguous: once this
/// many zero bytes follow the last non-zero one, nothing further was written. Larger than any
/// single append (a frame is at most 16 MiB).
pub const TORN_TAIL_ZERO_RUN_BYTES: usize = 32 << 20;

/// Length of the non-zero region at the start of `tail` (up to its last non-zero byte), read
/// in chunks and bounded by [`TORN_TAIL_ZERO_RUN_BYTES`] of zeros, so a clean end costs a
/// bounded read instead of a scan of the whole segment.
fn torn_tail_len(tail: &[u8]) -> usize {
    const CHUNK: usize = 1 << 20;
    let mut end = 0;
    for (i, chunk) in tail.chunks(CHUNK).enumerate() {
        let at = i * CHUNK;
        if let Some(p) = chunk.iter().rposition(|b| *b != 0) {
            end = at + p + 1;
        } else if at + chunk.len() - end >= TORN_TAIL_ZERO_RUN_BYTES {
            break;
        }
    }
    end
}

fn recover(
    config: &CommitLogConfig,
    segments: &[Arc<MappedFile>],
    checkpoint: Option<Checkpoint>,
) -> Result<(BTreeMap<QueueKey, i64>, RecoveryReport)> {
    let size = config.segment_size_bytes;
    let first = segments.first().map_or(0, |s| s.start_offset());
    let segment_end = segments.last().map_or(0, |s| s.start_offset() + size);
    let checkpoint = checkpoint.filter(|c| c.flushed_offset >= first && c.flushed_offset <= segment_end);
    let (mut offset, mut queue_offsets) = match &checkpoint {
        Some(c) => (c.flushed_offset, c.queue_offsets.clone()),
        None => (first, BTreeMap::new()),
    };
    let mut report = RecoveryReport {
        scanned_from: offset,
        ..RecoveryReport::default()
    };
    let seg_for = |o: u64| -> Option<&Arc<MappedFile>> { segments.get((o.checked_sub(first)? / size) as usize) };
    while let Some(seg) = seg_for(offset) {
        let pos = (offset - seg.start_offset()) as usize;
        if pos as u64 + BLANK_BYTES > size {
            offset = seg.start_offset() + size;
            continue;
        }
        let head = seg.slice(pos, 8);
        let rec_size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
        let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
        if magic == BLANK_MAGIC_CODE && rec_size as u64 == size - pos as u64 {
            offset = seg.start_offset() + size;
            continue;
        }
        if rec_size == 0 && magic == 0 {
            break;
        }
        match MessageExt::decode_verified(seg.slice(pos, size as usize - pos)) {
            Ok((msg, used)) if used == rec_size as usize => {
                let next = queue_offsets.entry((msg.topic, msg.queue_id)).or_insert(0);
                *next = (*next).max(msg.queue_offset + 1);
                report.records_scanned += 1;
                offset += used as u64;
            }
            Ok(_) => {
                report.stop_reason = Some(format!("record at {offset}: size field disagrees with its fields"));
                break;
            }
            Err(e) => {
                report.stop_reason = Some(format!("record at {offset}: {e}"));
                break;
            }
        }
    }
    report.end_offset = offset;
    // Cut the torn tail: zero the rest of the segment holding the end, delete later segments.
    let keep_start = offset - (offset - first) % size;
    for seg in segments.iter().filter(|s| s.start_offset() + size > offset) {
        let start = seg.start_offset();
        let from = offset.saturating_sub(start) as usize;
        let torn = torn_tail_len(seg.slice(from, size as usize - from));
        report.truncated_bytes += torn as u64;
        if start > keep_start {
            std::fs::remove_file(seg.path()).map_err(|e| StoreError::io(seg.path(), e))?;
        } else if torn > 0 {
            // No writer or reader exists yet, so a second map of the file may write it.
            MappedFile::open(seg.path(), start, size)?.zero_range(from, from + torn)?;
        }
    }
    if report.truncated_bytes > 0 {
        tracing::warn!(offset, bytes = report.truncated_bytes, reason = ?report.stop_reason, "cut the commit log's torn tail");
    }
    Ok((queue_offsets, report))
}

#[cfg(test)]
mod torn_tail_tests {
    use super::*;

    #[test]
    fn torn_tail_ends_at_the_last_nonzero_byte_before_a_long_zero_run() {
        let mut tail = vec![0u8; TORN_TAIL_ZERO_RUN_BYTES + (8 << 20)];
        assert_eq!(torn_tail_len(&tail), 0);
        tail[10] = 1;
        tail[3 << 20] = 7; // a gap shorter than the run still belongs to the torn write
        assert_eq!(torn_tail_len(&tail), (3 << 20) + 1);
        let far = tail.len() - 1;
        tail[far] = 9; // past a full zero run: never written by this store, not scanned
        assert_eq!(torn_tail_len(&tail), (3 << 20) + 1);
    }
}
