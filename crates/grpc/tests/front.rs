//! The gRPC front end over a real broker on a temporary directory, through tonic's generated
//! client over TCP: what every SDK does first (route, send, receive, ack), each refusal's
//! RocketMQ code, and ACL 2.0's signature and policies.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use petrel_broker::{Broker, BrokerConfig, NameServers};
use petrel_grpc::pb::messaging_service_client::MessagingServiceClient;
use petrel_grpc::pb::{self, Code, receive_message_response::Content};
use petrel_grpc::{GrpcFront, GrpcLimits, GrpcServer, RenewPolicy};
use petrel_protocol::model::{TopicConfig, perm};
use sha1::Sha1;
use tokio::task::JoinSet;
use tonic::transport::Channel;

struct Running {
    broker: Arc<Broker>,
    server: GrpcServer,
    _tasks: JoinSet<()>,
    _dir: tempfile::TempDir,
}

async fn start(keys: &[(&str, &str)]) -> Running {
    start_renewing(keys, RenewPolicy::default()).await
}

async fn start_renewing(keys: &[(&str, &str)], renew: RenewPolicy) -> Running {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = BrokerConfig {
        store_path_root_dir: dir.path().to_owned(),
        broker_ip1: Some("127.0.0.1".parse().expect("an address")),
        mapped_file_size_commit_log: 1 << 20,
        ha_listen_port: Some(0),
        ..BrokerConfig::default()
    };
    for (k, v) in keys {
        config.set(k, v).expect("a valid key");
    }
    let name_server = Arc::new(petrel_namesrv::NameServer::new());
    let broker = tokio::task::spawn_blocking(move || Broker::open(config, NameServers::Embedded(name_server)))
        .await
        .expect("joined")
        .expect("opened");
    let mut tasks = JoinSet::new();
    broker.start(&mut tasks).await;
    let mut topic = TopicConfig::new("T", 2, perm::READ | perm::WRITE);
    topic.attributes.insert("message.type".into(), "NORMAL".into());
    broker.topics.create_or_update(topic).await.expect("topic");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("bound").port();
    let limits = GrpcLimits {
        max_streams_per_connection: 16,
        max_message_bytes: broker.config.max_message_size_bytes,
    };
    let server = GrpcServer::start(
        listener,
        GrpcFront::new(broker.clone(), port, 64).with_renew_policy(renew),
        limits,
        None,
    )
    .expect("serving");
    Running {
        broker,
        server,
        _tasks: tasks,
        _dir: dir,
    }
}

async fn client(r: &Running) -> MessagingServiceClient<Channel> {
    MessagingServiceClient::connect(format!("http://{}", r.server.local_addr()))
        .await
        .expect("connected")
        .max_decoding_message_size(16 << 20)
        .max_encoding_message_size(16 << 20)
}

/// A request from client `id`, signed by `user` with `secret` when given.
fn req<T>(body: T, id: &str, signed: Option<(&str, &str)>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    let meta = r.metadata_mut();
    if !id.is_empty() {
        meta.insert("x-mq-client-id", id.parse().expect("ascii"));
    }
    meta.insert("x-mq-language", "JAVA".parse().expect("ascii"));
    meta.insert("x-mq-client-version", "5.2.0".parse().expect("ascii"));
    if let Some((user, secret)) = signed {
        let date = "20261127T050000Z";
        let mut mac = Hmac::<Sha1>::new_from_slice(secret.as_bytes()).expect("any key");
        mac.update(date.as_bytes());
        let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02X}")).collect();
        let value = format!("MQv2-HMAC-SHA1 Credential={user}, SignedHeaders=x-mq-date-time, Signature={hex}");
        meta.insert("authorization", value.parse().expect("ascii"));
        meta.insert("x-mq-date-time", date.parse().expect("ascii"));
    }
    r
}

fn resource(name: &str) -> Option<pb::Resource> {
    Some(pb::Resource {
        resource_namespace: String::new(),
        name: name.into(),
    })
}

fn message(topic: &str, id: &str, body: &str) -> pb::Message {
    pb::Message {
        topic: resource(topic),
        user_properties: Default::default(),
        system_properties: Some(pb::SystemProperties {
            message_id: id.into(),
            tag: Some("TagA".into()),
            ..pb::SystemProperties::default()
        }),
        body: bytes::Bytes::copy_from_slice(body.as_bytes()),
    }
}

