//! `ConsumeQueue`: the index of one topic-queue — 20-byte entries (commit-log offset i64, size
//! i32, tag hash i64), entry `n` for queue offset `n`, in fixed-size mapped segments.
//!
//! Owns: one queue's entries, its min/max offsets and its recovery. Must never: accept an
//! entry out of order — a duplicate (re-dispatch after a crash) is skipped, a gap is refused —
//! or keep an entry the commit log contradicts: a re-dispatched record whose slot holds another
//! commit-log offset means the slot is stale (the log gave that queue offset to a new record
//! after a crash), so the queue is cut back to it and the log's record takes the slot. Segments
//! are held as mappings only, without a file descriptor each.
//!
//! A queue's directory and segments are created without waiting on the disk (the dispatcher,
//! which creates them, would hold every consumer back for each fsync: a burst of new queues
//! took seconds); [`ConsumeQueue::flush`] makes them durable before the dispatch checkpoint
//! may pass their entries, and until it does the commit log holds every entry again. So a
//! segment that a power failure left short (or lost) was created after the last checkpoint: it
//! and every later segment are removed at open, and their entries are dispatched again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::error::{Result, StoreError};
use crate::mapped_file::{MappedFile, data_ranges, remove_partial_segments, sync_file};

/// Bytes of one entry.
pub const CQ_ENTRY_BYTES: u64 = 20;

/// The size word of a blank slot: written before the first entry of a queue that does not begin
/// at a segment's start (a replica that joined the master's log late), so that recovery can tell
/// "the queue begins later" from "these slots were lost" (zeros). RocketMQ fills such slots alike.
const BLANK_SIZE: i32 = i32::MAX;

pub(crate) fn blank_slot() -> [u8; 20] {
    let mut b = [0u8; 20];
    b[8..12].copy_from_slice(&BLANK_SIZE.to_be_bytes());
    b
}

/// One entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEntry {
    /// Where the record starts in the commit log.
    pub commit_log_offset: u64,
    /// The record's size in the commit log.
    pub size_bytes: u32,
    /// Hash of the record's tags, for filtering without reading the record.
    pub tags_code: i64,
}

impl CqEntry {
    pub(crate) fn encode(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[0..8].copy_from_slice(&(self.commit_log_offset as i64).to_be_bytes());
        b[8..12].copy_from_slice(&(self.size_bytes as i32).to_be_bytes());
        b[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<CqEntry> {
        let offset = i64::from_be_bytes(b[0..8].try_into().expect("8 bytes"));
        let size = i32::from_be_bytes(b[8..12].try_into().expect("4 bytes"));
        // An all-zero slot is unwritten; entry 0 of the log at offset 0 still has a size. A
        // blank (size i32::MAX) stands before a queue's first entry: no entry either.
        (offset >= 0 && size > 0 && size != BLANK_SIZE).then(|| CqEntry {
            commit_log_offset: offset as u64,
            size_bytes: size as u32,
            tags_code: i64::from_be_bytes(b[12..20].try_into().expect("8 bytes")),
        })
    }
}

/// What appending an entry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqAppend {
    /// Written in its slot.
    Appended,
    /// Already there (a re-dispatch after restart).
    Duplicate,
}

/// The consume queue of one topic-queue: where each of its messages lies in the commit log.
pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    dir: PathBuf,
    segment_bytes: u64,
    segments: RwLock<Vec<Arc<MappedFile>>>,
    /// Queue offset of the first entry still stored.
    min_offset: AtomicI64,
    /// Queue offset the next entry will get.
    max_offset: AtomicI64,
    write: Mutex<()>,
    /// What this queue (and the store's others) created without a sync since the last flush.
    pending: Arc<PendingSyncs>,
}

