//! `MessageStore`: the commit log plus the consume queues a dispatcher builds from it — what the
//! broker reads and writes.
//!
//! Owns: the dispatcher thread (commit log → consume queues, never past the readable end, so
//! under SYNC_FLUSH consumers never see a record a crash could take back; woken by the commit
//! log when more becomes readable after a quiet spell, polling every half millisecond while
//! records keep coming), the page-cache budget's thread (apart, so that its passes never delay
//! dispatch), queue reads with RocketMQ's pull statuses, offset lookups, and waiting for new
//! entries (long polling).
//! Must never: block an appender on the dispatcher, or let a queue entry point at a record that
//! recovery cut.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hashbrown::HashMap as QueueMap;
use parking_lot::{Condvar, Mutex, RwLock};
use petrel_protocol::message::RecordView;
use petrel_protocol::properties::{KEY_SEPARATOR, keys, property, tags_code};

use crate::checkpoint::{InlineQueueKey, QueueKey, QueueRef};
use crate::commit_log::{AppendResult, CommitLog, CommitLogConfig, Target};
use crate::consume_queue::{ConsumeQueue, CqAppend, CqEntry, PendingSyncs};
use crate::error::{Result, StoreError};
use crate::index::{IndexConfig, KeyIndex};
use crate::light_queue::{LightQueue, LightQueues};
use crate::queue::Queue;
use crate::wakeup::Wakeup;

/// Longest sleep of an idle dispatcher: new readable records wake it sooner; this bounds how
/// late the consume-queue flush and retention chores run when nothing is written.
const DISPATCH_IDLE_SLEEP: Duration = Duration::from_millis(100);

/// While records keep coming the dispatcher polls at this interval instead of asking to be
/// woken: a wake-up per publish (an unpark, a context switch, a batch of one) cost more CPU
/// per message than the whole append, and consumers do not notice half a millisecond.
const DISPATCH_BUSY_POLL: Duration = Duration::from_micros(500);

/// How long without new records before the dispatcher goes back to sleeping until woken.
const DISPATCH_BUSY_WINDOW: Duration = Duration::from_millis(50);

/// First and longest pause of a dispatcher stuck at a record it cannot read: it looks again,
/// doubling the pause, rather than spinning on it.
const DISPATCH_STALL_BACKOFF_MIN: Duration = Duration::from_millis(10);
const DISPATCH_STALL_BACKOFF_MAX: Duration = Duration::from_secs(1);

const DISPATCH_CHECKPOINT_FILE: &str = "dispatch_checkpoint";
/// The most commit log the dispatch checkpoint lags behind the dispatcher while light queue
/// tails wait for their ingestion: what a start after a crash re-dispatches, at most, beyond
/// one flush interval.
const MAX_LIGHT_CHECKPOINT_LAG_BYTES: u64 = 256 << 20;
/// Where the confirm offset stood at the last dispatch checkpoint (controller mode).
const CONFIRM_CHECKPOINT_FILE: &str = "confirm_checkpoint";

/// Where the store lives and how its commit log, consume queues, reads and index behave.
#[derive(Debug, Clone)]
pub struct MessageStoreConfig {
    /// `storePathRootDir`: holds `commitlog/`, `consumequeue/` and the checkpoints.
    pub root: PathBuf,
    /// The commit log's settings; its `dir` is replaced by `root/commitlog` at open.
    pub commit_log: CommitLogConfig,
    /// Entries per consume-queue segment (RocketMQ: 300,000, i.e. 6,000,000-byte files).
    pub cq_entries_per_segment: u64,
    /// How often consume queues are flushed and the dispatch point recorded.
    pub cq_flush_interval: Duration,
    /// Consume-queue entries one read may examine (RocketMQ `maxFilterMessageSize` / 20).
    pub max_scan_entries: usize,
    /// How often expired segments are looked for.
    pub retention_check_interval: Duration,
    /// Bytes one read returns at most (RocketMQ `maxTransferBytesOnMessageInMemory`, 256 KiB);
    /// the first message is returned whatever its size.
    pub max_transfer_bytes: usize,
    /// Resident bytes of the store's files held under this (see `page_cache.rs`); `None`: no
    /// budget.
    pub page_cache_budget_bytes: Option<u64>,
    /// Readers (the dispatcher, hence consumers) stop at a confirm offset that starts where
    /// dispatch resumes and that the owner advances (controller mode: what every in-sync
    /// replica holds). Set before the dispatcher starts, so that a tail written before a crash
    /// stays unread until it is confirmed — or cut.
    pub confirm_gate: bool,
    /// The key index for queries by key (`messageIndexEnable`); `None`: no index.
    pub index: Option<IndexConfig>,
    /// A cold tier below the log, in place from the store's first step (recovery's re-dispatch
    /// trims queues against it); `None`: none.
    pub cold: Option<ColdTier>,
}

/// A cold tier as the store sees it: where records below the local log are read, and what a
/// segment must pass before retention deletes it.
#[derive(Clone)]
pub struct ColdTier {
    /// Reads below the local log.
    pub log: Arc<dyn ColdLog>,
    /// Asked before a segment is deleted (see [`CommitLog::set_retention_guard`]).
    pub guard: crate::commit_log::RetentionGuard,
}

impl std::fmt::Debug for ColdTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ColdTier")
    }
}

impl MessageStoreConfig {
    /// RocketMQ's defaults for a store under `root`, with the key index on.
    pub fn new(root: impl Into<PathBuf>) -> MessageStoreConfig {
        let root = root.into();
        MessageStoreConfig {
            commit_log: CommitLogConfig::new(root.join("commitlog")),
            root,
            cq_entries_per_segment: 300_000,
            cq_flush_interval: Duration::from_secs(1),
            max_scan_entries: 800,
            retention_check_interval: Duration::from_secs(10),
            max_transfer_bytes: 256 * 1024,
            page_cache_budget_bytes: None,
            confirm_gate: false,
            index: Some(IndexConfig::default()),
            cold: None,
        }
    }
}

/// RocketMQ's `GetMessageStatus`: what a read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetStatus {
    /// At least one message was returned.
    Found,
    /// Entries were scanned but none was returned (the filter dropped them all).
    NoMatchedMessage,
    /// The queue is empty: its max offset is 0.
    NoMessageInQueue,
    /// The offset is the queue's max offset: nothing new yet.
    OffsetOverflowOne,
    /// The offset is past the queue's max offset.
    OffsetOverflowBadly,
    /// The offset is below the queue's min offset (retention removed it).
    OffsetTooSmall,
    /// The store has no such topic-queue.
    NoMatchedLogicQueue,
    /// The messages lie in the cold tier, which did not answer in time: try again later.
    ColdUnavailable,
    /// Never from the store: the broker's answer to a pull of a queue an admin reset.
    OffsetReset,
}

impl GetStatus {
    /// The name RocketMQ puts in a pull response's remark.
    pub fn name(self) -> &'static str {
        match self {
            GetStatus::Found => "FOUND",
            GetStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
            GetStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetStatus::ColdUnavailable => "COLD_TIER_UNAVAILABLE",
            GetStatus::OffsetReset => "OFFSET_RESET",
        }
    }
}

/// Which entries a read returns (a pull's subscription): decided first on the queue entry's tag
/// hash, then, for filters that need it, on the stored record's properties.
pub trait MessageFilter: Send + Sync {
    /// Whether an entry with this tag hash may match; `false` skips it without reading it.
    fn matches_tags_code(&self, tags_code: i64) -> bool;
    /// Whether the record must be read and [`matches_properties`](Self::matches_properties) asked.
    fn needs_properties(&self) -> bool {
        false
    }
    /// Whether the record with these encoded properties (`name\u{1}value\u{2}`…) matches.
    fn matches_properties(&self, _properties: &str) -> bool {
        true
    }
}

/// A tag filter: the hashes of the tags to keep.
impl MessageFilter for HashSet<i64> {
    fn matches_tags_code(&self, tags_code: i64) -> bool {
        self.contains(&tags_code)
    }
}

/// A read of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResult {
    /// What the read found.
    pub status: GetStatus,
    /// Stored records back to back, each exactly as in the commit log: a pull answer's body.
    pub body: Vec<u8>,
    /// Records in `body`.
    pub message_count: usize,
    /// Queue offset the next read should start at.
    pub next_begin_offset: i64,
    /// The queue's min offset at the time of the read.
    pub min_offset: i64,
    /// The queue's max offset (one past its last entry) at the time of the read.
    pub max_offset: i64,
}

/// Bytes one query by key returns at most (the first record whatever its size).
pub const MAX_QUERY_BYTES: usize = 4 << 20;

/// What a query by key found.
#[derive(Debug, Default)]
pub struct QueryResult {
    /// The records, back to back as stored: QUERY_MESSAGE's body.
    pub body: Vec<u8>,
    /// Records in `body`.
    pub count: usize,
    /// Where the index stands: just past its last record.
    pub index_end_offset: u64,
    /// Store time of the index's last record, in ms since the Unix epoch.
    pub index_end_ms: i64,
}

