//! UPDATE_AND_CREATE_TOPIC (17): answered once the topic is saved and the name servers know it.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::TopicConfig;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::CreateTopicRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;

pub(crate) fn handle<C: Topics>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: CreateTopicRequestHeader, request: RemotingCommand) -> Reply {
    let mut config = TopicConfig::new(&h.topic, h.read_queue_nums, h.perm);
    config.write_queue_nums = h.write_queue_nums;
    config.topic_filter_type = h.topic_filter_type.clone();
    config.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
    config.order = h.order;
    for attr in h.attributes.as_deref().unwrap_or("").split(',').filter(|a| !a.is_empty()) {
        if let Some((k, v)) = attr.strip_prefix('+').and_then(|a| a.split_once('=')) {
            config.attributes.insert(k.to_owned(), v.to_owned());
        }
    }
    let ctx = ctx.clone();
    later(request.clone(), async move {
        ctx.topics().create_or_update(config).await?;
        tracing::info!(topic = %h.topic, read = h.read_queue_nums, write = h.write_queue_nums, perm = h.perm, "topic created or updated");
        Ok(answer(&request, resp::SUCCESS))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::UPDATE_AND_CREATE_TOPIC,
    rule: Rule::Fields(CREATE, &[Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
