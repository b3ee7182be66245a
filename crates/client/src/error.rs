//! Client errors.

use std::time::Duration;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection could not be opened.
    #[error("connect to {addr}: {source}")]
    Connect {
        /// The address dialled.
        addr: String,
        /// The I/O error the connect failed with.
        source: std::io::Error,
    },
    /// The connection to the given address closed before the answer came.
    #[error("connection to {0} closed")]
    Closed(String),
    /// No answer came within the call's deadline.
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout {
        /// The address the request went to.
        addr: String,
        /// The deadline that passed.
        timeout: Duration,
    },
    /// The peer sent bytes that do not decode as a remoting frame.
    #[error("bad frame from {addr}: {reason}")]
    Frame {
        /// The address the frame came from.
        addr: String,
        /// What was wrong with the frame.
        reason: String,
    },
    /// The broker or name server answered with a response code other than success.
    #[error("{addr} answered code {code}: {remark}")]
    Broker {
        /// The address that answered.
        addr: String,
        /// The RocketMQ response code.
        code: i32,
        /// The remark the answer carried, explaining the code.
        remark: String,
    },
    /// No queue or broker is known for the topic (or topic and queue) named.
    #[error("no route for topic {0}")]
    NoRoute(String),
    /// An answer (or a request body being built) could not be encoded or decoded; holds the reason.
    #[error("bad answer: {0}")]
    BadAnswer(String),
    /// Too many calls already wait on the connection; holds a description naming the address.
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
