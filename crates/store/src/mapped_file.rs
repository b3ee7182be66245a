//! `MappedFile`: one fixed-size commit-log segment, named by its start offset (20 digits).
//!
//! Owns: creating (with the blocks reserved up front), mapping, writing into and flushing one
//! segment. Must never: let a write reach a hole in the file — on a full disk a write into a
//! sparse mmap kills the process with SIGBUS, so every block is allocated before the file is
//! used and a full disk surfaces as [`StoreError::DiskFull`] when a segment is created.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use memmap2::MmapMut;

use crate::error::{Result, StoreError};

/// Bytes asked for ahead of a reader going in order through a released range (see
/// [`MappedFile::advise_cold_read`]): enough that a consumer catching up from the local disk
/// finds its next pulls' pages read, as the cold tier's read-ahead does for the bucket.
pub const COLD_READ_AHEAD_BYTES: usize = 1 << 20;

/// Suffix of a segment still being created.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// Ranges of `path` in `[from, to)` that may hold data: the file system's data regions
/// (`SEEK_DATA` / `SEEK_HOLE`), so that a caller looking for written bytes skips the blocks that
/// were only allocated and never written (most of a young consume-queue segment) without
/// reading them. Where the file system cannot tell, or the regions are more than
/// [`MAX_DATA_RANGES`], the whole range.
pub fn data_ranges(path: &Path, from: u64, to: u64) -> Vec<(u64, u64)> {
    let whole = vec![(from, to)];
    let Ok(file) = File::open(path) else { return whole };
    let (Ok(mut at), Ok(end)) = (libc::off_t::try_from(from), libc::off_t::try_from(to)) else {
        return whole;
    };
    let mut ranges = Vec::new();
    // Bounded: each turn moves `at` past one data region, and there are at most MAX_DATA_RANGES.
    while at < end {
        // SAFETY: plain syscall on an open descriptor.
        let data = unsafe { libc::lseek(file.as_raw_fd(), at, libc::SEEK_DATA) };
        if data < 0 {
            // ENXIO: no data from `at` to the end of the file.
            return if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                ranges
            } else {
                whole
            };
        }
        if data >= end {
            break;
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(file.as_raw_fd(), data, libc::SEEK_HOLE) };
        if hole <= data || ranges.len() == MAX_DATA_RANGES {
            return whole;
        }
        let range_end = hole.min(end);
        ranges.push((data as u64, range_end as u64));
        at = range_end;
    }
    ranges
}

/// Data regions [`data_ranges`] lists before it gives up and returns the whole range.
pub const MAX_DATA_RANGES: usize = 1024;

/// Fsyncs a file by its path: its size and allocation (and anything written to it) are then
/// durable. For [`MappedFile::create_deferred`]'s files, whose descriptor is not kept.
///
/// # Errors
/// The file cannot be opened or synced.
pub fn sync_file(path: &Path) -> Result<()> {
    File::open(path).and_then(|f| f.sync_all()).map_err(|e| StoreError::io(path, e))
}

/// Removes segments whose creation a crash interrupted.
pub fn remove_partial_segments(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))? {
        let path = entry.map_err(|e| StoreError::io(dir, e))?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(PARTIAL_SUFFIX))
        {
            tracing::info!(path = %path.display(), "removing a segment whose creation was interrupted");
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        }
    }
    Ok(())
}

fn page_bytes() -> usize {
    usize::try_from(procfs::page_size()).unwrap_or(4096).max(4096)
}

/// The file name of the segment starting at `offset`.
pub fn segment_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// Bytes written per call when zero-filling a new segment.
const ZERO_CHUNK_BYTES: usize = 1 << 20;
/// Zero-filling runs at most this fast, so that it never takes the disk from the flusher: a
/// 1 GiB segment takes 4 s, while the writer needs over 128 MB/s to use up the half segment
/// left when filling starts.
const ZERO_FILL_BYTES_PER_SEC: u64 = 256 << 20;

