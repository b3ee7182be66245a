//! Access control on the name server's writes. With authentication on, REGISTER_BROKER,
//! UNREGISTER_BROKER, DELETE_TOPIC_IN_NAMESRV, PUT_KV_CONFIG and DELETE_KV_CONFIG must be signed
//! by a known user (brokers sign with their `innerClientAuthenticationCredentials`); with
//! authorization on as well, that user needs Update on the cluster the request names (super users
//! have it). Reads stay open, as RocketMQ's name server keeps them: clients sign with users that
//! exist only on brokers, and a route is not a secret. Apache RocketMQ 5.5.0's name server checks
//! nothing at all; this closes the route takeover the issue describes.
//!
//! Owns: which name-server codes are writes, and the cap on a connection's failures. Must never:
//! check a request from the broker in the same process (it does not travel over a socket).

use std::sync::Arc;

use petrel_auth::{Action, AuthSettings, AuthStore, Check, Resource};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_remoting::{Connection, error};

/// The codes that change what the name server holds.
const WRITES: &[i32] = &[
    rc::REGISTER_BROKER,
    rc::UNREGISTER_BROKER,
    rc::DELETE_TOPIC_IN_NAMESRV,
    rc::PUT_KV_CONFIG,
    rc::DELETE_KV_CONFIG,
];

const UPDATE: &[Action] = &[Action::Update];

/// The name server's users and switches.
pub struct NamesrvAccess {
    pub store: Arc<AuthStore>,
    pub settings: AuthSettings,
    pub max_failures: u64,
}

impl NamesrvAccess {
    /// `Err(answer)` when `request` may not be served.
    pub(crate) fn admit(&self, conn: &Arc<Connection>, request: &RemotingCommand) -> Result<(), Box<RemotingCommand>> {
        if !self.settings.authentication_enabled || !WRITES.contains(&request.code) {
            return Ok(());
        }
        let principal = match self.store.authenticate(&self.settings, request) {
            Ok(p) => p,
            Err(e) => {
                let failures = conn.add_strike(self.max_failures);
                tracing::warn!(code = request.code, peer = %conn.peer(), failures, reason = %e, "name server refused an unauthenticated write");
                return Err(Box::new(error(request, resp::NO_PERMISSION, e.to_string())));
            }
        };
        let cluster = request
            .ext_fields
            .as_ref()
            .and_then(|f| f.get("clusterName"))
            .map_or("", String::as_str);
        let checks = [Check {
            resource: Resource::cluster(cluster),
            actions: UPDATE,
        }];
        self.store
            .authorize(&self.settings, request.code, &principal, &checks, conn.peer().ip())
            .map_err(|e| Box::new(error(request, resp::NO_PERMISSION, e.to_string())))
    }
}
