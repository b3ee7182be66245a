//! Apache RocketMQ 5.5.0 brokers in controller mode (`enableControllerMode=true`,
//! `allAckInSyncStateSet=true`) with a group of three Petrel controllers: the brokers get their
//! ids, elect a master and grow the SyncStateSet through Petrel; every acknowledged message is
//! on the slave when the master is killed with SIGKILL; the slave becomes master through Petrel
//! and serves every message; mqadmin's controller commands read Petrel's answers, and
//! `mqadmin electMaster` switches the master on purpose without losing a message.
//!
//! Needs a Java runtime and the RocketMQ jars: `scripts/interop-controller.sh` fetches them and
//! runs this file's ignored test (as `scripts/test.sh` does).
#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Client, free_port, free_port_block, mqadmin, pull_bodies, send_v2};
use petrel_chaos::process::Process;
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, GetReplicaInfoRequestHeader};

/// `petrel` with `args`, its output in `log`, started through the harness tests and chaos
/// share (killed on drop).
fn petrel(args: &[String], log: &Path) -> Process {
    let mut process = Process::new(args.join(" "), env!("CARGO_BIN_EXE_petrel"), args.to_vec(), log);
    process.start().unwrap();
    process
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An Apache RocketMQ process (a broker, or a controller) started by scripts/reference-lib.sh;
/// killed on drop.
struct RefProcess {
    pid: i32,
    port: u16,
    work: PathBuf,
}

/// Runs `function` of scripts/reference-lib.sh with `args` and returns the pid it prints.
fn reference(function: &str, args: &[&str], env: &[(&str, &str)]) -> i32 {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source scripts/reference-lib.sh && {function} \"$@\""))
        .arg("reference")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(pid) = stdout.trim().lines().last().and_then(|l| l.trim().parse().ok()) else {
        panic!("{function} did not start: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    };
    pid
}

impl RefProcess {
    fn start(work: &Path, namesrv: &str, port: u16, conf_extra: &str) -> RefProcess {
        std::fs::create_dir_all(work).unwrap();
        let args = [work.to_str().unwrap(), namesrv, &port.to_string(), "ASYNC_FLUSH"];
        let pid = reference(
            "ref_broker",
            &args,
            &[("REF_BROKER_CONF_EXTRA", conf_extra), ("REF_BROKER_HEAP", "256m")],
        );
        RefProcess {
            pid,
            port,
            work: work.to_owned(),
        }
    }

    fn kill(&self) {
        // SAFETY: plain kill(2) on a pid the script printed.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
    }

    fn broker_log(&self) -> String {
        std::fs::read_to_string(self.work.join("broker.log")).unwrap_or_default()
    }
}

impl Drop for RefProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The controller group's answer to CONTROLLER_GET_REPLICA_INFO, from whichever controller leads.
fn replica_info(controllers: &[u16]) -> Option<RemotingCommand> {
    for port in controllers {
        let header = GetReplicaInfoRequestHeader {
            broker_name: "broker-a".into(),
        };
        let request = RemotingCommand::request(rc::CONTROLLER_GET_REPLICA_INFO, 0).with_ext_fields(header.to_ext());
        // A controller that is down, or dies while answering, is skipped: another one leads.
        let Some(answer) = Client::try_connect(*port).and_then(|mut c| c.try_call(request)) else {
            continue;
        };
        if answer.code == resp::SUCCESS {
            return Some(answer);
        }
    }
    None
}

/// Waits until the set has a master and `members` in-sync replicas; returns the master's address.
/// A broker whose log a failed wait shows.
trait Logged {
    /// The last lines of its log.
    fn log_tail(&self) -> String;
}

impl Logged for RefProcess {
    fn log_tail(&self) -> String {
        self.broker_log().lines().rev().take(15).collect::<Vec<_>>().join("\n")
    }
}

impl Logged for common::Petrel {
    fn log_tail(&self) -> String {
        self.log().lines().rev().take(30).collect::<Vec<_>>().join("\n")
    }
}

fn wait_for_set(controllers: &[u16], members: usize, not_master: Option<&str>, brokers: &[&dyn Logged]) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(info) = replica_info(controllers) {
            let set: serde_json::Value = serde_json::from_slice(&info.body).unwrap_or_default();
            let size = set["syncStateSet"].as_array().map_or(0, Vec::len);
            if let Some(master) = info.ext("masterAddress").filter(|m| Some(*m) != not_master && size == members) {
                return master.to_owned();
            }
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = brokers.iter().map(|b| b.log_tail()).collect();
            panic!(
                "no master with {members} in-sync replicas within 90 s: {:?}\n{}",
                replica_info(controllers),
                logs.join("\n----\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Fails if the set's SyncStateSet changes (its epoch moves or its size leaves `members`) within
/// `window`.
fn assert_set_steady(controllers: &[u16], members: usize, window: Duration, brokers: &[&dyn Logged]) {
    let read = || {
        let info = replica_info(controllers)?;
        let set: serde_json::Value = serde_json::from_slice(&info.body).ok()?;
        Some((
            set["syncStateSetEpoch"].as_i64()?,
            set["syncStateSet"].as_array().map_or(0, Vec::len),
        ))
    };
    let first = read().expect("the controllers answer GET_REPLICA_INFO");
    assert_eq!(first.1, members, "the set has {members} members");
    let deadline = Instant::now() + window;
    while Instant::now() < deadline {
        if let Some(now) = read().filter(|now| *now != first) {
            let logs: Vec<String> = brokers.iter().map(|b| b.log_tail()).collect();
            panic!(
                "the SyncStateSet moved from (epoch, size) {first:?} to {now:?}\n{}",
                logs.join("\n----\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Three controllers: Petrel's, or Apache RocketMQ's own with PETREL_FAILOVER_CONTROLLERS=rocketmq
/// (for a side-by-side figure in docs/benchmarks.md). Returns their ports and processes.
fn start_controllers(dir: &Path) -> (Vec<u16>, Vec<Process>, Vec<RefProcess>) {
    let controller_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers: Vec<String> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("n{i}-127.0.0.1:{p}"))
        .collect();
    let reference_controllers = std::env::var("PETREL_FAILOVER_CONTROLLERS").is_ok_and(|v| v == "rocketmq");
    let mut _controllers: Vec<Process> = Vec::new();
    let mut _reference_controllers: Vec<RefProcess> = Vec::new();
    for (i, port) in controller_ports.iter().enumerate() {
        if reference_controllers {
            let work = dir.join(format!("c{i}"));
            std::fs::create_dir_all(&work).unwrap();
            let args = [work.to_str().unwrap(), &peers.join(";"), &format!("n{i}")];
            let pid = reference("ref_controller", &args, &[("REF_SCAN_INTERVAL_MS", "500")]);
            _reference_controllers.push(RefProcess { pid, port: *port, work });
            continue;
        }
        let args = vec![
            "controller".into(),
            "--set".into(),
            format!("controllerDLegerPeers={}", peers.join(";")),
            "--set".into(),
            format!("controllerDLegerSelfId=n{i}"),
            "--set".into(),
            format!("controllerStorePath={}", dir.join(format!("c{i}")).display()),
            "--set".into(),
            "scanNotActiveBrokerInterval=500".into(),
        ];
        _controllers.push(petrel(&args, &dir.join(format!("c{i}.log"))));
    }
    for port in &controller_ports {
        wait_listening(*port);
    }
    (controller_ports, _controllers, _reference_controllers)
}

/// A `petrel namesrv` for the brokers, and its address.
fn start_namesrv(dir: &Path) -> (Process, String) {
    let ns_port = free_port();
    let namesrv = format!("127.0.0.1:{ns_port}");
    let ns = petrel(&["namesrv".into(), "--listen".into(), namesrv.clone()], &dir.join("namesrv.log"));
    wait_listening(ns_port);
    (ns, namesrv)
}

fn body(i: usize) -> String {
    format!("{i:06}-{}", "z".repeat(300))
}

#[test]
#[ignore = "needs Apache RocketMQ 5.5.0: run scripts/interop-controller.sh"]
#[expect(clippy::too_many_lines, reason = "one scenario, step by step, as the test reads")]
fn apache_rocketmq_brokers_fail_over_through_petrel_controllers_without_losing_an_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let (_ns, namesrv) = start_namesrv(dir.path());

    let (controller_ports, _controllers, _reference_controllers) = start_controllers(dir.path());
    let controller_addr: Vec<String> = controller_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let conf = format!(
        "enableControllerMode=true\ncontrollerAddr={}\nallAckInSyncStateSet=true\ncontrollerHeartBeatTimeoutMills=3000\nbrokerHeartbeatInterval=500\nsyncBrokerMetadataPeriod=1000\n",
        controller_addr.join(";")
    );
    // Ports 10 apart: each broker also takes its port - 2 (VIP channel) and + 1 (HA).
    let base = free_port_block(20);
    let a = RefProcess::start(&dir.path().join("a"), &namesrv, base + 3, &conf);
    let b = RefProcess::start(&dir.path().join("b"), &namesrv, base + 13, &conf);
    let mut brokers = [a, b];
    let mut master = wait_for_set(&controller_ports, 2, None, &[&brokers[0], &brokers[1]]);
    let listing = mqadmin(&namesrv, &["getSyncStateSet", "-a", &controller_addr[0], "-b", "broker-a"]);
    assert!(
        listing.contains("#SyncStateSetNums\t2"),
        "mqadmin getSyncStateSet reads Petrel's answer:\n{listing}"
    );
    let meta = mqadmin(&namesrv, &["getControllerMetaData", "-a", &controller_addr[1]]);
    assert!(
        meta.contains("#ControllerLeaderAddress\t127.0.0.1:"),
        "mqadmin getControllerMetaData:\n{meta}"
    );

    // Each round: messages acknowledged by the master (and so by its in-sync slave), a kill -9
    // of the master, the slave elected through Petrel serving sends and every message so far,
    // and the killed broker restarted to rejoin. PETREL_FAILOVER_KILLS sets the rounds (one in
    // the suite; docs/benchmarks.md has the distribution over twenty).
    let kills: usize = std::env::var("PETREL_FAILOVER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let per_round = 200;
    let mut sent = 0;
    let mut failovers = Vec::new();
    for round in 0..kills {
        let (old, survivor) = if master.ends_with(&format!(":{}", brokers[0].port)) {
            (0, 1)
        } else {
            (1, 0)
        };
        let mut c = Client::connect(brokers[old].port);
        for i in sent..sent + per_round {
            let r = c.call(send_v2("Failover", 0, "T", i, body(i).as_bytes()));
            assert_eq!(r.code, resp::SUCCESS, "round {round}: send {i} to the master: {:?}", r.remark);
        }
        sent += per_round;
        brokers[old].kill();
        let killed = Instant::now();
        let new_master = wait_for_set(&controller_ports, 1, Some(&master), &[&brokers[survivor]]);
        assert!(
            new_master.ends_with(&format!(":{}", brokers[survivor].port)),
            "the survivor is master: {new_master}"
        );
        let mut s = Client::connect(brokers[survivor].port);
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.call(send_v2("Failover", 0, "T", sent, body(sent).as_bytes())).code != resp::SUCCESS {
            assert!(Instant::now() < deadline, "round {round}: the new master accepts no send");
            std::thread::sleep(Duration::from_millis(100));
        }
        sent += 1;
        failovers.push(killed.elapsed());
        println!(
            "round {round}: kill -9 of the master to the first SEND_OK on the new master: {:?}",
            killed.elapsed()
        );
        let got = pull_bodies(&mut s, "Failover", 0, 0, sent, Duration::from_secs(30));
        assert_eq!(got.len(), sent, "round {round}: every acknowledged message is on the new master");
        if let Some(i) = (0..sent).find(|i| got[*i] != body(*i)) {
            panic!("round {round}: message {i} differs: {:.40}…", got[i]);
        }
        // The old master comes back: it keeps its broker id, follows the new master and rejoins
        // the SyncStateSet, after which sends wait for it again.
        let (work, port) = (brokers[old].work.clone(), brokers[old].port);
        brokers[old] = RefProcess::start(&work, &namesrv, port, &conf);
        let again = wait_for_set(&controller_ports, 2, Some(&master), &[&brokers[0], &brokers[1]]);
        assert_eq!(again, new_master, "round {round}: the survivor stays master");
        master = new_master;
    }
    let mut c = Client::connect(if master.ends_with(&format!(":{}", brokers[0].port)) {
        brokers[0].port
    } else {
        brokers[1].port
    });
    let r = c.call(send_v2("Failover", 0, "T", sent, body(sent).as_bytes()));
    assert_eq!(r.code, resp::SUCCESS, "a send acknowledged by both again: {:?}", r.remark);
    sent += 1;

    // A planned switch: mqadmin electMaster designates the slave, which becomes master through
    // the controllers while the old master steps down; nothing acknowledged is lost.
    let info = replica_info(&controller_ports).expect("replica info");
    let set: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    let master_id = info.ext("masterBrokerId").unwrap().to_owned();
    let slave_id = set["syncStateSet"]
        .as_array()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .find(|id| *id != master_id)
        .unwrap();
    let out = mqadmin(
        &namesrv,
        &[
            "electMaster",
            "-a",
            &controller_addr[2],
            "-c",
            "DefaultCluster",
            "-bn",
            "broker-a",
            "-b",
            &slave_id,
        ],
    );
    let slave_port = if master.ends_with(&format!(":{}", brokers[0].port)) {
        brokers[1].port
    } else {
        brokers[0].port
    };
    assert!(
        out.contains(&format!("#BrokerMasterAddr\t127.0.0.1:{slave_port}")),
        "mqadmin electMaster:\n{out}"
    );
    let switched = wait_for_set(&controller_ports, 2, Some(&master), &[&brokers[0], &brokers[1]]);
    assert!(
        switched.ends_with(&format!(":{slave_port}")),
        "the designated broker is master: {switched}"
    );
    let mut d = Client::connect(slave_port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.call(send_v2("Failover", 0, "T", sent, body(sent).as_bytes())).code != resp::SUCCESS {
        assert!(Instant::now() < deadline, "the designated master accepts no send");
        std::thread::sleep(Duration::from_millis(100));
    }
    sent += 1;
    let got = pull_bodies(&mut d, "Failover", 0, 0, sent, Duration::from_secs(30));
    assert_eq!(got.len(), sent, "every acknowledged message is on the designated master");
    common::report_failovers(&mut failovers);
}

/// A Petrel broker of `broker-a` in controller mode, among RocketMQ's.
fn petrel_broker(namesrv: &str, controller_addr: &str) -> common::Petrel {
    let controllers = format!("controllerAddr={controller_addr}");
    common::Petrel::start(&[
        "--namesrv-addr",
        namesrv,
        "--set",
        "enableControllerMode=true",
        "--set",
        &controllers,
        "--set",
        "brokerName=broker-a",
        "--set",
        "allAckInSyncStateSet=true",
        "--set",
        "controllerHeartBeatTimeoutMills=3000",
        "--set",
        "brokerHeartbeatInterval=500",
        "--set",
        "syncBrokerMetadataPeriod=1000",
        "--set",
        "checkSyncStateSetPeriod=1000",
    ])
}

/// Sends until one is acknowledged (a new master may need a moment), then `count` more that
/// must all be; returns how many were acknowledged.
fn send_acknowledged(port: u16, from: usize, count: usize) -> usize {
    let mut c = Client::connect(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.call(send_v2("Mixed", 0, "T", from, body(from).as_bytes())).code != resp::SUCCESS {
        assert!(Instant::now() < deadline, "the master on {port} accepts no send");
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in from + 1..from + 1 + count {
        let r = c.call(send_v2("Mixed", 0, "T", i, body(i).as_bytes()));
        assert_eq!(r.code, resp::SUCCESS, "send {i} to {port}: {:?}", r.remark);
    }
    count + 1
}

fn assert_holds_all(port: u16, sent: usize, who: &str) {
    let mut c = Client::connect(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got: Vec<String> = Vec::new();
    while got.len() < sent && Instant::now() < deadline {
        let r = c.call(common::pull("BodyReaders", "Mixed", 0, got.len() as i64, 0));
        if r.code == resp::SUCCESS {
            let msgs = petrel_protocol::message::decode_messages(&r.body).unwrap();
            got.extend(msgs.iter().map(|m| String::from_utf8(m.body.to_vec()).unwrap()));
        } else {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    if got.len() < sent {
        let have: std::collections::BTreeSet<&str> = got.iter().map(|b| &b[..6]).collect();
        let missing: Vec<usize> = (0..sent).filter(|i| !have.contains(format!("{i:06}").as_str())).collect();
        panic!("{who}: {} of {sent} messages; missing {missing:?}", got.len());
    }
    assert_eq!(got.len(), sent, "{who} holds every acknowledged message");
    if let Some(i) = (0..sent).find(|i| got[*i] != body(*i)) {
        panic!("{who}: message {i} differs: {:.40}…", got[i]);
    }
}

#[test]
#[ignore = "needs Apache RocketMQ 5.5.0: run scripts/interop-controller.sh"]
fn a_petrel_broker_and_an_apache_rocketmq_broker_replicate_and_fail_over_in_one_set() {
    let dir = tempfile::tempdir().unwrap();
    let (_ns, namesrv) = start_namesrv(dir.path());
    let (controller_ports, _controllers, _reference_controllers) = start_controllers(dir.path());
    let controller_addr: Vec<String> = controller_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let controller_addr = controller_addr.join(";");
    let conf = format!(
        "enableControllerMode=true\ncontrollerAddr={controller_addr}\nallAckInSyncStateSet=true\ncontrollerHeartBeatTimeoutMills=3000\nbrokerHeartbeatInterval=500\nsyncBrokerMetadataPeriod=1000\n"
    );
    let base = free_port_block(20);
    // RocketMQ's broker starts first: the set's first election takes it.
    let mut rocketmq = RefProcess::start(&dir.path().join("a"), &namesrv, base + 3, &conf);
    let master = wait_for_set(&controller_ports, 1, None, &[&rocketmq]);
    assert!(master.ends_with(&format!(":{}", rocketmq.port)), "{master}");
    // Petrel joins as a replica: RocketMQ's master streams to it over the AutoSwitch protocol
    // and takes it into the SyncStateSet once it caught up.
    let mut petrel_broker = petrel_broker(&namesrv, &controller_addr);
    wait_for_set(&controller_ports, 2, None, &[&rocketmq, &petrel_broker]);
    // Once in, the replica stays in: it streams from the HA address the master itself names, so
    // it has no reason to reconnect (a replica that first guessed the address and then moved to
    // the registered one dropped out of the set for a moment).
    assert_set_steady(&controller_ports, 2, Duration::from_secs(5), &[&rocketmq, &petrel_broker]);
    let mut sent = send_acknowledged(rocketmq.port, 0, 100);

    // RocketMQ's master dies: Petrel's replica becomes master with everything acknowledged.
    rocketmq.kill();
    let new_master = wait_for_set(&controller_ports, 1, Some(&master), &[&rocketmq, &petrel_broker]);
    assert!(new_master.ends_with(&format!(":{}", petrel_broker.broker_port)), "{new_master}");
    sent += send_acknowledged(petrel_broker.broker_port, sent, 50);
    assert_holds_all(petrel_broker.broker_port, sent, "Petrel's new master");
    // mqadmin reads Petrel's epoch file: the epoch it followed, then the one it leads.
    let epochs = mqadmin(&namesrv, &["getBrokerEpoch", "-b", "broker-a"]);
    let petrel_part = epochs
        .split("#clusterName")
        .find(|part| part.contains(&format!("#brokerAddr\t127.0.0.1:{}", petrel_broker.broker_port)))
        .unwrap_or_else(|| panic!("mqadmin getBrokerEpoch lists Petrel's broker:\n{epochs}"));
    assert!(
        petrel_part.contains("#brokerId\t0")
            && petrel_part.contains("#Epoch: EpochEntry{epoch=1, startOffset=0")
            && petrel_part.contains("#Epoch: EpochEntry{epoch=2"),
        "mqadmin getBrokerEpoch:\n{epochs}"
    );

    // RocketMQ's broker comes back as a replica of Petrel's master and rejoins the set.
    let (work, port) = (rocketmq.work.clone(), rocketmq.port);
    rocketmq = RefProcess::start(&work, &namesrv, port, &conf);
    let again = wait_for_set(&controller_ports, 2, None, &[&rocketmq, &petrel_broker]);
    assert_eq!(again, new_master, "Petrel's broker stays master");
    sent += send_acknowledged(petrel_broker.broker_port, sent, 100);

    // Petrel's master dies: RocketMQ's replica, fed by Petrel, takes over with everything.
    petrel_broker.kill();
    let last = wait_for_set(&controller_ports, 1, Some(&new_master), &[&rocketmq]);
    assert!(last.ends_with(&format!(":{}", rocketmq.port)), "{last}");
    sent += send_acknowledged(rocketmq.port, sent, 10);
    assert_holds_all(rocketmq.port, sent, "RocketMQ's new master");
    drop(petrel_broker);
}
