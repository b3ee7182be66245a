//! The message store end to end on real files: dispatch into consume queues, reads with
//! RocketMQ's statuses and tag filtering, offset lookups, waiting for entries, restart, and
//! consume queues cut back when the commit log's recovery cuts a torn tail.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::time::Duration;

use petrel_protocol::message::MessageExt;
use petrel_protocol::properties::java_string_hash;
use petrel_store::{Boundary, FlushMode, GetStatus, MessageFilter, MessageStore, MessageStoreConfig};
use support::{body, tagged_record, wait_dispatched};

fn config(root: &std::path::Path, mode: FlushMode) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = 8192;
    c.commit_log.flush_mode = mode;
    c.cq_entries_per_segment = 16;
    c
}

/// 40 messages on queues 0..4 of topic T, tags alternating A/B.
fn fill(store: &MessageStore) {
    for i in 0..40u64 {
        let tag = if i % 2 == 0 { "A" } else { "B" };
        let body_len = 100 + usize::try_from(i).expect("below 40");
        let mut r = tagged_record("T", (i % 4) as i32, &body(i, body_len), Some(tag));
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
    let r = store.get_messages("T", 1, 0, 32, Some(&a as &dyn MessageFilter));
    assert_eq!(
        (r.status, r.message_count, r.next_begin_offset),
        (GetStatus::NoMatchedMessage, 0, 10)
    );
    assert_eq!(store.get_messages("T", 1, 0, 32, Some(&b as &dyn MessageFilter)).message_count, 10);

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

#[test]
fn a_queue_whose_consume_queue_cannot_be_created_fails_alone_and_catches_up_later() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
    // A file where the topic's directory must go: creating its consume queue fails (as EMFILE,
    // `max_map_count` or ENOSPC would).
    let blocker = dir.path().join("consumequeue").join("Bad");
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, b"in the way").unwrap();
    // Appends to "Bad" are accepted until the dispatcher has met the failure; how many get in
    // first depends on the dispatcher's pace, so the test counts them rather than assuming.
    let mut bad_accepted = 0i64;
    for i in 0..6u64 {
        match store.append(&mut tagged_record("Bad", 0, &body(i, 80), None), "Bad", 0) {
            Ok(_) => bad_accepted += 1,
            Err(petrel_store::StoreError::QueueUnavailable { .. }) => assert!(i > 0),
            Err(other) => panic!("unexpected refusal: {other}"),
        }
        store.append(&mut tagged_record("Good", 0, &body(i, 80), None), "Good", 0).unwrap();
    }
    assert!(bad_accepted >= 1, "the first append cannot know the queue fails");
    wait_dispatched(&store);
    assert_eq!(store.queue_offsets("Good", 0), (0, 6), "the other queue is dispatched");
    let refused = store.append(&mut tagged_record("Bad", 0, b"x", None), "Bad", 0).unwrap_err();
    assert!(
        matches!(&refused, petrel_store::StoreError::QueueUnavailable { queue_id: 0, .. }),
        "{refused}"
    );
    assert!(store.queue_failure("Bad", 0).is_some() && store.queue_failure("Good", 0).is_none());
    store.append(&mut tagged_record("Good", 0, b"more", None), "Good", 0).unwrap();
    wait_dispatched(&store);
    assert_eq!(store.queue_offsets("Good", 0).1, 7);

    std::fs::remove_file(&blocker).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.queue_failure("Bad", 0).is_some() {
        assert!(std::time::Instant::now() < deadline, "the queue was never retried");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        store.queue_offsets("Bad", 0),
        (0, bad_accepted),
        "every skipped record is in its queue now"
    );
    let got = store.get_messages("Bad", 0, 0, 32, None);
    assert_eq!(got.message_count as i64, bad_accepted);
    store.append(&mut tagged_record("Bad", 0, b"again", None), "Bad", 0).unwrap();
    wait_dispatched(&store);
    assert_eq!(store.queue_offsets("Bad", 0).1, bad_accepted + 1);
    store.close().unwrap();
}

