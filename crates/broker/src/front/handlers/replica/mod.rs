//! What a slave reads from its master to take over its metadata (RocketMQ's `SlaveSynchronize`).

pub(in crate::front) mod controller;
pub(in crate::front) mod ha_info;
pub(in crate::front) mod metadata;
