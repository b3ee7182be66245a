//! One controller: a Raft node over the controller's state, proposing commands and answering
//! reads from what it applied.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::network::RaftNetworkFactory;
use openraft::{BasicNode, Config, SnapshotPolicy};
use parking_lot::RwLock;

use crate::raft::{Applied, LogStore, Raft, StateMachine, TypeConfig};
use crate::state::{Command, ControllerState, Outcome, Refused};

/// Raft timing for a controller group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTiming {
    /// How often the leader sends heartbeats to its followers, in milliseconds.
    pub heartbeat_interval_ms: u64,
    /// The shortest a follower waits without a heartbeat before standing for election, in milliseconds.
    pub election_timeout_min_ms: u64,
    /// The longest such wait, in milliseconds; each wait is drawn between the two so candidates rarely collide.
    pub election_timeout_max_ms: u64,
    /// Entries applied between two snapshots; the log before a snapshot is purged.
    pub snapshot_every_entries: u64,
    /// How long a proposal or a linearizable read may wait for a quorum before it is refused.
    pub propose_timeout_ms: u64,
}

impl Default for RaftTiming {
    /// Timings for controllers on one site: a dead leader is replaced within about a second.
    fn default() -> Self {
        RaftTiming {
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 500,
            election_timeout_max_ms: 1000,
            snapshot_every_entries: 1000,
            propose_timeout_ms: 3000,
        }
    }
}

/// Why a proposal was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// This controller is not the leader; RocketMQ's brokers then ask the next controller.
    #[error("this controller is not the leader; the leader is {leader:?}")]
    NotLeader {
        /// The Raft id of the leader this node knows of, if any.
        leader: Option<u64>,
        /// That leader's address as the group's membership records it, if known.
        leader_address: Option<String>,
    },
    /// Raft could not commit it (no quorum in time, shutting down).
    #[error("the controller group could not commit the change: {0}")]
    Unavailable(String),
}

/// A running controller.
#[derive(Clone)]
pub struct ControllerNode {
    id: u64,
    propose_timeout: Duration,
    raft: Raft,
    applied: Arc<RwLock<Applied>>,
}

impl ControllerNode {
    /// Starts controller `id` with its Raft files in `dir`, sending through `network`.
    pub async fn start<N: RaftNetworkFactory<TypeConfig>>(
        id: u64,
        dir: &Path,
        timing: RaftTiming,
        network: N,
    ) -> io::Result<ControllerNode> {
        let config = Config {
            cluster_name: "petrel-controller".into(),
            heartbeat_interval: timing.heartbeat_interval_ms,
            election_timeout_min: timing.election_timeout_min_ms,
            election_timeout_max: timing.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(timing.snapshot_every_entries),
            max_in_snapshot_log_to_keep: 64,
            ..Config::default()
        }
        .validate()
        .map_err(io::Error::other)?;
        let log = LogStore::open(dir)?;
        let state_machine = StateMachine::open(dir)?;
        let applied = state_machine.applied();
        let raft = Raft::new(id, Arc::new(config), network, log, state_machine)
            .await
            .map_err(io::Error::other)?;
        Ok(ControllerNode {
            id,
            propose_timeout: Duration::from_millis(timing.propose_timeout_ms),
            raft,
            applied,
        })
    }

    /// Forms a new group of `members` (id → address); a no-op error if this node has state already.
    pub async fn initialize(&self, members: BTreeMap<u64, String>) -> Result<(), ProposeError> {
        let nodes: BTreeMap<u64, BasicNode> = members.into_iter().map(|(id, addr)| (id, BasicNode::new(addr))).collect();
        match self.raft.initialize(nodes).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(e)) => {
                tracing::debug!(id = self.id, error = %e, "already initialized");
                Ok(())
            }
            Err(e) => Err(ProposeError::Unavailable(e.to_string())),
        }
    }

    /// Orders `command` through Raft and answers what applying it did.
    pub async fn propose(&self, command: Command) -> Result<Result<Outcome, Refused>, ProposeError> {
        let written = tokio::time::timeout(self.propose_timeout, self.raft.client_write(command)).await;
        let Ok(written) = written else {
            return Err(ProposeError::Unavailable(format!(
                "no quorum committed the change within {} ms",
                self.propose_timeout.as_millis()
            )));
        };
        match written {
            Ok(written) => {
                let Some(answer) = written.data.0 else {
                    unreachable!("the state machine answers every application command");
                };
                Ok(answer)
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => Err(ProposeError::NotLeader {
                leader: f.leader_id,
                leader_address: f.leader_node.map(|n| n.addr),
            }),
            Err(e) => Err(ProposeError::Unavailable(e.to_string())),
        }
    }

    /// Waits until this node's applied state is current with the leader's commit (a linearizable
    /// read), then reads it.
    pub async fn read<T>(&self, f: impl FnOnce(&ControllerState) -> T) -> Result<T, ProposeError> {
        let checked = tokio::time::timeout(self.propose_timeout, self.raft.ensure_linearizable()).await;
        let Ok(checked) = checked else {
            return Err(ProposeError::Unavailable(format!(
                "no quorum confirmed the leader within {} ms",
                self.propose_timeout.as_millis()
            )));
        };
        match checked {
            Ok(_) => Ok(f(&self.applied.read().state)),
            Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f))) => Err(ProposeError::NotLeader {
                leader: f.leader_id,
                leader_address: f.leader_node.map(|n| n.addr),
            }),
            Err(e) => Err(ProposeError::Unavailable(e.to_string())),
        }
    }

    /// Reads what this node has applied, without asking the group (may lag the leader).
    pub fn read_local<T>(&self, f: impl FnOnce(&ControllerState) -> T) -> T {
        f(&self.applied.read().state)
    }

    /// This node's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The leader this node knows of.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// The Raft term this node is in.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// The Raft handle, for the network that delivers messages to it.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Waits up to `timeout` for some node to be known as leader.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Option<u64> {
        let waited = self
            .raft
            .wait(Some(timeout))
            .metrics(|m| m.current_leader.is_some(), "a leader")
            .await;
        waited.ok().and_then(|m| m.current_leader)
    }

    /// Stops the Raft node.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(id = self.id, error = %e, "raft shutdown");
        }
    }
}