#[test]
fn a_stale_consume_queue_slot_gives_way_to_the_commit_log() {
    // A consume queue that kept entries the commit log no longer has (its records were lost and
    // the queue offsets given to new records): the new records must be visible, not skipped as
    // duplicates.
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), FlushMode::Sync);
    let store = MessageStore::open(c.clone()).unwrap();
    for i in 0..4u64 {
        store.append(&mut tagged_record("S", 0, &body(i, 60), None), "S", 0).unwrap();
    }
    wait_dispatched(&store);
    store.close().unwrap();
    let cq = dir.path().join("consumequeue/S/0/00000000000000000000");
    let saved = std::fs::read(&cq).unwrap();
    // Start over: a fresh log whose queue S:0 restarts at offset 0, with the old queue file back.
    std::fs::remove_dir_all(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    let store = MessageStore::open(c.clone()).unwrap();
    store.append(&mut tagged_record("pad", 0, &body(9, 333), None), "pad", 0).unwrap();
    store.close().unwrap();
    std::fs::create_dir_all(cq.parent().unwrap()).unwrap();
    std::fs::write(&cq, &saved).unwrap();
    std::fs::remove_file(dir.path().join("dispatch_checkpoint")).unwrap();
    let store = MessageStore::open(c).unwrap();
    let new: Vec<u64> = (0..2u64)
        .map(|i| {
            store
                .append_durable(&mut tagged_record("S", 0, &body(100 + i, 70), None), "S", 0)
                .unwrap()
                .physical_offset
        })
        .collect();
    wait_dispatched(&store);
    let got = store.get_messages("S", 0, 0, 32, None);
    assert_eq!(store.queue_offsets("S", 0).1, 2, "the stale entries are gone");
    assert_eq!(got.message_count, 2, "{got:?} {new:?}");
    let first = MessageExt::decode(&got.body).unwrap().0;
    assert_eq!(first.commit_log_offset as u64, new[0], "entry 0 points at the new record");
    store.close().unwrap();
}

fn cq_entry(offset: u64) -> petrel_store::CqEntry {
    petrel_store::CqEntry {
        commit_log_offset: offset,
        size_bytes: 100,
        tags_code: 0,
    }
}

#[test]
fn a_queue_that_begins_late_keeps_its_start_across_a_reopen_but_lost_slots_do_not_look_like_one() {
    use petrel_store::ConsumeQueue;
    let dir = tempfile::tempdir().unwrap();
    {
        // A replica that joined late: the queue's first record has queue offset 100.
        let late = ConsumeQueue::open(dir.path(), "T", 0, 64, u64::MAX).unwrap();
        late.append(100, cq_entry(5000)).unwrap();
        late.append(101, cq_entry(5100)).unwrap();
        late.flush().unwrap();
        let from_zero = ConsumeQueue::open(dir.path(), "T", 1, 64, u64::MAX).unwrap();
        for i in 0..3 {
            from_zero.append(i, cq_entry(i as u64 * 100)).unwrap();
        }
        from_zero.flush().unwrap();
    }
    let late = ConsumeQueue::open(dir.path(), "T", 0, 64, u64::MAX).unwrap();
    assert_eq!((late.min_offset(), late.max_offset()), (100, 102));
    assert_eq!(late.get(100).map(|e| e.commit_log_offset), Some(5000));
    assert!(late.get(99).is_none());
    // A power failure that lost queue 1's first slot (zeros) leaves a queue that recovery
    // rebuilds from the log, not one that "begins" at 1.
    let path = dir.path().join("T").join("1").join(format!("{:020}", 0));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..20].fill(0);
    std::fs::write(&path, bytes).unwrap();
    let lost = ConsumeQueue::open(dir.path(), "T", 1, 64, u64::MAX).unwrap();
    assert_eq!((lost.min_offset(), lost.max_offset()), (0, 0));
}

#[test]
fn segments_a_crash_left_short_or_lost_are_removed_at_open_with_every_later_one_and_refilled() {
    use petrel_store::ConsumeQueue;
    let dir = tempfile::tempdir().unwrap();
    let seg = |n: u64| dir.path().join("T").join("0").join(format!("{:020}", n * 64 * 20));
    {
        let q = ConsumeQueue::open(dir.path(), "T", 0, 64, u64::MAX).unwrap();
        for i in 0..130 {
            q.append(i, cq_entry(i as u64 * 100)).unwrap();
        }
        q.flush().unwrap();
    }
    // The third segment was created after the last flush, and a power failure kept only part
    // of its allocation: its entries (128, 129) are still in the commit log.
    std::fs::OpenOptions::new().write(true).open(seg(2)).unwrap().set_len(100).unwrap();
    let q = ConsumeQueue::open(dir.path(), "T", 0, 64, u64::MAX).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (0, 128));
    assert!(!seg(2).exists());
    assert_eq!(q.append(128, cq_entry(12_800)).unwrap(), petrel_store::CqAppend::Appended);
    assert_eq!(q.get(128).map(|e| e.commit_log_offset), Some(12_800));
    q.flush().unwrap();
    assert_eq!(std::fs::metadata(seg(2)).unwrap().len(), 64 * 20, "the refilled segment is whole");
    drop(q);
    // Both later segments created after the last flush: the second lost its name, the third
    // kept its own. Everything from the gap on goes; the log re-files it from entry 64.
    std::fs::remove_file(seg(1)).unwrap();
    let q = ConsumeQueue::open(dir.path(), "T", 0, 64, u64::MAX).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (0, 64));
    assert!(!seg(2).exists(), "a segment after a lost one is not taken for its successor");
    assert_eq!(q.append(64, cq_entry(6_400)).unwrap(), petrel_store::CqAppend::Appended);
}

