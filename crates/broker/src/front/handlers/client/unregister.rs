//! UNREGISTER_CLIENT (35).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::UnregisterClientRequestHeader;
use petrel_protocol::{ExtFields, RemotingCommand};
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;

pub(crate) fn handle<C: Groups>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: UnregisterClientRequestHeader,
    request: RemotingCommand,
) -> Reply {
    ctx.groups()
        .unregister(&h.client_id, h.producer_group.as_deref(), h.consumer_group.as_deref());
    Reply::Now(answer(&request, resp::SUCCESS).with_ext_fields(ExtFields::default()))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::UNREGISTER_CLIENT,
    rule: Rule::Fields(PUB_SUB, &[Named::Group("consumerGroup")]),
    handle: &Typed::new(handle::<Broker>),
}];
