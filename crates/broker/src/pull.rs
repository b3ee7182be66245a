//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): subscription resolution, tag filtering,
//! RocketMQ's status → response-code table, long polling, and the offset commit piggy-backed
//! on a pull.
//!
//! Owns: answering pulls. Must never: hold a pull past its `suspendTimeoutMillis` (the client
//! gives up at 30 s), or commit the piggy-backed offset twice (only on the first look).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{SubscriptionData, perm};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader, pull_sys_flag};
use petrel_store::GetStatus;

use crate::broker::{Broker, answer, error};
use crate::server::Reply;

/// Messages one pull returns at most, whatever the client asks (`maxTransferCountOnMessageInMemory`).
pub const MAX_MSGS_PER_PULL: usize = 32;
/// Longest hold; a client that asks for more would time out before the answer.
pub const MAX_SUSPEND: Duration = Duration::from_secs(25);

impl Broker {
    pub(crate) fn pull(self: &Arc<Self>, request: RemotingCommand) -> Reply {
        let h = match PullMessageRequestHeader::from_command(&request) {
            Ok(h) => h,
            Err(e) => return Reply::Now(error(&request, resp::SYSTEM_ERROR, e.to_string())),
        };
        let Some(topic) = self.topics.get(&h.topic) else {
            return Reply::Now(error(
                &request,
                resp::TOPIC_NOT_EXIST,
                format!(
                    "topic[{}] not exist, apply first please! https://rocketmq.apache.org/docs/bestPractice/06FAQ",
                    h.topic
                ),
            ));
        };
        if topic.perm & perm::READ == 0 {
            return Reply::Now(error(
                &request,
                resp::NO_PERMISSION,
                format!("the topic[{}] pulling message is forbidden", h.topic),
            ));
        }
        if h.queue_id < 0 || h.queue_id >= topic.read_queue_nums {
            return Reply::Now(error(
                &request,
                resp::INVALID_PARAMETER,
                format!(
                    "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                    h.queue_id, h.topic, topic.read_queue_nums
                ),
            ));
        }
        let subscription = match self.resolve_subscription(&h) {
            Ok(s) => s,
            Err((code, remark)) => return Reply::Now(error(&request, code, remark)),
        };
        if h.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0 {
            self.offsets.commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
        }
        let tag_codes: Option<Vec<i64>> = (!subscription.is_all()).then(|| subscription.code_set.iter().map(|c| *c as i64).collect());
        let response = self.read_queue(&request, &h, tag_codes.as_deref());
        let may_suspend = h.sys_flag & pull_sys_flag::SUSPEND != 0;
        if response.code != resp::PULL_NOT_FOUND || !may_suspend {
            return Reply::Now(response);
        }
        let hold = if self.config.long_polling_enable {
            Duration::from_millis(h.suspend_timeout_millis.max(0) as u64).min(MAX_SUSPEND)
        } else {
            Duration::from_millis(self.config.short_polling_time_ms)
        };
        let broker = self.clone();
        Reply::Later(Box::pin(async move {
            let offset = h.queue_offset;
            let (topic, queue_id) = (h.topic.clone(), h.queue_id);
            broker
                .long_poll
                .wait(&topic, queue_id, hold, || broker.store.queue_offsets(&topic, queue_id).1 > offset)
                .await;
            Some(broker.read_queue(&request, &h, tag_codes.as_deref()))
        }))
    }

    /// The subscription to filter by: the request's own (SUBSCRIPTION bit), else the one the
    /// group registered by heartbeat, else everything (the client filters by tag again).
    fn resolve_subscription(&self, h: &PullMessageRequestHeader) -> Result<SubscriptionData, (i32, String)> {
        let expression_type = h.expression_type.as_deref().unwrap_or("TAG");
        if h.sys_flag & pull_sys_flag::SUBSCRIPTION != 0 {
            if !expression_type.eq_ignore_ascii_case("TAG") {
                return Err((
                    resp::SYSTEM_ERROR,
                    "The broker does not support consumer to filter message by SQL92".into(),
                ));
            }
            return Ok(SubscriptionData::from_tag_expression(
                &h.topic,
                h.subscription.as_deref().unwrap_or("*"),
                h.sub_version,
            ));
        }
        match self.clients.subscription(&h.consumer_group, &h.topic) {
            Some(s) if !s.expression_type.eq_ignore_ascii_case("TAG") => Err((
                resp::SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92".into(),
            )),
            Some(s) => Ok(s),
            None => Ok(SubscriptionData::from_tag_expression(
                &h.topic,
                h.subscription.as_deref().unwrap_or("*"),
                0,
            )),
        }
    }

    /// One look at the queue, answered with RocketMQ's codes.
    fn read_queue(&self, request: &RemotingCommand, h: &PullMessageRequestHeader, tag_codes: Option<&[i64]>) -> RemotingCommand {
        let max = (h.max_msg_nums.max(1) as usize).min(MAX_MSGS_PER_PULL);
        let got = self.store.get_messages(&h.topic, h.queue_id, h.queue_offset, max, tag_codes);
        let code = match got.status {
            GetStatus::Found => resp::SUCCESS,
            GetStatus::NoMatchedMessage => resp::PULL_RETRY_IMMEDIATELY,
            GetStatus::NoMatchedLogicQueue | GetStatus::NoMessageInQueue => {
                if h.queue_offset != 0 {
                    resp::PULL_OFFSET_MOVED
                } else {
                    resp::PULL_NOT_FOUND
                }
            }
            GetStatus::OffsetOverflowOne => resp::PULL_NOT_FOUND,
            GetStatus::OffsetOverflowBadly | GetStatus::OffsetTooSmall => resp::PULL_OFFSET_MOVED,
        };
        let header = PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: got.next_begin_offset,
            min_offset: got.min_offset,
            max_offset: got.max_offset,
            offset_delta: None,
            topic_sys_flag: Some(0),
            group_sys_flag: Some(0),
            forbidden_type: None,
        };
        if code == resp::SUCCESS {
            self.stats.got_messages.fetch_add(got.messages.len() as u64, Ordering::Relaxed);
            self.offsets
                .record_pull(&h.consumer_group, &h.topic, h.queue_id, got.next_begin_offset);
        }
        let body: Vec<u8> = got.messages.concat();
        answer(request, code)
            .with_remark(got.status.name())
            .with_ext_fields(header.to_ext())
            .with_body(body)
    }
}
