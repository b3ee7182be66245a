//! Master → slave replication between real `petrel serve` processes over RocketMQ's classic HA
//! protocol: the slave's commit log matches the master's byte for byte, a consumer reading the
//! slave gets every message, SYNC_MASTER answers follow the slaves' acks, and a killed slave
//! catches up after its restart.

#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Client, Petrel, pull, pull_bodies, pull_bodies_as, send_v2};
use petrel_protocol::codes::response_code as resp;

/// Small segments, so that a few megabytes cross several segment boundaries.
const SEGMENT: &str = "mappedFileSizeCommitLog=1048576";

fn master(role: &str, extra: &[&str]) -> Petrel {
    let role = format!("brokerRole={role}");
    let mut args = vec!["--set", SEGMENT, "--set", &role];
    args.extend_from_slice(extra);
    Petrel::start(&args)
}

fn slave_of(master: &Petrel, extra: &[&str]) -> Petrel {
    let ns = format!("127.0.0.1:{}", master.ns_port);
    let mut args = vec![
        "--namesrv-addr",
        &ns,
        "--set",
        SEGMENT,
        "--set",
        "brokerRole=SLAVE",
        "--set",
        "brokerId=1",
    ];
    args.extend_from_slice(extra);
    Petrel::start(&args)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends until one is acknowledged by the slave too (SUCCESS rather than SLAVE_NOT_AVAILABLE).
fn wait_in_sync(c: &mut Client, topic: &str) {
    let mut seq = 0;
    wait_for("the slave to be in sync", Duration::from_secs(30), || {
        seq += 1;
        // Queue 3: the queues the tests read stay free of warm-up messages.
        c.call(send_v2(topic, 3, "warm", seq, b"warm-up")).code == resp::SUCCESS
    });
}

/// The commit-log files of `dir`, name → bytes.
fn commit_log(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            name.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| (name, std::fs::read(e.path()).unwrap()))
        })
        .collect();
    files.sort();
    files
}

/// Every segment of the master's log is in the slave's, byte for byte (a segment the master
/// only prepared, still zero, may be missing).
fn assert_same_log(master: &Petrel, slave: &Petrel) {
    let (m, s) = (commit_log(&master.data_dir()), commit_log(&slave.data_dir()));
    assert!(m.len() >= 3, "the run crossed segments: {} segments", m.len());
    for (name, bytes) in &m {
        match s.iter().find(|(n, _)| n == name) {
            Some((_, theirs)) => assert!(theirs == bytes, "segment {name} differs between master and slave"),
            None => assert!(bytes.iter().all(|b| *b == 0), "segment {name} is missing on the slave"),
        }
    }
}

fn body(i: usize) -> String {
    format!("{i:06}-{}", "x".repeat(2000))
}

/// The bodies `0..n` came back, in order (the first difference is reported, not 4 MB of bodies).
fn assert_bodies(got: &[String], n: usize) {
    assert_eq!(got.len(), n, "message count");
    if let Some(i) = (0..n).find(|i| got[*i] != body(*i)) {
        panic!("message {i} differs: {:.40}…", got[i]);
    }
}

