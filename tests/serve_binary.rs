//! `petrel serve` as a process, over TCP: bad input hurts only the connection that sent it,
//! SIGTERM is a clean shutdown, long polling, offsets across restarts, group notifications, and
//! both header serializations.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

mod common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Client, Petrel, heartbeat, pull, send_header, send_v2};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::CommandHeader;
use petrel_protocol::{RemotingCommand, SerializeType, decode_messages};

fn update_offset(c: &mut Client, group: &str, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    let mut r = RemotingCommand::request(rc::UPDATE_CONSUMER_OFFSET, 0);
    r.put_ext("consumerGroup", group);
    r.put_ext("topic", topic);
    r.put_ext("queueId", queue_id.to_string());
    r.put_ext("commitOffset", offset.to_string());
    c.call(r)
}

fn query_offset(c: &mut Client, group: &str, topic: &str, queue_id: i32) -> RemotingCommand {
    let mut r = RemotingCommand::request(rc::QUERY_CONSUMER_OFFSET, 0);
    r.put_ext("consumerGroup", group);
    r.put_ext("topic", topic);
    r.put_ext("queueId", queue_id.to_string());
    c.call(r)
}

#[test]
fn bad_input_closes_only_the_offending_connection() {
    let petrel = Petrel::start(&[]);
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let port = petrel.broker_port;
    let producer = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(port);
            let mut failures = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) || i < 200 {
                let r = c.call(send_v2("BadInputTopic", -1, "T", i, format!("body {i}").as_bytes()));
                if r.code != resp::SUCCESS {
                    failures.push((i, r.code, r.remark));
                }
                i += 1;
                sent.store(i, Ordering::Relaxed);
            }
            failures
        })
    };
    while sent.load(Ordering::Relaxed) < 20 {
        std::thread::sleep(Duration::from_millis(5));
    }

    // An unknown code: an error answer naming the code; the connection stays usable.
    let mut c = petrel.broker();
    let r = c.call(RemotingCommand::request(9999, 0));
    assert_eq!(r.code, resp::REQUEST_CODE_NOT_SUPPORTED);
    assert!(r.remark.as_deref().unwrap_or("").contains("9999"), "{:?}", r.remark);
    assert_eq!(c.call(RemotingCommand::request(rc::GET_BROKER_RUNTIME_INFO, 0)).code, resp::SUCCESS);

    // A body over maxMessageSize: MESSAGE_ILLEGAL, and the connection stays usable.
    let r = c.call(send_v2("BadInputTopic", 0, "T", 0, &vec![b'x'; 4 * 1024 * 1024 + 1]));
    assert_eq!(r.code, resp::MESSAGE_ILLEGAL, "{:?}", r.remark);
    assert_eq!(c.call(send_v2("BadInputTopic", 0, "T", 0, b"fine")).code, resp::SUCCESS);

    // A header that does not parse: SYSTEM_ERROR naming the field.
    let mut bad = send_v2("BadInputTopic", 0, "T", 0, b"x");
    bad.put_ext("e", "not-a-number");
    let r = c.call(bad);
    assert_eq!(r.code, resp::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or("").contains('e'), "{:?}", r.remark);

    // Garbage bytes: the connection is closed.
    let mut g = petrel.broker();
    g.stream
        .write_all(&[
            0x00, 0x00, 0x00, 0x10, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
        ])
        .unwrap();
    assert!(g.read().is_none(), "garbage closes the connection");

    // A frame claiming 2 GiB: refused from its length word, the connection is closed.
    let mut big = petrel.broker();
    big.stream.write_all(&[0x7F, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x10]).unwrap();
    assert!(big.read().is_none(), "an oversized frame closes the connection");

    // Half a frame, then a disconnect.
    let frame = send_v2("BadInputTopic", 0, "T", 0, b"half").to_frame().unwrap();
    let mut half = petrel.broker();
    half.stream.write_all(&frame[..frame.len() / 2]).unwrap();
    drop(half);

    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let failures = producer.join().unwrap();
    assert!(failures.is_empty(), "the producer on another connection failed: {failures:?}");
    assert!(sent.load(Ordering::Relaxed) >= 200);
    // The broker is still healthy for new connections.
    assert_eq!(
        petrel.broker().call(send_v2("BadInputTopic", 1, "T", 0, b"after")).code,
        resp::SUCCESS
    );
}

#[test]
fn sigterm_flushes_and_a_restart_serves_everything_back() {
    let mut petrel = Petrel::start(&["--set", "flushDiskType=ASYNC_FLUSH"]);
    let mut c = petrel.broker();
    for i in 0..50 {
        let r = c.call(send_v2("RestartTopic", 0, "T", i, format!("message {i}").as_bytes()));
        assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
        assert_eq!(r.ext("queueOffset"), Some(i.to_string().as_str()));
    }
    let unknown = update_offset(&mut c, "G1", "RestartTopic", 0, 20);
    assert_eq!(
        unknown.code,
        resp::SUBSCRIPTION_GROUP_NOT_EXIST,
        "offsets only for groups a client registered: {:?}",
        unknown.remark
    );
    assert_eq!(heartbeat(&mut c, "10.0.0.9@g1", "G1", "RestartTopic").code, resp::SUCCESS);
    assert_eq!(update_offset(&mut c, "G1", "RestartTopic", 0, 20).code, resp::SUCCESS);
    drop(c);
    assert!(
        petrel.data_dir().join("commitlog").join("abort").exists(),
        "a running broker holds the abort marker"
    );
    let status = petrel.terminate();
    assert!(status.success(), "SIGTERM exits 0: {status:?}\n{}", petrel.log());
    assert!(petrel.log().contains("shutdown complete"));
    assert!(
        !petrel.data_dir().join("commitlog").join("abort").exists(),
        "a clean shutdown leaves no abort marker"
    );

    petrel.spawn();
    let recovered = petrel
        .log()
        .lines()
        .rfind(|l| l.contains("commit log recovered"))
        .unwrap()
        .to_owned();
    assert!(recovered.contains("unclean=false"), "{recovered}");
    let mut c = petrel.broker();
    let q = query_offset(&mut c, "G1", "RestartTopic", 0);
    assert_eq!(
        (q.code, q.ext("offset")),
        (resp::SUCCESS, Some("20")),
        "the committed offset survived"
    );
    let mut bodies = Vec::new();
    let mut offset = 0;
    while bodies.len() < 50 {
        let r = c.call(pull("G2", "RestartTopic", 0, offset, 0));
        assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
        let msgs = decode_messages(&r.body).unwrap();
        bodies.extend(msgs.iter().map(|m| String::from_utf8(m.body.to_vec()).unwrap()));
        offset = r.ext("nextBeginOffset").unwrap().parse().unwrap();
    }
    assert_eq!(bodies, (0..50).map(|i| format!("message {i}")).collect::<Vec<_>>());
    // New sends continue the queue where it ended.
    let r = c.call(send_v2("RestartTopic", 0, "T", 50, b"after restart"));
    assert_eq!(r.ext("queueOffset"), Some("50"));
}

