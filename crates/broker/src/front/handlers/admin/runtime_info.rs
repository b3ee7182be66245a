//! GET_BROKER_RUNTIME_INFO (28): what `mqadmin clusterList` and `brokerStatus` show, with the
//! replication state (a master's slaves and their lag, a slave's master).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, KvTable};
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;

pub(crate) fn handle<C: Admin + RuntimeKeys>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let mut table = ctx.admin().runtime_info().await?;
        table.extend(ctx.runtime_keys());
        Ok(answer(&request, resp::SUCCESS).with_body(body::to_json(&KvTable { table })))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::GET_BROKER_RUNTIME_INFO,
    rule: Rule::Cluster(GET),
    handle: &Typed::new(handle::<Broker>),
}];
