//! The same clusters as Apache RocketMQ's own processes (its jars, as `scripts/reference-lib.sh`
//! fetches them), so that one workload, one fault schedule and one checker compare the two
//! brokers side by side.

use std::path::Path;

use crate::cli::Mode;
use crate::cluster::{HEARTBEAT_INTERVAL_MS, HEARTBEAT_TIMEOUT_MS, Layout, SEGMENT_BYTES, Spec};
use crate::error::Result;

const NAMESRV_CLASS: &str = "org.apache.rocketmq.namesrv.NamesrvStartup";
const CONTROLLER_CLASS: &str = "org.apache.rocketmq.controller.ControllerStartup";
const BROKER_CLASS: &str = "org.apache.rocketmq.broker.BrokerStartup";

/// RocketMQ's processes for `mode`, and the name server's address.
pub(crate) fn specs(mode: Mode, dir: &Path, layout: &Layout, lib: &Path) -> Result<(Vec<Spec>, String)> {
    let mut specs = Vec::new();
    let controllers = if mode == Mode::Controller { 3 } else { 0 };
    let peers: Vec<String> = (0..controllers).map(|c| format!("n{c}-{}", layout.addr(c))).collect();
    for c in 0..controllers {
        let conf = [
            "controllerDLegerGroup=group1".to_owned(),
            format!("controllerDLegerPeers={}", peers.join(";")),
            format!("controllerDLegerSelfId=n{c}"),
            format!("controllerStorePath={}", dir.join(format!("controller-{c}")).display()),
            "controllerType=DLedger".into(),
            "enableElectUncleanMaster=false".into(),
            "scanNotActiveBrokerInterval=200".into(),
            "notifyBrokerRoleChanged=true".into(),
            format!("listenPort={}", layout.ports[c].1),
        ];
        specs.push(java(
            dir,
            lib,
            &format!("controller-{c}"),
            layout.ports[c].0,
            CONTROLLER_CLASS,
            "128m",
            &conf,
        )?);
    }
    let ns = controllers;
    let namesrv = layout.addr(ns);
    specs.push(java(
        dir,
        lib,
        "namesrv",
        layout.ports[ns].0,
        NAMESRV_CLASS,
        "256m",
        &[format!("listenPort={}", layout.ports[ns].0)],
    )?);
    let brokers = if mode == Mode::Single { 1 } else { 3 };
    for b in 0..brokers {
        let i = ns + 1 + b;
        let name = format!("broker-{b}");
        let store = dir.join(&name);
        let mut conf = vec![
            "brokerClusterName=DefaultCluster".to_owned(),
            "brokerName=broker-a".into(),
            format!("brokerIP1={}", layout.ips[i]),
            format!("listenPort={}", layout.ports[i].0),
            format!("haListenPort={}", layout.ports[i].1),
            format!("namesrvAddr={namesrv}"),
            format!("storePathRootDir={}", store.display()),
            format!("storePathCommitLog={}", store.join("commitlog").display()),
            "autoCreateTopicEnable=true".into(),
            "flushDiskType=SYNC_FLUSH".into(),
            format!("mappedFileSizeCommitLog={SEGMENT_BYTES}"),
            "cleanFileForciblyEnable=false".into(),
        ];
        conf.extend(role(mode, b, &peers));
        let mut spec = java(dir, lib, &name, layout.ports[i].0, BROKER_CLASS, "512m", &conf)?;
        spec.store = Some(store);
        specs.push(spec);
    }
    Ok((specs, namesrv))
}

/// A broker's role keys: Petrel's clusters' equivalents (a SYNC_MASTER waits for one slave, as
/// Petrel's does; controller mode acknowledges once every SyncStateSet member has the message).
fn role(mode: Mode, b: usize, peers: &[String]) -> Vec<String> {
    match mode {
        Mode::Single => vec!["brokerId=0".into(), "brokerRole=ASYNC_MASTER".into()],
        Mode::Replicated => vec![
            format!("brokerId={b}"),
            if b == 0 { "brokerRole=SYNC_MASTER" } else { "brokerRole=SLAVE" }.into(),
            "inSyncReplicas=2".into(),
            "totalReplicas=3".into(),
        ],
        Mode::Controller => {
            let addrs: Vec<&str> = peers.iter().filter_map(|p| p.split_once('-').map(|(_, a)| a)).collect();
            vec![
                "enableControllerMode=true".into(),
                format!("controllerAddr={}", addrs.join(";")),
                "allAckInSyncStateSet=true".into(),
                format!("controllerHeartBeatTimeoutMills={HEARTBEAT_TIMEOUT_MS}"),
                format!("brokerHeartbeatInterval={HEARTBEAT_INTERVAL_MS}"),
                "syncBrokerMetadataPeriod=300".into(),
                "haMaxTimeSlaveNotCatchup=3000".into(),
            ]
        }
    }
}

/// A JVM running `class` with `conf` as its `-c` file, its home and logs under `dir/name-home`.
fn java(dir: &Path, lib: &Path, name: &str, port: u16, class: &str, heap: &str, conf: &[String]) -> Result<Spec> {
    let home = dir.join(format!("{name}-home"));
    std::fs::create_dir_all(home.join("conf"))?;
    let file = dir.join(format!("{name}.conf"));
    std::fs::write(&file, conf.join("\n") + "\n")?;
    Ok(Spec {
        name: name.to_owned(),
        port,
        program: "java".into(),
        args: vec![
            format!("-Xms{heap}"),
            format!("-Xmx{heap}"),
            format!("-Duser.home={}", home.display()),
            "-cp".into(),
            format!("{}/*", lib.display()),
            class.into(),
            "-c".into(),
            file.display().to_string(),
        ],
        env: vec![("ROCKETMQ_HOME".into(), home.display().to_string())],
        store: None,
    })
}