/// The segments and directories consume queues created without waiting on the disk, shared by
/// the queues of one store: a flush syncs each once, however many queues share a directory.
#[derive(Default)]
pub struct PendingSyncs {
    inner: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    /// Segments whose size and allocation are not yet durable.
    segments: Vec<PathBuf>,
    /// Directories whose entries (a topic's, a queue's, its segments') may not be durable.
    dirs: BTreeSet<PathBuf>,
}

impl PendingSyncs {
    /// Adds directories to sync before the next checkpoint.
    pub fn add_dirs(&self, dirs: impl IntoIterator<Item = PathBuf>) {
        self.inner.lock().dirs.extend(dirs);
    }

    fn add_segment(&self, path: PathBuf, dir: &Path) {
        let mut p = self.inner.lock();
        p.segments.push(path);
        p.dirs.insert(dir.to_path_buf());
    }

    /// Syncs every pending segment, then every pending directory, deepest first (a segment's
    /// name, then its queue's, then its topic's). What vanished meanwhile (a queue or topic
    /// removed) needs nothing. On an error everything taken stays pending for the next flush.
    ///
    /// # Errors
    /// A file or directory that exists but cannot be synced.
    pub fn sync(&self) -> Result<()> {
        let taken = std::mem::take(&mut *self.inner.lock());
        if taken.segments.is_empty() && taken.dirs.is_empty() {
            return Ok(());
        }
        let mut dirs: Vec<&PathBuf> = taken.dirs.iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        let synced = taken
            .segments
            .iter()
            .try_for_each(|path| present_or_gone(path, sync_file(path)))
            .and_then(|()| dirs.iter().try_for_each(|d| present_or_gone(d, crate::checkpoint::sync_dir(d))));
        if synced.is_err() {
            let mut p = self.inner.lock();
            p.segments.extend(taken.segments);
            p.dirs.extend(taken.dirs);
        }
        synced
    }
}

/// `result`, or `Ok` when it failed because `path` no longer exists.
fn present_or_gone(path: &Path, result: Result<()>) -> Result<()> {
    match result {
        Err(_) if !path.exists() => Ok(()),
        other => other,
    }
}

impl ConsumeQueue {
    /// Opens (or creates) the queue under `root/<topic>/<queue_id>`, recovering its end: the
    /// entry count after the last valid entry, minus any entry pointing at or past
    /// `commit_log_end` (those records were cut by the commit log's recovery).
    pub fn open(root: &Path, topic: &str, queue_id: i32, entries_per_segment: u64, commit_log_end: u64) -> Result<ConsumeQueue> {
        Self::open_with(root, topic, queue_id, entries_per_segment, commit_log_end, Arc::default())
    }

