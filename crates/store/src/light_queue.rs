//! `LightQueues`: the consume queues of light message queues (`%LMQ%…`) in one LSM (fjall), so
//! that a queue costs a key range instead of a directory, a segment and a mapping. A broker with
//! MQTT devices or lite topics has hundreds of thousands to millions of them, nearly all idle;
//! with a segment each they hit `vm.max_map_count` (65,530) long before.
//!
//! Owns: the LSM under `<root>/lightqueue` (its journal, tables, descriptor cache and worker
//! threads), and each light queue's (min, max), read from its keys when the queue is first used.
//! Must never: keep an entry the commit log contradicts or that points past the log's recovered
//! end, or let the dispatch checkpoint pass an entry that is not durable (the store persists the
//! LSM's journal before it writes the checkpoint, as it flushes the segments).
//!
//! A key is `topic 0x00 queue_id (4 bytes, big-endian) queue_offset (8 bytes, big-endian)` (no
//! topic name holds 0x00), its value the 20-byte entry of a segment slot: the keys of one queue
//! are contiguous and in offset order, so its first and last key are its min and max.
//!
//! The semantics are the segments' (see `consume_queue.rs`): a duplicate is skipped, a gap is
//! refused, a stale entry (another commit-log offset at the same queue offset, after a crash)
//! cuts the queue back to it, and a queue that starts late (on a replica) starts where its first
//! entry says.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

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
/// Keys one step of a removal collects before removing them: a queue's keys are removed in
/// steps of this many, so that a removal holds a bounded batch in memory whatever the queue's
/// length.
const REMOVE_BATCH: usize = 4_096;

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
                fjall::KeyspaceCreateOptions::default().max_memtable_size(MAX_MEMTABLE_BYTES)
            })
            .map_err(|e| lsm_error(&dir, &e))?;
        Ok(Arc::new(LightQueues {
            db,
            entries,
            dir,
            recovered_end,
        }))
    }

    /// Makes every entry written so far durable (the journal, fsynced).
    pub fn persist(&self) -> Result<()> {
        self.db.persist(fjall::PersistMode::SyncAll).map_err(|e| lsm_error(&self.dir, &e))
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

fn prefix(topic: &str, queue_id: i32) -> Vec<u8> {
    let mut p = Vec::with_capacity(topic.len() + 5 + OFFSET_BYTES);
    p.extend_from_slice(topic.as_bytes());
    p.push(0);
    p.extend_from_slice(&queue_id.to_be_bytes());
    p
}

/// One light queue: its key prefix and (min, max), with the LSM it lives in.
pub struct LightQueue {
    store: Arc<LightQueues>,
    prefix: Box<[u8]>,
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
        for guard in store.entries.prefix(&*q.prefix).rev() {
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
        let Some((first, first_entry)) = q.first_entry()? else {
            // Nothing left: the next entry starts the queue where the log numbers it.
            return Ok(q);
        };
        // A blank first key is the numbering's marker: every entry lies after it.
        let min = if first_entry.is_some() { first } else { first + 1 }.min(max);
        q.min_offset.store(min, Ordering::Release);
        q.max_offset.store(max, Ordering::Release);
        Ok(q)
    }

    /// A queue the LSM holds no key of (see [`LightQueues::holds`]): nothing to read back.
    pub fn new_empty(store: &Arc<LightQueues>, topic: &str, queue_id: i32) -> Result<LightQueue> {
        if topic.as_bytes().contains(&0) {
            return Err(store.layout(format!("a light queue name with a 0 byte: {topic:?}")));
        }
        Ok(LightQueue {
            store: store.clone(),
            prefix: prefix(topic, queue_id).into_boxed_slice(),
            min_offset: AtomicI64::new(0),
            max_offset: AtomicI64::new(0),
            write: Mutex::new(()),
        })
    }

    fn key(&self, queue_offset: i64) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + OFFSET_BYTES);
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(&u64::try_from(queue_offset).expect("queue offsets are never negative").to_be_bytes());
        k
    }

    fn pair(&self, guard: fjall::Guard) -> Result<(i64, Option<CqEntry>)> {
        let (k, v) = guard.into_inner().map_err(|e| lsm_error(&self.store.dir, &e))?;
        Ok((self.store.key_offset(&k)?, self.store.decode(&v)?))
    }

    fn first_entry(&self) -> Result<Option<(i64, Option<CqEntry>)>> {
        self.store.entries.prefix(&*self.prefix).next().map(|g| self.pair(g)).transpose()
    }

    fn remove(&self, queue_offset: i64) -> Result<()> {
        self.store
            .entries
            .remove(self.key(queue_offset))
            .map_err(|e| lsm_error(&self.store.dir, &e))
    }

    fn entry_at(&self, queue_offset: i64) -> Result<Option<CqEntry>> {
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
                    // Readers stop at the max first, then the keys go (the stale tail: what a
                    // crash left, at most `max - queue_offset` keys).
                    self.max_offset.store(queue_offset, Ordering::Release);
                    for offset in queue_offset..max {
                        self.remove(offset)?;
                    }
                    max = queue_offset;
                }
            }
        }
        if queue_offset > max && max == self.min_offset() && self.first_entry()?.is_none() {
            // An empty queue starts where its first record says (a replica that joined late).
            self.min_offset.store(queue_offset, Ordering::Release);
            max = queue_offset;
        }
        if queue_offset > max {
            return Err(self
                .store
                .layout(format!("light queue gap: entry {queue_offset} after {max} entries")));
        }
        self.store
            .entries
            .insert(self.key(queue_offset), entry.encode().to_vec())
            .map_err(|e| lsm_error(&self.store.dir, &e))?;
        let drained = queue_offset > 0 && self.min_offset() == queue_offset;
        self.max_offset.store(queue_offset + 1, Ordering::Release);
        if drained {
            // The queue was empty: the key before this one, if any, is the blank that kept the
            // numbering, and this entry keeps it now. Removed after the insert, so that a crash
            // between the two never leaves neither.
            self.remove(queue_offset - 1)?;
        }
        Ok(CqAppend::Appended)
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
                    if min + 1 < max {
                        self.remove(min)?;
                    } else {
                        // The last key stays, blank: a restart finds the numbering there.
                        self.store
                            .entries
                            .insert(self.key(min), crate::consume_queue::blank_slot().to_vec())
                            .map_err(|e| lsm_error(&self.store.dir, &e))?;
                    }
                    min += 1;
                }
                _ => break,
            }
        }
        self.min_offset.store(min, Ordering::Release);
        Ok(())
    }

    /// Removes every key of the queue (a light queue that expired, or its topic deleted); the
    /// caller holds the map so that no one opens it again meanwhile.
    pub fn remove_all(&self) -> Result<usize> {
        let _w = self.write.lock();
        let (topic, queue_id) = self.name();
        let removed = self.store.remove_keys(topic, queue_id)?;
        self.min_offset.store(self.max_offset(), Ordering::Release);
        Ok(removed)
    }

    /// The topic and queue id, from the prefix.
    fn name(&self) -> (&str, i32) {
        let at = self.prefix.len() - 5;
        let topic = std::str::from_utf8(&self.prefix[..at]).expect("made from a &str");
        let id = i32::from_be_bytes(self.prefix[at + 1..].try_into().expect("4 bytes"));
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
            assert!(store.holds("%LMQ%a", 0).unwrap());
            assert!(!store.holds("%LMQ%b", 0).unwrap());
            store.persist().unwrap();
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
            store.persist().unwrap();
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
            store.persist().unwrap();
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
        assert_eq!(big.remove_all().unwrap(), REMOVE_BATCH * 2 + 5);
        assert!(!store.holds("%LMQ%big", 0).unwrap());
        assert!(store.holds("%LMQ%ab", 0).unwrap(), "the neighbours keep theirs");
    }

    #[test]
    fn a_drained_queue_that_gets_an_entry_again_reopens_with_it_readable() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
            let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
            for i in 0..3 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            q.delete_below(10_000).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (3, 3));
            q.append(3, entry(20_000)).unwrap();
            store.persist().unwrap();
        }
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0, i64::MAX).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (3, 4));
        assert_eq!(q.get(3), Some(entry(20_000)));
        assert_eq!(
            store.entries.prefix(prefix("%LMQ%a", 0)).count(),
            1,
            "the blank went with the new entry"
        );
    }
}
