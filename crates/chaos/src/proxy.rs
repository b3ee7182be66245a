//! Partitions without root: every process listens on 127.0.0.2 and is reached through a proxy
//! on 127.0.0.1 with the same port, which is the address it advertises. The proxy tells who
//! connected by the process that owns the connecting socket (`/proc/net/tcp` and the
//! processes' file descriptors), so a partition can stall exactly the connections between
//! chosen processes while the workload (this process) still reaches every one of them, as the
//! network-namespace mode's blackhole routes do.
//!
//! A cut link behaves like a blackhole: bytes in flight stop moving both ways, nothing is
//! closed, and a new connection is accepted but goes nowhere until the link is healed. Either
//! way the peers' own timeouts decide what happens, as in a real partition.

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use procfs::process::{FDTarget, Process};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::error::{ChaosError, Result};

/// Where other processes (and the workload) reach a process: its proxy.
pub const FRONT_IP: &str = "127.0.0.1";
/// Where a process really listens.
pub const BACKEND_IP: &str = "127.0.0.2";
/// Connections one proxied port holds at once; more are closed as they arrive.
const MAX_CONNECTIONS_PER_PORT: usize = 1024;
/// What one direction of a connection reads before it writes.
const BUFFER_BYTES: usize = 64 * 1024;

/// Links cut, as (from process, to process).
type Cuts = BTreeSet<(usize, usize)>;

/// The proxies of one cluster. Dropping it closes every proxied connection.
pub struct Proxies {
    cuts: watch::Sender<Cuts>,
    /// Each process's pid while it runs, by its index in the cluster.
    pids: Arc<Mutex<Vec<Option<u32>>>>,
    tasks: JoinSet<()>,
}

impl Proxies {
    /// A proxy on `FRONT_IP:port` to `BACKEND_IP:port` for each `(process, port)`.
    pub async fn start(processes: usize, ports: &[(usize, u16)]) -> Result<Proxies> {
        let (cuts, _) = watch::channel(Cuts::new());
        let pids = Arc::new(Mutex::new(vec![None; processes]));
        let mut tasks = JoinSet::new();
        for (to, port) in ports {
            assert!(*to < processes, "port {port} of process {to} of {processes}");
            let front = SocketAddr::new(ip(FRONT_IP), *port);
            let listener = TcpListener::bind(front)
                .await
                .map_err(|e| ChaosError::Setup(format!("proxy: listen on {front}: {e}")))?;
            let port = Port {
                to: *to,
                front,
                backend: SocketAddr::new(ip(BACKEND_IP), *port),
                from: None,
                cuts: cuts.subscribe(),
                pids: Arc::clone(&pids),
            };
            tasks.spawn(port.accept(listener));
        }
        Ok(Proxies { cuts, pids, tasks })
    }

    /// A proxy of the one link from process `from` to process `to`, which listens at `backend`:
    /// it listens on a free port of `FRONT_IP` and returns that address, for `from` to be told
    /// instead of `to`'s own. Every connection through it is `from`'s by construction, so no
    /// process needs a second address and no pid is looked up; `isolate` and `heal` cut and
    /// restore it as any other link. Tests that partition one process from some of its peers
    /// use this.
    ///
    /// # Errors
    /// No port can be bound.
    pub async fn link(&mut self, from: usize, to: usize, backend: SocketAddr) -> Result<SocketAddr> {
        let processes = self.pids.lock().len();
        assert!(from < processes && to < processes, "link {from} -> {to} of {processes} processes");
        let listener = TcpListener::bind((ip(FRONT_IP), 0))
            .await
            .map_err(|e| ChaosError::Setup(format!("proxy: listen on {FRONT_IP}: {e}")))?;
        let front = listener
            .local_addr()
            .map_err(|e| ChaosError::Setup(format!("proxy: the address of a bound port: {e}")))?;
        let port = Port {
            to,
            front,
            backend,
            from: Some(from),
            cuts: self.cuts.subscribe(),
            pids: Arc::clone(&self.pids),
        };
        self.tasks.spawn(port.accept(listener));
        Ok(front)
    }

    /// Records process `i`'s pid (`None` once it is dead), so its connections are told apart.
    pub fn set_pid(&self, i: usize, pid: Option<u32>) {
        self.pids.lock()[i] = pid;
    }

    /// Cuts `i` off from each of `others`, both ways.
    pub fn isolate(&self, i: usize, others: &[usize]) {
        self.cuts.send_modify(|cuts| {
            for o in others {
                cuts.insert((i, *o));
                cuts.insert((*o, i));
            }
        });
    }

