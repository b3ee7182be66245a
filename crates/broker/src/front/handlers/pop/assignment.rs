//! QUERY_ASSIGNMENT (400): a client with `setClientRebalance(false)` asks the broker which
//! queues of a topic it reads, and whether by pull or by pop; SET_MESSAGE_REQUEST_MODE (401):
//! `mqadmin setConsumeMode` puts a group's reading of a topic in POP (or PULL) mode.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, MessageQueueAssignment, QueryAssignmentRequestBody, SetMessageRequestModeRequestBody};
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn query<C: Config + Pop>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let q: QueryAssignmentRequestBody = match body::from_json(&request.body) {
        Ok(q) => q,
        Err(e) => {
            return Reply::Now(from_error(
                &request,
                &BrokerError::BadRequest(format!("bad QUERY_ASSIGNMENT body: {e}")),
            ));
        }
    };
    let broadcasting = q.message_model.as_deref() == Some("BROADCASTING");
    tracing::trace!(client = %q.client_id, group = %q.consumer_group, topic = %q.topic, "query assignment");
    let assigned = ctx
        .pop()
        .assignment(&q.topic, &q.consumer_group, &q.client_id, broadcasting, &ctx.config().broker_name);
    // No assignment (an unknown topic) is `null`: the client keeps what it reads.
    let assignments = assigned.map(|(queues, mode)| {
        queues
            .into_iter()
            .map(|message_queue| MessageQueueAssignment {
                message_queue,
                mode,
                attachments: None,
            })
            .collect::<Vec<_>>()
    });
    let json = serde_json::json!({ "messageQueueAssignments": assignments });
    Reply::Now(answer(&request, resp::SUCCESS).with_body(json.to_string().into_bytes()))
}

pub(crate) fn set_mode<C: Pop>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let mode: SetMessageRequestModeRequestBody = match body::from_json(&request.body) {
        Ok(m) => m,
        Err(e) => {
            return Reply::Now(from_error(
                &request,
                &BrokerError::BadRequest(format!("bad SET_MESSAGE_REQUEST_MODE body: {e}")),
            ));
        }
    };
    match ctx.pop().set_mode(mode) {
        Ok(()) => Reply::Now(answer(&request, resp::SUCCESS)),
        Err(e) => Reply::Now(from_error(&request, &e)),
    }
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::QUERY_ASSIGNMENT,
        rule: Rule::Custom(assignment),
        handle: &Typed::new(query::<Broker>),
    },
    Unit {
        code: rc::SET_MESSAGE_REQUEST_MODE,
        rule: Rule::Custom(request_mode),
        handle: &Typed::new(set_mode::<Broker>),
    },
];
