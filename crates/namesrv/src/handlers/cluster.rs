//! GET_BROKER_CLUSTER_INFO (106).

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::answer;

use super::Origin;
use crate::state::NameServer;

pub(super) fn get(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    answer(request, resp::SUCCESS).with_body(ns.cluster().to_json().into_bytes())
}
