//! The broker's services: typed requests in, typed results or one [`BrokerError`] out. They
//! know RocketMQ's semantics (topics, queues, groups, offsets, the stored-record layout) but
//! nothing of the wire — no `RemotingCommand`, no header, no response code — so a second front
//! end could call them as the RocketMQ one does.
//!
//! Owns: what each request means. Must never: block the async runtime (store work that can
//! block goes through the [`crate::StorePool`]), or grow a table without a bound.

pub mod admin;
pub mod consume;
pub mod groups;
pub mod offsets;
pub mod pop;
pub mod produce;
pub mod queue_locks;
pub mod schedule;
pub mod timer;
pub mod topics;
pub mod transactions;

use std::net::SocketAddr;
use std::pin::Pin;

#[cfg(test)]
pub(crate) mod testing;

pub use crate::error::BrokerError;

/// Whether the caller may act on a topic a service finds while serving it (the topic of the
/// record at a commit-log offset, which the request's own fields need not name truthfully):
/// the front end's access control decides; `Err` is the refusal.
pub type TopicCheck = std::sync::Arc<dyn Fn(&str) -> Result<(), BrokerError> + Send + Sync>;

/// A [`TopicCheck`] that lets everything through (the broker's own work, tests).
#[must_use]
pub fn any_topic() -> TopicCheck {
    std::sync::Arc::new(|_: &str| Ok(()))
}

/// A connected client as the services see it: something to tell that its group changed.
pub trait ClientHandle: Send + Sync {
    /// Unique per connection within this process.
    fn id(&self) -> u64;
    /// The client's address.
    fn peer(&self) -> SocketAddr;
    /// Tells the client its consumer group's membership changed; false if it could not be told
    /// now (the client also rebalances every 20 s on its own).
    fn notify_consumer_ids_changed(&self, group: &str) -> bool;
    /// Asks the producer whether a half message's transaction committed (it answers with
    /// END_TRANSACTION); false if it could not be asked now.
    fn check_transaction_state(&self, check: &TransactionCheck) -> bool;
    /// Hands a reply to the client that sent the request (PUSH_REPLY_MESSAGE_TO_CLIENT) and
    /// waits, at most `REPLY_PUSH_TIMEOUT`, for it to take it; the error says why it did not.
    fn push_reply(&self, reply: ReplyPush) -> Pin<Box<dyn Future<Output = Result<(), PushError>> + Send + 'static>>;
    /// Asks the client what an admin wants of it and waits, at most [`CLIENT_CALL_TIMEOUT`],
    /// for its answer: the body RocketMQ's admin tools read (`ConsumerRunningInfo`,
    /// `ConsumeMessageDirectlyResult`), or why there is none.
    fn ask(&self, question: ClientQuestion) -> Pin<Box<dyn Future<Output = Result<bytes::Bytes, PushError>> + Send + 'static>>;
    /// The protocol the client speaks, as RocketMQ's metrics name it (`protocol_type`).
    fn protocol(&self) -> &'static str {
        "remoting"
    }
}

/// How long the broker waits for a client asked on an admin's behalf: under the admin's own
/// 5 s, so the admin gets the broker's answer (a timeout with its code) rather than its own.
pub const CLIENT_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4);

/// What an admin asks of one client, through the broker.
#[derive(Debug, Clone)]
pub enum ClientQuestion {
    /// GET_CONSUMER_RUNNING_INFO: the consumer's state, and its thread stacks if `jstack`.
    RunningInfo {
        /// The consumer's group.
        group: String,
        /// The consumer's client id.
        client_id: String,
        /// Whether to include the client's thread stacks.
        jstack: bool,
    },
    /// CONSUME_MESSAGE_DIRECTLY: consume this stored message now and say how it went.
    ConsumeDirectly {
        /// The consumer's group.
        group: String,
        /// The consumer's client id.
        client_id: String,
        /// The message's offset message id.
        msg_id: String,
        /// The message's topic, as the admin named it.
        topic: Option<String>,
        /// This broker's name.
        broker_name: String,
        /// The topic's system flag, when the topic exists.
        topic_sys_flag: Option<i32>,
        /// The group's system flag, when the group exists.
        group_sys_flag: Option<i32>,
        /// The message as stored.
        record: bytes::Bytes,
    },
}

impl ClientQuestion {
    /// The group and client the question is for.
    #[must_use]
    pub fn client(&self) -> (&str, &str) {
        match self {
            ClientQuestion::RunningInfo { group, client_id, .. } | ClientQuestion::ConsumeDirectly { group, client_id, .. } => {
                (group, client_id)
            }
        }
    }
}

