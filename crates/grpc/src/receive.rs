//! ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue:
//! RocketMQ 5's consumption, served by the broker's POP service — the same pops, acks and
//! invisible times a remoting POP consumer gets, so both protocols share one group's state.

use std::sync::Arc;
use std::time::Duration;

use petrel_broker::services::any_topic;
use petrel_broker::services::pop::{MAX_INVISIBLE_TIME_MS, MAX_POP_BATCH, MAX_POP_POLL, PopRequest};
use petrel_broker::services::produce::{RetryPolicy, SendBackRequest};
use petrel_protocol::message::{MessageExt, decode_messages};
use petrel_store::MessageFilter;
use tonic::Request;

use crate::access;
use crate::convert::{Delivery, duration_ms, message_of, resource_name, timestamp};
use crate::front::{Caller, GrpcFront};
use crate::pb::{self, Code, FilterType, receive_message_response::Content};
use crate::receipt::ReceiptHandle;
use crate::renew::HeldGuard;
use crate::status::{Refusal, ok, status};
use petrel_kit::clock::now_ms;

/// ReceiveMessage: a status, then the messages, then the time of delivery; and, for a receive
/// with `auto_renew`, the guard of the messages it put on hold, to be marked written once the
/// answer is.
pub(crate) async fn receive(
    front: &GrpcFront,
    r: Request<pb::ReceiveMessageRequest>,
) -> (Vec<pb::ReceiveMessageResponse>, Option<HeldGuard>) {
    let content = |c| pb::ReceiveMessageResponse { content: Some(c) };
    let (mut out, guard) = match pop(front, r).await {
        Ok((messages, _)) if messages.is_empty() => (
            vec![content(Content::Status(status(Code::MessageNotFound, "no new message")))],
            None,
        ),
        Ok((messages, guard)) => (
            std::iter::once(content(Content::Status(ok())))
                .chain(messages.into_iter().map(|m| content(Content::Message(m))))
                .collect(),
            guard,
        ),
        Err(e) => (vec![content(Content::Status(e.status()))], None),
    };
    out.push(content(Content::DeliveryTimestamp(timestamp(now_ms()))));
    (out, guard)
}

