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
    let dir = tempfile::tempdir().unwrap();
    let namesrv = common::NameServer::start(dir.path(), &["--set", "authenticationEnabled=true", "--set", INNER]);
    let ns_port = namesrv.port;
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
    drop(namesrv);
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

    // EXCHANGE_BROKER_HA_INFO (906) names the master's HA server: Update on the cluster, as in
    // RocketMQ. Unsigned and normal users are refused; the super user is answered.
    let ha_info = || RemotingCommand::request(rc::EXCHANGE_BROKER_HA_INFO, 0);
    let r = c.call(ha_info());
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(r.ext("masterHaAddress").is_none(), "a refusal named the HA server: {r:?}");
    let r = c.call(signed(ha_info(), "dave", "dave-secret"));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(remark(&r).contains("Cluster:DefaultCluster"), "{}", remark(&r));
    let r = c.call(signed(ha_info(), "root", "root-secret"));
    assert_eq!(r.code, resp::SUCCESS, "{}", remark(&r));
    assert!(r.ext("masterHaAddress").is_some_and(|a| a.contains(':')), "{r:?}");

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
    let grpc_port = common::free_port();
    let p = Petrel::start(&[
        "--set",
        "tls.server.mode=enforcing",
        "--set",
        &format!("tls.server.certPath={}", cert.0),
        "--set",
        &format!("tls.server.keyPath={}", cert.1),
        "--set",
        &format!("grpcServerPort={grpc_port}"),
    ]);
    // The gRPC port too: a plain-text client's first bytes are not a TLS handshake.
    for port in [p.broker_port, p.ns_port, grpc_port] {
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

/// GET_BROKER_CONFIG is `Cluster:Get`, and no answer or log line carries a secret: not the
/// super user's password (`initAuthenticationUser`), not the broker's own secret key
/// (`innerClientAuthenticationCredentials`), not another user's password.
#[test]
fn no_answer_or_log_shows_a_secret_and_the_broker_config_needs_cluster_get() {
    let p = Petrel::start(&[
        "--set",
        "authenticationEnabled=true",
        "--set",
        "authorizationEnabled=true",
        "--set",
        ROOT,
        "--set",
        INNER,
    ]);
    let mut c = p.broker();
    let mut create = RemotingCommand::request(rc::AUTH_CREATE_USER, 0);
    create.put_ext("username", "nobody");
    create.body = br#"{"password":"nobody-secret","userType":"Normal"}"#.to_vec().into();
    assert_eq!(c.call(signed(create, "root", "root-secret")).code, resp::SUCCESS);

    // A signed-in user with no policy at all reads nothing of the broker's configuration.
    let config = || RemotingCommand::request(rc::GET_BROKER_CONFIG, 0);
    let r = c.call(signed(config(), "nobody", "nobody-secret"));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(remark(&r).contains("Cluster:DefaultCluster"), "{}", remark(&r));
    assert!(!String::from_utf8_lossy(&r.body).contains("root-secret"));

    // Given Cluster:Get, it reads the configuration with every secret masked.
    let mut acl = RemotingCommand::request(rc::AUTH_CREATE_ACL, 0);
    acl.put_ext("subject", "User:nobody");
    acl.body = br#"{"subject":"User:nobody","policies":[{"entries":[{"resource":"Cluster:DefaultCluster","actions":["Get"],"decision":"Allow"}]}]}"#.to_vec().into();
    assert_eq!(c.call(signed(acl, "root", "root-secret")).code, resp::SUCCESS);
    for (user, secret) in [("nobody", "nobody-secret"), ("root", "root-secret")] {
        let r = c.call(signed(config(), user, secret));
        assert_eq!(r.code, resp::SUCCESS, "{user}: {}", remark(&r));
        let body = String::from_utf8_lossy(&r.body).into_owned();
        assert!(body.contains("initAuthenticationUser=******"), "{user}: {body}");
        assert!(body.contains("innerClientAuthenticationCredentials=******"), "{user}: {body}");
        for leaked in ["root-secret", "broker-secret"] {
            assert!(!body.contains(leaked), "{user} read {leaked}: {body}");
        }
    }

    // The user admin answers show passwords to a super user only.
    let get_user = |name: &str| {
        let mut r = RemotingCommand::request(rc::AUTH_GET_USER, 0);
        r.put_ext("username", name);
        r
    };
    let r = c.call(signed(get_user("root"), "nobody", "nobody-secret"));
    assert_eq!(r.code, resp::SUCCESS, "{}", remark(&r));
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert!(body.contains("\"username\":\"root\"") && !body.contains("root-secret"), "{body}");
    let r = c.call(signed(RemotingCommand::request(rc::AUTH_LIST_USER, 0), "nobody", "nobody-secret"));
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert!(body.contains("\"broker\"") && !body.contains("secret"), "{body}");
    let r = c.call(signed(get_user("nobody"), "root", "root-secret"));
    assert!(
        String::from_utf8_lossy(&r.body).contains("nobody-secret"),
        "a super user sees passwords"
    );

    // A bad secret value is refused without echoing it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["serve", "--store-dir", &p.data().join("other").display().to_string()])
        .args(["--set", r#"initAuthenticationUser={"username":"x","password":"leaky-secret""#])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("initAuthenticationUser") && !said.contains("leaky-secret"), "{said}");
    let log = p.log();
    for leaked in ["root-secret", "broker-secret", "nobody-secret"] {
        assert!(!log.contains(leaked), "the log shows {leaked}");
    }
}

/// The gaps a consumer of its own group could use against another's: a retry topic is its
/// group's whatever group the request claims; another group's settings need Update on it; a
/// record named by offset is checked by its own topic (view, send-back).
#[test]
fn a_user_of_one_group_cannot_reach_another_groups_retry_topic_settings_or_records() {
    let p = Petrel::start(&[
        "--set",
        "authenticationEnabled=true",
        "--set",
        "authorizationEnabled=true",
        "--set",
        ROOT,
    ]);
    let mut c = p.broker();
    let root = |r: RemotingCommand| signed(r, "root", "root-secret");
    let mallory = |r: RemotingCommand| signed(r, "mallory", "mallory-secret");
    let mut create = RemotingCommand::request(rc::AUTH_CREATE_USER, 0);
    create.put_ext("username", "mallory");
    create.body = br#"{"password":"mallory-secret","userType":"Normal"}"#.to_vec().into();
    assert_eq!(c.call(root(create)).code, resp::SUCCESS);
    let mut acl = RemotingCommand::request(rc::AUTH_CREATE_ACL, 0);
    acl.put_ext("subject", "User:mallory");
    acl.body = br#"{"subject":"User:mallory","policies":[{"entries":[{"resource":"Group:mine","actions":["Sub","Update"],"decision":"Allow"},{"resource":"Topic:Open","actions":["Pub","Sub","Get"],"decision":"Allow"}]}]}"#.to_vec().into();
    assert_eq!(c.call(root(acl)).code, resp::SUCCESS);

    // The victim's message, stored by root.
    let sent = c.call(root(send_v2("Secret", 0, "T", 0, b"for the victim only")));
    assert_eq!(sent.code, resp::SUCCESS, "{}", remark(&sent));
    let offset_msg_id = sent.ext("msgId").unwrap().to_owned();
    let (_, offset) = petrel_protocol::msgid::decode_offset_msg_id(&offset_msg_id).unwrap();

    // Writing into the victim's retry topic while naming one's own group.
    let mut retry = send_v2("%RETRY%victim", 0, "T", 1, b"forged retry");
    retry.put_ext("a", "mine");
    let r = c.call(mallory(retry));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(remark(&r).contains("Group:victim"), "{}", remark(&r));
    // Reading it.
    let r = c.call(mallory(common::pull("mine", "%RETRY%victim", 0, 0, 0)));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    // Turning the victim group off.
    let mut disable = RemotingCommand::request(rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0);
    disable.body = br#"{"groupName":"victim","consumeEnable":false}"#.to_vec().into();
    let r = c.call(mallory(disable));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    // Viewing the secret record by its offset, naming no topic or one's own.
    for topic in [None, Some("Open")] {
        let mut view = RemotingCommand::request(rc::VIEW_MESSAGE_BY_ID, 0);
        view.put_ext("offset", offset.to_string());
        if let Some(t) = topic {
            view.put_ext("topic", t);
        }
        let r = c.call(mallory(view));
        assert_eq!(r.code, resp::NO_PERMISSION, "topic {topic:?}: {}", remark(&r));
        assert!(!String::from_utf8_lossy(&r.body).contains("victim only"));
    }
    // Copying it into one's own retry topic by giving it back.
    let hb = common::heartbeat(&mut Client::connect(p.broker_port), "mallory-client", "mine", "Open");
    assert_eq!(hb.code, resp::NO_PERMISSION, "an unsigned heartbeat is refused");
    let mut heartbeat = RemotingCommand::request(rc::HEART_BEAT, 0);
    heartbeat.body = br#"{"clientID":"m1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"mine","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"Open"}],"unitMode":false}],"producerDataSet":[]}"#.to_vec().into();
    assert_eq!(c.call(mallory(heartbeat)).code, resp::SUCCESS);
    let mut back = RemotingCommand::request(rc::CONSUMER_SEND_MSG_BACK, 0);
    back.put_ext("offset", offset.to_string());
    back.put_ext("group", "mine");
    back.put_ext("delayLevel", "0");
    back.put_ext("originMsgId", &offset_msg_id);
    back.put_ext("originTopic", "Open");
    let r = c.call(mallory(back));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(remark(&r).contains("Topic:Secret"), "{}", remark(&r));

    // Update on a cluster of one's own does not take over this cluster's broker name at the
    // (embedded) name server, which shares the broker's users.
    let mut own_cluster = RemotingCommand::request(rc::AUTH_UPDATE_ACL, 0);
    own_cluster.put_ext("subject", "User:mallory");
    own_cluster.body =
        br#"{"subject":"User:mallory","policies":[{"entries":[{"resource":"Cluster:Mine","actions":["Update"],"decision":"Allow"}]}]}"#
            .to_vec()
            .into();
    assert_eq!(c.call(root(own_cluster)).code, resp::SUCCESS);
    let mut ns = Client::connect(p.ns_port);
    let register = |cluster: &str, name: &str| {
        let mut r = RemotingCommand::request(rc::REGISTER_BROKER, 0);
        for (k, v) in [
            ("brokerName", name),
            ("brokerAddr", "127.0.0.1:1"),
            ("clusterName", cluster),
            ("haServerAddr", "127.0.0.1:2"),
            ("brokerId", "0"),
        ] {
            r.put_ext(k, v);
        }
        r.body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{},"dataVersion":{"counter":1,"timestamp":1}}}"#
            .to_vec()
            .into();
        r
    };
    let r = ns.call(mallory(register("Mine", "broker-a")));
    assert_eq!(r.code, resp::NO_PERMISSION, "{}", remark(&r));
    assert!(remark(&r).contains("Cluster:DefaultCluster"), "{}", remark(&r));
    assert!(!cluster_info(p.ns_port).contains("127.0.0.1:1\""));
    let r = ns.call(mallory(register("Mine", "broker-mine")));
    assert_eq!(
        r.code,
        resp::SUCCESS,
        "a broker name of its own, in its own cluster: {}",
        remark(&r)
    );

    // Its own group and topic work.
    assert_eq!(c.call(mallory(send_v2("Open", 0, "T", 2, b"mine"))).code, resp::SUCCESS);
    let mut mine = send_v2("%RETRY%mine", 0, "T", 3, b"own retry");
    mine.put_ext("a", "mine");
    let r = c.call(mallory(mine));
    assert_eq!(r.code, resp::SUCCESS, "{}", remark(&r));
}

/// A TLS client that takes any certificate: these tests prove descriptors, not identities.
#[derive(Debug)]
struct AnyCertificate(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS connection with its handshake done, or `None` if the broker closed it.
fn tls_connect(
    port: u16,
    config: &std::sync::Arc<rustls::ClientConfig>,
) -> Option<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).ok()?;
    }
    Some(rustls::StreamOwned::new(conn, sock))
}

