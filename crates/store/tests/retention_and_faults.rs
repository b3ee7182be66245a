//! Retention by age and by disk use, and the flush's failure modes: a failed flush fails every
//! waiting append and refuses later ones; a slow flush answers with a distinct timeout.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use petrel_protocol::message::MessageExt;
use petrel_store::{CommitLog, CommitLogConfig, FlushMode, GetStatus, MessageStore, MessageStoreConfig, StoreError};
use support::{body, tagged_record};

fn store_config(root: &std::path::Path) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = 8192;
    c.commit_log.flush_mode = FlushMode::Sync;
    c.cq_entries_per_segment = 8;
    c.retention_check_interval = Duration::from_secs(3600);
    // Age alone decides here, however full the test machine's disk is.
    c.commit_log.disk_max_used_ratio = 1.0;
    c
}

fn fill(store: &MessageStore, n: u64) {
    for i in 0..n {
        store
            .append_durable(&mut tagged_record("R", 0, &body(i, 500), None), "R", 0)
            .unwrap();
    }
    for _ in 0..10_000 {
        if store.dispatched_offset() >= store.commit_log().readable_end() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("dispatcher did not catch up");
}

fn segments(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(root.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().len() == 20)
        .collect();
    v.sort();
    v
}

#[test]
fn old_segments_go_and_their_queue_entries_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path())).unwrap();
    fill(&store, 60);
    let segs = segments(dir.path());
    assert!(segs.len() >= 4, "{} segments", segs.len());
    assert_eq!(store.run_retention().unwrap(), 0, "nothing is 72 hours old yet");
    let old = SystemTime::now() - Duration::from_secs(100 * 3600);
    for p in &segs[..2] {
        std::fs::File::options().write(true).open(p).unwrap().set_modified(old).unwrap();
    }
    assert_eq!(store.run_retention().unwrap(), 2);
    let log_min = store.commit_log().min_offset();
    assert_eq!(log_min, 2 * 8192);
    assert!(store.commit_log().read_record(0).unwrap().is_none());

    let (min, max) = store.queue_offsets("R", 0);
    assert_eq!(max, 60);
    assert!(min > 0, "the queue's min offset moved past the deleted records");
    let r = store.get_messages("R", 0, 0, 32, None);
    assert_eq!((r.status, r.next_begin_offset), (GetStatus::OffsetTooSmall, min));
    let r = store.get_messages("R", 0, min, 32, None);
    assert_eq!(r.status, GetStatus::Found);
    let (first, _) = MessageExt::decode_verified(&r.body).unwrap();
    assert!(first.commit_log_offset as u64 >= log_min);
    assert_eq!(first.queue_offset, min);
    store.close().unwrap();

    let store = MessageStore::open(store_config(dir.path())).unwrap();
    assert_eq!(store.commit_log().min_offset(), log_min, "deletion survives a restart");
    assert_eq!(store.get_messages("R", 0, min, 1, None).status, GetStatus::Found);
}

#[test]
fn a_full_disk_deletes_the_oldest_segment_per_pass_but_never_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = store_config(dir.path());
    config.commit_log.disk_max_used_ratio = 0.0; // every disk is "full"
    let store = MessageStore::open(config).unwrap();
    fill(&store, 60);
    let before = segments(dir.path()).len();
    assert_eq!(store.run_retention().unwrap(), 1, "one segment per pass when the disk is full");
    while store.run_retention().unwrap() > 0 {}
    let end = store.commit_log().max_offset();
    assert_eq!(
        store.commit_log().min_offset(),
        end - end % 8192,
        "down to the segment being written (from {before} files)"
    );
    assert!(
        segments(dir.path()).len() <= 2,
        "only the segment being written and the one prepared after it are left"
    );
    store
        .append_durable(&mut tagged_record("R", 0, b"still writable", None), "R", 0)
        .unwrap();
}

