//! Client errors.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("connection to {0} closed")]
    Closed(String),
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("bad frame from {addr}: {reason}")]
    Frame { addr: String, reason: String },
    #[error("{addr} answered code {code}: {remark}")]
    Broker { addr: String, code: i32, remark: String },
    #[error("no route for topic {0}")]
    NoRoute(String),
    #[error("bad answer: {0}")]
    BadAnswer(String),
    #[error("{0}")]
    Busy(String),
}

impl ClientError {
    /// The response code, when the broker answered with an error.
    pub fn code(&self) -> Option<i32> {
        match self {
            ClientError::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }
}
