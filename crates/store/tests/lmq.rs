//! Light message queues in the store: a record naming `%LMQ%` queues gets its offset in each
//! written into its properties at append, the dispatcher files it in each of them, and a
//! crash, a restart and a replica fed the master's bytes all arrive at the same queues and
//! the same next offsets, from the records alone.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::time::Duration;

use bytes::BytesMut;
use petrel_protocol::properties::keys;
use petrel_store::{FlushMode, GetStatus, MessageStore, MessageStoreConfig, StoreError, Target};
use support::{append_lmq as append, lmq_record as record, names, wait_dispatched};

fn config(root: &std::path::Path, max_lmq_queues: usize) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = 64 << 10;
    c.commit_log.flush_mode = FlushMode::Sync;
    c.commit_log.lmq = true;
    c.commit_log.max_lmq_queues = max_lmq_queues;
    c.cq_entries_per_segment = 64;
    c
}

/// The unique keys and `INNER_MULTI_QUEUE_OFFSET`s of a queue's messages, in queue order.
fn read(store: &MessageStore, queue: &str, queue_id: i32) -> Vec<(String, String)> {
    let r = store.get_messages(queue, queue_id, 0, 1000, None);
    if r.status != GetStatus::Found {
        return Vec::new();
    }
    petrel_protocol::decode_messages(&r.body)
        .unwrap()
        .into_iter()
        .map(|m| {
            let p = |k: &str| m.properties.get(k).cloned().unwrap_or_default();
            (p(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX), p(keys::INNER_MULTI_QUEUE_OFFSET))
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

/// Three sends: to a and b, to a, to none; the state every reader must arrive at.
fn fill(store: &MessageStore) {
    append(store, 0, &names(&["%LMQ%a", "%LMQ%b"])).unwrap();
    append(store, 1, &names(&["%LMQ%a"])).unwrap();
    append(store, 2, &[]).unwrap();
    wait_dispatched(store);
}

fn check_filled(store: &MessageStore) {
    assert_eq!(read(store, "%LMQ%a", 0), pairs(&[("U0", "0,0"), ("U1", "1")]));
    assert_eq!(read(store, "%LMQ%b", 0), pairs(&[("U0", "0,0")]));
    assert_eq!(read(store, "orders", 1).len(), 3, "the parent queue keeps every message");
    assert_eq!(store.queue_offsets("%LMQ%a", 0), (0, 2));
}

#[test]
fn a_record_is_filed_in_each_light_queue_it_names_with_its_offsets_in_its_properties() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 100)).unwrap();
    fill(&store);
    check_filled(&store);
    // A clean restart, then a crash: both reopen at the same next offsets.
    store.close().unwrap();
    let store = MessageStore::open(config(dir.path(), 100)).unwrap();
    check_filled(&store);
    append(&store, 3, &names(&["%LMQ%b", "%LMQ%a"])).unwrap();
    store.halt_as_if_crashed();
    drop(store);
    let store = MessageStore::open(config(dir.path(), 100)).unwrap();
    wait_dispatched(&store);
    assert_eq!(read(&store, "%LMQ%b", 0), pairs(&[("U0", "0,0"), ("U3", "1,2")]));
    append(&store, 4, &names(&["%LMQ%a"])).unwrap();
    wait_dispatched(&store);
    let a: Vec<String> = read(&store, "%LMQ%a", 0).into_iter().map(|(_, o)| o).collect();
    assert_eq!(a, ["0,0", "1", "1,2", "3"]);
}

#[test]
fn the_light_queue_bound_refuses_a_new_queue_past_it_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 2)).unwrap();
    append(&store, 0, &names(&["%LMQ%a", "%LMQ%b"])).unwrap();
    let end = store.commit_log().max_offset();
    match append(&store, 1, &names(&["%LMQ%a", "%LMQ%c"])) {
        Err(StoreError::LmqQueuesExceeded { count: 2, new: 1 }) => {}
        other => panic!("a third queue past a bound of 2: {other:?}"),
    }
    assert_eq!(store.commit_log().max_offset(), end, "nothing written");
    // Queues it holds already still take messages.
    append(&store, 2, &names(&["%LMQ%b", "%LMQ%a"])).unwrap();
    wait_dispatched(&store);
    assert_eq!(read(&store, "%LMQ%a", 0).len(), 2);
}

