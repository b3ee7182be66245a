//! ACL 2.0's admin requests (3001–3010, `mqadmin createUser` … `listAcl`): users and their
//! policies on this broker. As in RocketMQ each broker keeps its own tables, and `mqadmin -c`
//! sends the change to every broker of the cluster, slaves included. Changes are written to disk
//! before they are answered, off the connection's task.

pub(in crate::front) mod acl;
pub(in crate::front) mod user;

use std::sync::Arc;

use petrel_auth::AuthError;

use crate::front::context::Acl;
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Reply, answer, error};

/// A header field, trimmed; `None` when absent or blank.
fn given(value: Option<&String>) -> Option<&str> {
    value.map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// RocketMQ's `handleAuthException`: its auth exceptions are NO_PERMISSION with their message.
fn refusal(request: &RemotingCommand, e: &AuthError) -> RemotingCommand {
    match e {
        AuthError::Storage(_) => {
            tracing::error!(code = request.code, error = %e, "cannot store an ACL change");
            error(request, resp::SYSTEM_ERROR, "An system error occurred, please try again later.")
        }
        _ => error(request, resp::NO_PERMISSION, e.to_string()),
    }
}

/// Runs a change to the tables off the connection's task (it writes and syncs two files).
fn change<F>(request: RemotingCommand, work: F) -> Reply
where
    F: FnOnce() -> Result<(), AuthError> + Send + 'static,
{
    Reply::Later(Box::pin(async move {
        let done = tokio::task::spawn_blocking(work)
            .await
            .unwrap_or_else(|e| Err(AuthError::Storage(format!("the change failed: {e}"))));
        Some(match done {
            Ok(()) => answer(&request, resp::SUCCESS),
            Err(e) => refusal(&request, &e),
        })
    }))
}

/// A JSON answer, or SUCCESS without a body when there is nothing (as RocketMQ answers a get
/// of a missing user).
fn found<T: serde::Serialize>(request: &RemotingCommand, value: Option<&T>) -> Reply {
    let mut ok = answer(request, resp::SUCCESS);
    if let Some(v) = value {
        match serde_json::to_vec(v) {
            Ok(body) => ok = ok.with_body(body),
            Err(e) => return Reply::Now(error(request, resp::SYSTEM_ERROR, e.to_string())),
        }
    }
    Reply::Now(ok)
}

fn store<C: Acl>(ctx: &Arc<C>) -> Arc<petrel_auth::AuthStore> {
    ctx.access().store.clone()
}