/// Writes zeros over the whole file, paced, starting write-back chunk by chunk (no burst of
/// dirty pages for the kernel to write at once), and syncs it; `Interrupted` when cancelled.
fn write_zeros(file: &File, size_bytes: u64, cancelled: &impl Fn() -> bool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; ZERO_CHUNK_BYTES];
    let started = std::time::Instant::now();
    let mut at = 0;
    while at < size_bytes {
        if cancelled() {
            return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "cancelled"));
        }
        let n = usize::try_from(size_bytes - at).map_or(ZERO_CHUNK_BYTES, |left| left.min(ZERO_CHUNK_BYTES));
        file.write_all_at(&zeros[..n], at)?;
        // SAFETY: plain syscall on an open descriptor; it only starts write-back of the range.
        unsafe { libc::sync_file_range(file.as_raw_fd(), at as i64, n as i64, libc::SYNC_FILE_RANGE_WRITE) };
        at += n as u64;
        let due = std::time::Duration::from_secs_f64(at as f64 / ZERO_FILL_BYTES_PER_SEC as f64);
        if let Some(ahead) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
    file.sync_data()
}

pub struct MappedFile {
    path: PathBuf,
    start_offset: u64,
    /// Kept open for the commit log, which writes and syncs through it; `None` for files used
    /// only through the mapping (consume queues), so that a broker with many queues does not
    /// hold a descriptor per segment.
    file: Option<File>,
    map: MmapMut,
    /// Base of `map`, for writes through `&self` (see [`MappedFile::write_at`]).
    base: *mut u8,
    /// Every block of the file is allocated, so a store through the mapping cannot meet a full
    /// disk (which would be SIGBUS, not an error); see [`MappedFile::accepts_mapped_writes`].
    blocks_allocated: bool,
    /// What this handle wrote and synced, for the power-failure model (`power_loss`); kept
    /// only while a test asked for it.
    syncs: Option<crate::power_loss::SyncTrack>,
    /// `[0, cold_end_bytes)` was released and marked for random access (see
    /// [`MappedFile::release`]): reads there ask the kernel for their pages themselves
    /// ([`MappedFile::advise_cold_read`]).
    cold_end_bytes: AtomicUsize,
    /// End of the last read-ahead asked for an in-order reader of the released range (0:
    /// none since the last release); see [`MappedFile::advise_cold_read`].
    cold_ahead_to_bytes: AtomicUsize,
}

