use std::time::Duration;

use petrel_protocol::decode_messages;
use petrel_protocol::model::{MessageQueue, MessageRequestMode, SetMessageRequestModeRequestBody};

use super::*;
use crate::services::testing::{TestBroker, heartbeat_consumer};

fn pop_req(group: &str, topic: &str, max: usize, invisible_ms: i64) -> PopRequest {
    PopRequest {
        group: group.into(),
        topic: topic.into(),
        queue_id: -1,
        max_msgs: max,
        invisible_time_ms: invisible_ms,
        poll: None,
        init_at_end: false,
        filter: None,
        orderly: false,
    }
}

fn bodies(p: &Popped) -> Vec<(String, i64, i32)> {
    decode_messages(&p.body)
        .unwrap()
        .into_iter()
        .map(|m| (String::from_utf8_lossy(&m.body).into_owned(), m.queue_offset, m.reconsume_times))
        .collect()
}

#[tokio::test]
async fn an_orderly_pop_holds_a_queue_until_its_batch_is_acked_or_comes_back() {
    let t = TestBroker::start(|_| {});
    heartbeat_consumer(&t.broker, "OG", "Fifo");
    t.send_n("Fifo", 0, 4).await;
    t.wait_dispatched();
    let pop = &t.broker.pop;
    let orderly = |max, invisible_ms| PopRequest {
        orderly: true,
        ..pop_req("OG", "Fifo", max, invisible_ms)
    };
    let first = pop.pop(orderly(2, 300)).await.unwrap();
    assert_eq!(bodies(&first).iter().map(|m| m.1).collect::<Vec<_>>(), [0, 1]);
    let held = pop.pop(orderly(2, 300)).await.unwrap();
    assert_eq!(held.count, 0, "the queue waits behind the batch in flight");
    let unordered = pop.pop(pop_req("OG", "Fifo", 1, 60_000)).await.unwrap();
    assert_eq!(
        bodies(&unordered).iter().map(|m| m.1).collect::<Vec<_>>(),
        [2],
        "an unordered pop is not held"
    );
    assert!(pop.ack("OG", "Fifo", 0, 2, unordered.pop_time_ms));
    assert!(pop.ack("OG", "Fifo", 0, 0, first.pop_time_ms));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let again = pop.pop(orderly(4, 60_000)).await.unwrap();
    assert_eq!(
        bodies(&again),
        [("body 1".into(), 1, 1), ("body 3".into(), 3, 0)],
        "the unacked message comes back first, then the queue goes on"
    );
}

#[tokio::test]
async fn pops_share_a_queue_ack_and_revive_what_is_not_acked_in_time() {
    let t = TestBroker::start(|_| {});
    heartbeat_consumer(&t.broker, "PG", "Pop");
    t.send_n("Pop", 0, 6).await;
    t.wait_dispatched();
    let pop = &t.broker.pop;
    let first = pop.pop(pop_req("PG", "Pop", 4, 300)).await.unwrap();
    let second = pop.pop(pop_req("PG", "Pop", 4, 60_000)).await.unwrap();
    let (a, b) = (bodies(&first), bodies(&second));
    assert_eq!(a.iter().map(|m| m.1).collect::<Vec<_>>(), [0, 1, 2, 3], "the first pop takes four");
    assert_eq!(b.iter().map(|m| m.1).collect::<Vec<_>>(), [4, 5], "the second the rest: none twice");
    assert!(pop.ack("PG", "Pop", 0, 0, first.pop_time_ms));
    assert!(!pop.ack("PG", "Pop", 0, 0, first.pop_time_ms), "acked once");
    assert!(pop.ack("PG", "Pop", 0, 1, first.pop_time_ms));
    assert_eq!(t.broker.offsets.query("PG", "Pop", 0), Some(2), "committed up to the first unacked");
    // Offset 2: made visible again at once; offset 3: left to time out.
    let changed = pop.change_invisible_time("PG", "Pop", 0, 2, first.pop_time_ms, 0).unwrap();
    assert!(
        pop.change_invisible_time("PG", "Pop", 0, 2, first.pop_time_ms, 0).is_err(),
        "the old handle is stale"
    );
    assert!(changed >= first.pop_time_ms);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let again = pop.pop(pop_req("PG", "Pop", 8, 60_000)).await.unwrap();
    assert_eq!(
        bodies(&again),
        [("body 2".into(), 2, 1), ("body 3".into(), 3, 1)],
        "revived once each, reconsume 1"
    );
    assert!(
        !pop.ack("PG", "Pop", 0, 3, first.pop_time_ms),
        "a handle from before the revive is stale"
    );
    for offset in [2, 3] {
        assert!(pop.ack("PG", "Pop", 0, offset, again.pop_time_ms));
    }
    for offset in [4, 5] {
        assert!(pop.ack("PG", "Pop", 0, offset, second.pop_time_ms));
    }
    assert_eq!(t.broker.offsets.query("PG", "Pop", 0), Some(6));
    assert_eq!(pop.inflight(), 0);
    assert_eq!(pop.pop(pop_req("PG", "Pop", 8, 60_000)).await.unwrap().count, 0);
    t.stop().await;
}

