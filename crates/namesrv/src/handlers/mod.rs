//! The name server's request codes: a table from code to the file that answers it.
//!
//! Owns: dispatch and the answer to an unknown code. Must never: answer a oneway request.

mod broker;
mod cluster;
mod kv;
mod route;
mod topics;

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_remoting::{Connection, Handler, Reply, error};

use crate::state::NameServer;

/// Who sent a request: a connection, or the broker in the same process.
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) connection: Option<u64>,
}

type HandlerFn = fn(&NameServer, &RemotingCommand, Origin) -> RemotingCommand;

/// The handler of each request code the name server serves.
const TABLE: &[(i32, HandlerFn)] = &[
    (rc::REGISTER_BROKER, broker::register),
    (rc::UNREGISTER_BROKER, broker::unregister),
    (rc::GET_ROUTEINFO_BY_TOPIC, route::get),
    (rc::GET_BROKER_CLUSTER_INFO, cluster::get),
    (rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, topics::all),
    (rc::GET_TOPICS_BY_CLUSTER, topics::by_cluster),
    (rc::DELETE_TOPIC_IN_NAMESRV, topics::delete),
    (rc::PUT_KV_CONFIG, kv::put),
    (rc::GET_KV_CONFIG, kv::get),
    (rc::DELETE_KV_CONFIG, kv::delete),
    (rc::GET_KVLIST_BY_NAMESPACE, kv::list),
];

/// The request codes the name server answers.
#[must_use]
pub fn served_codes() -> Vec<i32> {
    TABLE.iter().map(|(code, _)| *code).collect()
}

impl NameServer {
    /// Answers `request` from the broker in this process; `None` for a oneway request.
    pub fn handle(&self, request: &RemotingCommand) -> Option<RemotingCommand> {
        self.handle_from(request, Origin { connection: None })
    }

    pub(crate) fn handle_from(&self, request: &RemotingCommand, origin: Origin) -> Option<RemotingCommand> {
        let response = match TABLE.iter().find(|(code, _)| *code == request.code) {
            Some((_, handler)) => handler(self, request, origin),
            None => error(
                request,
                resp::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {} not supported", request.code),
            ),
        };
        (!request.is_oneway()).then_some(response)
    }
}

impl Handler for NameServer {
    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        if let Some(access) = self.access.get()
            && let Err(refusal) = access.admit(conn, &request, &self.routes.read())
        {
            return if request.is_oneway() { Reply::None } else { Reply::Now(*refusal) };
        }
        self.handle_from(
            &request,
            Origin {
                connection: Some(conn.id()),
            },
        )
        .into()
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        for addr in self.connection_closed(conn.id()) {
            tracing::info!(%addr, peer = %conn.peer(), "the broker's connection closed; it is unregistered");
        }
    }
}
