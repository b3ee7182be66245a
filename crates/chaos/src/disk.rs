//! A full disk: each broker's data directory is a small tmpfs of its own (as root), and the
//! fault fills it with a ballast file, which healing removes.
//!
//! A tmpfs rather than the machine's disk: the fault then fills one broker's file system and no
//! other process's, it needs no block device, and its size bounds what a run can write.

use std::path::{Path, PathBuf};

use nix::fcntl::{FallocateFlags, fallocate};
use nix::mount::{MntFlags, MsFlags, mount, umount2};

use crate::error::{ChaosError, Result};

/// The ballast file's name in the filled directory.
const BALLAST: &str = "chaos-ballast";
/// Steps of the last top-up: a broker writing while the ballast grows takes some of the space
/// that was free a moment before, so the ballast grows by this much until nothing is left.
const TOP_UP_BYTES: i64 = 64 << 10;
const PAGE_BYTES: i64 = 4096;
/// Top-up steps at most (`TOP_UP_BYTES` each: 64 MiB) before the disk counts as full anyway.
const MAX_TOP_UPS: usize = 1024;

/// A tmpfs mounted on a data directory, detached when dropped (lazily, so a process that still
/// holds a file in it does not stop the unmount).
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    pub fn mount(dir: &Path, size_mib: u64) -> Result<Tmpfs> {
        assert!(size_mib > 0, "a tmpfs of 0 MiB");
        std::fs::create_dir_all(dir)?;
        let options = format!("size={size_mib}m,mode=0755");
        mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .map_err(|e| ChaosError::Setup(format!("mounting a tmpfs on {}: {e}", dir.display())))?;
        Ok(Tmpfs { dir: dir.to_path_buf() })
    }

    /// Fills the file system with the ballast; returns its size.
    pub fn fill(&self) -> Result<u64> {
        let path = self.dir.join(BALLAST);
        let file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(&path)?;
        let err = |e: nix::Error| ChaosError::Setup(format!("filling {}: {e}", path.display()));
        let stat = nix::sys::statvfs::statvfs(&self.dir).map_err(err)?;
        let free_bytes = i64::try_from(stat.blocks_available() * stat.fragment_size()).unwrap_or(i64::MAX);
        let mut size_bytes: i64 = 0;
        if free_bytes > TOP_UP_BYTES {
            // Leave one step free for what the broker writes meanwhile; the top-up takes the rest.
            let bulk = free_bytes - TOP_UP_BYTES;
            match fallocate(&file, FallocateFlags::empty(), 0, bulk) {
                Ok(()) => size_bytes = bulk,
                Err(nix::Error::ENOSPC) => {}
                Err(e) => return Err(err(e)),
            }
        }
        for _ in 0..MAX_TOP_UPS {
            match fallocate(&file, FallocateFlags::empty(), size_bytes, TOP_UP_BYTES) {
                Ok(()) => size_bytes += TOP_UP_BYTES,
                Err(nix::Error::ENOSPC) => break,
                Err(e) => return Err(err(e)),
            }
        }
        // What is left is less than a step: take it a page at a time.
        for _ in 0..TOP_UP_BYTES / PAGE_BYTES {
            if fallocate(&file, FallocateFlags::empty(), size_bytes, PAGE_BYTES).is_err() {
                break;
            }
            size_bytes += PAGE_BYTES;
        }
        Ok(u64::try_from(size_bytes).unwrap_or(0))
    }

    /// Removes the ballast.
    pub fn free(&self) -> Result<()> {
        match std::fs::remove_file(self.dir.join(BALLAST)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Deletes everything in the directory (the mount point itself stays).
    pub fn wipe(&self) -> Result<()> {
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Err(e) = umount2(&self.dir, MntFlags::MNT_DETACH) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot unmount the tmpfs");
        }
    }
}

/// Whether this process may mount a tmpfs.
pub fn available() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn write(dir: &Path, name: &str, bytes: usize) -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(dir.join(name))?;
        f.write_all(&vec![7u8; bytes])?;
        f.sync_all()
    }

    /// The fault's mechanism (the suite runs as root, as CI does; elsewhere there is nothing
    /// to mount and the fault is left out of runs, which this test then says).
    #[test]
    fn a_filled_tmpfs_refuses_writes_until_the_ballast_goes_and_detaches_when_dropped() {
        if !available() {
            eprintln!("not root: the disk-full fault cannot be set up here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mount_point = dir.path().join("broker-0");
        let disk = Tmpfs::mount(&mount_point, 16).unwrap();
        write(&mount_point, "before", 1 << 20).unwrap();
        let ballast = disk.fill().unwrap();
        assert!(ballast > 10 << 20 && ballast < 16 << 20, "ballast {ballast}");
        let err = write(&mount_point, "during", 64 << 10).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc_enospc()), "{err}");
        assert_eq!(std::fs::read(mount_point.join("before")).unwrap().len(), 1 << 20, "data kept");
        disk.free().unwrap();
        // A process forked elsewhere in this test binary while the ballast was open holds a
        // copy of its descriptor until it execs; the space comes back when that copy closes.
        wait_for_free_bytes(&mount_point, 2 << 20);
        write(&mount_point, "after", 1 << 20).unwrap();
        disk.free().unwrap();
        disk.wipe().unwrap();
        assert_eq!(std::fs::read_dir(&mount_point).unwrap().count(), 0);
        drop(disk);
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        assert!(!mounts.contains(mount_point.to_str().unwrap()), "unmounted");
    }

    /// Waits, up to 10 s, until the file system has `bytes` free.
    fn wait_for_free_bytes(dir: &Path, bytes: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let stat = nix::sys::statvfs::statvfs(dir).unwrap();
            let free_bytes = stat.blocks_available() * stat.fragment_size();
            if free_bytes >= bytes {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{free_bytes} bytes free 10 s after the ballast went"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn libc_enospc() -> i32 {
        nix::Error::ENOSPC as i32
    }
}
