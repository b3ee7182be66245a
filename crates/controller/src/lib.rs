//! Petrel's controller: the Raft-replicated record of every broker set's master, `masterEpoch`
//! and SyncStateSet, which RocketMQ 5's brokers in controller mode ask to elect a new master
//! when theirs dies.
//!
//! Owns: the state machine (what an election or a SyncStateSet change may do, checked in log
//! order), its Raft storage on disk and the networks Raft's messages travel on. Consensus
//! itself is openraft's; nothing here decides who leads the controller group.
//! Must never: touch a broker's store, or answer a broker from state that Raft has not applied.

mod config;
mod node;
#[allow(clippy::result_large_err, reason = "openraft's traits fix these error types")]
mod raft;
mod service;
mod state;

pub use config::{BadValue, CONTROLLER_KEYS, ControllerConfig};
pub use node::{ControllerNode, ProposeError, RaftTiming};
pub use raft::{
    Applied, CONNECT_TIMEOUT, LogStore, MAX_RECORD_BYTES, Raft, Response, Router, RouterNetwork, StateMachine, TcpNetwork, TcpPeer,
    TypeConfig, serve_raft,
};
pub use service::{
    Controller, ControllerCounters, ControllerHandler, Heartbeat, MAX_LIVE_BROKERS, render_metrics, scan_for_dead_masters, served_codes,
};
pub use state::{
    BrokerSet, Candidate, Command, ControllerState, FIRST_BROKER_ID, MAX_BROKER_SETS, MAX_REPLICAS_PER_SET, Outcome, Refused, Replica,
};
