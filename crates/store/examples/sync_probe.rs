//! Measures one-thread SYNC_FLUSH append latency: `cargo run --release -p petrel-store --example sync_probe -- [N]`.
use std::time::Instant;

use bytes::Bytes;
use petrel_protocol::message::MessageExt;
use petrel_store::{CommitLog, CommitLogConfig, FlushMode};

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(300);
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(CommitLogConfig {
        segment_size_bytes: 128 << 20,
        flush_mode: FlushMode::Sync,
        ..CommitLogConfig::new(dir.path())
    })
    .unwrap();
    let template = MessageExt {
        topic: "Probe".into(),
        body: Bytes::from(vec![7u8; 1024]),
        ..MessageExt::default()
    }
    .to_bytes()
    .unwrap()
    .to_vec();
    let mut lat: Vec<u128> = Vec::with_capacity(n);
    for _ in 0..n {
        let mut r = template.clone();
        let t = Instant::now();
        log.append(&mut r, "Probe", 0).unwrap();
        lat.push(t.elapsed().as_micros());
    }
    lat.sort_unstable();
    println!(
        "sync append µs: p50 {} p90 {} p99 {} max {}",
        lat[n / 2],
        lat[n * 9 / 10],
        lat[n * 99 / 100],
        lat[n - 1]
    );
}
