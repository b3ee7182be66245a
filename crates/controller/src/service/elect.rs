//! CONTROLLER_ELECT_MASTER (1002), from a broker that finds no master, from mqadmin
//! (`electMaster`, designated), or from the leader's own scan when a master stops
//! heartbeating; and the NOTIFY_BROKER_ROLE_CHANGED (1008) that tells the set's live replicas.

use super::Unit;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, ElectMasterRequestHeader, MasterInfoHeader};
use petrel_remoting::{Connection, ConnectionLimits, IgnoreRequests, Reply, answer};
use serde::Serialize;

use super::{Controller, Failure, later};
use crate::state::{Command, Outcome, Refused};

/// How long a role-change notice may take to connect before it is given up (brokers also poll).
const NOTIFY_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BrokerMemberGroup {
    cluster: String,
    broker_name: String,
    broker_addrs: BTreeMap<u64, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ElectMasterResponseBody {
    broker_member_group: BrokerMemberGroup,
    sync_state_set: BTreeSet<u64>,
}

pub(super) fn elect(controller: &Arc<Controller>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let controller = Arc::clone(controller);
    later(request.clone(), async move {
        let h = ElectMasterRequestHeader::from_command(&request)?;
        let requester = h.broker_id.and_then(|id| u64::try_from(id).ok());
        let outcome = propose_election(&controller, &h.broker_name, requester, h.designate_elect.unwrap_or(false)).await?;
        let Some(header) = master_header(&outcome) else {
            return Err(Refused {
                code: resp::CONTROLLER_MASTER_NOT_AVAILABLE,
                remark: "the master is down and no replica could be elected".into(),
            }
            .into());
        };
        let Outcome::Elected {
            sync_state_set,
            still_exist,
            ..
        } = outcome
        else {
            unreachable!("master_header answers only for an election");
        };
        let group = controller.node.read_local(|state| state.broker_set(&h.broker_name).cloned());
        let broker_member_group = BrokerMemberGroup {
            cluster: group.as_ref().map(|g| g.cluster.clone()).unwrap_or_default(),
            broker_name: h.broker_name.clone(),
            broker_addrs: group
                .map(|g| g.replicas.into_iter().map(|(id, r)| (id, r.address)).collect())
                .unwrap_or_default(),
        };
        let body = serde_json::to_vec(&ElectMasterResponseBody {
            broker_member_group,
            sync_state_set,
        })
        .map_err(|e| Failure::Body(e.to_string()))?;
        let code = if still_exist {
            resp::CONTROLLER_MASTER_STILL_EXIST
        } else {
            resp::SUCCESS
        };
        Ok(answer(&request, code).with_ext_fields(header.to_ext()).with_body(body))
    })
}

/// The master an election answered, as the response and the role-change notice carry it.
fn master_header(outcome: &Outcome) -> Option<MasterInfoHeader> {
    let Outcome::Elected {
        master,
        address,
        master_epoch,
        sync_state_set_epoch,
        ..
    } = outcome
    else {
        return None;
    };
    Some(MasterInfoHeader {
        master_broker_id: i64::try_from(*master).ok(),
        master_address: Some(address.clone()),
        master_epoch: i32::try_from(*master_epoch).ok(),
        sync_state_set_epoch: i32::try_from(*sync_state_set_epoch).ok(),
        ..MasterInfoHeader::default()
    })
}

/// Elects a master for `broker_name` from the live replicas, and on a change tells them.
async fn propose_election(
    controller: &Arc<Controller>,
    broker_name: &str,
    requester: Option<u64>,
    designate: bool,
) -> Result<Outcome, Failure> {
    let command = Command::ElectMaster {
        broker_name: broker_name.to_owned(),
        requester,
        designate,
        unclean: controller.config.enable_elect_unclean_master,
        alive: controller.candidates(broker_name),
    };
    let outcome = controller.propose(command).await?;
    if let Outcome::Elected {
        still_exist: false,
        master,
        master_epoch,
        ..
    } = &outcome
    {
        tracing::info!(broker_name, master, master_epoch, "elected a new master");
        if controller.config.notify_broker_role_changed {
            notify_role_changed(controller, broker_name, &outcome);
        }
    }
    Ok(outcome)
}

/// The scan found the master of `broker_name` silent: elect another, or record that there is none.
pub(super) async fn elect_for_dead_master(controller: &Arc<Controller>, broker_name: &str) {
    match propose_election(controller, broker_name, None, false).await {
        Ok(Outcome::NoMaster { master_epoch }) => {
            tracing::warn!(broker_name, master_epoch, "the master is dead and no in-sync replica is alive")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(broker_name, error = %e, "could not elect a master for a dead one"),
    }
}

/// Tells every live replica of the set the new master at once, oneway; replicas that miss it
/// learn it from their next GET_REPLICA_INFO poll.
fn notify_role_changed(controller: &Arc<Controller>, broker_name: &str, outcome: &Outcome) {
    let (
        Some(header),
        Outcome::Elected {
            sync_state_set,
            sync_state_set_epoch,
            ..
        },
    ) = (master_header(outcome), outcome)
    else {
        return;
    };
    let Ok(body) = super::sync_state_set_body(sync_state_set, *sync_state_set_epoch) else {
        return;
    };
    let targets: Vec<String> = controller
        .live
        .lock()
        .iter()
        .filter(|((name, _), _)| name == broker_name)
        .map(|(_, hb)| hb.broker_addr.clone())
        .collect();
    for addr in targets {
        let request = RemotingCommand::request(rc::NOTIFY_BROKER_ROLE_CHANGED, 0)
            .with_ext_fields(header.to_ext())
            .with_body(body.clone());
        tokio::spawn(async move {
            match petrel_remoting::connect(&addr, NOTIFY_CONNECT_TIMEOUT, ConnectionLimits::default(), Arc::new(IgnoreRequests)).await {
                Ok(conn) => {
                    if let Err(e) = conn.oneway(request) {
                        tracing::debug!(%addr, error = %e, "role change notice not sent");
                    }
                    // Let the frame leave before the connection closes.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    conn.shutdown();
                }
                Err(e) => tracing::debug!(%addr, error = %e, "role change notice not sent"),
            }
        });
    }
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::CONTROLLER_ELECT_MASTER,
    rule: (),
    handle: elect,
}];
