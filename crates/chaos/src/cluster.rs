//! A local cluster of real `petrel` processes in a work directory: their command lines for each
//! mode, and what the injector does to them (kill -9 and restart, SIGSTOP and SIGCONT,
//! partitions).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::cli::Mode;
use crate::error::{ChaosError, Result};
use crate::net::Netns;

/// How long a started process gets to listen on its port.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Brokers in controller mode: heartbeats, and how long the controllers wait for one.
pub const HEARTBEAT_INTERVAL_MS: u64 = 300;
pub const HEARTBEAT_TIMEOUT_MS: u64 = 2000;
/// Commit-log segments small enough that a run crosses several.
const SEGMENT_BYTES: u64 = 8 << 20;

pub struct Node {
    pub name: String,
    /// Where it listens (its broker, name-server or controller port).
    pub addr: String,
    args: Vec<String>,
    netns: Option<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn pid(&self) -> Option<Pid> {
        self.child
            .as_ref()
            .and_then(Child::id)
            .and_then(|p| i32::try_from(p).ok())
            .map(Pid::from_raw)
    }

    async fn spawn(&mut self, exe: &Path) -> Result<()> {
        assert!(self.child.is_none(), "{} is running", self.name);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let mut command = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let child = command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        self.wait_listening().await
    }

    async fn wait_listening(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if tokio::net::TcpStream::connect(&self.addr).await.is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(ChaosError::Setup(format!(
                    "{} exited ({status}) before listening on {}; see {}",
                    self.name,
                    self.addr,
                    self.log.display()
                )));
            }
            if Instant::now() > deadline {
                return Err(ChaosError::Setup(format!(
                    "{} did not listen on {} in {START_TIMEOUT:?}",
                    self.name, self.addr
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, signal: Signal) -> Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| ChaosError::Setup(format!("{} is not running", self.name)))?;
        kill(pid, signal).map_err(|e| ChaosError::Setup(format!("{signal} to {}: {e}", self.name)))
    }

    async fn kill9(&mut self) -> Result<()> {
        self.signal(Signal::SIGKILL)?;
        if let Some(mut child) = self.child.take() {
            child.wait().await?;
        }
        Ok(())
    }
}

/// What a mode's processes are, before any is started.
struct Spec {
    name: String,
    port: u16,
    /// The command line after the executable, given the node's own IP and the cluster's
    /// addresses.
    args: Vec<String>,
}

pub struct Cluster {
    // Dropped first: the processes die (kill_on_drop) before their namespaces go.
    nodes: Vec<Node>,
    pub namesrv: String,
    net: Option<Netns>,
    exe: PathBuf,
    dir: PathBuf,
}

/// A free port on 127.0.0.1 (for the loopback network).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn set(args: &mut Vec<String>, pairs: &[(&str, String)]) {
    for (k, v) in pairs {
        args.push("--set".into());
        args.push(format!("{k}={v}"));
    }
}

/// The addresses of a mode's processes: (ip, port, second port) per node.
struct Layout {
    ips: Vec<String>,
    ports: Vec<(u16, u16)>,
}

impl Layout {
    fn addr(&self, i: usize) -> String {
        format!("{}:{}", self.ips[i], self.ports[i].0)
    }
}

impl Cluster {
    /// Starts `mode`'s processes under `dir` and waits until each listens.
    pub async fn start(mode: Mode, dir: &Path, netns: bool) -> Result<Cluster> {
        let exe = std::env::current_exe()?;
        let count = match mode {
            Mode::Single => 1,
            Mode::Replicated => 4,
            Mode::Controller => 7,
        };
        let net = if netns { Some(Netns::create(count)?) } else { None };
        let layout = Layout {
            ips: (0..count)
                .map(|i| net.as_ref().map_or_else(|| "127.0.0.1".to_owned(), |n| n.addr(i)))
                .collect(),
            ports: (0..count)
                .map(|_| -> Result<(u16, u16)> {
                    if net.is_some() {
                        Ok((10911, 10912))
                    } else {
                        Ok((free_port()?, free_port()?))
                    }
                })
                .collect::<Result<_>>()?,
        };
        let specs = match mode {
            Mode::Single => single(dir, &layout),
            Mode::Replicated => replicated(dir, &layout),
            Mode::Controller => controlled(dir, &layout),
        };
        let namesrv = match mode {
            Mode::Single => format!("{}:{}", layout.ips[0], layout.ports[0].1),
            Mode::Replicated => layout.addr(0),
            Mode::Controller => layout.addr(3),
        };
        let nodes = specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| Node {
                addr: format!("{}:{}", layout.ips[i], s.port),
                log: dir.join(format!("{}.log", s.name)),
                name: s.name,
                args: s.args,
                netns: net.as_ref().map(|n| n.name(i)),
                child: None,
            })
            .collect();
        let mut cluster = Cluster {
            nodes,
            namesrv,
            net,
            exe,
            dir: dir.to_path_buf(),
        };
        for i in 0..cluster.nodes.len() {
            let exe = cluster.exe.clone();
            cluster.nodes[i].spawn(&exe).await?;
        }
        Ok(cluster)
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn can_partition(&self) -> bool {
        self.net.is_some() && self.nodes.len() > 1
    }

    pub async fn kill(&mut self, i: usize) -> Result<()> {
        self.nodes[i].kill9().await
    }

    /// Starts `i` again; `wipe`: with its data directory deleted first.
    pub async fn restart(&mut self, i: usize, wipe: bool) -> Result<()> {
        let data = self.dir.join(&self.nodes[i].name);
        if wipe && data.exists() {
            std::fs::remove_dir_all(&data)?;
        }
        let exe = self.exe.clone();
        self.nodes[i].spawn(&exe).await
    }

