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

#[cfg(test)]
mod request_tests {
    use petrel_protocol::codes::request_code as rc;
    use petrel_protocol::header::{
        AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, CleanControllerBrokerDataRequestHeader,
        CommandHeader, ElectMasterRequestHeader, GetNextBrokerIdHeader, GetReplicaInfoRequestHeader,
        RegisterBrokerToControllerRequestHeader,
    };
    use petrel_protocol::{ExtFields, RemotingCommand};
    use proptest::prelude::*;

    /// Every key of every header a controller reads.
    fn header_keys() -> Vec<&'static str> {
        [
            AlterSyncStateSetRequestHeader::KEYS,
            ApplyBrokerIdRequestHeader::KEYS,
            BrokerHeartbeatRequestHeader::KEYS,
            CleanControllerBrokerDataRequestHeader::KEYS,
            ElectMasterRequestHeader::KEYS,
            GetNextBrokerIdHeader::KEYS,
            GetReplicaInfoRequestHeader::KEYS,
            RegisterBrokerToControllerRequestHeader::KEYS,
        ]
        .concat()
    }

    /// Bodies shaped like those a controller reads (a SyncStateSet, a vote, a command), for the
    /// property below to cut and corrupt.
    const BODY_SEEDS: [&str; 3] = [
        r#"{"syncStateSet":[1,2],"syncStateSetEpoch":3}"#,
        r#"{"vote":{"leader_id":{"term":1,"node_id":1},"committed":false},"last_log_id":null}"#,
        r#"{"ElectMaster":{"cluster":"c","broker_name":"b","broker_id":1}}"#,
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        /// What the fuzz target `controller_rpc` checks, in every run of the tests: any request
        /// under any code a controller serves (and the Raft codes, and one it does not), with any
        /// values under its headers' keys and any body, is read or refused, never a panic.
        #[test]
        fn any_request_to_a_controller_is_read_or_refused(
            code_index in 0usize..4096,
            fields in proptest::collection::vec((0usize..128, "-?[0-9]{0,20}|[a-zA-Z0-9:._;,-]{0,24}"), 0..10),
            body in petrel_protocol::proptest_support::bodies(&BODY_SEEDS),
        ) {
            let codes: Vec<i32> = super::served_codes()
                .into_iter()
                .chain([rc::PETREL_RAFT_APPEND_ENTRIES, rc::PETREL_RAFT_VOTE, rc::PETREL_RAFT_INSTALL_SNAPSHOT, -1])
                .collect();
            let keys = header_keys();
            let mut ext = ExtFields::default();
            for (key, value) in fields {
                ext.insert(keys[key % keys.len()].to_owned(), value);
            }
            let request = RemotingCommand::request(codes[code_index % codes.len()], 1).with_ext_fields(ext).with_body(body);
            let _ = super::decode_request_for_fuzzing(&request);
        }
    }
}
