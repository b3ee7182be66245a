//! The request units in process: the broker's real dispatcher, access gate and handlers over a
//! broker on a temporary directory, on a connection attached to no socket. Each family's
//! answers and its refusals, with RocketMQ's codes.

use std::net::SocketAddr;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_remoting::{Connection, Handler, Reply};

use super::RocketMqFront;
use crate::config::{BrokerConfig, Secret};
use crate::services::testing::TestBroker;

fn peer() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 40_123))
}

fn req(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut r = RemotingCommand::request(code, 1);
    for (k, v) in fields {
        r.put_ext(*k, *v);
    }
    r
}

/// The answer the broker gives `request` on `conn`.
async fn call(front: &RocketMqFront, conn: &Arc<Connection>, request: RemotingCommand) -> RemotingCommand {
    match front.handle(conn, request) {
        Reply::Now(answer) => answer,
        Reply::Later(work) => work.await.expect("a request is answered"),
        Reply::None => panic!("no answer to a request that wants one"),
    }
}

fn create_topic(topic: &str) -> RemotingCommand {
    req(
        rc::UPDATE_AND_CREATE_TOPIC,
        &[
            ("topic", topic),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "2"),
            ("writeQueueNums", "2"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("order", "false"),
        ],
    )
}

fn send(topic: &str, queue_id: i32, body: &[u8]) -> RemotingCommand {
    let queue = queue_id.to_string();
    req(
        rc::SEND_MESSAGE,
        &[
            ("producerGroup", "pg"),
            ("topic", topic),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", &queue),
            ("sysFlag", "0"),
            ("bornTimestamp", "1700000000000"),
            ("flag", "0"),
            ("properties", "TAGS\u{1}A\u{2}WAIT\u{1}true\u{2}"),
        ],
    )
    .with_body(body.to_vec())
}

fn started(configure: impl FnOnce(&mut BrokerConfig)) -> (TestBroker, RocketMqFront, Arc<Connection>) {
    let broker = TestBroker::start(configure);
    let front = RocketMqFront(broker.broker.clone());
    (broker, front, Connection::detached(peer()))
}

