use std::time::{Duration, Instant};

use petrel_protocol::decode_messages;
use petrel_protocol::properties::java_string_hash;

use super::*;
use crate::services::testing::{TestBroker, heartbeat_consumer, send_request};

fn pull(topic: &str, queue_id: i32, offset: i64) -> PullRequest {
    PullRequest {
        group: "G".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msgs: 32,
        ..PullRequest::default()
    }
}

fn tags(expression: &str) -> Option<PullSubscription> {
    Some(PullSubscription {
        expression_type: "TAG".into(),
        expression: expression.into(),
        sub_version: 1,
    })
}

#[tokio::test]
async fn pulls_filter_by_tag_and_report_rocketmq_statuses() {
    let t = TestBroker::start(|_| {});
    for i in 0..6 {
        let tag = if i % 2 == 0 { "A" } else { "B" };
        t.broker
            .produce
            .send(send_request("PullTopic", 0, tag, format!("m{i}").as_bytes()))
            .await
            .unwrap();
    }
    t.wait_dispatched();
    let consume = &t.broker.consume;
    let all = consume.pull(pull("PullTopic", 0, 0)).await.unwrap();
    assert_eq!((all.status, all.message_count, all.next_begin_offset), (GetStatus::Found, 6, 6));
    let only_a = consume
        .pull(PullRequest {
            subscription: tags("A"),
            ..pull("PullTopic", 0, 0)
        })
        .await
        .unwrap();
    let bodies: Vec<Vec<u8>> = decode_messages(&only_a.body)
        .unwrap()
        .into_iter()
        .map(|m| m.body.to_vec())
        .collect();
    assert_eq!(bodies, [b"m0".to_vec(), b"m2".to_vec(), b"m4".to_vec()]);
    let caught_up = consume.pull(pull("PullTopic", 0, 6)).await.unwrap();
    assert_eq!(caught_up.status, GetStatus::OffsetOverflowOne);
    assert!(nothing_yet(caught_up.status, 6));
    let too_far = consume.pull(pull("PullTopic", 0, 60)).await.unwrap();
    assert_eq!((too_far.status, too_far.next_begin_offset), (GetStatus::OffsetOverflowBadly, 6));
    assert!(matches!(consume.pull(pull("Nope", 0, 0)).await, Err(BrokerError::TopicNotExist(_))));
    assert!(matches!(
        consume.pull(pull("PullTopic", 9, 0)).await,
        Err(BrokerError::InvalidParameter(_))
    ));
    t.stop().await;
}

