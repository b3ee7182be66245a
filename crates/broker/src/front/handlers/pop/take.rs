//! POP_MESSAGE (200050), the pop itself: messages for a group in POP mode, each invisible to the group's other
//! pops until acked or its invisible time passes. The answer's header carries the pop time and
//! invisible time the client builds each message's `POP_CK` handle from.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, PopMessageRequestHeader, PopMessageResponseHeader};
use petrel_remoting::{Connection, Reply, answer};
use petrel_store::MessageFilter;

use crate::broker::Broker;
use crate::front::reply::later_on_own_task;
use crate::services::pop::PopRequest;

pub(crate) fn handle<C: Consume + Pop + Shares>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    h: PopMessageRequestHeader,
    request: RemotingCommand,
) -> Reply {
    tracing::trace!(peer = %conn.peer(), group = %h.consumer_group, topic = %h.topic, queue = h.queue_id, max = h.max_msg_nums, poll_ms = h.poll_time, "pop");
    // A pop that may be held counts against its client's share of the held pulls.
    let place = if h.poll_time > 0 {
        match ctx.quotas().long_polls.take(Some(conn.peer().ip())) {
            Ok(place) => place,
            Err(e) => return Reply::Now(crate::front::reply::from_error(&request, &e)),
        }
    } else {
        None
    };
    let ctx = ctx.clone();
    later_on_own_task(request.clone(), async move {
        let _place = place;
        let (exp_type, exp) = (h.exp_type.as_deref().unwrap_or("TAG"), h.exp.as_deref().unwrap_or("*"));
        let filter = ctx
            .consume()
            .filter_for(&h.topic, exp_type, exp, 0)?
            .map(|f| Arc::new(f) as Arc<dyn MessageFilter>);
        let req = PopRequest {
            group: h.consumer_group,
            topic: h.topic,
            queue_id: h.queue_id,
            max_msgs: usize::try_from(h.max_msg_nums).unwrap_or(1),
            invisible_time_ms: h.invisible_time,
            poll: u64::try_from(h.poll_time).ok().map(Duration::from_millis),
            init_at_end: h.init_mode == 1,
            filter,
            orderly: h.order == Some(true),
        };
        let invisible_time = req.invisible_time_ms;
        let popped = ctx.pop().pop(req).await?;
        let header = PopMessageResponseHeader {
            pop_time: popped.pop_time_ms,
            invisible_time,
            revive_qid: 0,
            rest_num: popped.rest,
            start_offset_info: None,
            msg_offset_info: None,
            order_count_info: None,
        };
        let reply = if popped.count == 0 {
            answer(&request, resp::PULL_NOT_FOUND)
        } else {
            answer(&request, resp::SUCCESS).with_body(popped.body)
        };
        Ok(reply.with_ext_fields(header.to_ext()))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::POP_MESSAGE,
    rule: Rule::Fields(SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
