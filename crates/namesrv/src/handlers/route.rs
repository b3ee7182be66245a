//! GET_ROUTEINFO_BY_TOPIC (105).

use petrel_protocol::RemotingCommand;
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
