//! GET_CONSUME_STATS (208): a group's progress per queue (mqadmin `consumerProgress`).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{ConsumeStats, MessageQueue, OffsetWrapper};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::GetConsumeStatsRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;

pub(crate) fn handle<C: Admin + Config>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetConsumeStatsRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let topics: Vec<String> = if let Some(list) = h.topic_list.as_deref().filter(|l| !l.is_empty()) {
        list.split(';').filter(|t| !t.is_empty()).map(str::to_owned).collect()
    } else if let Some(t) = h.topic.as_deref().filter(|t| !t.trim().is_empty()) {
        vec![t.to_owned()]
    } else {
        Vec::new()
    };
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let rows = ctx.admin().consume_stats(&h.consumer_group, topics).await?;
        let mut stats = ConsumeStats::default();
        for r in rows {
            let mq = MessageQueue {
                broker_name: ctx.config().broker_name.clone(),
                queue_id: r.queue_id,
                topic: r.topic,
            };
            let progress = OffsetWrapper {
                broker_offset: r.broker_offset,
                consumer_offset: r.consumer_offset,
                last_timestamp: r.last_timestamp_ms,
                pull_offset: r.pull_offset,
            };
            stats.offset_table.push((mq, progress));
        }
        Ok(answer(&request, resp::SUCCESS).with_body(stats.to_json()))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::GET_CONSUME_STATS,
    rule: Rule::Fields(GET, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