/// SendMessage of one message to "T" as producer "p1": the broker's answer.
async fn send_one(c: &mut MessagingServiceClient<Channel>, id: &str, body: &str) -> pb::SendMessageResponse {
    let request = pb::SendMessageRequest {
        messages: vec![message("T", id, body)],
    };
    c.send_message(req(request, "p1", None)).await.expect("answered").into_inner()
}

fn code(s: Option<&pb::Status>) -> Code {
    Code::try_from(s.expect("a status").code).expect("a known code")
}

/// A receive of `group` on "T" (tag TagA): with an invisible time, or left to the broker to
/// renew (`None`: `auto_renew`, as a push consumer receives).
fn receive_req(group: &str, invisible: Option<Duration>) -> pb::ReceiveMessageRequest {
    pb::ReceiveMessageRequest {
        group: resource(group),
        message_queue: Some(pb::MessageQueue {
            topic: resource("T"),
            id: 1,
            ..pb::MessageQueue::default()
        }),
        filter_expression: Some(pb::FilterExpression {
            r#type: pb::FilterType::Tag as i32,
            expression: "TagA".into(),
        }),
        batch_size: 8,
        invisible_duration: invisible.map(|d| prost_types::Duration {
            seconds: i64::try_from(d.as_secs()).expect("small"),
            nanos: 0,
        }),
        auto_renew: invisible.is_none(),
        long_polling_timeout: Some(prost_types::Duration { seconds: 1, nanos: 0 }),
        attempt_id: None,
    }
}

async fn receive(c: &mut MessagingServiceClient<Channel>, group: &str, invisible: Duration) -> (Code, Vec<pb::Message>) {
    receive_as(c, group, "c1", Some(invisible)).await
}

async fn receive_as(
    c: &mut MessagingServiceClient<Channel>,
    group: &str,
    id: &str,
    invisible: Option<Duration>,
) -> (Code, Vec<pb::Message>) {
    let mut stream = c
        .receive_message(req(receive_req(group, invisible), id, None))
        .await
        .expect("answered")
        .into_inner();
    let (mut status, mut messages) = (None, Vec::new());
    while let Some(item) = stream.message().await.expect("a stream item") {
        match item.content {
            Some(Content::Status(s)) => status = Some(s),
            Some(Content::Message(m)) => messages.push(m),
            _ => {}
        }
    }
    (code(status.as_ref()), messages)
}

#[tokio::test]
async fn a_message_sent_is_received_from_any_queue_acked_once_and_gone() {
    let r = start(&[]).await;
    let mut c = client(&r).await;
    let (status, _) = receive(&mut c, "G1", Duration::from_secs(30)).await;
    assert_eq!(status, Code::ConsumerGroupNotFound, "a group that never registered");
    let group = petrel_broker::services::groups::GroupConfig::new("G1");
    r.broker.groups.upsert_config(group).expect("created");
    let sent = send_one(&mut c, "ID-1", "hello").await;
    assert_eq!(code(sent.status.as_ref()), Code::Ok, "{sent:?}");
    assert_eq!(sent.entries[0].message_id, "ID-1");
    // The consumer names queue 1; the message went to queue 0: the broker pops any queue.
    let (status, got) = receive(&mut c, "G1", Duration::from_secs(30)).await;
    assert_eq!((status, got.len()), (Code::Ok, 1));
    let sys = got[0].system_properties.clone().expect("system properties");
    assert_eq!((sys.message_id.as_str(), sys.delivery_attempt), ("ID-1", Some(1)));
    assert_eq!(&got[0].body[..], b"hello");
    let handle = sys.receipt_handle.expect("a handle");
    // Received, so dispatched: the queue's bounds know it.
    let queue0 = Some(pb::MessageQueue {
        topic: resource("T"),
        id: 0,
        ..pb::MessageQueue::default()
    });
    let query = |policy: pb::QueryOffsetPolicy| pb::QueryOffsetRequest {
        message_queue: queue0.clone(),
        query_offset_policy: policy as i32,
        timestamp: Some(prost_types::Timestamp { seconds: 0, nanos: 0 }),
    };
    let end = c
        .query_offset(req(query(pb::QueryOffsetPolicy::End), "c1", None))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!((code(end.status.as_ref()), end.offset), (Code::Ok, 1));
    let by_time = c
        .query_offset(req(query(pb::QueryOffsetPolicy::Timestamp), "c1", None))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(
        (code(by_time.status.as_ref()), by_time.offset),
        (Code::Ok, 0),
        "the first stored at or after time 0"
    );
    let ack = |handle: &str| pb::AckMessageRequest {
        group: resource("G1"),
        topic: resource("T"),
        entries: vec![pb::AckMessageEntry {
            message_id: "ID-1".into(),
            receipt_handle: handle.to_owned(),
            lite_topic: None,
        }],
    };
    let acked = c.ack_message(req(ack(&handle), "c1", None)).await.expect("answered").into_inner();
    assert_eq!(code(acked.status.as_ref()), Code::Ok);
    let garbage = c
        .ack_message(req(ack("not a handle"), "c1", None))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(code(garbage.entries[0].status.as_ref()), Code::InvalidReceiptHandle);
    let (status, again) = receive(&mut c, "G1", Duration::from_secs(30)).await;
    assert_eq!((status, again.len()), (Code::MessageNotFound, 0), "acked: never again");
    assert_eq!(r.broker.offsets.query("G1", "T", 0), Some(1), "the group's offset moved past it");
}

