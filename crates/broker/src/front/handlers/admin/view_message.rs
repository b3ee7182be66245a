//! VIEW_MESSAGE_BY_ID (33): the stored record at an offset message id's commit-log offset. The
//! caller must be allowed to read the record's own topic, whatever topic the request names
//! (RocketMQ checks nothing when it names none).

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::ViewMessageRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::{header, later};

pub(crate) fn handle(broker: &Arc<Broker>, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let h = header!(ViewMessageRequestHeader, request);
    let may_read = broker.access.topic_check(conn, &request, crate::access::GET);
    let broker = broker.clone();
    later(request.clone(), async move {
        let record = broker.admin.view_message(h.offset, may_read).await?;
        Ok(answer(&request, resp::SUCCESS).with_body(record))
    })
}