#[tokio::test]
async fn a_held_pop_answers_when_a_message_arrives() {
    let t = TestBroker::start(|_| {});
    heartbeat_consumer(&t.broker, "PG", "Held");
    t.send_n("Held", 1, 1).await;
    t.wait_dispatched();
    let pop = t.broker.pop.clone();
    let drained = pop.pop(pop_req("PG", "Held", 8, 60_000)).await.unwrap();
    assert_eq!(drained.count, 1);
    let waiter = tokio::spawn(async move {
        let mut req = pop_req("PG", "Held", 8, 60_000);
        req.poll = Some(Duration::from_secs(10));
        let started = std::time::Instant::now();
        (pop.pop(req).await.unwrap().count, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    t.send_n("Held", 2, 1).await;
    let (count, waited) = tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
    assert_eq!(count, 1);
    assert!(waited < Duration::from_secs(5));
    let mut bad = pop_req("PG", "Held", 8, 0);
    assert!(matches!(t.broker.pop.pop(bad).await, Err(BrokerError::InvalidParameter(_))));
    bad = pop_req("Nobody", "Held", 8, 1000);
    assert!(matches!(t.broker.pop.pop(bad).await, Err(BrokerError::GroupNotExist(_))));
    t.stop().await;
}

#[tokio::test]
async fn request_modes_and_assignments() {
    let t = TestBroker::start(|_| {});
    heartbeat_consumer(&t.broker, "PG", "Assigned");
    t.send_n("Assigned", 0, 1).await;
    let pop = &t.broker.pop;
    let (pull, mode) = pop.assignment("Assigned", "PG", "PG-client", false, "broker-a").unwrap();
    assert_eq!(mode, MessageRequestMode::Pull);
    assert_eq!(pull.len(), 8, "the only client pulls every queue");
    pop.set_mode(SetMessageRequestModeRequestBody {
        topic: "Assigned".into(),
        consumer_group: "PG".into(),
        mode: MessageRequestMode::Pop,
        pop_share_queue_num: 0,
    })
    .unwrap();
    let (popped, mode) = pop.assignment("Assigned", "PG", "PG-client", false, "broker-a").unwrap();
    assert_eq!(mode, MessageRequestMode::Pop);
    assert_eq!(popped.iter().map(|q| q.queue_id).collect::<Vec<_>>(), [-1], "pops from any queue");
    assert!(pop.assignment("Unknown", "PG", "PG-client", false, "broker-a").is_none());
    assert!(String::from_utf8(pop.modes_json()).unwrap().contains("\"Assigned@PG\""));
    let retry = SetMessageRequestModeRequestBody {
        topic: "%RETRY%PG".into(),
        consumer_group: "PG".into(),
        mode: MessageRequestMode::Pop,
        pop_share_queue_num: 0,
    };
    t.broker.topics.ensure_retry("PG", 1).unwrap();
    assert!(pop.set_mode(retry).is_err(), "retry topics are pulled");
    // A slave copies the table.
    let slave = TestBroker::start(|_| {});
    slave.broker.pop.replace_modes_from_master(&pop.modes_json()).unwrap();
    assert_eq!(slave.broker.pop.mode("Assigned", "PG"), (MessageRequestMode::Pop, 0));
    slave.stop().await;
    t.stop().await;
}

#[test]
fn averaging_matches_rocketmqs() {
    let all: Vec<MessageQueue> = (0..5)
        .map(|queue_id| MessageQueue {
            broker_name: "b".into(),
            queue_id,
            topic: "T".into(),
        })
        .collect();
    let cids: Vec<String> = ["a", "b"].iter().map(|s| (*s).to_owned()).collect();
    let ids = |qs: Vec<MessageQueue>| qs.into_iter().map(|q| q.queue_id).collect::<Vec<_>>();
    assert_eq!(ids(allocate_averagely(&all, &cids, "a")), [0, 1, 2]);
    assert_eq!(ids(allocate_averagely(&all, &cids, "b")), [3, 4]);
    assert!(allocate_averagely(&all, &cids, "c").is_empty());
    let three: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(ids(allocate_for_pop(&all, &three, "a", 1)), [0, 1, 2], "its own and the next one's");
    assert_eq!(ids(allocate_for_pop(&all, &three, "a", 3)), [-1]);
}
