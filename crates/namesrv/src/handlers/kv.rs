//! PUT_KV_CONFIG (100), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102) and
//! GET_KVLIST_BY_NAMESPACE (219).

use super::Unit;
#[allow(unused_imports, reason = "each file's rules name what they need")]
use crate::access::{self, ROUTES_ARE_PUBLIC, Rule};
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{KvTable, to_json};
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, GetKvConfigRequestHeader, PutKvConfigRequestHeader};
use petrel_remoting::{answer, error};

use super::Origin;
use crate::state::NameServer;

pub(super) fn put(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    let h = match PutKvConfigRequestHeader::from_command(request) {
        Ok(h) => h,
        Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
    };
    match ns.routes.write().kv.put(h.namespace, h.key, h.value) {
        Ok(()) => answer(request, resp::SUCCESS),
        Err(full) => error(request, resp::SYSTEM_ERROR, full.to_string()),
    }
}

pub(super) fn get(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    let h = match GetKvConfigRequestHeader::from_command(request) {
        Ok(h) => h,
        Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
    };
    match ns.routes.read().kv.get(&h.namespace, &h.key) {
        Some(v) => {
            let mut a = answer(request, resp::SUCCESS);
            a.put_ext("value", v.clone());
            a
        }
        None => error(
            request,
            resp::QUERY_NOT_FOUND,
            format!("No config item, Namespace: {} Key: {}", h.namespace, h.key),
        ),
    }
}

pub(super) fn delete(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    match GetKvConfigRequestHeader::from_command(request) {
        Ok(h) => {
            ns.routes.write().kv.delete(&h.namespace, &h.key);
            answer(request, resp::SUCCESS)
        }
        Err(e) => error(request, resp::SYSTEM_ERROR, e.to_string()),
    }
}

pub(super) fn list(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    let r = ns.routes.read();
    match request.ext("namespace").and_then(|n| r.kv.tables.get(n)) {
        Some(table) => {
            let body = KvTable {
                table: table.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            };
            answer(request, resp::SUCCESS).with_body(to_json(&body).into_bytes())
        }
        None => error(request, resp::QUERY_NOT_FOUND, "No config item"),
    }
}

/// This file's requests: each code with its access rule and its handler, registered by one
/// line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::PUT_KV_CONFIG,
        rule: Rule::Write(access::named_cluster),
        handle: put,
    },
    Unit {
        code: rc::GET_KV_CONFIG,
        rule: Rule::Open("KV configuration (order-topic routes, namespaces) is read by clients as routes are"),
        handle: get,
    },
    Unit {
        code: rc::DELETE_KV_CONFIG,
        rule: Rule::Write(access::named_cluster),
        handle: delete,
    },
    Unit {
        code: rc::GET_KVLIST_BY_NAMESPACE,
        rule: Rule::Open("KV configuration (order-topic routes, namespaces) is read by clients as routes are"),
        handle: list,
    },
];
