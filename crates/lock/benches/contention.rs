//! Lock strategies under contention: every strategy × critical section (a copy of 2 B, 1 KiB,
//! 64 KiB into a shared buffer, as the commit-log append does) × 1, 2, 4, 8, 16 threads.
//! Criterion reports wall time per acquisition (throughput = its inverse); the process CPU time
//! per acquisition, taken from getrusage around the same runs, is printed after the run and
//! written to the workspace's `target/lock-cpu.md` (`scripts/lock-bench-table.py` joins the two).
//!
//! `LOCK_BENCH_WORK` adds work *outside* the lock before each acquisition: a checksum over that
//! many private bytes, standing for the encoding and CRC a producer does before the append.
//! With no outside work a lock that lets its last holder take it again at once wins by never
//! handing the line over, which no broker thread sees.
//!
//!   cargo bench -p petrel-lock --bench contention
//!   LOCK_BENCH_THREADS=1,4 LOCK_BENCH_SIZES=2 LOCK_BENCH_WORK=0,1024 cargo bench -p petrel-lock --bench contention
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use petrel_lock::{AdaptiveConfig, LockKind, PutMessageLock, acquire, new_lock};

struct Shared(UnsafeCell<Vec<u8>>);
// SAFETY: the buffer is written only while the lock under test is held.
unsafe impl Sync for Shared {}

impl Shared {
    /// # Safety
    /// The lock under test is held.
    #[allow(clippy::mut_from_ref)]
    unsafe fn buf(&self) -> &mut [u8] {
        // SAFETY: forwarded from the caller.
        unsafe { &mut *self.0.get() }
    }
}

fn cpu_time() -> Duration {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let tv = |t: libc::timeval| {
        let us = u32::try_from(t.tv_usec).expect("tv_usec is a count of microseconds below one second");
        Duration::new(t.tv_sec as u64, us * 1000)
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// (strategy, critical-section bytes, outside-work bytes, threads) → (CPU time, acquisitions).
type CpuTable = BTreeMap<(String, usize, usize, usize), (Duration, u64)>;
static CPU: Mutex<CpuTable> = Mutex::new(BTreeMap::new());

/// The outside-the-lock work: a cheap checksum over `bytes`.
fn outside_work(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// Runs `total` acquisitions spread over `threads` threads; returns the wall time.
fn run(lock: &dyn PutMessageLock, threads: usize, size: usize, work: usize, total: u64, shared: &Shared, src: &[u8]) -> Duration {
    let per_thread = (total / threads as u64).max(1);
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..per_thread {
                    black_box(outside_work(black_box(&src[..work])));
                    let _g = acquire(lock);
                    // SAFETY: the guard holds the lock.
                    let dst = unsafe { shared.buf() };
                    dst[..size].copy_from_slice(black_box(&src[..size]));
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // scope joins the workers before returning
        start
    })
    .elapsed()
}

fn list(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn bench(c: &mut Criterion) {
    let threads_list = list("LOCK_BENCH_THREADS", &[1, 2, 4, 8, 16]);
    let sizes = list("LOCK_BENCH_SIZES", &[2, 1024, 65536]);
    let works = list("LOCK_BENCH_WORK", &[0]);
    let src = vec![7u8; 65536];
    let shared = Shared(UnsafeCell::new(vec![0u8; 65536]));
    for (&size, &work) in sizes.iter().flat_map(|s| works.iter().map(move |w| (s, w))) {
        let mut group = c.benchmark_group(format!("lock/{size}B/work{work}B"));
        group.throughput(Throughput::Elements(1));
        for &threads in &threads_list {
            for kind in LockKind::ALL {
                let lock = new_lock(kind, 1_000, AdaptiveConfig::default());
                group.bench_with_input(BenchmarkId::new(kind.name(), threads), &threads, |b, &threads| {
                    b.iter_custom(|iters| {
                        let cpu0 = cpu_time();
                        let wall = run(lock.as_ref(), threads, size, work, iters, &shared, &src);
                        let cpu = cpu_time() - cpu0;
                        let acquisitions = (iters / threads as u64).max(1) * threads as u64;
                        let mut m = CPU.lock().unwrap();
                        let e = m.entry((kind.name().to_owned(), size, work, threads)).or_default();
                        e.0 += cpu;
                        e.1 += acquisitions;
                        // criterion divides by `iters`; scale so the figure is per acquisition
                        wall.mul_f64(iters as f64 / acquisitions as f64)
                    })
                });
            }
        }
        group.finish();
    }
    let mut table = String::from("| size | outside work | threads | strategy | CPU ns / acquisition |\n|---:|---:|---:|---|---:|\n");
    for ((kind, size, work, threads), (cpu, n)) in CPU.lock().unwrap().iter() {
        table.push_str(&format!(
            "| {size} | {work} | {threads} | {kind} | {:.0} |\n",
            cpu.as_nanos() as f64 / *n as f64
        ));
    }
    println!("\n{table}");
    // cargo runs benches in the crate's folder; the table goes beside the workspace's criterion output.
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let _ = std::fs::create_dir_all(&target);
    let _ = std::fs::write(target.join("lock-cpu.md"), &table);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10);
    targets = bench
}
criterion_main!(benches);
