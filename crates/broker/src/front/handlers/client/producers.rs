//! GET_PRODUCER_CONNECTION_LIST (204): a producer group's connected clients, whichever protocol
//! they speak (`mqadmin producerConnection`).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, Connection as ConnectionInfo, ProducerConnection};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::GetProducerConnectionListRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn connections<C: Groups>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetProducerConnectionListRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let channels = ctx.groups().producer_channels(&h.producer_group);
    if channels.is_empty() {
        let e = BrokerError::Internal(format!("the producer group[{}] not exist", h.producer_group));
        return Reply::Now(from_error(&request, &e));
    }
    let pc = ProducerConnection {
        connection_set: channels
            .iter()
            .map(|c| ConnectionInfo {
                client_addr: c.handle.peer().to_string(),
                client_id: c.client_id.clone(),
                language: c.language.name().to_owned(),
                version: c.version,
            })
            .collect(),
    };
    Reply::Now(answer(&request, resp::SUCCESS).with_body(body::to_json(&pc)))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::GET_PRODUCER_CONNECTION_LIST,
    rule: Rule::Fields(GET, &[Named::Group("producerGroup")]),
    handle: &Typed::new(connections::<Broker>),
}];
