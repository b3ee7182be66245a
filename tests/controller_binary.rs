//! Three real `petrel controller` processes over TCP, driven with RocketMQ's controller request
//! codes the way brokers in controller mode send them: broker ids, registration, heartbeats,
//! the first election and a SyncStateSet change; then a master that stops heartbeating is
//! replaced (and the new master told), a stale master is fenced, the leading controller is
//! killed with SIGKILL and the group goes on with its state, and the killed one rejoins.

#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

mod common;

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{Client, free_port};
use nix::sys::signal::Signal;
use petrel_chaos::process::Process;
use petrel_chaos::proxy::Proxies;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, CleanControllerBrokerDataRequestHeader,
    CommandHeader, ElectMasterRequestHeader, GetReplicaInfoRequestHeader, RegisterBrokerToControllerRequestHeader,
};
use petrel_protocol::{DEFAULT_MAX_FRAME_BYTES, RemotingCommand, decode_frame};

const SET: &str = "broker-a";

struct ControllerProc {
    port: u16,
    metrics_port: u16,
    /// `petrel controller` with its `--set` keys, through the harness tests and chaos share.
    process: Process,
}

impl ControllerProc {
    /// Starts it and waits until it listens.
    fn spawn(&mut self) {
        self.process.start().unwrap();
        let port = self.port;
        self.process
            .wait_until(Duration::from_secs(20), |_| {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            })
            .unwrap_or_else(|e| panic!("controller did not listen: {e}"));
    }

    fn kill(&mut self) {
        self.process.kill().unwrap().expect("running");
    }

    fn pid(&self) -> u32 {
        self.process.pid().expect("running")
    }

    fn call(&self, request: RemotingCommand) -> Option<RemotingCommand> {
        Client::try_connect(self.port)?.try_call(request)
    }

    fn signal(&self, sig: Signal) {
        self.process.signal(sig).unwrap();
        if sig == Signal::SIGSTOP {
            common::wait_stopped(self.pid());
        }
    }
}

fn start_group(dir: &Path) -> Vec<ControllerProc> {
    start_group_with(dir, &[])
}

/// Three controllers with `extra` keys (`KEY=VALUE`) each.
fn start_group_with(dir: &Path, extra: &[&str]) -> Vec<ControllerProc> {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let metrics_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers: Vec<String> = ports.iter().enumerate().map(|(i, p)| format!("n{i}-127.0.0.1:{p}")).collect();
    let peers = peers.join(";");
    let mut group = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let args = [
            format!("controllerDLegerPeers={peers}"),
            format!("controllerDLegerSelfId=n{i}"),
            format!("controllerStorePath={}", dir.join(format!("c{i}")).display()),
            "scanNotActiveBrokerInterval=200".into(),
            "metricsExporterType=PROM".into(),
            "metricsPromExporterHost=127.0.0.1".into(),
            format!("metricsPromExporterPort={}", metrics_ports[i]),
        ];
        let args = args
            .iter()
            .map(String::as_str)
            .chain(extra.iter().copied())
            .flat_map(|a| ["--set".to_owned(), a.to_owned()])
            .collect();
        let mut args: Vec<String> = args;
        args.insert(0, "controller".into());
        let mut c = ControllerProc {
            port: *port,
            metrics_port: metrics_ports[i],
            process: Process::new(
                format!("controller {i}"),
                env!("CARGO_BIN_EXE_petrel"),
                args,
                dir.join(format!("c{i}.log")),
            ),
        };
        c.spawn();
        group.push(c);
    }
    group
}

/// The index of the controller every live member names as leader, waiting up to 20 s (a
/// loaded machine can hold a controller's fsync for seconds; the failover tests time what they
/// claim separately).
fn leader(group: &[ControllerProc], live: &[usize]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answers: Vec<(usize, RemotingCommand)> = live
            .iter()
            .filter_map(|i| {
                group[*i]
                    .call(RemotingCommand::request(rc::CONTROLLER_GET_METADATA_INFO, 0))
                    .map(|a| (*i, a))
            })
            .collect();
        let leaders: Vec<&str> = answers.iter().filter_map(|(_, a)| a.ext("controllerLeaderAddress")).collect();
        let claims: Vec<usize> = answers
            .iter()
            .filter(|(_, a)| a.ext("isLeader") == Some("true"))
            .map(|(i, _)| *i)
            .collect();
        if answers.len() == live.len() && leaders.len() == live.len() && leaders.windows(2).all(|w| w[0] == w[1]) && claims.len() == 1 {
            assert!(
                leaders[0].ends_with(&format!(":{}", group[claims[0]].port)),
                "the leader's address is its peer address"
            );
            return claims[0];
        }
        assert!(
            Instant::now() < deadline,
            "no agreed controller leader: {answers:?}\n{}",
            logs_tail(group)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last lines of every controller's log, for a failure message.
fn logs_tail(group: &[ControllerProc]) -> String {
    let mut text = String::new();
    for (i, c) in group.iter().enumerate() {
        let log = c.process.log();
        let lines: Vec<&str> = log.lines().collect();
        let from = lines.len().saturating_sub(40);
        text.push_str(&format!("--- controller n{i} ---\n{}\n", lines[from..].join("\n")));
    }
    text
}

fn request<H: CommandHeader>(code: i32, header: &H) -> RemotingCommand {
    RemotingCommand::request(code, 0).with_ext_fields(header.to_ext())
}

/// Sends heartbeats for the brokers marked alive, every 300 ms, to every controller.
fn heartbeats(ports: Vec<u16>, alive: Arc<Mutex<HashMap<u64, String>>>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // One long-lived connection per broker and controller, as a broker keeps; a broker taken
        // out of `alive` closes its connections, as a killed broker's close.
        let mut connections: HashMap<(u64, u16), std::net::TcpStream> = HashMap::new();
        while !stop.load(Ordering::Relaxed) {
            let brokers = alive.lock().unwrap().clone();
            connections.retain(|(id, _), _| brokers.contains_key(id));
            for (id, addr) in &brokers {
                for port in &ports {
                    let h = BrokerHeartbeatRequestHeader {
                        cluster_name: "DefaultCluster".into(),
                        broker_addr: addr.clone(),
                        broker_name: SET.into(),
                        broker_id: Some(*id as i64),
                        epoch: Some(1),
                        max_offset: Some(100 * *id as i64),
                        confirm_offset: Some(0),
                        heartbeat_timeout_mills: Some(1500),
                        election_priority: Some(0),
                    };
                    // Oneway, as RocketMQ's brokers send them: a stopped controller stalls nobody.
                    let mut beat = request(rc::BROKER_HEARTBEAT, &h);
                    beat.mark_oneway();
                    let frame = beat.to_frame().unwrap();
                    let key = (*id, *port);
                    let stream = match connections.entry(key) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(v) => {
                            let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", *port)) else {
                                continue;
                            };
                            v.insert(stream)
                        }
                    };
                    if std::io::Write::write_all(stream, &frame).is_err() {
                        connections.remove(&key);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    })
}

/// A fake broker address that reports the first NOTIFY_BROKER_ROLE_CHANGED it receives.
fn notice_listener() -> (String, mpsc::Receiver<RemotingCommand>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut stream, &mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Ok(Some((cmd, _))) = decode_frame(&buf, DEFAULT_MAX_FRAME_BYTES) {
                    let _ = tx.send(cmd);
                    break;
                }
            }
        }
    });
    (addr, rx)
}

