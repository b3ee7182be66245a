//! CONTROLLER_ALTER_SYNC_STATE_SET (1001): the master grows or shrinks its SyncStateSet; fenced
//! by the master's epoch and the set's epoch, and every new member must be alive.

use super::Unit;
use petrel_protocol::codes::request_code as rc;
use std::collections::BTreeSet;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, CommandHeader};
use petrel_remoting::{Connection, Reply, answer};

use super::{Controller, Failure, SyncStateSetBody, later};
use crate::state::{Command, Outcome};

pub(super) fn alter(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let h = AlterSyncStateSetRequestHeader::from_command(&request)?;
        let body: SyncStateSetBody =
            serde_json::from_slice(&request.body).map_err(|e| Failure::Body(format!("the body is not a SyncStateSet: {e}")))?;
        let ids = |v: Vec<i64>| -> Result<BTreeSet<u64>, Failure> {
            v.into_iter()
                .map(|id| u64::try_from(id).map_err(|_| Failure::Body(format!("broker id {id} is negative"))))
                .collect()
        };
        let new_set = ids(body.sync_state_set)?;
        let alive = new_set
            .iter()
            .copied()
            .filter(|id| controller.is_alive(&h.broker_name, *id))
            .collect();
        let command = Command::AlterSyncStateSet {
            broker_name: h.broker_name,
            master: u64::try_from(h.master_broker_id).map_err(|_| Failure::Body("masterBrokerId is negative".into()))?,
            master_epoch: u32::try_from(h.master_epoch).map_err(|_| Failure::Body("masterEpoch is negative".into()))?,
            sync_state_set_epoch: u32::try_from(body.sync_state_set_epoch)
                .map_err(|_| Failure::Body("syncStateSetEpoch is negative".into()))?,
            new_set,
            alive,
        };
        let Outcome::SyncStateSetAltered {
            sync_state_set,
            sync_state_set_epoch,
        } = controller.propose(command).await?
        else {
            unreachable!("a SyncStateSet change answers SyncStateSetAltered");
        };
        let header = AlterSyncStateSetResponseHeader {
            new_sync_state_set_epoch: i32::try_from(sync_state_set_epoch).unwrap_or(i32::MAX),
        };
        let body = super::sync_state_set_body(&sync_state_set, sync_state_set_epoch)?;
        Ok(answer(&request, resp::SUCCESS).with_ext_fields(header.to_ext()).with_body(body))
    })
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::CONTROLLER_ALTER_SYNC_STATE_SET,
    rule: (),
    handle: alter,
}];
