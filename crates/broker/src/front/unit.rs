//! A broker request unit: one request code, the access rule that says what it touches and for
//! whom, the typed header it carries and the handler that answers it — declared together in the
//! request's own file (`handlers/<area>/<verb>.rs`, its `UNITS`), registered by one line in
//! `handlers/mod.rs`.
//!
//! A handler is written against a narrow context (`front::context`: the services it names) and
//! receives its header already decoded; the unit instantiates it for the broker. A header that
//! does not decode is answered here, before any handler runs.

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::command::ExtFields;
use petrel_protocol::header::CommandHeader;
use petrel_remoting::{Connection, Reply};

use crate::access::Rule;
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;

/// A handler as the broker runs it: its services, the connection, the decoded header, the
/// request (for its body, code and opaque).
pub(crate) type HandlerFn<H> = fn(&Arc<Broker>, &Arc<Connection>, H, RemotingCommand) -> Reply;

/// How a header that does not decode is answered, when the request's family answers it in a way
/// of its own (a send's refusal carries MSG_REGION).
pub(crate) type RefuseFn = fn(&Broker, &RemotingCommand, &BrokerError) -> RemotingCommand;

/// A unit's handler with its header type erased, so every unit fits the one dispatch table.
pub(crate) trait Run: Sync {
    /// Decodes the header and runs the handler, or answers why the header is bad.
    fn run(&self, broker: &Arc<Broker>, conn: &Arc<Connection>, request: RemotingCommand) -> Reply;
    /// The `extFields` keys of the unit's header: what a `Rule::Fields` may name (checked by a
    /// test of the access rules).
    #[cfg(test)]
    fn header_keys(&self) -> &'static [&'static str];
}

/// A handler taking header `H`.
pub(crate) struct Typed<H> {
    handle: HandlerFn<H>,
    refuse: Option<RefuseFn>,
}

impl<H> Typed<H> {
    /// A handler whose bad header is answered as any other bad request.
    pub(crate) const fn new(handle: HandlerFn<H>) -> Typed<H> {
        Typed { handle, refuse: None }
    }

    /// A handler whose bad header is answered by `refuse`.
    pub(crate) const fn refusing(handle: HandlerFn<H>, refuse: RefuseFn) -> Typed<H> {
        Typed {
            handle,
            refuse: Some(refuse),
        }
    }
}

impl<H: CommandHeader + 'static> Run for Typed<H> {
    fn run(&self, broker: &Arc<Broker>, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        match H::from_command(&request) {
            Ok(header) => (self.handle)(broker, conn, header, request),
            Err(e) => {
                let e = BrokerError::BadRequest(e.to_string());
                Reply::Now(match self.refuse {
                    Some(refuse) => refuse(broker, &request, &e),
                    None => from_error(&request, &e),
                })
            }
        }
    }

    #[cfg(test)]
    fn header_keys(&self) -> &'static [&'static str] {
        H::KEYS
    }
}

/// The header of a request that carries none in `extFields` (its arguments, if any, are in the
/// body).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NoHeader;

impl CommandHeader for NoHeader {
    const KEYS: &'static [&'static str] = &[];

    fn write_ext(&self, _ext: &mut ExtFields) {}

    fn from_ext(_ext: &ExtFields) -> Result<Self, petrel_protocol::HeaderError> {
        Ok(NoHeader)
    }
}

/// One request code's declaration: its code, its access rule, its typed handler.
pub(crate) type Unit = petrel_remoting::dispatch::Declared<Rule, &'static dyn Run>;
