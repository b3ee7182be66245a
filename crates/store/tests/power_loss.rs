//! Power failures, simulated: writers append while the power fails at a random instant; the
//! files are rebuilt from what the store's system calls had synced (`petrel_store::power_loss`:
//! unsynced pages lost or kept at random), and the store reopens. Under SYNC_FLUSH every acknowledged record
//! must read back intact; under ASYNC_FLUSH every record below the flushed offset must. Across
//! all failures nothing acknowledged is ever lost, and recovery never refuses a torn tail.
//!
//! `PETREL_POWER_FAILURES` sets the count (100 by default; docs/benchmarks.md has a long run).
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use petrel_protocol::message::MessageExt;
use petrel_store::{FlushMode, GetStatus, MessageStore, MessageStoreConfig, power_loss};
use support::{body, tagged_record};

fn config(root: &std::path::Path, mode: FlushMode) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = 64 << 10;
    c.commit_log.flush_mode = mode;
    c.commit_log.async_flush_interval = Duration::from_millis(3);
    c.commit_log.checkpoint_interval = Duration::from_millis(7);
    c.cq_entries_per_segment = 256;
    c.cq_flush_interval = Duration::from_millis(5);
    c.commit_log.sync_flush_timeout = Duration::from_millis(200);
    c
}

/// An acknowledged record: where it went and what it held.
#[derive(Clone)]
struct Acked {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    end: u64,
    body: Vec<u8>,
}

fn failures() -> u64 {
    std::env::var("PETREL_POWER_FAILURES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// Writers append until `stop`; every acknowledgement goes to `acked`.
fn spawn_writers(
    store: &Arc<MessageStore>,
    round: u64,
    stop: &Arc<AtomicBool>,
    acked: &Arc<Mutex<Vec<Acked>>>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..3u64)
        .map(|w| {
            let (store, stop, acked) = (store.clone(), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                for n in 0.. {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let (topic, queue_id) = (format!("P{}", (w + n) % 2), ((n / 2) % 3) as i32);
                    let seed = round * 1_000_003 + w * 10_007 + n;
                    let b = body(seed, 20 + (usize::try_from(seed).expect("a small seed") * 131) % 1500);
                    let mut r = tagged_record(&topic, queue_id, &b, None);
                    // SEND_OK: durable under SYNC_FLUSH, written under ASYNC_FLUSH.
                    let appended = match store.commit_log().config().flush_mode {
                        FlushMode::Sync => store.append_durable(&mut r, &topic, queue_id),
                        FlushMode::Async => store.append(&mut r, &topic, queue_id),
                    };
                    let Ok(a) = appended else { return };
                    acked.lock().push(Acked {
                        topic,
                        queue_id,
                        queue_offset: a.queue_offset,
                        end: a.end_offset(),
                        body: b,
                    });
                }
            })
        })
        .collect()
}

fn check_present(store: &MessageStore, records: &[Acked], round: u64) {
    for a in records {
        let got = store.get_messages(&a.topic, a.queue_id, a.queue_offset, 1, None);
        assert_eq!(
            got.status,
            GetStatus::Found,
            "round {round}: {}:{}@{} lost",
            a.topic,
            a.queue_id,
            a.queue_offset
        );
        let (msg, _) = MessageExt::decode(&got.body).unwrap();
        assert_eq!(
            &msg.body[..],
            &a.body[..],
            "round {round}: {}:{}@{} changed",
            a.topic,
            a.queue_id,
            a.queue_offset
        );
    }
}

