//! The disk's own tail: a 4 KiB `pwrite` + `fdatasync` at a fixed rate, on a file whose blocks
//! are written (zero-filled) and on one that is only `posix_fallocate`d — what no broker can
//! beat under SYNC_FLUSH on this disk.
//!
//! Usage: `cargo run --release -p petrel-store --example disk_tail -- [DIR] [SECONDS] [SYNCS_PER_SEC]`
//! (defaults: `.`, 20 s, 500/s).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

fn percentile(sorted: &[u64], q: f64) -> u64 {
    #[expect(clippy::cast_possible_truncation, reason = "q in 0..=1 keeps the index within the slice")]
    let at = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[at]
}

fn run(path: &std::path::Path, zero_fill: bool, seconds: f64, rate: f64) {
    let _ = std::fs::remove_file(path);
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("create");
    let size: u64 = 256 << 20;
    // SAFETY: plain syscall on an open descriptor.
    assert_eq!(unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, size as i64) }, 0, "fallocate");
    if zero_fill {
        let zeros = vec![0u8; 1 << 20];
        for i in 0..(size >> 20) {
            f.write_all_at(&zeros, i << 20).expect("zero");
        }
    }
    f.sync_all().expect("sync");
    let record = vec![7u8; 4096];
    let interval = Duration::from_secs_f64(1.0 / rate);
    let started = Instant::now();
    let mut lat = Vec::new();
    let mut i: u64 = 0;
    while started.elapsed().as_secs_f64() < seconds {
        let due = started + interval * u32::try_from(i).expect("fewer than 2^32 syncs in a run");
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = Instant::now();
        f.write_all_at(&record, (i * 4096) % size).expect("write");
        f.sync_data().expect("fdatasync");
        lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
        i += 1;
    }
    lat.sort_unstable();
    println!(
        "| {} | {} | {} | {} | {} | {} | {} |",
        if zero_fill { "zero-filled" } else { "fallocated" },
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        percentile(&lat, 0.999),
        percentile(&lat, 0.9999),
        lat[lat.len() - 1]
    );
    let _ = std::fs::remove_file(path);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).map_or(".", String::as_str));
    let seconds: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let rate: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(500.0);
    println!("| file | syncs | P50 µs | P99 µs | P99.9 µs | P99.99 µs | max µs |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let path = dir.join("disk-tail-probe");
    run(&path, true, seconds, rate);
    run(&path, false, seconds, rate);
}
