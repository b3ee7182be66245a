//! SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): a consumer answers a request
//! (`producer.request(...)`) with a message made by `MessageUtil.createReplyMessage`. As
//! RocketMQ does, the broker first hands it to the requester — the live producer whose client
//! id is the message's `REPLY_TO_CLIENT` — with PUSH_REPLY_MESSAGE_TO_CLIENT (326), then stores
//! it in `<cluster>_REPLY_TOPIC` (`storeReplyMessageEnable`). The replier's answer says whether
//! the requester took it: SYSTEM_ERROR with RocketMQ's remark when it did not.

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
use petrel_protocol::properties::{keys, property};
use petrel_remoting::{Connection, Reply, answer};

use super::send::{bad_header, refused, send_request, stored};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::services::ReplyPush;

/// A reply, whichever key form its code uses.
pub(crate) fn handle<C: Config + Groups + Produce + Shares + StoreHost + Topics, H: Into<SendMessageRequestHeader>>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    header: H,
    request: RemotingCommand,
) -> Reply {
    let region = ctx.config().region_id.clone();
    let h = header.into();
    if ctx.topics().get(&h.topic).is_none() {
        return Reply::Now(refused(&request, &BrokerError::topic_not_exist(&h.topic), &region));
    }
    let push = ReplyPush {
        producer_group: h.producer_group.clone(),
        topic: h.topic.clone(),
        default_topic: h.default_topic.clone(),
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id: h.queue_id,
        sys_flag: h.sys_flag,
        born_timestamp_ms: h.born_timestamp,
        flag: h.flag,
        properties: None,
        reconsume_times: h.reconsume_times,
        unit_mode: h.unit_mode,
        born_host: conn.peer(),
        store_host: *ctx.store_host(),
        store_timestamp_ms: crate::now_ms(),
        body: request.body.clone(),
    };
    let place = match ctx.quotas().sends.take(Some(conn.peer().ip())) {
        Ok(place) => place,
        Err(e) => return Reply::Now(refused(&request, &e, &region)),
    };
    let send = send_request(ctx, h, request.body.clone(), conn.peer());
    let ctx = ctx.clone();
    Reply::Later(Box::pin(async move {
        let _place = place;
        let pushed = push_to_requester(&ctx, push, send.properties.as_deref()).await;
        let kept = if ctx.config().store_reply_message_enable {
            ctx.produce()
                .send(send)
                .await
                .inspect_err(|e| tracing::warn!(error = %e, "a reply was not stored"))
                .ok()
        } else {
            None
        };
        Some(match (pushed, kept) {
            (Err(why), _) => answer(&request, resp::SYSTEM_ERROR).with_remark(why.to_string()),
            (Ok(()), Some(outcome)) => stored(&request, outcome, &ctx),
            (Ok(()), None) => not_stored(&request, &ctx),
        })
    }))
}

/// Why a reply did not reach its requester; the texts are RocketMQ's remarks.
#[derive(Debug, thiserror::Error)]
enum NotPushed {
    #[error("reply message properties[{}] is null", keys::MESSAGE_REPLY_TO_CLIENT)]
    NoRequester,
    #[error("push reply message fail, channel of <{0}> not found.")]
    NotConnected(String),
    #[error("push reply message to {requester}fail.")]
    NotTaken {
        requester: String,
        #[source]
        source: crate::services::PushError,
    },
}

/// Finds the requester and hands it the reply.
async fn push_to_requester<C: Groups>(ctx: &C, mut push: ReplyPush, properties: Option<&str>) -> Result<(), NotPushed> {
    let properties = properties.unwrap_or_default();
    let Some(requester) = property(properties, keys::MESSAGE_REPLY_TO_CLIENT) else {
        return Err(NotPushed::NoRequester);
    };
    let Some(handle) = ctx.groups().producer_by_client_id(requester) else {
        return Err(NotPushed::NotConnected(requester.to_owned()));
    };
    push.properties = Some(format!("{properties}{}\u{1}{}\u{2}", keys::PUSH_REPLY_TIME, crate::now_ms()));
    handle.push_reply(push).await.map_err(|source| {
        tracing::debug!(requester, error = %source, "reply not taken");
        NotPushed::NotTaken {
            requester: requester.to_owned(),
            source,
        }
    })
}

/// SUCCESS for a reply handed over but not stored: RocketMQ answers msgId "0" and offset 0.
fn not_stored<C: Config>(request: &RemotingCommand, ctx: &C) -> RemotingCommand {
    let header = SendMessageResponseHeader {
        msg_id: "0".into(),
        queue_id: 0,
        queue_offset: 0,
        transaction_id: None,
        batch_uniq_id: None,
        recall_handle: None,
        msg_region: Some(ctx.config().region_id.clone()),
        trace_on: Some(ctx.config().trace_on.to_string()),
    };
    answer(request, resp::SUCCESS).with_ext_fields(header.to_ext())
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::SEND_REPLY_MESSAGE,
        rule: Rule::Custom(|r| Ok(send(r, "topic"))),
        handle: &Typed::refusing(handle::<Broker, SendMessageRequestHeader>, bad_header),
    },
    Unit {
        code: rc::SEND_REPLY_MESSAGE_V2,
        rule: Rule::Custom(|r| Ok(send(r, "b"))),
        handle: &Typed::refusing(handle::<Broker, SendMessageRequestHeaderV2>, bad_header),
    },
];