fn wait_dispatched(store: &MessageStore) {
    for _ in 0..10_000 {
        if store.dispatched_offset() >= store.commit_log().readable_end() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!(
        "dispatcher did not catch up: dispatched {} readable {} recovery {:?}",
        store.dispatched_offset(),
        store.commit_log().readable_end(),
        store.commit_log().recovery_report()
    );
}

/// Runs `failures()` power failures; returns (records that had to survive, pages lost).
fn run(mode: FlushMode) -> (usize, u64) {
    power_loss::record_syncs();
    let dir = tempfile::tempdir().unwrap();
    let mut must_survive: Vec<Acked> = Vec::new();
    let mut pages_lost = 0;
    for round in 0..failures() {
        let t0 = std::time::Instant::now();
        let store = Arc::new(MessageStore::open(config(dir.path(), mode)).unwrap_or_else(|e| panic!("round {round}: reopen refused: {e}")));
        wait_dispatched(&store);
        check_present(&store, &must_survive, round);
        let (stop, acked) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let writers = spawn_writers(&store, round, &stop, &acked);
        std::thread::sleep(Duration::from_micros(2_000 + (round * 7919) % 20_000));
        if std::env::var("PETREL_POWER_TRACE").is_ok() {
            eprintln!("round {round}: open {:?}", t0.elapsed());
        }
        // The power fails now: every thread stops where it is, and what is durable is what
        // the flushed watermark says.
        let t1 = std::time::Instant::now();
        store.halt_as_if_crashed();
        if std::env::var("PETREL_POWER_TRACE").is_ok() {
            eprintln!("round {round}: halt {:?}", t1.elapsed());
        }
        let flushed = store.commit_log().flushed_offset();
        stop.store(true, Ordering::Release);
        for w in writers {
            w.join().unwrap();
        }
        drop(Arc::into_inner(store).unwrap());
        pages_lost += power_loss::drop_unsynced(dir.path(), round).unwrap().pages_lost;
        // Acknowledged before the failure: under SYNC_FLUSH, an acknowledgement means durable.
        must_survive.extend(acked.lock().iter().filter(|a| a.end <= flushed).cloned());
    }
    let store = MessageStore::open(config(dir.path(), mode)).unwrap();
    wait_dispatched(&store);
    check_present(&store, &must_survive, failures());
    store.close().unwrap();
    (must_survive.len(), pages_lost)
}

#[test]
fn sync_flush_loses_no_acknowledged_record_across_power_failures() {
    let (survived, pages_lost) = run(FlushMode::Sync);
    eprintln!(
        "SYNC_FLUSH: {} power failures, {survived} acknowledged records all intact, {pages_lost} unsynced pages lost",
        failures()
    );
    assert!(
        survived > usize::try_from(failures()).expect("a small count"),
        "the writers got acknowledgements"
    );
    assert!(pages_lost > 0, "the failures did take unsynced data");
}

#[test]
fn async_flush_loses_at_most_the_unflushed_window() {
    let (survived, pages_lost) = run(FlushMode::Async);
    eprintln!(
        "ASYNC_FLUSH: {} power failures, {survived} flushed records all intact, {pages_lost} unsynced pages lost",
        failures()
    );
    assert!(survived > 0 && pages_lost > 0);
}

/// A queue created just before the power fails: its consume queue's directory entry must be on
/// disk with the entries in it. Were the new directory's parent never synced, the failure would
/// take the whole directory, and with it every entry the dispatch checkpoint says is there — a
/// consumer would never see those messages.
#[test]
fn a_new_queue_keeps_its_directory_through_a_power_failure() {
    power_loss::record_syncs();
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushMode::Sync)).unwrap();
    for i in 0..5u64 {
        store
            .append_durable(&mut tagged_record("FreshTopic", 3, &body(i, 64), None), "FreshTopic", 3)
            .unwrap();
    }
    // Dispatched, and the dispatch checkpoint written past it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.queue_offsets("FreshTopic", 3).1 < 5 || petrel_dispatch_checkpoint(dir.path()) < store.commit_log().max_offset() {
        assert!(std::time::Instant::now() < deadline, "not dispatched and checkpointed");
        std::thread::sleep(Duration::from_millis(5));
    }
    store.halt_as_if_crashed();
    drop(store);
    let loss = power_loss::drop_unsynced(dir.path(), 1).unwrap();
    assert_eq!(loss.dirs_lost, 0, "a directory entry was never synced: {loss:?}");
    let store = MessageStore::open(config(dir.path(), FlushMode::Sync)).unwrap();
    assert_eq!(
        store.queue_offsets("FreshTopic", 3),
        (0, 5),
        "every entry of the new queue is there"
    );
    assert_eq!(store.get_messages("FreshTopic", 3, 0, 8, None).message_count, 5);
    store.close().unwrap();
}

/// The dispatch checkpoint's offset (`offset crc`).
fn petrel_dispatch_checkpoint(root: &std::path::Path) -> u64 {
    std::fs::read_to_string(root.join("dispatch_checkpoint"))
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|o| o.parse().ok()))
        .unwrap_or(0)
}
