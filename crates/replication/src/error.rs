//! `ReplicationError`: why an HA connection or a step of it ended. Both ends log it and
//! reconnect; nothing of it reaches a client (the broker answers sends from the ack gate).
//!
//! Owns: the failure vocabulary of replication, with the I/O, TLS and store errors kept as
//! sources. Must never: lose the step that failed (each I/O error says what it was doing).

use std::time::Duration;

use petrel_store::StoreError;

/// Why an HA connection, or a step of it, failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// A socket step failed; `step` says which (connect, a report, the slave's nonce…).
    #[error("{step}: {source}")]
    Io {
        /// What the connection was doing.
        step: &'static str,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
    /// The master's address does not resolve, or names no TLS server name.
    #[error("the master's address {addr}: {why}")]
    Address {
        /// The master's address, as configured.
        addr: String,
        /// Why it cannot be used.
        why: String,
    },
    /// The TLS session could not be set up or failed.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The local store failed a step: applying received bytes, or cutting the log to agree with the master.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The peer broke the protocol: a malformed or oversized frame or report, a second
    /// handshake, a log that shares no epoch with the master's.
    #[error("{0}")]
    Protocol(String),
    /// The peer did not prove `haSecret`, or closed instead of proving it.
    #[error("haSecret: {0}")]
    Unauthenticated(&'static str),
    /// The master closed the connection.
    #[error("the master closed the connection")]
    Closed,
    /// Nothing arrived from the master within `haHousekeepingInterval`.
    #[error("nothing from the master for {0:?}")]
    Silent(Duration),
    /// The master sent bytes past this log's end: the slave reconnects to report its end again.
    #[error("the master sent offset {got} but this log ends at {expected}; reconnecting to report the end again")]
    Gap {
        /// This log's end: the offset the next frame had to start at.
        expected: u64,
        /// The offset the frame started at.
        got: u64,
    },
    /// The master no longer holds the offset a slave needs next: retention deleted it while the
    /// slave was behind.
    #[error("offset {0} is no longer in the master's log (deleted while the slave was behind)")]
    Gone(u64),
    /// The master's own log failed (a write error): nothing more can be sent.
    #[error("the master's log failed: {0}")]
    LogFailed(std::sync::Arc<str>),
    /// The master's epoch could not be recorded.
    #[error("the master's epoch {epoch} at {start}: {source}")]
    Epoch {
        /// The epoch the master's frame named.
        epoch: i32,
        /// The commit-log offset the master said that epoch begins at.
        start: u64,
        /// Why the epoch file refused it.
        #[source]
        source: StoreError,
    },
}

/// Names the step an I/O result belongs to.
pub(crate) trait Step<T> {
    fn step(self, step: &'static str) -> Result<T, ReplicationError>;
}

impl<T> Step<T> for std::io::Result<T> {
    fn step(self, step: &'static str) -> Result<T, ReplicationError> {
        self.map_err(|source| ReplicationError::Io { step, source })
    }
}
