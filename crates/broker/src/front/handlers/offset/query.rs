//! QUERY_CONSUMER_OFFSET (14).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{OffsetResponseHeader, QueryConsumerOffsetRequestHeader};
use petrel_remoting::{Connection, Reply, error};

use crate::broker::Broker;
use crate::front::reply::ok_with;

pub(crate) fn handle<C: Offsets>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: QueryConsumerOffsetRequestHeader,
    request: RemotingCommand,
) -> Reply {
    if let Some(offset) = ctx.offsets().query(&h.consumer_group, &h.topic, h.queue_id) {
        return Reply::Now(ok_with(&request, &OffsetResponseHeader { offset }));
    }
    // A new group on a queue that still starts at 0 begins at 0, as RocketMQ does while the
    // queue's first message is in memory; Petrel keeps recent segments mapped, so "the queue
    // was never trimmed" is the analogue.
    let (min, max) = ctx.offsets().queue_bounds(&h.topic, h.queue_id);
    if h.set_zero_if_not_found != Some(false) && min <= 0 && max > 0 {
        return Reply::Now(ok_with(&request, &OffsetResponseHeader { offset: 0 }));
    }
    Reply::Now(
        error(
            &request,
            resp::QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )
        .with_ext_fields(petrel_protocol::ExtFields::default()),
    )
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::QUERY_CONSUMER_OFFSET,
    rule: Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB_GET))),
    handle: &Typed::new(handle::<Broker>),
}];
