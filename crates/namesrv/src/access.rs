//! Access control on the name server's writes. With authentication on, REGISTER_BROKER,
//! UNREGISTER_BROKER, DELETE_TOPIC_IN_NAMESRV, PUT_KV_CONFIG and DELETE_KV_CONFIG must be signed
//! by a known user (brokers sign with their `innerClientAuthenticationCredentials`); with
//! authorization on as well, that user needs Update on the cluster the request names (super users
//! have it). Reads stay open, as RocketMQ's name server keeps them: clients sign with users that
//! exist only on brokers, and a route is not a secret. Apache RocketMQ 5.5.0's name server checks
//! nothing at all; this closes the route takeover the issue describes.
//!
//! Routes are keyed by broker name, so a registration (or unregistration) needs Update on every
//! cluster it touches: the one it names, the one its broker name already belongs to, and the one
//! its address is registered under — Update on a cluster of one's own does not let a user take
//! over another cluster's broker name (RocketMQ's name server would hand that broker's topics
//! the newcomer's address).
//!
//! Every code the name server serves has a rule in [`RULES`] (a test walks them): a write's
//! resources, or an explicit decision that it is an open read.
//!
//! Owns: which name-server codes are writes, and the cap on a connection's failures. Must never:
//! check a request from the broker in the same process (it does not travel over a socket).

use std::collections::BTreeSet;
use std::sync::Arc;

use petrel_auth::{Action, AuthSettings, AuthStore, Check, Resource};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, error};

use crate::state::Routes;

const UPDATE: &[Action] = &[Action::Update];

/// What one code needs; each request unit declares its own.
#[derive(Clone, Copy)]
pub(crate) enum Rule {
    /// Served to anyone: the reason is the decision.
    Open(#[allow(dead_code, reason = "the decision's words, for readers and the rule test")] &'static str),
    /// A write: signed, and Update on the clusters it touches.
    Write(fn(&RemotingCommand, &Routes) -> BTreeSet<String>),
}

pub(crate) const ROUTES_ARE_PUBLIC: &str =
    "a read of routes or clusters: clients sign with users that exist only on brokers, and a route is no secret";

fn ext<'a>(request: &'a RemotingCommand, name: &str) -> &'a str {
    request.ext(name).map_or("", str::trim)
}

pub(crate) fn named_cluster(request: &RemotingCommand, _: &Routes) -> BTreeSet<String> {
    BTreeSet::from([ext(request, "clusterName").to_owned()])
}

/// The cluster named, the cluster the broker name is in now, and the one its address is.
pub(crate) fn broker_clusters(request: &RemotingCommand, routes: &Routes) -> BTreeSet<String> {
    let mut out = named_cluster(request, routes);
    let name = ext(request, "brokerName");
    if let Some(data) = routes.brokers.get(name) {
        out.insert(data.cluster.clone());
    }
    out.extend(
        routes
            .clusters
            .iter()
            .filter(|(_, names)| names.contains(name))
            .map(|(c, _)| c.clone()),
    );
    if let Some(live) = routes.live.get(ext(request, "brokerAddr")) {
        out.insert(live.cluster.clone());
    }
    out
}

/// The cluster named, else every cluster whose brokers serve the topic.
pub(crate) fn topic_clusters(request: &RemotingCommand, routes: &Routes) -> BTreeSet<String> {
    let named = ext(request, "clusterName");
    if !named.is_empty() {
        return BTreeSet::from([named.to_owned()]);
    }
    let brokers = routes.topics.get(ext(request, "topic"));
    let mut out: BTreeSet<String> = brokers
        .into_iter()
        .flat_map(|b| b.keys())
        .filter_map(|name| routes.brokers.get(name).map(|d| d.cluster.clone()))
        .collect();
    if out.is_empty() {
        out.insert(String::new());
    }
    out
}

fn rule(code: i32) -> Option<Rule> {
    crate::handlers::unit_for(code).map(|u| u.rule)
}

