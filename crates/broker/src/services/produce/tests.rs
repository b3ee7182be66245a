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
    let t = TestBroker::start(|c| {
        c.max_message_size_bytes = 16;
        c.reject_transaction_message = true;
    });
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
    // The retry topic exists and is announced already, as after a consumer's heartbeat.
    t.broker.topics.ensure_retry("G", 1).unwrap();
    t.broker.topics.settle().await.unwrap();
    let mut req = send_request("%RETRY%G", 0, "A", b"x");
    req.reconsume_times = 3;
    req.max_reconsume_times = Some(2);
    let out = t.broker.produce.send(req).await.unwrap();
    let (_, offset) = decode_offset_msg_id(&out.msg_id).unwrap();
    let record = t.broker.store.commit_log().read_record(offset as u64).unwrap().unwrap();
    let (m, _) = MessageExt::decode_verified(&record).unwrap();
    assert_eq!((m.topic.as_str(), m.queue_id, m.reconsume_times), ("%DLQ%G", 0, 3));
    assert!(t.broker.topics.get("%DLQ%G").is_some());
    assert!(
        t.name_server.topic_route("%DLQ%G").is_some(),
        "the dead-letter topic made by the send is on the name server when the send is answered"
    );
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
        may_read: crate::services::any_topic(),
        group: "G".into(),
        delay_level,
        max_reconsume_times: max,
    };
    let produce = &t.broker.produce;
    let policy = |retry_max_times| RetryPolicy {
        retry_max_times,
        retry_queue_nums: 1,
    };
    produce.send_back(back(0, None), policy(16)).await.unwrap();
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
    // The group's retryMaxTimes counts when the request does not say.
    produce.send_back(back(0, Some(0)), policy(16)).await.unwrap();
    produce.send_back(back(-1, None), policy(16)).await.unwrap();
    produce.send_back(back(0, None), policy(0)).await.unwrap();
    t.wait_dispatched();
    assert_eq!(t.broker.store.queue_offsets("%DLQ%G", 0).1, 3);
    let dead = first_in(&t, "%DLQ%G", 0).await;
    assert_eq!(dead.properties.get("DELAY"), None);
    assert_eq!(dead.properties.get("RETRY_TOPIC").map(String::as_str), Some("Orig"));

    let e = produce
        .send_back(
            SendBackRequest {
                offset: offset + 3,
                ..back(0, None)
            },
            policy(16),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("look message by offset failed"), "{e}");

    // A caller who may not read the record's topic gets nothing copied into its retry topic.
    let refuse: crate::services::TopicCheck = std::sync::Arc::new(|topic: &str| Err(BrokerError::NoPermission(format!("not {topic}"))));
    let before = t.broker.store.queue_offsets("SCHEDULE_TOPIC_XXXX", 2).1;
    let e = produce
        .send_back(
            SendBackRequest {
                may_read: refuse,
                ..back(0, None)
            },
            policy(16),
        )
        .await
        .unwrap_err();
    assert!(matches!(&e, BrokerError::NoPermission(why) if why == "not Orig"), "{e}");
    t.wait_dispatched();
    assert_eq!(t.broker.store.queue_offsets("SCHEDULE_TOPIC_XXXX", 2).1, before);
    t.stop().await;
}

/// A half message of producer group `PG` for `topic`'s queue 1.
fn half(topic: &str, body: &[u8]) -> SendRequest {
    SendRequest {
        properties: Some("TAGS\u{1}A\u{2}TRAN_MSG\u{1}true\u{2}PGROUP\u{1}PG\u{2}KEYS\u{1}k\u{2}".into()),
        sys_flag: petrel_protocol::message::sys_flag::TRANSACTION_PREPARED_TYPE,
        ..send_request(topic, 1, "A", body)
    }
}

fn end(out: &SendOutcome, commit: Option<bool>) -> EndTransaction {
    let (_, offset) = decode_offset_msg_id(&out.msg_id).unwrap();
    EndTransaction {
        producer_group: "PG".into(),
        may_publish: crate::services::any_topic(),
        tran_state_table_offset: out.queue_offset,
        commit_log_offset: offset,
        commit,
    }
}