async fn pop(front: &GrpcFront, r: Request<pb::ReceiveMessageRequest>) -> Result<(Vec<pb::Message>, Option<HeldGuard>), Refusal> {
    let caller = front.caller(&r)?;
    let deadline = call_deadline(&r);
    let broker = &front.broker;
    let req = r.into_inner();
    let group = resource_name(req.group.as_ref());
    let queue = req.message_queue.unwrap_or_default();
    let topic = resource_name(queue.topic.as_ref());
    if group.is_empty() {
        return Err(Refusal::new(Code::IllegalConsumerGroup, "consumer group is empty"));
    }
    front.authorize(&caller, &consuming(&topic, &group))?;
    let invisible_ms = match req.invisible_duration.as_ref() {
        // The broker keeps the message invisible while the client is connected (crate::renew).
        _ if req.auto_renew => i64::try_from(front.renew.invisible.as_millis()).unwrap_or(i64::MAX),
        Some(d) => duration_ms(d)
            .filter(|ms| (1..=MAX_INVISIBLE_TIME_MS).contains(ms))
            .ok_or_else(|| {
                Refusal::new(
                    Code::IllegalInvisibleTime,
                    format!("invisible duration must be 1 ms to {MAX_INVISIBLE_TIME_MS} ms"),
                )
            })?,
        None => return Err(Refusal::new(Code::IllegalInvisibleTime, "invisible duration is missing")),
    };
    let poll = match req.long_polling_timeout.as_ref().and_then(duration_ms) {
        Some(ms) => Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)).min(MAX_POP_POLL)),
        // No long-polling time named (the Go SDK names none): held until the call's deadline, as
        // RocketMQ's proxy holds it. Answered at once, an empty receive sets such a client
        // spinning, and the Go SDK then reports some of its fast answers as DEADLINE_EXCEEDED.
        None => deadline.map(|d| d.min(MAX_POP_POLL)),
    }
    // Answered before the client gives up on the call: some SDKs (Rust's) make the long polling
    // time the call's whole deadline.
    .map(|poll| deadline.map_or(poll, |d| poll.min(d.saturating_sub(answer_margin(d)))));
    let filter = filter_of(front, &topic, req.filter_expression.as_ref())?;
    let orderly = broker.groups.config(&group).consume_message_orderly || caller.client.settings.lock().as_ref().is_some_and(is_fifo);
    // A receive that may be held counts against its client's share of the held pulls.
    let _place = broker.quotas.long_polls.take(Some(caller.peer.ip()))?;
    let popped = broker
        .pop
        .pop(PopRequest {
            group: group.clone(),
            topic: topic.clone(),
            // Any queue of this broker, as RocketMQ's proxy pops: a SimpleConsumer names route
            // queues in turn, and popping only the one named would leave a message in another
            // queue waiting for its turn. An orderly pop still holds each queue on its own.
            queue_id: crate::route::ANY_QUEUE,
            max_msgs: usize::try_from(req.batch_size).unwrap_or(1).clamp(1, MAX_POP_BATCH),
            invisible_time_ms: invisible_ms,
            poll,
            init_at_end: false,
            filter,
            orderly,
        })
        .await?;
    let records = decode_messages(&popped.body).map_err(|e| Refusal::new(Code::InternalServerError, e.to_string()))?;
    let max_attempts = max_attempts(front, &caller.client, &group);
    let mut out = Vec::with_capacity(records.len());
    // Created before the first hold: a receive dropped from here on gives back what it held.
    let mut guard = req.auto_renew.then(|| HeldGuard::new(caller.client.clone(), front.broker.clone()));
    for m in records {
        let handle = ReceiptHandle {
            pop_time_ms: popped.pop_time_ms,
            invisible_ms,
            broker_name: broker.config.broker_name.clone(),
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            commit_log_offset: m.commit_log_offset,
        };
        if m.reconsume_times >= max_attempts {
            // Delivered as often as the group allows: to its dead-letter queue, not to the client.
            dead_letter(front, &group, &m, &handle).await;
            continue;
        }
        let given = handle.encode();
        if let Some(guard) = guard.as_mut()
            && !guard.hold(given.clone(), &group, &topic, handle)
        {
            tracing::debug!(client = %caller.client.client_id, "too many messages held; this one keeps its invisible time");
        }
        let delivery = Delivery {
            receipt_handle: Some(given),
            invisible_ms: Some(invisible_ms),
        };
        out.push(message_of(&m, &delivery));
    }
    Ok((out, guard))
}

