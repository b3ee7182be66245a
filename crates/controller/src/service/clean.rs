//! CLEAN_BROKER_DATA (1011), `mqadmin cleanBrokerMetadata`: forget replicas that will not come
//! back (or a whole set). A live broker is refused unless `isCleanLivingBroker=true`; the
//! current master never is forgotten by id.

use super::Unit;
use petrel_protocol::codes::request_code as rc;
use std::collections::BTreeSet;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CleanControllerBrokerDataRequestHeader, CommandHeader};
use petrel_remoting::{Connection, Reply, answer};

use super::{Controller, later};
use crate::state::{Command, Refused};

pub(super) fn clean(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let h = CleanControllerBrokerDataRequestHeader::from_command(&request)?;
        let broker_ids = h.broker_controller_ids_to_clean.as_deref().map(parse_ids).transpose()?;
        let alive = controller.candidates(&h.broker_name).iter().map(|c| c.broker_id).collect();
        let command = Command::CleanBrokerData {
            broker_name: h.broker_name,
            broker_ids,
            clean_living: h.is_clean_living_broker.unwrap_or(false),
            alive,
        };
        controller.propose(command).await?;
        Ok(answer(&request, resp::SUCCESS))
    })
}

/// `1;2;3` → {1, 2, 3}; RocketMQ answers a malformed list with 2009 as well.
fn parse_ids(text: &str) -> Result<BTreeSet<u64>, Refused> {
    text.split(';')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(|id| {
            id.parse().map_err(|_| Refused {
                code: resp::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                remark: format!("brokerControllerIdsToClean must be ids separated by ';', not {text:?}"),
            })
        })
        .collect()
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::CLEAN_BROKER_DATA,
    rule: (),
    handle: clean,
}];
