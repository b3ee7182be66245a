//! Transport errors: what a call or a connect can fail with.

use std::net::SocketAddr;
use std::time::Duration;

/// Why a call, a oneway send or a connect failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The peer could not be reached (or its TLS handshake failed) within the connect timeout.
    #[error("connect to {addr}: {source}")]
    Connect {
        /// The address dialled, as given.
        addr: String,
        /// Why the connect failed; `TimedOut` when the connect timeout ran out.
        source: std::io::Error,
    },
    /// The connection to this peer is closed, closed before the answer came, or its send queue is full.
    #[error("connection to {0} closed")]
    Closed(SocketAddr),
    /// No answer came within the call's timeout; the connection stays open.
    #[error("no answer from {peer} within {timeout:?}")]
    Timeout {
        /// The peer that did not answer.
        peer: SocketAddr,
        /// How long the call waited.
        timeout: Duration,
    },
    /// The connection's bound on calls waiting for answers (`max_in_flight`, carried here) was reached.
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
        /// The file.
        path: std::path::PathBuf,
        /// Why it could not be read or parsed.
        #[source]
        source: std::io::Error,
    },
    /// A PEM file holds nothing usable.
    #[error("{path}: {why}")]
    Pem {
        /// The file.
        path: std::path::PathBuf,
        /// What it lacks.
        why: &'static str,
    },
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
