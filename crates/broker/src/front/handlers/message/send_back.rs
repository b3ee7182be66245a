//! CONSUMER_SEND_MSG_BACK (36): a consumer gives a message back (RECONSUME_LATER, or a listener
//! that threw); the broker stores it again for the group's retry topic at its delay level, or in
//! the group's dead-letter queue once it was retried enough. The caller must be allowed to read
//! the topic of the record at the offset it names (RocketMQ checks only the group).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::ConsumerSendMsgBackRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;
use crate::services::produce::{RetryPolicy, SendBackRequest};

pub(crate) fn handle<C: Acl + Groups + Produce>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    h: ConsumerSendMsgBackRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let may_read = ctx.access().topic_check(conn, &request, crate::access::SUB);
    let ctx = ctx.clone();
    later(request.clone(), async move {
        ctx.groups().require_known(&h.group)?;
        let back = SendBackRequest {
            offset: h.offset,
            may_read,
            group: h.group,
            delay_level: h.delay_level,
            max_reconsume_times: h.max_reconsume_times,
        };
        let config = ctx.groups().config(&back.group);
        let policy = RetryPolicy {
            retry_max_times: config.retry_max_times,
            retry_queue_nums: config.retry_queue_nums,
        };
        ctx.produce().send_back(back, policy).await?;
        Ok(answer(&request, resp::SUCCESS))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    // The record at the offset is checked by the handler too (RocketMQ checks only the group,
    // so a consumer could copy any topic's message into its retry topic and read it).
    Unit {
        code: rc::CONSUMER_SEND_MSG_BACK,
        rule: Rule::Fields(SUB, &[Named::Group("group")]),
        handle: &Typed::new(handle::<Broker>),
    },
];
