//! `LightQueues`: the consume queues of light message queues (`%LMQ%…`) in one LSM (fjall), so
//! that a queue costs a key range instead of a directory, a segment and a mapping. A broker with
//! MQTT devices or lite topics has hundreds of thousands to millions of them, nearly all idle;
//! with a segment each they hit `vm.max_map_count` (65,530) long before.
//!
//! Owns: the LSM under `<root>/lightqueue` (its journal, tables, descriptor cache and worker
//! threads), each light queue's (min, max), read from its keys when the queue is first used, and
//! each queue's tail: the entries appended since the last ingestion, in memory.
//! Must never: keep an entry the commit log contradicts or that points past the log's recovered
//! end, or let the dispatch checkpoint pass an entry that is not durable (the store moves the
//! checkpoint only to where [`LightQueues::settle`] says every entry is in the LSM).
//!
//! Appends do not write the LSM one key at a time. A key per message cost a journal write and a
//! skip-list insert among all the queues' keys (about 4 µs a message at 10,000 active queues,
//! most of it key compares). Each queue keeps its new entries in a tail instead, in offset order,
//! and every few seconds (or [`TAIL_INGEST_ENTRIES`] entries) all tails go to the LSM at once as
//! one sorted run written straight into a table (fjall's ingestion: no journal, no memtable).
//! Until then the dispatch checkpoint stays where the last ingestion left it, so that a crash
//! re-dispatches the tails from the commit log: a start costs the tails, not the queues.
//!
//! A key is `topic 0x00 queue_id (4 bytes, big-endian) queue_offset (8 bytes, big-endian)` (no
//! topic name holds 0x00), its value the 20-byte entry of a segment slot: the keys of one queue
//! are contiguous and in offset order, so its first and last key are its min and max.
//!
//! The semantics are the segments' (see `consume_queue.rs`): a duplicate is skipped, a gap is
//! refused, a stale entry (another commit-log offset at the same queue offset, after a crash)
//! cuts the queue back to it, and a queue that starts late (on a replica) starts where its first
//! entry says.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fjall::config::PinningPolicy;
use parking_lot::Mutex;

use crate::checkpoint::QueueKey;
use crate::consume_queue::{CqAppend, CqEntry};
use crate::error::{Result, StoreError};

/// Where the LSM lives under the store's root.
pub const LIGHT_QUEUE_DIR: &str = "lightqueue";

/// Table files the LSM keeps open at most: the bound on its descriptors, whatever the number of
/// queues.
const MAX_OPEN_TABLES: usize = 256;
/// The LSM's block cache.
const CACHE_BYTES: u64 = 16 << 20;
/// Journal kept before memtables are flushed to tables, at most (fjall's least).
const MAX_JOURNAL_BYTES: u64 = 64 << 20;
/// Entries held in memory before they are written to a table: the journal a start replays
/// (the tail since the last table), so that a start costs this, not the number of queues. At
/// 64 MiB, fjall's default, a start with 10,000 queues took 3 s.
const MAX_MEMTABLE_BYTES: u64 = 16 << 20;
/// Background flush and compaction threads.
const WORKER_THREADS: usize = 1;
/// Levels whose tables keep their whole filter and index in memory, not in the block cache.
/// fjall pins filters in level 0 only (indexes in levels 0–1) and partitions both from level
/// 3 on, so the tables compaction writes into levels 1–2 held theirs in the 16 MiB cache. A
/// filter takes 10 bits a key, about 300 KB for one ingestion's quarter of a million entries
/// and more once compaction merges them: a pull just past a tail (its entries ingested) that
/// missed the cache read and checksummed that whole block again, a tenth of the broker's CPU
/// at a million queues. Pinned, a filter costs about 1.25 bytes a key, only in the levels whose
/// tables are not partitioned. An ingested table enters unpinned whatever this says (lsm-tree
/// loads it so) until compaction rewrites it or a start reloads it. fjall stores a keyspace's
/// options when it creates it: a store created before this setting keeps its own.
const PINNED_LEVELS: [bool; 4] = [true, true, true, false];
/// Keys one step of a removal collects before removing them: a queue's keys are removed in
/// steps of this many, so that a removal holds a bounded batch in memory whatever the queue's
/// length.
const REMOVE_BATCH: usize = 4_096;

/// Entries the tails hold, all queues together, at which an ingestion is due at the next flush:
/// what bounds the tails' memory (20 bytes an entry, plus what one flush interval dispatches)
/// and what a start after a crash re-dispatches.
pub const TAIL_INGEST_ENTRIES: usize = 262_144;
/// Entries the tails may hold at most, all queues together: past it the dispatcher waits (and
/// appends are refused) until their LSM takes them, so that a failing disk cannot grow them
/// without bound. Four ingestions' worth, 20 MiB of entries.
pub const TAIL_MAX_ENTRIES: usize = 4 * TAIL_INGEST_ENTRIES;
/// The longest an entry stays in a tail: an ingestion is due at the first flush past it.
pub const TAIL_INGEST_INTERVAL: Duration = Duration::from_secs(10);
/// Tails holding fewer entries than this at a flush go to the LSM's memtable as one batch
/// instead of waiting for an ingestion: a trickle of light queue traffic then writes no small
/// table every interval (each one a merge with all the queues' keys later) and keeps the
/// checkpoint with the flushes.
pub const TAIL_BATCH_ENTRIES: usize = 16_384;

const ENTRY_BYTES: usize = 20;
const OFFSET_BYTES: usize = 8;

fn lsm_error(dir: &Path, e: &fjall::Error) -> StoreError {
    StoreError::io(dir, std::io::Error::other(e.to_string()))
}

