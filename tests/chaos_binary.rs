//! `petrel chaos` end to end: a short run in each mode (single node, master with slaves,
//! controller mode), each injecting kill -9, pauses, partitions (network namespaces as root; the
//! master with slaves behind the proxies) and (as root) full disks into real processes, must find every acknowledged message delivered, in order for ordered sends; and a
//! cluster whose killed broker comes back without its data must be caught losing messages.
//! `PETREL_CHAOS_INJECTIONS` scales the runs (the long runs are in docs/reliability.md).

#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// One cluster at a time: on two cores, two clusters' heartbeats would time each other out.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Run {
    status: i32,
    last_line: String,
    result: serde_json::Value,
    stdout: String,
}

fn chaos(dir: &Path, args: &[&str]) -> Run {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let reports = dir.join("reports");
    let out = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .arg("chaos")
        .args(["--work-dir", dir.join("work").to_str().unwrap()])
        .args(["--report-dir", reports.to_str().unwrap()])
        .args(["--seed", "7", "--hold-ms", "800,2000", "--quiet-ms", "1500,2500"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last_line = stdout.lines().last().unwrap_or_default().to_owned();
    let result = std::fs::read(reports.join("result.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| panic!("no result.json; stdout:\n{stdout}\nstderr:\n{stderr}"));
    for file in ["report.md", "timeline.svg"] {
        assert!(reports.join(file).exists(), "{file} written");
    }
    Run {
        status: out.status.code().unwrap_or(-1),
        last_line,
        result,
        stdout,
    }
}

fn injections(default: usize) -> String {
    std::env::var("PETREL_CHAOS_INJECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        .to_string()
}

/// The run passed, injected what it was asked to, and acknowledged and delivered messages.
fn assert_clean(run: &Run, injected: &str, kinds: &[&str]) {
    let r = &run.result;
    let v = &r["verdict"];
    assert_eq!(run.status, 0, "exit status; output:\n{}", run.stdout);
    assert_eq!(v["lost"], 0, "{}", run.stdout);
    assert_eq!(v["consumed_lost"], 0, "consumed, then lost: {}", run.stdout);
    assert_eq!((v["reordered"].as_u64(), v["reordered_in_log"].as_u64()), (Some(0), Some(0)));
    assert_eq!(r["injections"].to_string(), injected);
    assert_eq!(
        r["process_exits"].as_array().map(Vec::len),
        Some(0),
        "a process crashed: {}",
        r["process_exits"]
    );
    for kind in kinds {
        assert!(
            r["injections_by_kind"][kind].as_u64().unwrap_or(0) > 0,
            "no {kind} injected: {}",
            r["injections_by_kind"]
        );
    }
    let acked = v["acked"].as_u64().unwrap();
    assert!(acked > 500, "too little acknowledged to mean anything: {acked}");
    assert!(v["sent"].as_u64().unwrap() >= acked);
    let expected = format!(
        "chaos: injections={injected} acked={acked} lost=0 consumed_then_lost=0 duplicated={} reordered=0 max_unavailable_ms={}",
        v["duplicated"], v["max_unavailable_ms"]
    );
    assert_eq!(run.last_line, expected);
}

/// Partitions need network namespaces (without the proxies) and a full disk a tmpfs per
/// broker: both need root.
fn kinds_here(all: &[&'static str]) -> Vec<&'static str> {
    let root = nix_root();
    all.iter()
        .copied()
        .filter(|k| !matches!(*k, "partition" | "disk-full") || root)
        .collect()
}

fn nix_root() -> bool {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_single_node_killed_and_paused_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let n = injections(3);
    let run = chaos(dir.path(), &["--mode", "single", "--injections", &n, "--faults", "kill,pause"]);
    assert_clean(&run, &n, &["kill", "pause"]);
}

/// Behind the proxies (how a run without root partitions), whoever runs it.
#[test]
fn a_master_with_two_slaves_behind_the_proxies_under_kills_pauses_partitions_and_full_disks_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let n = injections(4);
    let run = chaos(
        dir.path(),
        &[
            "--mode",
            "replicated",
            "--network",
            "proxy",
            "--injections",
            &n,
            "--disk-mib",
            "256",
        ],
    );
    assert_eq!(run.result["network"], "proxy");
    let mut kinds = kinds_here(&["kill", "pause", "disk-full"]);
    kinds.push("partition");
    assert_clean(&run, &n, &kinds);
}

/// With the brokers' default ack keys (`allAckInSyncStateSet` and `inSyncReplicas` unset).
#[test]
fn controller_mode_under_kills_pauses_partitions_and_full_disks_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let n = injections(5);
    let run = chaos(dir.path(), &["--mode", "controller", "--injections", &n, "--disk-mib", "256"]);
    assert_clean(&run, &n, &kinds_here(&["kill", "pause", "partition", "disk-full"]));
}

/// The checker is not a rubber stamp: a broker that comes back from kill -9 without its data
/// loses what it had acknowledged, and the run must say so and exit 1.
#[test]
fn a_broker_restarted_without_its_data_is_caught_losing_acknowledged_messages() {
    let dir = tempfile::tempdir().unwrap();
    let run = chaos(
        dir.path(),
        &[
            "--mode",
            "single",
            "--injections",
            "2",
            "--faults",
            "kill",
            "--wipe-on-restart",
            "--drain-timeout-s",
            "10",
        ],
    );
    let lost = run.result["verdict"]["lost"].as_u64().unwrap();
    assert!(lost > 0, "{}", run.stdout);
    // What the group read before the kill is gone too, but with the topics wiped no queue can
    // be read at the end: consumed-then-lost counts only what a readable queue lacks (the
    // checker's own tests count it; scripts/interop-consumed.sh catches it end to end).
    assert!(run.last_line.contains(" consumed_then_lost="), "{}", run.last_line);
    assert_eq!(run.status, 1);
    assert!(run.last_line.starts_with("chaos: injections=2 acked="), "{}", run.last_line);
    assert!(run.last_line.contains(&format!(" lost={lost} ")), "{}", run.last_line);
}

/// `--target`: the workload and the checker against a cluster the run did not start (here a
/// `petrel serve`; docs/reliability.md has the same against Apache RocketMQ), with no fault.
#[test]
fn a_target_cluster_gets_the_workload_and_the_checker_and_no_fault() {
    let dir = tempfile::tempdir().unwrap();
    let broker = common::Petrel::start(&["--set", "flushDiskType=SYNC_FLUSH"]);
    let target = format!("127.0.0.1:{}", broker.ns_port);
    let run = chaos(dir.path(), &["--target", &target, "--duration-s", "5", "--injections", "3"]);
    assert_eq!(run.status, 0, "{}", run.stdout);
    assert!(
        run.stdout.contains("left out kill: no process started (--target)"),
        "{}",
        run.stdout
    );
    let v = &run.result["verdict"];
    assert!(v["acked"].as_u64().unwrap() > 1000, "{v}");
    assert_eq!((v["lost"].as_u64(), run.result["injections"].as_u64()), (Some(0), Some(0)));
    assert!(run.last_line.starts_with("chaos: injections=0 acked="), "{}", run.last_line);
}
