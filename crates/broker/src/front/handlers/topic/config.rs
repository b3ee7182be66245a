//! GET_ALL_TOPIC_CONFIG (21) and GET_TOPIC_CONFIG (351; Java's TopicConfigAndQueueMapping
//! without a mapping is the plain TopicConfig).

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
use petrel_protocol::header::GetTopicStatsInfoRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn all<C: Topics>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let table = ctx.topics().snapshot();
    let mut r = answer(&request, resp::SUCCESS).with_body(body::to_json(&table));
    r.put_ext("totalTopicNum", table.topic_config_table.len().to_string());
    Reply::Now(r)
}

pub(crate) fn one<C: Topics>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: GetTopicStatsInfoRequestHeader, request: RemotingCommand) -> Reply {
    Reply::Now(match ctx.topics().get(&h.topic) {
        Some(c) => answer(&request, resp::SUCCESS).with_body(body::to_json(&c)),
        None => from_error(
            &request,
            &BrokerError::TopicNotExist(format!("No topic in this broker. topic: {}", h.topic)),
        ),
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    // Every topic's configuration: a cluster-wide read.
    Unit {
        code: rc::GET_ALL_TOPIC_CONFIG,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(all::<Broker>),
    },
    Unit {
        code: rc::GET_TOPIC_CONFIG,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: &Typed::new(one::<Broker>),
    },
];
