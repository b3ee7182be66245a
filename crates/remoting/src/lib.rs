//! RocketMQ's remoting transport for every Petrel process: the server loop and the multiplexed
//! client connection, over one framed read/write loop.
//!
//! Owns: sockets, framing, the bounds of a connection (frame size, requests in flight, queued
//! bytes, idle time) and of a server (connection count, drain). Must never: interpret a request
//! code — handlers (the name server, the broker) do that — or let one connection's input or
//! slowness cost another connection anything but its share of CPU.

#![forbid(unsafe_code)]

mod budget;
mod client;
mod connection;
mod descriptors;
pub mod dispatch;
mod error;
mod handler;
mod io;
mod limits;
mod server;
mod tls;

pub use budget::{DEFAULT_PARTIAL_FRAME_BUDGET_BYTES, FrameBudget};
pub use client::{connect, connect_with_tls};
pub use connection::Connection;
pub use descriptors::{PLAIN_CONNECTION_DESCRIPTORS, TLS_BRIDGE_DESCRIPTORS, descriptors_held, set_descriptor_budget};
pub use error::{CallError, SetupError};
pub use handler::{Deferred, Handler, IgnoreRequests, Reply, answer, error};
pub use io::CloseReason;
pub use limits::{
    ConnectionLimits, DEFAULT_DRAIN_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_QUEUED_BYTES, ServerLimits,
};
pub use server::{Server, ServerStats};
pub use tls::{CHANNEL_BINDING_BYTES, CHANNEL_BINDING_LABEL, ClientTls, HANDSHAKE_TIMEOUT, ServerTls, TlsMode, channel_binding};