// SAFETY: `base` points into `map`, which lives as long as the struct; concurrent access is
// disciplined by the commit log (one writer under the put-message lock, readers only below the
// published offset, which the writer never touches again).
unsafe impl Send for MappedFile {}
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// Creates the segment file with every block allocated (`posix_fallocate`), then maps it.
    /// The file is prepared under a temporary name and renamed into place, so a crash never
    /// leaves a segment of the wrong size behind (leftovers are removed by
    /// [`remove_partial_segments`]).
    pub fn create(dir: &Path, start_offset: u64, size_bytes: u64) -> Result<MappedFile> {
        Self::create_with(dir, start_offset, size_bytes, || false, false)
    }

    /// [`MappedFile::create`] without its syncs: the file and its name reach the disk with the
    /// next write-back, or when the caller syncs them ([`sync_file`] and the directory) before
    /// it relies on them. For files that can be rebuilt, such as consume-queue segments (the
    /// commit log holds every entry again until the dispatch checkpoint passes them): the
    /// thread that creates them does not wait on the disk. A crash may then leave the file
    /// shorter than its size, or not there.
    pub fn create_deferred(dir: &Path, start_offset: u64, size_bytes: u64) -> Result<MappedFile> {
        Self::create_inner(dir, start_offset, size_bytes, &|| false, false, false)
    }

    /// [`MappedFile::create`], and with `zero_fill` every block is also written with zeros and
    /// synced before the file is put in place: its extents are then written extents, so a
    /// later `fdatasync` of data written into it carries no extent conversion (no journal
    /// commit). `cancelled` is asked between chunks; a cancelled creation leaves nothing.
    pub fn create_with(
        dir: &Path,
        start_offset: u64,
        size_bytes: u64,
        cancelled: impl Fn() -> bool,
        zero_fill: bool,
    ) -> Result<MappedFile> {
        Self::create_inner(dir, start_offset, size_bytes, &cancelled, zero_fill, true)
    }

    fn create_inner(
        dir: &Path,
        start_offset: u64,
        size_bytes: u64,
        cancelled: &dyn Fn() -> bool,
        zero_fill: bool,
        durable: bool,
    ) -> Result<MappedFile> {
        let path = dir.join(segment_name(start_offset));
        let tmp = dir.join(format!("{}{PARTIAL_SUFFIX}", segment_name(start_offset)));
        let _ = std::fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| StoreError::io(&tmp, e))?;
        // SAFETY: plain syscall on an open descriptor.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size_bytes as libc::off_t) };
        if rc != 0 {
            drop(file);
            let _ = std::fs::remove_file(&tmp);
            let err = std::io::Error::from_raw_os_error(rc);
            return Err(if rc == libc::ENOSPC || rc == libc::EDQUOT {
                StoreError::DiskFull {
                    path: path.display().to_string(),
                    size_bytes,
                }
            } else {
                StoreError::io(&tmp, err)
            });
        }
        if zero_fill && let Err(e) = write_zeros(&file, size_bytes, &cancelled) {
            drop(file);
            let _ = std::fs::remove_file(&tmp);
            return Err(StoreError::io(&tmp, e));
        }
        if durable {
            // The file's size and allocation are durable before its name is: a crash after the
            // rename never leaves a segment whose metadata the journal lost.
            file.sync_all().map_err(|e| StoreError::io(&tmp, e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| StoreError::io(&path, e))?;
        crate::power_loss::file_created(&path);
        if durable {
            crate::checkpoint::sync_dir(dir)?;
        }
        Self::map(path, file, start_offset, true)
    }

    /// Drops the file descriptor, keeping the mapping (which holds the file by itself): for
    /// files written and flushed only through the mapping. [`MappedFile::pwritev`] and
    /// [`MappedFile::sync_data`] then fail.
    #[must_use]
    pub fn mapping_only(mut self) -> MappedFile {
        self.file = None;
        self
    }

    fn fd(&self) -> Result<&File> {
        self.file
            .as_ref()
            .ok_or_else(|| StoreError::io(&self.path, std::io::Error::other("segment opened for mapped access only")))
    }

    /// Opens an existing segment, which must have exactly `size_bytes`.
    pub fn open(path: &Path, start_offset: u64, size_bytes: u64) -> Result<MappedFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        if len != size_bytes {
            return Err(StoreError::Layout {
                path: path.display().to_string(),
                reason: format!("segment has {len} bytes, expected {size_bytes}"),
            });
        }
        // A file another broker wrote may be sparse; allocating its holes now (a no-op for our
        // own files) is what lets writes go through the mapping. Where that fails (a full disk,
        // a file system without fallocate) the segment is written with system calls only.
        // SAFETY: plain syscall on an open descriptor.
        let allocated = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size_bytes as libc::off_t) } == 0;
        Self::map(path.to_path_buf(), file, start_offset, allocated)
    }

    fn map(path: PathBuf, file: File, start_offset: u64, blocks_allocated: bool) -> Result<MappedFile> {
        // SAFETY: the file is ours (the store holds its directory) and stays open while mapped;
        // nothing truncates it while the map lives.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| StoreError::io(&path, e))?;
        let base = map.as_mut_ptr();
        Ok(MappedFile {
            syncs: crate::power_loss::SyncTrack::register(&path),
            path,
            start_offset,
            file: Some(file),
            map,
            base,
            blocks_allocated,
            cold_end_bytes: AtomicUsize::new(0),
            cold_ahead_to_bytes: AtomicUsize::new(0),
        })
    }

    /// Whether [`MappedFile::copy_runs`] may be used: every block is allocated, so a store
    /// through the mapping never needs space the disk may not have.
    pub fn accepts_mapped_writes(&self) -> bool {
        self.blocks_allocated
    }

    /// Copies `runs` back to back from position `pos` through the mapping: no system call.
    ///
    /// # Safety
    /// As [`MappedFile::write_at`]: no other thread touches the range until it is published.
    pub unsafe fn copy_runs(&self, pos: usize, runs: &[Bytes]) {
        assert!(
            self.blocks_allocated,
            "mapped writes only into allocated blocks: {}",
            self.path.display()
        );
        let mut at = pos;
        for run in runs {
            // SAFETY: forwarded from the caller.
            unsafe { self.write_at(at, run) };
            at += run.len();
        }
    }

    pub fn start_offset(&self) -> u64 {
        self.start_offset
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies `bytes` to position `pos`.
    ///
    /// # Safety
    /// No other thread writes or reads `[pos, pos + bytes.len())` until the caller publishes it:
    /// the commit log writes only past its published offset, under the put-message lock.
    pub unsafe fn write_at(&self, pos: usize, bytes: &[u8]) {
        assert!(pos + bytes.len() <= self.map.len(), "write past the end of {}", self.path.display());
        if let Some(t) = &self.syncs {
            t.wrote(pos, bytes.len());
        }
        // SAFETY: in bounds (asserted); exclusive by the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(pos), bytes.len()) };
    }

    /// The bytes `[pos, pos + len)`. Callers read only what has been published (or, during
    /// recovery, before any writer exists).
    ///
    /// In a released range the kernel does no read-around (see [`MappedFile::release`]), so a
    /// read there first asks for its pages itself ([`MappedFile::advise_cold_read`]).
    pub fn slice(&self, pos: usize, len: usize) -> &[u8] {
        assert!(pos + len <= self.map.len(), "read past the end of {}", self.path.display());
        if pos < self.cold_end_bytes.load(Ordering::Acquire) && len > 0 {
            self.advise_cold_read(pos, len);
        }
        // SAFETY: in bounds; published bytes are never written again.
        unsafe { std::slice::from_raw_parts(self.base.add(pos), len) }
    }

    /// Asks the kernel for the pages of a read at `pos` in the released range, in one request
    /// (`MADV_WILLNEED`) rather than a fault per page.
    ///
    /// A lone read (a view by id, a lagging consumer's first pull, a probe of a search by
    /// time) asks for exactly its own pages and brings back nothing else. A reader going
    /// through the log in order (a consumer or a replica catching up) would then wait on the
    /// disk at every pull; it is told by the two pages before its read's first page being
    /// resident (its last reads brought them in; the read's own page is no sign, since a record
    /// is read as its header first, and one page is none either, since a search's last probes
    /// fall on neighbouring pages), and gets [`COLD_READ_AHEAD_BYTES`] past its read asked for
    /// as well. Its next reads inside that window make no system call; once less than half of
    /// the window is left ahead of a read, the window moves on. One window per mapping: readers
    /// interleaved in one segment take it from each other, and each then asks for a window at
    /// every read (larger requests, no more reads of the disk).
    fn advise_cold_read(&self, pos: usize, len: usize) {
        let end = pos + len;
        let page = page_bytes();
        let ahead_to = self.cold_ahead_to_bytes.load(Ordering::Relaxed);
        // A page of slack: a record's header read may have moved the window just past its start.
        let in_window = pos + COLD_READ_AHEAD_BYTES + page >= ahead_to && end <= ahead_to;
        if in_window && end + COLD_READ_AHEAD_BYTES / 2 <= ahead_to {
            return;
        }
        let first_page = pos / page * page;
        let in_order = in_window || (first_page >= 2 * page && self.resident_bytes(first_page - 2 * page, first_page) == 2 * page as u64);
        let (from, to) = if in_order {
            let to = (end + COLD_READ_AHEAD_BYTES).min(self.map.len());
            // Not over a release made since the load: its pages are gone, and the next read
            // must ask again rather than trust a window.
            let _ = self
                .cold_ahead_to_bytes
                .compare_exchange(ahead_to, to, Ordering::Relaxed, Ordering::Relaxed);
            // What the window already asked for is on its way: only the rest is asked.
            (if in_window { ahead_to } else { pos }, to)
        } else {
            (pos, end)
        };
        let from = from / page * page;
        if from >= to {
            return;
        }
        debug_assert!(from <= pos.max(ahead_to) && to >= end && to <= self.map.len());
        // SAFETY: a page-aligned start inside our mapping, an end within it; WILLNEED only
        // starts reads.
        unsafe { libc::madvise(self.base.add(from).cast(), to - from, libc::MADV_WILLNEED) };
    }

    /// Makes `[from, to)` durable (msync).
    pub fn flush_range(&self, from: usize, to: usize) -> Result<()> {
        if to > from {
            let high = self.syncs.as_ref().map(crate::power_loss::SyncTrack::high_water);
            self.map.flush_range(from, to - from).map_err(|e| StoreError::io(&self.path, e))?;
            if let (Some(t), Some(high), 0) = (&self.syncs, high, from) {
                t.synced(high.min(to as u64));
            }
        }
        Ok(())
    }

    /// Zeroes `[from, to)` and flushes it: cuts a torn tail during recovery, before any writer
    /// or reader exists, or stale consume-queue entries past a queue's end.
    pub fn zero_range(&mut self, from: usize, to: usize) -> Result<()> {
        let to = to.min(self.map.len());
        if from >= to {
            return Ok(());
        }
        self.map[from..to].fill(0);
        self.flush_range(from, to)
    }

    /// Writes `runs` back to back from position `pos` through the file with as few `pwritev`
    /// calls as the kernel allows.
    pub fn pwritev(&self, pos: usize, runs: &[Bytes]) -> Result<()> {
        const MAX_IOVECS: usize = 1024;
        let total: usize = runs.iter().map(Bytes::len).sum();
        assert!(pos + total <= self.map.len(), "write past the end of {}", self.path.display());
        let fd = self.fd()?.as_raw_fd();
        if let Some(t) = &self.syncs {
            t.wrote(pos, total);
        }
        let mut at = pos;
        for chunk in runs.chunks(MAX_IOVECS) {
            let mut slices: Vec<std::io::IoSlice<'_>> = chunk.iter().map(|b| std::io::IoSlice::new(b)).collect();
            let mut left: &mut [std::io::IoSlice<'_>] = &mut slices;
            while !left.is_empty() {
                #[expect(clippy::cast_possible_truncation, reason = "at most MAX_IOVECS (1024) iovecs per call")]
                // SAFETY: the iovecs point into live buffers borrowed for this call; the
                // descriptor is open.
                let n = unsafe { libc::pwritev(fd, left.as_ptr().cast(), left.len() as i32, at as i64) };
                if n < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(StoreError::io(&self.path, e));
                }
                if n == 0 {
                    return Err(StoreError::io(&self.path, std::io::ErrorKind::WriteZero.into()));
                }
                at += n as usize;
                std::io::IoSlice::advance_slices(&mut left, n as usize);
            }
        }
        Ok(())
    }

    /// Bytes of `[from, to)` that are in the page cache now (`mincore`).
    pub fn resident_bytes(&self, from: usize, to: usize) -> u64 {
        let page = page_bytes();
        let from = from / page * page;
        let to = to.min(self.map.len());
        if from >= to {
            return 0;
        }
        let pages = (to - from).div_ceil(page);
        let mut vec = vec![0u8; pages];
        // SAFETY: the range lies in our mapping (page aligned start, clamped end); `vec` has a
        // byte per page.
        let rc = unsafe { libc::mincore(self.base.add(from).cast(), to - from, vec.as_mut_ptr()) };
        if rc != 0 {
            return 0;
        }
        vec.iter().filter(|b| **b & 1 == 1).count() as u64 * page as u64
    }

    /// Takes `[from, to)` out of this process's memory and, where its pages are clean, out of
    /// the page cache (`MADV_DONTNEED`, then `POSIX_FADV_DONTNEED`): for ranges that are
    /// durable and cold. Dirty pages stay cached until written back; a later read faults the
    /// data in again. Returns whether anything was asked of the kernel.
    ///
    /// The range is also marked `MADV_RANDOM`: a fault there would otherwise read around it
    /// (up to the device's `read_ahead_kb`, often megabytes — a whole small segment), so one
    /// cold read by key or a lagging consumer's first pull would undo the release.
    /// Marked ranges start at 0 and only grow, so a segment keeps at most two mappings' worth
    /// of kernel areas (cold, then the rest), whatever the number of releases.
    pub fn release(&self, from: usize, to: usize) -> bool {
        let page = page_bytes();
        let from = from.div_ceil(page) * page;
        let to = (to.min(self.map.len())) / page * page;
        if from >= to {
            return false;
        }
        // SAFETY: a page-aligned range of our own shared file mapping; DONTNEED on it only
        // drops this process's page-table entries (the file keeps the data), RANDOM only
        // changes how later faults read.
        unsafe { libc::madvise(self.base.add(from).cast(), to - from, libc::MADV_DONTNEED) };
        // A read-ahead window in the range is gone with its pages: the next in-order read
        // asks again.
        self.cold_ahead_to_bytes.store(0, Ordering::Relaxed);
        if from == 0 && to > self.cold_end_bytes.load(Ordering::Acquire) {
            // SAFETY: as above.
            unsafe { libc::madvise(self.base.cast(), to, libc::MADV_RANDOM) };
            self.cold_end_bytes.fetch_max(to, Ordering::AcqRel);
        }
        let reopened;
        let fd = match &self.file {
            Some(f) => f.as_raw_fd(),
            None => match File::open(&self.path) {
                Ok(f) => {
                    reopened = f;
                    reopened.as_raw_fd()
                }
                Err(_) => return true,
            },
        };
        // SAFETY: plain syscall on an open descriptor.
        unsafe { libc::posix_fadvise(fd, from as libc::off_t, (to - from) as libc::off_t, libc::POSIX_FADV_DONTNEED) };
        true
    }

    /// Marks the whole mapping `MADV_RANDOM`: a fault reads its own page, not the pages around
    /// it. For consume-queue segments, where a fault is one slot's page: the first entry of a new
    /// queue would otherwise read ahead (and zero-fill) megabytes of blocks never written, which
    /// made each new queue cost the dispatcher milliseconds. One mark of the whole range keeps
    /// the mapping one kernel area.
    pub fn advise_random(&self) {
        // SAFETY: our own mapping, whole; RANDOM only changes how later faults read.
        unsafe { libc::madvise(self.base.cast(), self.map.len(), libc::MADV_RANDOM) };
        // `cold_end_bytes` stays: reads of a slot's 20 bytes need no WILLNEED each.
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Makes every byte written through the file durable (`fdatasync`).
    pub fn sync_data(&self) -> Result<()> {
        let high = self.syncs.as_ref().map(crate::power_loss::SyncTrack::high_water);
        self.fd()?.sync_data().map_err(|e| StoreError::io(&self.path, e))?;
        if let (Some(t), Some(high)) = (&self.syncs, high) {
            t.synced(high);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a released range a lone read asks for its own pages only; a reader going on in
    /// order gets a window read ahead, asks nothing while inside it, moves it on once half of
    /// it is read, and a release forgets it.
    #[test]
    fn an_in_order_reader_of_a_released_range_gets_a_window_read_ahead() {
        const SIZE: usize = 8 << 20;
        let dir = tempfile::tempdir().expect("a directory");
        let file = MappedFile::create(dir.path(), 0, SIZE as u64).expect("created");
        // SAFETY: nobody else reads or writes this file.
        unsafe { file.write_at(0, &vec![1_u8; SIZE]) };
        file.flush_range(0, SIZE).expect("flushed");
        assert!(file.release(0, SIZE));
        let window = || file.cold_ahead_to_bytes.load(Ordering::Relaxed);
        let read = |pos: usize, len: usize| std::hint::black_box(file.slice(pos, len)[len - 1]);
        let (at, page) = (3 << 20, page_bytes());
        if file.resident_bytes(0, SIZE) > 0 {
            eprintln!("skipped: the file system kept the released pages (tmpfs?)");
            return;
        }
        assert_eq!(read(at, 8), 1);
        assert_eq!(read(at, 100), 1);
        assert_eq!(window(), 0, "a lone read (its header, then itself) asks for its own pages only");
        read(at + page, 100);
        assert_eq!(window(), 0, "one page before a read is no sign of an in-order reader");
        // The two pages before the next read's are resident now: reading on is in order.
        let next = at + 2 * page + 100;
        read(next, 100);
        let first = next + 100 + COLD_READ_AHEAD_BYTES;
        assert_eq!(window(), first);
        read(next + 100, 4000);
        assert_eq!(window(), first, "inside the window nothing more is asked");
        let past_half = first - COLD_READ_AHEAD_BYTES / 2 + 1;
        read(past_half, 100);
        assert_eq!(window(), past_half + 100 + COLD_READ_AHEAD_BYTES, "the window moves on");
        read(SIZE - 2 * page - 100, 100);
        read(SIZE - page - 100, 100);
        assert_eq!(window(), past_half + 100 + COLD_READ_AHEAD_BYTES, "lone reads leave the window");
        read(SIZE - 50, 50);
        assert_eq!(window(), SIZE, "the window ends with the mapping");
        assert!(file.release(0, SIZE));
        assert_eq!(window(), 0, "a release forgets the window");
    }
}
