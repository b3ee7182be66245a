use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use petrel_protocol::message::MessageExt;
use petrel_protocol::msgid::decode_offset_msg_id;
use petrel_store::FlushMode;

use super::*;
use crate::services::testing::{TestBroker, send_request};

#[tokio::test]
async fn a_send_to_a_new_topic_creates_it_stores_the_record_and_names_it_in_the_route() {
    let t = TestBroker::start(|_| {});
    let first = t.broker.produce.send(send_request("NewTopic", 2, "A", b"hello")).await.unwrap();
    let second = t.broker.produce.send(send_request("NewTopic", 2, "A", b"again")).await.unwrap();
    assert_eq!(first.durability, Durability::Stored);
    assert_eq!((first.queue_id, first.queue_offset, second.queue_offset), (2, 0, 1));
    assert!(
        first.transaction_id.is_some(),
        "the broker assigns UNIQ_KEY when the client did not"
    );
    let (host, offset) = decode_offset_msg_id(&first.msg_id).unwrap();
    assert_eq!(host, t.broker.store_host);
    let record = t.broker.store.commit_log().read_record(offset as u64).unwrap().unwrap();
    let (m, _) = MessageExt::decode_verified(&record).unwrap();
    assert_eq!((m.topic.as_str(), m.queue_id, m.body.as_ref()), ("NewTopic", 2, &b"hello"[..]));
    assert_eq!(m.properties.get("TAGS").map(String::as_str), Some("A"));
    assert_eq!(m.properties.get("CLUSTER").map(String::as_str), Some("DefaultCluster"));
    assert!(
        t.name_server.topic_route("NewTopic").is_some(),
        "answered after the name server knew the topic"
    );
    t.stop().await;
}

#[tokio::test]
async fn under_sync_flush_a_send_is_answered_only_once_durable() {
    let t = TestBroker::start(|c| c.flush_disk_type = FlushMode::Sync);
    for i in 0..20 {
        let out = t
            .broker
            .produce
            .send(send_request("SyncTopic", 0, "A", format!("m{i}").as_bytes()))
            .await
            .unwrap();
        assert_eq!(out.durability, Durability::Stored);
        let (_, offset) = decode_offset_msg_id(&out.msg_id).unwrap();
        assert!(
            t.broker.store.commit_log().flushed_offset() > offset as u64,
            "message {i} was answered before the flushed watermark passed it"
        );
    }
    let log = t.broker.store.commit_log().stats();
    assert!(log.flushes.load(Ordering::Relaxed) >= 1);
    assert!(t.broker.stats.flush_wait_ns.snapshot().count == 20);
    t.stop().await;
}

#[tokio::test]
async fn refusals_write_nothing() {
    let t = TestBroker::start(|c| c.max_message_size_bytes = 16);
    let log_end = || t.broker.store.commit_log().max_offset();
    let produce = &t.broker.produce;
    type Case = (SendRequest, fn(&BrokerError) -> bool);
    let cases: Vec<Case> = vec![
        (send_request("bad topic", 0, "A", b"x"), |e| {
            matches!(e, BrokerError::InvalidParameter(_))
        }),
        (send_request("SCHEDULE_TOPIC_XXXX", 0, "A", b"x"), |e| {
            matches!(e, BrokerError::NoPermission(_))
        }),
        (send_request("T", 99, "A", b"x"), |e| matches!(e, BrokerError::InvalidParameter(_))),
        (send_request("T", 0, "A", &[b'x'; 17]), |e| {
            matches!(e, BrokerError::MessageIllegal(_))
        }),
        (
            SendRequest {
                properties: Some("TRAN_MSG\u{1}true\u{2}".into()),
                ..send_request("T", 0, "A", b"x")
            },
            |e| matches!(e, BrokerError::NoPermission(r) if r.contains("transaction")),
        ),
    ];
    for (req, expected) in cases {
        let topic = req.topic.clone();
        let e = produce.send(req).await.unwrap_err();
        assert!(expected(&e), "{topic}: {e:?}");
    }
    assert_eq!(log_end(), 0, "nothing was appended");
    assert_eq!(t.broker.stats.put_failures.load(Ordering::Relaxed), 5);
    t.stop().await;
}