#[tokio::test]
async fn a_held_pull_answers_when_a_message_arrives_or_when_its_hold_ends() {
    let t = TestBroker::start(|_| {});
    t.send_n("Held", 0, 1).await;
    t.wait_dispatched();
    let started = Instant::now();
    let empty = t
        .broker
        .consume
        .pull(PullRequest {
            suspend: Some(Duration::from_millis(150)),
            ..pull("Held", 0, 1)
        })
        .await
        .unwrap();
    assert_eq!(empty.status, GetStatus::OffsetOverflowOne);
    assert!(started.elapsed() >= Duration::from_millis(150), "held for its hold time");

    let broker = t.broker.clone();
    let waiting = tokio::spawn(async move {
        broker
            .consume
            .pull(PullRequest {
                suspend: Some(Duration::from_secs(20)),
                ..pull("Held", 0, 1)
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sent_at = Instant::now();
    t.send_n("Held", 0, 1).await;
    let got = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((got.status, got.message_count), (GetStatus::Found, 1));
    assert!(sent_at.elapsed() < Duration::from_secs(2), "woken by the arrival, not the hold");
    t.stop().await;
}

#[tokio::test]
async fn held_pulls_are_bounded() {
    let t = TestBroker::start(|c| c.max_long_poll_waiters = 1);
    t.send_n("Bounded", 0, 1).await;
    t.wait_dispatched();
    let broker = t.broker.clone();
    let first = tokio::spawn(async move {
        broker
            .consume
            .pull(PullRequest {
                suspend: Some(Duration::from_secs(3)),
                ..pull("Bounded", 0, 1)
            })
            .await
    });
    while t.broker.long_poll.waiting() == 0 {
        tokio::task::yield_now().await;
    }
    let second = t
        .broker
        .consume
        .pull(PullRequest {
            suspend: Some(Duration::from_secs(3)),
            ..pull("Bounded", 0, 1)
        })
        .await;
    assert!(matches!(second, Err(BrokerError::Busy(r)) if r.contains("LONG_POLL_FULL")));
    let unheld = t.broker.consume.pull(pull("Bounded", 0, 0)).await.unwrap();
    assert_eq!(unheld.status, GetStatus::Found, "pulls that need no hold are still served");
    t.broker.long_poll.close();
    first.await.unwrap().unwrap();
    t.stop().await;
}

#[tokio::test]
async fn reads_far_behind_the_end_run_on_the_store_pool() {
    let t = TestBroker::start(|_| {});
    let n = usize::try_from(HOT_QUEUE_ENTRIES).unwrap() + 10;
    t.send_n("Cold", 0, n).await;
    t.wait_dispatched();
    let hot = t.broker.consume.pull(pull("Cold", 0, i64::try_from(n).unwrap() - 5)).await.unwrap();
    assert_eq!(hot.message_count, 5);
    assert_eq!(t.broker.stats.pulls_offloaded.load(Ordering::Relaxed), 0);
    let cold = t.broker.consume.pull(pull("Cold", 0, 0)).await.unwrap();
    assert_eq!(cold.message_count, 32);
    assert_eq!(t.broker.stats.pulls_offloaded.load(Ordering::Relaxed), 1);
    t.stop().await;
}

#[tokio::test]
async fn piggy_backed_commits_count_only_for_registered_groups() {
    let t = TestBroker::start(|_| {});
    t.send_n("Commits", 0, 3).await;
    t.wait_dispatched();
    let with_commit = |group: &str| PullRequest {
        group: group.into(),
        commit_offset: Some(2),
        ..pull("Commits", 0, 0)
    };
    t.broker.consume.pull(with_commit("Stranger")).await.unwrap();
    assert_eq!(t.broker.offsets.query("Stranger", "Commits", 0), None, "no client of it registered");
    heartbeat_consumer(&t.broker, "Known", "Commits");
    t.broker.consume.pull(with_commit("Known")).await.unwrap();
    assert_eq!(t.broker.offsets.query("Known", "Commits", 0), Some(2));
    t.stop().await;
}

#[tokio::test]
async fn sql92_selects_on_properties_and_tags_when_property_filtering_is_on() {
    let t = TestBroker::start(|c| c.enable_property_filter = true);
    for i in 0..10 {
        let mut req = send_request("Sql", 0, if i % 2 == 0 { "A" } else { "B" }, format!("m{i}").as_bytes());
        let props = req.properties.take().unwrap_or_default();
        let region = if i < 5 { "eu" } else { "us" };
        req.properties = Some(format!("{props}a\u{1}{i}\u{2}region\u{1}{region}\u{2}"));
        t.broker.produce.send(req).await.unwrap();
    }
    t.broker.produce.send(send_request("Sql", 0, "A", b"no-a")).await.unwrap();
    t.wait_dispatched();
    let select = |expression: &str| PullRequest {
        subscription: Some(PullSubscription {
            expression_type: "SQL92".into(),
            expression: expression.into(),
            sub_version: 1,
        }),
        ..pull("Sql", 0, 0)
    };
    let got = t
        .broker
        .consume
        .pull(select("a >= 3 AND TAGS = 'A' AND region IN ('eu', 'ap')"))
        .await
        .unwrap();
    let bodies: Vec<Vec<u8>> = decode_messages(&got.body).unwrap().into_iter().map(|m| m.body.to_vec()).collect();
    assert_eq!(bodies, [b"m4".to_vec()]);
    assert_eq!(
        (got.status, got.next_begin_offset),
        (GetStatus::Found, 11),
        "skipped entries are passed over"
    );
    let none = t.broker.consume.pull(select("a > 100")).await.unwrap();
    assert_eq!((none.status, none.next_begin_offset), (GetStatus::NoMatchedMessage, 11));
    let missing = t.broker.consume.pull(select("a IS NULL")).await.unwrap();
    assert_eq!(missing.message_count, 1, "the message without the property");
    // The group's registered subscription is used when the pull carries none.
    let mut data = crate::services::testing::consumer_data("G", "Sql", "*");
    data.subscription_data_set[0].expression_type = "SQL92".into();
    data.subscription_data_set[0].sub_string = "region = 'us' AND a < 7".into();
    data.subscription_data_set[0].tags_set.clear();
    data.subscription_data_set[0].code_set.clear();
    let channel = crate::services::groups::ClientChannel {
        handle: crate::services::testing::FakeClient::new(7),
        client_id: "sql-client".into(),
        language: petrel_protocol::LanguageCode::Java,
        version: 513,
        last_update: Instant::now(),
    };
    t.broker.groups.register_consumer(channel, &data).unwrap();
    let registered = t.broker.consume.pull(pull("Sql", 0, 0)).await.unwrap();
    assert_eq!(registered.message_count, 2, "m5 and m6");
    assert!(matches!(
        t.broker.consume.pull(select("a >")).await,
        Err(BrokerError::SubscriptionParseFailed(_))
    ));
    assert!(matches!(
        t.broker.consume.selector("SQL92", "a >"),
        Err(BrokerError::SubscriptionParseFailed(_))
    ));
    assert!(matches!(t.broker.consume.selector("CLASS", "x"), Err(BrokerError::NotSupported(_))));
    t.stop().await;
}

#[tokio::test]
async fn sql92_and_oversized_tag_sets_are_refused() {
    let t = TestBroker::start(|_| {});
    t.send_n("Filters", 0, 1).await;
    let sql = PullRequest {
        subscription: Some(PullSubscription {
            expression_type: "SQL92".into(),
            expression: "a > 1".into(),
            sub_version: 1,
        }),
        ..pull("Filters", 0, 0)
    };
    assert!(matches!(t.broker.consume.pull(sql).await, Err(BrokerError::NotSupported(_))));
    let many: Vec<String> = (0..=MAX_SUBSCRIPTION_TAGS).map(|i| format!("t{i}")).collect();
    let wide = PullRequest {
        subscription: tags(&many.join(" || ")),
        ..pull("Filters", 0, 0)
    };
    assert!(matches!(
        t.broker.consume.pull(wide).await,
        Err(BrokerError::SubscriptionParseFailed(_))
    ));
    assert_ne!(java_string_hash("t1"), 0);
    t.stop().await;
}

#[tokio::test]
async fn a_reset_queue_answers_its_next_pull_with_the_new_offset_once_and_holds_off_stale_commits() {
    let t = TestBroker::start(|_| {});
    heartbeat_consumer(&t.broker, "G", "ResetTopic");
    t.send_n("ResetTopic", 0, 5).await;
    t.wait_dispatched();
    let (consume, offsets) = (&t.broker.consume, &t.broker.offsets);
    offsets.commit("G", "ResetTopic", 0, 5).unwrap();
    let reset = t.broker.admin.reset_offset("ResetTopic", "G", Some(0), Some(2), 0).await.unwrap();
    assert_eq!(reset, [(0, 2)]);
    assert_eq!(offsets.query("G", "ResetTopic", 0), Some(2), "committed at once");
    offsets.commit("G", "ResetTopic", 0, 5).unwrap();
    assert_eq!(
        offsets.query("G", "ResetTopic", 0),
        Some(2),
        "a commit of the old position does not undo it"
    );
    let moved = consume
        .pull(PullRequest {
            commit_offset: Some(5),
            ..pull("ResetTopic", 0, 5)
        })
        .await
        .unwrap();
    assert_eq!(
        (moved.status, moved.next_begin_offset, moved.max_offset),
        (GetStatus::OffsetReset, 2, 5)
    );
    assert_eq!(offsets.query("G", "ResetTopic", 0), Some(2), "the pull's own commit is not taken");
    let next = consume.pull(pull("ResetTopic", 0, 2)).await.unwrap();
    assert_eq!(
        (next.status, next.message_count),
        (GetStatus::Found, 3),
        "told once; then it reads from there"
    );
    offsets.commit("G", "ResetTopic", 0, 5).unwrap();
    assert_eq!(offsets.query("G", "ResetTopic", 0), Some(5), "commits count again");

    let admin = &t.broker.admin;
    let all = admin.reset_offset("ResetTopic", "G", None, None, -1).await.unwrap();
    assert_eq!(
        all.len(),
        usize::try_from(t.broker.topics.get("ResetTopic").unwrap().read_queue_nums).unwrap()
    );
    assert_eq!(all[0], (0, 5), "a negative time: the end of each queue");
    let far = admin.reset_offset("ResetTopic", "G", Some(0), Some(7), 0).await.unwrap_err();
    assert!(far.to_string().contains("not in consume queue range [0-5]"), "{far}");
    assert!(matches!(
        admin.reset_offset("Nope", "G", None, None, 0).await,
        Err(BrokerError::TopicNotExist(_))
    ));
    assert!(matches!(
        admin.reset_offset("ResetTopic", "Nobody", None, None, 0).await,
        Err(BrokerError::GroupNotExist(_))
    ));
    t.stop().await;
}