/// The LSM of a store's light queues.
pub struct LightQueues {
    db: fjall::Database,
    entries: fjall::Keyspace,
    dir: PathBuf,
    /// The commit log's end after recovery: an entry reaching past it points at a record the
    /// recovery cut. Entries written since went through a queue opened in this run, so only
    /// those of earlier runs are checked against it, when their queue is first opened.
    recovered_end: u64,
    /// The tails with something the LSM does not hold yet (entries, or a blank to remove), each
    /// once: an append lists its queue's tail, an ingestion takes the list.
    listed: Mutex<Vec<Arc<Tail>>>,
    /// Entries the tails hold, all queues together.
    tail_entries: AtomicUsize,
    /// When the tails last went to the LSM.
    last_ingest: Mutex<Instant>,
    /// One ingestion at a time.
    ingesting: Mutex<()>,
}

/// A queue's entries not in the LSM yet, with the queue's key prefix.
struct Tail {
    prefix: Box<[u8]>,
    state: Mutex<TailState>,
}

struct TailState {
    /// Queue offset of `values[0]`: always the queue's max offset less `values.len()`.
    start: i64,
    values: VecDeque<[u8; ENTRY_BYTES]>,
    /// A blank the LSM holds below `start` that the next ingestion removes: the queue had
    /// drained, and the entry appended since keeps its numbering now.
    blank_to_remove: Option<i64>,
    /// Counts every change but an append at the back, so that an ingestion finds out whether
    /// the tail it wrote is still the queue's (wrapping: an ingestion compares two moments a
    /// few seconds apart).
    epoch: u32,
    /// Whether the tail is on the store's list.
    listed: bool,
}

/// What an ingestion took of one tail.
struct Snapshot {
    tail: Arc<Tail>,
    start: i64,
    values: Vec<[u8; ENTRY_BYTES]>,
    blank_to_remove: Option<i64>,
    epoch: u32,
}

impl LightQueues {
    /// Opens (or creates) the LSM under `root/lightqueue`, replaying its journal.
    pub fn open(root: &Path, recovered_end: u64) -> Result<Arc<LightQueues>> {
        let dir = root.join(LIGHT_QUEUE_DIR);
        let db = fjall::Database::builder(&dir)
            .manual_journal_persist(true)
            .max_cached_files(Some(MAX_OPEN_TABLES))
            .cache_size(CACHE_BYTES)
            .max_journaling_size(MAX_JOURNAL_BYTES)
            .worker_threads(WORKER_THREADS)
            .open()
            .map_err(|e| lsm_error(&dir, &e))?;
        let entries = db
            .keyspace("entries", || {
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(MAX_MEMTABLE_BYTES)
                    .filter_block_pinning_policy(PinningPolicy::new(PINNED_LEVELS))
                    .index_block_pinning_policy(PinningPolicy::new(PINNED_LEVELS))
            })
            .map_err(|e| lsm_error(&dir, &e))?;
        Ok(Arc::new(LightQueues {
            db,
            entries,
            dir,
            recovered_end,
            listed: Mutex::new(Vec::new()),
            tail_entries: AtomicUsize::new(0),
            last_ingest: Mutex::new(Instant::now()),
            ingesting: Mutex::new(()),
        }))
    }

    /// Makes the removals written so far durable (the journal, fsynced). Appended entries are
    /// made durable by [`Self::settle`].
    pub fn persist(&self) -> Result<()> {
        self.db.persist(fjall::PersistMode::SyncAll).map_err(|e| lsm_error(&self.dir, &e))
    }

    /// Writes the tails to the LSM when they are few (fewer than [`TAIL_BATCH_ENTRIES`], into
    /// the memtable) or an ingestion is due (`force`, [`TAIL_INGEST_ENTRIES`] or
    /// [`TAIL_INGEST_INTERVAL`]: straight into a table), then persists the journal. Returns
    /// whether every entry appended before the call is durable now: the store moves its
    /// dispatch checkpoint only then.
    pub fn settle(&self, force: bool) -> Result<bool> {
        let _one = self.ingesting.lock();
        if self.listed.lock().is_empty() {
            self.persist()?;
            return Ok(true);
        }
        let entries = self.tail_entries.load(Ordering::Acquire);
        let few = entries < TAIL_BATCH_ENTRIES;
        let due = force || entries >= TAIL_INGEST_ENTRIES || self.last_ingest.lock().elapsed() >= TAIL_INGEST_INTERVAL;
        let mut settled = false;
        if few || due {
            let snapshots = self.snapshot();
            settled = self.ingest(snapshots, !few)?;
        }
        self.persist()?;
        Ok(settled)
    }

    /// Refuses more entries while the tails hold [`TAIL_MAX_ENTRIES`].
    pub fn check_room(&self) -> Result<()> {
        let entries = self.tail_entries();
        if entries >= TAIL_MAX_ENTRIES {
            return Err(StoreError::LightTailsFull {
                entries,
                max: TAIL_MAX_ENTRIES,
            });
        }
        Ok(())
    }

    /// Entries the tails hold now, all queues together.
    #[must_use]
    pub fn tail_entries(&self) -> usize {
        self.tail_entries.load(Ordering::Acquire)
    }

    /// Takes the list of tails and copies each, in key order. Appends go on meanwhile; each
    /// lists its tail again.
    fn snapshot(&self) -> Vec<Snapshot> {
        let tails = std::mem::take(&mut *self.listed.lock());
        let mut snapshots: Vec<Snapshot> = tails
            .into_iter()
            .map(|tail| {
                let mut s = tail.state.lock();
                s.listed = false;
                let snapshot = Snapshot {
                    start: s.start,
                    values: s.values.iter().copied().collect(),
                    blank_to_remove: s.blank_to_remove,
                    epoch: s.epoch,
                    tail: tail.clone(),
                };
                drop(s);
                snapshot
            })
            .collect();
        // A prefix ends its topic with a 0 byte no topic holds: prefix order is key order.
        snapshots.sort_unstable_by(|a, b| a.tail.prefix.cmp(&b.tail.prefix));
        snapshots
    }