#[test]
fn records_that_cannot_name_light_queues_are_refused_before_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 100)).unwrap();
    let refused = |lmq: &[String], records: &mut BytesMut| {
        let e = store.append_to(records, Target::with_lmq("orders", 1, lmq)).unwrap_err();
        assert!(matches!(e, StoreError::BadRecord(_)), "{e}");
    };
    refused(&names(&["%LMQ%a", "%LMQ%a"]), &mut record(0, &names(&["%LMQ%a", "%LMQ%a"])));
    refused(&names(&["orders2"]), &mut record(0, &names(&["orders2"])));
    let mut two = record(0, &names(&["%LMQ%a"]));
    two.extend_from_slice(&record(1, &names(&["%LMQ%a"])));
    refused(&names(&["%LMQ%a"]), &mut two);
    assert_eq!(store.commit_log().max_offset(), 0);
    // And a log without light queues refuses any.
    let dir = tempfile::tempdir().unwrap();
    let mut off = config(dir.path(), 100);
    off.commit_log.lmq = false;
    let store = MessageStore::open(off).unwrap();
    let lmq = names(&["%LMQ%a"]);
    let e = store
        .append_to(&mut record(0, &lmq), Target::with_lmq("orders", 1, &lmq))
        .unwrap_err();
    assert!(matches!(e, StoreError::BadRecord(_)), "{e}");
}

#[test]
fn a_replica_fed_the_masters_bytes_builds_the_same_light_queues_and_continues_them() {
    let master_dir = tempfile::tempdir().unwrap();
    let master = MessageStore::open(config(master_dir.path(), 100)).unwrap();
    fill(&master);
    let replica_dir = tempfile::tempdir().unwrap();
    let replica = MessageStore::open(config(replica_dir.path(), 100)).unwrap();
    let stream = master.commit_log().read_raw(0, 1 << 20).unwrap();
    let end = replica.commit_log().append_replicated(0, stream).unwrap();
    // Under SYNC_FLUSH readers see what is durable.
    replica.commit_log().wait_durable(end).unwrap();
    wait_dispatched(&replica);
    check_filled(&replica);
    // Promoted, it numbers the next message where the master would have.
    let end = append(&replica, 3, &names(&["%LMQ%a", "%LMQ%c"])).unwrap();
    assert!(end > 0);
    wait_dispatched(&replica);
    assert_eq!(read(&replica, "%LMQ%a", 0)[2], ("U3".to_owned(), "2,0".to_owned()));
}

/// A store whose retention deletes every segment but the newest at once, with `%LMQ%old`'s
/// only message in the first segment and `%LMQ%kept`'s second one past it; the sequence number
/// of the last record.
fn old_and_kept(root: &std::path::Path) -> (MessageStoreConfig, MessageStore, u64) {
    let mut c = config(root, 100);
    c.commit_log.file_reserved_time = Duration::ZERO;
    let store = MessageStore::open(c.clone()).unwrap();
    append(&store, 0, &names(&["%LMQ%old", "%LMQ%kept"])).unwrap();
    // Fill past the first segment so that retention can delete it.
    let mut n = 1;
    while store.commit_log().max_offset() < (64 << 10) + 1 {
        append(&store, n, &[]).unwrap();
        n += 1;
    }
    append(&store, n, &names(&["%LMQ%kept"])).unwrap();
    (c, store, n)
}

#[test]
fn a_light_queue_whose_messages_all_expired_is_removed_and_starts_again_at_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (c, store, n) = old_and_kept(dir.path());
    wait_dispatched(&store);
    assert_eq!(store.commit_log().light_queue_count(), 2);
    assert!(store.run_retention().unwrap() > 0, "the first segment expired");
    assert_eq!(store.remove_expired_light_queues(10).unwrap(), ["%LMQ%old"]);
    assert_eq!(store.commit_log().light_queue_count(), 1);
    assert!(!dir.path().join("consumequeue/%LMQ%old").exists());
    assert_eq!(store.queue_offsets("%LMQ%kept", 0), (1, 2), "a queue with a readable message stays");
    // The next message to the removed queue starts it again at 0, through a restart too.
    append(&store, n + 1, &names(&["%LMQ%old"])).unwrap();
    wait_dispatched(&store);
    assert_eq!(read(&store, "%LMQ%old", 0)[0].1, "0");
    store.close().unwrap();
    let store = MessageStore::open(c).unwrap();
    assert_eq!(store.queue_offsets("%LMQ%old", 0), (0, 1));
    assert_eq!(store.commit_log().light_queue_count(), 2);
}

