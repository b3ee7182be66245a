//! Petrel's controller: the Raft-replicated record of every broker set's master, `masterEpoch`
//! and SyncStateSet, which RocketMQ 5's brokers in controller mode ask to elect a new master
//! when theirs dies.
//!
//! Owns: the state machine (what an election or a SyncStateSet change may do, checked in log
//! order), its Raft storage on disk and the networks Raft's messages travel on. Consensus
//! itself is openraft's; nothing here decides who leads the controller group.
//! Must never: touch a broker's store, or answer a broker from state that Raft has not applied.

#![forbid(unsafe_code)]

mod config;
mod node;
#[allow(clippy::result_large_err, reason = "openraft's traits fix these error types")]
mod raft;
mod service;
mod state;

pub use config::{CONTROLLER_KEYS, ControllerConfig, ControllerSection, PeerId, Peers};
pub use node::{ControllerNode, ProposeError, RaftTiming};
pub use raft::{
    Applied, CONNECT_TIMEOUT, LogStore, MAX_RECORD_BYTES, Raft, Response, Router, RouterNetwork, StateMachine, TcpNetwork, TcpPeer,
    TypeConfig, serve_raft,
};
pub use service::{
    Controller, ControllerCounters, ControllerHandler, Heartbeat, MAX_LIVE_BROKERS, render_metrics, scan_for_dead_masters, served_codes,
};
/// Reads what a request to a controller carries, as serving it would (for the fuzzer): the
/// header of a RocketMQ controller code, the JSON of a Raft message, the SyncStateSet body, a
/// Raft log entry's command. Returns whether it read.
#[doc(hidden)]
#[must_use]
pub fn decode_request_for_fuzzing(request: &petrel_protocol::RemotingCommand) -> bool {
    use petrel_protocol::codes::request_code as rc;
    use petrel_protocol::header::{
        AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, CleanControllerBrokerDataRequestHeader,
        CommandHeader, ElectMasterRequestHeader, GetNextBrokerIdHeader, GetReplicaInfoRequestHeader,
        RegisterBrokerToControllerRequestHeader,
    };
    let body = &request.body;
    match request.code {
        rc::PETREL_RAFT_VOTE => serde_json::from_slice::<openraft::raft::VoteRequest<u64>>(body).is_ok(),
        rc::PETREL_RAFT_APPEND_ENTRIES => serde_json::from_slice::<openraft::raft::AppendEntriesRequest<TypeConfig>>(body).is_ok(),
        rc::PETREL_RAFT_INSTALL_SNAPSHOT => serde_json::from_slice::<openraft::raft::InstallSnapshotRequest<TypeConfig>>(body).is_ok(),
        rc::CONTROLLER_ALTER_SYNC_STATE_SET => {
            AlterSyncStateSetRequestHeader::from_command(request).is_ok()
                && serde_json::from_slice::<petrel_protocol::body::SyncStateSetBody>(body).is_ok()
        }
        rc::CONTROLLER_ELECT_MASTER => ElectMasterRequestHeader::from_command(request).is_ok(),
        rc::BROKER_HEARTBEAT => BrokerHeartbeatRequestHeader::from_command(request).is_ok(),
        rc::CONTROLLER_REGISTER_BROKER => RegisterBrokerToControllerRequestHeader::from_command(request).is_ok(),
        rc::CONTROLLER_GET_NEXT_BROKER_ID => GetNextBrokerIdHeader::from_command(request).is_ok(),
        rc::CONTROLLER_APPLY_BROKER_ID => ApplyBrokerIdRequestHeader::from_command(request).is_ok(),
        rc::CONTROLLER_GET_REPLICA_INFO => GetReplicaInfoRequestHeader::from_command(request).is_ok(),
        rc::CLEAN_BROKER_DATA => CleanControllerBrokerDataRequestHeader::from_command(request).is_ok(),
        _ => serde_json::from_slice::<Command>(body).is_ok(),
    }
}

pub use state::{
    BrokerSet, Candidate, Command, ControllerState, FIRST_BROKER_ID, MAX_BROKER_SETS, MAX_REPLICAS_PER_SET, Outcome, Refused, Replica,
};
