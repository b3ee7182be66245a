//! kill -9 at random moments loses no acknowledged record (in the style of sled's crash tests).
//!
//! The test binary re-executes itself as a child (`crash_child`, selected by an environment
//! variable) that appends from four threads under SYNC_FLUSH and prints `ACK offset size crc`
//! after each acknowledged append. The parent kills the child with SIGKILL at a random moment,
//! checks the raw segment files (every record after the previous end is valid up to at most one
//! torn record, then only zeros), reopens the store, and asserts every record ever acknowledged
//! is there byte for byte. `PETREL_CRASH_ITERATIONS` (default 100) sets the number of kills.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use petrel_protocol::message::{BLANK_MAGIC_CODE, MessageExt, body_crc};
use petrel_store::{CommitLog, CommitLogConfig, FlushMode};
use support::{body, record};

const CHILD_ENV: &str = "PETREL_CRASH_CHILD_DIR";
const SEGMENT_BYTES: u64 = 64 * 1024;
const MAX_BODY_BYTES: usize = 700;

fn config(dir: &Path) -> CommitLogConfig {
    CommitLogConfig {
        segment_size_bytes: SEGMENT_BYTES,
        flush_mode: FlushMode::Sync,
        ..CommitLogConfig::new(dir)
    }
}

/// The child's entry point; a no-op in a normal test run.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let log = CommitLog::open(config(Path::new(&dir))).expect("child opens the store");
    let pid = u64::from(std::process::id());
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let log = &log;
            s.spawn(move || {
                let mut n = pid.wrapping_mul(1_000_003).wrapping_add(t);
                loop {
                    n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let len = 1 + (n >> 33) as usize % MAX_BODY_BYTES;
                    let queue_id = i32::try_from(t).expect("below 4");
                    let mut r = record("crash", queue_id, &body(n, len));
                    match log.append_durable(&mut r, "crash", queue_id) {
                        Ok(a) => {
                            let line = format!("ACK {} {} {}\n", a.physical_offset, a.size_bytes, body_crc(&r));
                            let mut out = std::io::stdout().lock();
                            out.write_all(line.as_bytes()).unwrap();
                            out.flush().unwrap();
                        }
                        Err(e) => {
                            eprintln!("append failed: {e}");
                            std::process::exit(3);
                        }
                    }
                }
            });
        }
    });
}

/// The largest record the child appends.
fn max_record_bytes() -> usize {
    record("crash", 0, &[0u8; MAX_BODY_BYTES]).len()
}

struct Ack {
    offset: u64,
    size: u32,
    crc: u32,
}

/// Walks the raw segment files from `from`: valid records (and end-of-segment fillers) up to
/// at most one torn record, then nothing but zeros. Returns where the valid records end.
fn check_raw_tail(dir: &Path, from: u64) -> u64 {
    let read = |start: u64| std::fs::read(dir.join(format!("{start:020}"))).ok();
    let mut offset = from;
    let mut valid_end = None;
    loop {
        let start = offset - offset % SEGMENT_BYTES;
        let Some(seg) = read(start) else { break };
        let mut pos = usize::try_from(offset - start).expect("within a segment");
        while pos + 8 <= seg.len() && valid_end.is_none() {
            let size = i32::from_be_bytes(seg[pos..pos + 4].try_into().unwrap());
            let magic = i32::from_be_bytes(seg[pos + 4..pos + 8].try_into().unwrap());
            if magic == BLANK_MAGIC_CODE {
                break;
            }
            match MessageExt::decode_verified(&seg[pos..]) {
                Ok((_, used)) if used == size as usize => pos += used,
                _ => valid_end = Some(start + pos as u64),
            }
        }
        if let Some(end) = valid_end {
            // After the end: at most one torn record, then zeros, in this and every later
            // segment. The torn record's own size word may still be zero (memcpy may copy the
            // tail of a buffer first), so it is bounded by the largest record the child writes.
            let at = usize::try_from(end - start).expect("within a segment");
            let torn_len = max_record_bytes().min(seg.len() - at);
            assert!(
                seg[at + torn_len..].iter().all(|b| *b == 0),
                "garbage after the torn record at {end}"
            );
            let mut later = start + SEGMENT_BYTES;
            while let Some(next) = read(later) {
                assert!(
                    next.iter().all(|b| *b == 0),
                    "data in segment {later} after the torn record at {end}"
                );
                later += SEGMENT_BYTES;
            }
            return end;
        }
        offset = start + SEGMENT_BYTES;
    }
    offset.min(valid_end.unwrap_or(offset))
}

#[test]
fn kill_9_loses_no_acknowledged_record() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let iterations: u64 = std::env::var("PETREL_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked: Vec<Ack> = Vec::new();
    let mut end = 0u64;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut torn_seen = 0;
    for it in 0..iterations {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (first_tx, first_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Some(rest) = line.strip_prefix("ACK ") else { continue };
                let f: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
                if got.is_empty() {
                    let _ = first_tx.send(());
                }
                got.push(Ack {
                    offset: f[0],
                    size: u32::try_from(f[1]).expect("the child printed a u32 size"),
                    crc: u32::try_from(f[2]).expect("the child printed a u32 CRC"),
                });
            }
            got
        });
        // Kill at a random moment once appends are flowing.
        first_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the child acknowledged an append");
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        std::thread::sleep(Duration::from_micros((seed >> 40) % 40_000));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(status.code().is_none(), "the child died by the signal, not by itself: {status:?}");
        let got = reader.join().unwrap();
        assert!(!got.is_empty());
        acked.extend(got);

        let raw_end = check_raw_tail(dir.path(), end);
        let log = CommitLog::open(config(dir.path())).unwrap();
        let report = log.recovery_report().clone();
        assert!(report.unclean, "iteration {it}: a killed store must recover as unclean");
        assert_eq!(
            report.end_offset, raw_end,
            "iteration {it}: recovery ends where the valid records end"
        );
        if report.truncated_bytes > 0 {
            torn_seen += 1;
        }
        // Every acknowledged record, of every iteration so far, byte for byte.
        for a in &acked {
            assert!(
                a.offset + u64::from(a.size) <= report.end_offset,
                "iteration {it}: acknowledged record at {} lost",
                a.offset
            );
            let bytes = log
                .read_record(a.offset)
                .unwrap()
                .unwrap_or_else(|| panic!("iteration {it}: no record at {}", a.offset));
            assert_eq!(bytes.len(), a.size as usize);
            assert_eq!(body_crc(&bytes), a.crc, "iteration {it}: record at {} changed", a.offset);
        }
        end = report.end_offset;
        drop(log); // unclean again: the next child recovers it
    }
    eprintln!(
        "{iterations} kill -9 iterations, {} acknowledged records checked, log end {end}, {torn_seen} recoveries cut a torn tail",
        acked.len()
    );
    assert!(acked.len() as u64 >= iterations);
}
