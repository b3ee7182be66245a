//! `petrel chaos`'s command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

/// The cluster a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One `petrel serve` with its embedded name server.
    Single,
    /// A name server, a SYNC_MASTER and two slaves (RocketMQ's classic master/slave).
    Replicated,
    /// Three controllers, a name server and a broker set of three in controller mode.
    Controller,
}

/// A fault the injector can apply to one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// kill -9, then a restart after the hold.
    Kill,
    /// SIGSTOP for longer than the heartbeat timeouts, then SIGCONT.
    Pause,
    /// The process cut off from every other process of the cluster (clients still reach it).
    Partition,
    /// A broker's file system filled to the last page (its data is on a tmpfs of its own).
    DiskFull,
}

impl FaultKind {
    /// The kind's name as written on the command line and in the reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::DiskFull => "disk-full",
        }
    }
}

/// How processes reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Network {
    /// A network namespace per process when run as root, else the proxies (Petrel's processes)
    /// or loopback (Apache RocketMQ's).
    Auto,
    /// A network namespace per process on one bridge (root only); partitions are blackhole routes.
    Netns,
    /// Every process listens on 127.0.0.2 behind a fault-injecting TCP proxy on 127.0.0.1
    /// (no root needed; Petrel's processes only); partitions stall the proxied connections
    /// between the processes cut apart.
    Proxy,
    /// Every process on 127.0.0.1; partitions are not available.
    Loopback,
}

/// The options of `petrel chaos`.
#[derive(clap::Args, Debug, Clone)]
pub struct ChaosArgs {
    /// The cluster to start.
    #[arg(long, value_enum, default_value = "controller")]
    pub mode: Mode,
    /// Faults to inject, one at a time, each healed before the next.
    #[arg(long, default_value_t = 20)]
    pub injections: usize,
    /// Fault kinds to draw from (disk-full needs a tmpfs per broker, so root; partition needs
    /// network namespaces, so root, or the proxies).
    #[arg(long, value_delimiter = ',', default_values = ["kill", "pause", "partition", "disk-full"])]
    pub faults: Vec<FaultKind>,
    /// Size of the tmpfs each broker's data lives on when disk-full is among the faults.
    #[arg(long, default_value_t = 1024)]
    pub disk_mib: u64,
    /// Make the run last at least this long, spreading the injections over it.
    #[arg(long)]
    pub duration_s: Option<u64>,
    /// Where the processes keep their data and logs (default: a new temporary directory, removed
    /// after a run that lost nothing unless --keep).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Where the JSON result, the Markdown report and the SVG timeline go.
    #[arg(long, default_value = "chaos-report")]
    pub report_dir: PathBuf,
    /// Run the workload and the checker against this name server (`host:port;host:port`) instead
    /// of a cluster of its own; no process is started, so no fault is injected.
    #[arg(long)]
    pub target: Option<String>,
    /// Run the cluster as Apache RocketMQ's own processes, from the jars in this directory
    /// (`scripts/reference-lib.sh` fetches RocketMQ 5.5.0's into tests/reference/lib), for a
    /// side-by-side with the same workload, faults and checker.
    #[arg(long, value_name = "DIR")]
    pub rocketmq_lib: Option<PathBuf>,
    /// Seed of the fault schedule (targets, kinds, holds).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Producers with unique keys, each sending synchronously.
    #[arg(long, default_value_t = 4)]
    pub producers: usize,
    /// Ordered producers, each sending to its own fixed queue of the ordered topic.
    #[arg(long, default_value_t = 2)]
    pub ordered: usize,
    /// Consumer tasks of the consumer group, splitting the queues between them.
    #[arg(long, default_value_t = 2)]
    pub consumers: usize,
    /// Total send rate, messages per second over all producers.
    #[arg(long, default_value_t = 400)]
    pub rate: u32,
    /// Body size in bytes.
    #[arg(long, default_value_t = 256)]
    pub size: usize,
    /// Shortest and longest time a fault is held, milliseconds (a pause lasts at least the
    /// heartbeat timeout plus the shortest hold).
    #[arg(long, value_delimiter = ',', default_values_t = [1000u64, 3000])]
    pub hold_ms: Vec<u64>,
    /// Shortest and longest quiet time after a fault is healed, milliseconds.
    #[arg(long, value_delimiter = ',', default_values_t = [1500u64, 3000])]
    pub quiet_ms: Vec<u64>,
    /// How the processes reach each other.
    #[arg(long, value_enum, default_value = "auto")]
    pub network: Network,
    /// Keep the work directory.
    #[arg(long)]
    pub keep: bool,
    /// For the checker's own test only: a killed process restarts with its data directory
    /// deleted, so a run must report acknowledged messages lost.
    #[arg(long, hide = true)]
    pub wipe_on_restart: bool,
    /// How long the consumers get to catch up at the end before what they lack counts as lost.
    #[arg(long, default_value_t = 120)]
    pub drain_timeout_s: u64,
    /// A broker.conf key for every Petrel broker of the cluster, e.g.
    /// `--broker-set allAckInSyncStateSet=false` for RocketMQ's own ack default in controller
    /// mode; may repeat. Applied after the run's own keys.
    #[arg(long = "broker-set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub broker_set: Vec<(String, String)>,
}

/// A `--broker-set` argument without a key.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not KEY=VALUE")]
pub struct NotKeyValue(String);

fn parse_key_value(text: &str) -> Result<(String, String), NotKeyValue> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(NotKeyValue(text.to_owned())),
    }
}

impl ChaosArgs {
    /// Petrel, or Apache RocketMQ when `--rocketmq-lib` is given.
    pub fn implementation(&self) -> crate::cluster::Implementation {
        match &self.rocketmq_lib {
            Some(lib) => crate::cluster::Implementation::RocketMq(lib.clone()),
            None => crate::cluster::Implementation::Petrel,
        }
    }

    /// The (shortest, longest) hold.
    pub fn hold(&self) -> (Duration, Duration) {
        range(&self.hold_ms)
    }

    /// The (shortest, longest) quiet time after a heal.
    pub fn quiet(&self) -> (Duration, Duration) {
        range(&self.quiet_ms)
    }
}

fn range(ms: &[u64]) -> (Duration, Duration) {
    let lo = ms.first().copied().unwrap_or(1000);
    let hi = ms.get(1).copied().unwrap_or(lo).max(lo);
    (Duration::from_millis(lo), Duration::from_millis(hi))
}
