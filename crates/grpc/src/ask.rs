//! An admin's question for a gRPC client (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY),
//! put to it over its Telemetry stream as RocketMQ's proxy does: PrintThreadStackTraceCommand
//! and VerifyMessageCommand, each with a nonce the client's answer (ThreadStackTrace,
//! VerifyMessageResult) carries back. Unlike the proxy, a running-info question without
//! `jstack` is answered at once from what the broker knows (the client's type, version and
//! subscriptions), so `consumerProgress` and `queryMsgById -d` work for gRPC consumers too.
//!
//! Owns: the nonces in flight per client. Must never: hold more than [`MAX_CALLS_PER_CLIENT`]
//! questions for one client, or keep one past `CLIENT_CALL_TIMEOUT`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use indexmap::IndexMap;
use parking_lot::Mutex;
use petrel_broker::services::{CLIENT_CALL_TIMEOUT, ClientQuestion, PushError};
use petrel_protocol::body::{self, ConsumeMessageDirectlyResult, ConsumeResult, ConsumerRunningInfo, running_info_keys as keys};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::message::MessageExt;
use tokio::sync::oneshot;

use crate::clients::GrpcClient;
use crate::convert::{Delivery, message_of};
use crate::pb::{self, ClientType, Code, settings::PubSub, telemetry_command::Command};

/// Questions one client may have open at once; past it, the admin is told the client is busy.
pub const MAX_CALLS_PER_CLIENT: usize = 8;

/// What a client answered over Telemetry: its status, and a thread dump if it sent one.
#[derive(Debug)]
pub struct Answered {
    /// The answer's status (absent means OK to the SDKs that leave it out).
    pub status: Option<pb::Status>,
    /// The client's thread stacks, for a PrintThreadStackTraceCommand.
    pub stack_trace: Option<String>,
}

/// The questions in flight to one client, by nonce.
#[derive(Default)]
pub struct Calls {
    open: Mutex<HashMap<String, oneshot::Sender<Answered>>>,
}

static NEXT_NONCE: AtomicU64 = AtomicU64::new(1);

impl Calls {
    /// A fresh nonce and where its answer will arrive; `None` when the client has too many open.
    fn open(&self) -> Option<(String, oneshot::Receiver<Answered>)> {
        let mut open = self.open.lock();
        // Questions whose waiter gave up (timed out) leave closed senders behind: clear them.
        open.retain(|_, tx| !tx.is_closed());
        if open.len() >= MAX_CALLS_PER_CLIENT {
            return None;
        }
        let nonce = NEXT_NONCE.fetch_add(1, Ordering::Relaxed).to_string();
        let (tx, rx) = oneshot::channel();
        open.insert(nonce.clone(), tx);
        Some((nonce, rx))
    }

    /// Hands a client's answer to its question; an unknown or late nonce is dropped.
    pub fn answer(&self, nonce: &str, answered: Answered) -> bool {
        let waiter = self.open.lock().remove(nonce);
        waiter.is_some_and(|tx| tx.send(answered).is_ok())
    }
}

/// Puts `question` to `client` and waits for its answer: the body the admin reads.
pub(crate) async fn ask(client: std::sync::Arc<GrpcClient>, question: ClientQuestion) -> Result<Bytes, PushError> {
    match question {
        ClientQuestion::RunningInfo { jstack, .. } => {
            let jstack = if jstack { Some(print_thread_stack(&client).await?) } else { None };
            Ok(body::to_json(&running_info(&client, jstack)).into())
        }
        ClientQuestion::ConsumeDirectly { record, .. } => verify(&client, &record).await,
    }
}

/// Sends `command` (made with a fresh nonce) and waits for the answer with that nonce.
async fn call(client: &GrpcClient, command: impl FnOnce(String) -> Command) -> Result<Answered, PushError> {
    let Some((nonce, answered)) = client.calls.open() else {
        return Err(PushError::Refused {
            code: resp::SYSTEM_BUSY,
            remark: format!("{MAX_CALLS_PER_CLIENT} questions to this client are already open"),
        });
    };
    if !client.push(command(nonce)) {
        return Err(PushError::Unreached(
            "the client has no Telemetry stream open, or its stream is full".into(),
        ));
    }
    match tokio::time::timeout(CLIENT_CALL_TIMEOUT, answered).await {
        Ok(Ok(answered)) => Ok(answered),
        Ok(Err(_)) => Err(PushError::Unreached("the client's question was dropped".into())),
        Err(_) => Err(PushError::TimedOut(CLIENT_CALL_TIMEOUT)),
    }
}

/// The client's thread stacks, through PrintThreadStackTraceCommand.
async fn print_thread_stack(client: &GrpcClient) -> Result<String, PushError> {
    let answered = call(client, |nonce| {
        Command::PrintThreadStackTraceCommand(pb::PrintThreadStackTraceCommand { nonce })
    })
    .await?;
    refused_unless_ok(answered.status.as_ref(), "print its thread stacks")?;
    Ok(answered.stack_trace.unwrap_or_default())
}

