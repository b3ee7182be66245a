//! The one place where a [`BrokerError`] becomes a RocketMQ answer, and the helpers every
//! handler answers with.
//!
//! Owns: the error → response-code table. Must never: answer a refusal with SUCCESS, or invent
//! a remark where RocketMQ's own is known (the services give those).

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::CommandHeader;
use petrel_remoting::{Reply, answer, error};
use petrel_store::StoreError;

use crate::error::BrokerError;

/// The response code RocketMQ uses for `e`.
#[must_use]
pub fn code_of(e: &BrokerError) -> i32 {
    match e {
        BrokerError::BadRequest(_)
        | BrokerError::Internal(_)
        | BrokerError::Io { .. }
        | BrokerError::Corrupt { .. }
        | BrokerError::Persist { .. }
        | BrokerError::Record { .. }
        | BrokerError::Json { .. }
        | BrokerError::Auth(_)
        | BrokerError::Replication(_)
        | BrokerError::NotSupported(_)
        | BrokerError::LimitReached(_)
        | BrokerError::InSyncReplicasNotEnough(_) => resp::SYSTEM_ERROR,
        BrokerError::InvalidParameter(_) => resp::INVALID_PARAMETER,
        BrokerError::MessageIllegal(_) => resp::MESSAGE_ILLEGAL,
        BrokerError::NoPermission(_) => resp::NO_PERMISSION,
        BrokerError::TopicNotExist(_) => resp::TOPIC_NOT_EXIST,
        BrokerError::GroupNotExist(_) => resp::SUBSCRIPTION_GROUP_NOT_EXIST,
        BrokerError::SubscriptionParseFailed(_) => resp::SUBSCRIPTION_PARSE_FAILED,
        BrokerError::ConsumerNotOnline(_) => resp::CONSUMER_NOT_ONLINE,
        BrokerError::QueryNotFound(_) => resp::QUERY_NOT_FOUND,
        // The object store slow or failing: the client retries, as after a busy broker.
        BrokerError::Busy(_) | BrokerError::Tier(_) => resp::SYSTEM_BUSY,
        BrokerError::Unavailable(_) => resp::SERVICE_NOT_AVAILABLE,
        BrokerError::Store(s) => match s {
            StoreError::DiskFull { .. } | StoreError::NotWritable(_) | StoreError::FlushFailed(_) | StoreError::DispatchStuck { .. } => {
                resp::SERVICE_NOT_AVAILABLE
            }
            StoreError::RecordTooLarge { .. } | StoreError::BadRecord(_) => resp::MESSAGE_ILLEGAL,
            StoreError::ReplicaGap { .. } | StoreError::ColdLost { .. } => resp::SYSTEM_ERROR,
            StoreError::FlushTimeout { .. } => resp::FLUSH_DISK_TIMEOUT,
            StoreError::WouldBlock(_) | StoreError::ColdTier { .. } | StoreError::LightTailsFull { .. } => resp::SYSTEM_BUSY,
            StoreError::Io { .. }
            | StoreError::Layout { .. }
            | StoreError::Corrupt { .. }
            | StoreError::DurableDamaged { .. }
            | StoreError::QueueUnavailable { .. }
            | StoreError::LmqQueuesExceeded { .. }
            | StoreError::CheckpointTorn(_) => resp::SYSTEM_ERROR,
        },
    }
}

/// The answer to `request` that reports `e`.
#[must_use]
pub fn from_error(request: &RemotingCommand, e: &BrokerError) -> RemotingCommand {
    error(request, code_of(e), e.to_string())
}

/// SUCCESS with `header` in `extFields`.
#[must_use]
pub fn ok_with<H: CommandHeader>(request: &RemotingCommand, header: &H) -> RemotingCommand {
    answer(request, resp::SUCCESS).with_ext_fields(header.to_ext())
}

/// An answer computed later by `work`; its error is mapped here.
pub fn later<F>(request: RemotingCommand, work: F) -> Reply
where
    F: Future<Output = Result<RemotingCommand, BrokerError>> + Send + 'static,
{
    Reply::Later(Box::pin(async move {
        Some(match work.await {
            Ok(answer) => answer,
            Err(e) => from_error(&request, &e),
        })
    }))
}

