//! CHANGE_MESSAGE_INVISIBLETIME (200053): a popped message comes back after `invisibleTime`
//! (a POP consumer's RECONSUME_LATER); the answer carries its new pop time, its new handle.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader, CommandHeader};
use petrel_remoting::{Connection, Reply, answer};

use super::pop_time_of;
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn handle<C: Pop>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: ChangeInvisibleTimeRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let changed = pop_time_of(&h.extra_info)
        .ok_or_else(|| BrokerError::InvalidParameter(format!("extraInfo [{}] is not a POP_CK handle", h.extra_info)))
        .and_then(|pop_time| {
            ctx.pop()
                .change_invisible_time(&h.consumer_group, &h.topic, h.queue_id, h.offset, pop_time, h.invisible_time)
        });
    match changed {
        Ok(pop_time) => {
            let header = ChangeInvisibleTimeResponseHeader {
                pop_time,
                invisible_time: h.invisible_time,
                revive_qid: 0,
            };
            Reply::Now(answer(&request, resp::SUCCESS).with_ext_fields(header.to_ext()))
        }
        Err(e) => Reply::Now(from_error(&request, &e)),
    }
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::CHANGE_MESSAGE_INVISIBLETIME,
    rule: Rule::Fields(SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
