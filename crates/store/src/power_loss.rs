//! What a power failure leaves of a store directory — a model, for tests.
//!
//! `kill -9` keeps the page cache, so it cannot catch a missing sync; a power failure keeps only
//! what was synced. Once a test calls [`record_syncs`], every segment file (commit log and
//! consume queue) notes where its handle wrote and which of it a sync (`fdatasync`, `msync`)
//! covered. After a crash — the store halted at an instant, or dropped without `close` —
//! [`drop_unsynced`] rebuilds the files from that record: every byte a sync covered is kept;
//! past the first byte no sync covered, each 4 KiB page reached the disk or not at random
//! (write-back runs in any order), and a page that did not reads zeros from there on (segments
//! are allocated, or zero-filled, before use, so their old content is zeros). Files replaced by
//! an fsynced rename (checkpoints, metadata) are whole, old or new.
//!
//! A test that kills a whole process (`petrel serve`) cannot read the record from memory: with
//! [`record_syncs_to`] every change of a file's synced point is also appended to a journal file
//! before the sync's caller learns it finished (so before any acknowledgement it allows), and
//! [`drop_unsynced_journaled`] applies the power failure from that journal after the kill.
//!
//! Directories are modelled too: one created while recording keeps its entry in its parent only
//! once the parent is fsynced (`create_dir_durably` and `sync_dir` report both); a power failure
//! removes a directory whose entry was never synced, and everything in it. So are the names of
//! new segment files: one renamed into place is lost, with its data, unless its directory was
//! fsynced after.
//!
//! Because the record is taken where the system calls are made, a flush that published its
//! watermark without syncing, or a file written after its last sync, loses data here exactly
//! as it would on a real machine. The model is conservative: a real sync writes a whole file.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// Granularity of write-back in the model.
pub const PAGE_BYTES: u64 = 4096;

static RECORDING: AtomicBool = AtomicBool::new(false);

/// Every file handle's record since [`record_syncs`]; bounded by the files a test opens.
static TRACKS: Mutex<Vec<(PathBuf, Arc<Marks>)>> = Mutex::new(Vec::new());

/// Directories created since [`record_syncs`], and whether their parent has been fsynced since.
static DIRS: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());

/// The journal of [`record_syncs_to`]; its lock also orders the changes it records.
static JOURNAL: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// From now on, segment files record their writes and syncs (for the rest of the process).
pub fn record_syncs() {
    petrel_kit::fs::observe(&Observer);
    RECORDING.store(true, Ordering::Release);
}

/// [`record_syncs`], and each change of a file's first unsynced byte is appended to `journal`
/// as a line `<byte> <path>`: the record outlives a `kill -9` of this process (the journal's
/// writes are in the page cache, which a killed process does not take with it).
///
/// # Errors
/// The journal cannot be opened.
pub fn record_syncs_to(journal: &Path) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().create(true).append(true).open(journal)?;
    *JOURNAL.lock() = Some(file);
    record_syncs();
    Ok(())
}

/// Hears of the directories `petrel_kit::fs` creates and syncs, whoever calls it.
struct Observer;

impl petrel_kit::fs::DurabilityObserver for Observer {
    fn dir_created(&self, dir: &Path) {
        dir_created(dir);
    }
    fn dir_synced(&self, dir: &Path) {
        dir_synced(dir);
    }
}

/// A segment file was put in place (renamed into its directory): like a new directory, its
/// name is in its directory's page cache only until that directory is fsynced, and a power
/// failure before then loses the file, synced data and all.
pub(crate) fn file_created(path: &Path) {
    dir_created(path);
}

/// A directory was created (its entry is in its parent's page cache only).
fn dir_created(dir: &Path) {
    if !RECORDING.load(Ordering::Acquire) {
        return;
    }
    journal_line(&format!("D {}", dir.display()));
    DIRS.lock().push((dir.to_path_buf(), false));
}

/// `dir` was fsynced: the entries of the directories created in it are durable.
fn dir_synced(dir: &Path) {
    if !RECORDING.load(Ordering::Acquire) {
        return;
    }
    journal_line(&format!("S {}", dir.display()));
    for (d, synced) in DIRS.lock().iter_mut() {
        if d.parent() == Some(dir) {
            *synced = true;
        }
    }
}

