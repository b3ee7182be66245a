//! Access control and TLS through the real binary over TCP: a name server that refuses unsigned
//! broker registrations, a broker that refuses unsigned and unauthorized requests, closes a
//! connection at its cap of failed authentications, keeps its users across a restart, and an
//! enforcing TLS port that serves no plain-text request. The official clients' side (the Java
//! client's AclClientRPCHook and setUseTLS, mqadmin's user and ACL commands) is in
//! scripts/interop-clients.sh.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

mod common;

use std::time::{Duration, Instant};

use common::{Client, Petrel, send_v2};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};

const ROOT: &str = r#"initAuthenticationUser={"username":"root","password":"root-secret"}"#;
const INNER: &str = r#"innerClientAuthenticationCredentials={"accessKey":"broker","secretKey":"broker-secret"}"#;

fn signed(mut r: RemotingCommand, user: &str, secret: &str) -> RemotingCommand {
    petrel_auth::sign(&mut r, user, secret);
    r
}

fn remark(r: &RemotingCommand) -> String {
    r.remark.clone().unwrap_or_default()
}

fn cluster_info(port: u16) -> String {
    let r = Client::connect(port).call(RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 0));
    String::from_utf8(r.body.to_vec()).unwrap()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_name_server_with_authentication_takes_registrations_only_from_signed_brokers() {
    let ns_port = common::free_port();
    let mut namesrv = std::process::Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["namesrv", "--listen", &format!("127.0.0.1:{ns_port}")])
        .args(["--set", "authenticationEnabled=true", "--set", INNER])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the name server", || std::net::TcpStream::connect(("127.0.0.1", ns_port)).is_ok());
    let external = format!("127.0.0.1:{ns_port}");
    let signed_broker = Petrel::start(&["--namesrv-addr", &external, "--set", INNER]);
    let unsigned_broker = Petrel::start(&["--namesrv-addr", &external, "--set", "brokerName=broker-x"]);
    wait_until("the signed broker's registration", || {
        cluster_info(ns_port).contains(&format!("127.0.0.1:{}", signed_broker.broker_port))
    });
    wait_until("the unsigned broker's refusal in its log", || {
        unsigned_broker.log().contains("name server refused registration")
    });
    let info = cluster_info(ns_port);
    assert!(!info.contains("broker-x"), "an unsigned broker was registered: {info}");
    assert!(unsigned_broker.log().contains("code=16"), "{}", unsigned_broker.log());

    // A forged unregistration of the signed broker is refused, and its route stays.
    let mut c = Client::connect(ns_port);
    let mut forged = RemotingCommand::request(rc::UNREGISTER_BROKER, 0);
    for (k, v) in [
        ("brokerName", "broker-a"),
        ("brokerAddr", &format!("127.0.0.1:{}", signed_broker.broker_port)),
        ("clusterName", "DefaultCluster"),
        ("brokerId", "0"),
    ] {
        forged.put_ext(k, v);
    }
    let r = c.call(forged.clone());
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(remark(&r).contains("not signed"), "{}", remark(&r));
    let r = c.call(signed(forged.clone(), "broker", "wrong"));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(cluster_info(ns_port).contains(&format!("127.0.0.1:{}", signed_broker.broker_port)));
    // Deleting a topic's routes is a write too; reads stay open.
    let mut delete = RemotingCommand::request(rc::DELETE_TOPIC_IN_NAMESRV, 0);
    delete.put_ext("topic", "TBW102");
    assert_eq!(c.call(delete).code, resp::NO_PERMISSION);
    // The broker's own signed unregistration (SIGTERM) is taken.
    let mut signed_broker = signed_broker;
    assert!(signed_broker.terminate().success());
    assert!(!cluster_info(ns_port).contains(&format!("127.0.0.1:{}", signed_broker.broker_port)));
    let _ = namesrv.kill();
    let _ = namesrv.wait();
}

