//! GET_BROKER_CONFIG (26): every setting as `key=value` lines, and the topic table's version.

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;

pub(crate) fn handle(broker: &Arc<Broker>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let (properties, version) = broker.admin.broker_config();
    let mut r = answer(&request, resp::SUCCESS).with_body(properties);
    r.put_ext("version", body::to_json(&version));
    Reply::Now(r)
}