#[test]
fn a_full_disk_deletes_nothing_unexpired_when_forcible_cleaning_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = store_config(dir.path());
    config.commit_log.disk_max_used_ratio = 0.0; // every disk is "full"
    config.commit_log.clean_forcibly = false;
    let store = MessageStore::open(config).unwrap();
    fill(&store, 60);
    let before = segments(dir.path());
    assert!(before.len() > 2, "several segments to delete: {before:?}");
    assert_eq!(store.run_retention().unwrap(), 0);
    assert_eq!(store.commit_log().min_offset(), 0);
    assert_eq!(segments(dir.path()), before);
}

fn log_config(dir: &std::path::Path) -> CommitLogConfig {
    CommitLogConfig {
        segment_size_bytes: 1 << 20,
        flush_mode: FlushMode::Sync,
        ..CommitLogConfig::new(dir)
    }
}

#[test]
fn a_failed_flush_fails_every_waiter_and_every_later_append() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(AtomicBool::new(false));
    let log = CommitLog::open(CommitLogConfig {
        inject_flush_failure: Some(fault.clone()),
        ..log_config(dir.path())
    })
    .unwrap();
    log.append_durable(&mut tagged_record("F", 0, b"durable", None), "F", 0).unwrap();
    let durable = log.flushed_offset();
    fault.store(true, Ordering::Release);
    std::thread::scope(|s| {
        let waiters: Vec<_> = (0..4)
            .map(|t| {
                let log = &log;
                s.spawn(move || log.append_durable(&mut tagged_record("F", t, b"never acknowledged", None), "F", t))
            })
            .collect();
        for w in waiters {
            let r = w.join().unwrap();
            assert!(
                matches!(r, Err(StoreError::FlushFailed(_)) | Err(StoreError::NotWritable(_))),
                "an append whose flush failed must not succeed: {r:?}"
            );
        }
    });
    assert!(matches!(
        log.append_durable(&mut tagged_record("F", 0, b"later", None), "F", 0),
        Err(StoreError::NotWritable(_))
    ));
    assert_eq!(log.flushed_offset(), durable, "nothing was reported durable after the failure");
}

#[test]
fn a_slow_flush_answers_with_a_timeout_and_the_record_becomes_durable_later() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(CommitLogConfig {
        sync_flush_timeout: Duration::from_nanos(1),
        ..log_config(dir.path())
    })
    .unwrap();
    // The flusher also runs on its own every 10 ms, so an append can, rarely, find its record
    // already durable; a few tries make the timeout certain to show.
    let (r, offset) = (0..20)
        .find_map(|i| {
            let mut r = tagged_record("S", 0, &body(i, 64), None);
            match log.append_durable(&mut r, "S", 0) {
                Err(StoreError::FlushTimeout { offset, .. }) => Some((r, offset)),
                Ok(_) => None,
                Err(e) => panic!("expected FlushTimeout, got {e}"),
            }
        })
        .expect("a 1 ns flush timeout expires");
    for _ in 0..1000 {
        if log.flushed_offset() >= offset {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(log.flushed_offset() >= offset, "the flush caught up");
    assert_eq!(log.read_record(offset - r.len() as u64).unwrap().as_deref(), Some(r.as_slice()));
}

#[test]
fn with_a_retention_guard_a_segment_goes_only_once_the_guard_passes_it_whatever_its_age_or_the_disks_fill() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = store_config(dir.path());
    config.commit_log.disk_max_used_ratio = 0.0; // every disk is "full"
    let store = MessageStore::open(config).unwrap();
    // The tier "holds" the segments up to this offset.
    let tiered_below = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let held = tiered_below.clone();
    store
        .commit_log()
        .set_retention_guard(Arc::new(move |start| start + 8192 <= held.load(Ordering::SeqCst)));
    fill(&store, 60);
    let segs = segments(dir.path());
    let old = SystemTime::now() - Duration::from_secs(100 * 3600);
    for p in &segs[..3] {
        std::fs::File::options().write(true).open(p).unwrap().set_modified(old).unwrap();
    }
    assert_eq!(store.run_retention().unwrap(), 0, "expired and the disk full, but in no tier");
    assert_eq!(store.commit_log().min_offset(), 0);
    tiered_below.store(2 * 8192, Ordering::SeqCst);
    while store.run_retention().unwrap() > 0 {}
    assert_eq!(store.commit_log().min_offset(), 2 * 8192, "the two the tier holds, and no more");
}