    /// [`ConsumeQueue::open`], with what it creates without a sync added to `pending` (the
    /// store's, synced once for all its queues before each dispatch checkpoint).
    pub fn open_with(
        root: &Path,
        topic: &str,
        queue_id: i32,
        entries_per_segment: u64,
        commit_log_end: u64,
        pending: Arc<PendingSyncs>,
    ) -> Result<ConsumeQueue> {
        assert!(entries_per_segment > 0);
        let dir = root.join(topic).join(queue_id.to_string());
        petrel_kit::fs::create_dir_deferred(&dir).map_err(|e| StoreError::io(&dir, e))?;
        // The topic's entry and the queue's, whether made now or by a queue whose open failed
        // before it could say so: syncing an entry that is already durable costs little. A
        // directory an earlier run made and crashed before syncing is the store's to sync
        // (`MessageStore::open` adds every queue's after an unclean stop).
        pending.add_dirs([root.to_path_buf(), root.join(topic)]);
        remove_partial_segments(&dir)?;
        let segment_bytes = entries_per_segment * CQ_ENTRY_BYTES;
        let mut found: Vec<u64> = std::fs::read_dir(&dir)
            .map_err(|e| StoreError::io(&dir, e))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        found.sort_unstable();
        remove_unsynced_tail(&dir, &mut found, segment_bytes)?;
        let mut segments = Vec::new();
        for start in found {
            segments.push(Arc::new(
                MappedFile::open(&dir.join(format!("{start:020}")), start, segment_bytes)?.mapping_only(),
            ));
        }
        // A queue that began mid-segment (on a replica that joined at a later segment of the
        // master's log) has blank slots before its first entry.
        let leading_empty = segments.first().map_or(0, |s| {
            (0..entries_per_segment)
                .take_while(|slot| {
                    let pos = usize::try_from(slot * CQ_ENTRY_BYTES).expect("a slot lies inside its segment, which is mapped whole");
                    s.slice(pos, 20) == blank_slot()
                })
                .count() as u64
        });
        let min_offset = segments
            .first()
            .map_or(0, |s| (s.start_offset() / CQ_ENTRY_BYTES + leading_empty) as i64);
        // The end: first slot that is empty or points past the commit log.
        let mut max_offset = min_offset;
        'scan: for (i, seg) in segments.iter().enumerate() {
            let first_slot = if i == 0 { leading_empty } else { 0 };
            for slot in first_slot..entries_per_segment {
                let pos = usize::try_from(slot * CQ_ENTRY_BYTES).expect("a slot lies inside its segment, which is mapped whole");
                match CqEntry::decode(seg.slice(pos, 20)) {
                    Some(e) if e.commit_log_offset + u64::from(e.size_bytes) <= commit_log_end => max_offset += 1,
                    _ => break 'scan,
                }
            }
        }
        let cq = ConsumeQueue {
            topic: topic.to_owned(),
            queue_id,
            dir,
            segment_bytes,
            segments: RwLock::new(segments),
            min_offset: AtomicI64::new(min_offset),
            max_offset: AtomicI64::new(max_offset),
            write: Mutex::new(()),
            pending,
        };
        cq.clear_from(max_offset)?;
        // The segment appends go to is mostly unwritten: no read-ahead there (full segments keep
        // it, for consumers that catch up).
        if let Some(last) = cq.segments.read().last() {
            last.advise_random();
        }
        Ok(cq)
    }

    /// Zeroes every slot from `queue_offset` on (stale entries past a recovered end). Only the
    /// file's data regions are read: the rest of a segment was never written, and reading it
    /// through the mapping would fault in every page (6 MB a queue at open).
    fn clear_from(&self, queue_offset: i64) -> Result<()> {
        let at = queue_offset as u64 * CQ_ENTRY_BYTES;
        for seg in self.segments.read().iter().filter(|s| s.start_offset() + self.segment_bytes > at) {
            let from = at.saturating_sub(seg.start_offset());
            let written = data_ranges(seg.path(), from, seg.len() as u64).into_iter().any(|(start, end)| {
                let (start, end) = (
                    usize::try_from(start).expect("inside the mapped segment"),
                    usize::try_from(end).expect("inside the mapped segment"),
                );
                seg.slice(start, end - start).iter().any(|b| *b != 0)
            });
            if written {
                let from = usize::try_from(from).expect("the segment ends past `at`, and is mapped whole");
                MappedFile::open(seg.path(), seg.start_offset(), self.segment_bytes)?.zero_range(from, usize::MAX)?;
            }
        }
        Ok(())
    }

    /// The topic this queue belongs to.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The queue's id within its topic.
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    /// Queue offset of the first entry still stored.
    pub fn min_offset(&self) -> i64 {
        self.min_offset.load(Ordering::Acquire)
    }

    /// Queue offset the next entry will get: one past the last stored.
    pub fn max_offset(&self) -> i64 {
        self.max_offset.load(Ordering::Acquire)
    }

    /// Appends the entry for `queue_offset`; the dispatcher calls this in commit-log order.
    pub fn append(&self, queue_offset: i64, entry: CqEntry) -> Result<CqAppend> {
        let _w = self.write.lock();
        let mut max = self.max_offset();
        if queue_offset < max {
            match self.entry_at(queue_offset) {
                Some(e) if e.commit_log_offset == entry.commit_log_offset => return Ok(CqAppend::Duplicate),
                // Below the min offset: retention removed it, nothing to check against.
                None if queue_offset < self.min_offset() => return Ok(CqAppend::Duplicate),
                stale => {
                    tracing::warn!(
                        topic = %self.topic, queue_id = self.queue_id, queue_offset,
                        stale = ?stale.map(|e| e.commit_log_offset), log = entry.commit_log_offset,
                        "consume-queue entries disagree with the commit log; cutting the queue back to the log"
                    );
                    // Readers stop at the max first, then the slots go.
                    self.max_offset.store(queue_offset, Ordering::Release);
                    self.clear_from(queue_offset)?;
                    max = queue_offset;
                }
            }
        }
        let starts_late = queue_offset > max && max == self.min_offset() && self.segments.read().is_empty();
        if starts_late {
            // An empty queue starts where its first record says: on a replica that joined at
            // a later segment of the master's log, queue offsets do not start at 0.
            self.min_offset.store(queue_offset, Ordering::Release);
            self.max_offset.store(queue_offset, Ordering::Release);
            max = queue_offset;
        }
        if queue_offset > max {
            return Err(StoreError::Layout {
                path: self.dir.display().to_string(),
                reason: format!("consume queue gap: entry {queue_offset} after {max} entries"),
            });
        }
        let at = queue_offset as u64 * CQ_ENTRY_BYTES;
        let start = at - at % self.segment_bytes;
        let seg = {
            let existing = self.segments.read().iter().find(|s| s.start_offset() == start).cloned();
            match existing {
                Some(s) => s,
                None => {
                    // Made durable by the next flush, before the checkpoint passes its entries.
                    let s = Arc::new(MappedFile::create_deferred(&self.dir, start, self.segment_bytes)?.mapping_only());
                    s.advise_random();
                    self.pending.add_segment(s.path().to_path_buf(), &self.dir);
                    self.segments.write().push(s.clone());
                    s
                }
            }
        };
        #[expect(
            clippy::cast_possible_truncation,
            reason = "at - start < segment_bytes, and the segment is mapped whole, so it fits usize"
        )]
        let pos = (at - start) as usize;
        if starts_late {
            // Blanks before the first entry (bounded by a segment's slots), so that a restart
            // finds the queue's start rather than mistaking the slots for lost ones.
            let blank = blank_slot();
            for blank_pos in (0..pos).step_by(blank.len()) {
                // SAFETY: the single writer writes slots below `min_offset`, which readers never read.
                unsafe { seg.write_at(blank_pos, &blank) };
            }
        }
        // SAFETY: the single writer (under `write`) writes the slot past `max_offset`, which
        // readers do not read until `max_offset` is published below.
        unsafe { seg.write_at(pos, &entry.encode()) };
        self.max_offset.store(queue_offset + 1, Ordering::Release);
        Ok(CqAppend::Appended)
    }

    /// The segments, oldest first.
    pub fn segments_snapshot(&self) -> Vec<Arc<MappedFile>> {
        self.segments.read().clone()
    }

    /// The entry at `queue_offset`, if it is stored.
    pub fn get(&self, queue_offset: i64) -> Option<CqEntry> {
        if queue_offset < self.min_offset() || queue_offset >= self.max_offset() {
            return None;
        }
        self.entry_at(queue_offset)
    }

    /// Drops the leading segments whose entries all point below `log_min` (records the commit
    /// log deleted) and moves the min offset to the first entry still backed by the log.
    pub fn delete_below(&self, log_min: u64) -> Result<()> {
        let _w = self.write.lock();
        loop {
            let victim = {
                let segs = self.segments.read();
                let (Some(first), true) = (segs.first(), segs.len() > 1) else {
                    break;
                };
                // The segment is mapped whole: its last 20 bytes are its last slot.
                let last_slot = first.len() - 20;
                match CqEntry::decode(first.slice(last_slot, 20)) {
                    Some(e) if e.commit_log_offset + u64::from(e.size_bytes) <= log_min => first.clone(),
                    _ => break,
                }
            };
            self.segments.write().retain(|s| !Arc::ptr_eq(s, &victim));
            std::fs::remove_file(victim.path()).map_err(|e| StoreError::io(victim.path(), e))?;
        }
        let first_start = self
            .segments
            .read()
            .first()
            .map_or(0, |s| (s.start_offset() / CQ_ENTRY_BYTES) as i64);
        let mut min = self.min_offset().max(first_start);
        while min < self.max_offset() && self.entry_at(min).is_some_and(|e| e.commit_log_offset < log_min) {
            min += 1;
        }
        self.min_offset.store(min, Ordering::Release);
        Ok(())
    }

    fn entry_at(&self, queue_offset: i64) -> Option<CqEntry> {
        let at = queue_offset as u64 * CQ_ENTRY_BYTES;
        let start = at - at % self.segment_bytes;
        let segs = self.segments.read();
        let seg = segs.iter().find(|s| s.start_offset() == start)?;
        #[expect(
            clippy::cast_possible_truncation,
            reason = "at - start < segment_bytes, and the segment is mapped whole, so it fits usize"
        )]
        let pos = (at - start) as usize;
        CqEntry::decode(seg.slice(pos, 20))
    }

    /// Makes the entries durable, and the segments and directories created without a sync
    /// since the last flush (this queue's, and those of the queues sharing its
    /// [`PendingSyncs`]). New segments are fsynced whole; a segment an earlier run made needs
    /// only its `msync`, an `fdatasync` of the range, which carries the size and allocation its
    /// data needs.
    pub fn flush(&self) -> Result<()> {
        for seg in self.segments.read().iter() {
            seg.flush_range(0, seg.len())?;
        }
        self.pending.sync()
    }
}

