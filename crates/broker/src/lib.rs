//! Request handling for Petrel: the name server and the broker's processors.
//!
//! Owns: turning RemotingCommands into answers with the codes, headers and bodies the official
//! clients expect, and the TCP serving loop. Must never: touch files directly except its small
//! metadata files (the message data is the store's), or block the async runtime.

pub mod admin;
pub mod broker;
pub mod clients;
pub mod config;
pub mod consumer;
pub mod long_poll;
pub mod metrics;
pub mod namesrv;
pub mod offsets;
pub mod outbound;
pub mod persist;
pub mod pull;
pub mod send;
pub mod server;
pub mod topics;

pub use broker::{Broker, BrokerError, BrokerHandler, NameServers};
pub use config::BrokerConfig;
