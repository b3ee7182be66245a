//! VIEW_MESSAGE_BY_ID (33): the stored record at an offset message id's commit-log offset. The
//! caller must be allowed to read the record's own topic, whatever topic the request names
//! (RocketMQ checks nothing when it names none).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::ViewMessageRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;

pub(crate) fn handle<C: Acl + Admin>(ctx: &Arc<C>, conn: &Arc<Connection>, h: ViewMessageRequestHeader, request: RemotingCommand) -> Reply {
    let may_read = ctx.access().topic_check(conn, &request, crate::access::GET);
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let record = ctx.admin().view_message(h.offset, may_read).await?;
        Ok(answer(&request, resp::SUCCESS).with_body(record))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    // The handler checks the found record's topic too (RocketMQ checks nothing without `topic`).
    Unit {
        code: rc::VIEW_MESSAGE_BY_ID,
        rule: Rule::Fields(GET, &[Named::Topic("topic")]),
        handle: &Typed::new(handle::<Broker>),
    },
];