#[tokio::test]
async fn a_full_durability_waiter_table_answers_busy_before_writing() {
    let t = TestBroker::start(|c| {
        c.flush_disk_type = FlushMode::Sync;
        c.max_durability_waiters = 1;
    });
    let held = t.broker.store.commit_log().flushed_watermark().reserve().unwrap();
    let before = t.broker.store.commit_log().max_offset();
    let e = t.broker.produce.send(send_request("T", 0, "A", b"x")).await.unwrap_err();
    assert!(matches!(&e, BrokerError::Busy(r) if r.contains("DURABILITY_WAITERS_FULL")), "{e:?}");
    assert_eq!(t.broker.store.commit_log().max_offset(), before, "refused before the append");
    drop(held);
    t.broker.produce.send(send_request("T", 0, "A", b"x")).await.unwrap();
    t.stop().await;
}

#[tokio::test]
async fn a_slow_disk_answers_flush_timeout_with_the_message_id_and_the_record_becomes_durable() {
    let delay = Arc::new(AtomicU64::new(300));
    let injected = delay.clone();
    let t = TestBroker::start_with(
        |c| {
            c.flush_disk_type = FlushMode::Sync;
            c.sync_flush_timeout_ms = 50;
        },
        move |s| s.commit_log.inject_flush_delay_ms = Some(injected),
    );
    let out = t.broker.produce.send(send_request("Slow", 1, "A", b"x")).await.unwrap();
    assert_eq!(out.durability, Durability::FlushTimedOut);
    assert_eq!((out.queue_id, out.queue_offset), (1, 0));
    let (_, offset) = decode_offset_msg_id(&out.msg_id).unwrap();
    delay.store(0, Ordering::Release);
    let mark = t.broker.store.commit_log().flushed_watermark();
    mark.wait_blocking(offset as u64 + 1, std::time::Duration::from_secs(10)).unwrap();
    assert_eq!(t.broker.stats.flush_timeouts.load(Ordering::Relaxed), 1);
    t.stop().await;
}

#[tokio::test]
async fn a_retry_past_its_limit_goes_to_the_dead_letter_topic() {
    let t = TestBroker::start(|_| {});
    let mut req = send_request("%RETRY%G", 0, "A", b"x");
    req.reconsume_times = 3;
    req.max_reconsume_times = Some(2);
    let out = t.broker.produce.send(req).await.unwrap();
    let (_, offset) = decode_offset_msg_id(&out.msg_id).unwrap();
    let record = t.broker.store.commit_log().read_record(offset as u64).unwrap().unwrap();
    let (m, _) = MessageExt::decode_verified(&record).unwrap();
    assert_eq!((m.topic.as_str(), m.queue_id, m.reconsume_times), ("%DLQ%G", 0, 3));
    assert!(t.broker.topics.get("%DLQ%G").is_some());
    t.stop().await;
}

/// The message stored at the offset message id `msg_id`.
fn stored(t: &TestBroker, msg_id: &str) -> MessageExt {
    let (_, offset) = decode_offset_msg_id(msg_id).unwrap();
    let record = t.broker.store.commit_log().read_record(offset as u64).unwrap().unwrap();
    MessageExt::decode_verified(&record).unwrap().0
}

