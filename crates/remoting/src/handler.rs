//! What a connection does with a request: the `Handler` trait, the shape of its reply, and the
//! two helpers every handler answers with.
//!
//! Owns: the contract between the transport and whoever interprets request codes. Must never:
//! know what a request code means — that belongs to the name server and the broker.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use petrel_protocol::{RemotingCommand, SerializeType};

use crate::connection::Connection;

/// An answer that is not ready yet; `None` when it turns out there is nothing to send.
pub type Deferred = Pin<Box<dyn Future<Output = Option<RemotingCommand>> + Send>>;

/// What a handler does with a request.
pub enum Reply {
    /// No answer (oneway requests).
    None,
    /// The answer, ready now.
    Now(RemotingCommand),
    /// Answered when the future completes; the connection keeps serving meanwhile, up to its
    /// bound on requests in flight. The connection polls it once at once (with a waker that
    /// does nothing), so it must not count on that first poll's waker — no future built on
    /// tokio's primitives does. One that is not ready is kept and polled by the connection's
    /// own task: after its wait it must do little (heavy work runs before the wait, or on a
    /// pool), or it holds up the connection's other requests.
    Later(Deferred),
}

impl From<Option<RemotingCommand>> for Reply {
    fn from(r: Option<RemotingCommand>) -> Reply {
        r.map_or(Reply::None, Reply::Now)
    }
}

/// Something that answers requests arriving on a connection.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request. Runs on the connection's task: anything that can block goes into a
    /// [`Reply::Later`] future that waits elsewhere.
    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply;

    /// The connection closed (either side); handlers drop what they hold of it.
    fn on_close(&self, _conn: &Arc<Connection>) {}
}

/// A handler for client connections that ignores what the peer asks of it (a load generator has
/// no use for a broker's NOTIFY_CONSUMER_IDS_CHANGED).
pub struct IgnoreRequests;

impl Handler for IgnoreRequests {
    fn handle(&self, _conn: &Arc<Connection>, _request: RemotingCommand) -> Reply {
        Reply::None
    }
}

/// A JSON answer to `request`: Java answers in its own serialization, whatever the request used.
#[must_use]
pub fn answer(request: &RemotingCommand, code: i32) -> RemotingCommand {
    let mut r = RemotingCommand::response_to(request, code);
    r.serialize_type = SerializeType::Json;
    r
}

/// An error answer with a remark.
#[must_use]
pub fn error(request: &RemotingCommand, code: i32, remark: impl Into<String>) -> RemotingCommand {
    answer(request, code).with_remark(remark)
}