#[test]
fn long_polling_answers_when_a_message_arrives_or_the_hold_ends() {
    let petrel = Petrel::start(&[]);
    let mut producer = petrel.broker();
    assert_eq!(producer.call(send_v2("PollTopic", 0, "T", 0, b"first")).code, resp::SUCCESS);
    // Wait for the dispatcher before pulling at the end.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut consumer = petrel.broker();
    loop {
        let r = consumer.call(pull("PG", "PollTopic", 0, 0, 0));
        if r.code == resp::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "the first message never became readable");
    }

    // Held, then woken by a new message.
    let started = Instant::now();
    let opaque = consumer.write(pull("PG", "PollTopic", 0, 1, 20_000));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(producer.call(send_v2("PollTopic", 0, "T", 1, b"second")).code, resp::SUCCESS);
    let r = consumer.answer(opaque);
    assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "woken by the message, not by the hold's end"
    );
    assert_eq!(decode_messages(&r.body).unwrap()[0].body.as_ref(), b"second");

    // Nothing arrives: PULL_NOT_FOUND once the hold ends.
    let started = Instant::now();
    let r = consumer.call(pull("PG", "PollTopic", 0, 2, 500));
    assert_eq!(r.code, resp::PULL_NOT_FOUND);
    assert!(started.elapsed() >= Duration::from_millis(450), "held for its suspend time");
    assert_eq!(r.ext("nextBeginOffset"), Some("2"));
}

#[test]
fn group_membership_changes_are_pushed_to_members() {
    let petrel = Petrel::start(&[]);
    let mut a = petrel.broker();
    let mut b = petrel.broker();
    let r = heartbeat(&mut a, "10.0.0.1@a", "NotifyGroup", "NotifyTopic");
    assert_eq!((r.code, r.ext("IS_SUB_CHANGE")), (resp::SUCCESS, Some("true")));
    let first = a.wait_push(Duration::from_secs(5)).expect("a is told about its own arrival");
    assert_eq!(first.code, rc::NOTIFY_CONSUMER_IDS_CHANGED);
    assert!(first.is_oneway());
    assert_eq!(first.ext("consumerGroup"), Some("NotifyGroup"));

    heartbeat(&mut b, "10.0.0.2@b", "NotifyGroup", "NotifyTopic");
    let pushed = a.wait_push(Duration::from_secs(5)).expect("a is told that b joined");
    assert_eq!(pushed.code, rc::NOTIFY_CONSUMER_IDS_CHANGED);
    let mut list = RemotingCommand::request(rc::GET_CONSUMER_LIST_BY_GROUP, 0);
    list.put_ext("consumerGroup", "NotifyGroup");
    let r = a.call(list.clone());
    assert_eq!(
        std::str::from_utf8(&r.body).unwrap(),
        r#"{"consumerIdList":["10.0.0.1@a","10.0.0.2@b"]}"#
    );

    drop(b);
    let pushed = a.wait_push(Duration::from_secs(5)).expect("a is told that b left");
    assert_eq!(pushed.code, rc::NOTIFY_CONSUMER_IDS_CHANGED);
    let r = a.call(list);
    assert_eq!(std::str::from_utf8(&r.body).unwrap(), r#"{"consumerIdList":["10.0.0.1@a"]}"#);

    // The retry topic the heartbeat created is routable through the embedded name server.
    let mut route = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC, 0);
    route.put_ext("topic", "%RETRY%NotifyGroup");
    assert_eq!(petrel.namesrv().call(route).code, resp::SUCCESS);
}

#[test]
fn binary_and_long_key_sends_are_answered_in_json() {
    let petrel = Petrel::start(&[]);
    let mut c = petrel.broker();
    // SEND_MESSAGE (10) with long keys and a binary ("ROCKETMQ") header, as RocketMQ's benchmark sends.
    let mut r = RemotingCommand::request(rc::SEND_MESSAGE, 0)
        .with_ext_fields(send_header("BinaryTopic", 0, "A", 7).to_ext())
        .with_body(b"binary header".to_vec());
    r.serialize_type = SerializeType::RocketMq;
    let answer = c.call(r);
    assert_eq!(answer.code, resp::SUCCESS, "{:?}", answer.remark);
    assert_eq!(answer.serialize_type, SerializeType::Json);
    assert_eq!(answer.ext("MSG_REGION"), Some("DefaultRegion"));
    let msg_id = answer.ext("msgId").unwrap();
    assert_eq!(msg_id.len(), 32, "an offset message id: {msg_id}");
    assert!(
        answer.ext("transactionId").is_some_and(|t| !t.is_empty()),
        "the broker assigns a UNIQ_KEY"
    );

    // The stored message carries the broker's properties and the request's.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pulled = loop {
        let r = c.call(pull("BG", "BinaryTopic", 0, 0, 0));
        if r.code == resp::SUCCESS {
            break decode_messages(&r.body).unwrap();
        }
        assert!(Instant::now() < deadline);
    };
    let m = &pulled[0];
    assert_eq!(m.tags(), Some("A"));
    assert_eq!(m.properties.get("seq").map(String::as_str), Some("7"));
    assert_eq!(m.properties.get("CLUSTER").map(String::as_str), Some("DefaultCluster"));
    assert_eq!(m.store_host.to_string(), format!("127.0.0.1:{}", petrel.broker_port));
    assert_eq!(m.offset_msg_id(), msg_id);
}

fn cluster_brokers(ns_port: u16) -> String {
    let r = Client::connect(ns_port).call(RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 0));
    String::from_utf8(r.body.to_vec()).unwrap()
}

