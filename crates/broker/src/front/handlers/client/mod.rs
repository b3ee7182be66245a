//! Clients: heartbeats, unregistration, group membership, client config checks, orderly
//! consumers' queue locks.

pub(in crate::front) mod ask;
pub(in crate::front) mod check_config;
pub(in crate::front) mod consumers;
pub(in crate::front) mod heartbeat;
pub(in crate::front) mod producers;
pub(in crate::front) mod queue_lock;
pub(in crate::front) mod unregister;
