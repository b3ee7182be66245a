//! The name server's request units: each file declares its codes, their access rules and
//! handlers (`UNITS`), registered by one line here and served through remoting's dispatcher.
//!
//! Owns: the list of request files. Must never: answer a oneway request.

mod broker;
mod cluster;
mod kv;
mod route;
mod topics;

use std::sync::{Arc, LazyLock};

use petrel_protocol::RemotingCommand;
use petrel_remoting::dispatch::{Dispatcher, not_supported};
use petrel_remoting::{Connection, Handler, Reply};

use crate::access::Rule;
use crate::state::NameServer;

/// Who sent a request: a connection, or the broker in the same process.
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) connection: Option<u64>,
}

type HandlerFn = fn(&NameServer, &RemotingCommand, Origin) -> RemotingCommand;

/// One request code's declaration: its code, its access rule, its handler.
pub(crate) type Unit = petrel_remoting::dispatch::Declared<Rule, HandlerFn>;

/// Every request file of the name server, one line each.
const FILES: &[&[Unit]] = &[broker::UNITS, route::UNITS, cluster::UNITS, topics::UNITS, kv::UNITS];

static DISPATCHER: LazyLock<Dispatcher<Unit>> = LazyLock::new(|| Dispatcher::new(FILES));

/// The unit serving `code`.
pub(crate) fn unit_for(code: i32) -> Option<&'static Unit> {
    DISPATCHER.unit(code)
}

/// The request codes the name server answers.
#[must_use]
pub fn served_codes() -> Vec<i32> {
    DISPATCHER.served_codes().collect()
}

impl NameServer {
    /// Answers `request` from the broker in this process; `None` for a oneway request.
    pub fn handle(&self, request: &RemotingCommand) -> Option<RemotingCommand> {
        self.handle_from(request, Origin { connection: None })
    }

    pub(crate) fn handle_from(&self, request: &RemotingCommand, origin: Origin) -> Option<RemotingCommand> {
        let response = match DISPATCHER.unit(request.code) {
            Some(unit) => (unit.handle)(self, request, origin),
            None => not_supported(request),
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
