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

/// Why a server or a client cannot be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A limit that cannot work; the text names the field.
    #[error("{0}")]
    Limit(String),
    /// TLS is turned on without what it needs.
    #[error("{0}")]
    TlsConfig(&'static str),
    /// A certificate or key file cannot be read, or is not PEM.
    #[error("{path}: {source}")]
    File {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A PEM file holds nothing usable.
    #[error("{path}: {why}")]
    Pem { path: std::path::PathBuf, why: &'static str },
    /// rustls refused the configuration (a key that does not match its certificate…).
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
}

impl SetupError {
    pub(crate) fn file(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> SetupError + '_ {
        move |source| SetupError::File {
            path: path.to_owned(),
            source,
        }
    }
}