/// Which side of a timestamp to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The first message stored at or after the time.
    Lower,
    /// The last message stored at or before the time.
    Upper,
}

struct Inner {
    config: MessageStoreConfig,
    log: CommitLog,
    /// Queues on their own segments: every topic queue, and light queues of an older layout.
    queues: RwLock<QueueMap<InlineQueueKey, Arc<Queue>>>,
    /// The light queues' LSM, with `enableLmq` (see `light_queue.rs`).
    light: Option<Arc<LightQueues>>,
    /// Light queues in the LSM opened in this run: the others are only keys until first used.
    light_queues: RwLock<QueueMap<InlineQueueKey, Arc<Queue>>>,
    /// Where the pass over the LSM's queues not yet opened stands (a key prefix; empty: from
    /// the first).
    light_cursor: Mutex<Vec<u8>>,
    dispatched: AtomicU64,
    /// A dispatch point below which every light queue entry is durable (in the LSM): the
    /// dispatch checkpoint never passes it, so that a crash re-dispatches the tails.
    light_durable: AtomicU64,
    /// One retention pass at a time (the dispatcher's and an explicit call).
    retention: Mutex<()>,
    stop: AtomicBool,
    /// Bumped after every dispatched batch; waiters for new entries sleep on it.
    generation: Mutex<u64>,
    new_entries: Condvar,
    /// Told which queues got entries, once per dispatched batch (the broker's long polling).
    listener: RwLock<Option<DispatchListener>>,
    /// Where records below the local log's start are read from, if anywhere (a cold tier).
    cold: std::sync::OnceLock<Arc<dyn ColdLog>>,
    /// The oldest readable record at the last retention pass.
    retained: AtomicU64,
    /// Wakes the dispatcher when more of the log is readable.
    wakeup: Arc<Wakeup>,
    /// Queues whose consume queue could not be opened or written (EMFILE, `max_map_count`,
    /// ENOSPC): their records are skipped by dispatch and re-dispatched once the queue can be
    /// written again; sends to them are refused meanwhile. Other queues go on.
    broken: Mutex<QueueMap<QueueKey, BrokenQueue>>,
    /// `broken.len()`, read on every append without taking the lock.
    broken_count: AtomicU64,
    cache: crate::page_cache::PageCacheStats,
    /// Written by the dispatcher, read by queries.
    index: Option<Mutex<Indexer>>,
    /// Where the dispatcher is stuck, if it is: a record below the readable end that it cannot
    /// read. Consumers see nothing past it, so appends are refused while it lasts.
    stall: Mutex<Option<DispatchStall>>,
    /// `stall.is_some()`, read on every append without taking the lock.
    stalled: AtomicBool,
    /// Passes of the dispatcher over the log (each looks for new records once).
    dispatch_passes: AtomicU64,
    /// The highest offset readers could reach before this start, as the dispatch and confirm
    /// checkpoints recorded it.
    readable_before: u64,
    /// What the consume queues created without a sync (see [`ConsumeQueue`]), and, after an
    /// unclean stop, every consume-queue directory the last run may have left so: synced by
    /// each flush before its dispatch checkpoint.
    pending_syncs: Arc<PendingSyncs>,
}

/// Where and why the dispatcher stopped.
#[derive(Debug, Clone)]
pub struct DispatchStall {
    /// The commit-log offset of the record it cannot read.
    pub offset: u64,
    /// Why it cannot read it.
    pub reason: String,
    /// When it first got stuck there.
    pub since: Instant,
}

struct Indexer {
    index: KeyIndex,
    failures: crate::repeated::Repeated,
}

/// A queue dispatch had to skip.
struct BrokenQueue {
    /// Commit-log offset of the first record not in its consume queue.
    from: u64,
    reason: String,
}

/// A consume-queue directory moved aside to be removed (see
/// [`MessageStore::remove_expired_light_queues`]); no topic name begins with a dot.
const REMOVED_QUEUE_PREFIX: &str = ".removed-";

/// How often a broken queue is tried again.
const BROKEN_QUEUE_RETRY: Duration = Duration::from_secs(1);

/// Records the local log no longer holds, kept elsewhere (a cold tier): reads below the log's
/// start fall through to it, and consume-queue entries are kept down to its start.
pub trait ColdLog: Send + Sync {
    /// `len` bytes of the log at `offset` (one whole record).
    ///
    /// # Errors
    /// [`StoreError::ColdTier`] with whatever keeps the bytes from being read: the caller
    /// answers "retry later".
    fn read(&self, offset: u64, len: usize) -> Result<bytes::Bytes>;
    /// The oldest offset it holds, if any.
    fn min_offset(&self) -> Option<u64>;
    /// The largest record a read by bare commit-log offset fetches (a view by message id): its
    /// size comes from the bytes found there, which a crafted id can point anywhere, so without
    /// this bound one request could pull a whole segment from the object store into memory. A
    /// read through a queue entry carries the size the store wrote and needs no bound.
    fn max_record_bytes(&self) -> u64;
    /// Bytes its read cache holds now: the page-cache budget counts them with the store's files.
    fn cached_bytes(&self) -> u64;
}

/// Called on the dispatcher thread with each queue that got entries; must return quickly.
pub type DispatchListener = Arc<dyn Fn(&str, i32) + Send + Sync>;

/// The storage engine: the commit log, the consume queues dispatched from it, and the key index.
pub struct MessageStore {
    inner: Arc<Inner>,
    /// The dispatcher and, with a page-cache budget, the thread that keeps it.
    threads: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
}

pub(crate) fn read_dispatch_checkpoint(root: &Path) -> Option<u64> {
    read_offset_file(root, DISPATCH_CHECKPOINT_FILE)
}

/// An offset file: `offset crc`; `None` when missing or damaged.
fn read_offset_file(root: &Path, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(root.join(name)).ok()?;
    let (offset, crc) = text.trim().split_once(' ')?;
    (petrel_protocol::message::body_crc(offset.as_bytes()).to_string() == crc).then(|| offset.parse().ok())?
}

fn write_dispatch_checkpoint(root: &Path, offset: u64) -> Result<()> {
    write_offset_file(root, DISPATCH_CHECKPOINT_FILE, offset)
}

/// Writes an offset file whole (temporary file, fsync, rename, directory fsync).
fn write_offset_file(root: &Path, name: &str, offset: u64) -> Result<()> {
    let text = format!("{offset} {}\n", petrel_protocol::message::body_crc(offset.to_string().as_bytes()));
    let path = root.join(name);
    petrel_kit::fs::write_atomically(&path, text.as_bytes(), petrel_kit::fs::Mode::Default).map_err(|e| StoreError::io(&path, e))
}

impl Inner {
    fn cq_root(&self) -> PathBuf {
        self.config.root.join("consumequeue")
    }

    /// Whether a new queue of `topic` lives in the LSM: a light message queue, with `enableLmq`.
    fn in_lsm(&self, topic: &str) -> bool {
        self.light.is_some() && petrel_protocol::lmq::is_lmq(topic)
    }

    fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<Queue>> {
        let key = QueueRef(topic, queue_id);
        if self.in_lsm(topic) {
            if let Some(q) = self.light_queues.read().get(&key) {
                return Some(q.clone());
            }
            if let Some(q) = self.queues.read().get(&key) {
                return Some(q.clone());
            }
            // Not opened in this run: opened now if the LSM holds any key of it.
            let light = self.light.as_ref().expect("in_lsm");
            return match light.holds(topic, queue_id) {
                Ok(true) => self.queue_or_create(topic, queue_id).ok(),
                Ok(false) => None,
                Err(e) => {
                    tracing::error!(topic, queue_id, error = %e, "light queue unreadable");
                    None
                }
            };
        }
        self.queues.read().get(&key).cloned()
    }

    fn queue_or_create(&self, topic: &str, queue_id: i32) -> Result<Arc<Queue>> {
        let key = QueueRef(topic, queue_id);
        if let Some(q) = self.queues.read().get(&key) {
            return Ok(q.clone());
        }
        if let Some(light) = self.light.as_ref().filter(|_| self.in_lsm(topic)) {
            if let Some(q) = self.light_queues.read().get(&key) {
                return Ok(q.clone());
            }
            // Both read before the map's lock (the log's lock is never taken under it). Keys of
            // a queue not in the map are written by no one until it is, and go only under that
            // lock: a queue without keys now is new (one seek, and no numbering to ask for);
            // for one with keys, nothing numbered after this reaches the LSM before it is in
            // the map.
            let numbered_next = if light.holds(topic, queue_id)? {
                Some(self.log.next_queue_offset_of(topic, queue_id))
            } else {
                None
            };
            let q = {
                let mut queues = self.light_queues.write();
                if let Some(q) = queues.get(&key) {
                    return Ok(q.clone());
                }
                let q = match numbered_next {
                    Some(next) => LightQueue::open(light, topic, queue_id, next)?,
                    None => LightQueue::new_empty(light, topic, queue_id)?,
                };
                let q = Arc::new(Queue::Light(q));
                queues.insert((topic.into(), queue_id), q.clone());
                q
            };
            if numbered_next.is_some() {
                // Retention ran over the queues opened in earlier runs' memory, not over keys:
                // the entries of records it deleted go now, outside the map's lock (a long walk
                // for an idle queue must not hold back the others).
                q.delete_below(self.retained_min())?;
            }
            return Ok(q);
        }
        self.open_segments(topic, queue_id)
    }

