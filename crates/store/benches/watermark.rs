//! What a durability waiter costs: reserve a slot, register a wait, and be completed by one
//! `advance` — per waiter, for N waiters at once (the SYNC_FLUSH sends one flush releases).
//!
//! `cargo bench -p petrel-store --bench watermark`

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use petrel_store::Watermark;

fn waiters(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut group = c.benchmark_group("watermark");
    for n in [1u64, 16, 256, 4096] {
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::new("reserve_wait_advance", n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mark = Watermark::new("bench", 0, usize::try_from(n).expect("at most 4096 waiters"));
                    let started = Instant::now();
                    let waits: Vec<_> = (1..=n).map(|t| mark.reserve().expect("room").wait(t)).collect();
                    mark.advance(n);
                    runtime.block_on(async {
                        for w in waits {
                            w.await.expect("completed");
                        }
                    });
                    total += started.elapsed();
                }
                total
            });
        });
    }
    group.bench_function("already_passed", |b| {
        let mark = Watermark::new("bench", u64::MAX, 1);
        b.iter(|| runtime.block_on(mark.reserve().expect("room").wait(1)).expect("passed"));
    });
    group.finish();
}

criterion_group!(benches, waiters);
criterion_main!(benches);
