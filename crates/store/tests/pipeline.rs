//! The append pipeline's promises: the non-blocking append never waits and writes nothing when
//! it hands back `WouldBlock` (no segment prepared yet), the blocking one waits for the
//! allocator; group commit makes every appended record durable exactly once and
//! counts what it did.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
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
    let mut first = BytesMut::from(&record("T", 0, b"first")[..]);
    let before = first.clone();
    let e = log.try_append_owned(&mut first, "T", 0).unwrap_err();
    assert!(matches!(e, StoreError::WouldBlock(_)), "{e}");
    assert_eq!(first, before, "the caller keeps its records untouched");
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
fn the_stage_is_bounded_and_the_written_end_follows_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let pause = Arc::new(AtomicBool::new(true));
    let log = CommitLog::open(CommitLogConfig {
        inject_writer_pause: Some(pause.clone()),
        max_staged_bytes: 4096,
        ..config(dir.path())
    })
    .unwrap();
    // The first append waits for the first segment (the writer is paused: it is only staged).
    let mut staged = log
        .append_owned(&mut BytesMut::from(&record("T", 0, &body(1, 900))[..]), "T", 0)
        .unwrap();
    let refused = loop {
        let mut r = BytesMut::from(&record("T", 0, &body(1, 900))[..]);
        match log.try_append_owned(&mut r, "T", 0) {
            Ok(results) => staged.extend(results),
            Err(StoreError::WouldBlock(_)) => break r,
            Err(e) => panic!("{e}"),
        }
        assert!(staged.len() < 100, "the stage never filled");
    };
    assert!(!refused.is_empty(), "a refused append keeps its buffer");
    assert!(
        (4..=6).contains(&staged.len()),
        "{} records of ~1 KiB staged under a 4 KiB bound",
        staged.len()
    );
    assert_eq!(log.max_offset(), 0, "nothing is readable before the writer writes it");
    assert!(log.read_record(0).unwrap().is_none());
    pause.store(false, Ordering::Release);
    let end = staged.last().unwrap().end_offset();
    log.wait_written(end).unwrap();
    assert_eq!(log.max_offset(), end);
    log.wait_durable(end).unwrap();
    assert!(
        log.read_record(staged[0].physical_offset).unwrap().is_some(),
        "readable once durable (SYNC_FLUSH)"
    );
    assert_eq!(
        staged.iter().map(|r| r.queue_offset).collect::<Vec<_>>(),
        (0..staged.len() as i64).collect::<Vec<_>>()
    );
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
