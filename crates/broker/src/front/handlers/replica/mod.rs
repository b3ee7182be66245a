//! What a slave reads from its master to take over its metadata (RocketMQ's `SlaveSynchronize`).

pub(super) mod controller;
pub(super) mod metadata;
