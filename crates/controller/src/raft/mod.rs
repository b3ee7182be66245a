//! The controller's Raft, on openraft: the type configuration, the log and state machine
//! storage, and the networks that carry Raft's messages.

mod auth;
mod log_store;
mod network;
mod state_machine;
mod tcp;

use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::state::{Command, Outcome, Refused};

pub use auth::{RaftGate, is_raft_message};
pub use log_store::{LogStore, MAX_RECORD_BYTES};
pub use network::{Router, RouterNetwork};
pub use state_machine::{Applied, StateMachine};
pub use tcp::{CONNECT_TIMEOUT, TcpNetwork, TcpPeer, serve_raft};

/// What applying one log entry answered: `None` for Raft's own entries (blank, membership).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response(pub Option<Result<Outcome, Refused>>);

openraft::declare_raft_types!(
    /// The controller's Raft types.
    pub TypeConfig:
        D = Command,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A running Raft node of the controller.
pub type Raft = openraft::Raft<TypeConfig>;
