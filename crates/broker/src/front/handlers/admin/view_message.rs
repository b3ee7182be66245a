//! VIEW_MESSAGE_BY_ID (33): the stored record at an offset message id's commit-log offset.

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::ViewMessageRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::{header, later};

pub(crate) fn handle(broker: &Arc<Broker>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let h = header!(ViewMessageRequestHeader, request);
    let broker = broker.clone();
    later(request.clone(), async move {
        let record = broker.admin.view_message(h.offset).await?;
        Ok(answer(&request, resp::SUCCESS).with_body(record))
    })
}
