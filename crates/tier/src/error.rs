//! The tier's one error type.

use std::path::PathBuf;

/// Why a tier operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    /// The settings cannot work.
    #[error("tier configuration: {0}")]
    Config(String),
    /// The object store refused or failed (after its retries).
    #[error("object store: {what}: {source}")]
    ObjectStore {
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: object_store::Error,
    },
    /// A local file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// What the object store holds is not what was sent: a checksum or a size differs.
    #[error("checksum: {0}")]
    Checksum(String),
    /// The object store did not answer in time.
    #[error("timeout: {0}")]
    Timeout(String),
    /// The local manifest cannot be read.
    #[error("tier manifest: {0}")]
    Manifest(String),
    /// The tier holds no segment starting at this offset.
    #[error("no tiered segment starts at {0}")]
    NotTiered(u64),
}

impl TierError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TierError {
        TierError::Io { path: path.into(), source }
    }

    pub(crate) fn store(what: impl Into<String>, source: object_store::Error) -> TierError {
        TierError::ObjectStore { what: what.into(), source }
    }

    /// Whether the object store answered that the object is not there: asking again will not
    /// bring it back (every other failure may pass).
    #[must_use]
    pub fn is_gone(&self) -> bool {
        matches!(
            self,
            TierError::ObjectStore {
                source: object_store::Error::NotFound { .. },
                ..
            }
        )
    }
}

/// The tier's results.
pub type Result<T> = std::result::Result<T, TierError>;