/// As [`later`], for work that is heavy after its wait (a long-polling pull reads its messages
/// when woken): not ready at once, it goes on on a task of its own. The connection keeps a
/// waiting answer on its own task, so a consumer's many woken pulls on one connection would
/// otherwise be read one after another there instead of on every worker.
pub fn later_on_own_task<F>(request: RemotingCommand, work: F) -> Reply
where
    F: Future<Output = Result<RemotingCommand, BrokerError>> + Send + 'static,
{
    let Reply::Later(deferred) = later(request, work) else {
        unreachable!("later answers later")
    };
    Reply::Later(Box::pin(OwnTaskIfWaiting::Inline(Some(deferred))))
}

/// Polls a deferred answer in place once; if it waits, moves it to a task and waits for that.
enum OwnTaskIfWaiting {
    Inline(Option<petrel_remoting::Deferred>),
    Spawned(tokio::task::JoinHandle<Option<RemotingCommand>>),
}

impl Future for OwnTaskIfWaiting {
    type Output = Option<RemotingCommand>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        if let OwnTaskIfWaiting::Inline(slot) = &mut *self {
            let mut work = slot.take().expect("an inline answer is polled until it moves");
            if let Poll::Ready(answer) = work.as_mut().poll(cx) {
                return Poll::Ready(answer);
            }
            *self = OwnTaskIfWaiting::Spawned(tokio::spawn(work));
        }
        let OwnTaskIfWaiting::Spawned(handle) = &mut *self else {
            unreachable!("moved to a task above")
        };
        // A task that panicked answers nothing, as a dropped answer would.
        std::pin::Pin::new(handle).poll(cx).map(|joined| joined.unwrap_or(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_the_code_clients_expect() {
        let cases: Vec<(BrokerError, i32)> = vec![
            (BrokerError::topic_not_exist("T"), resp::TOPIC_NOT_EXIST),
            (BrokerError::Busy("x".into()), resp::SYSTEM_BUSY),
            (BrokerError::GroupNotExist("x".into()), resp::SUBSCRIPTION_GROUP_NOT_EXIST),
            (BrokerError::MessageIllegal("x".into()), resp::MESSAGE_ILLEGAL),
            (
                BrokerError::Store(StoreError::DiskFull {
                    path: "p".into(),
                    size_bytes: 1,
                }),
                resp::SERVICE_NOT_AVAILABLE,
            ),
            (BrokerError::LimitReached("x".into()), resp::SYSTEM_ERROR),
        ];
        for (e, code) in cases {
            let request = RemotingCommand::request(310, 7);
            let a = from_error(&request, &e);
            assert_eq!((a.code, a.opaque, a.remark.as_deref()), (code, 7, Some(e.to_string().as_str())));
        }
    }

    #[tokio::test]
    async fn heavy_work_that_waits_goes_on_on_its_own_task() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::task::{Context, Poll, Waker};
        let request = RemotingCommand::request(11, 7);
        // Ready at once: answered in place.
        let Reply::Later(mut ready) = later_on_own_task(request.clone(), async { Ok(answer(&RemotingCommand::request(11, 7), 0)) }) else {
            panic!("a deferred answer")
        };
        assert!(matches!(
            ready.as_mut().poll(&mut Context::from_waker(Waker::noop())),
            Poll::Ready(Some(_))
        ));
        // Waiting: after one poll it runs on a task of its own, which finishes the work even
        // though nobody polls the answer meanwhile.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let Reply::Later(mut waiting) = later_on_own_task(request.clone(), async move {
            rx.await.expect("sent");
            flag.store(true, Ordering::SeqCst);
            Ok(answer(&RemotingCommand::request(11, 7), 0))
        }) else {
            panic!("a deferred answer")
        };
        assert!(waiting.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        tx.send(()).expect("the work waits");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !finished.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "the work did not go on by itself");
            tokio::task::yield_now().await;
        }
        assert_eq!(waiting.await.map(|a| a.opaque), Some(7));
    }
}