    /// The queue on its own segments (every topic queue; a light queue of an older layout).
    fn open_segments(&self, topic: &str, queue_id: i32) -> Result<Arc<Queue>> {
        let key = QueueRef(topic, queue_id);
        let mut queues = self.queues.write();
        if let Some(q) = queues.get(&key) {
            return Ok(q.clone());
        }
        let q = Arc::new(Queue::Segments(Box::new(ConsumeQueue::open_with(
            &self.cq_root(),
            topic,
            queue_id,
            self.config.cq_entries_per_segment,
            self.log.max_offset(),
            self.pending_syncs.clone(),
        )?)));
        queues.insert((topic.into(), queue_id), q.clone());
        Ok(q)
    }

    /// Every queue opened in this run, on segments and in the LSM.
    fn opened_queues(&self) -> Vec<Arc<Queue>> {
        let mut all: Vec<Arc<Queue>> = self.queues.read().values().cloned().collect();
        all.extend(self.light_queues.read().values().cloned());
        all
    }

    /// Opens every queue the consume-queue directory holds (a queue that cannot be opened is
    /// marked broken from `from`), and finishes removals a stop interrupted. Returns every
    /// directory it went through, outermost first: the ones an unclean stop may have left unsynced.
    fn open_existing_queues(&self, from: u64) -> Result<Vec<PathBuf>> {
        let cq_root = self.cq_root();
        let mut dirs = Vec::new();
        let Ok(topics) = std::fs::read_dir(&cq_root) else { return Ok(dirs) };
        dirs.push(cq_root.clone());
        for topic in topics.flatten() {
            let Some(name) = topic.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with(REMOVED_QUEUE_PREFIX) {
                // A light queue being removed when the broker stopped: finish the removal.
                std::fs::remove_dir_all(topic.path()).map_err(|e| StoreError::io(topic.path(), e))?;
                continue;
            }
            dirs.push(topic.path());
            for qid in std::fs::read_dir(topic.path())
                .map_err(|e| StoreError::io(topic.path(), e))?
                .flatten()
            {
                dirs.push(qid.path());
                // A light queue's directory is of an older layout: served from its segments.
                if let Some(id) = qid.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
                    && let Err(e) = self.open_segments(&name, id)
                {
                    self.mark_broken(&name, id, from, &e);
                }
            }
        }
        Ok(dirs)
    }

    /// Puts one record's entry in its queue; `None` when the queue is (or just became) broken
    /// and the record was skipped.
    fn dispatch_one(&self, topic: &str, queue_id: i32, queue_offset: i64, entry: CqEntry) -> Option<CqAppend> {
        let key = QueueRef(topic, queue_id);
        if self.broken_count.load(Ordering::Acquire) > 0 && self.broken.lock().contains_key(&key) {
            return None;
        }
        match self.queue_or_create(topic, queue_id).and_then(|q| q.append(queue_offset, entry)) {
            Ok(a) => Some(a),
            Err(e) => {
                self.mark_broken(topic, queue_id, entry.commit_log_offset, &e);
                None
            }
        }
    }

    fn mark_broken(&self, topic: &str, queue_id: i32, from: u64, e: &StoreError) {
        tracing::error!(topic, queue_id, error = %e, "consume queue cannot be written; refusing sends to that queue until it can");
        let mut broken = self.broken.lock();
        broken.entry((topic.to_owned(), queue_id)).or_insert(BrokenQueue {
            from,
            reason: e.to_string(),
        });
        self.broken_count.store(broken.len() as u64, Ordering::Release);
    }

    /// Why sends to the queue are refused, if they are.
    fn queue_failure(&self, topic: &str, queue_id: i32) -> Option<String> {
        if self.broken_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.broken.lock().get(&QueueRef(topic, queue_id)).map(|b| b.reason.clone())
    }

    /// Tries every broken queue again: re-dispatches its records from where it broke up to the
    /// dispatch point, and takes it off the list when that works.
    fn retry_broken_queues(&self) {
        let keys: Vec<(QueueKey, u64)> = self.broken.lock().iter().map(|(k, b)| (k.clone(), b.from)).collect();
        for ((topic, queue_id), from) in keys {
            let to = self.dispatched.load(Ordering::Acquire);
            match self.redispatch_queue(&topic, queue_id, from, to) {
                Ok(n) => {
                    tracing::info!(topic, queue_id, entries = n, "consume queue writable again");
                    let mut broken = self.broken.lock();
                    broken.remove(&QueueRef(&topic, queue_id));
                    self.broken_count.store(broken.len() as u64, Ordering::Release);
                    drop(broken);
                    if let Some(listener) = self.listener.read().clone() {
                        listener(&topic, queue_id);
                    }
                }
                Err(e) => tracing::debug!(topic, queue_id, error = %e, "consume queue still cannot be written"),
            }
        }
    }

    /// Appends the entries of one queue's records in `[from, to)` of the log (a scan of the
    /// log: only after a queue broke, while its sends were refused).
    fn redispatch_queue(&self, topic: &str, queue_id: i32, from: u64, to: u64) -> Result<u64> {
        let q = self.queue_or_create(topic, queue_id)?;
        let mut offset = self.log.next_record_offset(from, 0);
        let mut count = 0;
        while offset < to {
            let Some(bytes) = self.log.read_record(offset)? else { break };
            let msg = RecordView::parse(&bytes).map_err(|e| StoreError::BadRecord(format!("at {offset}: {e}")))?;
            let size_bytes = u32::try_from(msg.size_bytes)
                .map_err(|_| StoreError::BadRecord(format!("at {offset}: a size of {} bytes", msg.size_bytes)))?;
            let at = crate::commit_log::positions(&msg, self.config.commit_log.lmq)
                .find(|&(t, q, _)| q == queue_id && t == topic)
                .map(|(_, _, o)| o);
            if let Some(queue_offset) = at {
                let entry = CqEntry {
                    commit_log_offset: offset,
                    size_bytes,
                    tags_code: tags_code(msg.tags()),
                };
                if q.append(queue_offset, entry)? == CqAppend::Appended {
                    count += 1;
                }
            }
            offset = self.log.next_record_offset(offset, size_bytes);
        }
        Ok(count)
    }

    /// The page-cache budget's own thread: a pass every [`crate::page_cache::KEEP_INTERVAL`]
    /// until the store stops. Not on the dispatcher: a pass measures every segment with
    /// `mincore` (several milliseconds for each 1 GiB segment) and releases ranges, and
    /// consumers would wait that long for new entries.
    fn page_cache_loop(&self, budget: u64) {
        let mut passes: u64 = 0;
        while !self.stop.load(Ordering::Acquire) {
            std::thread::park_timeout(crate::page_cache::KEEP_INTERVAL);
            if !self.stop.load(Ordering::Acquire) {
                self.keep_page_cache(budget, passes.is_multiple_of(crate::page_cache::FULL_PASS_EVERY));
                passes += 1;
            }
        }
    }

    /// One pass of the page-cache budget over the log's and the queues' segments; `whole`
    /// measures each file whole rather than up to its written end.
    fn keep_page_cache(&self, budget: u64, whole: bool) {
        let mut cq_cold = Vec::new();
        let mut cq_hot = Vec::new();
        for q in self.queues.read().values() {
            let mut segs = q.segments();
            if let Some(newest) = segs.pop() {
                // Entries are written in order: the newest segment holds them up to the
                // queue's end. That end is read after the snapshot, so a segment that has
                // filled since then is simply measured whole.
                let end_bytes = u64::try_from(q.max_offset()).unwrap_or(0) * crate::consume_queue::CQ_ENTRY_BYTES;
                let written = usize::try_from(end_bytes.saturating_sub(newest.start_offset())).unwrap_or(usize::MAX);
                cq_hot.push((newest, written));
            }
            cq_cold.extend(segs);
        }
        let files = crate::page_cache::Files {
            log: self.log.segments_snapshot(),
            segment_bytes: self.config.commit_log.segment_size_bytes,
            flushed: self.log.flushed_offset(),
            written: self.log.max_offset(),
            cq_cold,
            cq_hot,
            whole,
        };
        let tier_cache_bytes = self.cold.get().map_or(0, |c| c.cached_bytes());
        if crate::page_cache::keep(&self.cache, budget, tier_cache_bytes, &files) {
            self.log.request_flush();
        }
    }

