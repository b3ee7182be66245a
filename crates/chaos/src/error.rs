//! What can stop a chaos run before it has a verdict.

use petrel_client::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// The cluster or its network could not be set up.
    #[error("set-up: {0}")]
    Setup(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("report: {0}")]
    Report(String),
}

pub type Result<T> = std::result::Result<T, ChaosError>;
