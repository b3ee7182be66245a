//! CHECK_CLIENT_CONFIG (46): a consumer checks its subscription before it starts. TAG is always
//! accepted; SQL92 compiles when `enablePropertyFilter` is on (else SYSTEM_ERROR), and one that
//! does not compile gets SUBSCRIPTION_PARSE_FAILED with the reason, so `start()` fails there.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

pub(crate) fn handle<C: Consume>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let body: serde_json::Value = match body::from_json(&request.body) {
        Ok(b) => b,
        Err(e) => {
            let e = BrokerError::BadRequest(format!("bad CHECK_CLIENT_CONFIG body: {e}"));
            return Reply::Now(from_error(&request, &e));
        }
    };
    let subscription = &body["subscriptionData"];
    let expression_type = subscription["expressionType"].as_str().unwrap_or("TAG");
    if expression_type.is_empty() || expression_type.eq_ignore_ascii_case("TAG") {
        return Reply::Now(answer(&request, resp::SUCCESS));
    }
    let expression = subscription["subString"].as_str().unwrap_or_default();
    match ctx.consume().selector(expression_type, expression) {
        Ok(_) => Reply::Now(answer(&request, resp::SUCCESS)),
        Err(e) => Reply::Now(from_error(&request, &e)),
    }
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::CHECK_CLIENT_CONFIG,
    rule: Rule::Custom(check_client_config),
    handle: &Typed::new(handle::<Broker>),
}];