    pub fn pause(&self, i: usize) -> Result<()> {
        self.nodes[i].signal(Signal::SIGSTOP)
    }

    pub fn resume(&self, i: usize) -> Result<()> {
        self.nodes[i].signal(Signal::SIGCONT)
    }

    fn others(&self, i: usize) -> Vec<usize> {
        (0..self.nodes.len()).filter(|o| *o != i).collect()
    }

    pub fn partition(&self, i: usize) -> Result<()> {
        let net = self
            .net
            .as_ref()
            .ok_or_else(|| ChaosError::Setup("partitions need network namespaces".into()))?;
        net.isolate(i, &self.others(i))
    }

    pub fn heal(&self, i: usize) -> Result<()> {
        let net = self
            .net
            .as_ref()
            .ok_or_else(|| ChaosError::Setup("partitions need network namespaces".into()))?;
        net.heal(i, &self.others(i))
    }

    /// Stops every process (SIGCONT first, so a paused one can die).
    pub async fn stop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.signal(Signal::SIGCONT);
            let _ = node.kill9().await;
        }
    }
}

/// The arguments every broker shares.
fn broker_args(dir: &Path, name: &str, ip: &str, ports: (u16, u16)) -> Vec<String> {
    let mut args = vec![
        "serve".into(),
        "--store-dir".into(),
        dir.join(name).display().to_string(),
        "--listen-port".into(),
        ports.0.to_string(),
        "--broker-ip".into(),
        ip.to_owned(),
    ];
    set(
        &mut args,
        &[
            ("haListenPort", ports.1.to_string()),
            ("flushDiskType", "SYNC_FLUSH".into()),
            ("mappedFileSizeCommitLog", SEGMENT_BYTES.to_string()),
            ("brokerName", "broker-a".into()),
        ],
    );
    args
}

fn single(dir: &Path, layout: &Layout) -> Vec<Spec> {
    let mut args = broker_args(dir, "broker-0", &layout.ips[0], (layout.ports[0].0, free_or(layout, 0)));
    args.extend(["--namesrv-listen".into(), format!("{}:{}", layout.ips[0], layout.ports[0].1)]);
    vec![Spec {
        name: "broker-0".into(),
        port: layout.ports[0].0,
        args,
    }]
}

/// In a single node the second port is the name server's, so HA gets a third (unused) one.
fn free_or(layout: &Layout, i: usize) -> u16 {
    if layout.ips[i] == "127.0.0.1" {
        free_port().unwrap_or(layout.ports[i].0 + 2)
    } else {
        layout.ports[i].0 + 2
    }
}

fn namesrv_spec(layout: &Layout, i: usize) -> Spec {
    Spec {
        name: "namesrv".into(),
        port: layout.ports[i].0,
        args: vec!["namesrv".into(), "--listen".into(), layout.addr(i)],
    }
}

fn replicated(dir: &Path, layout: &Layout) -> Vec<Spec> {
    let mut specs = vec![namesrv_spec(layout, 0)];
    for b in 0..3usize {
        let i = b + 1;
        let name = format!("broker-{b}");
        let mut args = broker_args(dir, &name, &layout.ips[i], layout.ports[i]);
        args.extend(["--namesrv-addr".into(), layout.addr(0)]);
        let role = if b == 0 { "SYNC_MASTER" } else { "SLAVE" };
        set(
            &mut args,
            &[
                ("brokerRole", role.into()),
                ("brokerId", b.to_string()),
                ("registerNameServerPeriod", "10000".into()),
                ("slaveTimeout", "2000".into()),
                ("haSendHeartbeatInterval", "1000".into()),
            ],
        );
        specs.push(Spec {
            name,
            port: layout.ports[i].0,
            args,
        });
    }
    specs
}

fn controlled(dir: &Path, layout: &Layout) -> Vec<Spec> {
    let peers: Vec<String> = (0..3).map(|c| format!("n{c}-{}", layout.addr(c))).collect();
    let controllers: Vec<String> = (0..3).map(|c| layout.addr(c)).collect();
    let mut specs = Vec::new();
    for c in 0..3usize {
        let mut args = vec!["controller".into()];
        set(
            &mut args,
            &[
                ("controllerDLegerPeers", peers.join(";")),
                ("controllerDLegerSelfId", format!("n{c}")),
                ("controllerStorePath", dir.join(format!("controller-{c}")).display().to_string()),
                ("scanNotActiveBrokerInterval", "200".into()),
            ],
        );
        specs.push(Spec {
            name: format!("controller-{c}"),
            port: layout.ports[c].0,
            args,
        });
    }
    specs.push(namesrv_spec(layout, 3));
    for b in 0..3usize {
        let i = b + 4;
        let name = format!("broker-{b}");
        let mut args = broker_args(dir, &name, &layout.ips[i], layout.ports[i]);
        args.extend(["--namesrv-addr".into(), layout.addr(3)]);
        set(
            &mut args,
            &[
                ("enableControllerMode", "true".into()),
                ("controllerAddr", controllers.join(";")),
                ("allAckInSyncStateSet", "true".into()),
                ("registerNameServerPeriod", "10000".into()),
                ("syncBrokerMetadataPeriod", "300".into()),
                ("checkSyncStateSetPeriod", "300".into()),
                ("brokerHeartbeatInterval", HEARTBEAT_INTERVAL_MS.to_string()),
                ("controllerHeartBeatTimeoutMills", HEARTBEAT_TIMEOUT_MS.to_string()),
                ("haMaxTimeSlaveNotCatchup", "3000".into()),
                ("haSendHeartbeatInterval", "1000".into()),
                ("slaveTimeout", "2000".into()),
            ],
        );
        specs.push(Spec {
            name,
            port: layout.ports[i].0,
            args,
        });
    }
    specs
}
