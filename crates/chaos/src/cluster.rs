//! A local cluster of real `petrel` processes in a work directory: their command lines for each
//! mode, and what the injector does to them (kill -9 and restart, SIGSTOP and SIGCONT,
//! partitions, a full disk).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::cli::{Mode, Network};
use crate::disk::Tmpfs;
use crate::error::{ChaosError, Result};
use crate::net::Netns;
use crate::process::Process;
use crate::proxy::{BACKEND_IP, FRONT_IP, Proxies};

/// How long a started process gets to listen on its port (a JVM on two busy cores is slow).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Brokers in controller mode: heartbeats, and how long the controllers wait for one.
pub const HEARTBEAT_INTERVAL_MS: u64 = 300;
pub const HEARTBEAT_TIMEOUT_MS: u64 = 2000;
/// Commit-log segments small enough that a run crosses many (one every few seconds at the
/// default rate), so that a full disk meets a segment roll.
pub const SEGMENT_BYTES: u64 = 2 << 20;

pub struct Node {
    pub name: String,
    /// Where it listens (its broker, name-server or controller port).
    pub addr: String,
    /// The process, run inside its network namespace when it has one.
    process: Process,
    /// A broker's data directory on a tmpfs of its own (for disk-full); after `process`, so
    /// that the process is killed before the mount is detached.
    disk: Option<Tmpfs>,
}

impl Node {
    /// Starts the process (without waiting for it to listen).
    fn start(&mut self) -> Result<()> {
        self.process.start()?;
        Ok(())
    }

    async fn wait_listening(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if tokio::net::TcpStream::connect(&self.addr).await.is_ok() {
                return Ok(());
            }
            self.process
                .check_alive(deadline, START_TIMEOUT)
                .map_err(|e| ChaosError::Setup(format!("{} did not listen on {}: {e}", self.name, self.addr)))?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, signal: Signal) -> Result<()> {
        self.process
            .signal(signal)
            .map_err(|e| ChaosError::Setup(format!("{signal} to {}: {e}", self.name)))
    }