#[test]
fn stale_entries_past_the_log_end_are_cleared_and_only_written_regions_are_read() {
    use petrel_store::ConsumeQueue;
    let dir = tempfile::tempdir().unwrap();
    let entries_per_segment = 64 * 1024;
    {
        let q = ConsumeQueue::open(dir.path(), "T", 0, entries_per_segment, u64::MAX).unwrap();
        for i in 0..10 {
            q.append(i, cq_entry(i as u64 * 100)).unwrap();
        }
        q.flush().unwrap();
    }
    let path = dir.path().join("T").join("0").join(format!("{:020}", 0));
    let len = entries_per_segment * 20;
    // What the file system reports written: the first page, which holds the 10 entries (or,
    // where it cannot tell written from allocated blocks, the whole file).
    let ranges = petrel_store::data_ranges(&path, 0, len);
    assert!(ranges.iter().any(|&(from, to)| from == 0 && to >= 200), "{ranges:?}");
    assert!(
        ranges == [(0, len)] || ranges.iter().map(|(f, t)| t - f).sum::<u64>() < len / 2,
        "{ranges:?}"
    );
    // The log recovered to 550: entries 6..10 point past it and are cut, their slots zeroed.
    let q = ConsumeQueue::open(dir.path(), "T", 0, entries_per_segment, 550).unwrap();
    assert_eq!(q.max_offset(), 5);
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes[100..].iter().all(|b| *b == 0), "the stale slots are zeroed");
    assert_eq!(q.append(5, cq_entry(9_000)).unwrap(), petrel_store::CqAppend::Appended);
}

#[test]
fn a_tail_no_reader_saw_is_cut_and_the_queues_continue_from_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
    // A confirm offset holds the dispatcher back, as on a replica in controller mode.
    let gate = petrel_store::Watermark::new("confirmed", 0, 1);
    store.commit_log().gate_readers_on(gate.clone());
    let mut ends = Vec::new();
    for i in 0..60u64 {
        let q = (i % 2) as i32;
        let a = store.append(&mut tagged_record("T", q, &body(i, 300), None), "T", q).unwrap();
        ends.push(a.end_offset());
    }
    let cut_at = ends[19];
    assert!(cut_at / 8192 < store.commit_log().max_offset() / 8192, "the cut spans segments");
    gate.advance(ends[9]);
    store.commit_log().wake_readers();
    wait_dispatched(&store);
    assert_eq!(store.queue_offsets("T", 0), (0, 5));
    // Past what readers saw: refused, nothing changed.
    assert!(store.truncate_to(ends[5]).is_err());
    // Inside a record: refused.
    assert!(store.truncate_to(cut_at + 1).is_err());
    let before = store.commit_log().max_offset();
    assert_eq!(store.truncate_to(cut_at).unwrap(), before - cut_at);
    assert_eq!(store.commit_log().max_offset(), cut_at);
    let next = store.append(&mut tagged_record("T", 0, b"after the cut", None), "T", 0).unwrap();
    assert_eq!(
        (next.physical_offset, next.queue_offset),
        (cut_at, 10),
        "queue 0 continues at its 11th slot"
    );
    gate.advance(u64::MAX);
    store.commit_log().wake_readers();
    wait_dispatched(&store);
    assert_eq!(store.queue_offsets("T", 0), (0, 11));
    assert_eq!(store.queue_offsets("T", 1), (0, 10));
    let got = store.get_messages("T", 0, 10, 8, None);
    assert_eq!(got.message_count, 1);
    assert_eq!(MessageExt::decode_verified(&got.body).unwrap().0.body.as_ref(), b"after the cut");
    let end = store.commit_log().max_offset();
    store.close().unwrap();
    // Nothing of the cut tail comes back after a restart.
    let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
    assert_eq!(store.commit_log().max_offset(), end);
    assert_eq!(store.queue_offsets("T", 0), (0, 11));
    store.close().unwrap();
}