/// CONTROLLER_APPLY_BROKER_ID for `id` with `check_code`, which must succeed.
fn apply_broker_id(c: &ControllerProc, id: u64, check_code: String) {
    let apply = ApplyBrokerIdRequestHeader {
        cluster_name: "DefaultCluster".into(),
        broker_name: SET.into(),
        applied_broker_id: i64::try_from(id).unwrap(),
        register_check_code: check_code,
    };
    let answer = c.call(request(rc::CONTROLLER_APPLY_BROKER_ID, &apply)).expect("answer");
    assert_eq!(answer.code, resp::SUCCESS, "{answer:?}");
}

/// A CONTROLLER_ALTER_SYNC_STATE_SET to {1, 2, 3} from `master` at `epoch`, knowing `set_epoch`.
fn alter(master: i64, epoch: i32, set_epoch: i32) -> RemotingCommand {
    let h = AlterSyncStateSetRequestHeader {
        broker_name: SET.into(),
        master_broker_id: master,
        master_epoch: epoch,
        invoke_time: None,
    };
    let body = format!("{{\"syncStateSet\":[1,2,3],\"syncStateSetEpoch\":{set_epoch}}}");
    request(rc::CONTROLLER_ALTER_SYNC_STATE_SET, &h).with_body(body.into_bytes())
}

/// Brokers 1–3 (heartbeating already) get their ids and register the way RocketMQ's brokers do;
/// broker 1 is elected and the SyncStateSet grows to all three. Also: a follower refuses writes.
fn three_in_sync(group: &[ControllerProc], first: usize, addrs: &HashMap<u64, String>) {
    let not_leader = group[(first + 1) % 3].call(request(
        rc::CONTROLLER_APPLY_BROKER_ID,
        &ApplyBrokerIdRequestHeader {
            cluster_name: "DefaultCluster".into(),
            broker_name: SET.into(),
            applied_broker_id: 1,
            register_check_code: "x;y".into(),
        },
    ));
    assert_eq!(
        not_leader.expect("answer").code,
        resp::CONTROLLER_NOT_LEADER,
        "a follower refuses writes"
    );
    for id in 1..=3u64 {
        apply_broker_id(&group[first], id, format!("{};uuid-{id}", addrs[&id]));
        let register = RegisterBrokerToControllerRequestHeader {
            cluster_name: "DefaultCluster".into(),
            broker_name: SET.into(),
            broker_id: Some(id as i64),
            broker_address: addrs[&id].clone(),
            invoke_time: None,
        };
        assert_eq!(
            group[first]
                .call(request(rc::CONTROLLER_REGISTER_BROKER, &register))
                .expect("answer")
                .code,
            resp::SUCCESS
        );
    }
    std::thread::sleep(Duration::from_millis(700)); // every broker has heartbeaten
    let elect = ElectMasterRequestHeader {
        cluster_name: Some("DefaultCluster".into()),
        broker_name: SET.into(),
        broker_id: Some(1),
        designate_elect: Some(false),
        invoke_time: None,
    };
    let elected = group[first].call(request(rc::CONTROLLER_ELECT_MASTER, &elect)).expect("answer");
    assert_eq!(
        (elected.code, elected.ext("masterBrokerId"), elected.ext("masterEpoch")),
        (resp::SUCCESS, Some("1"), Some("1")),
        "{elected:?}"
    );
    let altered = group[first].call(alter(1, 1, 1)).expect("answer");
    assert_eq!(
        (altered.code, altered.ext("newSyncStateSetEpoch")),
        (resp::SUCCESS, Some("2")),
        "{altered:?}"
    );
}

