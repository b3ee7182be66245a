//! The broker's own topic names and prefixes, as RocketMQ spells them: the names every layer
//! that treats them specially (the broker's services, light message queues, access control)
//! must agree on, so they are said once, here.
//!
//! Owns: the names. Must never: hold a name a client may choose for a topic of its own.

/// Prefix of a consumer group's retry topic, `%RETRY%<group>`.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic, `%DLQ%<group>`.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Prefix of the broker's system topics (`rmq_sys_…`).
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// The topic delayed messages wait in, one queue per level.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// The topic timer messages wait in.
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// Where half messages wait, unread by consumers, until their transaction is decided.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where the op records go, one per decided half message.
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