/// Removes the segments a power failure left incomplete: from the first one that is shorter than
/// a segment, or that does not follow its predecessor (a segment whose name was lost), to the
/// end. Such a segment was created after the last flush ([`MappedFile::create_deferred`]), and
/// so was every later one: the commit log still holds all their entries, and the dispatcher
/// files them again. Retention removes segments only from the front, so a live queue's
/// segments follow one another.
fn remove_unsynced_tail(dir: &Path, found: &mut Vec<u64>, segment_bytes: u64) -> Result<()> {
    let mut lens = Vec::with_capacity(found.len());
    for &start in found.iter() {
        let path = dir.join(format!("{start:020}"));
        lens.push(std::fs::metadata(&path).map_err(|e| StoreError::io(&path, e))?.len());
    }
    // Files of another layout (a longer segment, a start off the grid, or several of one same
    // short size: segments of another size, not a crash) are nothing to cut: opening them
    // refuses the queue, as it refuses any layout it does not know.
    let short: Vec<u64> = lens.iter().copied().filter(|l| *l < segment_bytes).collect();
    let same_short_size = short.len() > 1 && short.iter().all(|l| *l == short[0] && *l > 0);
    if lens.iter().any(|l| *l > segment_bytes) || found.iter().any(|s| s % segment_bytes != 0) || same_short_size {
        return Ok(());
    }
    let mut keep = found.len();
    for (i, &start) in found.iter().enumerate() {
        let follows = i == 0 || found[i - 1] + segment_bytes == start;
        if lens[i] < segment_bytes || !follows {
            keep = i;
            break;
        }
    }
    for &start in &found[keep..] {
        let path = dir.join(format!("{start:020}"));
        tracing::warn!(path = %path.display(), "removing a consume-queue segment that a crash left incomplete; its entries are dispatched again");
        std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
    }
    found.truncate(keep);
    Ok(())
}
