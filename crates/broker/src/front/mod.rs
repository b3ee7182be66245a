//! The RocketMQ front end: request units, each declared in its own file
//! (`handlers/<area>/<verb>.rs`: its code, access rule and handler) and registered by one line,
//! served through remoting's dispatcher. Each handler reads the typed header, calls a service,
//! and writes the answer; errors become answers in one place (`reply::from_error`).
//!
//! Owns: the wire side of the broker. Must never: answer a code it does not implement with
//! anything but REQUEST_CODE_NOT_SUPPORTED naming the code, answer a oneway request, or do a
//! service's work itself.

pub mod client_handle;
pub(crate) mod context;
mod handlers;
#[cfg(test)]
mod narrow_tests;
pub mod reply;
#[cfg(test)]
mod tests;
pub(crate) mod unit;

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_remoting::{Connection, Handler, Reply};

use crate::broker::Broker;

pub use handlers::served_codes;

/// The unit serving `code`.
pub(crate) fn unit_for(code: i32) -> Option<&'static unit::Unit> {
    handlers::dispatcher().unit(code)
}

/// Every unit, in declaration order.
#[cfg(test)]
pub(crate) fn units() -> &'static [&'static unit::Unit] {
    handlers::dispatcher().units()
}

/// The broker as a connection handler.
pub struct RocketMqFront(pub Arc<Broker>);

impl Handler for RocketMqFront {
    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        if let Err(refusal) = self.0.access.admit(conn, &request) {
            return if request.is_oneway() { Reply::None } else { Reply::Now(*refusal) };
        }
        handlers::dispatcher().dispatch(request, |unit, request| unit.handle.run(&self.0, conn, request))
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        self.0.groups.connection_closed(conn.id());
    }
}
