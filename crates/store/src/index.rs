//! `KeyIndex`: finds messages by key — each element of `KEYS` and the `UNIQ_KEY` — for
//! QUERY_MESSAGE. RocketMQ's IndexFile idea (a hash-slot table whose slots head chains of
//! entries, newest first), in our own layout: files under `index/`, each named by the commit-log
//! offset of its first record, `HEADER_BYTES` of header, then `slots` 4-byte slot heads, then
//! `capacity` 20-byte entries (`hash u32, commit-log offset u64, seconds since the file's first
//! record i32, previous entry of the chain u32`), entry numbers 1-based, 0 ending a chain.
//!
//! Built by the dispatcher from every record it reads; a record below the last file's `end` is
//! skipped. The files are flushed before each dispatch checkpoint, and at open the index is cut
//! back to that checkpoint, so whatever a crash (kill -9 or power loss) left unindexed or not
//! durable is indexed again by the re-dispatch. Lookups are hints: the store reads each
//! candidate record and keeps it only if its topic, key and store time match (hash collisions,
//! and entries for a log cut back after a crash, fall out there).
//!
//! Owns: the index files. Must never: stop the dispatcher (a file that cannot be created leaves
//! records unindexed and is logged), walk more than [`MAX_WALK`] entries per lookup, or keep a
//! file whose records retention removed.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, StoreError};
use crate::mapped_file::{MappedFile, remove_partial_segments};

/// Directory of the index files, under the store root.
pub const INDEX_DIR: &str = "index";
const HEADER_BYTES: usize = 64;
const SLOT_BYTES: usize = 4;
const ENTRY_BYTES: usize = 20;
const MAGIC: u32 = 0x5045_4958;
/// Entries one lookup examines at most, over all files.
pub const MAX_WALK: usize = 200_000;

/// Sizes of one index file (RocketMQ's `maxHashSlotNum`, `maxIndexNum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexConfig {
    /// Hash slots per file, each the head of a chain of entries.
    pub slots: u32,
    /// Entries per file; a full file is followed by a new one.
    pub capacity: u32,
}

impl Default for IndexConfig {
    fn default() -> IndexConfig {
        IndexConfig {
            slots: 262_144,
            capacity: 1_048_576,
        }
    }
}

impl IndexConfig {
    fn file_bytes(self) -> u64 {
        (HEADER_BYTES + self.slots as usize * SLOT_BYTES + self.capacity as usize * ENTRY_BYTES) as u64
    }
}

/// The header, kept in memory and written through to the file.
#[derive(Debug, Clone, Copy)]
struct Header {
    slots: u32,
    capacity: u32,
    entries: u32,
    /// Commit-log offset of the first record indexed here.
    begin: u64,
    /// Commit-log offset just past the last record indexed here.
    end: u64,
    begin_ms: i64,
    end_ms: i64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&self.slots.to_be_bytes());
        b[8..12].copy_from_slice(&self.capacity.to_be_bytes());
        b[12..16].copy_from_slice(&self.entries.to_be_bytes());
        b[16..24].copy_from_slice(&self.begin.to_be_bytes());
        b[24..32].copy_from_slice(&self.end.to_be_bytes());
        b[32..40].copy_from_slice(&self.begin_ms.to_be_bytes());
        b[40..48].copy_from_slice(&self.end_ms.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Header> {
        let u32_at = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let header = Header {
            slots: u32_at(4),
            capacity: u32_at(8),
            entries: u32_at(12),
            begin: u64_at(16),
            end: u64_at(24),
            begin_ms: u64_at(32) as i64,
            end_ms: u64_at(40) as i64,
        };
        (u32_at(0) == MAGIC && header.slots > 0 && header.entries <= header.capacity && header.end >= header.begin).then_some(header)
    }
}

struct IndexFile {
    file: Arc<MappedFile>,
    header: Header,
    /// A lookup read it since its pages were last released.
    looked_up: AtomicBool,
}

impl IndexFile {
    fn slot_pos(&self, hash: u32) -> usize {
        HEADER_BYTES + (hash % self.header.slots) as usize * SLOT_BYTES
    }

