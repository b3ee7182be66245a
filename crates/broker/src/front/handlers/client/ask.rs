//! GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): an admin's question for
//! one consumer (mqadmin `consumerStatus [-s]`, `consumerProgress`, `queryMsgById -g -d`, the
//! dashboard's client view), which the broker forwards to that client whatever protocol it
//! speaks and answers with the client's answer. As RocketMQ's broker does, 309 carries this
//! broker's name, the topic's and group's flags and the stored message itself.
//!
//! Must never: wait on a client longer than `CLIENT_CALL_TIMEOUT`, or show a client a record
//! whose topic the admin may not read.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader};
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;
use crate::services::{ClientQuestion, PushError};

pub(crate) fn running_info<C: Groups>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetConsumerRunningInfoRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let question = ClientQuestion::RunningInfo {
        group: h.consumer_group,
        client_id: h.client_id,
        jstack: h.jstack_enable.unwrap_or(false),
    };
    ask(ctx, question, request)
}

pub(crate) fn consume_directly<C: Acl + Admin + Config + Groups + Topics>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    h: ConsumeMessageDirectlyResultRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let (Some(client_id), Some(msg_id)) = (h.client_id, h.msg_id) else {
        let e = BrokerError::BadRequest("CONSUME_MESSAGE_DIRECTLY names no clientId or msgId".into());
        return Reply::Now(from_error(&request, &e));
    };
    let offset = match petrel_protocol::msgid::decode_offset_msg_id(&msg_id) {
        Ok((_, offset)) => offset,
        Err(e) => {
            let e = BrokerError::BadRequest(format!("msgId {msg_id} is not an offset message id: {e}"));
            return Reply::Now(from_error(&request, &e));
        }
    };
    let topic_sys_flag = h.topic.as_deref().and_then(|t| ctx.topics().get(t)).map(|t| t.topic_sys_flag);
    let group_sys_flag = ctx.groups().find_config(&h.consumer_group).map(|g| g.group_sys_flag);
    let may_read = ctx.access().topic_check(conn, &request, crate::access::GET);
    let ctx = ctx.clone();
    let request_later = request.clone();
    let found = async move {
        let record = ctx.admin().view_message(offset, may_read).await?;
        let question = ClientQuestion::ConsumeDirectly {
            group: h.consumer_group,
            client_id,
            msg_id,
            topic: h.topic,
            broker_name: ctx.config().broker_name.clone(),
            topic_sys_flag,
            group_sys_flag,
            record: record.into(),
        };
        Ok::<_, BrokerError>((ctx, question))
    };
    Reply::Later(Box::pin(async move {
        match found.await {
            Ok((ctx, question)) => asked(&ctx, question, &request_later).await,
            Err(e) => Some(from_error(&request_later, &e)),
        }
    }))
}

/// Finds the client and puts `question` to it.
fn ask<C: Groups>(ctx: &Arc<C>, question: ClientQuestion, request: RemotingCommand) -> Reply {
    let ctx = ctx.clone();
    Reply::Later(Box::pin(async move { asked(&ctx, question, &request).await }))
}

/// The admin's answer: the client's, or RocketMQ's code and remark for why there is none.
async fn asked<C: Groups>(ctx: &Arc<C>, question: ClientQuestion, request: &RemotingCommand) -> Option<RemotingCommand> {
    let (group, client_id) = question.client();
    let (group, client_id) = (group.to_owned(), client_id.to_owned());
    let Some(client) = ctx.groups().consumer_by_client_id(&group, &client_id) else {
        return Some(answer(request, resp::SYSTEM_ERROR).with_remark(format!("The Consumer <{group}> <{client_id}> not online")));
    };
    Some(match client.ask(question).await {
        Ok(body) => answer(request, resp::SUCCESS).with_body(body),
        Err(PushError::Refused { code, remark }) => answer(request, code).with_remark(remark),
        Err(e @ PushError::TimedOut(_)) => {
            answer(request, resp::CONSUME_MSG_TIMEOUT).with_remark(format!("consumer <{group}> <{client_id}> Timeout: {e}"))
        }
        Err(e @ PushError::Unreached(_)) => {
            answer(request, resp::SYSTEM_ERROR).with_remark(format!("invoke consumer <{group}> <{client_id}> Exception: {e}"))
        }
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::GET_CONSUMER_RUNNING_INFO,
        rule: Rule::Fields(GET, &[Named::Group("consumerGroup")]),
        handle: &Typed::new(running_info::<Broker>),
    },
    // The handler checks the found record's topic too, whatever topic the request names.
    Unit {
        code: rc::CONSUME_MESSAGE_DIRECTLY,
        rule: Rule::Fields(GET, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
        handle: &Typed::new(consume_directly::<Broker>),
    },
];
