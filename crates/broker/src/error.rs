//! `BrokerError`: every way a broker service can refuse or fail a request, in one enum. The
//! RocketMQ front end turns it into a response code and remark in exactly one place
//! (`front::reply::from_error`); a second front end would map the same enum its own way.
//!
//! Owns: the failure vocabulary of the services. Must never: carry wire details (codes, headers)
//! — only what happened and the words a client or operator should read.

use petrel_store::StoreError;

/// Why a broker service refused or failed a request; the text is the remark a client reads.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A request field is missing or malformed (the remark names it).
    #[error("{0}")]
    BadRequest(String),
    /// A value is outside what the broker accepts (a queue id, a topic name).
    #[error("{0}")]
    InvalidParameter(String),
    /// The message itself is unacceptable (too large, malformed properties).
    #[error("{0}")]
    MessageIllegal(String),
    /// The topic or broker forbids this (perm bits, reserved topics, unsupported features).
    #[error("{0}")]
    NoPermission(String),
    /// The topic does not exist; the remark is the one RocketMQ gives for this request.
    #[error("{0}")]
    TopicNotExist(String),
    /// The consumer group is not known and may not be created implicitly.
    #[error("{0}")]
    GroupNotExist(String),
    /// A subscription expression cannot be used.
    #[error("{0}")]
    SubscriptionParseFailed(String),
    /// The consumer group has no client connected to this broker.
    #[error("{0}")]
    ConsumerNotOnline(String),
    /// Something RocketMQ can do that Petrel does not (yet): SQL92 filters, transactions.
    #[error("{0}")]
    NotSupported(String),
    /// A query for messages (by key or id) found none.
    #[error("{0}")]
    QueryNotFound(String),
    /// A bound is reached (waiters, pool queue, long polls); the client should back off.
    #[error("{0}")]
    Busy(String),
    /// A configured limit on what the broker holds is reached (topics, groups).
    #[error("{0}")]
    LimitReached(String),
    /// Fewer replicas are in sync than `minInSyncReplicas`: refused before writing.
    #[error("{0}")]
    InSyncReplicasNotEnough(String),
    /// The broker cannot take writes now (disk full, a flush failed, shutting down).
    #[error("{0}")]
    Unavailable(String),
    /// The store refused or failed the operation.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A metadata file or another local resource failed; `what` names it.
    #[error("{what}: {source}")]
    Io {
        /// The file or resource, and what was being done with it.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A metadata file or a master's table is not the JSON it should be.
    #[error("{what}: {source}")]
    Corrupt {
        /// The file or table that does not parse.
        what: String,
        /// Why it does not parse.
        #[source]
        source: petrel_protocol::BodyError,
    },
    /// A table in standard JSON (a master's offsets) that does not parse.
    #[error("{what}: {source}")]
    Json {
        /// The table that does not parse.
        what: &'static str,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// A background writer failed or stopped; its own error is kept.
    #[error("{what}: {source}")]
    Persist {
        /// What the writer was saving.
        what: &'static str,
        /// The writer's own failure.
        #[source]
        source: crate::persist::WriteFailed,
    },
    /// A stored record that does not decode; `what` says which and why it was read.
    #[error("{what}: {source}")]
    Record {
        /// Which record, and why it was read.
        what: String,
        /// Why it does not decode.
        #[source]
        source: petrel_protocol::MessageError,
    },
    /// Access control could not open or apply its users and ACLs.
    #[error("access control: {0}")]
    Auth(#[from] petrel_auth::AuthError),
    /// Replication could not start (the HA port, its threads).
    #[error("replication: {0}")]
    Replication(#[from] petrel_replication::ReplicationError),
    /// The cold tier could not start, or an object store operation failed.
    #[error("cold tier: {0}")]
    Tier(#[from] petrel_tier::TierError),
    /// A broken invariant or an unexpected state; the text says what.
    #[error("{0}")]
    Internal(String),
}

impl BrokerError {
    /// A closure naming the file or resource behind an I/O error.
    pub fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> BrokerError {
        let what = what.to_string();
        move |source| BrokerError::Io { what, source }
    }

    /// A closure naming the file or table behind a JSON error.
    pub fn corrupt(what: impl std::fmt::Display) -> impl FnOnce(petrel_protocol::BodyError) -> BrokerError {
        let what = what.to_string();
        move |source| BrokerError::Corrupt { what, source }
    }

    /// Whether the client should try again later: a bound reached now, or an object store slow
    /// or failing (every wire answers these with its busy code). Such an error is never turned
    /// into "not found".
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            BrokerError::Busy(_) | BrokerError::Tier(_) | BrokerError::Store(StoreError::WouldBlock(_) | StoreError::ColdTier { .. })
        )
    }

    /// The remark RocketMQ gives a send or pull to a topic it does not have.
    #[must_use]
    pub fn topic_not_exist(topic: &str) -> BrokerError {
        BrokerError::TopicNotExist(format!(
            "topic[{topic}] not exist, apply first please! https://rocketmq.apache.org/docs/bestPractice/06FAQ"
        ))
    }
}
