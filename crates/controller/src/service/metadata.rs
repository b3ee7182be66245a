//! CONTROLLER_GET_METADATA_INFO (1005): who leads the controller group. Brokers ask every
//! controller in `controllerAddr` and send their requests to the leader's address.

use super::Unit;
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, ControllerMetadataResponseHeader};
use petrel_remoting::{Connection, Reply, answer};

use super::Controller;

pub(super) fn get(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let leader = controller.node.leader();
    let peer = leader.and_then(|id| controller.config.peers.0.get(&id));
    let header = ControllerMetadataResponseHeader {
        group: Some(controller.config.group.clone()),
        controller_leader_id: peer.map(|(name, _)| name.clone()),
        controller_leader_address: peer.map(|(_, addr)| addr.clone()),
        is_leader: leader == Some(controller.node.id()),
        peers: Some(controller.peers_text()),
    };
    Reply::Now(answer(&request, resp::SUCCESS).with_ext_fields(header.to_ext()))
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::CONTROLLER_GET_METADATA_INFO,
    rule: (),
    handle: get,
}];
