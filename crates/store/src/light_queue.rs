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

use crate::consume_queue::{CqAppend, CqEntry};
use crate::error::{Result, StoreError};

/// Where the LSM lives under the store's root.
pub const LIGHT_QUEUE_DIR: &str = "lightqueue";

/// Table files the LSM keeps open at most: the bound on its descriptors, whatever the number of
/// queues.
const MAX_OPEN_TABLES: usize = 256;
/// The LSM's block cache.
const CACHE_BYTES: u64 = 16 << 20;
/// Journal kept before memtables are flushed to tables: what a start after a crash replays at
/// most, so recovery is bounded by it rather than by the number of queues.
const MAX_JOURNAL_BYTES: u64 = 64 << 20;
/// Background flush and compaction threads.
const WORKER_THREADS: usize = 1;
/// Entries one cut of a stale tail or one removal looks at, at most, per call: a light queue's
/// stale tail is what a crash left past the log's end, and a removed queue holds nothing
/// readable; the bound keeps a damaged keyspace from holding the dispatcher.
const MAX_REMOVED_PER_CALL: usize = 1 << 20;

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
            .keyspace("entries", fjall::KeyspaceCreateOptions::default)
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
        match self.entries.prefix(prefix(topic, queue_id)).next() {
            None => Ok(false),
            Some(g) => g.key().map(|_| true).map_err(|e| lsm_error(&self.dir, &e)),
        }
    }

    /// Bytes the LSM holds on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
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
    /// removing the entries that point past the log's recovered end.
    pub fn open(store: &Arc<LightQueues>, topic: &str, queue_id: i32) -> Result<LightQueue> {
        assert!(!topic.as_bytes().contains(&0), "no topic name holds a 0 byte");
        let q = LightQueue {
            store: store.clone(),
            prefix: prefix(topic, queue_id).into_boxed_slice(),
            min_offset: AtomicI64::new(0),
            max_offset: AtomicI64::new(0),
            write: Mutex::new(()),
        };
        let Some((first, first_entry)) = q.first_entry()? else {
            return Ok(q);
        };
        let mut max = first;
        let mut removed = 0;
        while let Some((offset, entry)) = q.last_entry()? {
            match entry {
                Some(e) if e.commit_log_offset + u64::from(e.size_bytes) > store.recovered_end => {
                    // Written before a crash that cut its record from the log: dispatched again
                    // if the log numbers a new record there.
                    assert!(removed < MAX_REMOVED_PER_CALL, "a light queue's cut tail is bounded");
                    q.remove(offset)?;
                    removed += 1;
                    max = offset;
                }
                _ => {
                    max = offset + 1;
                    break;
                }
            }
        }
        if removed > 0 {
            tracing::warn!(
                topic,
                queue_id,
                removed,
                "light queue entries past the recovered commit log removed"
            );
        }
        // A blank first key is the numbering's marker, the queue's only key: nothing readable.
        let min = if first_entry.is_some() { first.min(max) } else { max };
        q.min_offset.store(min, Ordering::Release);
        q.max_offset.store(max, Ordering::Release);
        Ok(q)
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

    fn last_entry(&self) -> Result<Option<(i64, Option<CqEntry>)>> {
        self.store
            .entries
            .prefix(&*self.prefix)
            .next_back()
            .map(|g| self.pair(g))
            .transpose()
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
                    // Readers stop at the max first, then the keys go.
                    self.max_offset.store(queue_offset, Ordering::Release);
                    let cut = usize::try_from(max - queue_offset).unwrap_or(usize::MAX);
                    assert!(cut <= MAX_REMOVED_PER_CALL, "a stale tail is what a crash left: bounded");
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
        self.max_offset.store(queue_offset + 1, Ordering::Release);
        Ok(CqAppend::Appended)
    }

    /// Removes the entries that point below `log_min` (records retention deleted), keeping the
    /// last key so that a restart still finds where the queue's numbering stands.
    pub fn delete_below(&self, log_min: u64) -> Result<()> {
        let _w = self.write.lock();
        let max = self.max_offset();
        let mut min = self.min_offset();
        let mut removed = 0;
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
                    removed += 1;
                    assert!(removed <= MAX_REMOVED_PER_CALL * 64, "retention walks a queue once");
                }
                _ => break,
            }
        }
        self.min_offset.store(min, Ordering::Release);
        Ok(())
    }

    /// Removes every key of the queue (a light queue that expired, or its topic deleted).
    pub fn remove_all(&self) -> Result<usize> {
        let _w = self.write.lock();
        // The keys first, in one pass: removing while walking would walk each removal again.
        let mut keys = Vec::new();
        for guard in self.store.entries.prefix(&*self.prefix) {
            assert!(
                keys.len() < MAX_REMOVED_PER_CALL,
                "a removed light queue holds nothing readable: bounded"
            );
            keys.push(guard.key().map_err(|e| lsm_error(&self.store.dir, &e))?);
        }
        for key in &keys {
            self.store.entries.remove(key.clone()).map_err(|e| lsm_error(&self.store.dir, &e))?;
        }
        self.min_offset.store(self.max_offset(), Ordering::Release);
        Ok(keys.len())
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
            let q = LightQueue::open(&store, "%LMQ%a", 0).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (0, 0));
            for i in 0..5 {
                assert_eq!(q.append(i, entry(i as u64 * 100)).unwrap(), CqAppend::Appended);
            }
            assert_eq!(q.append(3, entry(300)).unwrap(), CqAppend::Duplicate);
            assert!(q.append(7, entry(700)).is_err(), "a gap is refused");
            assert_eq!(q.get(4), Some(entry(400)));
            assert_eq!(q.get(5), None);
            // Another queue whose name extends this one's shares no keys with it.
            let other = LightQueue::open(&store, "%LMQ%ab", 0).unwrap();
            assert_eq!(other.max_offset(), 0);
            assert!(store.holds("%LMQ%a", 0).unwrap());
            assert!(!store.holds("%LMQ%b", 0).unwrap());
            store.persist().unwrap();
        }
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 5));
        assert_eq!(q.get(2), Some(entry(200)));
    }

    #[test]
    fn entries_past_the_recovered_log_and_stale_ones_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
            let q = LightQueue::open(&store, "%LMQ%a", 0).unwrap();
            for i in 0..6 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            store.persist().unwrap();
        }
        // The log recovered to 350: entries 3.. (records at 300, 400, 500) were cut.
        let store = LightQueues::open(dir.path(), 350).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0).unwrap();
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
            let q = LightQueue::open(&store, "%LMQ%a", 0).unwrap();
            for i in 0..4 {
                q.append(i, entry(i as u64 * 100)).unwrap();
            }
            q.delete_below(250).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (3, 4));
            q.delete_below(10_000).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (4, 4), "nothing readable");
            let late = LightQueue::open(&store, "%LMQ%late", 0).unwrap();
            assert_eq!(late.append(40, entry(5_000)).unwrap(), CqAppend::Appended);
            assert_eq!((late.min_offset(), late.max_offset()), (40, 41));
            store.persist().unwrap();
        }
        let store = LightQueues::open(dir.path(), u64::MAX).unwrap();
        let q = LightQueue::open(&store, "%LMQ%a", 0).unwrap();
        assert_eq!(
            (q.min_offset(), q.max_offset()),
            (4, 4),
            "the blank last key keeps where the numbering stands"
        );
        assert_eq!(q.get(3), None);
        assert_eq!(q.remove_all().unwrap(), 1);
        assert!(!store.holds("%LMQ%a", 0).unwrap());
        let late = LightQueue::open(&store, "%LMQ%late", 0).unwrap();
        assert_eq!((late.min_offset(), late.max_offset()), (40, 41));
    }
}
