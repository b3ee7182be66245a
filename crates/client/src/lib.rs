//! A small async client for RocketMQ's remoting protocol: name-server routes, sends (sync,
//! oneway, batch), pulls, and the admin calls a load generator needs. It speaks to Petrel and to
//! Apache RocketMQ alike.
//!
//! Owns: connections (one per address, requests matched to answers by opaque) and the typed
//! calls on top. Must never: wait without a deadline, or let one connection's failure poison
//! another.

#![forbid(unsafe_code)]

pub mod client;
pub mod connection;
pub mod error;

pub use client::{Client, PullResult, SendResult};
pub use connection::{Connection, Credentials};
pub use error::ClientError;