/// The Prometheus text a process serves on `port`.
/// The Raft term a controller reports in its metrics.
fn raft_term(c: &ControllerProc) -> u64 {
    let text = scrape(c.metrics_port);
    text.lines()
        .find_map(|l| l.strip_prefix("petrel_controller_raft_term "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no term in:\n{text}"))
}

/// A VoteRequest from a candidate that never was: a term far ahead and a log longer than any.
fn forged_vote(term: u64) -> RemotingCommand {
    let body = format!(
        r#"{{"vote":{{"leader_id":{{"term":{term},"node_id":7}},"committed":false}},"last_log_id":{{"leader_id":{{"term":{term},"node_id":7}},"index":1000000}}}}"#
    );
    RemotingCommand::request(rc::PETREL_RAFT_VOTE, 0).with_body(body.into_bytes())
}

/// Unprotected, one forged VoteRequest from any connection deposes the leader (its term jumps
/// and the group elects again). With `controllerRaftSecret` the controllers prove it to each
/// other (the group forms), and the same message is refused: same leader, same term.
#[test]
fn a_forged_vote_deposes_an_unprotected_leader_and_is_refused_with_a_raft_secret() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = common::ca_and_leaf(certs.path(), "raft");
    let secret = "controllerRaftSecret=the-group's-raft-secret".to_owned();
    // Plain; with the secret; with the secret over TLS (permissive, so the test's plain client
    // still reaches the port), peers verified against the CA and the proof bound to each session.
    let variants: [Vec<String>; 3] = [
        vec![],
        vec![secret.clone()],
        vec![
            secret,
            "tls.server.mode=permissive".into(),
            format!("tls.server.certPath={cert}"),
            format!("tls.server.keyPath={key}"),
            format!("tls.client.trustCertPath={ca}"),
        ],
    ];
    for variant in &variants {
        let dir = tempfile::tempdir().unwrap();
        let extra: Vec<&str> = variant.iter().map(String::as_str).collect();
        let secret = variant.first();
        let group = start_group_with(dir.path(), &extra);
        let l = leader(&group, &[0, 1, 2]);
        let before = raft_term(&group[l]);
        // Repeated for 3 s: openraft's leader lease turns away a vote that arrives while the
        // leader was heard from recently; past it, one forged vote is enough.
        let mut answers = Vec::new();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(3) && raft_term(&group[l]) <= before {
            answers.push(group[l].call(forged_vote(before + 100)).unwrap().code);
            std::thread::sleep(Duration::from_millis(100));
        }
        if secret.is_none() {
            assert!(answers.iter().all(|c| *c == resp::SUCCESS), "{answers:?}");
            assert!(
                raft_term(&group[l]) > before,
                "the forged votes changed nothing: the test proves nothing"
            );
            continue;
        }
        assert!(answers.iter().all(|c| *c == resp::NO_PERMISSION), "{answers:?}");
        assert_eq!(leader(&group, &[0, 1, 2]), l, "the leader stays");
        assert_eq!(raft_term(&group[l]), before, "and so does its term");
        let metrics = scrape(group[l].metrics_port);
        assert!(
            metrics.contains(&format!("petrel_controller_raft_refused_total {}", answers.len())),
            "{metrics}"
        );
        assert!(group[l].process.log().contains("did not prove controllerRaftSecret"));
    }
}

fn scrape(port: u16) -> String {
    let mut http = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut http, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut http, &mut text).unwrap();
    text
}

fn replica_info(c: &ControllerProc) -> RemotingCommand {
    c.call(request(
        rc::CONTROLLER_GET_REPLICA_INFO,
        &GetReplicaInfoRequestHeader { broker_name: SET.into() },
    ))
    .expect("answer")
}