#[test]
fn brokers_register_with_external_name_servers_and_unregister_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let namesrv = common::NameServer::start(dir.path(), &[]);
    let ns_port = namesrv.port;
    let external = format!("127.0.0.1:{ns_port}");
    let a = Petrel::start(&["--namesrv-addr", &external]);
    let mut b = Petrel::start(&["--namesrv-addr", &external, "--set", "brokerName=broker-b"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = cluster_brokers(ns_port);
        if info.contains(&format!("127.0.0.1:{}", a.broker_port)) && info.contains(&format!("127.0.0.1:{}", b.broker_port)) {
            assert!(info.contains("broker-a") && info.contains("broker-b"), "{info}");
            break;
        }
        assert!(Instant::now() < deadline, "both brokers registered: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A topic created on broker-a is routable through the external name server.
    assert_eq!(a.broker().call(send_v2("ClusterTopic", 0, "T", 0, b"x")).code, resp::SUCCESS);
    let mut route = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC, 0);
    route.put_ext("topic", "ClusterTopic");
    assert_eq!(Client::connect(ns_port).call(route).code, resp::SUCCESS);

    assert!(b.terminate().success());
    let info = cluster_brokers(ns_port);
    assert!(
        !info.contains(&format!("127.0.0.1:{}", b.broker_port)),
        "broker-b unregistered on SIGTERM: {info}"
    );
    assert!(info.contains(&format!("127.0.0.1:{}", a.broker_port)));
    drop(namesrv);
}

/// One HTTP GET over a plain socket: (status line, body).
fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut s, &mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

fn metric_value(text: &str, series: &str) -> f64 {
    let line = text.lines().find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series));
    line.unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .rsplit_once(' ')
        .unwrap()
        .1
        .parse()
        .unwrap()
}

/// `petrel serve` with the Prometheus endpoint on a free loopback port, and that port.
fn start_with_metrics(extra: &[&str]) -> (Petrel, u16) {
    let metrics_port = common::free_port();
    let port_setting = format!("metricsPromExporterPort={metrics_port}");
    let mut args = vec![
        "--set",
        "metricsExporterType=PROM",
        "--set",
        "metricsPromExporterHost=127.0.0.1",
        "--set",
        &port_setting,
    ];
    args.extend_from_slice(extra);
    (Petrel::start(&args), metrics_port)
}