/// The call's deadline, from its `grpc-timeout` metadata (`<digits><unit>`, units H M S m u n).
fn call_deadline<T>(r: &Request<T>) -> Option<Duration> {
    let text = r.metadata().get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Time kept back from a call's deadline for the answer to reach the client: a tenth of it,
/// between 100 ms and 1 s.
fn answer_margin(deadline: Duration) -> Duration {
    (deadline / 10).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

fn is_fifo(settings: &pb::Settings) -> bool {
    matches!(&settings.pub_sub, Some(pb::settings::PubSub::Subscription(s)) if s.fifo == Some(true))
}

/// Deliveries a message of `group` gets before its dead-letter queue: the client's settings
/// say (from the broker's answer to them), else the group's `retryMaxTimes` + 1.
fn max_attempts(front: &GrpcFront, client: &crate::clients::GrpcClient, group: &str) -> i32 {
    let from_settings = client
        .settings
        .lock()
        .as_ref()
        .and_then(|s| s.backoff_policy.as_ref())
        .map(|b| b.max_attempts)
        .filter(|n| *n > 0);
    from_settings.unwrap_or_else(|| front.broker.groups.config(group).retry_max_times.saturating_add(1))
}

fn filter_of(front: &GrpcFront, topic: &str, expression: Option<&pb::FilterExpression>) -> Result<Option<Arc<dyn MessageFilter>>, Refusal> {
    let (kind, text) = match expression {
        Some(e) if FilterType::try_from(e.r#type) == Ok(FilterType::Sql) => ("SQL92", e.expression.as_str()),
        Some(e) if !e.expression.is_empty() => ("TAG", e.expression.as_str()),
        _ => ("TAG", "*"),
    };
    let filter = front
        .broker
        .consume
        .filter_for(topic, kind, text, 0)
        .map_err(|e| Refusal::new(Code::IllegalFilterExpression, e.to_string()))?;
    Ok(filter.map(|f| Arc::new(f) as Arc<dyn MessageFilter>))
}

/// What consuming `topic` as `group` needs.
fn consuming(topic: &str, group: &str) -> [petrel_auth::Check; 2] {
    [access::topic(topic, access::SUB), access::group(group, access::SUB)]
}

/// A handle that names a message still in flight: parsed and not expired.
fn live_handle(text: &str) -> Result<ReceiptHandle, Refusal> {
    let handle = ReceiptHandle::decode(text)?;
    if handle.visible_at_ms() <= now_ms() {
        return Err(Refusal::new(Code::InvalidReceiptHandle, "receipt handle is expired"));
    }
    Ok(handle)
}

/// The handle naming a message's invisible time now: the latest renewal's when the broker
/// kept it invisible for the client (which then stops), else the given one, if still live.
fn current_handle(caller: &Caller, given: &str) -> Result<ReceiptHandle, Refusal> {
    match caller.client.renewals.release(given) {
        Some(current) => Ok(current),
        None => live_handle(given),
    }
}

/// AckMessage: one result per entry.
pub(crate) fn ack(front: &GrpcFront, r: Request<pb::AckMessageRequest>) -> pb::AckMessageResponse {
    let caller = front.caller(&r);
    let req = r.into_inner();
    let (group, topic) = (resource_name(req.group.as_ref()), resource_name(req.topic.as_ref()));
    let caller = match caller.and_then(|c| front.authorize(&c, &consuming(&topic, &group)).map(|()| c)) {
        Ok(caller) => caller,
        Err(e) => {
            return pb::AckMessageResponse {
                status: Some(e.status()),
                entries: Vec::new(),
            };
        }
    };
    let entries: Vec<pb::AckMessageResultEntry> = req
        .entries
        .into_iter()
        .map(|e| {
            let acked = current_handle(&caller, &e.receipt_handle).map(|h| {
                if !front.broker.pop.ack(&group, &topic, h.queue_id, h.queue_offset, h.pop_time_ms) {
                    tracing::debug!(%group, %topic, queue = h.queue_id, offset = h.queue_offset, "ack of a receive no longer in flight");
                }
            });
            pb::AckMessageResultEntry {
                message_id: e.message_id,
                receipt_handle: e.receipt_handle,
                status: Some(acked.map_or_else(|e| e.status(), |()| ok())),
            }
        })
        .collect();
    pb::AckMessageResponse {
        status: Some(overall(entries.iter().map(|e| e.status.as_ref()))),
        entries,
    }
}

/// The status of a request with several results: theirs when they agree, else MULTIPLE_RESULTS.
fn overall<'a>(statuses: impl Iterator<Item = Option<&'a pb::Status>>) -> pb::Status {
    let mut first: Option<&pb::Status> = None;
    for s in statuses.flatten() {
        match first {
            None => first = Some(s),
            Some(f) if f.code != s.code => return status(Code::MultipleResults, "the entries' results differ; see each"),
            Some(_) => {}
        }
    }
    first.cloned().unwrap_or_else(ok)
}

/// ChangeInvisibleDuration: the message becomes visible after the new duration; the answer's
/// handle replaces the old one.
pub(crate) fn change_invisible(front: &GrpcFront, r: Request<pb::ChangeInvisibleDurationRequest>) -> pb::ChangeInvisibleDurationResponse {
    let caller = front.caller(&r);
    let changed = caller.and_then(|caller| {
        let req = r.into_inner();
        front.authorize(
            &caller,
            &consuming(&resource_name(req.topic.as_ref()), &resource_name(req.group.as_ref())),
        )?;
        let invisible_ms = req
            .invisible_duration
            .as_ref()
            .and_then(duration_ms)
            .filter(|ms| *ms <= MAX_INVISIBLE_TIME_MS)
            .ok_or_else(|| {
                Refusal::new(
                    Code::IllegalInvisibleTime,
                    format!("invisible duration must be 0 to {MAX_INVISIBLE_TIME_MS} ms"),
                )
            })?;
        // The client takes the message's timing back: no more renewals.
        let handle = current_handle(&caller, &req.receipt_handle)?;
        let (group, topic) = (resource_name(req.group.as_ref()), resource_name(req.topic.as_ref()));
        let pop_time_ms = front
            .broker
            .pop
            .change_invisible_time(
                &group,
                &topic,
                handle.queue_id,
                handle.queue_offset,
                handle.pop_time_ms,
                invisible_ms,
            )
            .map_err(|e| Refusal::new(Code::InvalidReceiptHandle, e.to_string()))?;
        Ok(ReceiptHandle {
            pop_time_ms,
            invisible_ms,
            ..handle
        })
    });
    match changed {
        Ok(handle) => pb::ChangeInvisibleDurationResponse {
            status: Some(ok()),
            receipt_handle: handle.encode(),
        },
        Err(e) => pb::ChangeInvisibleDurationResponse {
            status: Some(e.status()),
            receipt_handle: String::new(),
        },
    }
}

/// ForwardMessageToDeadLetterQueue: the message goes to `%DLQ%<group>` and leaves the queue.
pub(crate) async fn forward_to_dlq(
    front: &GrpcFront,
    r: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
) -> pb::ForwardMessageToDeadLetterQueueResponse {
    let forwarded = async {
        let caller = front.caller(&r)?;
        let req = r.into_inner();
        let group = resource_name(req.group.as_ref());
        front.authorize(&caller, &consuming(&resource_name(req.topic.as_ref()), &group))?;
        // Still renewed until it is in the DLQ: a failed forward leaves it as it was.
        let handle = match caller.client.renewals.current(&req.receipt_handle) {
            Some(current) => current,
            None => ReceiptHandle::decode(&req.receipt_handle)?,
        };
        send_to_dlq(front, &group, handle.commit_log_offset).await?;
        let handle = caller.client.renewals.release(&req.receipt_handle).unwrap_or(handle);
        let topic = resource_name(req.topic.as_ref());
        if !front
            .broker
            .pop
            .ack(&group, &topic, handle.queue_id, handle.queue_offset, handle.pop_time_ms)
        {
            tracing::debug!(%group, %topic, queue = handle.queue_id, offset = handle.queue_offset, "a forwarded message was no longer in flight");
        }
        Ok::<(), Refusal>(())
    };
    pb::ForwardMessageToDeadLetterQueueResponse {
        status: Some(forwarded.await.map_or_else(|e| e.status(), |()| ok())),
    }
}

async fn send_to_dlq(front: &GrpcFront, group: &str, commit_log_offset: i64) -> Result<(), Refusal> {
    let config = front.broker.groups.config(group);
    let back = SendBackRequest {
        offset: commit_log_offset,
        may_read: any_topic(),
        group: group.to_owned(),
        delay_level: -1,
        max_reconsume_times: None,
    };
    let policy = RetryPolicy {
        retry_max_times: config.retry_max_times,
        retry_queue_nums: config.retry_queue_nums,
    };
    front.broker.produce.send_back(back, policy).await?;
    Ok(())
}

/// A popped message that was delivered as often as allowed: stored in the group's DLQ and
/// acked; if the DLQ refuses it, it stays in flight and comes back later.
async fn dead_letter(front: &GrpcFront, group: &str, m: &MessageExt, handle: &ReceiptHandle) {
    match send_to_dlq(front, group, m.commit_log_offset).await {
        Ok(()) => {
            front
                .broker
                .pop
                .ack(group, &m.topic, handle.queue_id, handle.queue_offset, handle.pop_time_ms);
        }
        Err(e) => {
            tracing::warn!(%group, topic = %m.topic, offset = m.queue_offset, error = %e.message, "could not move to the dead-letter queue")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_deadline_reads_in_every_unit_and_keeps_a_margin() {
        let with = |v: &str| {
            let mut r = Request::new(());
            r.metadata_mut().insert("grpc-timeout", v.parse().expect("ascii"));
            call_deadline(&r)
        };
        assert_eq!(with("5000m"), Some(Duration::from_secs(5)));
        assert_eq!(with("2S"), Some(Duration::from_secs(2)));
        assert_eq!(with("1M"), Some(Duration::from_secs(60)));
        assert_eq!(with("7u"), Some(Duration::from_micros(7)));
        assert_eq!(with("x"), None);
        assert_eq!(with("5q"), None);
        assert_eq!(call_deadline(&Request::new(())), None);
        assert_eq!(answer_margin(Duration::from_secs(5)), Duration::from_millis(500));
        assert_eq!(answer_margin(Duration::from_secs(60)), Duration::from_secs(1));
        assert_eq!(answer_margin(Duration::from_millis(300)), Duration::from_millis(100));
    }
}
