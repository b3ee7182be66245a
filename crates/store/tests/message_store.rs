//! The message store end to end on real files: dispatch into consume queues, reads with
//! RocketMQ's statuses and tag filtering, offset lookups, waiting for entries, restart, and
//! consume queues cut back when the commit log's recovery cuts a torn tail.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::time::Duration;

use petrel_protocol::message::MessageExt;
use petrel_protocol::properties::java_string_hash;
use petrel_store::{Boundary, FlushMode, GetStatus, MessageStore, MessageStoreConfig};
use support::{body, tagged_record};

fn config(root: &std::path::Path, mode: FlushMode) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = 8192;
    c.commit_log.flush_mode = mode;
    c.cq_entries_per_segment = 16;
    c
}

fn wait_dispatched(store: &MessageStore) {
    for _ in 0..10_000 {
        if store.dispatched_offset() >= store.commit_log().readable_end() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("dispatcher did not catch up");
}

/// 40 messages on queues 0..4 of topic T, tags alternating A/B.
fn fill(store: &MessageStore) {
    for i in 0..40u64 {
        let tag = if i % 2 == 0 { "A" } else { "B" };
        let mut r = tagged_record("T", (i % 4) as i32, &body(i, 100 + i as usize), Some(tag));
        store.append(&mut r, "T", (i % 4) as i32).unwrap();
    }
    wait_dispatched(store);
}

#[test]
fn reads_follow_rocketmq_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
    fill(&store);
    assert_eq!(store.queue_offsets("T", 0), (0, 10));

    let r = store.get_messages("T", 0, 0, 32, None);
    assert_eq!(
        (r.status, r.message_count, r.next_begin_offset, r.max_offset),
        (GetStatus::Found, 10, 10, 10)
    );
    let messages = petrel_protocol::decode_messages(&r.body).unwrap();
    assert_eq!(messages.len(), 10, "the body is the records back to back");
    for (k, msg) in messages.iter().enumerate() {
        assert_eq!((msg.topic.as_str(), msg.queue_id, msg.queue_offset), ("T", 0, k as i64));
        assert_eq!(msg.body.as_ref(), body(k as u64 * 4, msg.body.len()).as_slice());
    }
    let r = store.get_messages("T", 0, 3, 2, None);
    assert_eq!((r.status, r.message_count, r.next_begin_offset), (GetStatus::Found, 2, 5));

    // queue 1 holds only tag B (odd i): filtering for A examines and skips them all
    let a = std::collections::HashSet::from([i64::from(java_string_hash("A"))]);
    let b = std::collections::HashSet::from([i64::from(java_string_hash("B"))]);
    let r = store.get_messages("T", 1, 0, 32, Some(&a));
    assert_eq!(
        (r.status, r.message_count, r.next_begin_offset),
        (GetStatus::NoMatchedMessage, 0, 10)
    );
    assert_eq!(store.get_messages("T", 1, 0, 32, Some(&b)).message_count, 10);

    assert_eq!(store.get_messages("T", 0, 10, 32, None).status, GetStatus::OffsetOverflowOne);
    let r = store.get_messages("T", 0, 99, 32, None);
    assert_eq!((r.status, r.next_begin_offset), (GetStatus::OffsetOverflowBadly, 10));
    assert_eq!(store.get_messages("T", 7, 0, 32, None).status, GetStatus::NoMatchedLogicQueue);
    assert_eq!(store.get_messages("nope", 0, 0, 32, None).status, GetStatus::NoMatchedLogicQueue);
}

#[test]
fn offsets_by_time_and_earliest_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
    let mut times = Vec::new();
    for i in 0..6u64 {
        let mut r = tagged_record("TT", 0, &body(i, 10), None);
        times.push(store.append(&mut r, "TT", 0).unwrap().store_timestamp_ms);
        std::thread::sleep(Duration::from_millis(3));
    }
    wait_dispatched(&store);
    assert_eq!(store.earliest_store_time("TT", 0), times[0]);
    assert_eq!(store.earliest_store_time("TT", 1), -1);
    assert_eq!(store.offset_by_time("TT", 0, times[3], Boundary::Lower), 3);
    assert_eq!(store.offset_by_time("TT", 0, times[3], Boundary::Upper), 3);
    assert_eq!(store.offset_by_time("TT", 0, times[3] + 1, Boundary::Lower), 4);
    assert_eq!(store.offset_by_time("TT", 0, times[3] + 1, Boundary::Upper), 3);
    assert_eq!(store.offset_by_time("TT", 0, 0, Boundary::Lower), 0);
    assert_eq!(store.offset_by_time("TT", 0, i64::MAX, Boundary::Lower), 6);
    assert_eq!(store.offset_by_time("TT", 0, i64::MAX, Boundary::Upper), 5);
}

#[test]
fn waiters_wake_on_new_entries_and_time_out_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Sync)).unwrap();
    assert!(!store.wait_for_entries("W", 0, 0, Duration::from_millis(30)), "nothing arrives");
    std::thread::scope(|s| {
        let waiter = s.spawn(|| store.wait_for_entries("W", 0, 0, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(30));
        store.append(&mut tagged_record("W", 0, b"wake", None), "W", 0).unwrap();
        assert!(waiter.join().unwrap(), "the waiter saw the entry");
    });
    // SYNC_FLUSH: nothing is dispatched past the durable point
    assert!(store.dispatched_offset() <= store.commit_log().flushed_offset());
}

#[test]
fn queues_survive_restart_and_follow_a_cut_commit_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Sync)).unwrap();
    fill(&store);
    store.close().unwrap();

    let store = MessageStore::open(config(dir.path(), FlushMode::Sync)).unwrap();
    assert_eq!(store.queue_offsets("T", 3), (0, 10));
    // one more message, dispatched, then a crash before any checkpoint covers it
    store
        .append_durable(&mut tagged_record("T", 3, &body(99, 120), None), "T", 3)
        .unwrap();
    wait_dispatched(&store);
    assert_eq!(store.queue_offsets("T", 3), (0, 11));
    let r = store.get_messages("T", 3, 10, 1, None);
    let (last, _) = MessageExt::decode_verified(&r.body).unwrap();
    drop(store);

    // its second half never reached the disk
    {
        use std::os::unix::fs::FileExt;
        let off = last.commit_log_offset as u64;
        let seg = dir.path().join("commitlog").join(format!("{:020}", off - off % 8192));
        let f = std::fs::OpenOptions::new().write(true).open(seg).unwrap();
        f.write_all_at(&[0u8; 40], off % 8192 + 60).unwrap();
    }
    // and lose the dispatch checkpoint, so the queues are rebuilt from the start of the log
    std::fs::remove_file(dir.path().join("dispatch_checkpoint")).unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Sync)).unwrap();
    assert!(store.commit_log().recovery_report().truncated_bytes > 0);
    assert_eq!(store.queue_offsets("T", 3), (0, 10), "the entry of the cut record is gone");
    assert_eq!(store.queue_offsets("T", 2), (0, 10));
    let a = store.append_durable(&mut tagged_record("T", 3, b"again", None), "T", 3).unwrap();
    assert_eq!(a.queue_offset, 10, "queue offsets continue from the cut");
    assert_eq!(a.physical_offset, last.commit_log_offset as u64);
    wait_dispatched(&store);
    let r = store.get_messages("T", 3, 10, 1, None);
    assert_eq!(r.status, GetStatus::Found);
    assert_eq!(MessageExt::decode_verified(&r.body).unwrap().0.body.as_ref(), b"again");
}