    fn entry_pos(&self, n: u32) -> usize {
        debug_assert!(n >= 1 && n <= self.header.capacity.max(1));
        HEADER_BYTES + self.header.slots as usize * SLOT_BYTES + (n as usize - 1) * ENTRY_BYTES
    }

    fn u32_at(&self, pos: usize) -> u32 {
        u32::from_be_bytes(self.file.slice(pos, 4).try_into().expect("4 bytes"))
    }

    /// Appends one entry and makes it its slot's head.
    fn add(&mut self, hash: u32, offset: u64, store_ms: i64) {
        assert!(self.header.entries < self.header.capacity, "index file full");
        let n = self.header.entries + 1;
        let slot = self.slot_pos(hash);
        let prev = self.u32_at(slot);
        let seconds = i32::try_from((store_ms - self.header.begin_ms).max(0) / 1000).unwrap_or(i32::MAX);
        let mut e = [0u8; ENTRY_BYTES];
        e[0..4].copy_from_slice(&hash.to_be_bytes());
        e[4..12].copy_from_slice(&offset.to_be_bytes());
        e[12..16].copy_from_slice(&seconds.to_be_bytes());
        e[16..20].copy_from_slice(&prev.to_be_bytes());
        // SAFETY: every access to the file goes through `&mut self` under the index's lock.
        unsafe {
            self.file.write_at(self.entry_pos(n), &e);
            self.file.write_at(slot, &n.to_be_bytes());
        }
        self.header.entries = n;
    }

    fn write_header(&self) {
        // SAFETY: as in `add`: exclusive under the index's lock.
        unsafe { self.file.write_at(0, &self.header.encode()) };
    }

    /// Offsets of the chain of `hash`, newest first, whose time may lie in `[begin_ms, end_ms]`;
    /// `walk` counts the entries examined.
    fn lookup(&self, hash: u32, begin_ms: i64, end_ms: i64, out: &mut Vec<u64>, walk: &mut usize, max: usize) {
        let mut n = self.u32_at(self.slot_pos(hash));
        while n != 0 && n <= self.header.entries && *walk < MAX_WALK && out.len() < max {
            *walk += 1;
            let e = self.file.slice(self.entry_pos(n), ENTRY_BYTES);
            let entry_hash = u32::from_be_bytes(e[0..4].try_into().expect("4 bytes"));
            let offset = u64::from_be_bytes(e[4..12].try_into().expect("8 bytes"));
            let seconds = i64::from(i32::from_be_bytes(e[12..16].try_into().expect("4 bytes")));
            let prev = u32::from_be_bytes(e[16..20].try_into().expect("4 bytes"));
            // Stored in whole seconds, rounded down: the message's time is in [at, at + 1 s).
            let at_ms = self.header.begin_ms + seconds * 1000;
            if entry_hash == hash && at_ms <= end_ms && at_ms + 1000 > begin_ms {
                out.push(offset);
            }
            // Chains run from newer to older entries; anything else is damage: stop.
            if prev >= n {
                break;
            }
            n = prev;
        }
    }
}

/// Entries of the newest file kept in memory after a flush: where new chains point.
pub const HOT_ENTRY_BYTES: usize = 1 << 20;

/// One file's share of [`KeyIndex::upkeep`].
pub struct Upkeep {
    pub file: Arc<MappedFile>,
    pub flush: bool,
    /// Taken out of memory after the flush.
    pub release: Range<usize>,
}

impl Upkeep {
    /// Flushes, then releases.
    ///
    /// # Errors
    /// The flush failed (nothing is released).
    pub fn run(&self) -> Result<()> {
        if self.flush {
            self.file.flush_range(0, self.file.len())?;
        }
        if !self.release.is_empty() {
            self.file.release(self.release.start, self.release.end);
        }
        Ok(())
    }
}

/// The index files, oldest first.
pub struct KeyIndex {
    dir: PathBuf,
    config: IndexConfig,
    files: Vec<IndexFile>,
}

