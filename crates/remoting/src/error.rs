//! Transport errors: what a call or a connect can fail with.

use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("connect to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("connection to {0} closed")]
    Closed(SocketAddr),
    #[error("no answer from {peer} within {timeout:?}")]
    Timeout { peer: SocketAddr, timeout: Duration },
    #[error("{0} calls already wait for answers on this connection")]
    Busy(usize),
}