#[test]
fn a_sync_master_answers_once_its_slave_holds_the_message_and_the_logs_match() {
    let mut m = master("SYNC_MASTER", &[]);
    let mut c = m.broker();
    // No slave yet: stored on the master, and said so.
    let r = c.call(send_v2("Replicated", 0, "T", 0, b"before the slave"));
    assert_eq!(r.code, resp::SLAVE_NOT_AVAILABLE, "{:?}", r.remark);
    let mut s = slave_of(&m, &[]);
    wait_in_sync(&mut c, "Replicated");
    // EXCHANGE_BROKER_HA_INFO, as a slave asks before it connects: the master names its HA
    // server and itself; a slave has none to name, and one told another master's address (a
    // push) answers SUCCESS and keeps its own: every send below still waits for it.
    let mut sc = s.broker();
    let ask = || petrel_protocol::RemotingCommand::request(petrel_protocol::codes::request_code::EXCHANGE_BROKER_HA_INFO, 0);
    let r = c.call(ask());
    assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.ext("masterHaAddress"), Some(format!("127.0.0.1:{}", m.ha_port).as_str()));
    assert_eq!(r.ext("masterAddress"), Some(format!("127.0.0.1:{}", m.broker_port).as_str()));
    let r = sc.call(ask());
    assert_eq!((r.code, r.ext("masterHaAddress")), (resp::SUCCESS, None), "{:?}", r.remark);
    let push = petrel_protocol::header::ExchangeHaInfoHeader {
        master_ha_address: Some("127.0.0.1:1".into()),
        ..Default::default()
    };
    let r = sc.call(ask().with_ext_fields(petrel_protocol::header::CommandHeader::to_ext(&push)));
    assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    for i in 0..2000 {
        let r = c.call(send_v2("Replicated", 1, "T", i, body(i).as_bytes()));
        assert_eq!(r.code, resp::SUCCESS, "send {i}: {:?}", r.remark);
    }
    // The slave serves the same messages (its topic table comes from the master).
    assert_bodies(&pull_all_queue(&mut sc, "Replicated", 1, 2000), 2000);
    // A slave refuses sends.
    let r = sc.call(send_v2("Replicated", 0, "T", 0, b"to the slave"));
    assert_eq!(r.code, resp::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
    drop((c, sc));
    assert!(m.terminate().success());
    assert!(s.terminate().success());
    assert_same_log(&m, &s);
}

/// SEND_MESSAGE_V2 of `topic` queue 0 that also files the message in the light queues `lmqs`.
fn send_dispatched(topic: &str, lmqs: &str, seq: usize) -> petrel_protocol::RemotingCommand {
    let mut r = send_v2(topic, 0, "T", seq, body(seq).as_bytes());
    let properties = format!("{}INNER_MULTI_DISPATCH\u{1}{lmqs}\u{2}", r.ext("i").unwrap());
    r.put_ext("i", properties);
    r
}

/// The bodies of light queue `lmq` from offset 0, until `count` came back.
fn pull_light(c: &mut Client, lmq: &str, count: usize) -> Vec<String> {
    pull_bodies_as(c, "%LMQ%readers", lmq, 0, 0, count, Duration::from_secs(30))
}

#[test]
fn light_queues_reach_the_slave_at_the_master_s_offsets_and_survive_its_kill() {
    let lmq = ["--set", "enableLmq=true", "--set", "enableMultiDispatch=true"];
    let mut m = master("SYNC_MASTER", &lmq);
    let mut s = slave_of(&m, &lmq);
    let mut c = m.broker();
    wait_in_sync(&mut c, "Parent");
    // 1,500 bodies of 2 KB: the log crosses segments, as the byte comparison at the end asks.
    for i in 0..1500 {
        let lmqs = if i % 3 == 0 { "%LMQ%a,%LMQ%b" } else { "%LMQ%a" };
        let r = c.call(send_dispatched("Parent", lmqs, i));
        assert_eq!(r.code, resp::SUCCESS, "send {i}: {:?}", r.remark);
    }
    let every_third: Vec<String> = (0..1500).step_by(3).map(body).collect();
    for round in ["as streamed", "after a kill -9 of the slave"] {
        let mut sc = s.broker();
        assert_bodies(&pull_light(&mut sc, "%LMQ%a", 1500), 1500);
        assert_eq!(pull_light(&mut sc, "%LMQ%b", 500), every_third, "{round}");
        for (name, max) in [("%LMQ%a", 1500), ("%LMQ%b", 500)] {
            let mut q = petrel_protocol::RemotingCommand::request(petrel_protocol::request_code::GET_MAX_OFFSET, 0);
            q.put_ext("topic", name);
            q.put_ext("queueId", "0");
            let r = sc.call(q);
            assert_eq!(
                (r.code, r.ext("offset")),
                (resp::SUCCESS, Some(max.to_string().as_str())),
                "{name} {round}"
            );
        }
        drop(sc);
        if round == "as streamed" {
            s.kill();
            s.spawn();
        }
    }
    drop(c);
    assert!(m.terminate().success());
    assert!(s.terminate().success());
    assert_same_log(&m, &s);
}

/// Pulls the queue from `c` until `count` messages came back; returns their bodies.
fn pull_all_queue(c: &mut Client, topic: &str, queue_id: i32, count: usize) -> Vec<String> {
    pull_bodies(c, topic, queue_id, 0, count, Duration::from_secs(30))
}

