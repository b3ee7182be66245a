//! GET_ALL_TOPIC_CONFIG (21) and GET_TOPIC_CONFIG (351; Java's TopicConfigAndQueueMapping
//! without a mapping is the plain TopicConfig).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
use crate::front::unit::Unit;
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::GetTopicStatsInfoRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::{from_error, header};

pub(crate) fn all(broker: &Arc<Broker>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let table = broker.topics.snapshot();
    let mut r = answer(&request, resp::SUCCESS).with_body(body::to_json(&table));
    r.put_ext("totalTopicNum", table.topic_config_table.len().to_string());
    Reply::Now(r)
}

pub(crate) fn one(broker: &Arc<Broker>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let h = header!(GetTopicStatsInfoRequestHeader, request);
    Reply::Now(match broker.topics.get(&h.topic) {
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
        handle: all,
    },
    Unit {
        code: rc::GET_TOPIC_CONFIG,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: one,
    },
];
