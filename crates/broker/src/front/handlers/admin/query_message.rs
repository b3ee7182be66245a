//! QUERY_MESSAGE (12): messages by key (`mqadmin queryMsgByKey`) or by unique key
//! (`_UNIQUE_KEY_QUERY=true`: `queryMsgByUniqueKey`, and `queryMsgById` for a client-made id),
//! found through the store's key index. Both answers carry where the index stands.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, QueryMessageRequestHeader, QueryMessageResponseHeader};
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;

/// Messages one query returns at most (RocketMQ's `maxMsgsNumBatch`).
pub const MAX_QUERY_NUM: i32 = 64;

pub(crate) fn handle<C: Admin + Config>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: QueryMessageRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let unique = h.unique_key_query == Some(true);
        let max = if unique { ctx.config().default_query_max_num } else { h.max_num };
        let max = usize::try_from(max.clamp(1, MAX_QUERY_NUM)).expect("clamped to 1..=64");
        let found = ctx
            .admin()
            .query_message(h.topic, h.key, unique, max, (h.begin_timestamp, h.end_timestamp))
            .await?;
        let index = QueryMessageResponseHeader {
            index_last_update_timestamp: found.index_end_ms,
            index_last_update_phyoffset: i64::try_from(found.index_end_offset).unwrap_or(i64::MAX),
        };
        let reply = if found.count == 0 {
            answer(&request, resp::QUERY_NOT_FOUND).with_remark("can not find message, maybe time range not correct")
        } else {
            answer(&request, resp::SUCCESS).with_body(found.body)
        };
        Ok(reply.with_ext_fields(index.to_ext()))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::QUERY_MESSAGE,
    rule: Rule::Fields(SUB_GET, &[Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