    /// Writes `snapshots` as one sorted run, then drops from each tail what the run holds. A
    /// tail changed meanwhile by more than appends (retention, a cut, a removal) keeps its
    /// entries, and the run's keys of it are removed again: the tail is the truth until the next
    /// ingestion. Returns whether every tail gave up what it was copied with (else some entries
    /// of before the call are still only in memory).
    fn ingest(&self, snapshots: Vec<Snapshot>, into_table: bool) -> Result<bool> {
        let written = match self.write_run(&snapshots, into_table) {
            Ok(written) => written,
            Err(e) => {
                // Nothing was registered: every tail stays as it is, listed again.
                for s in &snapshots {
                    self.relist(&s.tail, &mut s.tail.state.lock());
                }
                return Err(e);
            }
        };
        *self.last_ingest.lock() = Instant::now();
        self.drain(&snapshots, written)
    }

    /// After a run: drops from each tail what the run wrote of it, or, for a tail changed
    /// since its copy, removes the run's keys of it again. Returns whether every tail was
    /// drained.
    fn drain(&self, snapshots: &[Snapshot], written: Vec<bool>) -> Result<bool> {
        let mut stale = Vec::new();
        let mut all_drained = true;
        for (s, whole) in snapshots.iter().zip(written) {
            let mut t = s.tail.state.lock();
            if !whole {
                // Left as it is for the next ingestion.
                all_drained = false;
                self.relist(&s.tail, &mut t);
                continue;
            }
            if t.epoch == s.epoch && t.start == s.start {
                let n = s.values.len();
                t.values.drain(..n);
                t.start += i64::try_from(n).expect("a tail's length fits an offset");
                self.tail_entries.fetch_sub(n, Ordering::AcqRel);
                if t.values.is_empty() {
                    t.values.shrink_to_fit();
                }
            } else {
                if t.epoch == s.epoch {
                    tracing::error!(
                        start = t.start,
                        copied = s.start,
                        "a light queue tail moved without a change counted"
                    );
                }
                all_drained = false;
                stale.extend((0..s.values.len()).map(|i| key_at(&s.tail.prefix, s.start + i as i64)));
            }
            if t.blank_to_remove == s.blank_to_remove {
                t.blank_to_remove = None;
            }
            self.relist(&s.tail, &mut t);
        }
        for key in stale {
            self.entries.remove(key).map_err(|e| lsm_error(&self.dir, &e))?;
        }
        Ok(all_drained)
    }

    /// The snapshots' keys, in order, as one run straight into a table (`into_table`) or as
    /// one batch into the memtable; says of each snapshot whether all of it went.
    fn write_run(&self, snapshots: &[Snapshot], into_table: bool) -> Result<Vec<bool>> {
        let err = |e: fjall::Error| lsm_error(&self.dir, &e);
        if into_table {
            // The memtable goes through fjall's own flush first: only that path rotates and
            // trims the journal (an ingestion flushes the memtable itself, bypassing it, and
            // the journal of the removals and small batches would grow for ever).
            self.entries.rotate_memtable().map_err(err)?;
            let mut run = self.entries.start_ingestion().map_err(err)?;
            let written = each_key(snapshots, |key, value| {
                match value {
                    Some(v) => run.write(key, v.as_slice()),
                    None => run.write_tombstone(key),
                }
                .map_err(err)
            })?;
            run.finish().map_err(err)?;
            Ok(written)
        } else {
            let mut batch = self.db.batch();
            let written = each_key(snapshots, |key, value| {
                match value {
                    Some(v) => batch.insert(&self.entries, key, v.as_slice()),
                    None => batch.remove(&self.entries, key),
                }
                Ok(())
            })?;
            batch.commit().map_err(err)?;
            Ok(written)
        }
    }

    /// Lists `tail` for the next ingestion if it holds anything the LSM does not.
    fn relist(&self, tail: &Arc<Tail>, state: &mut TailState) {
        if !state.listed && (!state.values.is_empty() || state.blank_to_remove.is_some()) {
            state.listed = true;
            self.listed.lock().push(tail.clone());
        }
    }

    /// Whether `topic` / `queue_id` has any entry (a queue not opened in this run yet).
    pub fn holds(&self, topic: &str, queue_id: i32) -> Result<bool> {
        if topic.as_bytes().contains(&0) {
            // Not a name a queue can have (a key's topic ends at its first 0 byte).
            return Ok(false);
        }
        match self.entries.prefix(prefix(topic, queue_id)).next() {
            None => Ok(false),
            Some(g) => g.key().map(|_| true).map_err(|e| lsm_error(&self.dir, &e)),
        }
    }

    /// Removes every key of `topic` / `queue_id`, in steps of [`REMOVE_BATCH`]; returns how
    /// many. The caller keeps the queue from being opened meanwhile.
    pub(crate) fn remove_keys(&self, topic: &str, queue_id: i32) -> Result<usize> {
        let prefix = prefix(topic, queue_id);
        let mut removed = 0;
        let mut from = prefix.clone();
        loop {
            let mut batch = Vec::with_capacity(REMOVE_BATCH);
            for guard in self.entries.range(from.clone()..).take(REMOVE_BATCH) {
                let key = guard.key().map_err(|e| lsm_error(&self.dir, &e))?;
                if !key.starts_with(&prefix) {
                    break;
                }
                batch.push(key);
            }
            let Some(last) = batch.last() else { return Ok(removed) };
            // The next step starts just past the last key of this one.
            from = last.to_vec();
            from.push(0);
            for key in &batch {
                self.entries.remove(key.clone()).map_err(|e| lsm_error(&self.dir, &e))?;
            }
            removed += batch.len();
        }
    }