/// Has the client consume `record` through VerifyMessageCommand: what its listener said.
async fn verify(client: &GrpcClient, record: &[u8]) -> Result<Bytes, PushError> {
    let (message, _) = MessageExt::decode(record).map_err(|e| PushError::Unreached(Box::new(e)))?;
    let delivery = Delivery {
        receipt_handle: None,
        invisible_ms: None,
    };
    let message = message_of(&message, &delivery);
    let started = Instant::now();
    let answered = call(client, |nonce| {
        Command::VerifyMessageCommand(pb::VerifyMessageCommand {
            nonce,
            message: Some(message),
        })
    })
    .await?;
    let code = answered
        .status
        .as_ref()
        .map_or(Code::Ok, |s| Code::try_from(s.code).unwrap_or(Code::Unspecified));
    let consume_result = match code {
        Code::Ok => ConsumeResult::Success,
        Code::FailedToConsumeMessage => ConsumeResult::Later,
        Code::MessageCorrupted => ConsumeResult::ReturnNull,
        _ => {
            return Err(refusal(
                answered.status.as_ref(),
                "consume a message directly (only a push consumer does)",
            ));
        }
    };
    let fifo = client
        .settings
        .lock()
        .as_ref()
        .and_then(|s| match &s.pub_sub {
            Some(PubSub::Subscription(sub)) => sub.fifo,
            _ => None,
        })
        .unwrap_or(false);
    let result = ConsumeMessageDirectlyResult {
        order: fifo,
        auto_commit: true,
        consume_result,
        remark: "from gRPC client".into(),
        spent_time_mills: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
    };
    Ok(body::to_json(&result).into())
}

/// SYSTEM_ERROR with the client's own code and message, for any answer but OK.
fn refused_unless_ok(status: Option<&pb::Status>, what: &str) -> Result<(), PushError> {
    match status {
        Some(s) if s.code != Code::Ok as i32 => Err(refusal(status, what)),
        _ => Ok(()),
    }
}

/// SYSTEM_ERROR saying what the client would not do, with its code and message.
fn refusal(status: Option<&pb::Status>, what: &str) -> PushError {
    let (code, message) = status.map_or((0, ""), |s| (s.code, s.message.as_str()));
    PushError::Refused {
        code: resp::SYSTEM_ERROR,
        remark: format!("the client did not {what}: code {code} {message}"),
    }
}

/// What the broker knows of a gRPC consumer, as RocketMQ's admin tools read it.
fn running_info(client: &GrpcClient, jstack: Option<String>) -> ConsumerRunningInfo {
    let settings = client.settings.lock().clone().unwrap_or_default();
    let push = settings.client_type == Some(ClientType::PushConsumer as i32);
    let (fifo, subscription_set) = match &settings.pub_sub {
        Some(PubSub::Subscription(s)) => (
            s.fifo.unwrap_or(false),
            s.subscriptions.iter().map(crate::session::subscription_of).collect(),
        ),
        _ => (false, Vec::new()),
    };
    let mut properties = IndexMap::new();
    let consume_type = if push { "CONSUME_PASSIVELY" } else { "CONSUME_ACTIVELY" };
    properties.insert(keys::CONSUME_TYPE.to_owned(), consume_type.to_owned());
    properties.insert(keys::CLIENT_VERSION.to_owned(), client.version_name());
    properties.insert(keys::CONSUME_ORDERLY.to_owned(), fifo.to_string());
    properties.insert(keys::START_TIMESTAMP.to_owned(), client.started_ms.to_string());
    ConsumerRunningInfo {
        properties,
        subscription_set,
        mq_table: IndexMap::new(),
        status_table: IndexMap::new(),
        jstack,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_has_a_bounded_number_of_questions_and_each_answer_finds_its_own() {
        let calls = Calls::default();
        let mut open: Vec<_> = (0..MAX_CALLS_PER_CLIENT).map(|_| calls.open().expect("room")).collect();
        assert!(calls.open().is_none(), "the bound holds");
        let (nonce, mut rx) = open.remove(3);
        let answered = |trace: &str| Answered {
            status: None,
            stack_trace: Some(trace.into()),
        };
        assert!(calls.answer(&nonce, answered("mine")));
        assert_eq!(rx.try_recv().expect("answered").stack_trace.as_deref(), Some("mine"));
        assert!(!calls.answer(&nonce, answered("again")), "a nonce is answered once");
        assert!(!calls.answer("no-such-nonce", answered("stray")));
        let _refill = calls.open().expect("the answered question's place");
        assert!(calls.open().is_none());
        drop(open.pop());
        assert!(calls.open().is_some(), "a waiter that gave up frees its place");
    }
}
