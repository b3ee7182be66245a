//! Outbound connections: connect, then call the peer and wait for answers by opaque on one
//! multiplexed connection (what a client, a broker registering with name servers, and the load
//! generator all need).
//!
//! Owns: connecting with a deadline and starting the connection's loop. Must never: wait for a
//! connect without a deadline.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::connection::Connection;
use crate::error::CallError;
use crate::handler::Handler;
use crate::io::run;
use crate::limits::ConnectionLimits;
use crate::tls::ClientTls;

/// Connects to `addr` and starts serving the connection; requests the peer sends go to
/// `handler` (use [`crate::IgnoreRequests`] when there is nothing to answer).
///
/// # Errors
/// [`CallError::Connect`] when the peer cannot be reached within `connect_timeout`.
pub async fn connect(
    addr: &str,
    connect_timeout: Duration,
    limits: ConnectionLimits,
    handler: Arc<dyn Handler>,
) -> Result<Arc<Connection>, CallError> {
    connect_with_tls(addr, connect_timeout, limits, handler, None).await
}

/// [`connect`], over TLS when `tls` is given (the connection then knows the session's channel
/// binding, [`Connection::channel_binding`]).
///
/// # Errors
/// [`CallError::Connect`] when the peer cannot be reached, or the TLS handshake fails, within
/// `connect_timeout` (the handshake has its own bound).
pub async fn connect_with_tls(
    addr: &str,
    connect_timeout: Duration,
    limits: ConnectionLimits,
    handler: Arc<dyn Handler>,
    tls: Option<&ClientTls>,
) -> Result<Arc<Connection>, CallError> {
    let connect_error = |source| CallError::Connect {
        addr: addr.to_owned(),
        source,
    };
    let socket = tokio::time::timeout(connect_timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| connect_error(std::io::ErrorKind::TimedOut.into()))?
        .map_err(connect_error)?;
    let _ = socket.set_nodelay(true);
    let peer = socket.peer_addr().map_err(connect_error)?;
    let conn = Arc::new(Connection::new(peer, limits.max_queued_bytes, limits.max_in_flight));
    let task_conn = conn.clone();
    match tls {
        None => {
            tokio::spawn(async move {
                let reason = run(socket, task_conn, handler, limits, None, None).await;
                tracing::debug!(%peer, ?reason, "outbound connection closed");
            });
        }
        Some(tls) => {
            let (pair, binding) = tls.connect(addr, socket).await.map_err(connect_error)?;
            conn.set_channel_binding(binding);
            tokio::spawn(async move {
                let reason = run(pair, task_conn, handler, limits, None, None).await;
                tracing::debug!(%peer, ?reason, "outbound TLS connection closed");
            });
        }
    }
    Ok(conn)
}
