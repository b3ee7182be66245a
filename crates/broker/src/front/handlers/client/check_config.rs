//! CHECK_CLIENT_CONFIG (46): TAG subscriptions are accepted, SQL92 is refused.

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn handle(_broker: &Arc<Broker>, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    let body: serde_json::Value = match body::from_json(&request.body) {
        Ok(b) => b,
        Err(e) => {
            let e = BrokerError::BadRequest(format!("bad CHECK_CLIENT_CONFIG body: {e}"));
            return Reply::Now(from_error(&request, &e));
        }
    };
    let expression_type = body["subscriptionData"]["expressionType"].as_str().unwrap_or("TAG");
    if !expression_type.eq_ignore_ascii_case("TAG") {
        let e = BrokerError::NotSupported("The broker does not support consumer to filter message by SQL92".into());
        return Reply::Now(from_error(&request, &e));
    }
    Reply::Now(answer(&request, resp::SUCCESS))
}
