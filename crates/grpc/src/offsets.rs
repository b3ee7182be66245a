//! GetOffset, UpdateOffset, QueryOffset and PullMessage: a consumer group's committed offsets
//! and a queue's bounds, through the broker's offset service. RocketMQ's proxy leaves these
//! unanswered and no SDK of today calls them; the broker answers the offset ones and refuses
//! PullMessage with NOT_IMPLEMENTED.

use tonic::Request;

use crate::access;
use crate::convert::{resource_name, timestamp_ms};
use crate::front::GrpcFront;
use crate::pb::{self, Code, QueryOffsetPolicy, pull_message_response::Content};
use crate::status::{Refusal, ok, status};

fn queue_of(q: Option<&pb::MessageQueue>) -> (String, i32) {
    q.map_or_else(|| (String::new(), 0), |q| (resource_name(q.topic.as_ref()), q.id))
}

/// GetOffset: the group's committed offset of the queue.
pub(crate) fn get(front: &GrpcFront, r: Request<pb::GetOffsetRequest>) -> pb::GetOffsetResponse {
    let caller = front.caller(&r);
    let found = caller.and_then(|caller| {
        let req = r.into_inner();
        let (topic, queue_id) = queue_of(req.message_queue.as_ref());
        let group = resource_name(req.group.as_ref());
        front.authorize(&caller, &[access::topic(&topic, access::SUB), access::group(&group, access::SUB)])?;
        front
            .broker
            .offsets
            .query(&group, &topic, queue_id)
            .ok_or_else(|| Refusal::new(Code::OffsetNotFound, format!("{group} has no offset in {topic} queue {queue_id}")))
    });
    match found {
        Ok(offset) => pb::GetOffsetResponse {
            status: Some(ok()),
            offset,
        },
        Err(e) => pb::GetOffsetResponse {
            status: Some(e.status()),
            offset: 0,
        },
    }
}

/// UpdateOffset: commits the group's offset of the queue.
pub(crate) fn update(front: &GrpcFront, r: Request<pb::UpdateOffsetRequest>) -> pb::UpdateOffsetResponse {
    let caller = front.caller(&r);
    let done = caller.and_then(|caller| {
        let req = r.into_inner();
        let (topic, queue_id) = queue_of(req.message_queue.as_ref());
        let group = resource_name(req.group.as_ref());
        front.authorize(&caller, &[access::topic(&topic, access::SUB), access::group(&group, access::SUB)])?;
        if req.offset < 0 {
            return Err(Refusal::new(Code::IllegalOffset, format!("offset {} is negative", req.offset)));
        }
        front
            .broker
            .offsets
            .commit(&resource_name(req.group.as_ref()), &topic, queue_id, req.offset)?;
        Ok(())
    });
    pb::UpdateOffsetResponse {
        status: Some(done.map_or_else(|e| e.status(), |()| ok())),
    }
}

/// QueryOffset: a queue's first or next offset, or the first stored at or after a time (that
/// lookup reads the disk, so it runs on the store pool, off the runtime).
pub(crate) async fn query(front: &GrpcFront, r: Request<pb::QueryOffsetRequest>) -> pb::QueryOffsetResponse {
    let found = async {
        let caller = front.caller(&r)?;
        let req = r.into_inner();
        let (topic, queue_id) = queue_of(req.message_queue.as_ref());
        front.authorize(&caller, &[access::topic(&topic, access::SUB)])?;
        crate::route::topic_config(front, &topic)?;
        let store = front.broker.store.clone();
        let (min, max) = store.queue_offsets(&topic, queue_id);
        Ok::<i64, Refusal>(match QueryOffsetPolicy::try_from(req.query_offset_policy) {
            Ok(QueryOffsetPolicy::End) => max,
            Ok(QueryOffsetPolicy::Timestamp) => {
                let at = req.timestamp.as_ref().map_or(0, timestamp_ms);
                let lookup = move || store.offset_by_time(&topic, queue_id, at, petrel_store::Boundary::Lower);
                front.broker.pool.run(lookup)?.await?
            }
            _ => min,
        })
    };
    match found.await {
        Ok(offset) => pb::QueryOffsetResponse {
            status: Some(ok()),
            offset,
        },
        Err(e) => pb::QueryOffsetResponse {
            status: Some(e.status()),
            offset: 0,
        },
    }
}

/// PullMessage: not served (no SDK pulls over gRPC today).
pub(crate) async fn pull(_front: &GrpcFront, _r: Request<pb::PullMessageRequest>) -> Vec<pb::PullMessageResponse> {
    vec![pb::PullMessageResponse {
        content: Some(Content::Status(status(
            Code::NotImplemented,
            "PullMessage is not supported; use ReceiveMessage",
        ))),
    }]
}