fn journal_line(line: &str) {
    if let Some(file) = JOURNAL.lock().as_mut() {
        file.write_all(format!("{line}\n").as_bytes())
            .expect("the power-loss journal takes a line");
    }
}

/// Removes every directory under `root` whose entry never reached the disk (innermost first,
/// though removing an outer one takes the inner ones with it).
fn drop_unsynced_dirs(dirs: Vec<(PathBuf, bool)>, root: &Path) -> std::io::Result<u64> {
    let mut removed = 0;
    for (entry, synced) in dirs.into_iter().rev() {
        if synced || !entry.starts_with(root) || !entry.exists() {
            continue;
        }
        if entry.is_dir() {
            std::fs::remove_dir_all(&entry)?;
        } else {
            std::fs::remove_file(&entry)?;
        }
        removed += 1;
    }
    Ok(removed)
}

#[derive(Default)]
struct Marks {
    /// End of the highest write.
    high_water: AtomicU64,
    /// Lowest position written and not yet covered by a sync; `u64::MAX` when none.
    first_unsynced: AtomicU64,
}

/// One file handle's writes and syncs.
pub(crate) struct SyncTrack(Arc<Marks>, PathBuf);

impl SyncTrack {
    /// A record for a new handle of `path`, if a test asked for records.
    pub(crate) fn register(path: &Path) -> Option<SyncTrack> {
        if !RECORDING.load(Ordering::Acquire) {
            return None;
        }
        let marks = Arc::new(Marks {
            high_water: AtomicU64::new(0),
            first_unsynced: AtomicU64::new(u64::MAX),
        });
        TRACKS.lock().push((path.to_path_buf(), marks.clone()));
        Some(SyncTrack(marks, path.to_path_buf()))
    }

    /// Runs `change` on the marks; a new first unsynced byte it returns goes to the journal, if
    /// there is one. One lock around both keeps the journal's order the marks' order.
    fn change(&self, change: impl FnOnce(&Marks) -> Option<u64>) {
        let mut journal = JOURNAL.lock();
        if let (Some(byte), Some(file)) = (change(&self.0), journal.as_mut()) {
            // A lost line would make the model forgive a missing sync: a test must stop here.
            file.write_all(format!("{byte} {}\n", self.1.display()).as_bytes())
                .expect("the power-loss journal takes a line");
        }
    }

    pub(crate) fn wrote(&self, pos: usize, len: usize) {
        self.0.high_water.fetch_max((pos + len) as u64, Ordering::AcqRel);
        self.change(|m| {
            {
                let before = m.first_unsynced.fetch_min(pos as u64, Ordering::AcqRel);
                (pos as u64) < before
            }
            .then_some(pos as u64)
        });
    }

    /// Read before a sync starts: what the sync will cover (files are written in order, so a
    /// write racing with the sync lands at or past it).
    pub(crate) fn high_water(&self) -> u64 {
        self.0.high_water.load(Ordering::Acquire)
    }

    /// A sync that started when the high water was `covered` has finished.
    pub(crate) fn synced(&self, covered: u64) {
        self.change(|m| {
            let mut cur = m.first_unsynced.load(Ordering::Acquire);
            while cur < covered {
                match m.first_unsynced.compare_exchange(cur, covered, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return Some(covered),
                    Err(now) => cur = now,
                }
            }
            None
        });
    }
}

/// What [`drop_unsynced`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerLoss {
    /// Files that held bytes no sync covered.
    pub files_touched: u64,
    /// Pages past the synced point that reached the disk.
    pub pages_kept: u64,
    /// Pages past the synced point that did not.
    pub pages_lost: u64,
    /// Directories and segment files whose entry in their directory was never synced, removed.
    pub dirs_lost: u64,
}

/// A small deterministic generator (splitmix64), so that a failing seed can be replayed.
struct Coin(u64);

impl Coin {
    fn flip(&mut self) -> bool {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) & 1 == 1
    }
}

