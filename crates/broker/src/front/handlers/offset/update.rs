//! UPDATE_CONSUMER_OFFSET (15). The queue must be one of the topic's: RocketMQ takes any queue
//! id, and each one stays in the offset table for good.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::UpdateConsumerOffsetRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn handle<C: Offsets + Topics>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    h: UpdateConsumerOffsetRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let Some(topic) = ctx.topics().get(&h.topic) else {
        let e = BrokerError::TopicNotExist(format!("Topic {} not exist!", h.topic));
        return Reply::Now(from_error(&request, &e));
    };
    // An offset for a queue the topic lacks would sit in the offset table (and its file) forever.
    let queues = topic.read_queue_nums.max(topic.write_queue_nums);
    if h.queue_id < 0 || h.queue_id >= queues {
        let e = BrokerError::InvalidParameter(format!(
            "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
            h.queue_id,
            h.topic,
            topic.read_queue_nums,
            conn.peer()
        ));
        return Reply::Now(from_error(&request, &e));
    }
    Reply::Now(
        match ctx.offsets().commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset) {
            Ok(()) => answer(&request, resp::SUCCESS),
            Err(e) => from_error(&request, &e),
        },
    )
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::UPDATE_CONSUMER_OFFSET,
    rule: Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB_UPDATE))),
    handle: &Typed::new(handle::<Broker>),
}];