    /// Where re-dispatch must start after a restart: the dispatch point, or the first record
    /// a broken queue still lacks.
    fn dispatch_restart_point(&self) -> u64 {
        let at = self.dispatched.load(Ordering::Acquire);
        self.broken.lock().values().map(|b| b.from).min().map_or(at, |f| f.min(at))
    }

    /// Dispatches every readable record not yet in a consume queue; returns how many.
    fn dispatch_available(&self) -> Result<u64> {
        // The filler that ends a segment may have been written after the last look.
        // A log that begins past 0 (a replica that joined late) starts its dispatch there.
        let from = self.dispatched.load(Ordering::Acquire).max(self.log.min_offset());
        let mut offset = self.log.next_record_offset(from, 0);
        let mut count = 0;
        // Bounded by the queues this pass touched: one entry each.
        let mut touched: HashMap<String, Vec<i32>> = HashMap::new();
        let lmq = self.config.commit_log.lmq;
        while let Some(bytes) = self.log.read_record(offset)? {
            if let Some(light) = self.light.as_ref().filter(|_| lmq) {
                // The light queues' tails are full while their LSM takes nothing: wait for it
                // (a stall, which refuses appends) rather than grow them, once this pass's
                // entries are announced.
                if let Err(e) = light.check_room() {
                    if count == 0 {
                        return Err(e);
                    }
                    break;
                }
            }
            // A view, not a decode: the dispatcher needs three fields of every record.
            let msg = RecordView::parse(&bytes).map_err(|e| StoreError::BadRecord(format!("at {offset}: {e}")))?;
            #[expect(
                clippy::cast_possible_truncation,
                reason = "RecordView takes size_bytes from the record's positive i32 TOTALSIZE"
            )]
            let used = msg.size_bytes as u32;
            self.index_record(&msg, offset);
            let entry = CqEntry {
                commit_log_offset: offset,
                size_bytes: used,
                tags_code: tags_code(msg.tags()),
            };
            // The record's own queue, then each light message queue it names.
            for (topic, queue_id, queue_offset) in crate::commit_log::positions(&msg, lmq) {
                if self.dispatch_one(topic, queue_id, queue_offset, entry) == Some(CqAppend::Appended) {
                    count += 1;
                    let queues = match touched.get_mut(topic) {
                        Some(queues) => queues,
                        None => touched.entry(topic.to_owned()).or_default(),
                    };
                    if !queues.contains(&queue_id) {
                        queues.push(queue_id);
                    }
                }
            }
            offset = self.log.next_record_offset(offset, used);
            self.dispatched.store(offset, Ordering::Release);
        }
        // Skip a trailing filler so the next look starts in the next segment.
        self.dispatched.store(offset, Ordering::Release);
        if count > 0 {
            *self.generation.lock() += 1;
            self.new_entries.notify_all();
            if let Some(listener) = self.listener.read().clone() {
                for (topic, queues) in &touched {
                    for queue_id in queues {
                        listener(topic, *queue_id);
                    }
                }
            }
        }
        Ok(count)
    }

    /// Adds `msg` (at `offset`) to the key index under its `UNIQ_KEY` and each of its `KEYS`.
    fn index_record(&self, msg: &RecordView<'_>, offset: u64) {
        let Some(indexer) = &self.index else {
            return;
        };
        let uniq = property(msg.properties, keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX);
        let keys = property(msg.properties, keys::KEYS)
            .into_iter()
            .flat_map(|k| k.split(KEY_SEPARATOR));
        let mut indexer = indexer.lock();
        let Indexer { index, failures } = &mut *indexer;
        match index.add(
            msg.topic,
            uniq.into_iter().chain(keys),
            offset,
            msg.size_bytes as u64,
            msg.store_timestamp,
        ) {
            Ok(()) => failures.succeeded(),
            Err(e) => failures.failed(&e),
        }
    }

    /// At open: dispatches what the log holds past the checkpoint (`from`) up to its end.
    fn catch_up(&self, from: u64, end: u64) -> Result<()> {
        let started = Instant::now();
        let redispatched = self.dispatch_available()?;
        if self.light.is_some() {
            // What the catch-up put in the light queues' tails goes to their LSM now, and the
            // checkpoint with it: a second crash does not redo it, and the tails start empty.
            if let Err(e) = self.flush_queues(true) {
                tracing::warn!(error = %e, "the light queues' catch-up not written yet; the flushes retry it");
            }
        }
        tracing::info!(
            from,
            to = end,
            entries = redispatched,
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "consume queues caught up"
        );
        Ok(())
    }

    /// Makes the consume queues durable and moves the dispatch checkpoint; `force` (a close)
    /// also writes every light queue's tail to the LSM, which otherwise goes when it is due.
    fn flush_queues(&self, force: bool) -> Result<()> {
        let at = self.dispatch_restart_point();
        // Every record below `at` was indexed before `at` was read: flushed here, its entries
        // are durable before the checkpoint says so.
        let upkeep = self.index.as_ref().map(|i| i.lock().index.upkeep()).unwrap_or_default();
        for u in upkeep {
            u.run()?;
        }
        let queues: Vec<Arc<Queue>> = self.queues.read().values().cloned().collect();
        for q in queues {
            q.flush()?;
        }
        // Each queue's flush synced what was pending; this covers a store without queues.
        self.pending_syncs.sync()?;
        // The light queues' entries, all at once: their tails, when due, and the journal.
        let checkpoint = match &self.light {
            Some(light) => {
                let lag = at.saturating_sub(self.light_durable.load(Ordering::Acquire));
                if light.settle(force || lag >= MAX_LIGHT_CHECKPOINT_LAG_BYTES)? {
                    self.light_durable.fetch_max(at, Ordering::AcqRel);
                }
                at.min(self.light_durable.load(Ordering::Acquire))
            }
            None => at,
        };
        // Before the dispatch point: the confirm offset is never below what consumers may have
        // read (`at`), so the file never claims less was confirmed than that. Without a reader
        // gate it is written only while the checkpoint lags behind `at`, for the same reason.
        match self.log.reader_gate() {
            Some(confirmed) => write_offset_file(&self.config.root, CONFIRM_CHECKPOINT_FILE, confirmed.max(at))?,
            None if checkpoint < at => write_offset_file(&self.config.root, CONFIRM_CHECKPOINT_FILE, at)?,
            None => {}
        }
        write_dispatch_checkpoint(&self.config.root, checkpoint)
    }

    /// The oldest record readable: the local log's start, or the cold tier's when it holds
    /// older ones. Consume-queue entries and index keys are kept down to it.
    fn retained_min(&self) -> u64 {
        let local = self.log.min_offset();
        self.cold.get().and_then(|c| c.min_offset()).map_or(local, |cold| cold.min(local))
    }

    /// The record at `offset` of `size` bytes from the cold tier, checked to be one. Only
    /// called with a cold tier set.
    fn cold_record(&self, offset: u64, size: u32) -> Result<bytes::Bytes> {
        let cold = self.cold.get().expect("a cold read is asked only of a store with a cold tier");
        let record = cold.read(offset, size as usize)?;
        let head = record.get(0..4).map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")));
        if head != Some(size) {
            return Err(StoreError::BadRecord(format!(
                "the cold tier's bytes at {offset} are not a record of {size} bytes"
            )));
        }
        Ok(record)
    }

    /// The record starting at `offset`: from the local log, or, below it, from the cold tier
    /// (checked as the local read checks: a record's magic, and a size its segment can hold).
    /// `Ok(None)` when no record starts there.
    fn record_anywhere(&self, offset: u64) -> Result<Option<Vec<u8>>> {
        if let Some(bytes) = self.log.read_record(offset)? {
            return Ok(Some(bytes));
        }
        match self.cold_record_anywhere(offset) {
            // Lost with its object: no record starts there any more.
            Err(StoreError::ColdLost { .. }) => Ok(None),
            other => other,
        }
    }

    /// [`Self::record_anywhere`] below the local log.
    fn cold_record_anywhere(&self, offset: u64) -> Result<Option<Vec<u8>>> {
        let Some(cold) = self.cold.get().filter(|_| offset < self.log.min_offset()) else {
            return Ok(None);
        };
        let segment_bytes = self.log.config().segment_size_bytes;
        let head = cold.read(offset, 8)?;
        if head.len() < 8 {
            return Ok(None);
        }
        let size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
        let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
        let fits = u64::try_from(size).is_ok_and(|s| s > 0 && s <= cold.max_record_bytes() && offset % segment_bytes + s <= segment_bytes);
        if !fits || (magic != petrel_protocol::message::MAGIC_CODE_V1 && magic != petrel_protocol::message::MAGIC_CODE_V2) {
            return Ok(None);
        }
        let size = u32::try_from(size).expect("positive, checked above");
        Ok(Some(self.cold_record(offset, size)?.to_vec()))
    }

    fn run_retention(&self) -> Result<usize> {
        let _one = self.retention.lock();
        let deleted = self.log.delete_expired(self.dispatched.load(Ordering::Acquire))?;
        // The cold tier's own retention moves the oldest readable record too.
        let retained = self.retained_min();
        if deleted > 0 || retained > self.retained.load(Ordering::Acquire) {
            let log_min = retained;
            for q in self.opened_queues() {
                q.delete_below(log_min)?;
            }
            if let Some(indexer) = &self.index {
                indexer.lock().index.delete_below(log_min)?;
            }
            // Recorded once every queue was trimmed: a failed trim is tried again next pass.
            self.retained.store(retained, Ordering::Release);
        }
        Ok(deleted)
    }

    fn dispatch_loop(self: Arc<Self>) {
        self.wakeup.register_current();
        let mut last_record = Instant::now();
        let mut last_retry = Instant::now();
        let mut backoff = DISPATCH_STALL_BACKOFF_MIN;
        let mut stall_log =
            crate::repeated::Repeated::new("dispatch is stuck: consumers see nothing past this record and appends are refused");
        while !self.stop.load(Ordering::Acquire) {
            if self.broken_count.load(Ordering::Acquire) > 0 && last_retry.elapsed() >= BROKEN_QUEUE_RETRY {
                last_retry = Instant::now();
                self.retry_broken_queues();
            }
            let seen_end = self.log.readable_end();
            self.dispatch_passes.fetch_add(1, Ordering::Relaxed);
            let result = self.dispatch_available();
            let at = self.dispatched.load(Ordering::Acquire);
            // Readable bytes that are no record (or a record that does not decode): the same
            // look would fail again at once, so back off instead of spinning on it.
            let stuck = match &result {
                Ok(0) if seen_end > at => self.log.unreadable_reason(at),
                Err(e) => Some(e.to_string()),
                Ok(_) => None,
            };
            if let Some(reason) = stuck {
                self.set_stall(at, reason, &mut stall_log);
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(DISPATCH_STALL_BACKOFF_MAX);
                continue;
            }
            if self.stalled.load(Ordering::Acquire) && (result.as_ref().is_ok_and(|n| *n > 0) || seen_end <= at) {
                self.clear_stall(&mut stall_log);
            }
            backoff = DISPATCH_STALL_BACKOFF_MIN;
            match result {
                Ok(0) if last_record.elapsed() < DISPATCH_BUSY_WINDOW => std::thread::sleep(DISPATCH_BUSY_POLL),
                // Nothing more, or a record whose end is not readable yet (a confirm offset
                // inside it): sleep until the readable end moves past what this pass saw.
                Ok(0) => self.wakeup.sleep_unless(DISPATCH_IDLE_SLEEP, || {
                    self.stop.load(Ordering::Acquire) || self.log.readable_end() > seen_end
                }),
                Ok(_) => {
                    last_record = Instant::now();
                    // Let a busy stream gather a batch rather than chase it record by record.
                    std::thread::sleep(DISPATCH_BUSY_POLL);
                }
                Err(_) => unreachable!("an error is a stall, handled above"),
            }
        }
    }

    fn set_stall(&self, offset: u64, reason: String, log: &mut crate::repeated::Repeated) {
        log.failed(&format_args!("at commit-log offset {offset}: {reason}"));
        let mut stall = self.stall.lock();
        if stall.as_ref().is_none_or(|s| s.offset != offset) {
            *stall = Some(DispatchStall {
                offset,
                reason,
                since: Instant::now(),
            });
        }
        self.stalled.store(true, Ordering::Release);
    }

    fn clear_stall(&self, log: &mut crate::repeated::Repeated) {
        *self.stall.lock() = None;
        self.stalled.store(false, Ordering::Release);
        log.succeeded();
    }

    /// The maintenance thread: consume-queue flushes with the dispatch checkpoint, and
    /// retention. Not on the dispatcher: each flush syncs every queue and the checkpoint file,
    /// and deleting a 1 GiB segment can take a while, on a disk the commit log keeps busy — a
    /// consumer would wait that long for new entries.
    fn maintenance_loop(&self) {
        let mut last_flush = Instant::now();
        let mut last_retention = Instant::now();
        let tick = self.config.cq_flush_interval.min(self.config.retention_check_interval);
        let mut flush_failures = crate::repeated::Repeated::new("consume queue flush failed");
        while !self.stop.load(Ordering::Acquire) {
            std::thread::park_timeout(tick);
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if last_retention.elapsed() >= self.config.retention_check_interval {
                last_retention = Instant::now();
                if let Err(e) = self.run_retention() {
                    tracing::warn!(error = %e, "retention failed");
                }
            }
            if last_flush.elapsed() >= self.config.cq_flush_interval {
                last_flush = Instant::now();
                match self.flush_queues(false) {
                    Ok(()) => flush_failures.succeeded(),
                    Err(e) => flush_failures.failed(&e),
                }
            }
        }
    }
}