#[tokio::test]
async fn each_refusal_has_its_rocketmq_code() {
    let r = start(&[]).await;
    let mut c = client(&r).await;
    let route = |topic: &str, id: &str| {
        req(
            pb::QueryRouteRequest {
                topic: resource(topic),
                endpoints: None,
            },
            id,
            None,
        )
    };
    let missing = c.query_route(route("Nope", "c1")).await.expect("answered").into_inner();
    assert_eq!(code(missing.status.as_ref()), Code::TopicNotFound);
    let anonymous = c.query_route(route("T", "")).await.expect("answered").into_inner();
    assert_eq!(code(anonymous.status.as_ref()), Code::ClientIdRequired);
    let found = c.query_route(route("T", "c1")).await.expect("answered").into_inner();
    assert_eq!(found.message_queues.len(), 2);
    assert_eq!(found.message_queues[0].accept_message_types, [pb::MessageType::Normal as i32]);
    let mut fifo = message("T", "ID-2", "x");
    fifo.system_properties.as_mut().expect("set").message_group = Some("g".into());
    let conflict = c
        .send_message(req(pb::SendMessageRequest { messages: vec![fifo] }, "p1", None))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(code(conflict.status.as_ref()), Code::MessagePropertyConflictWithType);
    let big = "x".repeat(r.broker.config.max_message_size_bytes + 1);
    let too_large = c
        .send_message(req(
            pb::SendMessageRequest {
                messages: vec![message("T", "ID-3", &big)],
            },
            "p1",
            None,
        ))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(
        code(too_large.status.as_ref()),
        Code::MessageBodyTooLarge,
        "one byte past maxMessageSize"
    );
    let beat = c
        .heartbeat(req(
            pb::HeartbeatRequest {
                group: resource("G"),
                client_type: 3,
            },
            "stranger",
            None,
        ))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(code(beat.status.as_ref()), Code::UnrecognizedClientType, "no Settings yet");
    let (status, _) = receive(&mut c, "G1", Duration::from_millis(0)).await;
    assert_eq!(status, Code::IllegalInvisibleTime);
}

