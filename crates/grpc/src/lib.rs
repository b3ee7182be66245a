//! RocketMQ 5's gRPC protocol (`apache.rocketmq.v2.MessagingService`), served natively by the
//! broker: the front end the rocketmq-clients SDKs (Java, Go, Python, Node.js, Rust, C#) speak,
//! with no proxy process. Each RPC turns its request into calls of the broker's typed services —
//! the same ones the remoting front end calls — and their answers or errors into the RPC's
//! answer.
//!
//! Owns: the gRPC wire (messages, status codes, receipt handles, Telemetry sessions) and the
//! registry of gRPC clients. Must never: store, pop, ack or check anything itself (the services
//! do), hold a client's state past its stream, or let a stream grow without a bound.

#![forbid(unsafe_code)]

/// The messages and service generated from `proto/apache/rocketmq/v2/*.proto`.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::cast_possible_truncation,
    reason = "generated code"
)]
pub mod pb {
    tonic::include_proto!("apache.rocketmq.v2");
}

mod access;
mod ask;
mod clients;
mod convert;
mod front;
mod offsets;
mod receipt;
mod receive;
mod renew;
mod route;
mod send;
mod server;
mod session;
mod status;
mod transaction;

pub use ask::{Answered, MAX_CALLS_PER_CLIENT};
pub use clients::{Clients, GrpcClient, TELEMETRY_QUEUE_LEN};
pub use front::{CLIENT_IDLE, DEFAULT_MAX_CLIENTS, DEFAULT_PORT, GrpcFront};
pub use receipt::ReceiptHandle;
pub use renew::{MAX_HELD_PER_CLIENT, RenewPolicy, Renewals};
pub use server::{GrpcLimits, GrpcServer, GrpcTls, HANDSHAKE_TIMEOUT, KEEPALIVE, MAX_HANDSHAKES, REQUEST_OVERHEAD_BYTES};
pub use status::{Refusal, code_of};
pub use transaction::TransactionId;
