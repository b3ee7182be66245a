//! DELETE_TOPIC_IN_BROKER (215): the config and the offsets go; stored messages age out.

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::DeleteTopicRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::{header, later};

pub(crate) fn handle(broker: &Arc<Broker>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let h = header!(DeleteTopicRequestHeader, request);
    let broker = broker.clone();
    later(request.clone(), async move {
        broker.topics.delete(&h.topic).await?;
        broker.offsets.remove_topic(&h.topic);
        Ok(answer(&request, resp::SUCCESS))
    })
}