#[tokio::test]
async fn unknown_codes_are_not_supported_and_oneway_requests_get_no_answer() {
    let (broker, front, conn) = started(|_| {});
    let answer = call(&front, &conn, req(99_999, &[])).await;
    assert_eq!(answer.code, resp::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(answer.remark.as_deref(), Some(" request type 99999 not supported"));
    let mut oneway = req(99_999, &[]);
    oneway.mark_oneway();
    assert!(matches!(front.handle(&conn, oneway), Reply::None));
    broker.stop().await;
}

#[tokio::test]
async fn sends_store_and_their_refusals_name_rocketmq_codes() {
    let (broker, front, conn) = started(|c| {
        c.auto_create_topic_enable = false;
        c.max_message_size_bytes = 1024;
    });
    assert_eq!(call(&front, &conn, create_topic("orders")).await.code, resp::SUCCESS);
    let stored = call(&front, &conn, send("orders", 0, b"hello")).await;
    assert_eq!(stored.code, resp::SUCCESS, "{:?}", stored.remark);
    assert!(stored.ext("msgId").is_some_and(|id| id.len() == 32), "{stored:?}");
    assert_eq!(stored.ext("queueOffset"), Some("0"));
    let missing = call(&front, &conn, send("no-such-topic", 0, b"x")).await;
    assert_eq!(missing.code, resp::TOPIC_NOT_EXIST, "{:?}", missing.remark);
    let too_large = call(&front, &conn, send("orders", 0, &[b'x'; 2048])).await;
    assert_eq!(too_large.code, resp::MESSAGE_ILLEGAL, "{:?}", too_large.remark);
    let mut no_topic = send("orders", 0, b"x");
    no_topic.ext_fields.as_mut().expect("fields").shift_remove("topic");
    let no_topic = call(&front, &conn, no_topic).await;
    assert_eq!(
        no_topic.code,
        resp::SYSTEM_ERROR,
        "a header without its topic: {:?}",
        no_topic.remark
    );
    assert!(
        no_topic.ext("MSG_REGION").is_some(),
        "a send refused for its header still carries MSG_REGION: {no_topic:?}"
    );
    broker.stop().await;
}

#[tokio::test]
async fn pulls_and_offsets_read_what_was_stored_and_refuse_what_is_not() {
    let (broker, front, conn) = started(|c| c.auto_create_topic_enable = false);
    assert_eq!(call(&front, &conn, create_topic("t")).await.code, resp::SUCCESS);
    assert_eq!(call(&front, &conn, send("t", 1, b"one")).await.code, resp::SUCCESS);
    broker.wait_dispatched();
    let pull = |offset: &str| {
        req(
            rc::PULL_MESSAGE,
            &[
                ("consumerGroup", "cg"),
                ("topic", "t"),
                ("queueId", "1"),
                ("queueOffset", offset),
                ("maxMsgNums", "32"),
                ("sysFlag", "0"),
                ("commitOffset", "0"),
                ("suspendTimeoutMillis", "0"),
                ("subVersion", "0"),
            ],
        )
    };
    let got = call(&front, &conn, pull("0")).await;
    assert_eq!(got.code, resp::SUCCESS, "{:?}", got.remark);
    let messages = petrel_protocol::decode_messages(&got.body).expect("records");
    assert_eq!(messages.len(), 1);
    assert_eq!(&messages[0].body[..], b"one");
    let beyond = call(&front, &conn, pull("5")).await;
    assert_eq!(beyond.code, resp::PULL_OFFSET_MOVED, "{:?}", beyond.remark);

    let update = req(
        rc::UPDATE_CONSUMER_OFFSET,
        &[("consumerGroup", "cg"), ("topic", "t"), ("queueId", "1"), ("commitOffset", "1")],
    );
    let unknown_group = call(&front, &conn, update.clone()).await;
    assert_eq!(unknown_group.code, resp::SUBSCRIPTION_GROUP_NOT_EXIST, "{:?}", unknown_group.remark);
    crate::services::testing::heartbeat_consumer(&broker.broker, "cg", "t");
    assert_eq!(call(&front, &conn, update).await.code, resp::SUCCESS);
    let query = |group: &str| {
        req(
            rc::QUERY_CONSUMER_OFFSET,
            &[("consumerGroup", group), ("topic", "t"), ("queueId", "1")],
        )
    };
    let found = call(&front, &conn, query("cg")).await;
    assert_eq!((found.code, found.ext("offset")), (resp::SUCCESS, Some("1")));
    let max = call(&front, &conn, req(rc::GET_MAX_OFFSET, &[("topic", "t"), ("queueId", "1")])).await;
    assert_eq!((max.code, max.ext("offset")), (resp::SUCCESS, Some("1")));
    let bad = call(
        &front,
        &conn,
        req(rc::QUERY_CONSUMER_OFFSET, &[("consumerGroup", "cg"), ("topic", "t")]),
    )
    .await;
    assert_eq!(bad.code, resp::SYSTEM_ERROR, "a header without its queueId: {:?}", bad.remark);
    broker.stop().await;
}

#[tokio::test]
async fn admin_creates_and_reads_topics_and_masks_secrets() {
    let (broker, front, conn) = started(|c| {
        c.init_authentication_user = Some(Secret::new(r#"{"username":"root","password":"hunter2-hunter2"}"#));
    });
    assert_eq!(call(&front, &conn, create_topic("admin-made")).await.code, resp::SUCCESS);
    let config = call(&front, &conn, req(rc::GET_TOPIC_CONFIG, &[("topic", "admin-made")])).await;
    assert_eq!(config.code, resp::SUCCESS, "{:?}", config.remark);
    assert!(String::from_utf8_lossy(&config.body).contains("admin-made"));
    let missing = call(&front, &conn, req(rc::GET_TOPIC_CONFIG, &[("topic", "nope")])).await;
    assert_eq!(missing.code, resp::TOPIC_NOT_EXIST, "{:?}", missing.remark);
    let illegal = call(&front, &conn, create_topic("bad topic!")).await;
    assert_eq!(
        illegal.code,
        resp::INVALID_PARAMETER,
        "a topic name outside RocketMQ's characters: {:?}",
        illegal.remark
    );
    let broker_config = call(&front, &conn, req(rc::GET_BROKER_CONFIG, &[])).await;
    let text = String::from_utf8_lossy(&broker_config.body).into_owned();
    assert!(
        text.contains("initAuthenticationUser=******") && !text.contains("hunter2"),
        "{text}"
    );
    broker.stop().await;
}

/// A POP of up to 8 messages from any queue of `topic`, invisible for a minute, not waiting.
fn pop_any_queue(group: &str, topic: &str) -> RemotingCommand {
    req(
        rc::POP_MESSAGE,
        &[
            ("consumerGroup", group),
            ("topic", topic),
            ("queueId", "-1"),
            ("maxMsgNums", "8"),
            ("invisibleTime", "60000"),
            ("pollTime", "0"),
            ("bornTime", "1700000000000"),
            ("initMode", "0"),
        ],
    )
}

#[tokio::test]
async fn pop_takes_and_acks_and_refuses_a_forged_receipt() {
    let (broker, front, conn) = started(|c| c.auto_create_topic_enable = false);
    assert_eq!(call(&front, &conn, create_topic("p")).await.code, resp::SUCCESS);
    assert_eq!(call(&front, &conn, send("p", 0, b"popped")).await.code, resp::SUCCESS);
    broker.wait_dispatched();
    crate::services::testing::heartbeat_consumer(&broker.broker, "pg-pop", "p");
    let popped = call(&front, &conn, pop_any_queue("pg-pop", "p")).await;
    assert_eq!(popped.code, resp::SUCCESS, "{:?}", popped.remark);
    let messages = petrel_protocol::decode_messages(&popped.body).expect("records");
    assert_eq!(messages.len(), 1);
    // The handle a client builds from the answer's pop time (RocketMQ's ExtraInfoUtil layout).
    let pop_time = popped.ext("popTime").expect("the pop time");
    let receipt = format!(
        "0 {pop_time} 60000 0 0 broker-a {} {}",
        messages[0].queue_id, messages[0].queue_offset
    );
    let ack = |extra: &str| {
        req(
            rc::ACK_MESSAGE,
            &[
                ("consumerGroup", "pg-pop"),
                ("topic", "p"),
                ("queueId", "0"),
                ("extraInfo", extra),
                ("offset", "0"),
            ],
        )
    };
    assert_eq!(call(&front, &conn, ack(&receipt)).await.code, resp::SUCCESS);
    let forged = call(&front, &conn, ack("not a receipt")).await;
    assert_eq!(
        forged.code,
        resp::INVALID_PARAMETER,
        "a receipt handle that does not parse: {:?}",
        forged.remark
    );
    broker.stop().await;
}

#[tokio::test]
async fn end_transaction_refuses_an_offset_with_no_half_message() {
    let (broker, front, conn) = started(|_| {});
    let end = req(
        rc::END_TRANSACTION,
        &[
            ("producerGroup", "tx-pg"),
            ("tranStateTableOffset", "0"),
            ("commitLogOffset", "123456"),
            ("commitOrRollback", "8"),
            ("msgId", "0A0000010000000000000000"),
        ],
    );
    let answer = call(&front, &conn, end).await;
    assert_eq!(answer.code, resp::SYSTEM_ERROR, "no half message there: {:?}", answer.remark);
    broker.stop().await;
}

#[tokio::test]
async fn producer_connections_list_a_groups_producers_and_refuse_an_unknown_group() {
    let (broker, front, conn) = started(|_| {});
    let unknown = call(&front, &conn, req(rc::GET_PRODUCER_CONNECTION_LIST, &[("producerGroup", "nobody")])).await;
    assert_eq!(unknown.code, resp::SYSTEM_ERROR, "{:?}", unknown.remark);
    assert!(
        unknown.remark.as_deref().is_some_and(|r| r.contains("not exist")),
        "{:?}",
        unknown.remark
    );
    let beat = br#"{"clientID":"c1","consumerDataSet":[],"producerDataSet":[{"groupName":"pg-listed"}]}"#;
    let answer = call(&front, &conn, req(rc::HEART_BEAT, &[]).with_body(beat.to_vec())).await;
    assert_eq!(answer.code, resp::SUCCESS, "{:?}", answer.remark);
    let listed = call(
        &front,
        &conn,
        req(rc::GET_PRODUCER_CONNECTION_LIST, &[("producerGroup", "pg-listed")]),
    )
    .await;
    assert_eq!(listed.code, resp::SUCCESS, "{:?}", listed.remark);
    let body = String::from_utf8_lossy(&listed.body).into_owned();
    assert!(body.contains("\"clientId\":\"c1\""), "{body}");
    broker.stop().await;
}

#[tokio::test]
async fn acl_requests_need_a_signature_and_a_super_user() {
    let (broker, front, conn) = started(|c| {
        c.authentication_enabled = true;
        c.authorization_enabled = true;
        c.init_authentication_user = Some(Secret::new(r#"{"username":"root","password":"root-secret-123"}"#));
    });
    let create = |name: &str| {
        req(rc::AUTH_CREATE_USER, &[("username", name)])
            .with_body(format!(r#"{{"username":"{name}","password":"pw-{name}-123","userType":"Normal"}}"#).into_bytes())
    };
    let unsigned = call(&front, &conn, create("alice")).await;
    assert_eq!(
        unsigned.code,
        resp::NO_PERMISSION,
        "an unsigned admin request: {:?}",
        unsigned.remark
    );
    let mut signed = create("alice");
    petrel_auth::sign(&mut signed, "root", "root-secret-123");
    let made = call(&front, &conn, signed).await;
    assert_eq!(made.code, resp::SUCCESS, "{:?}", made.remark);
    let mut by_alice = create("mallory");
    petrel_auth::sign(&mut by_alice, "alice", "pw-alice-123");
    let refused = call(&front, &conn, by_alice).await;
    assert_eq!(
        refused.code,
        resp::NO_PERMISSION,
        "a normal user cannot make users: {:?}",
        refused.remark
    );
    broker.stop().await;
}

#[tokio::test]
async fn an_admins_question_reaches_the_named_consumer_with_rocketmq_fields() {
    use crate::services::groups::ClientChannel;
    use crate::services::testing::{FakeClient, consumer_data};
    let (broker, front, conn) = started(|_| {});
    assert_eq!(call(&front, &conn, create_topic("asked")).await.code, resp::SUCCESS);
    let stored = call(&front, &conn, send("asked", 0, b"direct-body")).await;
    let msg_id = stored.ext("msgId").expect("an offset message id").to_owned();
    let running = |jstack: &str| {
        req(
            rc::GET_CONSUMER_RUNNING_INFO,
            &[("consumerGroup", "g-asked"), ("clientId", "c-asked"), ("jstackEnable", jstack)],
        )
    };
    let offline = call(&front, &conn, running("true")).await;
    assert_eq!(offline.code, resp::SYSTEM_ERROR);
    assert_eq!(offline.remark.as_deref(), Some("The Consumer <g-asked> <c-asked> not online"));

    let channel = ClientChannel {
        handle: FakeClient::new(7),
        client_id: "c-asked".into(),
        language: petrel_protocol::codes::LanguageCode::Java,
        version: 453,
        last_update: std::time::Instant::now(),
    };
    broker
        .broker
        .groups
        .register_consumer(channel, &consumer_data("g-asked", "asked", "*"))
        .expect("registered");
    // The fake client answers with the question it got.
    let asked = call(&front, &conn, running("true")).await;
    assert_eq!(asked.code, resp::SUCCESS, "{:?}", asked.remark);
    let question = String::from_utf8_lossy(&asked.body).into_owned();
    assert!(
        question.starts_with("RunningInfo") && question.contains("jstack: true"),
        "{question}"
    );

    let direct = |id: &str| {
        req(
            rc::CONSUME_MESSAGE_DIRECTLY,
            &[
                ("consumerGroup", "g-asked"),
                ("clientId", "c-asked"),
                ("msgId", id),
                ("topic", "asked"),
            ],
        )
    };
    let consumed = call(&front, &conn, direct(&msg_id)).await;
    assert_eq!(consumed.code, resp::SUCCESS, "{:?}", consumed.remark);
    let question = String::from_utf8_lossy(&consumed.body).into_owned();
    assert!(question.starts_with("ConsumeDirectly"), "{question}");
    assert!(
        question.contains(&msg_id) && question.contains("broker_name: \"broker-a\""),
        "{question}"
    );
    assert!(question.contains("topic_sys_flag: Some(0)"), "the topic's flag added: {question}");
    assert!(question.contains("direct-body"), "the stored record goes with it: {question}");
    let garbled = call(&front, &conn, direct("not-a-message-id")).await;
    assert_ne!(garbled.code, resp::SUCCESS, "{:?}", garbled.remark);
    assert!(
        garbled.remark.as_deref().is_some_and(|r| r.contains("not an offset message id")),
        "{:?}",
        garbled.remark
    );
    broker.stop().await;
}

#[tokio::test]
async fn who_consumes_a_topic_and_the_system_topics_are_answered_and_refused_without_rights() {
    let (broker, front, conn) = started(|c| {
        c.authentication_enabled = true;
        c.authorization_enabled = true;
        c.init_authentication_user = Some(Secret::new(r#"{"username":"root","password":"root-secret-123"}"#));
    });
    let signed = |mut r: RemotingCommand, user: &str, password: &str| {
        petrel_auth::sign(&mut r, user, password);
        r
    };
    let root = |r: RemotingCommand| signed(r, "root", "root-secret-123");
    assert_eq!(call(&front, &conn, root(create_topic("watched"))).await.code, resp::SUCCESS);
    let beat = br#"{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg-online","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"watched"}],"unitMode":false}],"producerDataSet":[]}"#;
    let answer = call(&front, &conn, root(req(rc::HEART_BEAT, &[]).with_body(beat.to_vec()))).await;
    assert_eq!(answer.code, resp::SUCCESS, "{:?}", answer.remark);
    let who = || req(rc::QUERY_TOPIC_CONSUME_BY_WHO, &[("topic", "watched")]);
    let answer = call(&front, &conn, root(who())).await;
    assert_eq!(answer.code, resp::SUCCESS, "{:?}", answer.remark);
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    assert_eq!(body, r#"{"groupList":["cg-online"]}"#, "the group subscribed to it");
    let system = call(&front, &conn, root(req(rc::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, &[]))).await;
    assert_eq!(system.code, resp::SUCCESS, "{:?}", system.remark);
    let body = String::from_utf8_lossy(&system.body).into_owned();
    assert!(body.contains("\"TBW102\"") && !body.contains("\"watched\""), "{body}");
    for request in [who(), req(rc::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, &[])] {
        let refused = call(&front, &conn, request).await;
        assert_eq!(refused.code, resp::NO_PERMISSION, "unsigned: {:?}", refused.remark);
    }
    broker.stop().await;
}

/// A send to `orders` queue 0 whose `INNER_MULTI_DISPATCH` is `lmq` (none when empty).
fn send_dispatched(lmq: &str, body: &[u8]) -> RemotingCommand {
    let mut r = send("orders", 0, body);
    let properties = format!("TAGS\u{1}A\u{2}INNER_MULTI_DISPATCH\u{1}{lmq}\u{2}INNER_MULTI_QUEUE_OFFSET\u{1}77\u{2}");
    r.put_ext("properties", properties.as_str());
    r
}

fn pull_queue(group: &str, topic: &str, offset: i64) -> RemotingCommand {
    let offset = offset.to_string();
    req(
        rc::PULL_MESSAGE,
        &[
            ("consumerGroup", group),
            ("topic", topic),
            ("queueId", "0"),
            ("queueOffset", offset.as_str()),
            ("maxMsgNums", "32"),
            ("sysFlag", "2"),
            ("commitOffset", "0"),
            ("suspendTimeoutMillis", "0"),
            ("subscription", "*"),
            ("subVersion", "0"),
        ],
    )
}

/// The bodies and `INNER_MULTI_QUEUE_OFFSET`s a pull of a light queue answers.
async fn pulled(front: &RocketMqFront, conn: &Arc<Connection>, topic: &str) -> Vec<(String, String)> {
    let got = call(front, conn, pull_queue("%LMQ%reader", topic, 0)).await;
    assert_eq!(got.code, resp::SUCCESS, "{topic}: {:?}", got.remark);
    petrel_protocol::decode_messages(&got.body)
        .expect("records")
        .into_iter()
        .map(|m| {
            let offsets = m.properties.get("INNER_MULTI_QUEUE_OFFSET").cloned().unwrap_or_default();
            (String::from_utf8_lossy(&m.body).into_owned(), offsets)
        })
        .collect()
}

#[tokio::test]
async fn light_message_queues_take_dispatched_messages_and_answer_for_any_lmq_name() {
    let (broker, front, conn) = started(|c| {
        c.enable_lmq = true;
        c.enable_multi_dispatch = true;
        c.max_lmq_consume_queue_num = 2;
    });
    assert_eq!(call(&front, &conn, create_topic("orders")).await.code, resp::SUCCESS);
    for (lmq, body) in [("%LMQ%a,%LMQ%b", "one"), ("%LMQ%b", "two")] {
        let stored = call(&front, &conn, send_dispatched(lmq, body.as_bytes())).await;
        assert_eq!(stored.code, resp::SUCCESS, "{:?}", stored.remark);
    }
    broker.wait_dispatched();
    // The client's own offsets (77) are replaced by the broker's.
    let pair = |b: &str, o: &str| (b.to_owned(), o.to_owned());
    assert_eq!(pulled(&front, &conn, "%LMQ%a").await, vec![pair("one", "0,0")]);
    assert_eq!(pulled(&front, &conn, "%LMQ%b").await, vec![pair("one", "0,0"), pair("two", "1")]);
    let max = call(&front, &conn, req(rc::GET_MAX_OFFSET, &[("topic", "%LMQ%b"), ("queueId", "0")])).await;
    assert_eq!((max.code, max.ext("offset")), (resp::SUCCESS, Some("2")));
    // A %LMQ% group commits without a heartbeat and without being stored.
    let commit = req(
        rc::UPDATE_CONSUMER_OFFSET,
        &[
            ("consumerGroup", "%LMQ%g"),
            ("topic", "%LMQ%b"),
            ("queueId", "0"),
            ("commitOffset", "1"),
        ],
    );
    assert_eq!(call(&front, &conn, commit).await.code, resp::SUCCESS);
    let query = req(
        rc::QUERY_CONSUMER_OFFSET,
        &[("consumerGroup", "%LMQ%g"), ("topic", "%LMQ%b"), ("queueId", "0")],
    );
    let found = call(&front, &conn, query).await;
    assert_eq!((found.code, found.ext("offset")), (resp::SUCCESS, Some("1")));
    // POP reads a light queue too, from the %LMQ% group's committed offset (1).
    let popped = call(&front, &conn, pop_any_queue("%LMQ%g", "%LMQ%b")).await;
    assert_eq!(popped.code, resp::SUCCESS, "{:?}", popped.remark);
    let popped = petrel_protocol::decode_messages(&popped.body).expect("records");
    assert_eq!(popped.iter().map(|m| &m.body[..]).collect::<Vec<_>>(), [b"two"], "{popped:?}");
    // Past maxLmqConsumeQueueNum (2): a third queue is refused and nothing is stored.
    let third = call(&front, &conn, send_dispatched("%LMQ%a,%LMQ%c", b"three")).await;
    assert_eq!(third.code, resp::SYSTEM_ERROR, "{:?}", third.remark);
    assert!(
        third
            .remark
            .as_deref()
            .is_some_and(|r| r.contains("[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]")),
        "{:?}",
        third.remark
    );
    broker.wait_dispatched();
    assert_eq!(pulled(&front, &conn, "%LMQ%a").await.len(), 1);
    // Names that are not light queues, repeated ones, and a send to a light queue itself.
    for bad in ["orders", "%LMQ%a,%LMQ%a", "%LMQ%a,"] {
        let refused = call(&front, &conn, send_dispatched(bad, b"bad")).await;
        assert_eq!(refused.code, resp::MESSAGE_ILLEGAL, "{bad}: {:?}", refused.remark);
    }
    let direct = call(&front, &conn, send("%LMQ%a", 0, b"direct")).await;
    assert_eq!(direct.code, resp::NO_PERMISSION, "{:?}", direct.remark);
    broker.stop().await;
}

#[tokio::test]
async fn without_lmq_the_dispatch_property_is_kept_and_files_nothing() {
    let (broker, front, conn) = started(|c| c.enable_lmq = true);
    assert_eq!(call(&front, &conn, create_topic("orders")).await.code, resp::SUCCESS);
    let stored = call(&front, &conn, send_dispatched("%LMQ%a", b"one")).await;
    assert_eq!(stored.code, resp::SUCCESS, "{:?}", stored.remark);
    broker.wait_dispatched();
    // enableLmq alone does nothing, as on RocketMQ (it needs enableMultiDispatch).
    let lmq = call(&front, &conn, pull_queue("cg", "%LMQ%a", 0)).await;
    assert_eq!(lmq.code, resp::TOPIC_NOT_EXIST, "{:?}", lmq.remark);
    let parent = call(&front, &conn, pull_queue("cg", "orders", 0)).await;
    let messages = petrel_protocol::decode_messages(&parent.body).expect("records");
    assert_eq!(
        messages[0].properties.get("INNER_MULTI_DISPATCH").map(String::as_str),
        Some("%LMQ%a")
    );
    assert_eq!(
        messages[0].properties.get("INNER_MULTI_QUEUE_OFFSET"),
        None,
        "a client's offsets are never stored"
    );
    broker.stop().await;
}
