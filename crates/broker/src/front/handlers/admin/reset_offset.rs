//! INVOKE_BROKER_TO_RESET_OFFSET (222): `mqadmin resetOffsetByTime`, reset on the broker as
//! RocketMQ 5 does by default (`useServerSideResetOffset`): the offsets are committed at once and
//! each queue's next pull answers PULL_OFFSET_MOVED to the new offset, so consumers online or
//! not move there. The answer lists every queue's new offset.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{MessageQueue, ResetOffsetBody};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::ResetOffsetRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::later;

pub(crate) fn handle<C: Admin + Config + Roles>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: ResetOffsetRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let ctx = ctx.clone();
    later(request.clone(), async move {
        if !ctx.role().is_master() {
            return Err(BrokerError::Internal("Can not reset offset in slave broker".into()));
        }
        tracing::info!(topic = %h.topic, group = %h.group, timestamp = h.timestamp, force = h.is_force, "resetting offsets");
        let reset = ctx
            .admin()
            .reset_offset(&h.topic, &h.group, h.queue_id, h.offset, h.timestamp)
            .await?;
        let body = ResetOffsetBody {
            offset_table: reset
                .into_iter()
                .map(|(queue_id, offset)| {
                    let mq = MessageQueue {
                        broker_name: ctx.config().broker_name.clone(),
                        queue_id,
                        topic: h.topic.clone(),
                    };
                    (mq, offset)
                })
                .collect(),
        };
        Ok(answer(&request, resp::SUCCESS).with_body(body.to_json().into_bytes()))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::INVOKE_BROKER_TO_RESET_OFFSET,
    rule: Rule::Fields(UPDATE, &[Named::Group("group"), Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
