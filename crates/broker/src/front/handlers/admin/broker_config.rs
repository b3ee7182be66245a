//! GET_BROKER_CONFIG (26): every setting as `key=value` lines, and the topic table's version.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;

pub(crate) fn handle<C: Admin>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let (properties, version) = ctx.admin().broker_config();
    let mut r = answer(&request, resp::SUCCESS).with_body(properties);
    r.put_ext("version", body::to_json(&version));
    Reply::Now(r)
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    // The broker's configuration (its secrets are masked in the answer as well).
    Unit {
        code: rc::GET_BROKER_CONFIG,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(handle::<Broker>),
    },
];