    /// Up to `max` queues the LSM holds, in key order from `cursor` (a queue's prefix, or empty
    /// for the first), with the cursor for the next call (empty after the last queue): one seek
    /// per queue, however many keys each has.
    pub(crate) fn queues_from(&self, cursor: &[u8], max: usize) -> Result<(Vec<QueueKey>, Vec<u8>)> {
        let mut found = Vec::with_capacity(max.min(1_024));
        let mut at = cursor.to_vec();
        while found.len() < max {
            let Some(guard) = self.entries.range(at.clone()..).next() else {
                return Ok((found, Vec::new()));
            };
            let key = guard.key().map_err(|e| lsm_error(&self.dir, &e))?;
            let name_end = key
                .iter()
                .position(|b| *b == 0)
                .ok_or_else(|| self.layout("a key without a topic".into()))?;
            let id_bytes: [u8; 4] = key
                .get(name_end + 1..name_end + 5)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| self.layout("a key without a queue id".into()))?;
            let topic = std::str::from_utf8(&key[..name_end]).map_err(|_| self.layout("a key whose topic is not text".into()))?;
            found.push((topic.to_owned(), i32::from_be_bytes(id_bytes)));
            // Past every key of this queue: its prefix followed by more than any offset.
            at = key[..name_end + 5].to_vec();
            at.extend_from_slice(&[0xFF; OFFSET_BYTES + 1]);
        }
        Ok((found, at))
    }

    fn key_offset(&self, key: &[u8]) -> Result<i64> {
        let at = key
            .len()
            .checked_sub(OFFSET_BYTES)
            .ok_or_else(|| self.layout(format!("a key of {} bytes", key.len())))?;
        let raw = u64::from_be_bytes(key[at..].try_into().expect("8 bytes"));
        i64::try_from(raw).map_err(|_| self.layout(format!("a queue offset of {raw}")))
    }

    /// The entry a value holds; `None` for the blank that keeps a queue's numbering once
    /// retention removed its last entry.
    fn decode(&self, value: &[u8]) -> Result<Option<CqEntry>> {
        if value.len() != ENTRY_BYTES {
            return Err(self.layout(format!("an entry of {} bytes", value.len())));
        }
        Ok(CqEntry::decode(value))
    }

    fn layout(&self, reason: String) -> StoreError {
        StoreError::Layout {
            path: self.dir.display().to_string(),
            reason,
        }
    }
}

/// Calls `write` with each key of `snapshots` in key order (a blank to remove, as `None`, before
/// the entries); says of each snapshot whether it went (whole: a snapshot is written all or
/// nothing).
fn each_key(snapshots: &[Snapshot], mut write: impl FnMut(Vec<u8>, Option<&[u8; ENTRY_BYTES]>) -> Result<()>) -> Result<Vec<bool>> {
    let mut last: Option<(&[u8], i64)> = None;
    let mut written = vec![true; snapshots.len()];
    for (s, whole) in snapshots.iter().zip(written.iter_mut()) {
        let first = s.blank_to_remove.unwrap_or(s.start);
        let end = s.start + s.values.len() as i64;
        // Prefix order is key order, and offsets are fixed-width: the pair orders as the key.
        let out_of_order = last.is_some_and(|l| (&*s.tail.prefix, first) <= l);
        if out_of_order || s.tail.state.lock().epoch != s.epoch {
            // Out of order: two tails of one queue, one of them removed meanwhile. Changed since
            // the copy: retention, a cut or a removal got there first. Either way the tail is
            // written whole at the next ingestion, and none of it now.
            if out_of_order {
                tracing::error!(queue_offset = first, "a light queue tail out of order; left for the next ingestion");
            }
            *whole = false;
            continue;
        }
        if let Some(blank) = s.blank_to_remove {
            write(key_at(&s.tail.prefix, blank), None)?;
        }
        for (i, v) in s.values.iter().enumerate() {
            write(key_at(&s.tail.prefix, s.start + i as i64), Some(v))?;
        }
        if s.blank_to_remove.is_some() || !s.values.is_empty() {
            last = Some((&*s.tail.prefix, if s.values.is_empty() { first } else { end - 1 }));
        }
    }
    Ok(written)
}

fn key_at(prefix: &[u8], queue_offset: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + OFFSET_BYTES);
    k.extend_from_slice(prefix);
    k.extend_from_slice(&u64::try_from(queue_offset).expect("queue offsets are never negative").to_be_bytes());
    k
}

fn prefix(topic: &str, queue_id: i32) -> Vec<u8> {
    let mut p = Vec::with_capacity(topic.len() + 5 + OFFSET_BYTES);
    p.extend_from_slice(topic.as_bytes());
    p.push(0);
    p.extend_from_slice(&queue_id.to_be_bytes());
    p
}

/// One light queue: its key prefix and (min, max), its tail, with the LSM it lives in.
pub struct LightQueue {
    store: Arc<LightQueues>,
    tail: Arc<Tail>,
    /// Queue offset of the first entry still stored.
    min_offset: AtomicI64,
    /// Queue offset the next entry will get.
    max_offset: AtomicI64,
    write: Mutex<()>,
}

impl LightQueue {
    /// Opens `topic` / `queue_id` from its keys: (min, max) from the first and last, after
    /// removing the stale ones: keys at or past `numbered_next` (the queue offset the log gives
    /// its next record: nothing was numbered there, so they are left from before a crash or a
    /// removal the log forgot) and entries past the log's recovered end (their records were
    /// cut). The caller holds the queue's place in the map, so nothing else writes its keys.
    pub fn open(store: &Arc<LightQueues>, topic: &str, queue_id: i32, numbered_next: i64) -> Result<LightQueue> {
        let q = LightQueue::new_empty(store, topic, queue_id)?;
        // From the last key back, in one pass: the stale tail, then the last key that stays.
        let mut stale = Vec::new();
        let mut max = 0;
        for guard in store.entries.prefix(&*q.tail.prefix).rev() {
            let (offset, entry) = q.pair(guard)?;
            let past_log = entry.is_some_and(|e| e.commit_log_offset + u64::from(e.size_bytes) > store.recovered_end);
            if offset < numbered_next && !past_log {
                max = offset + 1;
                break;
            }
            stale.push(offset);
        }
        for offset in &stale {
            q.remove(*offset)?;
        }
        if !stale.is_empty() {
            tracing::warn!(
                topic,
                queue_id,
                removed = stale.len(),
                numbered_next,
                "stale light queue entries removed"
            );
        }
        let Some((first, first_entry)) = q.first_key()? else {
            // Nothing left: the next entry starts the queue where the log numbers it.
            return Ok(q);
        };
        // A blank first key is the numbering's marker: every entry lies after it.
        let min = if first_entry.is_some() { first } else { first + 1 }.min(max);
        q.min_offset.store(min, Ordering::Release);
        q.max_offset.store(max, Ordering::Release);
        q.tail.state.lock().start = max;
        Ok(q)
    }

