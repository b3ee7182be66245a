//! REGISTER_BROKER (103) and UNREGISTER_BROKER (104).

use super::Unit;
#[allow(unused_imports, reason = "each file's rules name what they need")]
use crate::access::{self, ROUTES_ARE_PUBLIC, Rule};
use petrel_protocol::body::{RegisterBrokerBody, from_json, register_body_crc32};
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader};
use petrel_protocol::{ExtFields, RemotingCommand};
use petrel_remoting::{answer, error};

use super::Origin;
use crate::state::{NameServer, Registration};

pub(super) fn register(ns: &NameServer, request: &RemotingCommand, origin: Origin) -> RemotingCommand {
    let h = match RegisterBrokerRequestHeader::from_command(request) {
        Ok(h) => h,
        Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
    };
    if let Some(crc) = h.body_crc32.filter(|c| *c != 0)
        && crc != register_body_crc32(&request.body)
    {
        return error(request, resp::SYSTEM_ERROR, "crc32 not match");
    }
    if h.compressed == Some(true) {
        return error(
            request,
            resp::SYSTEM_ERROR,
            "compressed REGISTER_BROKER bodies are not supported; set compressedRegister=false",
        );
    }
    let body: Option<RegisterBrokerBody> = if request.body.is_empty() {
        None
    } else {
        match from_json(&request.body) {
            Ok(b) => Some(b),
            Err(e) => return error(request, resp::SYSTEM_ERROR, format!("bad REGISTER_BROKER body: {e}")),
        }
    };
    let mut routes = ns.routes.write();
    routes.register(Registration {
        cluster: &h.cluster_name,
        broker_name: &h.broker_name,
        broker_addr: &h.broker_addr,
        broker_id: h.broker_id,
        ha_server_addr: &h.ha_server_addr,
        enable_acting_master: h.enable_acting_master,
        topics: body.map(|b| b.topic_config_serialize_wrapper),
        connection: origin.connection,
    });
    // A slave learns its master (and where to follow it); a master gets an empty header.
    let ext = match routes.master_of(&h.broker_name, h.broker_id) {
        Some((master_addr, ha_server_addr)) => RegisterBrokerResponseHeader {
            ha_server_addr: Some(ha_server_addr),
            master_addr: Some(master_addr),
        }
        .to_ext(),
        None => ExtFields::default(),
    };
    drop(routes);
    answer(request, resp::SUCCESS).with_ext_fields(ext)
}

pub(super) fn unregister(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    let h = match UnregisterBrokerRequestHeader::from_command(request) {
        Ok(h) => h,
        Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
    };
    ns.routes
        .write()
        .unregister(&h.cluster_name, &h.broker_name, &h.broker_addr, h.broker_id);
    answer(request, resp::SUCCESS)
}

/// This file's requests: each code with its access rule and its handler, registered by one
/// line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::REGISTER_BROKER,
        rule: Rule::Write(access::broker_clusters),
        handle: register,
    },
    Unit {
        code: rc::UNREGISTER_BROKER,
        rule: Rule::Write(access::broker_clusters),
        handle: unregister,
    },
];
