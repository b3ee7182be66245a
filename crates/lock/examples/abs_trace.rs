//! Runs THREADS threads against one lock for SECONDS, each copying BYTES under it; for the
//! adaptive lock prints every policy evaluation (window load, retreats, k and mode over time),
//! and for every lock how many acquisitions had to wait — a lock that lets its last holder take
//! it again at once (barging) shows few, and wins throughput by avoiding cache-line handoffs.
//!
//!   cargo run --release -p petrel-lock --example abs_trace -- [THREADS] [SECONDS] [BYTES] [abs|mutex|spin|backoff]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use petrel_lock::{AdaptiveConfig, AdaptiveLock, LockKind, PutMessageLock, acquire, new_lock};

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).take(3).map(|a| a.parse().expect("numbers")).collect();
    let threads = usize::try_from(*args.first().unwrap_or(&4)).expect("a thread count that fits in usize");
    let seconds = *args.get(1).unwrap_or(&3);
    let bytes = usize::try_from(*args.get(2).unwrap_or(&2)).expect("a byte count that fits in usize");
    let kind: LockKind = std::env::args()
        .nth(4)
        .map_or(LockKind::Adaptive, |k| k.parse().expect("a lock name"));
    let adaptive = AdaptiveLock::default();
    let fixed = new_lock(kind, 1_000, AdaptiveConfig::default());
    let lock: &dyn PutMessageLock = if kind == LockKind::Adaptive { &adaptive } else { fixed.as_ref() };
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let src = vec![1u8; bytes];
                let mut dst = vec![0u8; bytes];
                while !stop.load(Ordering::Relaxed) {
                    let _g = acquire(lock);
                    dst.copy_from_slice(std::hint::black_box(&src));
                }
            });
        }
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = start.elapsed();
    println!("at_ms\tacquisitions\tretreats\tthreads\tload\tk\tmode");
    for s in adaptive.history() {
        println!(
            "{}\t{}\t{}\t{}\t{:.3e}\t{}\t{:?}",
            s.at.as_millis(),
            s.acquisitions,
            s.retreats,
            s.threads,
            s.load,
            s.k,
            s.mode
        );
    }
    let snap = lock.snapshot();
    println!(
        "# {kind}, {} threads, {} B: {:.0} ns/acquisition, {:.1}% waited, {} switches, final k {:?}, mode {:?}",
        threads,
        bytes,
        elapsed.as_nanos() as f64 / snap.counters.acquisitions as f64,
        100.0 * snap.counters.contended as f64 / snap.counters.acquisitions as f64,
        snap.switches,
        snap.k,
        snap.mode
    );
}
