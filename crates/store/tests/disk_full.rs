//! A full disk (ENOSPC on a small tmpfs) fails appends with a clear error, corrupts nothing,
//! loses nothing acknowledged, and appends work again once space is freed.
//! Needs permission to mount tmpfs (root, as on the CI and development machines).
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use petrel_store::{CommitLog, CommitLogConfig, FlushMode, StoreError};
use support::{body, record};

struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap().keep();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mounting a tmpfs for the disk-full test failed (needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn config(dir: &Path) -> CommitLogConfig {
    CommitLogConfig {
        segment_size_bytes: 64 * 1024,
        flush_mode: FlushMode::Sync,
        // checkpoints are attempted (and fail) while the disk is full
        checkpoint_interval: std::time::Duration::from_millis(5),
        ..CommitLogConfig::new(dir)
    }
}

#[test]
fn full_disk_fails_appends_cleanly_and_recovers_when_space_returns() {
    let fs = Tmpfs::mount("320k");
    let ballast = fs.0.join("ballast");
    std::fs::write(&ballast, vec![1u8; 100 * 1024]).unwrap();
    let store = fs.0.join("store");
    let log = CommitLog::open(config(&store)).unwrap();

    let mut acked = Vec::new();
    let err = loop {
        let n = acked.len() as u64;
        let mut r = record("full", 0, &body(n, 500));
        match log.append_durable(&mut r, "full", 0) {
            Ok(a) => acked.push((a.physical_offset, r)),
            Err(e) => break e,
        }
        assert!(acked.len() < 10_000, "the disk never filled");
    };
    assert!(matches!(err, StoreError::DiskFull { .. }), "expected DiskFull, got {err}");
    assert!(err.to_string().contains("disk full"), "{err}");
    assert!(acked.len() > 100, "several segments were written first ({} records)", acked.len());
    // still failing while full (with checkpoints failing meanwhile), and nothing acknowledged changed
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(matches!(
        log.append_durable(&mut record("full", 0, b"x"), "full", 0),
        Err(StoreError::DiskFull { .. })
    ));
    for (offset, bytes) in &acked {
        assert_eq!(log.read_record(*offset).unwrap().as_deref(), Some(bytes.as_slice()));
    }

    std::fs::remove_file(&ballast).unwrap();
    let mut r = record("full", 0, b"after space was freed");
    let a = log.append_durable(&mut r, "full", 0).expect("appends resume once space is free");
    assert_eq!(a.queue_offset, acked.len() as i64, "no queue offset was burnt by the failures");
    log.close().unwrap();

    let log = CommitLog::open(config(&store)).unwrap();
    assert_eq!(log.recovery_report().truncated_bytes, 0);
    for (offset, bytes) in &acked {
        assert_eq!(log.read_record(*offset).unwrap().as_deref(), Some(bytes.as_slice()));
    }
    assert_eq!(log.read_record(a.physical_offset).unwrap().as_deref(), Some(r.as_slice()));
}
