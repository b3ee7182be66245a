//! CONTROLLER_GET_NEXT_BROKER_ID (1012) and CONTROLLER_APPLY_BROKER_ID (1013): a new broker asks
//! which id to claim, then claims it with its `address;uuid` check code (the same broker asking
//! again gets its id back; another broker is refused).

use super::Unit;
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{ApplyBrokerIdRequestHeader, CommandHeader, GetNextBrokerIdHeader};
use petrel_remoting::{Connection, Reply, answer};

use super::{Controller, Failure, later};
use crate::state::Command;

pub(super) fn next(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let mut header = GetNextBrokerIdHeader::from_command(&request)?;
        let next = controller.node.read(|state| state.next_broker_id(&header.broker_name)).await?;
        header.next_broker_id = Some(i64::try_from(next).map_err(|_| Failure::Body("broker id overflow".into()))?);
        Ok(answer(&request, resp::SUCCESS).with_ext_fields(header.to_ext()))
    })
}

pub(super) fn apply(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let h = ApplyBrokerIdRequestHeader::from_command(&request)?;
        let broker_id =
            u64::try_from(h.applied_broker_id).map_err(|_| Failure::Body(format!("brokerId {} is negative", h.applied_broker_id)))?;
        let reply = GetNextBrokerIdHeader {
            cluster_name: h.cluster_name.clone(),
            broker_name: h.broker_name.clone(),
            next_broker_id: None,
        };
        let command = Command::ApplyBrokerId {
            cluster: h.cluster_name,
            broker_name: h.broker_name,
            broker_id,
            register_check_code: h.register_check_code,
        };
        controller.propose(command).await?;
        Ok(answer(&request, resp::SUCCESS).with_ext_fields(reply.to_ext()))
    })
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::CONTROLLER_GET_NEXT_BROKER_ID,
        rule: (),
        handle: next,
    },
    Unit {
        code: rc::CONTROLLER_APPLY_BROKER_ID,
        rule: (),
        handle: apply,
    },
];