impl MessageStore {
    /// Opens (creating if needed) the store under `config.root`: recovers the commit log,
    /// catches the consume queues up with it, then starts the dispatcher and the maintenance
    /// threads.
    pub fn open(mut config: MessageStoreConfig) -> Result<MessageStore> {
        petrel_kit::fs::create_dir_durably(&config.root).map_err(|e| StoreError::io(&config.root, e))?;
        config.commit_log.dir = config.root.join("commitlog");
        let mut log_config = config.commit_log.clone();
        if log_config.flush_mode == crate::commit_log::FlushMode::Sync {
            // Readers read only flushed records under SYNC_FLUSH, so everything dispatched was
            // on disk: recovery takes no bad record there for a torn tail.
            log_config.durable_below = log_config.durable_below.max(read_dispatch_checkpoint(&config.root).unwrap_or(0));
        }
        let log = CommitLog::open(log_config)?;
        config.cold.iter().for_each(|cold| log.set_retention_guard(cold.guard.clone()));
        let end = log.max_offset();
        // Re-dispatch from the last recorded dispatch point (entries already there are skipped);
        // if recovery cut the log below it, from the new end.
        // Never below the oldest segment still there (retention may have removed the rest).
        let recorded = read_dispatch_checkpoint(&config.root).unwrap_or(0);
        let from = recorded.min(end).max(log.min_offset());
        // What consumers may have read, and what was confirmed, before this start: a log that
        // recovered to less lost records other replicas hold.
        let readable_before = recorded.max(read_offset_file(&config.root, CONFIRM_CHECKPOINT_FILE).unwrap_or(0));
        if readable_before > end {
            tracing::warn!(
                recovered_end = end,
                readable_before,
                "the commit log recovered to less than consumers could read before the restart"
            );
        }
        let index = match config.index {
            Some(index_config) => {
                let mut index = KeyIndex::open(&config.root, index_config)?;
                index.cut_to(from)?;
                Some(Mutex::new(Indexer {
                    index,
                    failures: crate::repeated::Repeated::new("key index not written"),
                }))
            }
            None => None,
        };
        // Light queues live in the LSM with `enableLmq`; it replays its own journal here.
        let light = if config.commit_log.lmq {
            Some(LightQueues::open(&config.root, end)?)
        } else {
            None
        };
        let inner = Arc::new(Inner {
            index,
            log,
            queues: RwLock::new(QueueMap::new()),
            light,
            light_queues: RwLock::new(QueueMap::new()),
            light_cursor: Mutex::new(Vec::new()),
            dispatched: AtomicU64::new(from),
            light_durable: AtomicU64::new(from),
            retention: Mutex::new(()),
            stop: AtomicBool::new(false),
            generation: Mutex::new(0),
            new_entries: Condvar::new(),
            listener: RwLock::new(None),
            cold: config
                .cold
                .as_ref()
                .map(|c| c.log.clone())
                .map_or_else(std::sync::OnceLock::new, std::sync::OnceLock::from),
            retained: AtomicU64::new(0),
            wakeup: Arc::new(Wakeup::default()),
            broken: Mutex::new(QueueMap::new()),
            broken_count: AtomicU64::new(0),
            stall: Mutex::new(None),
            stalled: AtomicBool::new(false),
            readable_before,
            pending_syncs: Arc::default(),
            dispatch_passes: AtomicU64::new(0),
            cache: crate::page_cache::PageCacheStats::default(),
            config,
        });
        let wakeup = inner.wakeup.clone();
        inner.log.set_readable_listener(Arc::new(move || wakeup.wake()));
        if inner.config.confirm_gate {
            inner.log.gate_readers_on(crate::watermark::Watermark::new("confirmed", from, 1));
        }
        // Open every existing queue now, so entries past the recovered log end are cut.
        let cq_root = inner.cq_root();
        petrel_kit::fs::create_dir_durably(&cq_root).map_err(|e| StoreError::io(&cq_root, e))?;
        let dirs = inner.open_existing_queues(from)?;
        if inner.log.recovery_report().unclean {
            inner.pending_syncs.add_dirs(dirs);
        }
        inner.catch_up(from, end)?;
        let store = MessageStore {
            inner: inner.clone(),
            threads: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        };
        let worker = inner.clone();
        store.spawn("store-dispatch", move || worker.dispatch_loop())?;
        let worker = inner.clone();
        store.spawn("store-maintain", move || worker.maintenance_loop())?;
        if let Some(budget) = inner.config.page_cache_budget_bytes {
            let worker = inner.clone();
            store.spawn("store-page-cache", move || worker.page_cache_loop(budget))?;
        }
        Ok(store)
    }

