//! GET_TOPIC_STATS_INFO (202): each queue's offsets and last store time.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{MessageQueue, TopicOffset, TopicStatsTable};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::GetTopicStatsInfoRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;

pub(crate) fn handle<C: Admin + Config>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetTopicStatsInfoRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let queues = ctx.admin().topic_stats(&h.topic).await?;
        let table = TopicStatsTable {
            offset_table: queues
                .into_iter()
                .map(|q| {
                    let mq = MessageQueue {
                        broker_name: ctx.config().broker_name.clone(),
                        queue_id: q.queue_id,
                        topic: h.topic.clone(),
                    };
                    let offsets = TopicOffset {
                        last_update_timestamp: q.last_update_ms,
                        max_offset: q.max_offset,
                        min_offset: q.min_offset,
                    };
                    (mq, offsets)
                })
                .collect(),
            topic_put_tps: 0.0,
        };
        Ok(answer(&request, resp::SUCCESS).with_body(table.to_json()))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::GET_TOPIC_STATS_INFO,
    rule: Rule::Fields(GET, &[Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
