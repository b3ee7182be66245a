//! UPDATE_CONSUMER_OFFSET (15).

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::UpdateConsumerOffsetRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::{from_error, header};

pub(crate) fn handle(broker: &Arc<Broker>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let h = header!(UpdateConsumerOffsetRequestHeader, request);
    if broker.topics.get(&h.topic).is_none() {
        let e = BrokerError::TopicNotExist(format!("Topic {} not exist!", h.topic));
        return Reply::Now(from_error(&request, &e));
    }
    Reply::Now(
        match broker.offsets.commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset) {
            Ok(()) => answer(&request, resp::SUCCESS),
            Err(e) => from_error(&request, &e),
        },
    )
}
