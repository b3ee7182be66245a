//! CONTROLLER_GET_REPLICA_INFO (1004), which brokers poll for their set's master, and
//! CONTROLLER_GET_SYNC_STATE_DATA (1006), which `mqadmin getSyncStateSet` shows.

use super::Unit;
use petrel_protocol::codes::request_code as rc;
use std::collections::BTreeMap;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, GetReplicaInfoRequestHeader, MasterInfoHeader};
use petrel_remoting::{Connection, Reply, answer};
use serde::Serialize;

use super::{Controller, Failure, later, sync_state_set_body};
use crate::state::{BrokerSet, Refused};

/// Broker sets one GET_SYNC_STATE_DATA may ask about.
pub const MAX_SETS_PER_QUERY: usize = 1024;

pub(super) fn replica_info(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let h = GetReplicaInfoRequestHeader::from_command(&request)?;
        let set = controller.node.read(|state| state.broker_set(&h.broker_name).cloned()).await?;
        let set = set.ok_or_else(|| Refused {
            code: resp::CONTROLLER_BROKER_METADATA_NOT_EXIST,
            remark: "Broker metadata is not existed".into(),
        })?;
        let header = MasterInfoHeader {
            master_broker_id: set.master.and_then(|id| i64::try_from(id).ok()),
            master_address: set.master.map(|id| set.replicas[&id].address.clone()),
            master_epoch: i32::try_from(set.master_epoch).ok(),
            ..MasterInfoHeader::default()
        };
        let body = sync_state_set_body(&set.sync_state_set, set.sync_state_set_epoch)?;
        Ok(answer(&request, resp::SUCCESS).with_ext_fields(header.to_ext()).with_body(body))
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplicaIdentity {
    broker_name: String,
    broker_id: u64,
    broker_address: String,
    alive: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplicasInfo {
    master_broker_id: Option<u64>,
    master_address: Option<String>,
    master_epoch: u32,
    sync_state_set_epoch: u32,
    in_sync_replicas: Vec<ReplicaIdentity>,
    not_in_sync_replicas: Vec<ReplicaIdentity>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BrokerReplicasInfo {
    replicas_info_table: BTreeMap<String, ReplicasInfo>,
}

pub(super) fn sync_state_data(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let names: Vec<String> = serde_json::from_slice(&request.body)
            .map_err(|e| Failure::Body(format!("the body is not a JSON list of broker names: {e}")))?;
        if names.len() > MAX_SETS_PER_QUERY {
            return Err(Failure::Body(format!(
                "{} broker names; at most {MAX_SETS_PER_QUERY} per request",
                names.len()
            )));
        }
        let sets: Vec<BrokerSet> = controller
            .node
            .read(|state| names.iter().filter_map(|n| state.broker_set(n).cloned()).collect())
            .await?;
        let table = sets
            .into_iter()
            .map(|set| (set.broker_name.clone(), describe(&controller, &set)))
            .collect();
        let body = serde_json::to_vec(&BrokerReplicasInfo {
            replicas_info_table: table,
        })
        .map_err(|e| Failure::Body(e.to_string()))?;
        Ok(answer(&request, resp::SUCCESS).with_body(body))
    })
}

fn describe(controller: &Controller, set: &BrokerSet) -> ReplicasInfo {
    let (mut in_sync, mut not_in_sync) = (Vec::new(), Vec::new());
    for (id, replica) in &set.replicas {
        let identity = ReplicaIdentity {
            broker_name: set.broker_name.clone(),
            broker_id: *id,
            broker_address: replica.address.clone(),
            alive: controller.is_alive(&set.broker_name, *id),
        };
        if set.sync_state_set.contains(id) {
            in_sync.push(identity)
        } else {
            not_in_sync.push(identity)
        }
    }
    ReplicasInfo {
        master_broker_id: set.master,
        master_address: set.master.map(|id| set.replicas[&id].address.clone()),
        master_epoch: set.master_epoch,
        sync_state_set_epoch: set.sync_state_set_epoch,
        in_sync_replicas: in_sync,
        not_in_sync_replicas: not_in_sync,
    }
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::CONTROLLER_GET_REPLICA_INFO,
        rule: (),
        handle: replica_info,
    },
    Unit {
        code: rc::CONTROLLER_GET_SYNC_STATE_DATA,
        rule: (),
        handle: sync_state_data,
    },
];