#[tokio::test]
async fn a_half_message_is_invisible_until_committed_and_committed_once() {
    let t = TestBroker::start(|_| {});
    let produce = &t.broker.produce;
    let out = produce.send(half("Tx", b"order-1")).await.unwrap();
    assert_eq!(out.queue_id, 1, "the answer names the requested queue");
    let stored_half = stored(&t, &out.msg_id);
    assert_eq!((stored_half.topic.as_str(), stored_half.queue_id), ("RMQ_SYS_TRANS_HALF_TOPIC", 0));
    assert_eq!(stored_half.sys_flag & 0xC, 0, "indexed as a plain message in the half queue");
    t.wait_dispatched();
    assert_eq!(t.broker.store.queue_offsets("Tx", 1).1, 0, "no consumer can see a half message");

    assert_eq!(produce.end_transaction(end(&out, None)).await.unwrap(), Ended::Undecided);
    let wrong_group = EndTransaction {
        producer_group: "Other".into(),
        ..end(&out, Some(true))
    };
    assert!(
        produce
            .end_transaction(wrong_group)
            .await
            .unwrap_err()
            .to_string()
            .contains("producer group wrong")
    );
    // A caller who may not publish to the half message's real topic decides nothing.
    let not_allowed = EndTransaction {
        may_publish: std::sync::Arc::new(|topic: &str| Err(BrokerError::NoPermission(format!("not {topic}")))),
        ..end(&out, Some(true))
    };
    let e = produce.end_transaction(not_allowed).await.unwrap_err();
    assert!(matches!(&e, BrokerError::NoPermission(why) if why == "not Tx"), "{e}");
    let wrong_offset = EndTransaction {
        tran_state_table_offset: 5,
        ..end(&out, Some(true))
    };
    assert!(
        produce
            .end_transaction(wrong_offset)
            .await
            .unwrap_err()
            .to_string()
            .contains("state table offset wrong")
    );
    assert_eq!(produce.end_transaction(end(&out, Some(true))).await.unwrap(), Ended::Committed);
    assert_eq!(produce.end_transaction(end(&out, Some(true))).await.unwrap(), Ended::AlreadyDecided);
    assert_eq!(
        produce.end_transaction(end(&out, Some(false))).await.unwrap(),
        Ended::AlreadyDecided
    );

    let committed = first_in(&t, "Tx", 1).await;
    assert_eq!(committed.body.as_ref(), b"order-1");
    assert_eq!(
        committed.sys_flag & 0xC,
        petrel_protocol::message::sys_flag::TRANSACTION_COMMIT_TYPE
    );
    assert_eq!(committed.properties.get("TRAN_MSG"), None);
    assert_eq!(committed.properties.get("REAL_TOPIC"), None);
    assert_eq!(committed.properties.get("UNIQ_KEY"), stored_half.properties.get("UNIQ_KEY"));
    assert_eq!(committed.properties.get("KEYS").map(String::as_str), Some("k"));

    let rolled = produce.send(half("Tx", b"order-2")).await.unwrap();
    assert_eq!(produce.end_transaction(end(&rolled, Some(false))).await.unwrap(), Ended::RolledBack);
    t.wait_dispatched();
    assert_eq!(
        t.broker.store.queue_offsets("Tx", 1).1,
        1,
        "committed once, the rolled-back one never"
    );
    assert_eq!(
        t.broker.store.queue_offsets("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0).1,
        2,
        "one op record per decision"
    );
    t.stop().await;
}

#[tokio::test]
async fn an_undecided_half_message_is_checked_with_a_producer_and_given_up_after_the_last_check() {
    let t = TestBroker::start(|c| {
        c.transaction_time_out_ms = 50;
        c.transaction_check_interval_ms = 100;
        c.transaction_check_max = 2;
    });
    let producer = crate::services::testing::FakeClient::new(7);
    let channel = crate::services::groups::ClientChannel {
        handle: producer.clone(),
        client_id: "producer-7".into(),
        language: petrel_protocol::LanguageCode::Java,
        version: 513,
        last_update: std::time::Instant::now(),
    };
    t.broker.groups.register_producer("PG", channel).unwrap();
    let produce = &t.broker.produce;
    let answered = produce.send(half("Checked", b"asked")).await.unwrap();
    produce.send(half("Checked", b"never answered")).await.unwrap();

    // The first check of each: a copy, shown to the producer with its real topic.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while producer.checks.lock().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no check came");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let check = producer.checks.lock()[0].clone();
    let (shown, _) = MessageExt::decode(&check.record).unwrap();
    assert_eq!(
        (shown.topic.as_str(), shown.queue_id, shown.body.as_ref()),
        ("Checked", 1, &b"asked"[..])
    );
    assert!(check.tran_state_table_offset >= 2, "the copy, past the two originals");
    assert_eq!(check.msg_id, stored(&t, &answered.msg_id).properties.get("UNIQ_KEY").cloned());
    let commit = EndTransaction {
        producer_group: "PG".into(),
        may_publish: crate::services::any_topic(),
        tran_state_table_offset: check.tran_state_table_offset,
        commit_log_offset: check.commit_log_offset,
        commit: Some(true),
    };
    assert_eq!(produce.end_transaction(commit).await.unwrap(), Ended::Committed);
    assert_eq!(first_in(&t, "Checked", 1).await.body.as_ref(), b"asked");
    // The original's own late commit is the same transaction: nothing more is stored.
    assert_eq!(
        produce.end_transaction(end(&answered, Some(true))).await.unwrap(),
        Ended::AlreadyDecided
    );

    // The other is asked about twice (transactionCheckMax), then kept aside and never delivered.
    first_in(&t, "TRANS_CHECK_MAX_TIME_TOPIC", 0).await;
    let asked_about_ignored = producer
        .checks
        .lock()
        .iter()
        .filter(|c| MessageExt::decode(&c.record).unwrap().0.body.as_ref() == b"never answered")
        .count();
    assert_eq!(asked_about_ignored, 2);
    t.wait_dispatched();
    assert_eq!(t.broker.store.queue_offsets("Checked", 1).1, 1);
    t.stop().await;
}

#[tokio::test]
async fn timer_messages_reach_their_queue_in_due_order_no_sooner_than_their_time() {
    let t = TestBroker::start(|_| {});
    let timer = |props: String, body: &'static [u8]| SendRequest {
        properties: Some(props),
        ..send_request("At", 0, "A", body)
    };
    let produce = &t.broker.produce;
    let late = produce.send(timer("TIMER_DELAY_MS\u{1}900\u{2}".into(), b"late")).await.unwrap();
    let soon = produce
        .send(timer("TIMER_DELAY_SEC\u{1}0\u{2}TIMER_DELAY_MS\u{1}9\u{2}".into(), b"now"))
        .await
        .unwrap();
    let deliver_ms = crate::now_ms() + 300;
    let early = produce
        .send(timer(format!("TIMER_DELIVER_MS\u{1}{deliver_ms}\u{2}"), b"early"))
        .await
        .unwrap();
    let waiting = stored(&t, &late.msg_id);
    assert_eq!((waiting.topic.as_str(), waiting.queue_id), ("rmq_sys_wheel_timer", 0));
    assert_eq!(waiting.properties.get("REAL_TOPIC").map(String::as_str), Some("At"));
    let due_ms: i64 = waiting.properties["TIMER_OUT_MS"].parse().unwrap();
    assert!(
        (waiting.born_timestamp + 900..waiting.store_timestamp + 1000).contains(&due_ms),
        "due {due_ms}"
    );
    assert_eq!(stored(&t, &soon.msg_id).topic, "At", "TIMER_DELAY_SEC (0) wins: stored at once");
    let refused = produce
        .send(timer("TIMER_DELAY_SEC\u{1}259201\u{2}".into(), b"x"))
        .await
        .unwrap_err();
    assert!(matches!(refused, BrokerError::MessageIllegal(_)), "{refused}");
    let direct = produce.send(send_request("rmq_sys_wheel_timer", 0, "A", b"x")).await.unwrap_err();
    assert!(matches!(direct, BrokerError::NoPermission(_)), "{direct}");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while t.broker.store.queue_offsets("At", 0).1 < 3 {
        assert!(std::time::Instant::now() < deadline, "not all delivered");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let got = t.broker.store.get_messages("At", 0, 0, 10, None);
    let arrived = petrel_protocol::message::decode_messages(&got.body).unwrap();
    let bodies: Vec<&[u8]> = arrived.iter().map(|m| m.body.as_ref()).collect();
    assert_eq!(bodies, [&b"now"[..], b"early", b"late"], "in due order, each once");
    for (m, sent) in arrived[1..].iter().zip([&early, &late]) {
        let due_ms: i64 = m.properties["TIMER_OUT_MS"].parse().unwrap();
        assert!(
            m.store_timestamp >= due_ms,
            "stored {} ms before its time",
            due_ms - m.store_timestamp
        );
        assert!(
            m.store_timestamp < due_ms + 1000,
            "stored {} ms after its time",
            m.store_timestamp - due_ms
        );
        assert_eq!(
            m.properties.get("UNIQ_KEY"),
            stored(&t, &sent.msg_id).properties.get("UNIQ_KEY"),
            "the same message id"
        );
        assert!(m.properties.contains_key("TIMER_ENQUEUE_MS") && m.properties.contains_key("TIMER_DEQUEUE_MS"));
        assert_eq!(m.properties.get("REAL_TOPIC"), None);
    }
    assert_eq!(
        t.broker.timer.pending(|q| t.broker.store.queue_offsets("rmq_sys_wheel_timer", q).1),
        0
    );
    t.stop().await;
}
