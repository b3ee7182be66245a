//! Clients: heartbeats, unregistration, group membership, client config checks.

pub(super) mod check_config;
pub(super) mod consumers;
pub(super) mod heartbeat;
pub(super) mod unregister;