#[tokio::test]
async fn with_acl_on_only_a_signed_request_of_a_user_with_a_policy_is_served() {
    let r = start(&[
        ("authenticationEnabled", "true"),
        ("authorizationEnabled", "true"),
        ("initAuthenticationUser", r#"{"username":"root","password":"rootpass1"}"#),
    ])
    .await;
    let user: petrel_auth::UserInfo =
        serde_json::from_str(r#"{"username":"bob","password":"bobpass12","userType":"Normal","userStatus":"enable"}"#).expect("a user");
    r.broker.access.store.create_user(&user).expect("created");
    let mut c = client(&r).await;
    let route = |signed| {
        req(
            pb::QueryRouteRequest {
                topic: resource("T"),
                endpoints: None,
            },
            "c1",
            signed,
        )
    };
    let status = |resp: pb::QueryRouteResponse| code(resp.status.as_ref());
    let unsigned = c.query_route(route(None)).await.expect("answered").into_inner();
    assert_eq!(status(unsigned), Code::Unauthorized);
    let wrong = c.query_route(route(Some(("root", "not-it")))).await.expect("answered").into_inner();
    assert_eq!(status(wrong), Code::Unauthorized);
    let no_policy = c
        .query_route(route(Some(("bob", "bobpass12"))))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(status(no_policy), Code::Forbidden, "bob has no policy on T");
    let root = c
        .query_route(route(Some(("root", "rootpass1"))))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(status(root), Code::Ok, "a super user may");
}

#[tokio::test]
async fn an_admins_questions_reach_a_grpc_push_consumer_over_telemetry() {
    use pb::telemetry_command::Command;
    use petrel_broker::services::{ClientQuestion, PushError, any_topic};
    let r = start(&[]).await;
    let mut c = client(&r).await;
    let sent = send_one(&mut c, "ID-V", "verify-me").await;
    assert_eq!(code(sent.status.as_ref()), Code::Ok, "{sent:?}");
    r.broker
        .groups
        .upsert_config(petrel_broker::services::groups::GroupConfig::new("GA"))
        .expect("created");

    let (to_broker, mut inbound) = open_push_consumer(&mut c, "GA", "admin-c").await;
    let say = |command: Command, status: Option<pb::Status>| pb::TelemetryCommand {
        status,
        command: Some(command),
    };
    let handle = r.broker.groups.consumer_by_client_id("GA", "admin-c").expect("registered");
    let ok_status = Some(pb::Status {
        code: Code::Ok as i32,
        message: "OK".into(),
    });

    // consumerStatus -s: PrintThreadStackTraceCommand, answered with the client's stacks.
    let asking = tokio::spawn(handle.ask(ClientQuestion::RunningInfo {
        group: "GA".into(),
        client_id: "admin-c".into(),
        jstack: true,
    }));
    let Some(Command::PrintThreadStackTraceCommand(print)) = inbound.message().await.expect("a frame").expect("a command").command else {
        panic!("expected a PrintThreadStackTraceCommand");
    };
    let trace = Command::ThreadStackTrace(pb::ThreadStackTrace {
        nonce: print.nonce,
        thread_stack_trace: Some("\"main\" at petrel.Test.run".into()),
    });
    to_broker.send(say(trace, ok_status.clone())).await.expect("queued");
    let body = asking.await.expect("joined").expect("answered");
    let info: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(info["properties"]["PROP_CONSUME_TYPE"], "CONSUME_PASSIVELY", "{info}");
    assert_eq!(info["properties"]["PROP_CLIENT_VERSION"], "V5_2_0", "{info}");
    assert_eq!(info["subscriptionSet"][0]["topic"], "T", "{info}");
    assert_eq!(info["jstack"], "\"main\" at petrel.Test.run", "{info}");

    // queryMsgById -d: VerifyMessageCommand with the stored message; the listener's failure is
    // CR_LATER, as RocketMQ's proxy maps it.
    let record = r.broker.admin.view_message(0, any_topic()).await.expect("the stored message");
    let asking = tokio::spawn(handle.ask(ClientQuestion::ConsumeDirectly {
        group: "GA".into(),
        client_id: "admin-c".into(),
        msg_id: "unused here".into(),
        topic: Some("T".into()),
        broker_name: "broker-a".into(),
        topic_sys_flag: None,
        group_sys_flag: None,
        record: record.into(),
    }));
    let Some(Command::VerifyMessageCommand(verify)) = inbound.message().await.expect("a frame").expect("a command").command else {
        panic!("expected a VerifyMessageCommand");
    };
    let shown = verify.message.expect("the message");
    assert_eq!(&shown.body[..], b"verify-me");
    assert_eq!(shown.system_properties.expect("set").message_id, "ID-V");
    let failed = Some(pb::Status {
        code: Code::FailedToConsumeMessage as i32,
        message: "listener said later".into(),
    });
    let result = Command::VerifyMessageResult(pb::VerifyMessageResult { nonce: verify.nonce });
    to_broker.send(say(result, failed)).await.expect("queued");
    let body = asking.await.expect("joined").expect("answered");
    let result: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(result["consumeResult"], "CR_LATER", "{result}");
    assert_eq!(result["remark"], "from gRPC client", "{result}");

    // A client whose stream closed cannot be asked: the admin hears why at once.
    drop(to_broker);
    drop(inbound);
    // At most one question can miss the stream's end (it waits out CLIENT_CALL_TIMEOUT).
    let mut unreached = false;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let question = ClientQuestion::RunningInfo {
            group: "GA".into(),
            client_id: "admin-c".into(),
            jstack: true,
        };
        if matches!(handle.ask(question).await, Err(PushError::Unreached(_))) {
            unreached = true;
            break;
        }
    }
    assert!(unreached, "a closed stream was still asked");
}

/// Opens Telemetry as a push consumer of `group` on "T" and takes the broker's answer to its
/// Settings: where the test writes the client's commands, and the broker's.
async fn open_push_consumer(
    c: &mut MessagingServiceClient<Channel>,
    group: &str,
    id: &str,
) -> (
    tokio::sync::mpsc::Sender<pb::TelemetryCommand>,
    tonic::Streaming<pb::TelemetryCommand>,
) {
    let (to_broker, outbound) = tokio::sync::mpsc::channel::<pb::TelemetryCommand>(8);
    let settings = pb::Settings {
        client_type: Some(pb::ClientType::PushConsumer as i32),
        pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
            group: resource(group),
            subscriptions: vec![pb::SubscriptionEntry {
                topic: resource("T"),
                expression: Some(pb::FilterExpression {
                    r#type: pb::FilterType::Tag as i32,
                    expression: "*".into(),
                }),
            }],
            ..pb::Subscription::default()
        })),
        ..pb::Settings::default()
    };
    let first = pb::TelemetryCommand {
        status: None,
        command: Some(pb::telemetry_command::Command::Settings(settings)),
    };
    to_broker.send(first).await.expect("queued");
    let mut inbound = c
        .telemetry(req(tokio_stream::wrappers::ReceiverStream::new(outbound), id, None))
        .await
        .expect("opened")
        .into_inner();
    let answered = inbound.message().await.expect("a frame").expect("settings answered");
    assert_eq!(code(answered.status.as_ref()), Code::Ok, "{answered:?}");
    (to_broker, inbound)
}

