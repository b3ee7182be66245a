//! EXCHANGE_BROKER_HA_INFO (906): where a master's HA server listens. A slave that was told its
//! master's remoting address (by the controllers) asks the master itself for the HA address
//! before it connects, as RocketMQ's slaves do when the name servers have not named it yet.
//!
//! A request that carries `masterHaAddress` (RocketMQ's master telling a slave) is answered
//! SUCCESS and changes nothing: Petrel's slaves follow the address the name servers register
//! (classic mode) or the one their master names when asked (controller mode), each of which
//! would undo a pushed one within seconds; and nobody can repoint a slave's replication with one
//! request.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::ExchangeHaInfoHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::ok_with;

pub(crate) fn handle<C: Config + Replicas + Roles + StoreHost + Store>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: ExchangeHaInfoHeader,
    request: RemotingCommand,
) -> Reply {
    if h.master_ha_address.is_some_and(|a| !a.is_empty()) || !ctx.role().is_master() {
        // A push (see above), or a slave asked: RocketMQ's answers SUCCESS with nothing, having
        // no HA server to name.
        return Reply::Now(answer(&request, resp::SUCCESS));
    }
    let port = ctx
        .replication()
        .listen_port()
        .unwrap_or_else(|| crate::replication::ha_port(ctx.config()));
    let header = ExchangeHaInfoHeader {
        master_ha_address: Some(format!("{}:{port}", ctx.store_host().ip())),
        master_flush_offset: Some(i64::try_from(ctx.store().commit_log().flushed_offset()).unwrap_or(i64::MAX)),
        master_address: Some(ctx.store_host().to_string()),
    };
    Reply::Now(ok_with(&request, &header))
}

/// This file's request: its code, access rule and handler. Registered by one line in
/// `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::EXCHANGE_BROKER_HA_INFO,
    // RocketMQ's rule for it: Update on the cluster (a push repoints RocketMQ's slaves).
    rule: Rule::Cluster(UPDATE),
    handle: &Typed::new(handle::<Broker>),
}];
