//! Durable file replacement. A metadata file (a checkpoint, an offset table, the ACL store, the
//! Raft log's metadata) is replaced whole: written to a temporary beside it, synced, renamed
//! over the old one, and the directory synced, so that a crash or a power failure leaves either
//! the old file or the new one, never a mix.
//!
//! A power-failure model (the store's, for tests) may watch directory entries become durable
//! through [`observe`]; nothing else is kept between calls.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Told when a directory is created and when one is synced (its children's entries are then
/// durable). The store's power-failure model implements it.
pub trait DurabilityObserver: Send + Sync {
    /// `dir` was just created; its own entry in its parent is not durable until the parent is synced.
    fn dir_created(&self, dir: &Path);
    /// `dir` was synced: the entries in it are now durable.
    fn dir_synced(&self, dir: &Path);
}

static OBSERVER: OnceLock<&'static dyn DurabilityObserver> = OnceLock::new();

/// Installs the process's observer; the first one installed stays.
pub fn observe(observer: &'static dyn DurabilityObserver) {
    let _ = OBSERVER.set(observer);
}

/// Who may read the new file: its permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The process's umask decides (0644 usually).
    Default,
    /// Only the owner reads and writes it (0600): credentials.
    OwnerOnly,
}

/// Replaces `path` with `contents` durably; creates its directory (durably) if missing.
///
/// # Errors
/// Any step of the sequence failing; the old file is then untouched.
pub fn write_atomically(path: &Path, contents: &[u8], mode: Mode) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    create_dir_durably(dir)?;
    // A name of its own per write: two writers of one file never share a temporary.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    // A temporary a crash left behind (same name, another process) is garbage: remove it, so
    // that the new file is created fresh (with its mode) rather than refused.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        if mode == Mode::OwnerOnly {
            options.mode(0o600);
        }
        let mut file = options.open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        // The temporary is garbage whether or not it was made; the old file stands.
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    sync_dir(dir)
}

/// Reads `path` if it exists; a missing file is `Ok(None)`.
///
/// # Errors
/// Any read error but "not found".
pub fn read_if_exists(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Fsyncs a directory: the entries created or renamed in it are then durable.
///
/// # Errors
/// The directory cannot be opened or synced.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    if let Some(o) = OBSERVER.get() {
        o.dir_synced(dir);
    }
    Ok(())
}

/// `dir` and those of its parents that do not exist, innermost first.
fn missing_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut missing = Vec::new();
    let mut at = dir;
    // Bounded by the path's depth.
    while !at.exists() {
        missing.push(at.to_path_buf());
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => break,
        }
    }
    missing
}

/// Creates `dir` and any missing parents so that each new directory's entry is durable: after
/// each one is made, its parent is fsynced. A directory whose entry a power failure can lose
/// takes every file in it along, synced or not.
///
/// # Errors
/// A directory cannot be made or synced.
pub fn create_dir_durably(dir: &Path) -> std::io::Result<()> {
    for d in missing_dirs(dir).iter().rev() {
        create_one_dir(d)?;
        sync_dir(parent_dir(d))?;
    }
    Ok(())
}

/// Makes one directory, telling the observer. Another creator may have won the race; its entry
/// may not be durable yet, so the caller syncs (or lists for syncing) the parent anyway.
fn create_one_dir(d: &Path) -> std::io::Result<()> {
    match std::fs::create_dir(d) {
        Ok(()) => {
            if let Some(o) = OBSERVER.get() {
                o.dir_created(d);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The directory holding `d`'s entry.
fn parent_dir(d: &Path) -> &Path {
    d.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Creates `dir` and any missing parents without syncing anything; returns the parents whose
/// new entries a [`sync_dir`] of each would make durable (outermost first), for a caller that
/// syncs them later, before it relies on the directories: [`create_dir_durably`] without the
/// wait, for what a crash may lose because it can be rebuilt.
///
/// # Errors
/// A directory cannot be made.
pub fn create_dir_deferred(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut unsynced = Vec::new();
    for d in missing_dirs(dir).iter().rev() {
        create_one_dir(d)?;
        unsynced.push(parent_dir(d).to_path_buf());
    }
    Ok(unsynced)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_replacement_leaves_the_new_file_and_no_temporary() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a/b/offsets.json");
        write_atomically(&path, b"old", Mode::Default).expect("first write");
        write_atomically(&path, b"new", Mode::Default).expect("second write");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        let names: Vec<_> = std::fs::read_dir(path.parent().expect("dir"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["offsets.json"], "no temporary left beside it");
        assert_eq!(read_if_exists(&dir.path().join("missing")).expect("read"), None);
    }

    #[test]
    fn a_temporary_a_crash_left_behind_does_not_block_the_next_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vote.json");
        // Every temporary name a new process could pick first, left by a crashed one.
        for n in 0..64 {
            std::fs::write(dir.path().join(format!(".vote.json.tmp{n}")), b"torn").expect("stale");
        }
        write_atomically(&path, b"new", Mode::OwnerOnly).expect("written over the leftovers");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_owner_only_files_are_0600() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("users.json");
        write_atomically(&path, b"secret", Mode::OwnerOnly).expect("write");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A directory where the file should be: rename fails, the temporary goes away.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir(&blocked).expect("mkdir");
        std::fs::write(blocked.join("x"), b"keep").expect("fill");
        assert!(write_atomically(&blocked, b"new", Mode::Default).is_err());
        assert_eq!(std::fs::read(blocked.join("x")).expect("read"), b"keep");
        let left = std::fs::read_dir(dir.path()).expect("list").count();
        assert_eq!(left, 2, "users.json and blocked/, no temporary");
    }

    struct Seen(std::sync::Mutex<Vec<String>>);
    impl DurabilityObserver for Seen {
        fn dir_created(&self, dir: &Path) {
            self.0.lock().expect("lock").push(format!("D {}", dir.display()));
        }
        fn dir_synced(&self, dir: &Path) {
            self.0.lock().expect("lock").push(format!("S {}", dir.display()));
        }
    }

    #[test]
    fn each_new_directory_is_created_then_its_parent_synced() {
        static SEEN: OnceLock<Seen> = OnceLock::new();
        observe(SEEN.get_or_init(|| Seen(std::sync::Mutex::new(Vec::new()))));
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        create_dir_durably(&root.join("x/y")).expect("mkdir");
        let seen = SEEN.get().expect("set").0.lock().expect("lock").clone();
        let ours: Vec<&String> = seen.iter().filter(|l| l.contains(&*root.to_string_lossy())).collect();
        let r = root.display();
        assert_eq!(
            ours,
            [&format!("D {r}/x"), &format!("S {r}"), &format!("D {r}/x/y"), &format!("S {r}/x")]
        );
    }
}
