//! Clients: heartbeats, unregistration, group membership, client config checks, orderly
//! consumers' queue locks.

pub(super) mod check_config;
pub(super) mod consumers;
pub(super) mod heartbeat;
pub(super) mod queue_lock;
pub(super) mod unregister;
