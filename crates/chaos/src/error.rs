//! What can stop a chaos run before it has a verdict.

use petrel_client::ClientError;

/// Why a chaos run ended without a verdict.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// The cluster or its network could not be set up.
    #[error("set-up: {0}")]
    Setup(String),
    /// A file or process operation of the harness failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A client call the run cannot go on without failed (the workload's own failures are counted instead).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The report could not be serialized or written.
    #[error("report: {0}")]
    Report(String),
}

pub type Result<T> = std::result::Result<T, ChaosError>;