    /// A queue the LSM holds no key of (see [`LightQueues::holds`]): nothing to read back.
    pub fn new_empty(store: &Arc<LightQueues>, topic: &str, queue_id: i32) -> Result<LightQueue> {
        if topic.as_bytes().contains(&0) {
            return Err(store.layout(format!("a light queue name with a 0 byte: {topic:?}")));
        }
        Ok(LightQueue {
            store: store.clone(),
            tail: Arc::new(Tail {
                prefix: prefix(topic, queue_id).into_boxed_slice(),
                state: Mutex::new(TailState {
                    start: 0,
                    values: VecDeque::new(),
                    blank_to_remove: None,
                    epoch: 0,
                    listed: false,
                }),
            }),
            min_offset: AtomicI64::new(0),
            max_offset: AtomicI64::new(0),
            write: Mutex::new(()),
        })
    }

    fn key(&self, queue_offset: i64) -> Vec<u8> {
        key_at(&self.tail.prefix, queue_offset)
    }

    fn pair(&self, guard: fjall::Guard) -> Result<(i64, Option<CqEntry>)> {
        let (k, v) = guard.into_inner().map_err(|e| lsm_error(&self.store.dir, &e))?;
        Ok((self.store.key_offset(&k)?, self.store.decode(&v)?))
    }

    /// The queue's first key in the LSM, with its entry (`None` for a blank).
    fn first_key(&self) -> Result<Option<(i64, Option<CqEntry>)>> {
        self.store
            .entries
            .prefix(&*self.tail.prefix)
            .next()
            .map(|g| self.pair(g))
            .transpose()
    }

    /// Whether the queue holds no key at all, in its tail or in the LSM.
    fn holds_nothing(&self) -> Result<bool> {
        if !self.tail.state.lock().values.is_empty() {
            return Ok(false);
        }
        Ok(self.first_key()?.is_none())
    }

    /// Removes one key from the LSM (below the tail, or a stale one).
    fn remove(&self, queue_offset: i64) -> Result<()> {
        self.store
            .entries
            .remove(self.key(queue_offset))
            .map_err(|e| lsm_error(&self.store.dir, &e))
    }

    /// The entry at `queue_offset`: from the tail at or past its start, else from the LSM (an
    /// ingestion drops a tail's entries only once the LSM holds them).
    fn entry_at(&self, queue_offset: i64) -> Result<Option<CqEntry>> {
        {
            let t = self.tail.state.lock();
            if queue_offset >= t.start {
                let at = usize::try_from(queue_offset - t.start).expect("at or past the start");
                return Ok(t.values.get(at).and_then(|v| CqEntry::decode(v)));
            }
        }
        match self.store.entries.get(self.key(queue_offset)) {
            Ok(Some(v)) => self.store.decode(&v),
            Ok(None) => Ok(None),
            Err(e) => Err(lsm_error(&self.store.dir, &e)),
        }
    }

    /// Queue offset of the first entry still stored.
    pub fn min_offset(&self) -> i64 {
        self.min_offset.load(Ordering::Acquire)
    }

    /// Queue offset the next entry will get: one past the last stored.
    pub fn max_offset(&self) -> i64 {
        self.max_offset.load(Ordering::Acquire)
    }

    /// Entries in the tail, not in the LSM yet.
    #[must_use]
    pub fn tail_len(&self) -> usize {
        self.tail.state.lock().values.len()
    }

    /// The entry at `queue_offset`, if it is stored.
    pub fn get(&self, queue_offset: i64) -> Option<CqEntry> {
        if queue_offset < self.min_offset() || queue_offset >= self.max_offset() {
            return None;
        }
        self.entry_at(queue_offset).unwrap_or_else(|e| {
            tracing::error!(error = %e, "light queue entry unreadable");
            None
        })
    }

    /// Appends the entry for `queue_offset`; the dispatcher calls this in commit-log order.
    pub fn append(&self, queue_offset: i64, entry: CqEntry) -> Result<CqAppend> {
        let _w = self.write.lock();
        let mut max = self.max_offset();
        if queue_offset < max {
            match self.entry_at(queue_offset)? {
                Some(e) if e.commit_log_offset == entry.commit_log_offset => return Ok(CqAppend::Duplicate),
                None if queue_offset < self.min_offset() => return Ok(CqAppend::Duplicate),
                stale => {
                    tracing::warn!(
                        queue_offset, stale = ?stale.map(|e| e.commit_log_offset), log = entry.commit_log_offset,
                        "light queue entries disagree with the commit log; cutting the queue back to the log"
                    );
                    self.cut_back(queue_offset)?;
                    max = queue_offset;
                }
            }
        }
        if queue_offset > max && max == self.min_offset() && self.holds_nothing()? {
            // An empty queue starts where its first record says (a replica that joined late).
            self.min_offset.store(queue_offset, Ordering::Release);
            let mut t = self.tail.state.lock();
            t.start = queue_offset;
            t.epoch = t.epoch.wrapping_add(1);
            max = queue_offset;
        }
        if queue_offset > max {
            return Err(self
                .store
                .layout(format!("light queue gap: entry {queue_offset} after {max} entries")));
        }
        let drained = queue_offset > 0 && self.min_offset() == queue_offset;
        let mut t = self.tail.state.lock();
        if drained {
            // The queue was empty: the key before this one, if any, is the blank that kept the
            // numbering, and this entry keeps it now. In the tail, it goes now (the LSM never
            // had it, or an ingestion in flight removes it again: the epoch changes); in the
            // LSM, with the ingestion that writes this entry, so that a crash never leaves
            // neither.
            if t.values.is_empty() {
                t.blank_to_remove = Some(queue_offset - 1);
            } else {
                assert!(
                    t.values.len() == 1 && t.start == queue_offset - 1,
                    "a drained queue's tail is its blank"
                );
                t.values.clear();
                t.start = queue_offset;
                t.epoch = t.epoch.wrapping_add(1);
                self.store.tail_entries.fetch_sub(1, Ordering::AcqRel);
            }
        }
        assert_eq!(t.start + t.values.len() as i64, queue_offset, "a tail ends at the queue's max");
        t.values.push_back(entry.encode());
        self.store.tail_entries.fetch_add(1, Ordering::AcqRel);
        self.store.relist(&self.tail, &mut t);
        drop(t);
        self.max_offset.store(queue_offset + 1, Ordering::Release);
        Ok(CqAppend::Appended)
    }

