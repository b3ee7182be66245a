//! The broker: typed services over the store (produce, consume, offsets, topics, groups,
//! admin), the RocketMQ front end that maps request codes onto them, and the background chores.
//!
//! Owns: what every broker request means, and the broker's metadata files. Must never: touch
//! message data except through the store, block the async runtime (store work that can block
//! runs on the [`StorePool`]), or hold anything without a bound.

#![forbid(unsafe_code)]

pub mod access;
mod broker;
mod chores;
pub mod config;
mod error;
mod front;
mod long_poll;
pub mod metrics;
mod persist;
pub mod quota;
pub mod replication;
pub mod role;
pub mod services;
mod stats;
mod store_pool;
pub mod tiering;
pub mod traffic;

pub use broker::Broker;
pub use chores::registration::{NameServers, Registrar};
pub use config::{BrokerConfig, BrokerRole, ConfigError, MetricsExporter};
pub use error::BrokerError;
pub use front::{RocketMqFront, served_codes};
pub use long_poll::LongPoll;
pub use stats::BrokerStats;
pub use store_pool::StorePool;

pub(crate) use petrel_kit::clock::now_ms;