#[test]
fn a_killed_slave_catches_up_after_its_restart_with_identical_bytes() {
    let mut m = master("SYNC_MASTER", &["--set", "slaveTimeout=1000"]);
    let mut s = slave_of(&m, &[]);
    let mut c = m.broker();
    wait_in_sync(&mut c, "Catchup");
    for i in 0..500 {
        assert_eq!(c.call(send_v2("Catchup", 0, "T", i, body(i).as_bytes())).code, resp::SUCCESS);
    }
    s.kill();
    // Without its slave the master still stores every send and says the slave is missing.
    for i in 500..1500 {
        let r = c.call(send_v2("Catchup", 0, "T", i, body(i).as_bytes()));
        assert!(
            r.code == resp::SLAVE_NOT_AVAILABLE || r.code == resp::FLUSH_SLAVE_TIMEOUT,
            "send {i} while the slave is down: {} {:?}",
            r.code,
            r.remark
        );
    }
    s.spawn();
    wait_in_sync(&mut c, "Catchup");
    assert_bodies(&pull_all_queue(&mut s.broker(), "Catchup", 0, 1500), 1500);
    drop(c);
    assert!(m.terminate().success());
    assert!(s.terminate().success());
    assert_same_log(&m, &s);
}

#[test]
fn an_async_master_never_waits_and_min_in_sync_replicas_refuses_before_writing() {
    let m = master("ASYNC_MASTER", &[]);
    let r = m.broker().call(send_v2("NoWait", 0, "T", 0, b"x"));
    assert_eq!(r.code, resp::SUCCESS, "an ASYNC_MASTER without slaves: {:?}", r.remark);

    let strict = master("SYNC_MASTER", &["--set", "minInSyncReplicas=2"]);
    let mut c = strict.broker();
    let r = c.call(send_v2("Strict", 0, "T", 0, b"x"));
    assert_eq!(r.code, resp::SYSTEM_ERROR, "{:?}", r.remark);
    assert!(
        r.remark.as_deref().unwrap_or("").contains("in-sync replicas not enough"),
        "{:?}",
        r.remark
    );
    let s = slave_of(&strict, &[]);
    wait_for("a send to pass with the slave in sync", Duration::from_secs(30), || {
        c.call(send_v2("Strict", 0, "T", 1, b"y")).code == resp::SUCCESS
    });
    // Nothing was written by the refused sends: the queue holds only what succeeded.
    let mut sc = s.broker();
    let got = pull_all_queue(&mut sc, "Strict", 0, 1);
    assert_eq!(got, vec!["y".to_owned()]);
}

fn min_offset(c: &mut Client, topic: &str, queue_id: i32) -> i64 {
    let h = petrel_protocol::header::GetMinOffsetRequestHeader {
        topic: topic.into(),
        queue_id,
        bname: None,
    };
    let r = c.call(
        petrel_protocol::RemotingCommand::request(petrel_protocol::codes::request_code::GET_MIN_OFFSET, 0)
            .with_ext_fields(petrel_protocol::header::CommandHeader::to_ext(&h)),
    );
    r.ext("offset").unwrap().parse().unwrap()
}

#[test]
fn a_slave_that_joins_late_with_sync_from_last_file_starts_at_the_newest_segment_and_keeps_it() {
    let m = master("ASYNC_MASTER", &["--set", "syncFromLastFile=true"]);
    let mut c = m.broker();
    // About 4.5 segments of 1 MiB before the slave exists.
    for i in 0..2200 {
        assert_eq!(c.call(send_v2("Late", 0, "T", i, body(i).as_bytes())).code, resp::SUCCESS);
    }
    let mut s = slave_of(&m, &[]);
    for i in 2200..2400 {
        assert_eq!(c.call(send_v2("Late", 0, "T", i, body(i).as_bytes())).code, resp::SUCCESS);
    }
    let mut sc = s.broker();
    wait_for("the slave to hold the newest messages", Duration::from_secs(30), || {
        let r = sc.call(pull("ReplicaReaders", "Late", 0, 2399, 0));
        r.code == resp::SUCCESS
    });
    let first = min_offset(&mut sc, "Late", 0);
    // Where the master's newest segment began when the slave connected.
    assert!(first > 0 && first < 2400, "the slave's queue begins in the newest segment: {first}");
    assert!(
        commit_log(&s.data_dir()).len() < commit_log(&m.data_dir()).len(),
        "the slave holds fewer segments than the master"
    );
    let first_index = usize::try_from(first).expect("the slave's first offset is positive");
    let tail = pull_bodies(&mut sc, "Late", 0, first, 2400 - first_index, Duration::from_secs(30));
    assert_eq!(tail.first().map(String::as_str), Some(body(first_index).as_str()));
    assert_eq!(tail.last().map(String::as_str), Some(body(2399).as_str()));
    // Its queue still begins there after a restart.
    drop(sc);
    assert!(s.terminate().success());
    s.spawn();
    assert_eq!(min_offset(&mut s.broker(), "Late", 0), first);
}

