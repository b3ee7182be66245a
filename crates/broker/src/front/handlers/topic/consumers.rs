//! QUERY_TOPIC_CONSUME_BY_WHO (300): the groups that consume a topic (online or with committed
//! offsets), as `mqadmin topicStatus`'s callers and the dashboard's topic page ask; and
//! GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): the broker's system topics, which `mqadmin
//! topicList` and the dashboard add to the name server's list.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{GroupList, TopicList, to_json};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::QueryTopicConsumeByWhoRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;

pub(crate) fn consumed_by<C: Groups + Offsets>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: QueryTopicConsumeByWhoRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let mut groups: Vec<String> = ctx
        .groups()
        .subscribed()
        .into_iter()
        .filter(|(_, topics)| topics.contains(&h.topic))
        .map(|(group, _)| group)
        .collect();
    groups.extend(ctx.offsets().table().groups_of(&h.topic));
    groups.sort();
    groups.dedup();
    let body = GroupList { group_list: groups };
    Reply::Now(answer(&request, resp::SUCCESS).with_body(to_json(&body).into_bytes()))
}

pub(crate) fn system_topics<C: Topics>(ctx: &Arc<C>, _conn: &Arc<Connection>, _h: NoHeader, request: RemotingCommand) -> Reply {
    let topics = ctx.topics();
    let topic_list = topics.names().into_iter().filter(|t| topics.is_system_topic(t)).collect();
    let body = TopicList {
        broker_addr: None,
        topic_list,
    };
    Reply::Now(answer(&request, resp::SUCCESS).with_body(to_json(&body).into_bytes()))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::QUERY_TOPIC_CONSUME_BY_WHO,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: &Typed::new(consumed_by::<Broker>),
    },
    Unit {
        code: rc::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(system_topics::<Broker>),
    },
];
