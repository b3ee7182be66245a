//! A master's HA server and a slave in one process, over loopback: sends that wait for the
//! slave are released frame after frame, whoever sends the frames — inline (the thread that
//! published the records, or the one that read an ack) or the transfer thread (the start, a
//! backlog) — and the slave ends with the master's bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a failure is the test failing")]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel_protocol::message::MessageExt;
use petrel_replication::{AckGate, AckMode, AckPolicy, HaMaster, HaSlave, MasterConfig, SlaveConfig};
use petrel_store::{MessageStore, MessageStoreConfig};

const BATCH_BYTES: usize = 32 * 1024;
/// Long enough never to decide a result on a loaded machine; a lost frame would hang a send
/// until it, so the test fails rather than passes slowly.
const WAIT: Duration = Duration::from_secs(20);

fn open(dir: &std::path::Path) -> Arc<MessageStore> {
    let mut config = MessageStoreConfig::new(dir);
    config.commit_log.segment_size_bytes = 16 << 20;
    Arc::new(MessageStore::open(config).unwrap())
}

fn record(n: usize, body_bytes: usize) -> Vec<u8> {
    MessageExt {
        topic: "frames".into(),
        body: Bytes::from(vec![u8::try_from(n % 251).unwrap(); body_bytes]),
        born_host: "127.0.0.1:1".parse().unwrap(),
        store_host: "127.0.0.1:2".parse().unwrap(),
        ..MessageExt::default()
    }
    .to_bytes()
    .unwrap()
    .to_vec()
}

fn master_config() -> MasterConfig {
    MasterConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        transfer_batch_bytes: BATCH_BYTES,
        // Past the test's waits: a frame that waited for a heartbeat would fail the test.
        heartbeat_interval: Duration::from_secs(60),
        housekeeping_interval: Duration::from_secs(120),
        max_slaves: 1,
        sync_from_last_file: false,
        linger: Duration::ZERO,
        autoswitch: None,
        secret: None,
        tls: None,
    }
}

fn slave_config() -> SlaveConfig {
    SlaveConfig {
        heartbeat_interval: Duration::from_secs(60),
        housekeeping_interval: Duration::from_secs(120),
        max_frame_bytes: u32::try_from(4 * BATCH_BYTES).unwrap(),
        reconnect_interval: Duration::from_millis(100),
        autoswitch: None,
        secret: None,
        tls: None,
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `senders` threads each append `each` records and wait, one at a time, until the slave holds
/// them (as SYNC_MASTER sends do).
fn send_and_wait(store: &Arc<MessageStore>, gate: &Arc<AckGate>, senders: usize, each: usize) {
    std::thread::scope(|scope| {
        for t in 0..senders {
            scope.spawn(move || {
                for i in 0..each {
                    let mut r = record(t * each + i, 1000);
                    let end = store.append(&mut r, "frames", 0).unwrap().end_offset();
                    gate.replicated()
                        .wait_blocking(end, WAIT)
                        .unwrap_or_else(|e| panic!("sender {t}, send {i}: {e}"));
                }
            });
        }
    });
}

fn log_bytes(store: &MessageStore) -> Vec<u8> {
    let log = store.commit_log();
    let (mut at, end) = (log.min_offset(), log.max_offset());
    let mut all = Vec::new();
    while at < end {
        let chunk = log.read_raw(at, 1 << 20).unwrap();
        at += chunk.len() as u64;
        all.extend_from_slice(&chunk);
    }
    all
}

/// The reports read on a runtime of the broker's kind (the master started inside it), as
/// `petrel serve` runs them.
#[test]
fn on_a_runtime_waiting_sends_are_released_by_inline_frames_and_a_backlog_streams_from_the_thread() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _inside = runtime.enter();
    inline_frames_and_a_streamed_backlog();
}

/// The reports read on a thread of their own (a master started outside any runtime).
#[test]
fn on_a_thread_waiting_sends_are_released_by_inline_frames_and_a_backlog_streams_from_the_thread() {
    inline_frames_and_a_streamed_backlog();
}

fn inline_frames_and_a_streamed_backlog() {
    let (master_dir, slave_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(master_dir.path());
    let slave = open(slave_dir.path());
    let policy = AckPolicy {
        mode: AckMode::AllInSync,
        min_in_sync_replicas: 1,
        max_gap_bytes: 256 << 20,
    };
    let end = master.clone();
    let gate = AckGate::new(policy, 0, 1024, Box::new(move || end.commit_log().max_offset()));
    let ha = HaMaster::start(master.clone(), gate.clone(), master_config()).unwrap();
    // A backlog of eight frames' worth before the slave comes: the thread streams it.
    let backlog = 8 * BATCH_BYTES / 1000;
    for i in 0..backlog {
        master.append(&mut record(i, 1000), "frames", 0).unwrap();
    }
    let follower = HaSlave::start(slave.clone(), Some(ha.local_addr().to_string()), slave_config()).unwrap();
    let backlog_end = master.commit_log().max_offset();
    wait_for("the slave through the backlog", || slave.commit_log().max_offset() == backlog_end);
    wait_for("the slave in sync", || gate.slaves().iter().any(|s| s.in_sync));
    let frames = ha.frames();
    let count = || (frames.inline.load(Ordering::Relaxed), frames.by_thread.load(Ordering::Relaxed));
    let (inline, by_thread) = count();
    assert!(by_thread >= 8, "the backlog leaves in whole frames from the thread: {by_thread}");

    // A lone sender: each send is a frame, and each leaves inline, from the thread that
    // published it (the ack of the one before released the sender). Nothing is ever held
    // behind a frame in flight, so the thread sends none (at most the first, if it was still
    // handing over); a send that waited for the thread's own wake-up would count here.
    send_and_wait(&master, &gate, 1, 50);
    let (inline_1, by_thread_1) = count();
    assert!(inline_1 - inline >= 49, "50 sends, {} frames inline", inline_1 - inline);
    assert!(by_thread_1 - by_thread <= 1, "the thread sent {} frames", by_thread_1 - by_thread);

    // Eight senders: every send is released (records held behind a frame in flight leave with
    // the next ack, or from the thread once the hold is over).
    send_and_wait(&master, &gate, 8, 50);
    let (inline_8, _) = count();
    assert!(inline_8 > inline_1, "frames leave inline");

    let target = master.commit_log().max_offset();
    wait_for("the slave at the master's end", || slave.commit_log().max_offset() == target);
    assert_eq!(log_bytes(&slave), log_bytes(&master), "the slave holds the master's bytes");
    follower.stop();
    ha.stop();
}