/// A TLS connection holds three descriptors (its socket and its bridge's socket pair). Under an
/// open-file limit of 600, 250 TLS connections would take 750: the broker counts them, refuses
/// those past its budget as they come, and keeps the store's reserve — a send that opens a new
/// queue's files still works, and so does a plain client.
#[test]
fn tls_connections_are_counted_by_their_descriptors_and_the_store_keeps_its_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let cert = self_signed(dir.path());
    let p = Petrel::start_with_open_files(
        &[
            "--set",
            "tls.server.mode=permissive",
            "--set",
            &format!("tls.server.certPath={}", cert.0),
            "--set",
            &format!("tls.server.keyPath={}", cert.1),
        ],
        600,
    );
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    );
    let mut c = p.broker();
    let held: Vec<_> = (0..250).filter_map(|_| tls_connect(p.broker_port, &config)).collect();
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..4 {
        // Each new topic is a new consume queue: a directory and a file the store must open.
        let r = c.call(send_v2(&format!("AfterTls{i}"), 0, "T", i, b"the store still opens files"));
        assert_eq!(r.code, resp::SUCCESS, "{}\n{}", remark(&r), p.log());
    }
    let log = p.log();
    assert!(log.contains("descriptors for connections are spent"), "nothing was refused:\n{log}");
    assert!(!log.contains("Too many open files"), "the process ran out of descriptors:\n{log}");
    assert!(held.len() >= 50, "only {} TLS connections were served", held.len());
    // Their descriptors come back with them.
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        p.broker().call(send_v2("AfterTls", 0, "T", 9, b"a new connection")).code,
        resp::SUCCESS
    );
}

