//! The append pipeline's promises: the non-blocking append never waits and writes nothing when
//! it hands back `WouldBlock` (no segment prepared yet), the blocking one waits for the
//! allocator; group commit makes every appended record durable exactly once and
//! counts what it did.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use petrel_store::{CommitLog, CommitLogConfig, FlushMode, StoreError};
use support::{body, record};

fn config(dir: &std::path::Path) -> CommitLogConfig {
    CommitLogConfig {
        segment_size_bytes: 64 * 1024,
        flush_mode: FlushMode::Sync,
        ..CommitLogConfig::new(dir)
    }
}

#[test]
fn without_a_prepared_segment_the_non_blocking_append_writes_nothing_and_the_blocking_one_waits() {
    let dir = tempfile::tempdir().unwrap();
    let pause = Arc::new(AtomicBool::new(true));
    let log = Arc::new(
        CommitLog::open(CommitLogConfig {
            inject_allocator_pause: Some(pause.clone()),
            ..config(dir.path())
        })
        .unwrap(),
    );
    let e = log.try_append(&mut record("T", 0, b"first"), "T", 0).unwrap_err();
    assert!(matches!(e, StoreError::WouldBlock(_)), "{e}");
    assert_eq!(log.max_offset(), 0, "nothing was written");
    assert_eq!(log.stats().appends_would_block.load(Ordering::Relaxed), 1);

    let blocked = {
        let log = log.clone();
        std::thread::spawn(move || log.append(&mut record("T", 0, b"first"), "T", 0))
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(!blocked.is_finished(), "the blocking append waits for the allocator");
    pause.store(false, Ordering::Release);
    let started = Instant::now();
    let appended = blocked.join().unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!((appended.physical_offset, appended.queue_offset), (0, 0));
    assert_eq!(log.stats().roll_waits.load(Ordering::Relaxed), 1);
    log.wait_durable(appended.end_offset()).unwrap();
}

#[test]
fn group_commit_makes_every_record_durable_once_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(CommitLog::open(config(dir.path())).unwrap());
    let (threads, per_thread) = (8, 200);
    std::thread::scope(|s| {
        for t in 0..threads {
            let log = &log;
            s.spawn(move || {
                for i in 0..per_thread {
                    let r = log.append_durable(&mut record("G", t, &body(i, 100)), "G", t).unwrap();
                    assert!(log.flushed_offset() >= r.end_offset(), "answered before durable");
                }
            });
        }
    });
    let stats = log.stats();
    let appended = stats.appended_records.load(Ordering::Relaxed);
    assert_eq!(appended, u64::from(threads as u32) * per_thread);
    let per_flush = stats.records_per_flush.snapshot();
    assert_eq!(per_flush.sum, appended, "each record counted by exactly one flush");
    assert_eq!(per_flush.count, stats.flushes.load(Ordering::Relaxed));
    assert_eq!(stats.flush_ns.snapshot().count, per_flush.count);
    assert_eq!(stats.flushed_bytes.load(Ordering::Relaxed), log.max_offset());
    assert_eq!(log.flushed_watermark().waiting(), 0, "no waiter left behind");
}