/// A crash right after a cut: the checkpoint written before it claimed the old end, inside the
/// segment the cut kept. Recovery must start at or below the cut, or it would take the zeroed
/// bytes between the cut and the old end for the log.
#[test]
fn a_crash_right_after_a_cut_recovers_to_the_cut_not_to_the_checkpoint_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut ends = Vec::new();
    {
        let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
        let gate = petrel_store::Watermark::new("confirmed", 0, 1);
        store.commit_log().gate_readers_on(gate.clone());
        for i in 0..30u64 {
            ends.push(
                store
                    .append(&mut tagged_record("T", 0, &body(i, 300), None), "T", 0)
                    .unwrap()
                    .end_offset(),
            );
        }
        gate.advance(ends[4]);
        store.commit_log().wake_readers();
        // The close writes the checkpoint at the end: ends[29].
        store.close().unwrap();
    }
    let cut_at = ends[27];
    assert_eq!(cut_at / 8192, ends[29] / 8192, "the cut and the old end share a segment");
    let mut c = config(dir.path(), FlushMode::Async);
    c.confirm_gate = true;
    let store = MessageStore::open(c.clone()).unwrap();
    assert_eq!(store.truncate_to(cut_at).unwrap(), ends[29] - cut_at);
    store.halt_as_if_crashed();
    drop(store);
    let store = MessageStore::open(c).unwrap();
    assert_eq!(store.commit_log().max_offset(), cut_at, "recovered to the cut");
    let next = store.append(&mut tagged_record("T", 0, b"after", None), "T", 0).unwrap();
    assert_eq!((next.physical_offset, next.queue_offset), (cut_at, 28));
}

/// Readable bytes that are no record (here a replica's append of what a master never wrote):
/// the dispatcher stops there and looks again with a growing pause instead of spinning, says
/// where and why, and every append is refused while it lasts — consumers would see none of it.
#[test]
fn a_record_the_dispatcher_cannot_read_stops_it_without_spinning_and_refuses_appends() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
    // A confirm offset holds the dispatcher back while the record is damaged under it.
    let gate = petrel_store::Watermark::new("confirmed", 0, 1);
    store.commit_log().gate_readers_on(gate.clone());
    let mut last = None;
    for i in 0..3u64 {
        last = Some(store.append(&mut tagged_record("T", 0, &body(i, 100), None), "T", 0).unwrap());
    }
    let bad_at = last.unwrap().physical_offset;
    gate.advance(bad_at);
    store.commit_log().wake_readers();
    wait_until(|| store.dispatched_offset() == bad_at);
    let segment = std::fs::File::options()
        .write(true)
        .open(dir.path().join("commitlog").join(format!("{:020}", 0)))
        .unwrap();
    segment.write_all_at(&[0xAB; 8], bad_at + 4).unwrap();
    gate.advance(u64::MAX);
    store.commit_log().wake_readers();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.dispatch_stall().is_none() {
        assert!(std::time::Instant::now() < deadline, "the dispatcher never reported the bad record");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stall = store.dispatch_stall().unwrap();
    assert_eq!(stall.offset, bad_at);
    assert!(stall.reason.contains("no record starts"), "{}", stall.reason);
    // A spinning dispatcher makes millions of passes a second; one backing off, a handful.
    let before = store.dispatch_passes();
    std::thread::sleep(Duration::from_secs(1));
    let passes = store.dispatch_passes() - before;
    assert!(passes <= 20, "{passes} passes in a second over the same bad record");
    let e = store.append(&mut tagged_record("T", 0, b"more", None), "T", 0).unwrap_err();
    assert!(
        matches!(&e, petrel_store::StoreError::DispatchStuck { offset, .. } if *offset == bad_at),
        "{e}"
    );
    // The two records before it stay readable.
    assert_eq!(store.get_messages("T", 0, 0, 8, None).message_count, 2);
    store.close().unwrap();
}

/// A confirm offset inside a record (a slave's ack ends mid-record, since frames are cut by
/// size) is no fault: the dispatcher sleeps until the readable end moves, appends go on.
#[test]
fn a_readable_end_inside_a_record_is_waited_for_without_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Async)).unwrap();
    let gate = petrel_store::Watermark::new("confirmed", 0, 1);
    store.commit_log().gate_readers_on(gate.clone());
    let first = store.append(&mut tagged_record("T", 0, &body(0, 300), None), "T", 0).unwrap();
    store.append(&mut tagged_record("T", 0, &body(1, 300), None), "T", 0).unwrap();
    gate.advance(first.end_offset() + 100);
    store.commit_log().wake_readers();
    wait_until(|| store.dispatched_offset() == first.end_offset());
    // Past the short window in which a dispatcher that just found records polls for more.
    std::thread::sleep(Duration::from_millis(200));
    let before = store.dispatch_passes();
    std::thread::sleep(Duration::from_secs(1));
    let passes = store.dispatch_passes() - before;
    assert!(passes <= 30, "{passes} passes in a second waiting for the rest of a record");
    assert!(store.dispatch_stall().is_none(), "waiting is not being stuck");
    store.append(&mut tagged_record("T", 0, b"still taken", None), "T", 0).unwrap();
    gate.advance(u64::MAX);
    store.commit_log().wake_readers();
    wait_dispatched(&store);
    assert_eq!(store.queue_offsets("T", 0), (0, 3));
    store.close().unwrap();
}

fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A flipped bit in a record of zeros holds a zero run up to a sector boundary, which alone
/// looks like a torn write. Under SYNC_FLUSH every record the dispatcher had read was on disk,
/// so a bad record below the dispatch point is damage: the store refuses to open (naming it)
/// rather than cut it and every valid record after it.
#[test]
fn a_flipped_bit_in_a_record_of_zeros_below_the_dispatched_point_is_damage_not_a_tear() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Sync)).unwrap();
    let mut placed = Vec::new();
    for i in 0..12u64 {
        let a = store.append(&mut tagged_record("T", 0, &[0u8; 1500], None), "T", 0).unwrap();
        placed.push((a.physical_offset, a.end_offset(), i));
    }
    wait_dispatched(&store);
    store.close().unwrap();
    // Recovery scans from its own checkpoint: without one it reads every record again.
    std::fs::remove_file(dir.path().join("commitlog").join("checkpoint")).unwrap();
    // A record in the middle, whose body of zeros spans a sector boundary: flip one bit.
    let (start, end, _) = placed[5];
    let boundary = (start / 512 + 2) * 512;
    assert!(boundary + 64 < end, "the sector boundary lies inside the record's body");
    let segment = std::fs::File::options()
        .read(true)
        .write(true)
        .open(dir.path().join("commitlog").join(format!("{:020}", start - start % 8192)))
        .unwrap();
    segment.write_all_at(&[0x01], (boundary - 200) % 8192).unwrap();
    let e = MessageStore::open(config(dir.path(), FlushMode::Sync))
        .err()
        .expect("damage refuses to open");
    assert!(
        matches!(&e, petrel_store::StoreError::Corrupt { offset, next_valid, .. } if *offset == start && *next_valid == placed[6].0),
        "{e}"
    );
    // Nothing was cut: the operator can still restore the segment.
    let mut c = config(dir.path(), FlushMode::Sync);
    c.commit_log.truncate_corruption = true;
    let store = MessageStore::open(c).unwrap();
    assert_eq!(store.commit_log().max_offset(), start, "cut only because the operator asked");
    store.close().unwrap();
}

/// The last record of a SYNC_FLUSH log was flushed whole before readers saw it, so a bad
/// record there is damage too, though nothing valid follows it: the store refuses to open
/// rather than cut what consumers already read. Under ASYNC_FLUSH nothing vouches for the
/// tail, and the same bytes are a torn tail that is cut.
#[test]
fn a_bad_last_record_below_the_dispatched_point_is_damage_under_sync_flush_only() {
    use std::os::unix::fs::FileExt;
    for mode in [FlushMode::Sync, FlushMode::Async] {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(config(dir.path(), mode)).unwrap();
        let mut placed = Vec::new();
        for _ in 0..4u64 {
            let a = store.append(&mut tagged_record("T", 0, b"last one counts", None), "T", 0).unwrap();
            placed.push((a.physical_offset, a.end_offset()));
        }
        wait_dispatched(&store);
        store.close().unwrap();
        std::fs::remove_file(dir.path().join("commitlog").join("checkpoint")).unwrap();
        let (start, end) = placed[3];
        let segment = std::fs::File::options()
            .read(true)
            .write(true)
            .open(dir.path().join("commitlog").join(format!("{:020}", start - start % 8192)))
            .unwrap();
        // A flipped bit inside the body: the CRC no longer matches.
        segment.write_all_at(&[0xFF], (end - 4) % 8192).unwrap();
        let opened = MessageStore::open(config(dir.path(), mode));
        match mode {
            FlushMode::Sync => {
                let e = opened.err().expect("damage below the durable point refuses to open");
                assert!(
                    matches!(&e, petrel_store::StoreError::DurableDamaged { offset, durable_below, .. }
                        if *offset == start && *durable_below == end),
                    "{e}"
                );
                assert!(e.to_string().contains("truncateCorruptLog"), "says how to go on: {e}");
            }
            FlushMode::Async => {
                let store = opened.expect("a torn tail is cut");
                assert_eq!(store.commit_log().max_offset(), start);
                store.close().unwrap();
            }
        }
    }
}