/// Applies a power failure to every file under `root` written since [`record_syncs`] (and
/// forgets their records); `seed` picks which unsynced pages survive. Call it once the store
/// has stopped (halted or dropped).
///
/// # Errors
/// A file cannot be read or written.
pub fn drop_unsynced(root: &Path, seed: u64) -> std::io::Result<PowerLoss> {
    let mut first_unsynced: HashMap<PathBuf, u64> = HashMap::new();
    TRACKS.lock().retain(|(path, marks)| {
        if !path.starts_with(root) {
            return true;
        }
        let at = marks.first_unsynced.load(Ordering::Acquire);
        let e = first_unsynced.entry(path.clone()).or_insert(u64::MAX);
        *e = (*e).min(at);
        false
    });
    let dirs: Vec<(PathBuf, bool)> = {
        let mut all = DIRS.lock();
        let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(d, _)| d.starts_with(root));
        *all = rest;
        mine
    };
    let mut loss = apply(first_unsynced, seed)?;
    loss.dirs_lost = drop_unsynced_dirs(dirs, root)?;
    Ok(loss)
}

/// [`drop_unsynced`] for a process that was killed: the record is read from the journal that
/// [`record_syncs_to`] wrote (files under `root` only). A line the kill cut short is ignored —
/// it was written before its sync was reported, so nothing it covers was acknowledged.
///
/// # Errors
/// The journal or a file cannot be read or written.
pub fn drop_unsynced_journaled(journal: &Path, root: &Path, seed: u64) -> std::io::Result<PowerLoss> {
    let text = std::fs::read_to_string(journal)?;
    let mut first_unsynced: HashMap<PathBuf, u64> = HashMap::new();
    let mut dirs: Vec<(PathBuf, bool)> = Vec::new();
    for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
        if let Some(dir) = line.trim_end_matches('\n').strip_prefix("D ") {
            dirs.push((PathBuf::from(dir), false));
            continue;
        }
        if let Some(parent) = line.trim_end_matches('\n').strip_prefix("S ") {
            for (d, synced) in &mut dirs {
                if d.parent() == Some(Path::new(parent)) {
                    *synced = true;
                }
            }
            continue;
        }
        let parsed = line
            .trim_end_matches('\n')
            .split_once(' ')
            .and_then(|(b, p)| Some((b.parse::<u64>().ok()?, p)));
        let Some((byte, path)) = parsed else {
            return Err(std::io::Error::other(format!("power-loss journal line {line:?}")));
        };
        if Path::new(path).starts_with(root) {
            first_unsynced.insert(PathBuf::from(path), byte);
        }
    }
    let mut loss = apply(first_unsynced, seed)?;
    loss.dirs_lost = drop_unsynced_dirs(dirs, root)?;
    Ok(loss)
}

/// Past each file's first unsynced byte, keeps or zeroes each page at random.
fn apply(first_unsynced: HashMap<PathBuf, u64>, seed: u64) -> std::io::Result<PowerLoss> {
    let mut coin = Coin(seed);
    let mut loss = PowerLoss::default();
    let mut files: Vec<(PathBuf, u64)> = first_unsynced.into_iter().filter(|(_, at)| *at < u64::MAX).collect();
    files.sort();
    for (path, from) in files {
        let Ok(file) = std::fs::OpenOptions::new().read(true).write(true).open(&path) else {
            continue; // deleted since (retention, a cut tail): nothing of it is left to lose
        };
        loss.files_touched += 1;
        let len = file.metadata()?.len();
        let mut page = from / PAGE_BYTES * PAGE_BYTES;
        while page < len {
            if coin.flip() {
                loss.pages_kept += 1;
            } else {
                loss.pages_lost += 1;
                let keep_to = from.clamp(page, page + PAGE_BYTES);
                let end = (page + PAGE_BYTES).min(len);
                let lost = usize::try_from(end - keep_to).expect("at most a page");
                file.write_all_at(&vec![0u8; lost], keep_to)?;
            }
            page += PAGE_BYTES;
        }
    }
    Ok(loss)
}