#[test]
fn prometheus_endpoint_counts_what_was_sent() {
    let (petrel, metrics_port) = start_with_metrics(&["--set", "putMessageLock=mutex"]);
    let (status, before) = http_get(metrics_port, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let acquisitions_before = metric_value(&before, "petrel_put_lock_acquisitions_total{kind=\"mutex\"}");
    let mut c = petrel.broker();
    for i in 0..25 {
        let r = c.call(send_v2("MetricsTopic", 0, "T", i, b"0123456789"));
        assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    }
    // A scraper that sends half a request, or garbage, does not stop the next scrape.
    let mut half = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
    half.write_all(b"GET /met").unwrap();
    let (status, _) = http_get(metrics_port, "/nothing-here");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    let (status, after) = http_get(metrics_port, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    drop(half);
    assert_eq!(metric_value(&after, "petrel_messages_put_total"), 25.0);
    assert!(metric_value(&after, "petrel_message_bytes_put_total") >= 250.0);
    let acquisitions = metric_value(&after, "petrel_put_lock_acquisitions_total{kind=\"mutex\"}");
    assert!(
        acquisitions >= acquisitions_before + 25.0,
        "{acquisitions_before} then {acquisitions}"
    );
    assert!(metric_value(&after, "petrel_commitlog_max_offset_bytes") > 0.0);
    assert!(metric_value(&after, "process_resident_memory_bytes") > 0.0);
    assert!(
        petrel.log().contains(&format!("http://127.0.0.1:{metrics_port}/metrics")),
        "{}",
        petrel.log()
    );
}

/// The value of the one sample of `family` (the full sample name) carrying every label of
/// `labels` (`key="value"` each), whatever its other labels.
fn sample_with(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    let matching: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| {
            let set = l
                .split_once('{')
                .and_then(|(_, rest)| rest.rsplit_once('}'))
                .map_or("", |(set, _)| set);
            let set: Vec<&str> = set.split(',').collect();
            labels.iter().all(|want| set.contains(want))
        })
        .collect();
    assert!(matching.len() <= 1, "{family} {labels:?} names several samples: {matching:?}");
    matching.first().map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
}

#[test]
fn rocketmq_metric_families_count_sends_pulls_and_requests_under_rocketmqs_labels() {
    let (petrel, metrics_port) = start_with_metrics(&[
        "--set",
        "metricsLabel=region:eu",
        "--set",
        "metricsInDelta=true",
        "--set",
        "metricsOtelCardinalityLimit=3",
    ]);
    let mut c = petrel.broker();
    for i in 0..5 {
        let r = c.call(send_v2("RmqMetrics", 0, "T", i, b"0123456789"));
        assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    }
    let bodies = common::pull_bodies(&mut c, "RmqMetrics", 0, 0, 5, Duration::from_secs(10));
    assert_eq!(bodies.len(), 5);
    let (_, text) = http_get(metrics_port, "/metrics");
    let topic = [
        "topic=\"RmqMetrics\"",
        "message_type=\"normal\"",
        "is_system=\"false\"",
        "cluster=\"DefaultCluster\"",
        "node_type=\"broker\"",
        "region=\"eu\"",
        "aggregation=\"delta\"",
        "otel_scope_name=\"broker-meter\"",
    ];
    assert_eq!(sample_with(&text, "rocketmq_messages_in_total", &topic), Some(5.0), "{text}");
    let bytes = sample_with(&text, "rocketmq_throughput_in_total", &topic).unwrap();
    assert!(bytes >= 50.0, "{bytes}");
    let sized = sample_with(&text, "rocketmq_message_size_bucket", &[topic[0], "le=\"1024.0\""]);
    assert_eq!(sized, Some(5.0), "five records of under 1 KiB");
    let out = ["topic=\"RmqMetrics\"", "consumer_group=\"BodyReaders\""];
    assert_eq!(sample_with(&text, "rocketmq_messages_out_total", &out), Some(5.0));
    let sends = [
        "request_code=\"send_message_v2\"",
        "response_code=\"success\"",
        "result=\"success\"",
        "protocol_type=\"remoting\"",
        "is_long_polling=\"false\"",
    ];
    assert_eq!(sample_with(&text, "rocketmq_rpc_latency_milliseconds_count", &sends), Some(5.0));
    for family in ["rocketmq_topic_number", "rocketmq_storage_size_bytes", "rocketmq_broker_permission"] {
        assert!(sample_with(&text, family, &[]).is_some_and(|v| v > 0.0), "{family} in {text}");
    }
    assert_eq!(
        sample_with(&text, "rocketmq_consumer_group_number", &[]),
        Some(0.0),
        "a pull makes no group"
    );
    // Past metricsOtelCardinalityLimit (3 label sets a family), new label sets fold into one
    // overflow series and the family stops growing.
    for t in ["RmqMetricsB", "RmqMetricsC", "RmqMetricsD", "RmqMetricsE"] {
        let r = c.call(send_v2(t, 0, "T", 0, b"x"));
        assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    }
    let (_, text) = http_get(metrics_port, "/metrics");
    let series = text.lines().filter(|l| l.starts_with("rocketmq_messages_in_total{")).count();
    assert_eq!(series, 4, "three label sets and the overflow series:\n{text}");
    let overflow = sample_with(&text, "rocketmq_messages_in_total", &["otel_metric_overflow=\"true\""]);
    assert_eq!(overflow, Some(2.0), "{text}");
}

/// Whether something accepts TCP connections at `ip:port` (within a second).
fn accepts(ip: [u8; 4], port: u16) -> bool {
    let addr = std::net::SocketAddr::from((ip, port));
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

#[test]
fn bind_address_keeps_the_broker_to_one_address_and_metrics_default_to_loopback() {
    // 127.0.0.1 and 127.0.0.2 are both this host; a socket bound to one is not reached at the
    // other, so they stand for two interfaces.
    let metrics_port = common::free_port();
    let metrics = format!("metricsPromExporterPort={metrics_port}");
    let petrel = Petrel::start(&[
        "--set",
        "bindAddress=127.0.0.1",
        "--set",
        "metricsExporterType=PROM",
        "--set",
        &metrics,
    ]);
    assert!(accepts([127, 0, 0, 1], petrel.broker_port));
    assert!(!accepts([127, 0, 0, 2], petrel.broker_port), "bound to 127.0.0.1 only");
    assert!(accepts([127, 0, 0, 1], petrel.ha_port), "the HA port too");
    assert!(!accepts([127, 0, 0, 2], petrel.ha_port), "the HA port on 127.0.0.1 only");
    assert!(accepts([127, 0, 0, 1], metrics_port), "metrics on loopback by default");
    assert!(!accepts([127, 0, 0, 2], metrics_port), "and on loopback only");
    let mut c = petrel.broker();
    let r = c.call(send_v2("BoundTopic", 0, "T", 0, b"x"));
    assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    drop(petrel);
    let everywhere = Petrel::start(&[]);
    assert!(
        accepts([127, 0, 0, 2], everywhere.broker_port),
        "every interface by default, as RocketMQ"
    );
}

fn runtime_info() -> RemotingCommand {
    RemotingCommand::request(rc::GET_BROKER_RUNTIME_INFO, 0)
}

/// A new connection is served (the broker notices a close asynchronously: retry a while).
fn served_after_retries(port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let mut c = Client::connect(port);
        let opaque = c.write(runtime_info());
        if let Some(answer) = c.read() {
            return answer.opaque == opaque && answer.code == resp::SUCCESS;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn connections_beyond_max_connections_are_closed_on_arrival_and_the_others_kept() {
    let (petrel, metrics_port) = start_with_metrics(&["--set", "maxConnections=3"]);
    let mut held: Vec<Client> = (0..3).map(|_| petrel.broker()).collect();
    for c in &mut held {
        assert_eq!(c.call(runtime_info()).code, resp::SUCCESS);
    }
    // The fourth gets no answer: it is closed as it arrives.
    let mut extra = petrel.broker();
    extra.write(runtime_info());
    assert!(extra.read().is_none(), "a connection beyond maxConnections is closed");
    // The three keep being served, sends included.
    for (i, c) in held.iter_mut().enumerate() {
        let r = c.call(send_v2("MaxConnTopic", 0, "T", i, b"still served"));
        assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    }
    let (_, text) = http_get(metrics_port, "/metrics");
    assert!(
        metric_value(&text, "petrel_connections_refused_total{server=\"broker\"}") >= 1.0,
        "{text}"
    );
    assert!(
        petrel.log().contains("the connection limit is reached"),
        "the refusal is logged: {}",
        petrel.log()
    );
    // A slot freed is a slot a newcomer gets.
    drop(held.pop());
    assert!(
        served_after_retries(petrel.broker_port),
        "a new connection is taken once one closed"
    );
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout_and_busy_ones_are_kept() {
    let petrel = Petrel::start(&["--set", "serverChannelMaxIdleTimeSeconds=1"]);
    let mut idle = petrel.broker();
    assert_eq!(idle.call(runtime_info()).code, resp::SUCCESS);
    let idle_since = Instant::now();
    let mut busy = petrel.broker();
    let busy_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < busy_until {
        assert_eq!(
            busy.call(runtime_info()).code,
            resp::SUCCESS,
            "a connection with traffic stays open"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The idle one was closed by now: its read sees the close, not a timeout.
    assert!(idle.read().is_none(), "the idle connection is closed");
    let waited = idle_since.elapsed();
    assert!(waited >= Duration::from_secs(1), "not before the timeout: {waited:?}");
    assert!(waited < Duration::from_secs(25), "closed, not timed out on our side: {waited:?}");
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

/// SEND_MESSAGE_V2 to queue 0 of `topic` with `extra` encoded properties added; must succeed.
fn send_with(c: &mut Client, topic: &str, seq: usize, extra: &str, body: &str) {
    let mut h = send_header(topic, 0, "A", seq);
    h.properties = Some(format!("{}{extra}", h.properties.unwrap()));
    let v2: petrel_protocol::header::SendMessageRequestHeaderV2 = h.into();
    let send = RemotingCommand::request(rc::SEND_MESSAGE_V2, 0)
        .with_ext_fields(v2.to_ext())
        .with_body(body.as_bytes().to_vec());
    let a = c.call(send);
    assert_eq!(a.code, resp::SUCCESS, "{:?}", a.remark);
}

/// Delayed messages (`DELAY` level 2, 3 s here) are kept through kill -9: after the restart each
/// reaches its queue once its delay has passed, in order, and after a second kill -9 none is
/// delivered again (the level's progress is on disk).
#[test]
fn delayed_messages_survive_kill_9_and_arrive_once_after_their_delay() {
    let mut petrel = Petrel::start(&["--set", "messageDelayLevel=1s 3s"]);
    let mut c = petrel.broker();
    let sent_ms = now_ms();
    for i in 0..5 {
        send_with(&mut c, "Delayed", i, "DELAY\u{1}2\u{2}", &format!("d{i}"));
    }
    let early = c.call(pull("Early", "Delayed", 0, 0, 0));
    assert_ne!(early.code, resp::SUCCESS, "a delayed message was readable at once");
    petrel.kill();
    petrel.spawn();

    let mut c = petrel.broker();
    let bodies = common::pull_bodies(&mut c, "Delayed", 0, 0, 5, Duration::from_secs(20));
    assert_eq!(bodies, ["d0", "d1", "d2", "d3", "d4"]);
    let got = c.call(pull("Check", "Delayed", 0, 0, 0));
    for m in decode_messages(&got.body).unwrap() {
        assert!(
            m.store_timestamp >= sent_ms + 3000,
            "stored in its queue {} ms after the send, before its 3 s delay",
            m.store_timestamp - sent_ms
        );
    }
    // The progress is written within a tick of the delivery; then a second crash repeats nothing.
    std::thread::sleep(Duration::from_millis(500));
    petrel.kill();
    petrel.spawn();
    std::thread::sleep(Duration::from_millis(1500));
    let mut c = petrel.broker();
    let after = c.call(pull("Check", "Delayed", 0, 5, 0));
    assert_ne!(after.code, resp::SUCCESS, "delivered again after the restart");
}

/// Timer messages across kill -9: those delivered before the crash are not delivered again, the
/// others arrive after it, each no sooner than its time, in the order of their times.
#[test]
fn timer_messages_survive_kill_9_and_arrive_once_in_due_order() {
    let mut petrel = Petrel::start(&[]);
    let mut c = petrel.broker();
    let sent_ms = now_ms();
    let delays_ms = [3000, 600, 2600, 800, 4000, 1200];
    for (i, delay_ms) in delays_ms.iter().enumerate() {
        send_with(&mut c, "Timed", i, &format!("TIMER_DELAY_MS\u{1}{delay_ms}\u{2}"), &format!("t{i}"));
    }
    let first = common::pull_bodies(&mut c, "Timed", 0, 0, 3, Duration::from_secs(10));
    assert_eq!(first, ["t1", "t3", "t5"], "the three due first, in the order of their times");
    std::thread::sleep(Duration::from_millis(300));
    petrel.kill();
    petrel.spawn();

    let mut c = petrel.broker();
    let bodies = common::pull_bodies(&mut c, "Timed", 0, 0, 6, Duration::from_secs(20));
    assert_eq!(bodies, ["t1", "t3", "t5", "t2", "t0", "t4"]);
    let got = c.call(pull("Check", "Timed", 0, 0, 0));
    for m in decode_messages(&got.body).unwrap() {
        let i: usize = String::from_utf8_lossy(&m.body)[1..].parse().unwrap();
        assert!(
            m.store_timestamp >= sent_ms + delays_ms[i],
            "t{i} stored in its queue {} ms after the send, before its {} ms",
            m.store_timestamp - sent_ms,
            delays_ms[i]
        );
    }
    // The checkpoint is written within a tick of the delivery; then a second crash repeats nothing.
    std::thread::sleep(Duration::from_millis(500));
    petrel.kill();
    petrel.spawn();
    std::thread::sleep(Duration::from_millis(1500));
    let mut c = petrel.broker();
    let after = c.call(pull("Check", "Timed", 0, 6, 0));
    assert_ne!(after.code, resp::SUCCESS, "delivered again after the restart");
}

/// QUERY_MESSAGE for `key` in `topic`, over all time: the bodies found, newest first, or the
/// answer's code when nothing was.
fn query(c: &mut Client, topic: &str, key: &str, unique: bool, max_num: i32) -> Result<Vec<String>, i32> {
    let h = petrel_protocol::header::QueryMessageRequestHeader {
        topic: topic.into(),
        key: key.into(),
        max_num,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
        unique_key_query: Some(unique),
    };
    let a = c.call(RemotingCommand::request(rc::QUERY_MESSAGE, 0).with_ext_fields(h.to_ext()));
    let index_end: i64 = a.ext("indexLastUpdatePhyoffset").unwrap().parse().unwrap();
    assert!(index_end > 0, "the answer says where the index stands");
    if a.code != resp::SUCCESS {
        return Err(a.code);
    }
    Ok(decode_messages(&a.body)
        .unwrap()
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect())
}

/// Messages are found by each of their keys and by their unique key, newest first, and still
/// after kill -9, together with those sent after it.
#[test]
fn messages_are_found_by_key_and_unique_key_across_kill_9() {
    let mut petrel = Petrel::start(&[]);
    let send = |c: &mut Client, i: usize| {
        let keys = format!("KEYS\u{1}order-{} all\u{2}UNIQ_KEY\u{1}UNIQ{i:04}\u{2}", i % 2);
        send_with(c, "Keyed", i, &keys, &format!("k{i}"));
    };
    let mut c = petrel.broker();
    for i in 0..5 {
        send(&mut c, i);
    }
    c.call(send_v2("Other", 0, "A", 0, b"o"));
    // The index is built by the dispatcher, a moment after the send is answered: waits for `n`.
    let found = |c: &mut Client, key: &str, unique: bool, n: usize| -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(bodies) = query(c, "Keyed", key, unique, 64)
                && bodies.len() >= n
            {
                return bodies;
            }
            assert!(Instant::now() < deadline, "{key} never found");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert_eq!(found(&mut c, "order-0", false, 3), ["k4", "k2", "k0"]);
    assert_eq!(found(&mut c, "UNIQ0003", true, 1), ["k3"]);
    assert_eq!(
        query(&mut c, "Keyed", "UNIQ0003", false, 64),
        Err(resp::QUERY_NOT_FOUND),
        "not one of its KEYS"
    );
    assert_eq!(
        query(&mut c, "Other", "order-0", false, 64),
        Err(resp::QUERY_NOT_FOUND),
        "another topic"
    );
    assert_eq!(
        query(&mut c, "Keyed", "all", false, 2),
        Ok(vec!["k4".to_owned(), "k3".to_owned()]),
        "at most maxNum"
    );
    petrel.kill();
    petrel.spawn();

    let mut c = petrel.broker();
    send(&mut c, 6);
    assert_eq!(
        found(&mut c, "order-0", false, 4),
        ["k6", "k4", "k2", "k0"],
        "each once, the old ones too"
    );
    assert_eq!(found(&mut c, "UNIQ0001", true, 1), ["k1"]);
}

/// DELETE_TOPIC_IN_BROKER removes the topic's consume-queue files with its config; a name that
/// would lead out of the store's directories touches nothing.
#[test]
fn deleting_a_topic_removes_its_consume_queue_files_and_nothing_else() {
    let petrel = Petrel::start(&[]);
    let mut c = petrel.broker();
    for (topic, queue_id) in [("Doomed", 0), ("Doomed", 1), ("Kept", 0)] {
        assert_eq!(c.call(send_v2(topic, queue_id, "A", 0, b"x")).code, resp::SUCCESS);
    }
    let cq = petrel.data_dir().join("consumequeue");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(cq.join("Doomed").join("1").exists() && cq.join("Kept").exists()) {
        assert!(Instant::now() < deadline, "consume queues never written");
        std::thread::sleep(Duration::from_millis(20));
    }
    let delete = |c: &mut Client, topic: &str| {
        let h = petrel_protocol::header::DeleteTopicRequestHeader { topic: topic.into() };
        c.call(RemotingCommand::request(rc::DELETE_TOPIC_IN_BROKER, 0).with_ext_fields(h.to_ext()))
    };
    assert_eq!(delete(&mut c, "Doomed").code, resp::SUCCESS);
    assert!(!cq.join("Doomed").exists(), "the topic's consume-queue directory is gone");
    for name in ["..", ".", "../consumequeue", "Kept/../.."] {
        assert_eq!(delete(&mut c, name).code, resp::SUCCESS, "{name}: not a topic, nothing to delete");
    }
    assert!(cq.join("Kept").join("0").exists(), "other topics keep theirs");
    assert_eq!(common::pull_bodies(&mut c, "Kept", 0, 0, 1, Duration::from_secs(5)), ["x"]);
    let gone = c.call(pull("G", "Doomed", 0, 0, 0));
    assert_ne!(gone.code, resp::SUCCESS, "a deleted topic serves nothing");
}

/// A half message of producer group `PG`, answered with (queue offset, commit-log offset).
fn send_half(c: &mut Client, topic: &str, body: &str) -> (i64, i64) {
    let mut h = send_header(topic, 0, "A", 0);
    h.producer_group = "PG".into();
    h.sys_flag = petrel_protocol::message::sys_flag::TRANSACTION_PREPARED_TYPE;
    h.properties = Some(format!("{}TRAN_MSG\u{1}true\u{2}PGROUP\u{1}PG\u{2}", h.properties.unwrap()));
    let v2: petrel_protocol::header::SendMessageRequestHeaderV2 = h.into();
    let a = c.call(
        RemotingCommand::request(rc::SEND_MESSAGE_V2, 0)
            .with_ext_fields(v2.to_ext())
            .with_body(body.as_bytes().to_vec()),
    );
    assert_eq!(a.code, resp::SUCCESS, "{:?}", a.remark);
    let queue_offset = a.ext("queueOffset").unwrap().parse().unwrap();
    let (_, offset) = petrel_protocol::msgid::decode_offset_msg_id(a.ext("msgId").unwrap()).unwrap();
    (queue_offset, offset)
}

/// END_TRANSACTION commit, as a request that wants an answer.
fn commit(c: &mut Client, (queue_offset, offset): (i64, i64)) -> RemotingCommand {
    let h = petrel_protocol::header::EndTransactionRequestHeader {
        topic: None,
        producer_group: "PG".into(),
        tran_state_table_offset: queue_offset,
        commit_log_offset: offset,
        commit_or_rollback: petrel_protocol::message::sys_flag::TRANSACTION_COMMIT_TYPE,
        from_transaction_check: Some(true),
        msg_id: String::new(),
        transaction_id: None,
        bname: None,
    };
    c.call(RemotingCommand::request(rc::END_TRANSACTION, 0).with_ext_fields(h.to_ext()))
}

/// Transactions across kill -9: a half message sent before the crash can be committed after it,
/// and a commit repeated after a crash (a check answered twice) stores nothing more.
#[test]
fn transactions_survive_kill_9_and_commit_once() {
    let mut petrel = Petrel::start(&[]);
    let mut c = petrel.broker();
    let first = send_half(&mut c, "TxCrash", "t0");
    assert_eq!(commit(&mut c, first).code, resp::SUCCESS);
    let second = send_half(&mut c, "TxCrash", "t1");
    assert_eq!(common::pull_bodies(&mut c, "TxCrash", 0, 0, 1, Duration::from_secs(10)), ["t0"]);
    petrel.kill();
    petrel.spawn();

    let mut c = petrel.broker();
    assert_eq!(commit(&mut c, first).code, resp::SUCCESS, "a repeated answer is accepted");
    assert_eq!(commit(&mut c, second).code, resp::SUCCESS);
    assert_eq!(
        common::pull_bodies(&mut c, "TxCrash", 0, 0, 2, Duration::from_secs(10)),
        ["t0", "t1"]
    );
    std::thread::sleep(Duration::from_millis(500));
    let after = c.call(pull("Check", "TxCrash", 0, 2, 0));
    assert_ne!(after.code, resp::SUCCESS, "a transaction was committed twice");
    let bad = commit(&mut c, (first.0 + 7, first.1));
    assert_eq!(bad.code, resp::SYSTEM_ERROR);
    assert!(bad.remark.unwrap_or_default().contains("state table offset wrong"));
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// 2,000 connections each send the start of a frame whose length word claims 8 MiB — 256 KiB of
/// it, then nothing. A buffer grows only with what arrives, and all connections' unfinished
/// frames share one budget (16 MiB here): the oldest are closed, the broker's memory stays
/// near the budget instead of the 500 MiB offered, and a well-behaved client is served.
#[test]
fn two_thousand_connections_trickling_large_frames_stay_within_the_frame_budget() {
    const BUDGET: u64 = 16 << 20;
    const CLAIMED: usize = 8 << 20;
    let petrel = Petrel::start(&[
        "--set",
        &format!("frameMaxLength={CLAIMED}"),
        "--set",
        &format!("partialFrameBudgetBytes={BUDGET}"),
    ]);
    let mut c = petrel.broker();
    assert_eq!(c.call(send_v2("TrickleTopic", 0, "T", 0, b"before")).code, resp::SUCCESS);
    let base = rss_bytes(petrel.pid());
    let mut start = Vec::with_capacity(256 << 10);
    start.extend_from_slice(&(i32::try_from(CLAIMED).expect("8 MiB fits a frame's length field") - 4).to_be_bytes());
    start.extend_from_slice(&16u32.to_be_bytes());
    start.resize(256 << 10, b'x');
    let (mut open, mut peak) = (Vec::new(), base);
    for i in 0..2000 {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", petrel.broker_port)) else {
            continue;
        };
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        // A connection the broker already closed refuses the rest: that is the point.
        let _ = s.write_all(&start);
        open.push(s);
        if i % 100 == 99 {
            peak = peak.max(rss_bytes(petrel.pid()));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    peak = peak.max(rss_bytes(petrel.pid()));
    let grown = peak.saturating_sub(base);
    println!(
        "2,000 trickling connections: the broker grew by {} MiB (budget {} MiB)",
        grown >> 20,
        BUDGET >> 20
    );
    assert!(
        grown < BUDGET + (96 << 20),
        "the broker grew by {} MiB holding unfinished frames (budget {} MiB, 500 MiB offered)",
        grown >> 20,
        BUDGET >> 20
    );
    assert!(
        petrel.log().contains("unfinished frames over the budget"),
        "no connection was closed for the budget"
    );
    let r = c.call(send_v2("TrickleTopic", 0, "T", 1, b"after"));
    assert_eq!(r.code, resp::SUCCESS, "a well-behaved client is served beside them");
    drop(open);
}

/// A heartbeat of one consumer per group in `groups`, subscribed to all of `topic`.
fn heartbeat_of_groups(client_id: &str, groups: &[String], topic: &str) -> RemotingCommand {
    let consumers: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                r#"{{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"{g}","messageModel":"CLUSTERING","subscriptionDataSet":[{{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"{topic}"}}],"unitMode":false}}"#
            )
        })
        .collect();
    let body = format!(
        r#"{{"clientID":"{client_id}","consumerDataSet":[{}],"heartbeatFingerprint":0,"producerDataSet":[],"withoutSub":false}}"#,
        consumers.join(",")
    );
    RemotingCommand::request(rc::HEART_BEAT, 0).with_body(body.into_bytes())
}

/// What the well-behaved clients saw over one window.
#[derive(Debug, Default)]
struct Window {
    sent_ok: usize,
    consumed: usize,
    busy: usize,
}

/// A producer sending to `Good` queue 0 at 100 messages a second (open loop: it never bursts to
/// catch up) and a consumer of `group` long-polling the same queue, for `secs` seconds.
fn well_behaved(port: u16, group: &str, secs: u64) -> Window {
    let mut consumer = Client::connect(port);
    assert_eq!(heartbeat(&mut consumer, "good-consumer", group, "Good").code, resp::SUCCESS);
    let from = {
        let mut r = RemotingCommand::request(rc::GET_MAX_OFFSET, 0);
        r.put_ext("topic", "Good");
        r.put_ext("queueId", "0");
        consumer.call(r).ext("offset").unwrap().parse::<i64>().unwrap()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (busy, consumed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let reader = {
        let (stop, busy, consumed, group) = (stop.clone(), busy.clone(), consumed.clone(), group.to_owned());
        std::thread::spawn(move || {
            let mut offset = from;
            while !stop.load(Ordering::Acquire) {
                let r = consumer.call(pull(&group, "Good", 0, offset, 500));
                match r.code {
                    resp::SUCCESS => {
                        consumed.fetch_add(decode_messages(&r.body).unwrap().len(), Ordering::Relaxed);
                        offset = r.ext("nextBeginOffset").unwrap().parse().unwrap();
                    }
                    resp::SYSTEM_BUSY => {
                        busy.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    _ => {}
                }
            }
        })
    };
    let mut producer = Client::connect(port);
    let mut w = Window::default();
    let started = Instant::now();
    for i in 0..(usize::try_from(secs).expect("the test's length in seconds fits a usize") * 100) {
        let due = started + Duration::from_millis(i as u64 * 10);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        match producer.call(send_v2("Good", 0, "T", i, b"good")).code {
            resp::SUCCESS => w.sent_ok += 1,
            resp::SYSTEM_BUSY => w.busy += 1,
            other => panic!("the good producer got code {other}"),
        }
    }
    // The last messages' long poll answers within its hold.
    let deadline = Instant::now() + Duration::from_secs(5);
    while consumed.load(Ordering::Relaxed) < w.sent_ok && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Release);
    reader.join().unwrap();
    w.consumed = consumed.load(Ordering::Relaxed);
    w.busy += busy.load(Ordering::Relaxed);
    w
}

/// One abusive client (from 127.0.0.2) creates groups by the hundred, commits offsets for queues
/// that do not exist, holds every pull it can and keeps hundreds of SYNC_FLUSH sends in flight;
/// a well-behaved producer and consumer (from 127.0.0.1) keep their rate within 10% and never
/// see SYSTEM_BUSY, and their new group is created. The pools are small here so that the abuser
/// can fill them without its share.
#[test]
fn an_abusive_client_gets_its_share_and_well_behaved_clients_keep_their_rate() {
    let petrel = Petrel::start(&[
        "--set",
        "flushDiskType=SYNC_FLUSH",
        "--set",
        "maxLongPollWaiters=2048",
        "--set",
        "maxLongPollWaitersPerClient=512",
        "--set",
        "maxDurabilityWaiters=256",
        "--set",
        "maxDurabilityWaitersPerClient=64",
        "--set",
        "maxGroups=256",
        "--set",
        "maxGroupsCreatedPerClient=32",
    ]);
    let port = petrel.broker_port;
    let mut admin = petrel.broker();
    assert_eq!(admin.call(send_v2("Good", 0, "T", 0, b"creates the topic")).code, resp::SUCCESS);
    assert_eq!(admin.call(send_v2("Idle", 0, "T", 0, b"creates the topic")).code, resp::SUCCESS);
    let alone = well_behaved(port, "good-a", 4);

    // Groups: one heartbeat naming 300 new ones.
    let mut abuser = Client::connect_from([127, 0, 0, 2], port);
    let groups: Vec<String> = (0..300).map(|i| format!("abuse-{i}")).collect();
    let r = abuser.call(heartbeat_of_groups("abuser", &groups, "Idle"));
    assert_ne!(r.code, resp::SUCCESS, "300 new groups from one client");
    assert!(
        r.remark.clone().unwrap_or_default().contains("already created 32"),
        "{:?}",
        r.remark
    );
    // Offsets: a queue the topic lacks.
    let mut commit = RemotingCommand::request(rc::UPDATE_CONSUMER_OFFSET, 0);
    commit.put_ext("consumerGroup", "abuse-0");
    commit.put_ext("topic", "Good");
    commit.put_ext("queueId", "1000000");
    commit.put_ext("commitOffset", "1");
    assert_eq!(abuser.call(commit).code, resp::INVALID_PARAMETER);
    // Pulls: 4 connections, 512 held pulls each, on a topic that stays empty.
    let mut holders = Vec::new();
    let mut refused = 0;
    for _ in 0..4 {
        let mut c = Client::connect_from([127, 0, 0, 2], port);
        let opaques: Vec<i32> = (0..512).map(|_| c.write(pull("abuse-0", "Idle", 0, 1, 20_000))).collect();
        std::thread::sleep(Duration::from_millis(200));
        c.stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        while let Some(r) = c.read() {
            refused += usize::from(r.code == resp::SYSTEM_BUSY);
        }
        holders.push((c, opaques));
    }
    assert!(
        refused >= 3 * 512 - 8,
        "the abuser held more than its share: {refused} of 2048 refused"
    );
    // Sends: 4 connections with 128 SYNC_FLUSH sends in flight each, for the whole window.
    let stop = Arc::new(AtomicBool::new(false));
    let abuse_busy = Arc::new(AtomicUsize::new(0));
    let blasters: Vec<_> = (0..4)
        .map(|k| {
            let (stop, abuse_busy) = (stop.clone(), abuse_busy.clone());
            std::thread::spawn(move || {
                let mut c = Client::connect_from([127, 0, 0, 2], port);
                let body = vec![b'a'; 512];
                for i in 0..128 {
                    c.write(send_v2("Abuse", k, "T", i, &body));
                }
                let mut i = 128;
                while !stop.load(Ordering::Acquire) {
                    let Some(r) = c.read() else { break };
                    abuse_busy.fetch_add(usize::from(r.code == resp::SYSTEM_BUSY), Ordering::Relaxed);
                    c.write(send_v2("Abuse", k, "T", i, &body));
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let beside = well_behaved(port, "good-b", 4);
    stop.store(true, Ordering::Release);
    for b in blasters {
        b.join().unwrap();
    }
    println!(
        "alone {alone:?}, beside the abuser {beside:?}; abuser's sends refused {}",
        abuse_busy.load(Ordering::Relaxed)
    );
    assert!(
        abuse_busy.load(Ordering::Relaxed) > 0,
        "the abuser's sends were never held to its share"
    );
    assert_eq!((alone.busy, beside.busy), (0, 0), "a well-behaved client saw SYSTEM_BUSY");
    assert!(
        beside.sent_ok * 10 >= alone.sent_ok * 9 && beside.consumed * 10 >= alone.consumed * 9,
        "the well-behaved clients lost more than 10%: alone {alone:?}, beside {beside:?}"
    );
    assert_eq!(beside.consumed, beside.sent_ok, "every message sent beside the abuser consumed");
    drop(holders);
}

#[test]
fn an_admins_question_for_a_remoting_consumer_is_forwarded_and_its_answer_returned() {
    let petrel = Petrel::start(&[]);
    let mut consumer = petrel.broker();
    let mut admin = petrel.broker();
    let asked = |jstack: &str| {
        let mut r = RemotingCommand::request(rc::GET_CONSUMER_RUNNING_INFO, 0);
        r.put_ext("consumerGroup", "AskedGroup");
        r.put_ext("clientId", "10.0.0.9@asked");
        r.put_ext("jstackEnable", jstack);
        r
    };
    let offline = admin.call(asked("false"));
    assert_eq!(offline.code, resp::SYSTEM_ERROR);
    assert_eq!(
        offline.remark.as_deref(),
        Some("The Consumer <AskedGroup> <10.0.0.9@asked> not online")
    );

    heartbeat(&mut consumer, "10.0.0.9@asked", "AskedGroup", "AskedTopic");
    // The consumer takes the forwarded question (after its group's membership notice) and answers.
    let next_question = |c: &mut Client| loop {
        let pushed = c.wait_push(Duration::from_secs(10)).expect("the question is forwarded");
        if pushed.code == rc::GET_CONSUMER_RUNNING_INFO {
            return pushed;
        }
    };
    let opaque = admin.write(asked("true"));
    let question = next_question(&mut consumer);
    assert!(!question.is_oneway(), "the broker waits for the answer");
    assert_eq!(question.ext("consumerGroup"), Some("AskedGroup"));
    assert_eq!(question.ext("clientId"), Some("10.0.0.9@asked"));
    assert_eq!(question.ext("jstackEnable"), Some("true"));
    let info = br#"{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"jstack":"main"}"#;
    consumer.reply(RemotingCommand::response_to(&question, resp::SUCCESS).with_body(info.to_vec()));
    let answered = admin.answer(opaque);
    assert_eq!(answered.code, resp::SUCCESS, "{:?}", answered.remark);
    assert_eq!(&answered.body[..], &info[..], "the client's answer, as it is");

    // A consumer that keeps silent: CONSUME_MSG_TIMEOUT, as RocketMQ's broker answers.
    let opaque = admin.write(asked("false"));
    let _unanswered = next_question(&mut consumer);
    let timed_out = admin.answer(opaque);
    assert_eq!(timed_out.code, resp::CONSUME_MSG_TIMEOUT, "{:?}", timed_out.remark);
    assert!(
        timed_out
            .remark
            .as_deref()
            .is_some_and(|r| r.starts_with("consumer <AskedGroup> <10.0.0.9@asked> Timeout")),
        "{:?}",
        timed_out.remark
    );
}
