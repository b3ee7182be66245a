//! GET_BROKER_CLUSTER_INFO (106).

use super::Unit;
#[allow(unused_imports, reason = "each file's rules name what they need")]
use crate::access::{self, ROUTES_ARE_PUBLIC, Rule};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::answer;

use super::Origin;
use crate::state::NameServer;

pub(super) fn get(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    answer(request, resp::SUCCESS).with_body(ns.cluster().to_json().into_bytes())
}

/// This file's requests: each code with its access rule and its handler, registered by one
/// line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::GET_BROKER_CLUSTER_INFO,
    rule: Rule::Open(ROUTES_ARE_PUBLIC),
    handle: get,
}];
