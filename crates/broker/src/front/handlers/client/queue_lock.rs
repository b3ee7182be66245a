//! LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): an orderly consumer's hold on its queues.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;
use std::time::Instant;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, LockBatchRequestBody, LockBatchResponseBody, MessageQueue};
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;
use crate::services::queue_locks::QueueRef;

fn request_body(request: &RemotingCommand) -> Result<LockBatchRequestBody, BrokerError> {
    body::from_json(&request.body).map_err(|e| BrokerError::BadRequest(format!("bad lock request body: {e}")))
}

/// The wire's queues as the lock service names them.
fn queues(wire: &[MessageQueue]) -> Vec<QueueRef> {
    wire.iter()
        .map(|mq| QueueRef {
            topic: mq.topic.clone(),
            broker_name: mq.broker_name.clone(),
            queue_id: mq.queue_id,
        })
        .collect()
}

fn wire_queue(q: QueueRef) -> MessageQueue {
    MessageQueue {
        broker_name: q.broker_name,
        queue_id: q.queue_id,
        topic: q.topic,
    }
}

/// Answers the queues the client now holds (`lockOKMQSet`), a subset of those it asked for.
pub(crate) fn lock<C: QueueLocks>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let granted = request_body(&request).and_then(|b| {
        ctx.queue_locks()
            .lock(&b.consumer_group, &b.client_id, &queues(&b.mq_set), Instant::now())
    });
    Reply::Now(match granted {
        Ok(granted) => {
            let lock_ok_mq_set = granted.into_iter().map(wire_queue).collect();
            answer(&request, resp::SUCCESS).with_body(body::to_json(&LockBatchResponseBody { lock_ok_mq_set }))
        }
        Err(e) => from_error(&request, &e),
    })
}

/// Releases the queues the client holds among those named; SUCCESS either way.
pub(crate) fn unlock<C: QueueLocks>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let released = request_body(&request).and_then(|b| ctx.queue_locks().unlock(&b.consumer_group, &b.client_id, &queues(&b.mq_set)));
    Reply::Now(match released {
        Ok(_) => answer(&request, resp::SUCCESS),
        Err(e) => from_error(&request, &e),
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::LOCK_BATCH_MQ,
        rule: Rule::Custom(queue_lock),
        handle: &Typed::new(lock::<Broker>),
    },
    Unit {
        code: rc::UNLOCK_BATCH_MQ,
        rule: Rule::Custom(queue_lock),
        handle: &Typed::new(unlock::<Broker>),
    },
];
