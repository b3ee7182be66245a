//! EXCHANGE_BROKER_HA_INFO (906): where a master's HA server listens. A slave that was told its
//! master's remoting address (by the controllers) asks the master itself for the HA address
//! before it connects, as RocketMQ's slaves do when the name servers have not named it yet; a
//! request that carries `masterHaAddress` tells a slave which one to follow.

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
    if let Some(master_ha) = h.master_ha_address.filter(|a| !a.is_empty()) {
        // Told by a master: follow it, unless the configuration fixes the address.
        if let Some(slave) = ctx.replication().slave().filter(|_| ctx.config().ha_master_address.is_none()) {
            slave.set_master(Some(master_ha));
        } else if let Some(controlled) = ctx.replication().controlled().filter(|_| !ctx.role().is_master()) {
            controlled.follow(Some(master_ha));
        }
        return Reply::Now(answer(&request, resp::SUCCESS));
    }
    if !ctx.role().is_master() {
        // RocketMQ's slave answers SUCCESS with nothing: it has no HA server to name.
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
    // It may repoint a slave's replication, so it needs the cluster's update right.
    rule: Rule::Cluster(UPDATE),
    handle: &Typed::new(handle::<Broker>),
}];
