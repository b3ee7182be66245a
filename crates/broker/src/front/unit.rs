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

/// One request code's declaration: its code, its access rule, its handler.
pub(crate) type Unit = petrel_remoting::dispatch::Declared<Rule, HandlerFn>;
