//! Many light queues cost keys, not files: 20,000 `%LMQ%` queues on one store add no mapping
//! and no file descriptor per queue (a segment each used to cost a mapping, and
//! `vm.max_map_count` capped a broker at about 65,000 queues), and a crash and a restart find
//! every queue's entries without opening any queue before it is read. Alone in its test binary,
//! so that no other test's files move the counts.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use petrel_store::{FlushMode, GetStatus, MessageStore, MessageStoreConfig};
use support::{append_lmq, wait_dispatched};

const QUEUES: usize = 20_000;
/// Light queues one record names (RocketMQ's MQTT bridge files a message in each subscriber's).
const PER_RECORD: usize = 50;

fn config(root: &std::path::Path) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = 16 << 20;
    c.commit_log.flush_mode = FlushMode::Sync;
    c.commit_log.lmq = true;
    c.commit_log.max_lmq_queues = QUEUES;
    c.index = None;
    c
}

fn count_lines(path: &str) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn name(i: usize) -> String {
    format!("%LMQ%device-{i:06}")
}

/// Queue `i`'s messages' unique keys, in order.
fn read(store: &MessageStore, i: usize) -> Vec<String> {
    let r = store.get_messages(&name(i), 0, 0, 100, None);
    assert_eq!(r.status, GetStatus::Found, "queue {i}");
    petrel_protocol::decode_messages(&r.body)
        .unwrap()
        .into_iter()
        .map(|m| {
            m.properties
                .get(petrel_protocol::properties::keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                .cloned()
                .unwrap()
        })
        .collect()
}

#[test]
fn twenty_thousand_light_queues_add_no_mapping_or_descriptor_each_and_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    // One message first, so that the log's first segment and the LSM's files are there.
    append_lmq(&store, 0, &[name(0)]).unwrap();
    wait_dispatched(&store);
    let (maps_before, fds_before) = (count_lines("/proc/self/maps"), fds());
    let all: Vec<String> = (0..QUEUES).map(name).collect();
    // Every queue gets two messages, each in a record shared with 49 others.
    for (n, chunk) in all.chunks(PER_RECORD).chain(all.chunks(PER_RECORD)).enumerate() {
        append_lmq(&store, n as u64 + 1, chunk).unwrap();
    }
    wait_dispatched(&store);
    let (maps, fds_now) = (count_lines("/proc/self/maps"), fds());
    assert!(
        maps < maps_before + 200,
        "mappings grew from {maps_before} to {maps} for {QUEUES} queues"
    );
    assert!(
        fds_now < fds_before + 100,
        "descriptors grew from {fds_before} to {fds_now} for {QUEUES} queues"
    );
    assert!(
        !dir.path().join("consumequeue").join(name(7)).exists(),
        "no directory per light queue"
    );
    let first_round = QUEUES / PER_RECORD;
    let expect = |i: usize| {
        let (first, second) = (i / PER_RECORD + 1, first_round + i / PER_RECORD + 1);
        let mut keys = vec![format!("U{first}"), format!("U{second}")];
        if i == 0 {
            keys.insert(0, "U0".to_owned());
        }
        keys
    };
    for i in [0, 1, 49, 50, QUEUES / 2, QUEUES - 1] {
        assert_eq!(read(&store, i), expect(i));
    }
    // A crash: the queues come back from the LSM's keys as each is first read.
    store.halt_as_if_crashed();
    drop(store);
    let store = MessageStore::open(config(dir.path())).unwrap();
    wait_dispatched(&store);
    for i in [0, 2, 51, QUEUES / 3, QUEUES - 1] {
        assert_eq!(read(&store, i), expect(i), "queue {i} after the crash");
        assert_eq!(store.queue_offsets(&name(i), 0).1, expect(i).len() as i64);
    }
    // And they go on where they were.
    append_lmq(&store, 10_000, &[name(3)]).unwrap();
    wait_dispatched(&store);
    assert_eq!(read(&store, 3).last().unwrap(), "U10000");
    assert_eq!(store.get_messages(&name(3), 0, 2, 10, None).message_count, 1);
}
