//! Petrel's replication: a master streams its commit log to slaves over RocketMQ's classic HA
//! protocol (raw TCP on `haListenPort`, byte-compatible with Apache RocketMQ's master and
//! slave), the slaves append the bytes at the master's offsets and report how far they hold
//! it, and the master turns those reports into the `replicated` watermark that SYNC_MASTER
//! sends wait on.
//!
//! With a shared secret (`haSecret`) the HA port authenticates both ends first (`handshake.rs`).
//!
//! Owns: the HA wire format, the master's HA server, the slave's HA client and the ack gate.
//! Must never: know what a request code means (the broker maps the gate's answers to RocketMQ's
//! codes), or touch the commit log except through the store's replication calls.

// Only a test sends a real signal to a thread (libc), under its own allow.
#![deny(unsafe_code)]

mod acks;
mod error;
pub mod handshake;
mod master;
mod slave;
mod stream;
pub mod wire;

pub use acks::{AckGate, AckMode, AckPolicy, Refusal, ReplicaWait, SlaveStatus, SyncStateView, agreed_offset, confirm_offset};
pub use error::ReplicationError;
pub use master::{AutoSwitchMaster, FrameCounts, HaMaster, MasterConfig, MasterTls};
pub use slave::{AutoSwitchSlave, HaSlave, SlaveConfig, SlaveState};
