//! GET_CONSUMER_LIST_BY_GROUP (38) and GET_CONSUMER_CONNECTION_LIST (203).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use indexmap::IndexMap;
use petrel_protocol::body::{self, Connection as ConnectionInfo, ConsumerConnection, ConsumerListBody};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{GetConsumerConnectionListRequestHeader, GetConsumerListByGroupRequestHeader};
use petrel_protocol::{ExtFields, RemotingCommand};
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn list<C: Groups>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetConsumerListByGroupRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let ids = ctx.groups().consumer_ids(&h.consumer_group);
    if ids.is_empty() {
        let e = BrokerError::Internal(format!("no consumer for this group, {}", h.consumer_group));
        return Reply::Now(from_error(&request, &e));
    }
    let body = body::to_json(&ConsumerListBody { consumer_id_list: ids });
    Reply::Now(
        answer(&request, resp::SUCCESS)
            .with_ext_fields(ExtFields::default())
            .with_body(body),
    )
}

pub(crate) fn connections<C: Groups>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetConsumerConnectionListRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let cc = ctx.groups().with_group(&h.consumer_group, |info| ConsumerConnection {
        connection_set: info
            .channels
            .values()
            .map(|c| ConnectionInfo {
                client_addr: c.handle.peer().to_string(),
                client_id: c.client_id.clone(),
                language: c.language.name().to_owned(),
                version: c.version,
            })
            .collect(),
        consume_from_where: info.consume_from_where,
        consume_type: info.consume_type,
        message_model: info.message_model,
        subscription_table: info
            .subscriptions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<IndexMap<_, _>>(),
    });
    Reply::Now(match cc {
        Some(cc) => answer(&request, resp::SUCCESS).with_body(body::to_json(&cc)),
        None => from_error(
            &request,
            &BrokerError::ConsumerNotOnline(format!("the consumer group[{}] not online", h.consumer_group)),
        ),
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::GET_CONSUMER_LIST_BY_GROUP,
        rule: Rule::Fields(SUB_GET, &[Named::Group("consumerGroup")]),
        handle: &Typed::new(list::<Broker>),
    },
    Unit {
        code: rc::GET_CONSUMER_CONNECTION_LIST,
        rule: Rule::Fields(GET, &[Named::Group("consumerGroup")]),
        handle: &Typed::new(connections::<Broker>),
    },
];
