//! Power failures of the real `petrel serve`, not only of the store: the broker runs with its
//! hidden `--power-loss-journal` (every store file's synced point is journalled before the sync
//! is reported, so before any acknowledgement it allows); senders on three connections send
//! SYNC_FLUSH messages; at a moment that changes every round the process is killed with
//! SIGKILL, and `petrel_store::power_loss::drop_unsynced_journaled` then rebuilds its files as a
//! power failure would have left them (every synced byte kept, each unsynced 4 KiB page kept or
//! lost at random). The broker restarts on what is left: every message it answered SEND_OK must
//! read back, at the queue offset it was given, with its body — across all the rounds.
//!
//! `PETREL_SERVE_POWER_FAILURES` (default 100) sets the rounds; the long run is in
//! docs/benchmarks.md. Each round reads back what the round before acknowledged; every
//! `FULL_CHECK_EVERY` rounds, and at the end, everything is read back. An acknowledged message
//! that a later failure takes stays missing at its offset, or another round's body takes its
//! place, so the next full check finds it, and a round no longer costs more for every round before.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Petrel, pull, send_v2};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::decode_messages;

const TOPIC: &str = "PowerTopic";
const SENDERS: i32 = 3;
/// Every this many rounds, every queue is read back from its start.
const FULL_CHECK_EVERY: u64 = 10;

fn failures() -> u64 {
    std::env::var("PETREL_SERVE_POWER_FAILURES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// (queue, queue offset) → body of every message answered SEND_OK.
type Acked = BTreeMap<(i32, i64), Vec<u8>>;

/// Sends on its own connection to queue `queue_id` until `stop` or until the broker dies,
/// counting its acknowledgements in `acks`.
fn sender(port: u16, queue_id: i32, round: u64, stop: &AtomicBool, acks: &AtomicUsize) -> Acked {
    let mut acked = Acked::new();
    let mut c = common::Client::connect(port);
    for seq in 0usize.. {
        if stop.load(Ordering::Acquire) {
            break;
        }
        // Bodies of several sizes, so that records cross pages and segments unevenly.
        let body = format!("round {round} queue {queue_id} seq {seq} {}", "x".repeat(seq * 37 % 3000)).into_bytes();
        let Some(answer) = c.try_call(send_v2(TOPIC, queue_id, "T", seq, &body)) else {
            break; // killed
        };
        if answer.code == resp::SUCCESS {
            let offset = answer.ext("queueOffset").unwrap().parse().unwrap();
            assert!(
                acked.insert((queue_id, offset), body).is_none(),
                "queue offset {offset} answered twice"
            );
            acks.fetch_add(1, Ordering::AcqRel);
        }
    }
    acked
}

/// Reads every queue from its offset in `from` (by queue id); each acknowledged message from
/// there on must be at its offset, whole.
fn check_present(petrel: &Petrel, acked: &Acked, from: &[i64], round: u64) {
    assert_eq!(from.len(), SENDERS as usize);
    let mut c = petrel.broker();
    for queue_id in 0..SENDERS {
        let start = from[queue_id as usize];
        let want: Vec<(&(i32, i64), &Vec<u8>)> = acked.range((queue_id, start)..(queue_id, i64::MAX)).collect();
        let Some(last) = want.last().map(|((_, o), _)| *o) else {
            continue;
        };
        let mut found = BTreeMap::new();
        let mut offset = start;
        while offset <= last {
            let r = c.call(pull("PowerCheck", TOPIC, queue_id, offset, 0));
            assert_eq!(
                r.code,
                resp::SUCCESS,
                "round {round}: queue {queue_id} at {offset} of {last}: {:?}",
                r.remark
            );
            for m in decode_messages(&r.body).unwrap() {
                found.insert(m.queue_offset, m.body.to_vec());
            }
            offset = r.ext("nextBeginOffset").unwrap().parse().unwrap();
        }
        for ((_, o), body) in want {
            let got = found
                .get(o)
                .unwrap_or_else(|| panic!("round {round}: acknowledged queue {queue_id} offset {o} is gone"));
            assert!(got == body, "round {round}: queue {queue_id} offset {o} changed");
        }
    }
}

#[test]
fn sync_flush_serve_loses_no_acknowledged_message_across_power_failures() {
    let journal_dir = tempfile::tempdir().unwrap();
    let journal = journal_dir.path().join("syncs");
    let mut petrel = Petrel::start(&[
        "--set",
        "flushDiskType=SYNC_FLUSH",
        // Small segments: rounds cross segment boundaries, and rebuilding a file stays cheap.
        "--set",
        "mappedFileSizeCommitLog=4194304",
        "--power-loss-journal",
        journal.to_str().unwrap(),
    ]);
    let mut acked = Acked::new();
    let mut pages_lost = 0;
    let everything = [0; SENDERS as usize];
    // Each queue's offset past its last acknowledged message before the round just gone.
    let mut round_start = everything;
    for round in 0..failures() {
        let from = if round % FULL_CHECK_EVERY == 0 { &everything } else { &round_start };
        check_present(&petrel, &acked, from, round);
        for (queue_id, start) in (0..SENDERS).zip(round_start.iter_mut()) {
            if let Some(((_, o), _)) = acked.range((queue_id, 0)..(queue_id, i64::MAX)).next_back() {
                *start = o + 1;
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(AtomicUsize::new(0));
        let senders: Vec<_> = (0..SENDERS)
            .map(|q| {
                let (port, stop, acks) = (petrel.broker_port, stop.clone(), acks.clone());
                std::thread::spawn(move || sender(port, q, round, &stop, &acks))
            })
            .collect();
        // The kill comes a varying time after the first acknowledgement (a loaded machine may
        // take longer than the shortest delay just to connect).
        for _ in 0..1000 {
            if acks.load(Ordering::Acquire) > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(40 + (round * 7919) % 260));
        petrel.kill();
        stop.store(true, Ordering::Release);
        let before = acked.len();
        for s in senders {
            acked.extend(s.join().unwrap());
        }
        assert!(
            acked.len() > before,
            "round {round}: nothing was acknowledged before the kill:\n{}",
            petrel.log()
        );
        let loss = petrel_store::power_loss::drop_unsynced_journaled(&journal, &petrel.data_dir(), round).unwrap();
        pages_lost += loss.pages_lost;
        std::fs::remove_file(&journal).unwrap();
        petrel.spawn();
        assert!(
            petrel
                .log()
                .lines()
                .rfind(|l| l.contains("commit log recovered"))
                .is_some_and(|l| l.contains("unclean=true")),
            "round {round}: the restart recovers as after a crash"
        );
    }
    check_present(&petrel, &acked, &everything, failures());
    eprintln!(
        "serve power failures: {} rounds, {} acknowledged messages intact, {pages_lost} unsynced pages lost",
        failures(),
        acked.len()
    );
    assert!(pages_lost > 0, "the failures lost unsynced pages (else the model tested nothing)");
    // The broker still takes new messages at the offsets that follow.
    let r = petrel.broker().call(send_v2(TOPIC, 0, "T", 0, b"after the last failure"));
    assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
}
