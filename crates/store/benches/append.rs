//! Commit-log append throughput, and SYNC_FLUSH group commit beside the disk's own limit.
//!
//! * `append/<size>B/<threads>`: ASYNC_FLUSH appends of pre-encoded records (2 B, 1 KiB,
//!   4 KiB bodies) from 1, 2, 4, 8 threads; criterion's time per append (throughput = inverse).
//! * `sync/group_commit/<threads>`: SYNC_FLUSH appends of 1 KiB records, each answered only
//!   once durable; `sync/raw_write_fdatasync`: one thread writing 1 KiB and calling fdatasync
//!   each time into a file on the same disk — the rate the disk allows one durable write at a
//!   time. Their ratio is what group commit buys.
//!
//!   cargo bench -p petrel-store --bench append
//!   STORE_BENCH_DIR=/path/on/the/disk/to/test cargo bench -p petrel-store --bench append
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use petrel_protocol::message::MessageExt;
use petrel_store::{CommitLog, CommitLogConfig, FlushMode};

fn bench_dir() -> tempfile::TempDir {
    match std::env::var("STORE_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(PathBuf::from(d)).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    }
}

fn template(body_bytes: usize, queue_id: i32) -> Vec<u8> {
    MessageExt {
        topic: "BenchTopic".into(),
        queue_id,
        born_host: "127.0.0.1:50000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        body: Bytes::from(vec![7u8; body_bytes]),
        ..MessageExt::default()
    }
    .to_bytes()
    .unwrap()
    .to_vec()
}

/// Appends `total` records over `threads` threads into a fresh log; returns the wall time.
fn run(mode: FlushMode, body_bytes: usize, threads: usize, total: u64) -> Duration {
    let dir = bench_dir();
    let log = CommitLog::open(CommitLogConfig {
        segment_size_bytes: 128 << 20,
        flush_mode: mode,
        ..CommitLogConfig::new(dir.path())
    })
    .unwrap();
    let per_thread = (total / threads as u64).max(1);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let log = &log;
            s.spawn(move || {
                let queue_id = i32::try_from(t).expect("a thread count fits i32");
                let template = template(body_bytes, queue_id);
                let mut record = template.clone();
                for _ in 0..per_thread {
                    record.copy_from_slice(&template);
                    let appended = if mode == FlushMode::Sync {
                        log.append_durable(&mut record, "BenchTopic", queue_id)
                    } else {
                        log.append(&mut record, "BenchTopic", queue_id)
                    };
                    black_box(appended.unwrap());
                }
            });
        }
    });
    let elapsed = start.elapsed();
    drop(log);
    elapsed.mul_f64(total as f64 / (per_thread * threads as u64) as f64)
}

fn append(c: &mut Criterion) {
    for body in [2usize, 1024, 4096] {
        let mut g = c.benchmark_group(format!("append/{body}B"));
        g.throughput(Throughput::Elements(1));
        for threads in [1usize, 2, 4, 8] {
            g.bench_with_input(BenchmarkId::from_parameter(threads), &threads, |b, &threads| {
                b.iter_custom(|iters| run(FlushMode::Async, body, threads, iters))
            });
        }
        g.finish();
    }
}

fn sync(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync");
    g.throughput(Throughput::Elements(1));
    for threads in [1usize, 8, 32] {
        g.bench_with_input(BenchmarkId::new("group_commit", threads), &threads, |b, &threads| {
            b.iter_custom(|iters| run(FlushMode::Sync, 1024, threads, iters))
        });
    }
    g.bench_function("raw_write_fdatasync", |b| {
        b.iter_custom(|iters| {
            let dir = bench_dir();
            let mut f = std::fs::File::create(dir.path().join("raw")).unwrap();
            let record = template(1024, 0);
            let start = Instant::now();
            for _ in 0..iters {
                f.write_all(&record).unwrap();
                f.sync_data().unwrap();
            }
            start.elapsed()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    targets = append, sync
}
criterion_main!(benches);
