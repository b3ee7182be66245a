//! GET_ROUTEINFO_BY_TOPIC (105).

use super::Unit;
#[allow(unused_imports, reason = "each file's rules name what they need")]
use crate::access::{self, ROUTES_ARE_PUBLIC, Rule};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, GetRouteInfoRequestHeader};
use petrel_remoting::{answer, error};

use super::Origin;
use crate::state::{NameServer, no_route_remark};

pub(super) fn get(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    let h = match GetRouteInfoRequestHeader::from_command(request) {
        Ok(h) => h,
        Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
    };
    match ns.topic_route(&h.topic) {
        Some(route) => {
            // Standard JSON for clients from V4_9_4 on or when asked; fastjson's bare integer
            // keys otherwise (what the Go client gets from Java).
            let version = if h.accept_standard_json_only == Some(true) {
                i32::MAX
            } else {
                request.version
            };
            answer(request, resp::SUCCESS).with_body(route.to_json(version).into_bytes())
        }
        None => error(request, resp::TOPIC_NOT_EXIST, no_route_remark(&h.topic)),
    }
}

/// This file's requests: each code with its access rule and its handler, registered by one
/// line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::GET_ROUTEINFO_BY_TOPIC,
    rule: Rule::Open(ROUTES_ARE_PUBLIC),
    handle: get,
}];
