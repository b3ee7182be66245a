//! ACL 2.0 over gRPC, as RocketMQ's proxy checks it: every request's `authorization` and
//! `x-mq-date-time` metadata authenticate its user (UNAUTHORIZED otherwise), and the topics and
//! groups it names are checked against the user's policies (FORBIDDEN otherwise) — the same
//! users and policies remoting requests are checked against.
//!
//! Owns: which resources and actions each RPC touches. Must never: serve a request whose
//! user did not check out while authentication is on.

use petrel_auth::{Action, Check, Principal, Resource};

use crate::front::{Caller, GrpcFront};
use crate::pb::Code;
use crate::status::Refusal;

/// What publishing needs.
pub const PUB: &[Action] = &[Action::Pub];
/// What consuming needs (of the topic, and of the group).
pub const SUB: &[Action] = &[Action::Sub];
/// What a route lookup needs: either.
pub const PUB_OR_SUB: &[Action] = &[Action::Pub, Action::Sub];

/// Not a remoting code: gRPC requests are on no code whitelist.
const NO_CODE: i32 = -1;

/// A check of `actions` on topic `name`.
#[must_use]
pub fn topic(name: &str, actions: &'static [Action]) -> Check {
    Check {
        resource: Resource::topic(name),
        actions,
    }
}

/// A check of `actions` on group `name`.
#[must_use]
pub fn group(name: &str, actions: &'static [Action]) -> Check {
    Check {
        resource: Resource::group(name),
        actions,
    }
}

impl GrpcFront {
    /// Who sent a request, from its metadata.
    pub(crate) fn principal(&self, authorization: Option<&str>, date_time: Option<&str>) -> Result<Principal, Refusal> {
        let access = &self.broker.access;
        access
            .store
            .authenticate_grpc(&access.settings, authorization, date_time)
            .map_err(|e| Refusal::new(Code::Unauthorized, e.to_string()))
    }

    /// Refuses the request unless its user may do all of `checks`.
    pub(crate) fn authorize(&self, caller: &Caller, checks: &[Check]) -> Result<(), Refusal> {
        let access = &self.broker.access;
        access
            .store
            .authorize(&access.settings, NO_CODE, &caller.principal, checks, caller.peer.ip())
            .map_err(|e| Refusal::new(Code::Forbidden, e.to_string()))
    }
}
