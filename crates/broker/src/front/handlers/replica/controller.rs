//! What a controller-mode broker answers about its role: NOTIFY_BROKER_ROLE_CHANGED (1008), the
//! controllers' notice after an election, and GET_BROKER_EPOCH_CACHE (1007), its epoch entries
//! for `mqadmin getBrokerEpoch`.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer, error};

use crate::broker::Broker;

/// The SYSTEM_ERROR a broker outside controller mode answers (`why` in RocketMQ's words for the
/// request).
fn not_controlled(request: &RemotingCommand, why: &str) -> Reply {
    Reply::Now(error(request, resp::SYSTEM_ERROR, why))
}

/// Asks the controllers for the new role at once instead of at the next period.
pub(crate) fn role_changed<C: Replicas>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let Some(c) = ctx.replication().controlled() else {
        return not_controlled(&request, "this broker is not in controller mode (enableControllerMode=false)");
    };
    c.role_changed.notify_one();
    // The controllers send it oneway.
    if request.is_oneway() {
        return Reply::None;
    }
    Reply::Now(answer(&request, resp::SUCCESS))
}

/// RocketMQ's `EpochEntryCache`: this broker's epochs (the last open-ended) and its log's end.
pub(crate) fn epoch_cache<C: Config + Replicas + Roles + Store>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    _header: NoHeader,
    request: RemotingCommand,
) -> Reply {
    let Some(c) = ctx.replication().controlled() else {
        return not_controlled(&request, "this request only for controllerMode (enableControllerMode=false)");
    };
    let entries = c.epochs.entries();
    let list: Vec<serde_json::Value> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let end = entries.get(i + 1).map_or(i64::MAX, |n| n.start_offset as i64);
            serde_json::json!({"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": end})
        })
        .collect();
    let body = serde_json::json!({
        "clusterName": ctx.config().broker_cluster_name,
        "brokerName": ctx.config().broker_name,
        "brokerId": ctx.role().broker_id(),
        "epochList": list,
        "maxOffset": ctx.store().commit_log().max_offset(),
    });
    Reply::Now(answer(&request, resp::SUCCESS).with_body(body.to_string().into_bytes()))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::NOTIFY_BROKER_ROLE_CHANGED,
        rule: Rule::Cluster(UPDATE),
        handle: &Typed::new(role_changed::<Broker>),
    },
    Unit {
        code: rc::GET_BROKER_EPOCH_CACHE,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(epoch_cache::<Broker>),
    },
];