#[test]
fn a_controller_group_replaces_a_dead_master_fences_the_old_one_and_outlives_its_leader() {
    let dir = tempfile::tempdir().unwrap();
    let mut group = start_group(dir.path());
    let first = leader(&group, &[0, 1, 2]);

    let (notice_addr, notices) = notice_listener();
    let addrs: HashMap<u64, String> = HashMap::from([(1, "127.0.0.1:1".into()), (2, "127.0.0.1:2".into()), (3, notice_addr)]);
    let alive = Arc::new(Mutex::new(addrs.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let beats = heartbeats(group.iter().map(|c| c.port).collect(), Arc::clone(&alive), Arc::clone(&stop));
    three_in_sync(&group, first, &addrs);

    // The master stops heartbeating: the leader elects the in-sync replica with the most data.
    alive.lock().unwrap().remove(&1);
    let died = Instant::now();
    let deadline = died + Duration::from_secs(10);
    let info = loop {
        let info = replica_info(&group[first]);
        if info.ext("masterBrokerId") != Some("1") {
            break info;
        }
        assert!(
            Instant::now() < deadline,
            "no new master 10 s after the old one stopped heartbeating"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let failover = died.elapsed();
    assert_eq!(
        (info.ext("masterBrokerId"), info.ext("masterEpoch")),
        (Some("3"), Some("2")),
        "{info:?}"
    );
    assert!(
        failover < Duration::from_secs(5),
        "replaced after {failover:?} (heartbeat timeout 1.5 s)"
    );
    // The first election was announced too; the second must follow it.
    let first_notice = notices
        .recv_timeout(Duration::from_secs(5))
        .expect("the first master was announced");
    assert_eq!(first_notice.ext("masterEpoch"), Some("1"));
    let notice = notices.recv_timeout(Duration::from_secs(5)).expect("the new master was told");
    assert_eq!(
        (notice.code, notice.ext("masterBrokerId"), notice.ext("masterEpoch")),
        (rc::NOTIFY_BROKER_ROLE_CHANGED, Some("3"), Some("2"))
    );

    let stale = group[first].call(alter(1, 1, 3)).expect("answer");
    assert_eq!(
        stale.code,
        resp::CONTROLLER_INVALID_MASTER,
        "the old master's change is refused: {stale:?}"
    );
    let fenced = group[first].call(alter(3, 1, 3)).expect("answer");
    assert_eq!(
        fenced.code,
        resp::CONTROLLER_FENCED_MASTER_EPOCH,
        "an old epoch is fenced: {fenced:?}"
    );

    // SIGKILL the leading controller: the other two go on with the same state.
    group[first].kill();
    let live: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    let second = leader(&group, &live);
    let info = replica_info(&group[second]);
    assert_eq!(
        (info.code, info.ext("masterBrokerId"), info.ext("masterEpoch")),
        (resp::SUCCESS, Some("3"), Some("2")),
        "{info:?}"
    );
    // Live brokers keep heartbeating: the new leader must not take broker 3 for dead.
    std::thread::sleep(Duration::from_secs(3));
    let info = replica_info(&group[second]);
    assert_eq!(
        (info.ext("masterBrokerId"), info.ext("masterEpoch")),
        (Some("3"), Some("2")),
        "no election after the controller failover: {info:?}"
    );

    group[first].spawn();
    let agreed = leader(&group, &[0, 1, 2]);
    assert_ne!(agreed, first, "the restarted controller follows");
    stop.store(true, Ordering::Relaxed);
    beats.join().unwrap();
}

#[test]
fn get_sync_state_data_lists_in_sync_and_other_replicas_as_mqadmin_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let group = start_group(dir.path());
    let first = leader(&group, &[0, 1, 2]);
    for id in 1..=2u64 {
        apply_broker_id(&group[first], id, format!("127.0.0.1:{id};u{id}"));
    }
    let elect = ElectMasterRequestHeader {
        cluster_name: None,
        broker_name: SET.into(),
        broker_id: Some(2),
        designate_elect: None,
        invoke_time: None,
    };
    assert_eq!(
        group[first]
            .call(request(rc::CONTROLLER_ELECT_MASTER, &elect))
            .expect("answer")
            .code,
        resp::SUCCESS
    );
    let query = RemotingCommand::request(rc::CONTROLLER_GET_SYNC_STATE_DATA, 0).with_body(br#"["broker-a","unknown"]"#.to_vec());
    let answer = group[first].call(query).expect("answer");
    assert_eq!(answer.code, resp::SUCCESS);
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    let set = &body["replicasInfoTable"]["broker-a"];
    assert_eq!(set["masterBrokerId"], 2);
    assert_eq!(set["masterEpoch"], 1);
    assert_eq!(set["inSyncReplicas"][0]["brokerId"], 2);
    assert_eq!(set["notInSyncReplicas"][0]["brokerId"], 1);
    assert_eq!(set["notInSyncReplicas"][0]["alive"], false);
    assert!(body["replicasInfoTable"].get("unknown").is_none());
    let bad = group[first]
        .call(RemotingCommand::request(rc::CONTROLLER_GET_SYNC_STATE_DATA, 0).with_body(b"not json".to_vec()))
        .expect("answer");
    assert_eq!(
        bad.code,
        resp::CONTROLLER_INVALID_REQUEST,
        "a bad body gets a clear code, and the controller keeps serving"
    );
    assert_eq!(replica_info(&group[first]).code, resp::SUCCESS);

    // The same facts for Prometheus, from the leader.
    let scrape = scrape(group[first].metrics_port);
    for line in [
        "petrel_controller_is_leader 1",
        "petrel_controller_master_broker_id{broker_name=\"broker-a\"} 2",
        "petrel_controller_master_epoch{broker_name=\"broker-a\"} 1",
        "petrel_controller_replicas{broker_name=\"broker-a\"} 2",
        "petrel_controller_elections_total 1",
    ] {
        assert!(scrape.lines().any(|l| l == line), "no `{line}` in\n{scrape}");
    }

    // CLEAN_BROKER_DATA (mqadmin cleanBrokerMetadata): a dead replica goes; a set with a master,
    // the master itself and a malformed list are refused with 2009.
    let clean = |ids: Option<&str>, living: bool| {
        let h = CleanControllerBrokerDataRequestHeader {
            cluster_name: Some("DefaultCluster".into()),
            broker_name: SET.into(),
            broker_controller_ids_to_clean: ids.map(str::to_owned),
            is_clean_living_broker: Some(living),
            invoke_time: None,
        };
        group[first].call(request(rc::CLEAN_BROKER_DATA, &h)).expect("answer").code
    };
    assert_eq!(
        clean(None, false),
        resp::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        "the set has a master"
    );
    assert_eq!(
        clean(Some("2"), true),
        resp::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        "the master is never cleaned by id"
    );
    assert_eq!(clean(Some("1;x"), false), resp::CONTROLLER_INVALID_CLEAN_BROKER_METADATA);
    assert_eq!(clean(Some("1"), false), resp::SUCCESS, "broker 1 sends no heartbeat: dead, cleaned");
    let query = RemotingCommand::request(rc::CONTROLLER_GET_SYNC_STATE_DATA, 0).with_body(br#"["broker-a"]"#.to_vec());
    let body: serde_json::Value = serde_json::from_slice(&group[first].call(query).expect("answer").body).unwrap();
    assert_eq!(
        body["replicasInfoTable"]["broker-a"]["notInSyncReplicas"],
        serde_json::json!([]),
        "{body}"
    );
}

#[test]
fn a_paused_controller_leader_resumes_as_a_follower_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let group = start_group(dir.path());
    let first = leader(&group, &[0, 1, 2]);
    let addrs: HashMap<u64, String> = (1..=3).map(|id| (id, format!("127.0.0.1:{id}"))).collect();
    let alive = Arc::new(Mutex::new(addrs.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let beats = heartbeats(group.iter().map(|c| c.port).collect(), Arc::clone(&alive), Arc::clone(&stop));
    three_in_sync(&group, first, &addrs);

    // SIGSTOP the leading controller for longer than an election timeout. While it sleeps, the
    // others elect a leader of their own, and the master of the broker set dies.
    group[first].process.signal(Signal::SIGSTOP).unwrap();
    let others: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    let second = leader(&group, &others);
    alive.lock().unwrap().remove(&1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while replica_info(&group[second]).ext("masterBrokerId") != Some("3") {
        assert!(Instant::now() < deadline, "the majority elected no new master");
        std::thread::sleep(Duration::from_millis(50));
    }
    // It wakes up believing it leads, with a heartbeat table where every broker is silent: it
    // must not commit anything of that term, and must follow the new leader.
    group[first].process.signal(Signal::SIGCONT).unwrap();
    let agreed = leader(&group, &[0, 1, 2]);
    assert_ne!(agreed, first, "the woken controller follows");
    std::thread::sleep(Duration::from_secs(2));
    let info = replica_info(&group[agreed]);
    assert_eq!(
        (info.ext("masterBrokerId"), info.ext("masterEpoch")),
        (Some("3"), Some("2")),
        "nothing the paused leader proposed took effect: {info:?}"
    );
    let log = group[first].process.log();
    assert!(!log.contains("elected a new master broker_name=\"broker-a\" master=2"), "{log}");
    stop.store(true, Ordering::Relaxed);
    beats.join().unwrap();
}

/// A `petrel namesrv` process for brokers that outlive each other.
/// A Petrel broker of set `broker-a` in controller mode.
fn controlled_broker(ns_port: u16, controllers: &str, extra: &[&str]) -> common::Petrel {
    let ns = format!("127.0.0.1:{ns_port}");
    let controller_addr = format!("controllerAddr={controllers}");
    let mut args = vec![
        "--namesrv-addr",
        &ns,
        "--set",
        "enableControllerMode=true",
        "--set",
        &controller_addr,
        "--set",
        "brokerName=broker-a",
        "--set",
        "allAckInSyncStateSet=true",
        "--set",
        "mappedFileSizeCommitLog=1048576",
        "--set",
        "syncBrokerMetadataPeriod=300",
        "--set",
        "checkSyncStateSetPeriod=300",
        "--set",
        "brokerHeartbeatInterval=300",
        "--set",
        "controllerHeartBeatTimeoutMills=3000",
        "--set",
        "haMaxTimeSlaveNotCatchup=3000",
        "--set",
        "haSendHeartbeatInterval=1000",
    ];
    // Later keys win.
    args.extend_from_slice(extra);
    common::Petrel::start(&args)
}

/// A name server, three controllers and three brokers of `broker-a` in controller mode.
fn controlled_set(dir: &Path, extra: &[&str]) -> (common::NameServer, Vec<ControllerProc>, Vec<common::Petrel>) {
    let ns = common::NameServer::start(dir, &[]);
    let group = start_group(dir);
    let controllers: Vec<String> = group.iter().map(|c| format!("127.0.0.1:{}", c.port)).collect();
    let controllers = controllers.join(";");
    let brokers = (0..3).map(|_| controlled_broker(ns.port, &controllers, extra)).collect();
    (ns, group, brokers)
}

/// (master broker address, SyncStateSet size) as the controllers have them.
fn set_state(group: &[ControllerProc]) -> Option<(String, usize)> {
    group.iter().find_map(|c| {
        let a = c.call(request(
            rc::CONTROLLER_GET_REPLICA_INFO,
            &GetReplicaInfoRequestHeader { broker_name: SET.into() },
        ))?;
        let master = a.ext("masterAddress").filter(|m| !m.is_empty())?.to_owned();
        let set: petrel_protocol::body::SyncStateSetBody = serde_json::from_slice(&a.body).ok()?;
        Some((master, set.sync_state_set.len()))
    })
}

fn wait_set(group: &[ControllerProc], what: &str, ok: impl Fn(&(String, usize)) -> bool) -> (String, usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = set_state(group).filter(|s| ok(s)) {
            return s;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {:?}", set_state(group));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The bodies of queue 0 of `Fail` on `b`, which must be exactly `expected`.
fn assert_queue(b: &common::Petrel, expected: &[String], who: &str) {
    let mut c = b.broker();
    let got = common::pull_bodies(&mut c, "Fail", 0, 0, expected.len(), Duration::from_secs(10));
    assert_eq!(got, expected, "{who} holds every acknowledged message, in order");
}

/// Rounds of: acknowledged sends to the master, kill -9 of the master, the first SEND_OK on the
/// new master, every acknowledged message there, the old master restarted and back in the
/// SyncStateSet holding everything. `PETREL_FAILOVER_KILLS` rounds (one in the suite;
/// docs/benchmarks.md has the distribution over twenty).
#[test]
fn petrel_brokers_in_controller_mode_fail_over_without_losing_an_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let (_ns, group, mut brokers) = controlled_set(dir.path(), &[]);
    let (mut master_addr, _) = wait_set(&group, "a master with all three in sync", |(_, n)| *n == 3);
    let kills: usize = std::env::var("PETREL_FAILOVER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut acked: Vec<String> = Vec::new();
    let mut failovers = Vec::new();
    for round in 0..kills {
        let m = by_addr(&brokers, &master_addr);
        let mut c = brokers[m].broker();
        for _ in 0..50 {
            let body = format!("m{}", acked.len());
            let a = c.call(common::send_v2("Fail", 0, "t", acked.len(), body.as_bytes()));
            assert_eq!(a.code, resp::SUCCESS, "round {round}: every replica acks: {:?}", a.remark);
            acked.push(body);
        }
        // A slave refuses writes.
        let s = (m + 1) % 3;
        let refused = brokers[s].broker().call(common::send_v2("Fail", 1, "t", 0, b"no"));
        assert_eq!(refused.code, resp::SERVICE_NOT_AVAILABLE, "round {round}");

        brokers[m].kill();
        let killed = Instant::now();
        let (new_addr, _) = wait_set(&group, "a new master", |(a, _)| *a != master_addr);
        let n = by_addr(&brokers, &new_addr);
        let mut c = brokers[n].broker();
        first_send_ok(&mut c, &mut acked, killed + Duration::from_secs(10), || {
            format!("round {round}: the new master takes no sends")
        });
        failovers.push(killed.elapsed());
        println!(
            "round {round}: kill -9 of the master to the first SEND_OK on the new master: {:?}",
            killed.elapsed()
        );
        assert_queue(&brokers[n], &acked, "the new master");

        // The old master rejoins as a replica and holds what the new master took since.
        brokers[m].spawn();
        wait_set(&group, "the old master back in the SyncStateSet", |(a, k)| {
            *a == new_addr && *k == 3
        });
        let body = format!("m{}", acked.len());
        let a = c.call(common::send_v2("Fail", 0, "t", acked.len(), body.as_bytes()));
        assert_eq!(a.code, resp::SUCCESS, "round {round}: {:?}", a.remark);
        acked.push(body);
        assert_queue(&brokers[m], &acked, "the rejoined replica");
        master_addr = new_addr;
    }
    common::report_failovers(&mut failovers);
}

/// A master killed and back before the controllers' heartbeat timeout (3 s) is still their
/// master: it must take that role again at once, with the epoch it led, rather than leave the set
/// masterless for as long as they keep naming it (found by `petrel chaos`: 72 s without a send).
#[test]
fn a_master_restarted_before_the_controllers_notice_leads_its_epoch_again() {
    let dir = tempfile::tempdir().unwrap();
    let (_ns, group, mut brokers) = controlled_set(dir.path(), &[]);
    let (master_addr, m, _c, mut acked) = master_with_twenty(&group, &brokers);
    brokers[m].kill();
    let killed = Instant::now();
    brokers[m].spawn();
    let mut c = brokers[m].broker();
    first_send_ok(&mut c, &mut acked, killed + Duration::from_secs(10), || {
        format!("the restarted master takes no sends\n{}", brokers[m].log())
    });
    assert!(
        brokers[m].log().contains("resuming as the master of its epoch"),
        "{}",
        brokers[m].log()
    );
    let (now_addr, _) = wait_set(&group, "all three in sync again", |(_, n)| *n == 3);
    assert_eq!(now_addr, master_addr, "the controllers never replaced it");
    send_acknowledged(&mut c, &mut acked, 5);
    for (i, b) in brokers.iter().enumerate() {
        assert_queue(b, &acked, &format!("broker {i}"));
    }
}

/// A master back before the controllers' timeout whose log recovered to less than the set had
/// confirmed (here: a crash that took its checkpoint and the tail it had written with it) must
/// not lead: as master it would make the others cut what they hold. It declines, stays silent
/// until the controllers elect a member that holds everything, and follows it.
#[test]
fn a_master_back_with_less_than_the_set_confirmed_lets_another_lead() {
    let dir = tempfile::tempdir().unwrap();
    // Time for a debug build to restart before the controllers give up on it.
    let (_ns, group, mut brokers) = controlled_set(dir.path(), &["--set", "controllerHeartBeatTimeoutMills=6000"]);
    let (master_addr, m, mut c, acked) = master_with_twenty(&group, &brokers);
    // Where the 11th message starts in the master's log (dispatched after its send was
    // answered, so asked until it is there).
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = c.call(common::pull("Probe", "Fail", 0, 10, 0));
        if r.code == resp::SUCCESS || Instant::now() >= deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    let cut_at = petrel_protocol::decode_messages(&r.body).unwrap()[0].commit_log_offset;
    // The confirm and dispatch checkpoints are written every second.
    std::thread::sleep(Duration::from_millis(2500));
    brokers[m].kill();
    let killed = Instant::now();
    let log_dir = brokers[m].data_dir().join("commitlog");
    std::fs::remove_file(log_dir.join("checkpoint")).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let segment = std::fs::File::options()
            .write(true)
            .open(log_dir.join(format!("{:020}", 0)))
            .unwrap();
        segment.write_all_at(&vec![0u8; 256 << 10], cut_at as u64).unwrap();
    }
    brokers[m].spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !brokers[m].log().contains("declining to lead") {
        assert!(Instant::now() < deadline, "it never declined:\n{}", brokers[m].log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(killed.elapsed() < Duration::from_secs(6), "back before the controllers' timeout");
    let (new_addr, _) = wait_set(&group, "another master", |(a, _)| *a != master_addr);
    let n = by_addr(&brokers, &new_addr);
    assert!(
        !brokers[m].log().contains("resuming as the master of its epoch"),
        "{}",
        brokers[m].log()
    );
    assert_queue(&brokers[n], &acked, "the new master");
    wait_set(&group, "the old master back in the SyncStateSet", |(a, k)| {
        *a == new_addr && *k == 3
    });
    assert_queue(&brokers[m], &acked, "the old master, caught up as a replica");
}

/// `count` sends to `c`, each acknowledged, appended to `acked`.
fn send_acknowledged(c: &mut Client, acked: &mut Vec<String>, count: usize) {
    for _ in 0..count {
        let body = format!("m{}", acked.len());
        let a = c.call(common::send_v2("Fail", 0, "t", acked.len(), body.as_bytes()));
        assert_eq!(a.code, resp::SUCCESS, "{:?}", a.remark);
        acked.push(body);
    }
}

/// Sends to a (new) master until one is acknowledged, failing with `what` and the last answer
/// at `deadline`.
fn first_send_ok(d: &mut Client, acked: &mut Vec<String>, deadline: Instant, what: impl Fn() -> String) {
    loop {
        let body = format!("m{}", acked.len());
        let a = d.call(common::send_v2("Fail", 0, "t", acked.len(), body.as_bytes()));
        if a.code == resp::SUCCESS {
            acked.push(body);
            return;
        }
        assert!(Instant::now() < deadline, "{}: last answer {} {:?}", what(), a.code, a.remark);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (30 s) until `master` leads a SyncStateSet of three again, `old` among them.
fn wait_rejoined(group: &[ControllerProc], master: &str, old: &common::Petrel) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while set_state(group) != Some((master.to_owned(), 3)) {
        assert!(Instant::now() < deadline, "the old master did not rejoin:\n{}", old.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_rejoining_master_cuts_what_only_it_held_and_a_paused_master_gets_no_acknowledgement() {
    let dir = tempfile::tempdir().unwrap();
    // Slaves never leave the SyncStateSet during the test: the master cannot shed them.
    let extra = ["--set", "haMaxTimeSlaveNotCatchup=600000", "--set", "slaveTimeout=1000"];
    let (_ns, group, mut brokers) = controlled_set(dir.path(), &extra);
    let (master_addr, _) = wait_set(&group, "a master with all three in sync", |(_, n)| *n == 3);
    let m = by_addr(&brokers, &master_addr);
    let mut c = brokers[m].broker();
    for seq in 0..20 {
        assert_eq!(
            c.call(common::send_v2("Cut", 0, "t", seq, format!("m{seq}").as_bytes())).code,
            resp::SUCCESS
        );
    }
    // Both slaves stop: the master writes, but no send is acknowledged.
    let slaves: Vec<usize> = (0..3).filter(|i| *i != m).collect();
    for s in &slaves {
        brokers[*s].signal(Signal::SIGSTOP);
    }
    for seq in 100..103 {
        let a = c.call(common::send_v2("Cut", 0, "t", seq, format!("lost{seq}").as_bytes()));
        assert_eq!(
            a.code,
            resp::FLUSH_SLAVE_TIMEOUT,
            "not acknowledged while replicas are away: {:?}",
            a.remark
        );
    }
    // Nobody reads what is not on every in-sync replica.
    assert_eq!(queue_max(&mut c, "Cut"), 20, "consumers see only confirmed messages");
    brokers[m].kill();
    for s in &slaves {
        brokers[*s].signal(Signal::SIGCONT);
    }
    let (new_addr, _) = wait_set(&group, "a new master", |(a, _)| *a != master_addr);
    let n = by_addr(&brokers, &new_addr);
    let mut c = brokers[n].broker();
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.call(common::send_v2("Cut", 0, "t", 200, b"after")).code != resp::SUCCESS {
        assert!(Instant::now() < deadline, "the new master takes no sends");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The new master's log: the 20 acknowledged, then "after". Between them it may hold the
    // first of the unacknowledged ones: they were in a stopped slave's socket buffer when it was
    // stopped, and it appended them once resumed (allowed: nobody was told they were stored).
    let held = usize::try_from(queue_max(&mut c, "Cut")).unwrap();
    let on_new_master = common::pull_bodies(&mut c, "Cut", 0, 0, held, Duration::from_secs(10));
    let kept: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    assert_eq!(on_new_master[..20], kept[..], "every acknowledged message is on the new master");
    assert_eq!(on_new_master.last().map(String::as_str), Some("after"));
    let between = &on_new_master[20..held - 1];
    let unacked: Vec<String> = (100..103).map(|i| format!("lost{i}")).collect();
    assert!(between.len() <= 3 && between[..] == unacked[..between.len()], "{on_new_master:?}");
    // The old master comes back and must drop what only it held (it has all three; when the new
    // master has them all too, there is nothing to cut): the new master's log exactly.
    brokers[m].spawn();
    wait_rejoined(&group, &new_addr, &brokers[m]);
    if between.len() < 3 {
        assert!(brokers[m].log().contains("cut the log's divergent tail"), "{}", brokers[m].log());
    }
    let mut old = brokers[m].broker();
    let bodies = common::pull_bodies(&mut old, "Cut", 0, 0, held, Duration::from_secs(10));
    assert_eq!(bodies, on_new_master, "the replica holds exactly the new master's log");
    assert_eq!(
        queue_max(&mut old, "Cut"),
        i64::try_from(held).unwrap(),
        "nothing of the cut tail is left"
    );
}

/// Queue 0's max offset as a pull past the end reports it.
fn queue_max(c: &mut Client, topic: &str) -> i64 {
    let r = c.call(common::pull("BodyReaders", topic, 0, 1000, 0));
    r.ext("maxOffset").unwrap().parse().unwrap()
}

/// The broker whose port ends `addr`.
fn by_addr(brokers: &[common::Petrel], addr: &str) -> usize {
    brokers.iter().position(|b| addr.ends_with(&format!(":{}", b.broker_port))).unwrap()
}

/// Once all three are in sync: the master's address and index, a client to it, and the 20
/// messages it acknowledged.
fn master_with_twenty(group: &[ControllerProc], brokers: &[common::Petrel]) -> (String, usize, Client, Vec<String>) {
    let (master_addr, _) = wait_set(group, "a master with all three in sync", |(_, n)| *n == 3);
    let m = by_addr(brokers, &master_addr);
    let mut acked: Vec<String> = Vec::new();
    let mut c = brokers[m].broker();
    send_acknowledged(&mut c, &mut acked, 20);
    (master_addr, m, c, acked)
}

#[test]
fn a_paused_master_resumes_fenced_and_acknowledges_nothing_as_a_second_master() {
    let dir = tempfile::tempdir().unwrap();
    let (_ns, group, brokers) = controlled_set(dir.path(), &["--set", "slaveTimeout=1000"]);
    let (master_addr, m, mut c, mut acked) = master_with_twenty(&group, &brokers);
    // Paused past its heartbeat timeout (3 s): the controllers elect another member.
    brokers[m].signal(Signal::SIGSTOP);
    let (new_addr, _) = wait_set(&group, "a new master", |(a, _)| *a != master_addr);
    let n = by_addr(&brokers, &new_addr);
    let mut d = brokers[n].broker();
    first_send_ok(&mut d, &mut acked, Instant::now() + Duration::from_secs(20), || {
        "the new master takes no sends".to_owned()
    });
    // The old master wakes up cut off from the controllers (paused here), so it still believes
    // it leads: its SyncStateSet's other members follow the new master, and nothing it takes is
    // acknowledged.
    for ctl in &group {
        ctl.signal(Signal::SIGSTOP);
    }
    brokers[m].signal(Signal::SIGCONT);
    for i in 0..3 {
        let a = c.call(common::send_v2("Fail", 0, "t", 100 + i, b"from the old master"));
        assert_eq!(
            a.code,
            resp::FLUSH_SLAVE_TIMEOUT,
            "a fenced master acknowledged a send: {:?}",
            a.remark
        );
    }
    for ctl in &group {
        ctl.signal(Signal::SIGCONT);
    }
    // It learns the new epoch, becomes a replica, drops what it took alone, and rejoins.
    wait_rejoined(&group, &new_addr, &brokers[m]);
    assert_eq!(
        c.call(common::send_v2("Fail", 0, "t", 0, b"late")).code,
        resp::SERVICE_NOT_AVAILABLE,
        "it is a replica now"
    );
    send_acknowledged(&mut d, &mut acked, 1);
    assert_queue(&brokers[n], &acked, "the new master");
    assert_queue(&brokers[m], &acked, "the old master, now a replica");
}

#[test]
fn a_master_partitioned_from_the_controllers_is_replaced_and_acknowledges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ns = common::NameServer::start(dir.path(), &[]);
    let group = start_group(dir.path());
    // Each broker (process b) reaches each controller (process 3 + i) through a link of the
    // chaos harness's fault proxy: cutting a link stalls it both ways, closing nothing, as a
    // network partition does.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut proxies = runtime.block_on(Proxies::start(6, &[])).unwrap();
    let controllers = [3, 4, 5];
    let brokers: Vec<common::Petrel> = (0..3)
        .map(|b| {
            let addrs: Vec<String> = group
                .iter()
                .zip(controllers)
                .map(|(c, i)| {
                    let backend = std::net::SocketAddr::from(([127, 0, 0, 1], c.port));
                    runtime.block_on(proxies.link(b, i, backend)).unwrap().to_string()
                })
                .collect();
            controlled_broker(ns.port, &addrs.join(";"), &["--set", "slaveTimeout=1000"])
        })
        .collect();
    let (master_addr, m, mut c, mut acked) = master_with_twenty(&group, &brokers);
    proxies.isolate(m, &controllers);
    // The controllers hear nothing from the master past its heartbeat timeout and elect another.
    let (new_addr, _) = wait_set(&group, "a new master", |(a, _)| *a != master_addr);
    let n = by_addr(&brokers, &new_addr);
    let mut d = brokers[n].broker();
    first_send_ok(&mut d, &mut acked, Instant::now() + Duration::from_secs(20), || {
        "the new master takes no sends".to_owned()
    });
    // Clients still reach the old master, which cannot learn that it was replaced.
    for i in 0..3 {
        let a = c.call(common::send_v2("Fail", 0, "t", 100 + i, b"from the partitioned master"));
        assert_ne!(a.code, resp::SUCCESS, "a partitioned master acknowledged a send: {:?}", a.remark);
    }
    proxies.heal(m, &controllers);
    wait_rejoined(&group, &new_addr, &brokers[m]);
    send_acknowledged(&mut d, &mut acked, 1);
    assert_queue(&brokers[n], &acked, "the new master");
    assert_queue(&brokers[m], &acked, "the old master, now a replica");
}

#[test]
fn petrel_serve_runs_an_embedded_controller_that_its_own_broker_uses() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("controller.conf");
    std::fs::write(
        &conf,
        format!(
            "controllerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\ncontrollerStorePath={}\n",
            dir.path().join("controller").display()
        ),
    )
    .unwrap();
    let controller_addr = format!("controllerAddr=127.0.0.1:{port}");
    let metrics_port = free_port();
    let metrics = format!("metricsPromExporterPort={metrics_port}");
    let broker = common::Petrel::start(&[
        "--controller-config",
        conf.to_str().unwrap(),
        "--set",
        "enableControllerMode=true",
        "--set",
        &controller_addr,
        "--set",
        "syncBrokerMetadataPeriod=300",
        "--set",
        "metricsExporterType=PROM",
        "--set",
        "metricsPromExporterHost=127.0.0.1",
        "--set",
        &metrics,
    ]);
    let mut c = broker.broker();
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.call(common::send_v2("Embedded", 0, "t", 0, b"x")).code != resp::SUCCESS {
        assert!(Instant::now() < deadline, "the broker never became master:\n{}", broker.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let meta = Client::connect(port).call(RemotingCommand::request(rc::CONTROLLER_GET_METADATA_INFO, 0));
    assert_eq!(meta.ext("isLeader"), Some("true"), "{meta:?}");
    let info = Client::connect(port).call(request(
        rc::CONTROLLER_GET_REPLICA_INFO,
        &GetReplicaInfoRequestHeader {
            broker_name: "broker-a".into(),
        },
    ));
    assert_eq!(
        info.ext("masterAddress"),
        Some(format!("127.0.0.1:{}", broker.broker_port).as_str()),
        "the process's own broker is its set's master"
    );
    let text = scrape(metrics_port);
    for line in ["petrel_role_master 1", "petrel_master_epoch 1"] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    assert!(text.lines().any(|l| l.starts_with("petrel_confirm_offset ")), "{text}");
}

/// openraft asks its network for a new client at every linearizable read (and every election
/// round): the clients must share one connection per peer. They each opened their own, which
/// stayed open until the peer's idle timeout (120 s): two connections per read.
#[test]
fn linearizable_reads_share_one_connection_per_peer() {
    let dir = tempfile::tempdir().unwrap();
    let group = start_group(dir.path());
    let first = leader(&group, &[0, 1, 2]);
    for _ in 0..50 {
        // GET_REPLICA_INFO is a linearizable read, whether or not the set exists.
        replica_info(&group[first]);
    }
    let peers: Vec<u16> = (0..3).filter(|i| *i != first).map(|i| group[i].port).collect();
    let open = procfs::net::tcp()
        .unwrap()
        .into_iter()
        .filter(|e| e.state == procfs::net::TcpState::Established && peers.contains(&e.remote_address.port()))
        .count();
    // The leader's connection to each follower, and the followers' to each other from the
    // first election: four, with room for a connection opened twice in a race.
    assert!(open <= 8, "{open} connections to the followers after 50 reads");
}