/// QueryRoute over `channel`: the answer's status code, or why there was none.
async fn grpc_route(channel: tonic::transport::Channel) -> Result<i32, String> {
    use petrel_grpc::pb;
    let mut request = tonic::Request::new(pb::QueryRouteRequest {
        topic: Some(pb::Resource {
            resource_namespace: String::new(),
            name: "TlsRouted".into(),
        }),
        endpoints: None,
    });
    request.metadata_mut().insert("x-mq-client-id", "tls-test".parse().unwrap());
    let answer = pb::messaging_service_client::MessagingServiceClient::new(channel)
        .query_route(request)
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(answer.into_inner().status.map_or(-1, |s| s.code))
}

#[test]
fn the_grpc_port_serves_tls_with_the_remoting_ports_certificate_and_plain_text_when_permissive() {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = common::ca_and_leaf(dir.path(), "grpc");
    let grpc_port = common::free_port();
    let _p = Petrel::start(&[
        "--set",
        "tls.server.mode=permissive",
        "--set",
        &format!("tls.server.certPath={cert}"),
        "--set",
        &format!("tls.server.keyPath={key}"),
        "--set",
        &format!("grpcServerPort={grpc_port}"),
        "--set",
        "autoCreateTopicEnable=false",
    ]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let not_found = petrel_grpc::pb::Code::TopicNotFound as i32;
        // A client that verifies the certificate against the CA, with HTTP/2 by ALPN.
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(std::fs::read(&ca).unwrap()))
            .domain_name("127.0.0.1");
        let secure = Endpoint::from_shared(format!("https://127.0.0.1:{grpc_port}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("a TLS session");
        assert_eq!(grpc_route(secure).await, Ok(not_found), "answered over TLS");
        // Permissive: plain HTTP/2 on the same port.
        let plain = Endpoint::from_shared(format!("http://127.0.0.1:{grpc_port}"))
            .unwrap()
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("a plain connection");
        assert_eq!(grpc_route(plain).await, Ok(not_found), "answered in plain text");
    });
}
