//! The name server: which brokers exist, in which clusters, at which addresses, and which topics
//! each master serves — fed by REGISTER_BROKER, read by GET_ROUTEINFO_BY_TOPIC and
//! GET_BROKER_CLUSTER_INFO — served over `petrel-remoting` or called in process by an embedded
//! broker.
//!
//! Owns: the route table and KV config, and the answer to every name-server request code. Must
//! never: answer with a shape the Go client cannot parse (`brokerAddrs` always present) or a
//! remark that differs from Java's where clients or operators read it.

#![forbid(unsafe_code)]

mod access;
mod config;
mod expiry;
mod handlers;
mod state;

pub use access::NamesrvAccess;
pub use config::{NAMESRV_KEYS, NamesrvConfig, NamesrvSection, known_to_rocketmq as config_known_to_rocketmq};
pub use expiry::{EXPIRY_SCAN_INTERVAL, run_expiry};
pub use handlers::served_codes;
pub use state::{BROKER_EXPIRY, MASTER_ID, MAX_KV_BYTES, MAX_KV_ENTRIES, NameServer, no_route_remark};
