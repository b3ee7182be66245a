//! The disk's group-commit limit beside Petrel's commit log, on the same disk, with the same
//! writers: for each writer count, (a) a raw loop — writers append 1 KiB records to one file
//! under a mutex with `pwrite`, one flusher thread calls `fdatasync` whenever something new was
//! written, and each writer waits until a sync covers its record — and (b) Petrel's
//! `CommitLog::append_durable` under SYNC_FLUSH. Prints appends/s, records per flush and
//! flush latency for both, first on fresh files (every sync also converts newly used extents)
//! and then on zero-filled ones (the steady state under SYNC_FLUSH, where the allocator
//! zero-fills each segment after the first).
//!
//! Usage: `cargo run --release -p petrel-store --example group_commit -- [DIR] [SECONDS] [WRITERS,...] [SIZE]`
//! (defaults: a temporary directory under the current one, 5 s, 1,4,16,64, 1024 bytes).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel_protocol::message::MessageExt;
use petrel_store::{CommitLog, CommitLogConfig, FlushMode};

struct Raw {
    file: File,
    /// (bytes written, bytes durable)
    state: Mutex<(u64, u64)>,
    synced: Condvar,
    wake_flusher: Condvar,
    syncs: AtomicU64,
    sync_ns: AtomicU64,
    stop: AtomicBool,
}

fn raw_flusher(raw: &Raw) {
    loop {
        let target = {
            let mut st = raw.state.lock().expect("lock");
            while st.0 == st.1 && !raw.stop.load(Ordering::Acquire) {
                st = raw.wake_flusher.wait_timeout(st, Duration::from_millis(100)).expect("lock").0;
            }
            if raw.stop.load(Ordering::Acquire) {
                return;
            }
            st.0
        };
        let started = Instant::now();
        raw.file.sync_data().expect("fdatasync");
        let sync_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        raw.sync_ns.fetch_add(sync_ns, Ordering::Relaxed);
        raw.syncs.fetch_add(1, Ordering::Relaxed);
        raw.state.lock().expect("lock").1 = target;
        raw.synced.notify_all();
    }
}

/// Writes zeros over the first GiB of `file` and syncs: its blocks become written extents, as
/// the allocator leaves every segment after the first when `warmMapedFileEnable` is on.
fn zero_fill(file: &File) {
    let zeros = vec![0u8; 1 << 20];
    for i in 0..1024u64 {
        file.write_all_at(&zeros, i << 20).expect("zeros");
    }
    file.sync_all().expect("sync");
}

fn raw_run(dir: &std::path::Path, writers: usize, size: usize, seconds: f64, zeroed: bool) -> (f64, f64, f64) {
    let path = dir.join("raw-group-commit");
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create");
    file.set_len(1 << 30).expect("size");
    if zeroed {
        zero_fill(&file);
    }
    let raw = Arc::new(Raw {
        file,
        state: Mutex::new((0, 0)),
        synced: Condvar::new(),
        wake_flusher: Condvar::new(),
        syncs: AtomicU64::new(0),
        sync_ns: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let flusher = {
        let raw = raw.clone();
        std::thread::spawn(move || raw_flusher(&raw))
    };
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let record = vec![7u8; size];
    std::thread::scope(|s| {
        for _ in 0..writers {
            s.spawn(|| {
                while Instant::now() < deadline {
                    let end = {
                        let mut st = raw.state.lock().expect("lock");
                        let at = st.0 % (1 << 30);
                        raw.file.write_all_at(&record, at).expect("pwrite");
                        st.0 += size as u64;
                        raw.wake_flusher.notify_one();
                        st.0
                    };
                    let mut st = raw.state.lock().expect("lock");
                    while st.1 < end {
                        st = raw.synced.wait(st).expect("lock");
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    raw.stop.store(true, Ordering::Release);
    raw.wake_flusher.notify_all();
    flusher.join().expect("flusher");
    let _ = std::fs::remove_file(&path);
    let n = done.load(Ordering::Relaxed) as f64;
    let syncs = raw.syncs.load(Ordering::Relaxed).max(1) as f64;
    (n / seconds, n / syncs, raw.sync_ns.load(Ordering::Relaxed) as f64 / syncs / 1000.0)
}

fn petrel_run(dir: &std::path::Path, writers: usize, size: usize, seconds: f64, zeroed: bool) -> (f64, f64, f64) {
    let log_dir = dir.join(format!("petrel-{writers}"));
    if zeroed {
        // The first segment, zero-filled before the log opens it (an empty segment is a valid log).
        std::fs::create_dir_all(&log_dir).expect("dir");
        zero_fill(&File::create(log_dir.join(format!("{:020}", 0))).expect("segment"));
    }
    let log = CommitLog::open(CommitLogConfig {
        flush_mode: FlushMode::Sync,
        segment_size_bytes: 1 << 30,
        ..CommitLogConfig::new(&log_dir)
    })
    .expect("open");
    let record = MessageExt {
        topic: "GroupCommit".into(),
        born_host: "127.0.0.1:50000".parse().expect("addr"),
        store_host: "127.0.0.1:10911".parse().expect("addr"),
        body: Bytes::from(vec![7u8; size]),
        ..MessageExt::default()
    }
    .to_bytes()
    .expect("encode")
    .to_vec();
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..writers {
            let (log, done, record) = (&log, &done, record.clone());
            s.spawn(move || {
                while Instant::now() < deadline {
                    let mut r = record.clone();
                    let queue_id = i32::try_from(w % 4).expect("below 4");
                    log.append_durable(&mut r, "GroupCommit", queue_id).expect("append");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let stats = log.stats();
    let per_flush = stats.records_per_flush.snapshot();
    let flush = stats.flush_ns.snapshot();
    let n = done.load(Ordering::Relaxed) as f64;
    let result = (
        n / seconds,
        per_flush.sum as f64 / per_flush.count.max(1) as f64,
        flush.sum as f64 / flush.count.max(1) as f64 / 1000.0,
    );
    log.close().expect("close");
    drop(log);
    let _ = std::fs::remove_dir_all(&log_dir);
    result
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .map_or_else(|| std::path::PathBuf::from("group-commit-tmp"), std::path::PathBuf::from);
    let seconds: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let writers: Vec<usize> = args
        .get(3)
        .map_or("1,4,16,64", String::as_str)
        .split(',')
        .filter_map(|w| w.parse().ok())
        .collect();
    let size: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1024);
    std::fs::create_dir_all(&dir).expect("dir");
    println!(
        "| file | writers | raw appends/s | raw per fdatasync | raw fdatasync µs | petrel appends/s | petrel per flush | petrel flush µs | petrel / raw |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    // Fresh: the raw file sparse, Petrel's first segment fallocated — every sync also converts
    // extents. Zero-filled: both written through once, as every later segment is under
    // SYNC_FLUSH (`warmMapedFileEnable`).
    for (label, zeroed) in [("fresh", false), ("zero-filled", true)] {
        for &w in &writers {
            let (raw_rate, raw_per, raw_us) = raw_run(&dir, w, size, seconds, zeroed);
            let (p_rate, p_per, p_us) = petrel_run(&dir, w, size, seconds, zeroed);
            println!(
                "| {label} | {w} | {raw_rate:.0} | {raw_per:.1} | {raw_us:.0} | {p_rate:.0} | {p_per:.1} | {p_us:.0} | {:.2} |",
                p_rate / raw_rate
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