/// Waits (10 s) for the first message of `topic`'s queue `queue_id`.
async fn first_in(t: &TestBroker, topic: &str, queue_id: i32) -> MessageExt {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = t.broker.store.get_messages(topic, queue_id, 0, 1, None);
        if got.message_count == 1 {
            return MessageExt::decode_verified(&got.body).unwrap().0;
        }
        assert!(std::time::Instant::now() < deadline, "nothing reached {topic}:{queue_id}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_delayed_send_waits_in_its_level_and_reaches_its_queue_no_sooner_than_its_delay() {
    let t = TestBroker::start(|c| c.message_delay_level = "100ms 700ms".into());
    let req = SendRequest {
        properties: Some("DELAY\u{1}5\u{2}KEYS\u{1}k1\u{2}".into()),
        ..send_request("Later", 3, "A", b"wait")
    };
    let out = t.broker.produce.send(req).await.unwrap();
    assert_eq!(out.queue_id, 3, "the answer names the requested queue");
    let waiting = stored(&t, &out.msg_id);
    assert_eq!(
        (waiting.topic.as_str(), waiting.queue_id),
        ("SCHEDULE_TOPIC_XXXX", 1),
        "level 5 clamped to the last, 2"
    );
    assert_eq!(waiting.properties.get("REAL_TOPIC").map(String::as_str), Some("Later"));
    assert_eq!(waiting.properties.get("REAL_QID").map(String::as_str), Some("3"));
    assert_eq!(waiting.properties.get("DELAY").map(String::as_str), Some("2"));

    let delivered = first_in(&t, "Later", 3).await;
    assert!(
        delivered.store_timestamp >= waiting.store_timestamp + 700,
        "stored in its queue {} ms after the send, before its 700 ms delay",
        delivered.store_timestamp - waiting.store_timestamp
    );
    assert_eq!(delivered.body.as_ref(), b"wait");
    assert_eq!(delivered.properties.get("KEYS"), waiting.properties.get("KEYS"));
    assert_eq!(
        delivered.properties.get("UNIQ_KEY"),
        waiting.properties.get("UNIQ_KEY"),
        "the same message id"
    );
    assert_eq!(delivered.properties.get("DELAY"), None);
    assert_eq!(delivered.born_timestamp, waiting.born_timestamp);
    assert_eq!(t.broker.schedule.offset(2), 1, "the level moved past it");
    assert_eq!(t.broker.store.queue_offsets("Later", 3).1, 1, "delivered once");
    assert_eq!(t.broker.schedule.pending(&t.broker.store), [0, 0]);
    t.stop().await;
}

#[tokio::test]
async fn a_message_given_back_waits_at_its_retry_level_and_past_its_limit_goes_to_the_dead_letter_queue() {
    let t = TestBroker::start(|_| {});
    crate::services::testing::heartbeat_consumer(&t.broker, "G", "Orig");
    let out = t.broker.produce.send(send_request("Orig", 0, "A", b"again")).await.unwrap();
    let (_, offset) = decode_offset_msg_id(&out.msg_id).unwrap();
    let back = |delay_level, max| SendBackRequest {
        offset,
        group: "G".into(),
        delay_level,
        max_reconsume_times: max,
    };
    let produce = &t.broker.produce;
    produce.send_back(back(0, None), 16).await.unwrap();
    let retry = first_in(&t, "SCHEDULE_TOPIC_XXXX", 2).await;
    assert_eq!(retry.properties.get("DELAY").map(String::as_str), Some("3"), "3 + times retried");
    assert_eq!(retry.properties.get("REAL_TOPIC").map(String::as_str), Some("%RETRY%G"));
    assert_eq!(retry.properties.get("RETRY_TOPIC").map(String::as_str), Some("Orig"));
    assert_eq!(retry.properties.get("ORIGIN_MESSAGE_ID"), Some(&out.msg_id));
    assert_eq!((retry.reconsume_times, retry.body.as_ref()), (1, &b"again"[..]));
    assert!(t.broker.topics.get("%RETRY%G").is_some());
    t.wait_dispatched();
    assert_eq!(t.broker.schedule.pending(&t.broker.store)[2], 1, "waiting its 10 s at level 3");

    // Retried as often as allowed (0 times here), or a negative level: the DLQ, at once.
    produce.send_back(back(0, Some(0)), 16).await.unwrap();
    produce.send_back(back(-1, None), 16).await.unwrap();
    t.wait_dispatched();
    assert_eq!(t.broker.store.queue_offsets("%DLQ%G", 0).1, 2);
    let dead = first_in(&t, "%DLQ%G", 0).await;
    assert_eq!(dead.properties.get("DELAY"), None);
    assert_eq!(dead.properties.get("RETRY_TOPIC").map(String::as_str), Some("Orig"));

    let e = produce
        .send_back(
            SendBackRequest {
                offset: offset + 3,
                ..back(0, None)
            },
            16,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("look message by offset failed"), "{e}");
    t.stop().await;
}