    /// Starts one of the store's threads. On failure the caller's `?` drops the store, and its
    /// `Drop` stops the threads already started.
    fn spawn(&self, name: &str, work: impl FnOnce() + Send + 'static) -> Result<()> {
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(work)
            .map_err(|e| StoreError::io(&self.inner.config.root, e))?;
        self.threads.lock().push(handle);
        Ok(())
    }

    /// The commit log the store is built on.
    pub fn commit_log(&self) -> &CommitLog {
        &self.inner.log
    }

    /// Appends pre-encoded records without blocking or copying (see
    /// [`CommitLog::try_append_owned`]).
    pub fn try_append_owned(&self, records: &mut bytes::BytesMut, topic: &str, queue_id: i32) -> Result<Vec<AppendResult>> {
        self.check_queue(topic, queue_id)?;
        self.inner.log.try_append_owned(records, topic, queue_id)
    }

    /// Appends pre-encoded records to a [`Target`] (with light message queues) without blocking
    /// or copying (see [`CommitLog::try_append_to`]).
    pub fn try_append_to(&self, records: &mut bytes::BytesMut, to: Target<'_>) -> Result<Vec<AppendResult>> {
        self.check_queue(to.topic, to.queue_id)?;
        self.inner.log.try_append_to(records, to)
    }

    /// [`MessageStore::try_append_to`] that may block (see [`CommitLog::append_to`]).
    pub fn append_to(&self, records: &mut bytes::BytesMut, to: Target<'_>) -> Result<Vec<AppendResult>> {
        self.check_queue(to.topic, to.queue_id)?;
        self.inner.log.append_to(records, to)
    }

    /// Refuses a queue whose consume queue cannot be written (see [`MessageStore::queue_failure`]),
    /// and every append while the dispatcher is stuck (see [`MessageStore::dispatch_stall`]):
    /// what is appended then reaches no consumer.
    fn check_queue(&self, topic: &str, queue_id: i32) -> Result<()> {
        if self.inner.stalled.load(Ordering::Acquire)
            && let Some(stall) = self.dispatch_stall()
        {
            return Err(StoreError::DispatchStuck {
                offset: stall.offset,
                reason: stall.reason,
                stuck_s: stall.since.elapsed().as_secs(),
            });
        }
        match self.inner.queue_failure(topic, queue_id) {
            None => Ok(()),
            Some(reason) => Err(StoreError::QueueUnavailable {
                topic: topic.to_owned(),
                queue_id,
                reason,
            }),
        }
    }

    /// Where the dispatcher is stuck, if it is (for metrics, runtime info and refusals).
    #[must_use]
    pub fn dispatch_stall(&self) -> Option<DispatchStall> {
        self.inner.stall.lock().clone()
    }

    /// How far readers could read before this start (the last dispatch or confirm checkpoint,
    /// whichever is higher). A recovered end below it means records that consumers may have
    /// read, or that every replica of a set had confirmed, are gone from this log.
    #[must_use]
    pub fn readable_before_restart(&self) -> u64 {
        self.inner.readable_before
    }

    /// Passes the dispatcher made over the log so far.
    #[must_use]
    pub fn dispatch_passes(&self) -> u64 {
        self.inner.dispatch_passes.load(Ordering::Relaxed)
    }

    /// The page-cache budget's figures.
    pub fn page_cache_stats(&self) -> &crate::page_cache::PageCacheStats {
        &self.inner.cache
    }

    /// Whether dirty data keeps the page cache over its budget: sends should be refused with
    /// `SYSTEM_BUSY` until the flusher catches up.
    pub fn page_cache_busy(&self) -> bool {
        self.inner.cache.busy.load(Ordering::Acquire)
    }

    /// Why sends to the queue are refused: its consume queue could not be created or written
    /// (the dispatcher tries again every second); `None` for a healthy queue.
    pub fn queue_failure(&self, topic: &str, queue_id: i32) -> Option<String> {
        self.inner.queue_failure(topic, queue_id)
    }

    /// [`MessageStore::try_append_owned`] that may block (see [`CommitLog::append_owned`]).
    pub fn append_owned(&self, records: &mut bytes::BytesMut, topic: &str, queue_id: i32) -> Result<Vec<AppendResult>> {
        self.check_queue(topic, queue_id)?;
        self.inner.log.append_owned(records, topic, queue_id)
    }

    /// Appends one record and waits until it is written (see [`CommitLog::append`]).
    pub fn append(&self, record: &mut [u8], topic: &str, queue_id: i32) -> Result<AppendResult> {
        self.check_queue(topic, queue_id)?;
        self.inner.log.append(record, topic, queue_id)
    }

    /// Appends one record and waits until it is durable (see [`CommitLog::append_durable`]).
    pub fn append_durable(&self, record: &mut [u8], topic: &str, queue_id: i32) -> Result<AppendResult> {
        self.check_queue(topic, queue_id)?;
        self.inner.log.append_durable(record, topic, queue_id)
    }

    /// Appends a batch and waits until it is written (see [`CommitLog::append_batch`]).
    pub fn append_batch(&self, records: &mut [u8], topic: &str, queue_id: i32) -> Result<Vec<AppendResult>> {
        self.check_queue(topic, queue_id)?;
        self.inner.log.append_batch(records, topic, queue_id)
    }

    /// Deletes expired commit-log segments (see [`CommitLog::delete_expired`]) and the consume
    /// queue entries that pointed into them; returns how many segments went. Also runs every
    /// `retention_check_interval` on the store's maintenance thread.
    pub fn run_retention(&self) -> Result<usize> {
        self.inner.run_retention()
    }

    /// Cuts the commit log back to `offset` (see [`CommitLog::truncate_to`]). Only a tail that
    /// no reader has seen can be cut: the dispatcher, and the reader gate that holds it back
    /// (the confirm offset in controller mode), must both be at or below `offset`.
    ///
    /// # Errors
    /// [`StoreError::Layout`] when readers passed `offset`, or the log's own errors.
    pub fn truncate_to(&self, offset: u64) -> Result<u64> {
        let log = self.commit_log();
        let gate = log.reader_gate();
        let dispatched = self.dispatched_offset();
        if offset >= log.max_offset() {
            return Ok(0);
        }
        if dispatched > offset || gate.is_none_or(|g| g > offset) {
            return Err(StoreError::Layout {
                path: self.inner.config.root.display().to_string(),
                reason: format!(
                    "cannot cut the log back to {offset}: consumers may already have read past it \
                     (dispatched to {dispatched}, reader gate {gate:?}); this replica needs an empty store"
                ),
            });
        }
        log.truncate_to(offset)
    }

    /// Commit-log offset up to which records are in their consume queues.
    pub fn dispatched_offset(&self) -> u64 {
        self.inner.dispatched.load(Ordering::Acquire)
    }

    /// Up to `max` records of `topic` stored in `[begin_ms, end_ms]` whose `UNIQ_KEY` is `key`
    /// (`unique`) or whose `KEYS` include it, newest first, at most [`MAX_QUERY_BYTES`] of them
    /// (the first whatever its size). Blocking: reads records that may be cold, and stops at the
    /// first the cold tier cannot give now (one slow tier costs one deadline, not one per
    /// candidate), answering what it found before.
    ///
    /// # Errors
    /// [`StoreError::ColdTier`] when the tier failed before anything was found: the caller
    /// answers "retry later" rather than "no such message".
    pub fn query_by_key(&self, topic: &str, key: &str, unique: bool, max: usize, begin_ms: i64, end_ms: i64) -> Result<QueryResult> {
        let mut result = QueryResult::default();
        let Some(indexer) = &self.inner.index else {
            return Ok(result);
        };
        let candidates = {
            let indexer = indexer.lock();
            result.index_end_offset = indexer.index.end();
            result.index_end_ms = indexer.index.end_ms();
            // Candidates past `max` are looked at too: hash collisions and other topics drop out.
            indexer.index.lookup(topic, key, max.saturating_mul(4).max(32), begin_ms, end_ms)
        };
        for offset in candidates {
            if result.count >= max || (result.count > 0 && result.body.len() >= MAX_QUERY_BYTES) {
                break;
            }
            // A record the tier holds is read from it: the index keeps keys down to the oldest
            // record the store still has, local or not.
            let bytes = match self.inner.record_anywhere(offset) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(e) if result.count == 0 => return Err(e),
                Err(_) => break,
            };
            let Ok(m) = RecordView::parse(&bytes) else {
                continue;
            };
            let matches = if unique {
                property(m.properties, keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == Some(key)
            } else {
                property(m.properties, keys::KEYS).is_some_and(|ks| ks.split(KEY_SEPARATOR).any(|k| k == key))
            };
            if m.topic == topic && matches && (begin_ms..=end_ms).contains(&m.store_timestamp) {
                result.body.extend_from_slice(&bytes);
                result.count += 1;
            }
        }
        Ok(result)
    }