    /// Cuts the queue back to `queue_offset` (entries the commit log contradicts): readers stop
    /// at the new max first, then the entries go, from the tail and from the LSM (at most
    /// `max - queue_offset` keys, what a crash left).
    fn cut_back(&self, queue_offset: i64) -> Result<()> {
        self.max_offset.store(queue_offset, Ordering::Release);
        let in_lsm = {
            let mut t = self.tail.state.lock();
            t.epoch = t.epoch.wrapping_add(1);
            if queue_offset >= t.start {
                let keep = usize::try_from(queue_offset - t.start).expect("at or past the start");
                let cut = t.values.len() - keep;
                t.values.truncate(keep);
                self.store.tail_entries.fetch_sub(cut, Ordering::AcqRel);
                queue_offset..queue_offset
            } else {
                let cut = t.values.len();
                t.values.clear();
                self.store.tail_entries.fetch_sub(cut, Ordering::AcqRel);
                let below = queue_offset..t.start;
                t.start = queue_offset;
                if t.blank_to_remove.is_some_and(|b| b >= queue_offset) {
                    t.blank_to_remove = None;
                }
                below
            }
        };
        for offset in in_lsm {
            self.remove(offset)?;
        }
        Ok(())
    }

    /// Removes the entries that point below `log_min` (records retention deleted), keeping the
    /// last key so that a restart still finds where the queue's numbering stands.
    pub fn delete_below(&self, log_min: u64) -> Result<()> {
        let _w = self.write.lock();
        let max = self.max_offset();
        let mut min = self.min_offset();
        // At most `max - min` steps: retention walks the queue's entries once.
        while min < max {
            match self.entry_at(min)? {
                Some(e) if e.commit_log_offset < log_min => {
                    self.delete_one(min, min + 1 == max)?;
                    min += 1;
                }
                _ => break,
            }
        }
        self.min_offset.store(min, Ordering::Release);
        Ok(())
    }

    /// Deletes the entry at `queue_offset` (the queue's first), in the tail or in the LSM; the
    /// `last` one becomes a blank instead, which keeps the numbering.
    fn delete_one(&self, queue_offset: i64, last: bool) -> Result<()> {
        {
            let mut t = self.tail.state.lock();
            if queue_offset >= t.start {
                assert_eq!(queue_offset, t.start, "retention deletes from the front");
                t.epoch = t.epoch.wrapping_add(1);
                if last {
                    t.values[0] = crate::consume_queue::blank_slot();
                } else {
                    t.values.pop_front();
                    t.start += 1;
                    self.store.tail_entries.fetch_sub(1, Ordering::AcqRel);
                }
                return Ok(());
            }
        }
        if last {
            self.store
                .entries
                .insert(self.key(queue_offset), crate::consume_queue::blank_slot().to_vec())
                .map_err(|e| lsm_error(&self.store.dir, &e))
        } else {
            self.remove(queue_offset)
        }
    }

    /// Removes every key of the queue (a light queue that expired, or its topic deleted); the
    /// caller holds the map so that no one opens it again meanwhile.
    pub fn remove_all(&self) -> Result<usize> {
        let _w = self.write.lock();
        let in_tail = {
            let mut t = self.tail.state.lock();
            let n = t.values.len();
            t.values.clear();
            t.values.shrink_to_fit();
            t.start += i64::try_from(n).expect("a tail's length fits an offset");
            t.blank_to_remove = None;
            t.epoch = t.epoch.wrapping_add(1);
            self.store.tail_entries.fetch_sub(n, Ordering::AcqRel);
            n
        };
        let (topic, queue_id) = self.name();
        let removed = self.store.remove_keys(topic, queue_id)?;
        self.min_offset.store(self.max_offset(), Ordering::Release);
        Ok(removed + in_tail)
    }

