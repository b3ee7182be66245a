//! A broker request unit: one request code, the access rule that says what it touches and for
//! whom, and the handler that answers it — declared together in the request's own file
//! (`handlers/<area>/<verb>.rs`, its `UNITS`), registered by one line in `handlers/mod.rs`.

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_remoting::{Connection, Reply};

use crate::access::Rule;
use crate::broker::Broker;

/// A handler: the broker's services, the connection the request came on, the request.
pub(crate) type HandlerFn = fn(&Arc<Broker>, &Arc<Connection>, RemotingCommand) -> Reply;

/// One request code's declaration.
pub(crate) struct Unit {
    pub code: i32,
    pub rule: Rule,
    pub handle: HandlerFn,
}

impl petrel_remoting::dispatch::Unit for Unit {
    fn code(&self) -> i32 {
        self.code
    }
}
