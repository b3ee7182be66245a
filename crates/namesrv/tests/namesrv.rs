//! Name-server behaviour the captures do not show: several brokers and clusters, unregistering,
//! expiry, topic lists, KV config, bad registrations, unknown codes, oneway requests — and the
//! TCP loop, where one connection's garbage must not disturb another's requests.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

use std::sync::Arc;
use std::time::Duration;

use petrel_namesrv::{NameServer, no_route_remark};
use petrel_protocol::body::{
    ClusterInfo, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicList, TopicRouteData, from_json,
    register_body_crc32, to_json,
};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader};
use petrel_protocol::{DEFAULT_MAX_FRAME_BYTES, RemotingCommand, decode_frame};
use petrel_remoting::{Server, ServerLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn register(cluster: &str, broker: &str, id: i64, addr: &str, topics: &[(&str, i32)]) -> RemotingCommand {
    let body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion::default(),
            topic_config_table: topics.iter().map(|(t, q)| ((*t).to_owned(), TopicConfig::new(t, *q, 6))).collect(),
            ..TopicConfigSerializeWrapper::default()
        },
    };
    let body = to_json(&body).into_bytes();
    let h = RegisterBrokerRequestHeader {
        broker_name: broker.into(),
        broker_addr: addr.into(),
        cluster_name: cluster.into(),
        ha_server_addr: String::new(),
        broker_id: id,
        compressed: Some(false),
        body_crc32: Some(register_body_crc32(&body)),
        ..RegisterBrokerRequestHeader::default()
    };
    RemotingCommand::request(rc::REGISTER_BROKER, 1)
        .with_ext_fields(h.to_ext())
        .with_body(body)
}

fn route_request(topic: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC, 7);
    r.put_ext("topic", topic);
    r
}

#[test]
fn routes_span_brokers_and_follow_unregistration() {
    let ns = NameServer::new();
    for r in [
        register("c1", "broker-a", 0, "10.0.0.1:10911", &[("T", 4), ("A", 1)]),
        register("c1", "broker-a", 1, "10.0.0.2:10911", &[("T", 4)]),
        register("c1", "broker-b", 0, "10.0.0.3:10911", &[("T", 8)]),
        register("c2", "broker-c", 0, "10.0.0.4:10911", &[("C", 2)]),
    ] {
        assert_eq!(ns.handle(&r).unwrap().code, resp::SUCCESS);
    }
    let route = TopicRouteData::from_json(&ns.handle(&route_request("T")).unwrap().body).unwrap();
    assert_eq!(route.queue_datas.len(), 2);
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 2, "master and slave of broker-a");
    assert_eq!(route.queue_datas.iter().map(|q| q.write_queue_nums).sum::<i32>(), 12);

    let info = ClusterInfo::from_json(&ns.handle(&RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 2)).unwrap().body).unwrap();
    assert_eq!(info.cluster_addr_table["c1"], ["broker-a", "broker-b"]);

    let mut by_cluster = RemotingCommand::request(rc::GET_TOPICS_BY_CLUSTER, 3);
    by_cluster.put_ext("cluster", "c2");
    let list: TopicList = from_json(&ns.handle(&by_cluster).unwrap().body).unwrap();
    assert_eq!(list.topic_list, ["C"]);
    let all: TopicList = from_json(
        &ns.handle(&RemotingCommand::request(rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 4))
            .unwrap()
            .body,
    )
    .unwrap();
    assert_eq!(all.topic_list, ["A", "C", "T"]);
    let system: TopicList = from_json(
        &ns.handle(&RemotingCommand::request(rc::GET_SYSTEM_TOPIC_LIST_FROM_NS, 4))
            .unwrap()
            .body,
    )
    .unwrap();
    assert_eq!(
        system.topic_list,
        ["c1", "broker-a", "broker-b", "c2", "broker-c"],
        "each cluster's and each broker's name"
    );
    assert_eq!(
        system.broker_addr.as_deref(),
        Some("10.0.0.1:10911"),
        "a broker to ask for the rest"
    );

    let unreg = UnregisterBrokerRequestHeader {
        broker_name: "broker-b".into(),
        broker_addr: "10.0.0.3:10911".into(),
        cluster_name: "c1".into(),
        broker_id: 0,
    };
    ns.handle(&RemotingCommand::request(rc::UNREGISTER_BROKER, 5).with_ext_fields(unreg.to_ext()));
    let route = TopicRouteData::from_json(&ns.handle(&route_request("T")).unwrap().body).unwrap();
    assert_eq!(route.queue_datas.len(), 1, "broker-b's queues left with it");
    let missing = ns.handle(&route_request("nope")).unwrap();
    assert_eq!(
        (missing.code, missing.remark.as_deref()),
        (resp::TOPIC_NOT_EXIST, Some(no_route_remark("nope").as_str()))
    );

    // everything expires when the brokers go quiet
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(ns.expire_brokers(Duration::from_millis(1)).len(), 3);
    assert_eq!(ns.handle(&route_request("T")).unwrap().code, resp::TOPIC_NOT_EXIST);
}

