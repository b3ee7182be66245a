//! CONTROLLER_REGISTER_BROKER (1003): a broker with an id comes up (perhaps at a new address) and
//! learns its set's master, if that master is alive, and the SyncStateSet.

use super::Unit;
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, MasterInfoHeader, RegisterBrokerToControllerRequestHeader};
use petrel_remoting::{Connection, Reply, answer};

use super::{Controller, Failure, later, sync_state_set_body};
use crate::state::{Command, Outcome};

pub(super) fn register(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let h = RegisterBrokerToControllerRequestHeader::from_command(&request)?;
        let broker_id = h
            .broker_id
            .and_then(|id| u64::try_from(id).ok())
            .ok_or_else(|| Failure::Body("a broker registers with its brokerId".into()))?;
        let command = Command::RegisterBroker {
            broker_name: h.broker_name.clone(),
            broker_id,
            address: h.broker_address,
        };
        let Outcome::Registered {
            master,
            master_epoch,
            sync_state_set,
            sync_state_set_epoch,
        } = controller.propose(command).await?
        else {
            unreachable!("registration answers Registered");
        };
        let mut header = MasterInfoHeader {
            cluster_name: Some(h.cluster_name),
            broker_name: Some(h.broker_name.clone()),
            ..MasterInfoHeader::default()
        };
        if let Some((id, address)) = master.filter(|(id, _)| controller.is_alive(&h.broker_name, *id)) {
            header.master_broker_id = i64::try_from(id).ok();
            header.master_address = Some(address);
            header.master_epoch = i32::try_from(master_epoch).ok();
            header.sync_state_set_epoch = i32::try_from(sync_state_set_epoch).ok();
        }
        let body = sync_state_set_body(&sync_state_set, sync_state_set_epoch)?;
        Ok(answer(&request, resp::SUCCESS).with_ext_fields(header.to_ext()).with_body(body))
    })
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::CONTROLLER_REGISTER_BROKER,
    rule: (),
    handle: register,
}];
