//! END_TRANSACTION (37): a producer's commit, rollback or "unknown" for a half message, after
//! its local transaction or when the broker asked (CHECK_TRANSACTION_STATE). Clients send it
//! oneway; a request that wants an answer gets one. The caller must be allowed to publish to the
//! half message's real topic, whatever topic the request names (RocketMQ checks nothing when it
//! names none).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::EndTransactionRequestHeader;
use petrel_protocol::message::sys_flag;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::from_error;
use crate::services::produce::{EndTransaction, Ended};

pub(crate) fn handle<C: Acl + Produce>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    h: EndTransactionRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let commit = match h.commit_or_rollback {
        sys_flag::TRANSACTION_COMMIT_TYPE => Some(true),
        sys_flag::TRANSACTION_ROLLBACK_TYPE => Some(false),
        _ => None,
    };
    let end = EndTransaction {
        producer_group: h.producer_group,
        may_publish: ctx.access().topic_check(conn, &request, crate::access::PUB),
        tran_state_table_offset: h.tran_state_table_offset,
        commit_log_offset: h.commit_log_offset,
        commit,
    };
    let ctx = ctx.clone();
    Reply::Later(Box::pin(async move {
        let result = ctx.produce().end_transaction(end).await;
        match &result {
            Ok(Ended::AlreadyDecided) => tracing::debug!(offset = h.commit_log_offset, "transaction already decided"),
            Ok(_) => {}
            Err(e) => tracing::warn!(offset = h.commit_log_offset, msg_id = %h.msg_id, error = %e, "END_TRANSACTION refused"),
        }
        if request.is_oneway() {
            return None;
        }
        Some(match result {
            Ok(_) => answer(&request, resp::SUCCESS),
            Err(e) => from_error(&request, &e),
        })
    }))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    // Without a topic RocketMQ checks nothing; the handler checks the half message's topic.
    Unit {
        code: rc::END_TRANSACTION,
        rule: Rule::Fields(PUB, &[Named::Topic("topic")]),
        handle: &Typed::new(handle::<Broker>),
    },
];