    /// kill -9, then reaps it without blocking the runtime: the kernel's cleanup of a large
    /// process (or one in the middle of a write) takes a moment.
    async fn kill9(&mut self) -> Result<()> {
        if self.process.pid().is_none() {
            return Ok(());
        }
        if self.process.exit_status()?.is_none() {
            self.signal(Signal::SIGKILL)?;
        }
        let deadline = Instant::now() + START_TIMEOUT;
        while self.process.exit_status()?.is_none() {
            if Instant::now() > deadline {
                return Err(ChaosError::Setup(format!("{} outlived SIGKILL by {START_TIMEOUT:?}", self.name)));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.process.forget_exited();
        Ok(())
    }
}

/// What a mode's processes are, before any is started.
pub(crate) struct Spec {
    pub name: String,
    pub port: u16,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// A broker's data directory.
    pub store: Option<PathBuf>,
}

/// Whose processes the cluster runs.
#[derive(Debug, Clone)]
pub enum Implementation {
    Petrel,
    /// Apache RocketMQ's, from its jars in this directory.
    RocketMq(PathBuf),
}

pub struct Cluster {
    // Dropped first: each process is killed and reaped (`Process`'s drop) before the namespaces go.
    nodes: Vec<Node>,
    pub namesrv: String,
    net: Option<Netns>,
    proxies: Option<Proxies>,
    dir: PathBuf,
}

/// `count` ports free on every address, each different, below the kernel's ephemeral range
/// (32768 and up) so that no process's outgoing connection takes one before its owner binds
/// it again after a restart.
fn free_ports(count: usize) -> Result<Vec<u16>> {
    const FIRST: u16 = 20_000;
    const SPAN: u16 = 12_000;
    let mut held = Vec::with_capacity(count);
    let start = fastrand::u16(..SPAN);
    for k in 0..SPAN {
        if held.len() == count {
            break;
        }
        let port = FIRST + (start + k) % SPAN;
        // Held until every port is chosen, so that none is chosen twice.
        if let Ok(l) = std::net::TcpListener::bind(("0.0.0.0", port)) {
            held.push(l);
        }
    }
    if held.len() < count {
        return Err(ChaosError::Setup(format!("fewer than {count} free ports in 20000..32000")));
    }
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

fn set(args: &mut Vec<String>, pairs: &[(&str, String)]) {
    for (k, v) in pairs {
        args.push("--set".into());
        args.push(format!("{k}={v}"));
    }
}

/// The addresses of a mode's processes: (ip, port, second port) per node.
pub(crate) struct Layout {
    /// Where each process is reached (and what it advertises).
    pub ips: Vec<String>,
    pub ports: Vec<(u16, u16)>,
    /// Where every process listens when that is not its address: behind the proxies.
    pub bind: Option<String>,
    /// One more free port (a single node's HA port, which nobody uses).
    pub spare: u16,
}

impl Layout {
    pub fn addr(&self, i: usize) -> String {
        format!("{}:{}", self.ips[i], self.ports[i].0)
    }

    /// The address process `i` listens on.
    fn listen_ip(&self, i: usize) -> &str {
        self.bind.as_deref().unwrap_or(&self.ips[i])
    }
}

impl Cluster {
    /// Starts `mode`'s processes under `dir` and waits until each listens; with `disk_mib`,
    /// each broker's data directory is first made a tmpfs of that size.
    pub async fn start(
        mode: Mode,
        implementation: &Implementation,
        dir: &Path,
        network: Network,
        disk_mib: Option<u64>,
        broker_keys: &[(String, String)],
    ) -> Result<Cluster> {
        assert!(network != Network::Auto, "the caller resolves auto");
        let count = match (mode, implementation) {
            (Mode::Single, Implementation::Petrel) => 1,
            (Mode::Single, Implementation::RocketMq(_)) => 2,
            (Mode::Replicated, _) => 4,
            (Mode::Controller, _) => 7,
        };
        let net = if network == Network::Netns {
            Some(Netns::create(count)?)
        } else {
            None
        };
        let mut layout = Layout {
            ips: (0..count)
                .map(|i| net.as_ref().map_or_else(|| FRONT_IP.to_owned(), |n| n.addr(i)))
                .collect(),
            ports: ports(net.is_some(), implementation, count + 1)?,
            bind: (network == Network::Proxy).then(|| BACKEND_IP.to_owned()),
            spare: 0,
        };
        let spare = layout.ports.pop().map_or(0, |p| p.0);
        // In a namespace of its own a process has every port: the spare is the one after its two.
        layout.spare = if net.is_some() { 10913 } else { spare };
        let proxies = match network {
            Network::Proxy => {
                let proxied: Vec<(usize, u16)> = layout.ports.iter().enumerate().flat_map(|(i, (a, b))| [(i, *a), (i, *b)]).collect();
                Some(Proxies::start(count, &proxied).await?)
            }
            _ => None,
        };
        let (specs, namesrv) = match implementation {
            Implementation::Petrel => petrel_specs(mode, dir, &layout, broker_keys)?,
            Implementation::RocketMq(lib) => crate::rocketmq::specs(mode, dir, &layout, lib)?,
        };
        assert_eq!(specs.len(), count, "one process per address");
        let mut nodes = Vec::with_capacity(count);
        for (i, s) in specs.into_iter().enumerate() {
            let disk = match (&s.store, disk_mib) {
                (Some(store), Some(mib)) => Some(Tmpfs::mount(store, mib)?),
                _ => None,
            };
            let mut process = Process::new(s.name.clone(), s.program, s.args, dir.join(format!("{}.log", s.name)));
            for (k, v) in s.env {
                process = process.env(k, v);
            }
            if let Some(ns) = net.as_ref().map(|n| n.name(i)) {
                process = process.wrapped_in(vec!["ip".into(), "netns".into(), "exec".into(), ns]);
            }
            nodes.push(Node {
                addr: format!("{}:{}", layout.listen_ip(i), s.port),
                name: s.name,
                process,
                disk,
            });
        }
        let mut cluster = Cluster {
            nodes,
            namesrv,
            net,
            proxies,
            dir: dir.to_path_buf(),
        };
        for i in 0..cluster.nodes.len() {
            cluster.spawn(i).await?;
        }
        Ok(cluster)
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn can_partition(&self) -> bool {
        (self.net.is_some() || self.proxies.is_some()) && self.nodes.len() > 1
    }

    /// Starts `i` and waits until it listens. The proxies learn its pid first: a connection it
    /// opens while starting (to the name server, to its master) must be told apart too.
    async fn spawn(&mut self, i: usize) -> Result<()> {
        self.nodes[i].start()?;
        if let Some(p) = &self.proxies {
            p.set_pid(i, self.nodes[i].process.pid());
        }
        self.nodes[i].wait_listening().await
    }

    pub async fn kill(&mut self, i: usize) -> Result<()> {
        if let Some(p) = &self.proxies {
            p.set_pid(i, None);
        }
        self.nodes[i].kill9().await
    }

    /// Starts `i` again; `wipe`: with its data directory deleted first.
    pub async fn restart(&mut self, i: usize, wipe: bool) -> Result<()> {
        let data = self.dir.join(&self.nodes[i].name);
        match &self.nodes[i].disk {
            Some(disk) if wipe => disk.wipe()?,
            None if wipe && data.exists() => std::fs::remove_dir_all(&data)?,
            _ => {}
        }
        self.spawn(i).await
    }

    /// Restarts every process that exited although nobody killed it (a crash); returns each
    /// one's name and exit status.
    pub async fn revive(&mut self) -> Result<Vec<(String, String)>> {
        let mut revived = Vec::new();
        for i in 0..self.nodes.len() {
            let node = &mut self.nodes[i];
            let status = match node.process.exit_status() {
                Ok(Some(status)) => status.to_string(),
                Err(e) => e.to_string(),
                Ok(None) => continue,
            };
            tracing::warn!(process = %node.name, %status, "exited by itself; restarting it");
            node.process.forget_exited();
            let name = node.name.clone();
            self.spawn(i).await?;
            revived.push((name, status));
        }
        Ok(revived)
    }

    /// Whether `i` has a disk the disk-full fault can fill.
    pub fn has_disk(&self, i: usize) -> bool {
        self.nodes[i].disk.is_some()
    }

    pub fn any_disk(&self) -> bool {
        self.nodes.iter().any(|n| n.disk.is_some())
    }

    fn disk(&self, i: usize) -> Result<&Tmpfs> {
        self.nodes[i]
            .disk
            .as_ref()
            .ok_or_else(|| ChaosError::Setup(format!("{} has no disk of its own to fill", self.nodes[i].name)))
    }

    /// Fills `i`'s disk; returns the ballast's size.
    pub fn fill_disk(&self, i: usize) -> Result<u64> {
        self.disk(i)?.fill()
    }

    pub fn free_disk(&self, i: usize) -> Result<()> {
        self.disk(i)?.free()
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
        self.cut(i, true)
    }

    pub fn heal(&self, i: usize) -> Result<()> {
        self.cut(i, false)
    }

    /// Cuts (or restores) every link between `i` and the other processes.
    fn cut(&self, i: usize, cut: bool) -> Result<()> {
        let others = self.others(i);
        match (&self.net, &self.proxies) {
            (Some(net), _) if cut => net.isolate(i, &others),
            (Some(net), _) => net.heal(i, &others),
            (None, Some(proxies)) if cut => {
                proxies.isolate(i, &others);
                Ok(())
            }
            (None, Some(proxies)) => {
                proxies.heal(i, &others);
                Ok(())
            }
            (None, None) => Err(no_partitions()),
        }
    }

    /// Stops every process (SIGCONT first, so a paused one can die).
    pub async fn stop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.signal(Signal::SIGCONT);
            let _ = node.kill9().await;
        }
    }
}

fn no_partitions() -> ChaosError {
    ChaosError::Setup("partitions need network namespaces (root) or the proxies (--network proxy)".into())
}

/// Each process's two ports: in its own namespace the defaults; on loopback free ones (for
/// RocketMQ a block of four each, since its broker also takes listenPort - 2 and + 1).
fn ports(netns: bool, implementation: &Implementation, count: usize) -> Result<Vec<(u16, u16)>> {
    match (netns, implementation) {
        (true, _) => Ok(vec![(10911, 10912); count]),
        (false, Implementation::Petrel) => {
            let free = free_ports(2 * count)?;
            Ok(free.chunks(2).map(|p| (p[0], p[1])).collect())
        }
        (false, Implementation::RocketMq(_)) => {
            let base = 30_000 + u16::try_from(std::process::id() % 1000).unwrap_or(0) * 30;
            Ok((0..count)
                .map(|i| {
                    let port = base + u16::try_from(i).unwrap_or(0) * 4 + 2;
                    (port, port + 1)
                })
                .collect())
        }
    }
}

/// Petrel's processes for `mode`, and the name server's address.
/// `broker_keys` go to every broker, after the mode's own.
fn petrel_specs(mode: Mode, dir: &Path, layout: &Layout, broker_keys: &[(String, String)]) -> Result<(Vec<Spec>, String)> {
    let exe = std::env::current_exe()?;
    let (procs, namesrv) = match mode {
        Mode::Single => (single(dir, layout), format!("{}:{}", layout.ips[0], layout.ports[0].1)),
        Mode::Replicated => (replicated(dir, layout), layout.addr(0)),
        Mode::Controller => (controlled(dir, layout), layout.addr(3)),
    };
    let extra: Vec<(&str, String)> = broker_keys.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let specs = procs
        .into_iter()
        .map(|(name, port, mut args)| {
            if name.starts_with("broker-") {
                set(&mut args, &extra);
            }
            (name, port, args)
        })
        .map(|(name, port, args)| Spec {
            store: name.starts_with("broker-").then(|| dir.join(&name)),
            name,
            port,
            program: exe.clone(),
            args,
            env: Vec::new(),
        })
        .collect();
    Ok((specs, namesrv))
}

/// A process of a mode: its name, port and arguments.
type Proc = (String, u16, Vec<String>);

/// The arguments every broker shares: broker `name` is process `i` of `layout`.
fn broker_args(dir: &Path, name: &str, layout: &Layout, i: usize, ports: (u16, u16)) -> Vec<String> {
    let ip = &layout.ips[i];
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
            // A full disk refuses sends rather than deleting what the checker will look for.
            ("cleanFileForciblyEnable", "false".into()),
            // No second port next to the first, which may be another process's.
            ("fastListenPort", "0".into()),
            ("bindAddress", layout.listen_ip(i).to_owned()),
        ],
    );
    args
}