#[test]
fn the_checkpoint_grows_with_the_queues_that_change_and_a_crash_recovers_from_its_last_block() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 10_000);
    c.commit_log.checkpoint_interval = Duration::from_millis(20);
    let store = MessageStore::open(c.clone()).unwrap();
    // 2,000 light queues in the base (written at the next open), then one queue that changes.
    let all: Vec<String> = (0..2_000).map(|i| format!("%LMQ%idle{i}")).collect();
    for (n, chunk) in all.chunks(100).enumerate() {
        append(&store, n as u64, chunk).unwrap();
    }
    store.close().unwrap();
    let base_bytes = std::fs::metadata(dir.path().join("commitlog/checkpoint")).unwrap().len();
    let store = MessageStore::open(c.clone()).unwrap();
    let hot = names(&["%LMQ%hot"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut n = 100;
    // Until several blocks were written after the last send's offset was durable.
    let delta = dir.path().join("commitlog/checkpoint.delta");
    while n < 130 || std::fs::read_to_string(&delta).map_or(0, |t| t.matches("\ndelta\t").count()) < 5 {
        append(&store, n, &hot).unwrap();
        n += 1;
        std::thread::sleep(Duration::from_millis(5));
        assert!(std::time::Instant::now() < deadline, "no checkpoint blocks within 20 s");
    }
    let end = store.commit_log().max_offset();
    let delta_bytes = std::fs::metadata(&delta).unwrap().len();
    // Each block names the hot queue's topic (and the parent's), never the 2,000 idle ones.
    let text = std::fs::read_to_string(&delta).unwrap();
    assert!(!text.contains("%LMQ%idle"), "an idle queue in a delta block");
    assert!(
        delta_bytes < base_bytes,
        "deltas of {delta_bytes} bytes against a base of {base_bytes}"
    );
    std::thread::sleep(Duration::from_millis(200));
    store.halt_as_if_crashed();
    drop(store);
    let store = MessageStore::open(c).unwrap();
    let report = store.commit_log().recovery_report();
    assert!(
        report.scanned_from >= end,
        "recovery scanned from {} though {end} was checkpointed",
        report.scanned_from
    );
    assert_eq!(store.queue_offsets("%LMQ%hot", 0).1, (n - 100) as i64);
    // The idle queues keep their numbering from the base.
    append(&store, n, &names(&["%LMQ%idle7"])).unwrap();
    wait_dispatched(&store);
    assert_eq!(read(&store, "%LMQ%idle7", 0).last().unwrap().1, "1");
}

#[test]
fn an_expired_light_queue_nobody_opened_since_a_restart_is_removed_too() {
    let dir = tempfile::tempdir().unwrap();
    let (c, store, _) = old_and_kept(dir.path());
    store.close().unwrap();
    // After the restart neither queue is opened until the removal's pass reaches it.
    let store = MessageStore::open(c.clone()).unwrap();
    wait_dispatched(&store);
    assert!(store.run_retention().unwrap() > 0, "the first segment expired");
    assert_eq!(store.remove_expired_light_queues(10).unwrap(), ["%LMQ%old"]);
    assert_eq!(store.commit_log().light_queue_count(), 1);
    assert_eq!(store.queue_offsets("%LMQ%kept", 0), (1, 2));
    assert_eq!(store.queue_offsets("%LMQ%old", 0), (0, 0));
    store.close().unwrap();
    let store = MessageStore::open(c).unwrap();
    assert_eq!(store.queue_offsets("%LMQ%old", 0), (0, 0), "its keys are gone");
    assert_eq!(store.queue_offsets("%LMQ%kept", 0), (1, 2));
}

#[test]
fn a_light_queue_of_the_older_layout_is_served_from_its_segments() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 100)).unwrap();
    append(&store, 0, &names(&["%LMQ%old"])).unwrap();
    append(&store, 1, &names(&["%LMQ%old"])).unwrap();
    wait_dispatched(&store);
    let r = store.get_messages("%LMQ%old", 0, 0, 10, None);
    // Each record's size is its first word; the body holds them back to back.
    let mut sizes = Vec::new();
    let mut at = 0;
    while at < r.body.len() {
        let size = u32::from_be_bytes(r.body[at..at + 4].try_into().unwrap());
        sizes.push(size);
        at += size as usize;
    }
    let entries: Vec<petrel_store::CqEntry> = petrel_protocol::decode_messages(&r.body)
        .unwrap()
        .iter()
        .zip(sizes)
        .map(|(m, size_bytes)| petrel_store::CqEntry {
            commit_log_offset: u64::try_from(m.commit_log_offset).unwrap(),
            size_bytes,
            tags_code: 0,
        })
        .collect();
    assert_eq!(entries.len(), 2);
    store.close().unwrap();
    // As an older version left it: the queue's entries in a segment, no LSM.
    std::fs::remove_dir_all(dir.path().join(petrel_store::LIGHT_QUEUE_DIR)).unwrap();
    let q = petrel_store::ConsumeQueue::open(&dir.path().join("consumequeue"), "%LMQ%old", 0, 64, u64::MAX).unwrap();
    for (i, e) in entries.iter().enumerate() {
        q.append(i as i64, *e).unwrap();
    }
    q.flush().unwrap();
    drop(q);
    let store = MessageStore::open(config(dir.path(), 100)).unwrap();
    assert_eq!(read(&store, "%LMQ%old", 0).len(), 2, "served from the segments");
    append(&store, 2, &names(&["%LMQ%old"])).unwrap();
    wait_dispatched(&store);
    let offsets: Vec<String> = read(&store, "%LMQ%old", 0).into_iter().map(|(_, o)| o).collect();
    assert_eq!(offsets, ["0", "1", "2"]);
    assert!(dir.path().join("consumequeue/%LMQ%old/0").exists());
}
