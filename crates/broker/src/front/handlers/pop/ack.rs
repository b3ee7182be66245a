//! ACK_MESSAGE (200051): a popped message was consumed. As on RocketMQ the answer is SUCCESS
//! whether or not the handle was still current (a stale one, from before the message came back,
//! changes nothing).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::AckMessageRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use super::pop_time_of;
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn handle<C: Pop>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: AckMessageRequestHeader, request: RemotingCommand) -> Reply {
    let Some(pop_time) = pop_time_of(&h.extra_info) else {
        let e = BrokerError::InvalidParameter(format!("extraInfo [{}] is not a POP_CK handle", h.extra_info));
        return Reply::Now(from_error(&request, &e));
    };
    if !ctx.pop().ack(&h.consumer_group, &h.topic, h.queue_id, h.offset, pop_time) {
        tracing::debug!(group = %h.consumer_group, topic = %h.topic, queue = h.queue_id, offset = h.offset, "ack of a pop no longer in flight");
    }
    Reply::Now(answer(&request, resp::SUCCESS))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::ACK_MESSAGE,
    rule: Rule::Fields(SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