fn single(dir: &Path, layout: &Layout) -> Vec<Proc> {
    // The second port is the embedded name server's, so HA gets the spare.
    let mut args = broker_args(dir, "broker-0", layout, 0, (layout.ports[0].0, layout.spare));
    args.extend(["--namesrv-listen".into(), format!("{}:{}", layout.listen_ip(0), layout.ports[0].1)]);
    vec![("broker-0".into(), layout.ports[0].0, args)]
}

fn namesrv_spec(layout: &Layout, i: usize) -> Proc {
    let listen = format!("{}:{}", layout.listen_ip(i), layout.ports[i].0);
    (
        "namesrv".into(),
        layout.ports[i].0,
        vec!["namesrv".into(), "--listen".into(), listen],
    )
}

/// Broker `b` of a set, at address `i`, registering with the name server at address `ns`:
/// the keys every set member shares, then `keys`.
fn set_member(dir: &Path, layout: &Layout, b: usize, i: usize, ns: usize, keys: &[(&str, String)]) -> Proc {
    let name = format!("broker-{b}");
    let mut args = broker_args(dir, &name, layout, i, layout.ports[i]);
    args.extend(["--namesrv-addr".into(), layout.addr(ns)]);
    set(
        &mut args,
        &[
            ("registerNameServerPeriod", "10000".into()),
            ("slaveTimeout", "2000".into()),
            ("haSendHeartbeatInterval", "1000".into()),
        ],
    );
    set(&mut args, keys);
    (name, layout.ports[i].0, args)
}