/// How long a reply's push to its requester may take before the replier is told it failed.
pub const REPLY_PUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// PUSH_REPLY_MESSAGE_TO_CLIENT as the services hand it over: the replying send's fields, where
/// it was born and stored, and its body. Plain fields: each front end spells them its own way.
#[derive(Debug, Clone)]
pub struct ReplyPush {
    /// The replying producer's group.
    pub producer_group: String,
    /// The reply topic the send named.
    pub topic: String,
    /// The send's template topic for auto-creation.
    pub default_topic: String,
    /// Queues the send asked an auto-created topic to get.
    pub default_topic_queue_nums: i32,
    /// The queue the send named.
    pub queue_id: i32,
    /// The send's message system flags.
    pub sys_flag: i32,
    /// When the replier created the reply.
    pub born_timestamp_ms: i64,
    /// The application's flag of the reply.
    pub flag: i32,
    /// The reply's properties, with the push time added just before it is pushed.
    pub properties: Option<String>,
    /// The send's reconsume count, if it carried one.
    pub reconsume_times: Option<i32>,
    /// The send's unit mode flag, if it carried one.
    pub unit_mode: Option<bool>,
    /// The replier's address.
    pub born_host: SocketAddr,
    /// This broker's address.
    pub store_host: SocketAddr,
    /// When this broker took the reply.
    pub store_timestamp_ms: i64,
    /// The reply's body.
    pub body: bytes::Bytes,
}

/// Why a client did not take what was pushed to it.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The client answered, with a failure.
    #[error("code {code}: {remark}")]
    Refused {
        /// The response code the client answered with.
        code: i32,
        /// The client's remark on it.
        remark: String,
    },
    /// The client's connection failed, or it cannot be asked this.
    #[error("{0}")]
    Unreached(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The client did not answer within the bound.
    #[error("no answer within {0:?}")]
    TimedOut(std::time::Duration),
}

/// CHECK_TRANSACTION_STATE as the services ask it.
#[derive(Debug, Clone)]
pub struct TransactionCheck {
    /// The half message's queue offset in the half topic (of the copy being checked).
    pub tran_state_table_offset: i64,
    /// The half message's commit-log offset (of the copy being checked).
    pub commit_log_offset: i64,
    /// The client's message id (`UNIQ_KEY`), also the transaction id.
    pub msg_id: Option<String>,
    /// The checked copy's offset message id: this broker's address and its commit-log offset.
    pub offset_msg_id: String,
    /// The message as the producer sent it: its real topic and queue, encoded as stored.
    pub record: Vec<u8>,
}

/// Tells the name servers what this broker serves, and resolves once they know.
pub trait RouteAnnouncer: Send + Sync {
    /// Asks for a registration with the name servers now; the future resolves once it has run.
    fn announce(&self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>>;
}

/// Longest name of a consumer or producer group (`Validators.CHARACTER_MAX_LENGTH`).
pub const GROUP_MAX_LENGTH: usize = 255;

/// Why a group name is refused: RocketMQ's character set, at most 255 characters.
///
/// # Errors
/// The remark to answer with.
pub fn validate_group_name(group: &str) -> Result<(), BrokerError> {
    if group.trim().is_empty() {
        return Err(BrokerError::InvalidParameter("the specified group is blank".into()));
    }
    if group.len() > GROUP_MAX_LENGTH {
        return Err(BrokerError::InvalidParameter(format!(
            "the specified group is longer than group max length {GROUP_MAX_LENGTH}"
        )));
    }
    if !group.bytes().all(valid_name_byte) {
        return Err(BrokerError::InvalidParameter(format!(
            "the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )));
    }
    Ok(())
}

/// RocketMQ's name characters: `^[%|a-zA-Z0-9_-]+$`.
pub(crate) fn valid_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'%' || b == b'|' || b == b'_' || b == b'-'
}

/// The stored record that starts at commit-log `offset`, read on the store pool, from the cold
/// tier when it left the disk; `None` when no record starts there (a negative offset, past the
/// end, mid-record, or removed).
///
/// # Errors
/// The store pool is full, or the cold tier holds the offset but cannot answer now (a
/// "retry later", never a "not found": the record exists).
pub(crate) async fn record_at(
    store: &std::sync::Arc<petrel_store::MessageStore>,
    pool: &crate::store_pool::StorePool,
    offset: i64,
) -> Result<Option<Vec<u8>>, BrokerError> {
    let store = store.clone();
    let read = move || u64::try_from(offset).map_or(Ok(None), |o| store.read_record(o));
    Ok(pool.run(read)?.await??)
}