    /// The topic and queue id, from the prefix.
    fn name(&self) -> (&str, i32) {
        let prefix = &self.tail.prefix;
        let at = prefix.len() - 5;
        let topic = std::str::from_utf8(&prefix[..at]).expect("made from a &str");
        let id = i32::from_be_bytes(prefix[at + 1..].try_into().expect("4 bytes"));
        (topic, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(at: u64) -> CqEntry {
        CqEntry {
            commit_log_offset: at,
            size_bytes: 100,
            tags_code: 7,
        }
    }

    #[test]
    fn appends_skip_duplicates_refuse_gaps_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
            let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (0, 0));
            for i in 0..5 {
                assert_eq!(q.append(i, entry(i as u64 * 100)).unwrap(), CqAppend::Appended);
            }
            assert_eq!(q.append(3, entry(300)).unwrap(), CqAppend::Duplicate);
            assert!(q.append(7, entry(700)).is_err(), "a gap is refused");
            assert_eq!(q.get(4), Some(entry(400)));
            assert_eq!(q.get(5), None);
            // Another queue whose name extends this one's shares no keys with it.
            let other = LightQueue::open(&store, "%LMQ%ab", 0, i64::MAX).unwrap();
            assert_eq!(other.max_offset(), 0);
            assert!(!store.holds("%LMQ%a", 0).unwrap(), "the entries wait in the tail");
            assert!(store.settle(true).unwrap());
            assert_eq!(q.tail_len(), 0);
            assert!(store.holds("%LMQ%a", 0).unwrap());
            assert!(!store.holds("%LMQ%b", 0).unwrap());
            assert_eq!(q.get(4), Some(entry(400)), "read from the LSM now");
        }
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 5));
        assert_eq!(q.get(2), Some(entry(200)));
    }

    #[test]
    fn entries_past_the_recovered_log_and_stale_ones_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
            let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
            for i in 0..6 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            assert!(store.settle(true).unwrap());
        }
        // The log recovered to 350: entries 3.. (records at 300, 400, 500) were cut.
        let store = LightQueues::open(dir.path(), 350).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
        assert_eq!(q.max_offset(), 3);
        assert_eq!(q.get(3), None);
        assert_eq!(q.append(3, entry(360)).unwrap(), CqAppend::Appended);
        // A re-dispatch that finds another record at offset 1 cuts the queue back to it.
        assert_eq!(q.append(1, entry(150)).unwrap(), CqAppend::Appended);
        assert_eq!(q.max_offset(), 2);
        assert_eq!(q.get(1), Some(entry(150)));
        assert_eq!(q.get(2), None);
    }

    #[test]
    fn retention_keeps_the_numbering_and_a_late_queue_starts_where_its_first_entry_says() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
            let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
            for i in 0..4 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            q.delete_below(250).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (3, 4));
            q.delete_below(10_000).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (4, 4), "nothing readable");
            let late = LightQueue::open(&store, "%LMQ%late", 0, i64::MAX).unwrap();
            assert_eq!(late.append(40, entry(5_000)).unwrap(), CqAppend::Appended);
            assert_eq!((late.min_offset(), late.max_offset()), (40, 41));
            assert!(store.settle(true).unwrap());
        }
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
        assert_eq!(
            (q.min_offset(), q.max_offset()),
            (4, 4),
            "the blank last key keeps where the numbering stands"
        );
        assert_eq!(q.get(3), None);
        assert_eq!(q.remove_all().unwrap(), 1);
        assert!(!store.holds("%LMQ%a", 0).unwrap());
        let late = LightQueue::open(&store, "%LMQ%late", 0, i64::MAX).unwrap();
        assert_eq!((late.min_offset(), late.max_offset()), (40, 41));
    }

    #[test]
    fn keys_the_log_never_numbered_are_stale_and_queues_are_listed_one_seek_each() {
        let dir = tempfile::tempdir().unwrap();
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        for name in ["%LMQ%a", "%LMQ%ab", "%LMQ%b"] {
            let q = LightQueue::open(&store, name, 0, i64::MAX).unwrap();
            for i in 0..5 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
        }
        assert!(store.settle(true).unwrap());
        // The log numbers %LMQ%a's next record 3 (a crash took 3 and 4 from the log), and
        // forgot %LMQ%b (0): their keys past that are stale.
        let a = LightQueue::open(&store, "%LMQ%a", 0, 3).unwrap();
        assert_eq!((a.min_offset(), a.max_offset()), (0, 3));
        let b = LightQueue::open(&store, "%LMQ%b", 0, 0).unwrap();
        assert_eq!((b.min_offset(), b.max_offset()), (0, 0));
        assert!(!store.holds("%LMQ%b", 0).unwrap());
        assert!(!store.holds("%LMQ%a\0\0\0\0", 0).unwrap(), "a name with a 0 byte is no queue");
        assert!(LightQueue::open(&store, "%LMQ%a\0", 0, 1).is_err());
        // Listed in key order, from a cursor, a few at a time.
        let (first, cursor) = store.queues_from(&[], 1).unwrap();
        assert_eq!(first, [("%LMQ%a".to_owned(), 0)]);
        let (rest, end) = store.queues_from(&cursor, 10).unwrap();
        assert_eq!(rest, [("%LMQ%ab".to_owned(), 0)]);
        assert!(end.is_empty());
        // Removal in steps, past one step's worth.
        let big = LightQueue::open(&store, "%LMQ%big", 0, i64::MAX).unwrap();
        for i in 0..(REMOVE_BATCH as i64 * 2 + 5) {
            big.append(i, entry(i as u64)).unwrap();
        }
        assert!(store.settle(true).unwrap());
        assert_eq!(big.remove_all().unwrap(), REMOVE_BATCH * 2 + 5);
        assert!(!store.holds("%LMQ%big", 0).unwrap());
        assert!(store.holds("%LMQ%ab", 0).unwrap(), "the neighbours keep theirs");
    }

    #[test]
    fn a_drained_queue_that_gets_an_entry_again_reopens_with_it_readable() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
            // %LMQ%a's blank is still in its tail when the entry comes; %LMQ%b's is in the LSM.
            for (name, settled_between) in [("%LMQ%a", false), ("%LMQ%b", true)] {
                let q = LightQueue::open(&store, name, 0, i64::MAX).unwrap();
                for i in 0..3 {
                    q.append(i, entry(i as u64 * 100)).unwrap();
                }
                q.delete_below(10_000).unwrap();
                assert_eq!((q.min_offset(), q.max_offset()), (3, 3));
                if settled_between {
                    assert!(store.settle(true).unwrap());
                    assert_eq!(store.entries.prefix(prefix(name, 0)).count(), 1, "the blank alone");
                }
                q.append(3, entry(20_000)).unwrap();
            }
            assert!(store.settle(true).unwrap());
        }
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        for name in ["%LMQ%a", "%LMQ%b"] {
            let q = LightQueue::open(&store, name, 0, i64::MAX).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (3, 4), "{name}");
            assert_eq!(q.get(3), Some(entry(20_000)));
            assert_eq!(
                store.entries.prefix(prefix(name, 0)).count(),
                1,
                "{name}: the blank went with the new entry"
            );
        }
    }

    #[test]
    fn few_entries_go_at_each_flush_more_wait_for_an_ingestion_and_a_crash_loses_only_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let few = i64::try_from(TAIL_BATCH_ENTRIES).unwrap() - 1;
        {
            let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
            assert!(store.settle(false).unwrap(), "nothing listed: settled");
            let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
            for i in 0..few {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            assert!(store.settle(false).unwrap(), "one short of the batch bound: into the memtable");
            assert_eq!((q.tail_len(), store.tail_entries()), (0, 0));
            assert!(store.holds("%LMQ%a", 0).unwrap());
            for i in few..few + 1 + few {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            assert!(!store.settle(false).unwrap(), "at the batch bound, just opened: not due");
            assert_eq!(q.tail_len(), TAIL_BATCH_ENTRIES);
            assert_eq!(q.get(few + 1), Some(entry((few as u64 + 1) * 100)), "read from the tail");
            assert!(store.settle(true).unwrap());
            assert_eq!((q.tail_len(), store.tail_entries()), (0, 0));
            assert_eq!(q.get(few + 1), Some(entry((few as u64 + 1) * 100)), "read from the table");
            for i in 2 * few + 1..2 * few + 3 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            // Dropped here as a crash leaves it: the store re-dispatches the last two from the log.
        }
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 2 * few + 1));
        assert_eq!(q.append(2 * few + 1, entry(1)).unwrap(), CqAppend::Appended);
    }

    #[test]
    fn an_ingestion_is_due_at_its_entry_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let queues: Vec<LightQueue> = (0..4)
            .map(|i| LightQueue::open(&store, &format!("%LMQ%q{i}"), 0, i64::MAX).unwrap())
            .collect();
        for n in 0..TAIL_INGEST_ENTRIES - 1 {
            let q = &queues[n % queues.len()];
            q.append(q.max_offset(), entry(n as u64)).unwrap();
        }
        assert!(!store.settle(false).unwrap(), "one entry short of the bound");
        assert_eq!(store.tail_entries(), TAIL_INGEST_ENTRIES - 1);
        let q = &queues[0];
        q.append(q.max_offset(), entry(u64::MAX >> 2)).unwrap();
        assert!(store.settle(false).unwrap(), "at the bound");
        assert_eq!(store.tail_entries(), 0);
        let stored: usize = (0..4).map(|i| store.entries.prefix(prefix(&format!("%LMQ%q{i}"), 0)).count()).sum();
        assert_eq!(stored, TAIL_INGEST_ENTRIES);
    }

    #[test]
    fn the_tails_refuse_entries_at_their_bound_until_an_ingestion_takes_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
        for i in 0..TAIL_MAX_ENTRIES - 1 {
            q.append(i as i64, entry(i as u64)).unwrap();
        }
        store.check_room().unwrap();
        q.append(q.max_offset(), entry(1)).unwrap();
        match store.check_room() {
            Err(StoreError::LightTailsFull { entries, max }) => assert_eq!((entries, max), (TAIL_MAX_ENTRIES, TAIL_MAX_ENTRIES)),
            other => panic!("at the bound: {other:?}"),
        }
        assert!(store.settle(false).unwrap(), "due at this size");
        store.check_room().unwrap();
    }

    #[test]
    fn an_ingestion_overtaken_by_retention_a_cut_or_a_removal_leaves_the_lsm_as_the_tail_says() {
        let dir = tempfile::tempdir().unwrap();
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let in_lsm = |name: &str| store.entries.prefix(prefix(name, 0)).count();
        let (kept, cut, gone) = (
            LightQueue::open(&store, "%LMQ%kept", 0, i64::MAX).unwrap(),
            LightQueue::open(&store, "%LMQ%cut", 0, i64::MAX).unwrap(),
            LightQueue::open(&store, "%LMQ%gone", 0, i64::MAX).unwrap(),
        );
        for q in [&kept, &cut, &gone] {
            for i in 0..4 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
        }
        // The tails are copied and written, then changed before the run is drained.
        let snapshots = store.snapshot();
        let written = store.write_run(&snapshots, true).unwrap();
        assert_eq!((in_lsm("%LMQ%kept"), in_lsm("%LMQ%cut"), in_lsm("%LMQ%gone")), (4, 4, 4));
        kept.delete_below(250).unwrap();
        assert_eq!(cut.append(1, entry(999)).unwrap(), CqAppend::Appended, "the log disagrees at 1");
        gone.remove_all().unwrap();
        assert!(!store.drain(&snapshots, written).unwrap(), "the changed tails are not drained");
        assert_eq!((in_lsm("%LMQ%kept"), in_lsm("%LMQ%cut"), in_lsm("%LMQ%gone")), (0, 0, 0));
        assert_eq!((kept.tail_len(), cut.tail_len(), gone.tail_len()), (1, 2, 0));
        assert_eq!(cut.get(1), Some(entry(999)));
        assert!(store.settle(true).unwrap());
        assert_eq!((in_lsm("%LMQ%kept"), in_lsm("%LMQ%cut"), in_lsm("%LMQ%gone")), (1, 2, 0));
        assert_eq!((kept.min_offset(), kept.max_offset(), kept.get(3)), (3, 4, Some(entry(300))));
        assert_eq!((cut.max_offset(), cut.get(1), cut.get(2)), (2, Some(entry(999)), None));
        // Changed before the run is written: none of it is written.
        cut.append(2, entry(200)).unwrap();
        let snapshots = store.snapshot();
        assert_eq!(
            cut.append(1, entry(1_000)).unwrap(),
            CqAppend::Appended,
            "the log disagrees at 1 again"
        );
        assert!(!store.ingest(snapshots, true).unwrap());
        assert_eq!((cut.tail_len(), in_lsm("%LMQ%cut")), (1, 1));
        assert!(store.settle(true).unwrap());
        assert_eq!((cut.tail_len(), in_lsm("%LMQ%cut")), (0, 2));
        assert_eq!((cut.max_offset(), cut.get(1), cut.get(2)), (2, Some(entry(1_000)), None));
        // With only appends meanwhile, the run's entries leave the tail and the new ones stay.
        kept.append(4, entry(400)).unwrap();
        let snapshots = store.snapshot();
        kept.append(5, entry(500)).unwrap();
        assert!(store.ingest(snapshots, true).unwrap());
        assert_eq!((kept.tail_len(), in_lsm("%LMQ%kept")), (1, 2));
        assert!(store.settle(false).unwrap(), "the new entry, listed again, goes as a batch");
        assert_eq!((kept.tail_len(), in_lsm("%LMQ%kept")), (0, 3));
    }
}