    /// Removes light message queues that hold nothing readable (every message they had is past
    /// retention), at most `max` per call: their consume queues, their files and their place in
    /// the log's numbering, so that idle queues (one per device, say) do not accumulate. A queue
    /// that gets a message meanwhile is kept. Returns the names removed.
    ///
    /// # Errors
    /// A directory that cannot be moved aside or removed.
    pub fn remove_expired_light_queues(&self, max: usize) -> Result<Vec<String>> {
        let lmq_id = petrel_protocol::lmq::LMQ_QUEUE_ID;
        // The queues opened in this run first, then the LSM's others from where the last call
        // stopped (opened now, which applies retention to them).
        self.open_light_queues_from_cursor(max)?;
        let expired = |map: &RwLock<QueueMap<InlineQueueKey, Arc<Queue>>>, max: usize| -> Vec<(String, i64, Arc<Queue>)> {
            map.read()
                .iter()
                .filter(|((t, q), cq)| *q == lmq_id && petrel_protocol::lmq::is_lmq(t) && cq.min_offset() == cq.max_offset())
                .take(max)
                .map(|((t, _), cq)| (t.to_string(), cq.max_offset(), cq.clone()))
                .collect()
        };
        let mut candidates = expired(&self.inner.light_queues, max);
        candidates.extend(expired(&self.inner.queues, max - candidates.len()));
        let mut removed = Vec::new();
        for (name, next, queue) in candidates {
            let light = queue.is_light();
            let dir = self.inner.cq_root().join(&name);
            let trash = self.inner.cq_root().join(format!("{REMOVED_QUEUE_PREFIX}{name}"));
            let mut moved = Ok(());
            // Under the put-message lock, and only if the log numbered nothing in the queue
            // since it was seen empty (`next`): no append can number it until it is gone from
            // the dispatcher's map, and its keys or directory are out of the way of a new one.
            let forgotten = self.inner.log.forget_light_queue(&name, next, || {
                if light {
                    // Under the map's lock: no reader opens the queue again from keys that
                    // are on their way out.
                    let mut map = self.inner.light_queues.write();
                    map.remove(&QueueRef(&name, lmq_id));
                    moved = queue.remove_all().map(drop);
                } else {
                    self.inner.queues.write().remove(&QueueRef(&name, lmq_id));
                    moved = std::fs::rename(&dir, &trash)
                        .or_else(|e| match e.kind() {
                            std::io::ErrorKind::NotFound => Ok(()),
                            _ => Err(e),
                        })
                        .map_err(|e| StoreError::io(&dir, e));
                }
            });
            if !forgotten {
                continue;
            }
            moved?;
            if !light {
                match std::fs::remove_dir_all(&trash) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StoreError::io(&trash, e)),
                }
            }
            removed.push(name);
        }
        if let Some(light) = self.inner.light.as_ref().filter(|_| !removed.is_empty()) {
            // Soon durable (a restart that still found the keys would also drop them: the log
            // no longer numbers the queue).
            light.persist()?;
        }
        Ok(removed)
    }

    /// Opens up to `max` light queues of the LSM that this run has not opened, from where the
    /// last call stopped (around again after the last), so that retention and the removal of
    /// expired queues reach queues nobody read since the start.
    fn open_light_queues_from_cursor(&self, max: usize) -> Result<()> {
        let Some(light) = &self.inner.light else { return Ok(()) };
        let mut cursor = self.inner.light_cursor.lock();
        let (queues, next) = light.queues_from(&cursor, max)?;
        *cursor = next;
        drop(cursor);
        for (topic, queue_id) in queues {
            if self.inner.in_lsm(&topic) {
                self.inner.queue_or_create(&topic, queue_id)?;
            }
        }
        Ok(())
    }

    /// Removes `topic`'s consume queues and their files (DELETE_TOPIC_IN_BROKER); returns how
    /// many queues went. Its records stay in the commit log until retention; queue offsets go on
    /// from where they were if the topic is created again (a restart would number them so too).
    ///
    /// # Errors
    /// A name that is not a plain directory name, or the directory cannot be removed.
    pub fn delete_topic(&self, topic: &str) -> Result<usize> {
        // The name becomes a directory to remove: never one that leads out of `consumequeue/`.
        if topic.is_empty() || topic == "." || topic == ".." || topic.contains(['/', '\\', '\0']) {
            return Err(StoreError::Layout {
                path: self.inner.cq_root().display().to_string(),
                reason: format!("not a topic directory name: {topic:?}"),
            });
        }
        let removed = {
            let mut queues = self.inner.queues.write();
            let before = queues.len();
            queues.retain(|(t, _), _| t != topic);
            before - queues.len()
        } + self.remove_light_topic(topic)?;
        {
            let mut broken = self.inner.broken.lock();
            broken.retain(|(t, _), _| t != topic);
            self.inner.broken_count.store(broken.len() as u64, Ordering::Release);
        }
        let dir = self.inner.cq_root().join(topic);
        // Readers holding a queue keep its mapping; unlinking the files does not disturb them.
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(removed),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(removed),
            Err(e) => Err(StoreError::io(&dir, e)),
        }
    }

    /// Removes the keys of `topic`'s queue in the LSM (a light queue's id is always
    /// `LMQ_QUEUE_ID`); returns 1 if it held any.
    fn remove_light_topic(&self, topic: &str) -> Result<usize> {
        let Some(light) = self.inner.light.as_ref().filter(|_| self.inner.in_lsm(topic)) else {
            return Ok(0);
        };
        let lmq_id = petrel_protocol::lmq::LMQ_QUEUE_ID;
        // Under the map's lock: no reader opens the queue again from keys on their way out.
        let mut map = self.inner.light_queues.write();
        let removed = match map.remove(&QueueRef(topic, lmq_id)) {
            // Its tail too: an ingestion must not write its entries back.
            Some(queue) => queue.remove_all()?.max(1),
            None => light.remove_keys(topic, lmq_id)?,
        };
        Ok(usize::from(removed > 0))
    }

    /// The record starting at commit-log `offset`, wherever it is kept: on the local disk, or in
    /// the cold tier once it left the disk (a read that may wait up to the tier's deadline:
    /// callers run it off the async runtime). `Ok(None)` when no record starts there.
    ///
    /// # Errors
    /// [`StoreError::ColdTier`] when the tier holds the offset but cannot answer now.
    pub fn read_record(&self, offset: u64) -> Result<Option<Vec<u8>>> {
        self.inner.record_anywhere(offset)
    }

    /// (min, max) queue offsets; (0, 0) for a queue that has nothing.
    pub fn queue_offsets(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        self.inner
            .queue(topic, queue_id)
            .map_or((0, 0), |q| (q.min_offset(), q.max_offset()))
    }

    fn store_timestamp(&self, e: &CqEntry) -> Option<i64> {
        let bytes = match self.inner.log.read_record(e.commit_log_offset).ok()? {
            Some(bytes) => bytes,
            // Below the local log: the cold tier's copy (a reset by time, the queue's oldest).
            None if self.inner.cold.get().is_some() => self.inner.cold_record(e.commit_log_offset, e.size_bytes).ok()?.to_vec(),
            None => return None,
        };
        let sys_flag = i32::from_be_bytes(bytes.get(36..40)?.try_into().ok()?);
        let pos = petrel_protocol::message::store_timestamp_pos(sys_flag);
        Some(i64::from_be_bytes(bytes.get(pos..pos + 8)?.try_into().ok()?))
    }

    /// Store time of the oldest message in the queue, `-1` if it has none.
    pub fn earliest_store_time(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .queue(topic, queue_id)
            .and_then(|q| q.get(q.min_offset()))
            .and_then(|e| self.store_timestamp(&e))
            .unwrap_or(-1)
    }

    /// The queue offset of the first message stored at or after `timestamp_ms` (`Lower`) or of
    /// the last stored at or before it (`Upper`). Before everything: the min offset; after
    /// everything: the max offset (`Lower`) or the last message (`Upper`).
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, timestamp_ms: i64, boundary: Boundary) -> i64 {
        let Some(q) = self.inner.queue(topic, queue_id) else { return 0 };
        let (mut lo, mut hi) = (q.min_offset(), q.max_offset());
        if lo >= hi {
            return lo;
        }
        let ts = |o: i64| q.get(o).and_then(|e| self.store_timestamp(&e)).unwrap_or(i64::MAX);
        // first offset whose time is >= t (Lower) or > t (Upper)
        let upper = boundary == Boundary::Upper;
        let (min, max) = (lo, hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let t = ts(mid);
            if t < timestamp_ms || (upper && t == timestamp_ms) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if upper { (lo - 1).max(min) } else { lo.min(max) }
    }

    /// Reads up to `max_msgs` messages from `offset`, keeping those `filter` selects (all when
    /// `None`), with RocketMQ's statuses and next offsets. Entries skipped by the filter count
    /// toward `max_scan_entries`, so a selective filter cannot make one read scan a whole queue.
    pub fn get_messages(&self, topic: &str, queue_id: i32, offset: i64, max_msgs: usize, filter: Option<&dyn MessageFilter>) -> GetResult {
        let mut result = GetResult {
            status: GetStatus::NoMatchedLogicQueue,
            body: Vec::new(),
            message_count: 0,
            next_begin_offset: 0,
            min_offset: 0,
            max_offset: 0,
        };
        let Some(q) = self.inner.queue(topic, queue_id) else {
            return result;
        };
        let (min, max) = (q.min_offset(), q.max_offset());
        result.min_offset = min;
        result.max_offset = max;
        if max == 0 {
            result.status = GetStatus::NoMessageInQueue;
            return result;
        }
        if offset < min {
            result.status = GetStatus::OffsetTooSmall;
            result.next_begin_offset = min;
            return result;
        }
        if offset == max {
            result.status = GetStatus::OffsetOverflowOne;
            result.next_begin_offset = offset;
            return result;
        }
        if offset > max {
            result.status = GetStatus::OffsetOverflowBadly;
            result.next_begin_offset = max;
            return result;
        }
        let scan = self.inner.config.max_scan_entries.max(max_msgs);
        let mut next = offset;
        let mut cold_failed = false;
        while next < max && (next - offset) < scan as i64 && result.message_count < max_msgs.max(1) {
            let Some(e) = q.get(next) else { break };
            if filter.is_some_and(|f| !f.matches_tags_code(e.tags_code)) {
                next += 1;
                continue;
            }
            if result.message_count > 0 && result.body.len() + e.size_bytes as usize > self.inner.config.max_transfer_bytes {
                break;
            }
            let body = &mut result.body;
            let mut keep = |rec: &[u8]| {
                let by_properties = filter.filter(|f| f.needs_properties());
                // A record that does not parse is not this filter's to drop: the client sees it.
                if by_properties.is_some_and(|f| RecordView::parse(rec).is_ok_and(|m| !f.matches_properties(m.properties))) {
                    return false;
                }
                body.extend_from_slice(rec);
                true
            };
            let kept = match self.inner.log.with_record(e.commit_log_offset, &mut keep) {
                // Below the local log, with a cold tier: read there (without one, the entry is
                // one retention is about to drop, and the read ends as before).
                None if self.inner.cold.get().is_some() && e.commit_log_offset < self.inner.log.min_offset() => {
                    match self.inner.cold_record(e.commit_log_offset, e.size_bytes) {
                        Ok(record) => Some(keep(&record)),
                        Err(StoreError::ColdLost { .. }) => {
                            // Gone from the bucket for good: skipped, so the consumer goes on.
                            next += 1;
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(topic, queue_id, offset = next, error = %e, "a read from the cold tier failed");
                            cold_failed = true;
                            break;
                        }
                    }
                }
                other => other,
            };
            match kept {
                None => break,
                Some(true) => result.message_count += 1,
                Some(false) => {}
            }
            next += 1;
        }
        result.next_begin_offset = next;
        result.status = match (result.message_count, cold_failed) {
            (0, true) => GetStatus::ColdUnavailable,
            (0, false) => GetStatus::NoMatchedMessage,
            _ => GetStatus::Found,
        };
        result
    }

    /// Whether a cold tier holds this store's older segments (a read may then need it).
    #[must_use]
    pub fn has_cold_tier(&self) -> bool {
        self.inner.cold.get().is_some()
    }

    /// The oldest log offset readable anywhere: the local log's start, or the cold tier's when
    /// it holds older segments (it holds every one from its start to the local log's: a local
    /// segment is deleted only once the tier has it).
    pub fn oldest_offset(&self) -> u64 {
        self.inner.retained_min()
    }

    /// Up to `max_len` bytes of the log from `offset`, which lies below the local log, read from
    /// the cold tier and never past the end of `offset`'s segment (a segment's tail is its
    /// filler, which a replica copies as the master wrote it): a replica catching up on what
    /// this broker's disk no longer keeps. Blocking up to the tier's deadline. `Ok(None)` when
    /// `offset` is not below the local log or no tier holds it.
    ///
    /// # Errors
    /// [`StoreError::ColdTier`] when the tier holds the bytes but cannot give them now.
    pub fn read_cold_raw(&self, offset: u64, max_len: usize) -> Result<Option<bytes::Bytes>> {
        let Some(cold) = self.inner.cold.get() else {
            return Ok(None);
        };
        let held = cold.min_offset().is_some_and(|min| min <= offset);
        if !held || offset >= self.inner.log.min_offset() {
            return Ok(None);
        }
        let segment_bytes = self.inner.log.config().segment_size_bytes;
        let left_in_segment = segment_bytes - offset % segment_bytes;
        let len = usize::try_from(left_in_segment).map_or(max_len, |left| left.min(max_len));
        cold.read(offset, len).map(Some)
    }

    /// Whether the message at `offset` of the queue lies below the local log (a read of it
    /// goes to the cold tier, which may block: not for an async task's fast path).
    pub fn is_cold(&self, topic: &str, queue_id: i32, offset: i64) -> bool {
        let log_min = self.inner.log.min_offset();
        self.has_cold_tier()
            && log_min > 0
            && self
                .inner
                .queue(topic, queue_id)
                .and_then(|q| q.get(offset))
                .is_some_and(|e| e.commit_log_offset < log_min)
    }

    /// Waits until the queue has an entry at `offset` or `timeout` passes; true if it has.
    pub fn wait_for_entries(&self, topic: &str, queue_id: i32, offset: i64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut generation = self.inner.generation.lock();
        loop {
            if self.queue_offsets(topic, queue_id).1 > offset {
                return true;
            }
            if self.inner.new_entries.wait_until(&mut generation, deadline).timed_out() {
                return self.queue_offsets(topic, queue_id).1 > offset;
            }
        }
    }

    /// Stops the store's threads, brings the queues up to date, flushes them and closes the log.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// [`close`](Self::close) for a shared store: later appends fail with `NotWritable`. A
    /// second call does nothing.
    pub fn shutdown(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.stop_threads();
        if self.inner.config.commit_log.flush_mode == crate::FlushMode::Sync {
            // Under SYNC_FLUSH only the durable part is dispatched: let the flusher take the rest.
            self.inner.log.wait_durable(self.inner.log.max_offset())?;
        }
        self.inner.dispatch_available()?;
        self.inner.flush_queues(true)?;
        self.inner.log.close()
    }

    /// Stops the store's and the log's threads at once, as a crash would (see
    /// [`CommitLog::halt_as_if_crashed`]); for power-failure tests.
    #[doc(hidden)]
    pub fn halt_as_if_crashed(&self) {
        self.stop_threads();
        self.inner.log.halt_as_if_crashed();
    }

    /// Registers the function told about new consume-queue entries (replacing any earlier one).
    pub fn set_dispatch_listener(&self, listener: DispatchListener) {
        *self.inner.listener.write() = Some(listener);
    }

    /// Store time of the newest message in the queue, 0 if it has none (`lastUpdateTimestamp`).
    pub fn latest_store_time(&self, topic: &str, queue_id: i32) -> i64 {
        self.store_time_at(topic, queue_id, self.queue_offsets(topic, queue_id).1 - 1)
            .unwrap_or(0)
    }

    /// Store time of the message at `offset` in the queue, if it is still there.
    pub fn store_time_at(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        let q = self.inner.queue(topic, queue_id)?;
        if offset < q.min_offset() || offset >= q.max_offset() {
            return None;
        }
        q.get(offset).and_then(|e| self.store_timestamp(&e))
    }

    /// Stops the dispatcher, the maintenance and the page-cache threads and waits for them.
    fn stop_threads(&self) {
        self.inner.stop.store(true, Ordering::Release);
        self.inner.wakeup.wake_always();
        let threads = std::mem::take(&mut *self.threads.lock());
        for h in &threads {
            h.thread().unpark();
        }
        for h in threads {
            let _ = h.join();
        }
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        self.stop_threads();
    }
}