#[test]
fn bad_requests_get_clear_errors() {
    let ns = NameServer::new();
    let mut bad_crc = register("c", "b", 0, "1.2.3.4:10911", &[("T", 1)]);
    bad_crc.put_ext("bodyCrc32", "12345");
    let a = ns.handle(&bad_crc).unwrap();
    assert_eq!((a.code, a.remark.as_deref()), (resp::SYSTEM_ERROR, Some("crc32 not match")));
    assert_eq!(
        ns.handle(&route_request("T")).unwrap().code,
        resp::TOPIC_NOT_EXIST,
        "nothing was registered"
    );

    let unknown = ns.handle(&RemotingCommand::request(9999, 8)).unwrap();
    assert_eq!(
        (unknown.code, unknown.remark.as_deref()),
        (resp::REQUEST_CODE_NOT_SUPPORTED, Some(" request type 9999 not supported"))
    );
    let missing_topic = ns.handle(&RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC, 9)).unwrap();
    assert_eq!(missing_topic.code, resp::SYSTEM_ERROR);
    assert!(missing_topic.remark.unwrap().contains("topic"));

    let mut oneway = RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 10);
    oneway.mark_oneway();
    assert!(ns.handle(&oneway).is_none(), "oneway requests get no answer");
}

#[test]
fn kv_config_round_trips() {
    let ns = NameServer::new();
    let mut put = RemotingCommand::request(rc::PUT_KV_CONFIG, 1);
    for (k, v) in [("namespace", "ORDER_TOPIC_CONFIG"), ("key", "T"), ("value", "broker-a:4")] {
        put.put_ext(k, v);
    }
    assert_eq!(ns.handle(&put).unwrap().code, resp::SUCCESS);
    let mut get = RemotingCommand::request(rc::GET_KV_CONFIG, 2);
    get.put_ext("namespace", "ORDER_TOPIC_CONFIG");
    get.put_ext("key", "T");
    assert_eq!(ns.handle(&get).unwrap().ext("value"), Some("broker-a:4"));
    // an order-topic config shows in the topic's route
    ns.handle(&register("c", "broker-a", 0, "1.2.3.4:10911", &[("T", 4)]));
    let route = TopicRouteData::from_json(&ns.handle(&route_request("T")).unwrap().body).unwrap();
    assert_eq!(route.order_topic_conf.as_deref(), Some("broker-a:4"));
    let mut del = get.clone();
    del.code = rc::DELETE_KV_CONFIG;
    ns.handle(&del);
    assert_eq!(ns.handle(&get).unwrap().code, resp::QUERY_NOT_FOUND);
}

async fn roundtrip(stream: &mut tokio::net::TcpStream, request: &RemotingCommand) -> RemotingCommand {
    stream.write_all(&request.to_frame().unwrap()).await.unwrap();
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed before the answer");
        buf.extend_from_slice(&chunk[..n]);
        if let Some((cmd, _)) = decode_frame(&buf, DEFAULT_MAX_FRAME_BYTES).unwrap() {
            return cmd;
        }
    }
}

#[tokio::test]
async fn garbage_on_one_connection_does_not_disturb_another() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let ns = Arc::new(NameServer::new());
    ns.handle(&register("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", &[("T", 4)]));
    let _server = Server::start("namesrv", listener, ns, ServerLimits::default()).unwrap();

    let mut good = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert_eq!(roundtrip(&mut good, &route_request("T")).await.code, resp::SUCCESS);

    for garbage in [
        &b"\xff\xff\xff\xffhello"[..],
        b"\x7f\xff\xff\xff",
        b"\x00\x00\x00\x06\x07\x00\x00\x02{}",
    ] {
        let mut bad = tokio::net::TcpStream::connect(addr).await.unwrap();
        bad.write_all(garbage).await.unwrap();
        let mut sink = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), bad.read(&mut sink))
            .await
            .unwrap_or_else(|_| panic!("the connection that sent {garbage:?} was not closed"))
            .unwrap_or(0);
        assert_eq!(n, 0, "the server closes a connection that sent a bad frame");
        assert_eq!(
            roundtrip(&mut good, &route_request("T")).await.code,
            resp::SUCCESS,
            "the other connection still works"
        );
    }
    // half a frame, then a disconnect
    let mut half = tokio::net::TcpStream::connect(addr).await.unwrap();
    half.write_all(&route_request("T").to_frame().unwrap()[..10]).await.unwrap();
    drop(half);
    assert_eq!(roundtrip(&mut good, &route_request("T")).await.code, resp::SUCCESS);
}

#[tokio::test]
async fn a_broker_whose_connection_closes_is_unregistered() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let ns = Arc::new(NameServer::new());
    // Registered in process: no connection, so only expiry or UNREGISTER_BROKER removes it.
    ns.handle(&register("c", "broker-local", 0, "127.0.0.1:20911", &[("L", 1)]));
    let _server = Server::start("namesrv", listener, ns.clone(), ServerLimits::default()).unwrap();

    let mut broker = tokio::net::TcpStream::connect(addr).await.unwrap();
    let answer = roundtrip(&mut broker, &register("c", "broker-tcp", 0, "127.0.0.1:10911", &[("T", 4)])).await;
    assert_eq!(answer.code, resp::SUCCESS);
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert_eq!(roundtrip(&mut client, &route_request("T")).await.code, resp::SUCCESS);

    drop(broker);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while roundtrip(&mut client, &route_request("T")).await.code == resp::SUCCESS {
        assert!(std::time::Instant::now() < deadline, "the route outlived the broker's connection");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        roundtrip(&mut client, &route_request("L")).await.code,
        resp::SUCCESS,
        "a broker registered in process is not tied to any connection"
    );
}