#[tokio::test]
async fn a_push_consumers_message_stays_invisible_while_it_is_connected_and_comes_back_when_it_is_not() {
    let policy = RenewPolicy {
        invisible: Duration::from_secs(2),
        ahead: Duration::from_secs(1),
        max: Duration::from_secs(60),
        period: Duration::from_millis(100),
    };
    let r = start_renewing(&[], policy).await;
    let mut c = client(&r).await;
    r.broker
        .groups
        .upsert_config(petrel_broker::services::groups::GroupConfig::new("GR"))
        .expect("created");
    send_one(&mut c, "ID-held", "held").await;
    let (to_broker, inbound) = open_push_consumer(&mut c, "GR", "renew-c").await;
    let (status, got) = receive_as(&mut c, "GR", "renew-c", None).await;
    assert_eq!((status, got.len()), (Code::Ok, 1));
    let given = got[0].system_properties.clone().expect("set").receipt_handle.expect("a handle");

    // Past the 2 s it was received with, it is still invisible: renewed for its client.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let (status, _) = receive_as(&mut c, "GR", "other-c", Some(Duration::from_secs(1))).await;
    assert_eq!(status, Code::MessageNotFound, "a renewed message came back");
    // The client acks with the handle it was given, whose own time has passed.
    let ack = pb::AckMessageRequest {
        group: resource("GR"),
        topic: resource("T"),
        entries: vec![pb::AckMessageEntry {
            message_id: "ID-held".into(),
            receipt_handle: given,
            lite_topic: None,
        }],
    };
    let acked = c.ack_message(req(ack, "renew-c", None)).await.expect("answered").into_inner();
    assert_eq!(code(acked.status.as_ref()), Code::Ok, "{acked:?}");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let (status, _) = receive_as(&mut c, "GR", "other-c", Some(Duration::from_secs(1))).await;
    assert_eq!(status, Code::MessageNotFound, "an acked message came back");

    // A client that goes away holds nothing: its message comes back when its time ends.
    send_one(&mut c, "ID-dropped", "dropped").await;
    let (status, got) = receive_as(&mut c, "GR", "renew-c", None).await;
    assert_eq!((status, got.len()), (Code::Ok, 1));
    drop((to_broker, inbound));
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let (status, back) = receive_as(&mut c, "GR", "other-c", Some(Duration::from_secs(1))).await;
    assert_eq!((status, back.len()), (Code::Ok, 1), "the gone client's message came back");
    assert_eq!(&back[0].body[..], b"dropped");
}

