//! SEND_MESSAGE (10, long keys), SEND_MESSAGE_V2 (310, short keys) and SEND_BATCH_MESSAGE (320).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;
use crate::services::produce::{Durability, SendOutcome, SendRequest};
use crate::services::topics::RETRY_GROUP_TOPIC_PREFIX;

/// A send, whichever key form its code uses (`H`: the long keys of SEND_MESSAGE or the short
/// ones of SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE).
pub(crate) fn handle<C: Config + Groups + Produce + Shares, H: Into<SendMessageRequestHeader>>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    header: H,
    request: RemotingCommand,
) -> Reply {
    let region = ctx.config().region_id.clone();
    let h = header.into();
    // Held until the send is answered: a client's share of the sends in progress.
    let place = match ctx.quotas().sends.take(Some(conn.peer().ip())) {
        Ok(place) => place,
        Err(e) => return Reply::Now(refused(&request, &e, &region)),
    };
    let send = send_request(ctx, h, request.body.clone(), conn.peer());
    let ctx = ctx.clone();
    Reply::Later(Box::pin(async move {
        let _place = place;
        Some(match ctx.produce().send(send).await {
            Ok(outcome) => stored(&request, outcome, &ctx),
            Err(e) => {
                tracing::debug!(error = %e, "send refused");
                refused(&request, &e, &region)
            }
        })
    }))
}

/// The service's request for a send of the SEND family (SEND_REPLY_MESSAGE's too).
pub(super) fn send_request<C: Groups>(ctx: &C, h: SendMessageRequestHeader, body: bytes::Bytes, peer: std::net::SocketAddr) -> SendRequest {
    // A send to a retry topic (an orderly consumer's retry) that does not say how often it may
    // be retried takes the group's `retryMaxTimes`.
    let max_reconsume_times = h.max_reconsume_times.or_else(|| {
        h.topic
            .strip_prefix(RETRY_GROUP_TOPIC_PREFIX)
            .map(|group| ctx.groups().config(group).retry_max_times)
    });
    SendRequest {
        batch: h.is_batch(),
        producer_group: h.producer_group,
        topic: h.topic,
        default_topic: h.default_topic,
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id: h.queue_id,
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        flag: h.flag,
        properties: h.properties,
        reconsume_times: h.reconsume_times.unwrap_or(0),
        max_reconsume_times,
        body,
        born_host: Some(peer),
    }
}

/// A send whose header does not decode: refused with MSG_REGION, as every send answer.
pub(super) fn bad_header(broker: &Broker, request: &RemotingCommand, e: &BrokerError) -> RemotingCommand {
    refused(request, e, &broker.config.region_id)
}

/// SUCCESS, or FLUSH_DISK_TIMEOUT with the same fields (the message is stored either way).
pub(super) fn stored<C: Config>(request: &RemotingCommand, outcome: SendOutcome, ctx: &C) -> RemotingCommand {
    let code = match outcome.durability {
        Durability::Stored => resp::SUCCESS,
        Durability::FlushTimedOut => resp::FLUSH_DISK_TIMEOUT,
        Durability::SlaveTimedOut => resp::FLUSH_SLAVE_TIMEOUT,
        Durability::SlaveNotAvailable => resp::SLAVE_NOT_AVAILABLE,
    };
    let header = SendMessageResponseHeader {
        msg_id: outcome.msg_id,
        queue_id: outcome.queue_id,
        queue_offset: outcome.queue_offset,
        transaction_id: outcome.transaction_id,
        batch_uniq_id: None,
        recall_handle: None,
        msg_region: Some(ctx.config().region_id.clone()),
        trace_on: Some(ctx.config().trace_on.to_string()),
    };
    answer(request, code).with_ext_fields(header.to_ext())
}

/// The Java client reads MSG_REGION from every send answer, refusals included.
pub(super) fn refused(request: &RemotingCommand, e: &BrokerError, region: &str) -> RemotingCommand {
    let mut r = from_error(request, e);
    r.put_ext("MSG_REGION", region);
    r
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::SEND_MESSAGE,
        rule: Rule::Custom(|r| Ok(send(r, "topic"))),
        handle: &Typed::refusing(handle::<Broker, SendMessageRequestHeader>, bad_header),
    },
    Unit {
        code: rc::SEND_MESSAGE_V2,
        rule: Rule::Custom(|r| Ok(send(r, "b"))),
        handle: &Typed::refusing(handle::<Broker, SendMessageRequestHeaderV2>, bad_header),
    },
    Unit {
        code: rc::SEND_BATCH_MESSAGE,
        rule: Rule::Custom(|r| Ok(send(r, "b"))),
        handle: &Typed::refusing(handle::<Broker, SendMessageRequestHeaderV2>, bad_header),
    },
];