/// A stable hash of `topic#key` (FNV-1a, 32 bits): the same on every run, unlike std's.
#[must_use]
pub fn key_hash(topic: &str, key: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in topic.bytes().chain(std::iter::once(b'#')).chain(key.bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

impl KeyIndex {
    /// Opens the files under `root/index` (a file whose header is unreadable is removed).
    ///
    /// # Errors
    /// The directory cannot be read or created.
    pub fn open(root: &Path, config: IndexConfig) -> Result<KeyIndex> {
        let dir = root.join(INDEX_DIR);
        petrel_kit::fs::create_dir_durably(&dir).map_err(|e| StoreError::io(&dir, e))?;
        remove_partial_segments(&dir)?;
        let mut names: Vec<(u64, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| StoreError::io(&dir, e))? {
            let path = entry.map_err(|e| StoreError::io(&dir, e))?.path();
            if let Some(start) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<u64>().ok()) {
                names.push((start, path));
            }
        }
        names.sort_unstable();
        let mut files = Vec::with_capacity(names.len());
        for (start, path) in names {
            let size = std::fs::metadata(&path).map_err(|e| StoreError::io(&path, e))?.len();
            let file = Arc::new(MappedFile::open(&path, start, size)?.mapping_only());
            match Header::decode(file.slice(0, HEADER_BYTES.min(file.len()))).filter(|h| {
                IndexConfig {
                    slots: h.slots,
                    capacity: h.capacity,
                }
                .file_bytes()
                    == size
            }) {
                Some(header) => files.push(IndexFile {
                    file,
                    header,
                    looked_up: AtomicBool::new(true),
                }),
                None => {
                    tracing::warn!(path = %path.display(), "index file unreadable; removed, its records are indexed again");
                    drop(file);
                    std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
                }
            }
        }
        Ok(KeyIndex { dir, config, files })
    }

    /// The commit-log offset just past the last record indexed (0: none).
    #[must_use]
    pub fn end(&self) -> u64 {
        self.files.last().map_or(0, |f| f.header.end)
    }

    /// The store time of the last record indexed.
    #[must_use]
    pub fn end_ms(&self) -> i64 {
        self.files.last().map_or(0, |f| f.header.end_ms)
    }

    /// Indexes the record at `offset` (`size_bytes` long) under each of `keys` for `topic`; a
    /// record below [`KeyIndex::end`] is already indexed and skipped.
    ///
    /// # Errors
    /// A new index file cannot be created (the disk is full): the record stays unindexed.
    pub fn add<'a>(&mut self, topic: &str, keys: impl Iterator<Item = &'a str>, offset: u64, size_bytes: u64, store_ms: i64) -> Result<()> {
        if offset < self.end() {
            return Ok(());
        }
        for key in keys.filter(|k| !k.is_empty()) {
            // A file whose blocks could not be allocated is never written through its mapping.
            if self
                .files
                .last()
                .is_none_or(|f| f.header.entries == f.header.capacity || !f.file.accepts_mapped_writes())
            {
                self.roll(offset, store_ms)?;
            }
            let file = self.files.last_mut().expect("rolled above");
            file.add(key_hash(topic, key), offset, store_ms);
        }
        if let Some(file) = self.files.last_mut().filter(|f| f.file.accepts_mapped_writes()) {
            file.header.end = offset + size_bytes;
            file.header.end_ms = file.header.end_ms.max(store_ms);
            file.write_header();
        }
        Ok(())
    }

    fn roll(&mut self, offset: u64, store_ms: i64) -> Result<()> {
        let file = Arc::new(MappedFile::create(&self.dir, offset, self.config.file_bytes())?.mapping_only());
        let header = Header {
            slots: self.config.slots,
            capacity: self.config.capacity,
            entries: 0,
            begin: offset,
            end: offset,
            begin_ms: store_ms,
            end_ms: store_ms,
        };
        let file = IndexFile {
            file,
            header,
            looked_up: AtomicBool::new(false),
        };
        file.write_header();
        self.files.push(file);
        Ok(())
    }

    /// Commit-log offsets of up to `max` records of `topic` that may carry `key` and were
    /// stored in `[begin_ms, end_ms]`, newest first, each once.
    #[must_use]
    pub fn lookup(&self, topic: &str, key: &str, max: usize, begin_ms: i64, end_ms: i64) -> Vec<u64> {
        let hash = key_hash(topic, key);
        let mut out = Vec::new();
        let mut walk = 0;
        for f in self.files.iter().rev() {
            if f.header.end_ms < begin_ms.saturating_sub(1000) || f.header.begin_ms > end_ms {
                continue;
            }
            f.looked_up.store(true, Ordering::Relaxed);
            f.lookup(hash, begin_ms, end_ms, &mut out, &mut walk, max);
            if out.len() >= max || walk >= MAX_WALK {
                break;
            }
        }
        let mut seen = std::collections::HashSet::with_capacity(out.len());
        out.retain(|o| seen.insert(*o));
        out
    }

    /// What the maintenance thread does without holding the index: flush the files that may
    /// hold entries not yet durable (the last two: one may have just been followed by the next),
    /// then take out of memory what is cold — all of an older file (once a lookup brought pages
    /// back), and the last file's entries but its newest [`HOT_ENTRY_BYTES`]. Its slot table
    /// stays, so the index's resident memory is about one slot table, whatever its size on disk.
    #[must_use]
    pub fn upkeep(&self) -> Vec<Upkeep> {
        let last = self.files.len().saturating_sub(1);
        let mut out = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            let flush = i + 2 > last;
            let release = if i == last {
                let entries_at = f.entry_pos(1);
                let written = entries_at + f.header.entries as usize * ENTRY_BYTES;
                entries_at..written.saturating_sub(HOT_ENTRY_BYTES).max(entries_at)
            } else if f.looked_up.swap(false, Ordering::Relaxed) || flush {
                0..f.file.len()
            } else {
                0..0
            };
            if flush || !release.is_empty() {
                out.push(Upkeep {
                    file: f.file.clone(),
                    flush,
                    release,
                });
            }
        }
        out
    }

    /// Forgets what was indexed at or past `offset`: after a restart the dispatcher starts at
    /// its checkpoint, and entries written past it may not have reached the disk before a power
    /// loss, so those records are indexed again (a record indexed twice is found once). Files
    /// that begin past `offset` are removed.
    ///
    /// # Errors
    /// A file cannot be removed.
    pub fn cut_to(&mut self, offset: u64) -> Result<()> {
        while self.files.last().is_some_and(|f| f.header.begin > offset) {
            let f = self.files.pop().expect("checked");
            let path = f.file.path().to_path_buf();
            drop(f);
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        }
        if let Some(f) = self
            .files
            .last_mut()
            .filter(|f| f.header.end > offset && f.file.accepts_mapped_writes())
        {
            f.header.end = offset;
            f.write_header();
        }
        Ok(())
    }

    /// Removes the files all of whose records lie below `log_min_offset` (retention removed
    /// them), except the last; returns how many.
    ///
    /// # Errors
    /// A file cannot be removed.
    pub fn delete_below(&mut self, log_min_offset: u64) -> Result<usize> {
        let mut removed = 0;
        while self.files.len() > 1 && self.files[0].header.end <= log_min_offset {
            let f = self.files.remove(0);
            let path = f.file.path().to_path_buf();
            drop(f);
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            removed += 1;
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: IndexConfig = IndexConfig { slots: 8, capacity: 5 };

    #[test]
    fn keys_are_found_newest_first_within_their_time_and_topic() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = KeyIndex::open(dir.path(), SMALL).unwrap();
        ix.add("T", ["order-1", "u-1"].into_iter(), 0, 100, 10_000).unwrap();
        ix.add("T", ["order-2"].into_iter(), 100, 100, 11_500).unwrap();
        ix.add("T", ["order-1"].into_iter(), 200, 100, 12_000).unwrap();
        ix.add("U", ["order-1"].into_iter(), 300, 100, 12_000).unwrap();
        assert_eq!(ix.lookup("T", "order-1", 10, 0, i64::MAX), [200, 0]);
        assert_eq!(ix.lookup("U", "order-1", 10, 0, i64::MAX), [300]);
        assert_eq!(ix.lookup("T", "order-1", 1, 0, i64::MAX), [200], "at most max");
        assert_eq!(ix.lookup("T", "order-1", 10, 11_000, 20_000), [200], "stored before the range");
        assert_eq!(
            ix.lookup("T", "order-2", 10, 11_600, 11_700),
            [100],
            "seconds are rounded down, so a lookup inside the second finds it"
        );
        assert_eq!(ix.lookup("T", "nothing", 10, 0, i64::MAX), Vec::<u64>::new());
        assert_eq!((ix.end(), ix.end_ms()), (400, 12_000));
    }

    #[test]
    fn a_full_file_is_followed_by_a_new_one_and_both_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = KeyIndex::open(dir.path(), SMALL).unwrap();
        for i in 0..12u64 {
            ix.add("T", ["k"].into_iter(), i * 10, 10, 1000).unwrap();
        }
        assert_eq!(ix.files.len(), 3, "5 + 5 + 2 entries");
        ix.add("T", ["k"].into_iter(), 50, 10, 1000).unwrap(); // below end: a re-dispatch
        drop(ix);
        let ix = KeyIndex::open(dir.path(), SMALL).unwrap();
        assert_eq!(ix.end(), 120);
        let all = ix.lookup("T", "k", 100, 0, i64::MAX);
        assert_eq!(all, (0..12u64).rev().map(|i| i * 10).collect::<Vec<_>>(), "each once, newest first");
    }

    #[test]
    fn a_damaged_file_is_removed_and_retention_drops_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = KeyIndex::open(dir.path(), SMALL).unwrap();
        for i in 0..11u64 {
            ix.add("T", ["k"].into_iter(), i * 10, 10, 1000).unwrap();
        }
        assert_eq!(ix.delete_below(50).unwrap(), 1, "the first file ends at 50");
        assert_eq!(ix.delete_below(10_000).unwrap(), 1, "never the last file");
        assert_eq!(ix.lookup("T", "k", 100, 0, i64::MAX), [100]);
        drop(ix);
        let last = dir.path().join(INDEX_DIR).join(crate::mapped_file::segment_name(100));
        let mut bytes = std::fs::read(&last).unwrap();
        bytes[0] ^= 0xff;
        std::fs::write(&last, bytes).unwrap();
        let ix = KeyIndex::open(dir.path(), SMALL).unwrap();
        assert_eq!((ix.files.len(), ix.end()), (0, 0), "removed; the dispatcher starts over");
    }

    #[test]
    fn cutting_back_forgets_what_lies_past_the_checkpoint_and_it_is_indexed_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = KeyIndex::open(dir.path(), SMALL).unwrap();
        for i in 0..8u64 {
            ix.add("T", ["k"].into_iter(), i * 10, 10, 1000).unwrap();
        }
        ix.cut_to(30).unwrap();
        assert_eq!((ix.files.len(), ix.end()), (1, 30), "the second file (from 50) removed");
        for i in 3..8u64 {
            ix.add("T", ["k"].into_iter(), i * 10, 10, 1000).unwrap();
        }
        let all = ix.lookup("T", "k", 100, 0, i64::MAX);
        assert_eq!(
            all,
            (0..8u64).rev().map(|i| i * 10).collect::<Vec<_>>(),
            "30 and 40 indexed twice, found once"
        );
    }

    #[test]
    fn upkeep_flushes_the_newest_files_and_releases_what_is_cold() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = KeyIndex::open(dir.path(), SMALL).unwrap();
        for i in 0..12u64 {
            ix.add("T", ["k"].into_iter(), i * 10, 10, 1000).unwrap();
        }
        let plan: Vec<(bool, usize)> = ix.upkeep().iter().map(|u| (u.flush, u.release.len())).collect();
        let file_bytes = usize::try_from(SMALL.file_bytes()).unwrap();
        assert_eq!(
            plan,
            [(true, file_bytes), (true, 0)],
            "the middle file whole; the last keeps its newest entries"
        );
        for u in ix.upkeep() {
            u.run().unwrap();
        }
        assert_eq!(ix.upkeep().len(), 2, "the oldest file is left alone until a lookup reads it");
        assert_eq!(
            ix.lookup("T", "k", 100, 0, i64::MAX).len(),
            12,
            "released pages read back from the file"
        );
        assert_eq!(ix.upkeep().len(), 3);
    }

    #[test]
    fn the_hash_is_stable() {
        assert_eq!(key_hash("T", "k"), key_hash("T", "k"));
        assert_ne!(key_hash("T", "k"), key_hash("U", "k"));
        assert_eq!(key_hash("", ""), 0x260c_9112, "FNV-1a of \"#\"");
    }
}
