//! The RocketMQ front end: a table from request code to the handler file of its request family
//! (`handlers/<area>/<verb>.rs`). Each handler reads the typed header, calls a service, and
//! writes the answer; errors become answers in one place (`reply::from_error`).
//!
//! Owns: the wire side of the broker. Must never: answer a code it does not implement with
//! anything but REQUEST_CODE_NOT_SUPPORTED naming the code, answer a oneway request, or do a
//! service's work itself.

pub mod client_handle;
mod handlers;
pub mod reply;

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Handler, Reply, error};

use crate::broker::Broker;

pub use handlers::served_codes;

/// The broker as a connection handler.
pub struct RocketMqFront(pub Arc<Broker>);

impl Handler for RocketMqFront {
    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        let oneway = request.is_oneway();
        if let Err(refusal) = self.0.access.admit(conn, &request) {
            return if oneway { Reply::None } else { Reply::Now(*refusal) };
        }
        let reply = match handlers::route(request.code) {
            Some(handler) => handler(&self.0, conn, request),
            None => Reply::Now(error(
                &request,
                resp::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {} not supported", request.code),
            )),
        };
        if !oneway {
            return reply;
        }
        // A oneway request's work still happens (a oneway send is stored); nothing is answered.
        match reply {
            Reply::Later(work) => Reply::Later(Box::pin(async move {
                work.await;
                None
            })),
            Reply::Now(_) | Reply::None => Reply::None,
        }
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        self.0.groups.connection_closed(conn.id());
    }
}