#[test]
fn a_broker_with_acl_refuses_what_no_policy_allows_caps_failed_logins_and_keeps_users() {
    let mut p = Petrel::start(&[
        "--set",
        "authenticationEnabled=true",
        "--set",
        "authorizationEnabled=true",
        "--set",
        "maxAuthenticationFailuresPerConnection=3",
        "--set",
        ROOT,
    ]);
    let mut c = p.broker();
    let r = c.call(send_v2("AclTopic", 0, "T", 0, b"unsigned"));
    assert_eq!(r.code, resp::NO_PERMISSION);
    assert!(remark(&r).contains("not signed"), "{}", remark(&r));
    assert_eq!(
        c.call(signed(send_v2("AclTopic", 0, "T", 1, b"root"), "root", "root-secret")).code,
        resp::SUCCESS
    );

    // A normal user, created by the super user, may send only where a policy allows.
    let mut create = RemotingCommand::request(rc::AUTH_CREATE_USER, 0);
    create.put_ext("username", "dave");
    create.body = br#"{"password":"dave-secret","userType":"Normal"}"#.to_vec().into();
    assert_eq!(c.call(signed(create, "root", "root-secret")).code, resp::SUCCESS);
    let r = c.call(signed(send_v2("AclTopic", 0, "T", 2, b"dave"), "dave", "dave-secret"));
    assert_eq!(r.code, resp::NO_PERMISSION);
    assert!(
        remark(&r).contains("User:dave has no permission to access Topic:AclTopic from 127.0.0.1"),
        "{}",
        remark(&r)
    );
    let mut acl = RemotingCommand::request(rc::AUTH_CREATE_ACL, 0);
    acl.put_ext("subject", "User:dave");
    acl.body = br#"{"subject":"User:dave","policies":[{"entries":[{"resource":"Topic:Acl*","actions":["Pub"],"sourceIps":["127.0.0.0/8"],"decision":"Allow"}]}]}"#.to_vec().into();
    assert_eq!(c.call(signed(acl, "root", "root-secret")).code, resp::SUCCESS);
    assert_eq!(
        c.call(signed(send_v2("AclTopic", 0, "T", 3, b"dave"), "dave", "dave-secret")).code,
        resp::SUCCESS
    );
    // A normal user may not manage users.
    let mut sneaky = RemotingCommand::request(rc::AUTH_CREATE_USER, 0);
    sneaky.put_ext("username", "eve");
    sneaky.body = br#"{"password":"x"}"#.to_vec().into();
    let r = c.call(signed(sneaky, "dave", "dave-secret"));
    assert_eq!(r.code, resp::NO_PERMISSION);
    assert!(remark(&r).contains("Cluster:DefaultCluster"), "{}", remark(&r));

    // Three wrong signatures on one connection: the third is answered, then the connection closes;
    // other connections are served on.
    let mut guesser = p.broker();
    for i in 1..=3 {
        let r = guesser.call(signed(send_v2("AclTopic", 0, "T", 9, b"guess"), "dave", &format!("guess-{i}")));
        assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
        assert_eq!(remark(&r).contains("closing it"), i == 3, "{}", remark(&r));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        guesser
            .try_call(signed(send_v2("AclTopic", 0, "T", 9, b"after"), "dave", "dave-secret"))
            .is_none()
    );
    assert_eq!(
        c.call(signed(send_v2("AclTopic", 0, "T", 4, b"dave"), "dave", "dave-secret")).code,
        resp::SUCCESS
    );

    // Users and policies are on disk, and not in the log.
    drop(c);
    assert!(p.terminate().success());
    p.spawn();
    let r = p
        .broker()
        .call(signed(send_v2("AclTopic", 0, "T", 5, b"dave"), "dave", "dave-secret"));
    assert_eq!(r.code, resp::SUCCESS, "{}", remark(&r));
    let log = p.log();
    assert!(
        !log.contains("dave-secret") && !log.contains("root-secret"),
        "a secret reached the log"
    );
}

#[test]
fn an_enforcing_tls_port_serves_no_plain_text_and_a_missing_certificate_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["serve", "--store-dir", dir.path().join("data").to_str().unwrap()])
        .args(["--namesrv-listen", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--listen-port", &common::free_port().to_string(), "--broker-ip", "127.0.0.1"])
        .args([
            "--set",
            "fastListenPort=0",
            "--set",
            &format!("haListenPort={}", common::free_port()),
        ])
        .args(["--set", "tls.server.mode=enforcing"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tls.server.certPath"), "{stderr}");

    let cert = self_signed(dir.path());
    let p = Petrel::start(&[
        "--set",
        "tls.server.mode=enforcing",
        "--set",
        &format!("tls.server.certPath={}", cert.0),
        "--set",
        &format!("tls.server.keyPath={}", cert.1),
    ]);
    for port in [p.broker_port, p.ns_port] {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(&RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 1).to_frame().unwrap())
            .unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).expect("the port closes the connection");
        // A TLS alert record (21), or nothing: never an answer.
        assert!(got.is_empty() || got[0] == 21, "port {port} answered plain text: {got:?}");
    }
}

/// A self-signed certificate and key made with the openssl command: (cert path, key path).
fn self_signed(dir: &std::path::Path) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-keyout", key.to_str().unwrap(), "-out", cert.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is installed");
    assert!(status.success());
    (cert.to_str().unwrap().to_owned(), key.to_str().unwrap().to_owned())
}

#[test]
fn a_connection_is_trusted_once_its_signature_checked_out_unless_the_strategy_is_stateless() {
    // The default: RocketMQ's stateful strategy.
    let p = Petrel::start(&["--set", "authenticationEnabled=true", "--set", ROOT]);
    let mut verified = p.broker();
    let r = verified.call(signed(send_v2("StateTopic", 0, "T", 0, b"a"), "root", "wrong"));
    assert_eq!(r.code, resp::NO_PERMISSION, "a failed check trusts nothing");
    assert_eq!(
        verified
            .call(signed(send_v2("StateTopic", 0, "T", 1, b"b"), "root", "root-secret"))
            .code,
        resp::SUCCESS
    );
    // Later requests on this connection naming root are not re-verified...
    assert_eq!(
        verified.call(signed(send_v2("StateTopic", 0, "T", 2, b"c"), "root", "stale")).code,
        resp::SUCCESS
    );
    // ...but another user, or another connection, is.
    let r = verified.call(signed(send_v2("StateTopic", 0, "T", 3, b"d"), "nobody", "x"));
    assert_eq!(r.code, resp::NO_PERMISSION);
    let r = p.broker().call(signed(send_v2("StateTopic", 0, "T", 4, b"e"), "root", "stale"));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    drop(p);

    // RocketMQ's default: every request is verified.
    let p = Petrel::start(&[
        "--set",
        "authenticationEnabled=true",
        "--set",
        "authenticationStrategy=org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy",
        "--set",
        ROOT,
    ]);
    let mut c = p.broker();
    assert_eq!(
        c.call(signed(send_v2("StateTopic", 0, "T", 5, b"f"), "root", "root-secret")).code,
        resp::SUCCESS
    );
    let r = c.call(signed(send_v2("StateTopic", 0, "T", 6, b"g"), "root", "stale"));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
}