/// The name server's users and switches.
pub struct NamesrvAccess {
    /// The users and policies that signatures and permissions are checked against.
    pub store: Arc<AuthStore>,
    /// Whether authentication and authorization are on, and the codes exempt from each.
    pub settings: AuthSettings,
    /// Failed signatures after which a connection is closed (`maxAuthenticationFailuresPerConnection`).
    pub max_failures: u64,
}

impl NamesrvAccess {
    /// `Err(answer)` when `request` may not be served.
    pub(crate) fn admit(&self, conn: &Arc<Connection>, request: &RemotingCommand, routes: &Routes) -> Result<(), Box<RemotingCommand>> {
        if !self.settings.authentication_enabled {
            return Ok(());
        }
        let clusters = match rule(request.code) {
            // A code nobody serves is answered REQUEST_CODE_NOT_SUPPORTED by the dispatcher.
            None | Some(Rule::Open(_)) => return Ok(()),
            Some(Rule::Write(touched)) => touched(request, routes),
        };
        let principal = match self.store.authenticate(&self.settings, request) {
            Ok(p) => p,
            Err(e) => {
                let failures = conn.add_strike(self.max_failures);
                tracing::warn!(code = request.code, peer = %conn.peer(), failures, reason = %e, "name server refused an unauthenticated write");
                return Err(Box::new(error(request, resp::NO_PERMISSION, e.to_string())));
            }
        };
        let checks: Vec<Check> = clusters
            .iter()
            .map(|c| Check {
                resource: Resource::cluster(c),
                actions: UPDATE,
            })
            .collect();
        self.store
            .authorize(&self.settings, request.code, &principal, &checks, conn.peer().ip())
            .map_err(|e| Box::new(error(request, resp::NO_PERMISSION, e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use petrel_protocol::codes::request_code as rc;

    use super::*;

    /// Every served code has its unit's rule (a unit cannot be declared without one); an open
    /// rule says why.
    #[test]
    fn every_served_code_has_a_rule() {
        for code in crate::served_codes() {
            let Some(r) = rule(code) else {
                panic!("request code {code} has no access rule")
            };
            if let Rule::Open(why) = r {
                assert!(why.len() > 20, "code {code}: an open rule says why");
            }
        }
        assert!(rule(99_999).is_none(), "no unit, no rule");
        assert!(
            matches!(rule(rc::REGISTER_BROKER), Some(Rule::Write(_))),
            "a write is checked as one"
        );
    }

    fn registration(cluster: &str, name: &str, addr: &str) -> RemotingCommand {
        let mut r = RemotingCommand::request(rc::REGISTER_BROKER, 0);
        r.put_ext("clusterName", cluster);
        r.put_ext("brokerName", name);
        r.put_ext("brokerAddr", addr);
        r
    }

    #[test]
    fn a_registration_needs_every_cluster_its_broker_name_and_address_belong_to() {
        let mut routes = Routes::default();
        routes.register(crate::state::Registration {
            cluster: "prod",
            broker_name: "broker-a",
            broker_addr: "10.0.0.1:10911",
            broker_id: 0,
            ha_server_addr: "",
            enable_acting_master: None,
            topics: None,
            connection: None,
        });
        let touched = |r: &RemotingCommand| broker_clusters(r, &routes).into_iter().collect::<Vec<_>>();
        assert_eq!(touched(&registration("prod", "broker-a", "10.0.0.1:10911")), ["prod"]);
        assert_eq!(
            touched(&registration("mine", "broker-a", "10.6.6.6:10911")),
            ["mine", "prod"],
            "broker-a's routes are prod's"
        );
        assert_eq!(
            touched(&registration("mine", "broker-z", "10.0.0.1:10911")),
            ["mine", "prod"],
            "that address is prod's broker"
        );
        assert_eq!(touched(&registration("mine", "broker-z", "10.6.6.6:10911")), ["mine"]);
    }
}