#[tokio::test]
async fn a_message_forwarded_to_its_dead_letter_queue_is_stored_there_and_leaves_its_queue() {
    let r = start(&[]).await;
    let mut c = client(&r).await;
    r.broker
        .groups
        .upsert_config(petrel_broker::services::groups::GroupConfig::new("GD"))
        .expect("created");
    send_one(&mut c, "ID-doomed", "doomed").await;
    let (status, got) = receive_as(&mut c, "GD", "c1", Some(Duration::from_secs(1))).await;
    assert_eq!((status, got.len()), (Code::Ok, 1));
    let handle = got[0].system_properties.clone().expect("set").receipt_handle.expect("a handle");
    let forward = pb::ForwardMessageToDeadLetterQueueRequest {
        group: resource("GD"),
        topic: resource("T"),
        receipt_handle: handle,
        message_id: "ID-doomed".into(),
        delivery_attempt: 1,
        max_delivery_attempts: 1,
        lite_topic: None,
    };
    let forwarded = c
        .forward_message_to_dead_letter_queue(req(forward, "c1", None))
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(code(forwarded.status.as_ref()), Code::Ok, "{forwarded:?}");
    assert!(r.broker.topics.get("%DLQ%GD").is_some(), "the group's DLQ was made");
    let mut stored = 0;
    for _ in 0..100 {
        stored = r.broker.store.queue_offsets("%DLQ%GD", 0).1;
        if stored > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stored, 1, "the message is in the DLQ");
    // Acked in its own queue: past its 1 s it does not come back.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (status, _) = receive_as(&mut c, "GD", "c1", Some(Duration::from_secs(1))).await;
    assert_eq!(status, Code::MessageNotFound, "a forwarded message came back");
}

/// The scrape's `rocketmq_rpc_latency_milliseconds_count` sample whose labels include all of
/// `labels`.
fn rpc_count(text: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with("rocketmq_rpc_latency_milliseconds_count{"))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn grpc_calls_are_counted_in_rpc_latency_by_method_and_answer_code() {
    let r = start(&[("metricsExporterType", "PROM")]).await;
    let mut c = client(&r).await;
    for id in ["ID-1", "ID-2", "ID-3"] {
        assert_eq!(code(send_one(&mut c, id, "hello").await.status.as_ref()), Code::Ok);
    }
    let (status, _) = receive(&mut c, "NoSuchGroup", Duration::from_secs(30)).await;
    assert_eq!(status, Code::ConsumerGroupNotFound);
    let sources = petrel_broker::metrics::Sources {
        broker: r.broker.clone(),
        servers: Vec::new(),
    };
    let text = petrel_broker::metrics::render(&sources);
    let grpc = "protocol_type=\"grpc\"";
    let sends = [grpc, "request_code=\"send_message\"", "response_code=\"ok\"", "result=\"success\""];
    assert_eq!(rpc_count(&text, &sends), Some(3.0), "{text}");
    let refused = [
        grpc,
        "request_code=\"receive_message\"",
        "response_code=\"consumer_group_not_found\"",
        "is_long_polling=\"true\"",
    ];
    assert_eq!(rpc_count(&text, &refused), Some(1.0), "{text}");
    // Off unless the exporter is: a broker without metrics counts nothing.
    let quiet = start(&[]).await;
    let mut c = client(&quiet).await;
    assert_eq!(code(send_one(&mut c, "ID-4", "hello").await.status.as_ref()), Code::Ok);
    assert!(quiet.broker.stats.traffic.rpc_latency.is_empty());
}