#[test]
fn with_every_in_sync_replica_acking_consumers_never_read_past_what_the_slaves_hold() {
    // A slave's ack may take longer than 500 ms when the machine is busy (the suite runs these
    // tests side by side on two cores); only the stopped slave's send is meant to time out.
    let m = master("SYNC_MASTER", &["--set", "allAckInSyncStateSet=true", "--set", "slaveTimeout=3000"]);
    let s = slave_of(&m, &[]);
    let mut c = m.broker();
    let info = || petrel_protocol::RemotingCommand::request(petrel_protocol::codes::request_code::GET_BROKER_RUNTIME_INFO, 0);
    wait_for("the slave to be in sync", Duration::from_secs(30), || {
        assert_eq!(c.call(send_v2("Visible", 3, "warm", 0, b"warm-up")).code, resp::SUCCESS);
        String::from_utf8_lossy(&c.call(info()).body).contains(r#""haInSyncSlaves":"1""#)
    });
    assert_eq!(c.call(send_v2("Visible", 0, "T", 0, b"acked")).code, resp::SUCCESS);
    // The slave stops (SIGSTOP) without closing its connection: the master cannot know yet.
    // Back once every thread of the slave has stopped: one still running on a busy machine would
    // take and acknowledge the next message.
    s.signal(nix::sys::signal::Signal::SIGSTOP);
    let r = c.call(send_v2("Visible", 0, "T", 1, b"not on the slave"));
    assert_eq!(r.code, resp::FLUSH_SLAVE_TIMEOUT, "{:?}", r.remark);
    let r = c.call(pull("Readers", "Visible", 0, 1, 0));
    assert_ne!(
        r.code,
        resp::SUCCESS,
        "a message the slave does not hold is not readable on the master"
    );
    s.signal(nix::sys::signal::Signal::SIGCONT);
    wait_for(
        "the message to become readable once the slave holds it",
        Duration::from_secs(30),
        || c.call(pull("Readers", "Visible", 0, 1, 0)).code == resp::SUCCESS,
    );
}

/// A rogue on the HA port: a process that reports holding everything, as a slave would.
fn forge_acks(ha_port: u16, rounds: usize) -> Option<std::net::TcpStream> {
    use std::io::Write;
    let mut rogue = std::net::TcpStream::connect(("127.0.0.1", ha_port)).ok()?;
    // A first report of an empty log (where the master starts its stream), then ever higher ones.
    rogue.write_all(&0i64.to_be_bytes()).ok()?;
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..rounds {
        rogue.write_all(&(i64::MAX / 2).to_be_bytes()).ok()?;
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(rogue)
}

/// Without `haSecret` the HA port believes whoever connects: a rogue's report of holding
/// everything acknowledges a SYNC_MASTER's sends while the real slave holds nothing, and 16
/// rogues fill `haMaxSlaves`. With it, master and slave prove the secret to each other first:
/// the rogues are refused (and counted), the sends wait for the real slave, which still gets in.
#[test]
fn only_a_peer_holding_the_ha_secret_is_served_as_a_slave() {
    const SECRET: &str = "haSecret=the-set's-shared-secret";
    for secret in [None, Some(SECRET)] {
        let mut extra = vec!["--set", "slaveTimeout=500", "--set", "haMaxSlaves=16"];
        if let Some(s) = secret {
            extra.extend(["--set", s]);
        }
        let m = master("SYNC_MASTER", &extra);
        let mut c = m.broker();
        let rogue = forge_acks(m.ha_port, 50);
        let r = c.call(send_v2("Forged", 0, "T", 0, b"acknowledged by whom?"));
        if secret.is_none() {
            assert!(rogue.is_some(), "the rogue reached the HA port\n{}", m.log());
            assert_eq!(
                r.code,
                resp::SUCCESS,
                "unprotected: the rogue's report counts as a slave's ack\n{}",
                m.log()
            );
            continue;
        }
        assert_ne!(r.code, resp::SUCCESS, "a rogue acknowledged a send");
        let rogues: Vec<_> = (0..16).filter_map(|_| forge_acks(m.ha_port, 1)).collect();
        let s = slave_of(&m, &["--set", SECRET]);
        wait_in_sync(&mut c, "Forged");
        let log = m.log();
        assert!(
            log.contains("refused an HA peer: it did not open TLS, or did not prove it holds haSecret"),
            "{log}"
        );
        // A slave with another secret is refused as well, and does not follow that master.
        let wrong = slave_of(&m, &["--set", "haSecret=not-the-set's-secret"]);
        wait_for("the wrong slave's refusal", Duration::from_secs(10), || {
            wrong.log().contains("the master's proof is wrong")
        });
        drop((rogues, s, wrong));
    }
}

/// With `tls.server.mode` on, a master's HA port takes TLS as its other ports do and a slave
/// reaches it over TLS, verifying its certificate against `tls.client.trustCertPath`; the
/// `haSecret` proof is bound to the session. A slave trusting another CA never follows; an
/// enforcing HA port refuses a plain-text peer.
#[test]
fn a_slave_follows_its_master_over_tls_and_verifies_it() {
    const SECRET: &str = "haSecret=the-set's-shared-secret";
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = common::ca_and_leaf(dir.path(), "set");
    let (other_ca, _, _) = common::ca_and_leaf(dir.path(), "other");
    let tls = |mode: &str, trust: &str| {
        vec![
            format!("tls.server.mode={mode}"),
            format!("tls.server.certPath={cert}"),
            format!("tls.server.keyPath={key}"),
            format!("tls.client.trustCertPath={trust}"),
        ]
    };
    let args = |extra: Vec<String>| -> Vec<String> { extra.into_iter().flat_map(|a| ["--set".to_owned(), a]).collect() };
    // Permissive: the test's plain client reaches the broker port; the slave uses TLS anyway.
    let m_args = args([tls("permissive", &ca), vec![SECRET.into(), "slaveTimeout=500".into()]].concat());
    let m_refs: Vec<&str> = m_args.iter().map(String::as_str).collect();
    let m = master("SYNC_MASTER", &m_refs);
    let s_args = args([tls("permissive", &ca), vec![SECRET.into()]].concat());
    let s_refs: Vec<&str> = s_args.iter().map(String::as_str).collect();
    let s = slave_of(&m, &s_refs);
    let mut c = m.broker();
    wait_in_sync(&mut c, "OverTls");
    for i in 0..50 {
        assert_eq!(c.call(send_v2("OverTls", 0, "T", i, body(i).as_bytes())).code, resp::SUCCESS);
    }
    let mut sc = s.broker();
    assert_bodies(&pull_all_queue(&mut sc, "OverTls", 0, 50), 50);
    assert!(m.log().contains("tls=true"), "the slave's session was not TLS:\n{}", m.log());

    // Trusting another CA, a slave never gets past the TLS handshake.
    let w_args = args([tls("permissive", &other_ca), vec![SECRET.into()]].concat());
    let w_refs: Vec<&str> = w_args.iter().map(String::as_str).collect();
    let wrong = slave_of(&m, &w_refs);
    wait_for("the distrustful slave's failure", Duration::from_secs(10), || {
        wrong.log().contains("TLS handshake")
    });

    // An enforcing HA port refuses a plain-text peer.
    let e_args = args(tls("enforcing", &ca));
    let e_refs: Vec<&str> = e_args.iter().map(String::as_str).collect();
    let mut e_refs = e_refs;
    e_refs.extend(["--set", "brokerRole=SYNC_MASTER"]);
    let enforcing = Petrel::start(&e_refs);
    drop(forge_acks(enforcing.ha_port, 2));
    wait_for("the plain peer's refusal", Duration::from_secs(10), || {
        enforcing
            .log()
            .contains("a plain-text peer on an HA port with tls.server.mode=enforcing")
    });
    drop((s, wrong));
}
