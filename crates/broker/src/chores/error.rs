//! `ChoreError`: why one round of a background chore (registration, a slave's metadata sync,
//! the dealings with the controllers, a metadata write) failed. A chore logs it and tries again
//! next round; nothing of it reaches a client.
//!
//! Owns: the chores' failure vocabulary, with the transport, decoding, store and broker errors
//! kept as sources. Must never: lose which peer or which step failed.

use petrel_protocol::{BodyError, HeaderError};
use petrel_remoting::CallError;

use crate::error::BrokerError;

#[derive(Debug, thiserror::Error)]
pub enum ChoreError {
    /// A call to a name server, a controller or the master found nobody or no answer.
    #[error("{peer}: {source}")]
    Call {
        peer: String,
        #[source]
        source: CallError,
    },
    /// The peer answered with a refusal.
    #[error("{peer} answered code {code}: {remark}")]
    Refused { peer: String, code: i32, remark: String },
    /// An answer's header is not what its code promises.
    #[error("{what}: {source}")]
    Header {
        what: &'static str,
        #[source]
        source: HeaderError,
    },
    /// An answer's body is not what its code promises.
    #[error("{what}: {source}")]
    Body {
        what: &'static str,
        #[source]
        source: BodyError,
    },
    /// An answer that is well formed but cannot be acted on (no leader named, no master in
    /// the set, an id out of range).
    #[error("{0}")]
    Unusable(String),
    /// Writing a metadata file, or another local step, failed.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Broker(#[from] BrokerError),
    #[error(transparent)]
    Replication(#[from] petrel_replication::ReplicationError),
}

impl ChoreError {
    /// A closure naming the peer of a failed call.
    pub(crate) fn call(peer: &str) -> impl FnOnce(CallError) -> ChoreError + '_ {
        move |source| ChoreError::Call {
            peer: peer.to_owned(),
            source,
        }
    }

    /// A refusal from `peer`.
    pub(crate) fn refused(peer: &str, answer: petrel_protocol::RemotingCommand) -> ChoreError {
        ChoreError::Refused {
            peer: peer.to_owned(),
            code: answer.code,
            remark: answer.remark.unwrap_or_default(),
        }
    }
}