fn replicated(dir: &Path, layout: &Layout) -> Vec<Proc> {
    let mut specs = vec![namesrv_spec(layout, 0)];
    for b in 0..3usize {
        let role = if b == 0 { "SYNC_MASTER" } else { "SLAVE" };
        let keys = [("brokerRole", role.into()), ("brokerId", b.to_string())];
        specs.push(set_member(dir, layout, b, b + 1, 0, &keys));
    }
    specs
}

fn controlled(dir: &Path, layout: &Layout) -> Vec<Proc> {
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
                ("bindAddress", layout.listen_ip(c).to_owned()),
            ],
        );
        specs.push((format!("controller-{c}"), layout.ports[c].0, args));
    }
    specs.push(namesrv_spec(layout, 3));
    for b in 0..3usize {
        let keys = [
            ("enableControllerMode", "true".into()),
            ("controllerAddr", controllers.join(";")),
            // The ack keys (allAckInSyncStateSet, inSyncReplicas) stay at their defaults.
            ("syncBrokerMetadataPeriod", "300".into()),
            ("checkSyncStateSetPeriod", "300".into()),
            ("brokerHeartbeatInterval", HEARTBEAT_INTERVAL_MS.to_string()),
            ("controllerHeartBeatTimeoutMills", HEARTBEAT_TIMEOUT_MS.to_string()),
            ("haMaxTimeSlaveNotCatchup", "3000".into()),
        ];
        specs.push(set_member(dir, layout, b, b + 4, 3, &keys));
    }
    specs
}
