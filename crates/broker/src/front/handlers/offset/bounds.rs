//! The queue offset lookups consumers start from: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
//! GET_EARLIEST_MSG_STORETIME (32), SEARCH_OFFSET_BY_TIMESTAMP (29).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::header::{
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    OffsetResponseHeader, SearchOffsetRequestHeader,
};
use petrel_remoting::{Connection, Reply};
use petrel_store::Boundary;

use crate::broker::Broker;
use crate::front::reply::{later, ok_with};

pub(crate) fn max<C: Offsets>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: GetMaxOffsetRequestHeader, request: RemotingCommand) -> Reply {
    let offset = ctx.offsets().queue_bounds(&h.topic, h.queue_id).1;
    Reply::Now(ok_with(&request, &OffsetResponseHeader { offset }))
}

pub(crate) fn min<C: Offsets>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: GetMinOffsetRequestHeader, request: RemotingCommand) -> Reply {
    let offset = ctx.offsets().queue_bounds(&h.topic, h.queue_id).0;
    Reply::Now(ok_with(&request, &OffsetResponseHeader { offset }))
}

pub(crate) fn earliest_store_time<C: Offsets>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetEarliestMsgStoretimeRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let timestamp = ctx.offsets().earliest_store_time(&h.topic, h.queue_id).await?;
        Ok(ok_with(&request, &GetEarliestMsgStoretimeResponseHeader { timestamp }))
    })
}

pub(crate) fn search_by_time<C: Offsets>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: SearchOffsetRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let boundary = match h.boundary_type.as_deref() {
        Some(b) if b.eq_ignore_ascii_case("upper") => Boundary::Upper,
        _ => Boundary::Lower,
    };
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let offset = ctx.offsets().search_by_time(&h.topic, h.queue_id, h.timestamp, boundary).await?;
        Ok(ok_with(&request, &OffsetResponseHeader { offset }))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::GET_MAX_OFFSET,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: &Typed::new(max::<Broker>),
    },
    Unit {
        code: rc::GET_MIN_OFFSET,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: &Typed::new(min::<Broker>),
    },
    Unit {
        code: rc::GET_EARLIEST_MSG_STORETIME,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: &Typed::new(earliest_store_time::<Broker>),
    },
    Unit {
        code: rc::SEARCH_OFFSET_BY_TIMESTAMP,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: &Typed::new(search_by_time::<Broker>),
    },
];
