//! What the checkpoint's base costs at a million queues: writing it (`store`: render, write,
//! fsync, rename) and reading it back (`load`: read, verify, parse). A fold of the delta blocks
//! does both, and a start does the second: at a million light queues folds were the
//! checkpointer's seconds of CPU right after a fill.
//!
//! `fold` is what the checkpointer does once the deltas have grown as large as the base: the
//! base read back with delta blocks naming every queue once (as a fill of every queue writes
//! them), then the new base written.
//!
//! `cargo bench -p petrel-store --bench checkpoint`

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use petrel_store::{Changes, Checkpoint, append_delta};

/// `queues` light queues named as `petrel bench queues` names them, one queue id each.
fn checkpoint_of(queues: u64) -> Checkpoint {
    let mut cp = Checkpoint {
        flushed_offset: 1 << 40,
        generation: 7,
        ..Checkpoint::default()
    };
    for q in 0..queues {
        let next = i64::try_from(q % 1000).expect("small");
        cp.queue_offsets.insert((format!("%LMQ%bench-{q:07}"), 0), next);
    }
    cp
}

fn base(c: &mut Criterion) {
    let mut group = c.benchmark_group("checkpoint");
    group.sample_size(10);
    for queues in [10_000u64, 1_000_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let cp = checkpoint_of(queues);
        group.throughput(Throughput::Elements(queues));
        group.bench_with_input(BenchmarkId::new("store", queues), &cp, |b, cp| {
            b.iter(|| cp.store(dir.path()).expect("stored"));
        });
        group.bench_with_input(BenchmarkId::new("load", queues), &cp, |b, cp| {
            b.iter(|| {
                let loaded = Checkpoint::load(dir.path()).expect("read").expect("verifies");
                assert_eq!(loaded.queue_offsets.len(), cp.queue_offsets.len());
                loaded
            });
        });
    }
    fold(&mut group, 1_000_000);
    group.finish();
}

/// The base of `queues` queues, then blocks of 10,000 topics each naming every queue once more.
fn fold(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, queues: u64) {
    const TOPICS_PER_BLOCK: u64 = 10_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let cp = checkpoint_of(queues);
    cp.store(dir.path()).expect("stored");
    let mut flushed = cp.flushed_offset;
    for first in (0..queues).step_by(usize::try_from(TOPICS_PER_BLOCK).expect("small")) {
        let changes: Changes = (first..(first + TOPICS_PER_BLOCK).min(queues))
            .map(|q| (format!("%LMQ%bench-{q:07}").into(), Some([(0, 1000)].into())))
            .collect();
        flushed += 1 << 20;
        append_delta(dir.path(), cp.generation, flushed, &changes).expect("appended");
    }
    let deltas = std::fs::read(dir.path().join("checkpoint.delta")).expect("deltas");
    group.throughput(Throughput::Elements(queues));
    group.bench_function(BenchmarkId::new("fold", queues), |b| {
        b.iter_batched(
            // The base a fold writes removes the deltas: put them back for the next round.
            || {
                cp.store(dir.path()).expect("stored");
                std::fs::write(dir.path().join("checkpoint.delta"), &deltas).expect("deltas");
            },
            |()| {
                let mut folded = Checkpoint::load(dir.path()).expect("read").expect("verifies");
                assert_eq!(folded.flushed_offset, flushed);
                folded.generation += 1;
                folded.store(dir.path()).expect("stored");
            },
            BatchSize::PerIteration,
        );
    });
}

criterion_group!(benches, base);
criterion_main!(benches);
