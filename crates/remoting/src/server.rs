//! The accept loop: a bound on connections, and a drain that lets every connection finish what
//! it owes before the process exits.
//!
//! Owns: the listener, the connection count and the tasks serving connections. Must never: accept
//! past `max_connections` (a connection over the bound is closed at once, with a log line at most
//! once a second), or stop the process before draining connections have answered — or their
//! drain timeout has passed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::connection::Connection;
use crate::handler::Handler;
use crate::io::{CloseReason, run};
use crate::limits::ServerLimits;
use crate::tls::{Accepted, ServerTls};

/// Pause after a failed accept (EMFILE and friends) before the next try.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Counters of one server, read by metrics.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections open now.
    pub open: AtomicUsize,
    /// Connections taken in (not refused on arrival) since the server started.
    pub accepted: AtomicU64,
    /// Closed on arrival: `max_connections` were open.
    pub refused: AtomicU64,
    /// Closed because nothing moved either way for the idle timeout.
    pub closed_idle: AtomicU64,
    /// Closed because the peer sent bytes that are not a frame (or one over the size bound).
    pub closed_bad_frame: AtomicU64,
    /// Closed on arrival or after their TLS handshake: the process's descriptors were spent.
    pub refused_descriptors: AtomicU64,
}

/// Logs at most once per interval, counting what it held back.
struct RateLimitedLog {
    last: parking_lot::Mutex<Option<Instant>>,
    suppressed: AtomicU64,
    every: Duration,
}

impl RateLimitedLog {
    fn new(every: Duration) -> RateLimitedLog {
        RateLimitedLog {
            last: parking_lot::Mutex::new(None),
            suppressed: AtomicU64::new(0),
            every,
        }
    }

    /// `Some(held back since the last line)` when a line may be written now.
    fn allow(&self) -> Option<u64> {
        let mut last = self.last.lock();
        if last.is_some_and(|t| t.elapsed() < self.every) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(Instant::now());
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
}

/// A running server.
pub struct Server {
    name: &'static str,
    local_addr: SocketAddr,
    drain: watch::Sender<bool>,
    tracker: TaskTracker,
    accept: JoinHandle<()>,
    stats: Arc<ServerStats>,
    limits: ServerLimits,
}

impl Server {
    /// Starts serving `handler` on `listener`.
    ///
    /// # Errors
    /// The listener's address cannot be read, or the limits cannot work.
    pub fn start(name: &'static str, listener: TcpListener, handler: Arc<dyn Handler>, limits: ServerLimits) -> std::io::Result<Server> {
        Self::start_with_tls(name, listener, handler, limits, None)
    }

    /// [`Server::start`], with TLS on the port as `tls` says (none when `None`).
    ///
    /// # Errors
    /// The listener's address cannot be read, or the limits cannot work.
    pub fn start_with_tls(
        name: &'static str,
        listener: TcpListener,
        handler: Arc<dyn Handler>,
        limits: ServerLimits,
        tls: Option<Arc<ServerTls>>,
    ) -> std::io::Result<Server> {
        limits
            .validate()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let local_addr = listener.local_addr()?;
        let (drain, _) = watch::channel(false);
        let tracker = TaskTracker::new();
        let stats = Arc::new(ServerStats::default());
        let accept = tokio::spawn(accept_loop(
            name,
            listener,
            handler,
            tls,
            limits.clone(),
            drain.clone(),
            tracker.clone(),
            stats.clone(),
        ));
        Ok(Server {
            name,
            local_addr,
            drain,
            tracker,
            accept,
            stats,
            limits,
        })
    }

    /// The address the server listens on (with the port the system chose, when asked for port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server's counters, shared: they keep counting after this call.
    #[must_use]
    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// Stops accepting, tells every connection to stop reading requests and finish the answers
    /// it owes, and waits until they have closed (each gives up after its drain timeout).
    pub async fn drain(self) {
        self.accept.abort();
        let _ = self.drain.send(true);
        self.tracker.close();
        let open = self.stats.open.load(Ordering::Relaxed);
        tracing::info!(server = self.name, open, "draining connections");
        let limit = self.limits.connection.drain_timeout + Duration::from_secs(1);
        if tokio::time::timeout(limit, self.tracker.wait()).await.is_err() {
            tracing::warn!(server = self.name, "connections still open after the drain timeout");
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn accept_loop(
    name: &'static str,
    listener: TcpListener,
    handler: Arc<dyn Handler>,
    tls: Option<Arc<ServerTls>>,
    limits: ServerLimits,
    drain: watch::Sender<bool>,
    tracker: TaskTracker,
    stats: Arc<ServerStats>,
) {
    let refusals = RateLimitedLog::new(Duration::from_secs(1));
    let failures = RateLimitedLog::new(Duration::from_secs(1));
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                if let Some(held_back) = failures.allow() {
                    tracing::warn!(server = name, error = %e, held_back, "accept failed");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if stats.open.load(Ordering::Acquire) >= limits.max_connections {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            if let Some(held_back) = refusals.allow() {
                tracing::warn!(
                    server = name,
                    %peer,
                    max_connections = limits.max_connections,
                    held_back,
                    "connection refused: the connection limit is reached"
                );
            }
            drop(socket);
            continue;
        }
        let Some(socket_share) = crate::descriptors::take(crate::descriptors::PLAIN_CONNECTION_DESCRIPTORS) else {
            stats.refused_descriptors.fetch_add(1, Ordering::Relaxed);
            if let Some(held_back) = refusals.allow() {
                tracing::warn!(
                    server = name,
                    %peer,
                    held = crate::descriptors::descriptors_held(),
                    held_back,
                    "connection refused: the process's descriptors for connections are spent (the store keeps its reserve)"
                );
            }
            drop(socket);
            continue;
        };
        stats.open.fetch_add(1, Ordering::AcqRel);
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = socket.set_nodelay(true);
        let conn = Arc::new(Connection::new(
            peer,
            limits.connection.max_queued_bytes,
            limits.connection.max_in_flight,
        ));
        let (handler, limits, stats, drain) = (handler.clone(), limits.clone(), stats.clone(), drain.subscribe());
        let tls = tls.clone();
        tracker.spawn(async move {
            let _socket_share = socket_share;
            let budget = Some(limits.partial_frames.clone());
            let limits = limits.connection;
            let reason = match tls {
                None => run(socket, conn, handler, limits, Some(drain), budget).await,
                Some(tls) => match tls.accept(socket).await {
                    Ok(Accepted::Plain(socket)) => run(socket, conn, handler, limits, Some(drain), budget).await,
                    Ok(Accepted::Tls(pair, binding)) => {
                        conn.set_channel_binding(binding);
                        run(pair, conn, handler, limits, Some(drain), budget).await
                    }
                    Err(e) => {
                        if e.kind() == std::io::ErrorKind::OutOfMemory {
                            stats.refused_descriptors.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(server = name, %peer, error = %e, "TLS connection closed");
                        } else {
                            tracing::debug!(server = name, %peer, error = %e, "TLS handshake failed");
                        }
                        CloseReason::Io(e)
                    }
                },
            };
            match &reason {
                CloseReason::Idle => {
                    stats.closed_idle.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(server = name, %peer, "closed an idle connection");
                }
                CloseReason::BadFrame(e) => {
                    stats.closed_bad_frame.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(server = name, %peer, error = %e, "closing connection after a bad frame");
                }
                _ => {}
            }
            stats.open.fetch_sub(1, Ordering::AcqRel);
        });
    }
}