    /// Undoes `isolate(i, others)`.
    pub fn heal(&self, i: usize, others: &[usize]) {
        self.cuts.send_modify(|cuts| {
            for o in others {
                cuts.remove(&(i, *o));
                cuts.remove(&(*o, i));
            }
        });
    }
}

fn ip(text: &str) -> std::net::IpAddr {
    text.parse().unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]))
}

/// One proxied port.
struct Port {
    to: usize,
    front: SocketAddr,
    backend: SocketAddr,
    /// The one process a link's port serves; `None`: whoever connects, told by its socket.
    from: Option<usize>,
    cuts: watch::Receiver<Cuts>,
    pids: Arc<Mutex<Vec<Option<u32>>>>,
}

impl Port {
    async fn accept(self, listener: TcpListener) {
        let room = Arc::new(Semaphore::new(MAX_CONNECTIONS_PER_PORT));
        // Owned here: ending this task (the proxies dropped) ends every connection.
        let mut connections = JoinSet::new();
        loop {
            let (client, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, say: wait rather than spin.
                    tracing::warn!(port = %self.front, error = %e, "proxy: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            while connections.try_join_next().is_some() {}
            let Ok(permit) = Arc::clone(&room).try_acquire_owned() else {
                tracing::warn!(port = %self.front, "proxy: {MAX_CONNECTIONS_PER_PORT} connections open; closing a new one");
                continue;
            };
            let (front, pids, fixed) = (self.front, Arc::clone(&self.pids), self.from);
            let mut link = Link {
                from: None,
                to: self.to,
                cuts: self.cuts.clone(),
            };
            let backend = self.backend;
            connections.spawn(async move {
                let _permit = permit;
                let known: Vec<Option<u32>> = pids.lock().clone();
                let from = match fixed {
                    Some(i) => Some(Owner::Process(i)),
                    None => tokio::task::spawn_blocking(move || owner(peer, front, &known)).await.ok(),
                };
                link.from = match from {
                    Some(Owner::Process(i)) => Some(i),
                    Some(Owner::Workload | Owner::Gone) => None,
                    Some(Owner::Unknown) | None => {
                        tracing::warn!(%peer, to = link.to, "proxy: a connection from no known process; never cut");
                        None
                    }
                };
                tracing::debug!(%peer, from = ?link.from, to = link.to, "proxy: connection");
                if let Err(e) = forward(client, backend, link).await {
                    tracing::debug!(%peer, %backend, error = %e, "proxy: connection ended");
                }
            });
        }
    }
}

/// Who opened a proxied connection.
enum Owner {
    /// The cluster's process with this index.
    Process(usize),
    /// This process: the workload and the checker, which every partition spares.
    Workload,
    /// Its opener has closed it already (the socket is gone, or in TIME_WAIT with no owner).
    Gone,
    /// An open socket of a process the cluster does not know.
    Unknown,
}

/// Who owns the socket that connected from `peer` to `front`.
fn owner(peer: SocketAddr, front: SocketAddr, pids: &[Option<u32>]) -> Owner {
    let Ok(table) = procfs::net::tcp() else {
        return Owner::Unknown;
    };
    let Some(inode) = table
        .into_iter()
        .find(|e| e.local_address == peer && e.remote_address == front)
        .map(|e| e.inode)
        .filter(|inode| *inode != 0)
    else {
        return Owner::Gone;
    };
    if let Some(i) = pids.iter().position(|pid| pid.is_some_and(|pid| holds(pid, inode))) {
        return Owner::Process(i);
    }
    if holds(std::process::id(), inode) {
        return Owner::Workload;
    }
    Owner::Unknown
}

fn holds(pid: u32, inode: u64) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    Process::new(pid)
        .and_then(|p| p.fd())
        .map(|fds| fds.flatten().any(|fd| matches!(fd.target, FDTarget::Socket(i) if i == inode)))
        .unwrap_or(false)
}

/// The link a connection runs on: from the connecting process (if it is one of the cluster's)
/// to the proxied one.
#[derive(Clone)]
struct Link {
    from: Option<usize>,
    to: usize,
    cuts: watch::Receiver<Cuts>,
}

impl Link {
    /// Returns once the link is not cut (at once for the workload's connections).
    async fn open(&mut self) {
        let Some(from) = self.from else {
            return;
        };
        let to = self.to;
        // An error means the proxies are gone, and this task with them.
        let _ = self.cuts.wait_for(|cuts| !cuts.contains(&(from, to))).await;
    }
}

async fn forward(client: TcpStream, backend: SocketAddr, mut link: Link) -> io::Result<()> {
    link.open().await;
    let upstream = TcpStream::connect(backend).await?;
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    // Either side closing closes both: RocketMQ's protocols never half-close.
    tokio::select! {
        r = pump(client_read, upstream_write, link.clone()) => r,
        r = pump(upstream_read, client_write, link) => r,
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut link: Link) -> io::Result<()> {
    let mut buf = vec![0u8; BUFFER_BYTES];
    loop {
        link.open().await;
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        // Cut while reading: what was read waits for the heal, as TCP's retransmissions
        // deliver what a blackhole route dropped once the route is gone.
        link.open().await;
        to.write_all(&buf[..n]).await?;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failure is the test failing")]

    use std::time::Duration;

    use super::*;

    /// An echo server on `BACKEND_IP` and a proxy in front of it for process 1; this test's
    /// own process plays process 0 when its pid is recorded.
    async fn echo_behind_proxy() -> (Proxies, SocketAddr) {
        let backend = TcpListener::bind((ip(BACKEND_IP), 0)).await.unwrap();
        let port = backend.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = backend.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let proxies = Proxies::start(3, &[(1, port)]).await.unwrap();
        (proxies, SocketAddr::new(ip(FRONT_IP), port))
    }

    /// Sends one byte and waits up to `wait` for its echo.
    async fn echoes(s: &mut TcpStream, byte: u8, wait: Duration) -> bool {
        s.write_all(&[byte]).await.unwrap();
        let mut got = [0u8; 1];
        matches!(tokio::time::timeout(wait, s.read_exact(&mut got)).await, Ok(Ok(_)) if got[0] == byte)
    }

    #[tokio::test]
    async fn a_cut_link_stalls_both_ways_until_healed_and_spares_other_connections() {
        let (proxies, front) = echo_behind_proxy().await;
        let short = Duration::from_millis(300);
        let long = Duration::from_secs(5);
        // Connections made while no process is recorded belong to nobody: never cut.
        let mut workload = TcpStream::connect(front).await.unwrap();
        assert!(echoes(&mut workload, 1, long).await);
        proxies.set_pid(0, Some(std::process::id()));
        let mut peer = TcpStream::connect(front).await.unwrap();
        assert!(echoes(&mut peer, 2, long).await, "an open link forwards");

        proxies.isolate(0, &[1]);
        assert!(!echoes(&mut peer, 3, short).await, "a cut link forwards nothing");
        let mut during = TcpStream::connect(front).await.unwrap();
        assert!(!echoes(&mut during, 4, short).await, "nor does a connection made across the cut");
        assert!(echoes(&mut workload, 5, long).await, "the workload still gets through");

        proxies.heal(0, &[1]);
        let mut got = [0u8; 1];
        tokio::time::timeout(long, peer.read_exact(&mut got)).await.unwrap().unwrap();
        assert_eq!(got, [3], "what was held is delivered once healed");
        tokio::time::timeout(long, during.read_exact(&mut got)).await.unwrap().unwrap();
        assert_eq!(got, [4]);
        assert!(echoes(&mut peer, 6, long).await);
    }

    #[tokio::test]
    async fn a_cut_between_other_processes_leaves_a_link_alone() {
        let (proxies, front) = echo_behind_proxy().await;
        proxies.set_pid(0, Some(std::process::id()));
        let mut peer = TcpStream::connect(front).await.unwrap();
        // Process 1 cut from a third process only: 0 → 1 stays open.
        proxies.isolate(1, &[2]);
        assert!(echoes(&mut peer, 7, Duration::from_secs(5)).await);
    }

    /// A link's port serves one named process: cut with it, whoever opened the socket.
    #[tokio::test]
    async fn a_link_is_its_process_and_is_cut_with_it() {
        let (mut proxies, front) = echo_behind_proxy().await;
        let via = proxies.link(2, 1, SocketAddr::new(ip(BACKEND_IP), front.port())).await.unwrap();
        assert_ne!(via.port(), front.port(), "a link has a port of its own");
        let mut through_link = TcpStream::connect(via).await.unwrap();
        let mut direct = TcpStream::connect(front).await.unwrap();
        let (short, long) = (Duration::from_millis(300), Duration::from_secs(5));
        assert!(echoes(&mut through_link, 1, long).await);
        proxies.isolate(2, &[1]);
        assert!(!echoes(&mut through_link, 2, short).await, "process 2's link is cut");
        assert!(
            echoes(&mut direct, 3, long).await,
            "this process's own connection is not process 2's"
        );
        proxies.heal(2, &[1]);
        let mut got = [0u8; 1];
        tokio::time::timeout(long, through_link.read_exact(&mut got))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, [2], "held bytes arrive once healed");
    }
}
