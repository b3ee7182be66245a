//! The decision for one request: who sent it (authentication) and whether that user may do what
//! it asks (authorization), as RocketMQ's `DefaultAuthenticationHandler`,
//! `UserAuthorizationHandler` and `AclAuthorizationHandler` decide it.
//!
//! A super user may do anything. For a normal user every check of a request must be allowed: the
//! entries of the `CUSTOM` policy that cover the resource, one of the actions and the source
//! address are consulted (the `DEFAULT` policy's when none do); the most specific resource wins
//! (a literal name, then the longest prefix, then `Type:*`, then `*`), and at equal specificity a
//! Deny wins. No entry at all is a refusal.

use std::net::IpAddr;

use petrel_protocol::RemotingCommand;

use crate::error::AuthError;
use crate::model::{Action, Resource};
use crate::sign::{ACCESS_KEY, MAX_SIGNED_FIELDS, SIGNATURE, verify};
use crate::store::{AuthStore, Entry};

/// What is switched on (RocketMQ's `AuthConfig` keys).
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// Whether requests must carry a valid signature (`authenticationEnabled`).
    pub authentication_enabled: bool,
    /// Whether requests are checked against the users' policies (`authorizationEnabled`).
    pub authorization_enabled: bool,
    /// Request codes served without a signature (`authenticationWhitelist`).
    pub authentication_whitelist: Vec<i32>,
    /// Request codes served without a policy check (`authorizationWhitelist`).
    pub authorization_whitelist: Vec<i32>,
    /// RocketMQ's stateful strategy: once a connection's signature checked out for a user, its
    /// later requests naming that user skip the signature for this long. `None`: every request
    /// is verified (RocketMQ's default, stateless strategy).
    pub stateful_for: Option<std::time::Duration>,
}

impl AuthSettings {
    /// Whether authentication or authorization is on, i.e. whether requests need checking at all.
    #[must_use]
    pub fn any_enabled(&self) -> bool {
        self.authentication_enabled || self.authorization_enabled
    }
}

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Not checked (authentication off or the code is on the whitelist), with the `AccessKey`
    /// it names, if any.
    Unchecked(Option<String>),
    /// Signed by this user.
    User(String),
}

impl Principal {
    /// The user name the request names or was signed by; `None` for an unchecked request without an `AccessKey`.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        match self {
            Principal::Unchecked(n) => n.as_deref(),
            Principal::User(n) => Some(n),
        }
    }
}

/// One thing a request does: any of `actions` on `resource`.
#[derive(Debug, Clone)]
pub struct Check {
    /// What the request acts on.
    pub resource: Resource,
    /// The actions of which any one, if allowed, permits the request.
    pub actions: &'static [Action],
}

impl AuthStore {
    /// Checks the request's signature when authentication is on.
    ///
    /// # Errors
    /// No `AccessKey`, an unknown or disabled user, or a signature that is missing or wrong.
    pub fn authenticate(&self, settings: &AuthSettings, request: &RemotingCommand) -> Result<Principal, AuthError> {
        self.authenticate_cached(settings, request, |_| false)
    }

    /// [`AuthStore::authenticate`], skipping the signature of a known, enabled user for whom
    /// `verified_recently` says the connection already proved itself (the stateful strategy).
    ///
    /// # Errors
    /// As [`AuthStore::authenticate`].
    pub fn authenticate_cached(
        &self,
        settings: &AuthSettings,
        request: &RemotingCommand,
        verified_recently: impl Fn(&str) -> bool,
    ) -> Result<Principal, AuthError> {
        let access_key = request.ext_fields.as_ref().and_then(|f| f.get(ACCESS_KEY)).cloned();
        if !settings.authentication_enabled || settings.authentication_whitelist.contains(&request.code) {
            return Ok(Principal::Unchecked(access_key));
        }
        let Some(name) = access_key else {
            return Err(AuthError::Authentication(
                "No user: the request is not signed (no AccessKey)".into(),
            ));
        };
        let fields = request.ext_fields.as_ref().map_or(0, indexmap::IndexMap::len);
        if fields > MAX_SIGNED_FIELDS {
            return Err(AuthError::Authentication(format!(
                "User:{name}: a signed request carries at most {MAX_SIGNED_FIELDS} fields"
            )));
        }
        let tables = self.tables.read();
        let Some(user) = tables.users.get(&name) else {
            return Err(AuthError::Authentication(format!("User:{name} is not found.")));
        };
        if !user.enabled {
            return Err(AuthError::Authentication(format!("User:{name} is disabled.")));
        }
        if verified_recently(&name) {
            return Ok(Principal::User(name));
        }
        let given = request.ext_fields.as_ref().and_then(|f| f.get(SIGNATURE));
        match given {
            Some(sig) if verify(request, &user.password, sig) => Ok(Principal::User(name)),
            _ => Err(AuthError::Authentication(format!("User:{name}: check signature failed."))),
        }
    }

    /// Checks every one of `checks` for `principal` from `source`.
    ///
    /// # Errors
    /// The first check no policy allows, naming the user, the resource and the address.
    pub fn authorize(
        &self,
        settings: &AuthSettings,
        code: i32,
        principal: &Principal,
        checks: &[Check],
        source: IpAddr,
    ) -> Result<(), AuthError> {
        if !settings.authorization_enabled || checks.is_empty() || settings.authorization_whitelist.contains(&code) {
            return Ok(());
        }
        let Some(name) = principal.name() else {
            return Err(AuthError::Authorization(format!(
                "No user: the request is not signed, so it may not access {}",
                checks[0].resource
            )));
        };
        let tables = self.tables.read();
        let Some(user) = tables.users.get(name) else {
            return Err(AuthError::Authorization(format!("User:{name} not found.")));
        };
        if !user.enabled {
            return Err(AuthError::Authentication(format!("User:{name} is disabled.")));
        }
        if user.superuser {
            return Ok(());
        }
        let acl = tables.acls.get(name);
        for check in checks {
            let refuse = |why: &str| {
                AuthError::Authorization(format!(
                    "User:{name} has no permission to access {} from {source}, {why}",
                    check.resource
                ))
            };
            let Some(acl) = acl else {
                return Err(refuse("no matched policies."));
            };
            let chosen = best_entry(&acl.custom, check, source).or_else(|| best_entry(&acl.default, check, source));
            match chosen {
                None => return Err(refuse("no matched policies.")),
                Some(e) if !e.allow => return Err(refuse("the decision is deny.")),
                Some(_) => {}
            }
        }
        Ok(())
    }
}

fn matches(entry: &Entry, check: &Check, source: IpAddr) -> bool {
    entry.resource.covers(&check.resource)
        && entry.actions.iter().any(|a| *a == Action::All || check.actions.contains(a))
        && (entry.source_ips.is_empty() || entry.source_ips.iter().any(|s| s.contains(source)))
}

/// The most specific matching entry; a Deny before an Allow of the same specificity.
fn best_entry<'a>(entries: &'a [Entry], check: &Check, source: IpAddr) -> Option<&'a Entry> {
    entries
        .iter()
        .filter(|e| matches(e, check, source))
        .max_by_key(|e| (e.resource.specificity(), !e.allow))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AclInfo, EntryInfo, PolicyInfo, UserInfo};
    use crate::sign::sign;

    fn user(store: &AuthStore, name: &str, kind: &str) {
        store
            .create_user(&UserInfo {
                username: Some(name.into()),
                password: Some(format!("{name}-secret")),
                user_type: Some(kind.into()),
                user_status: None,
            })
            .unwrap();
    }

    fn entry(resource: &str, actions: &[&str], ips: &[&str], decision: &str) -> EntryInfo {
        EntryInfo {
            resource: Some(resource.into()),
            actions: Some(actions.iter().map(|a| (*a).to_owned()).collect()),
            source_ips: (!ips.is_empty()).then(|| ips.iter().map(|a| (*a).to_owned()).collect()),
            decision: Some(decision.into()),
        }
    }

    fn acl(store: &AuthStore, name: &str, policy: &str, entries: Vec<EntryInfo>) {
        let info = AclInfo {
            subject: Some(format!("User:{name}")),
            policies: Some(vec![PolicyInfo {
                policy_type: Some(policy.into()),
                entries: Some(entries),
            }]),
        };
        store.put_acl(&info, None).unwrap();
    }

    fn on() -> AuthSettings {
        AuthSettings {
            authentication_enabled: true,
            authorization_enabled: true,
            ..AuthSettings::default()
        }
    }

    fn may(store: &AuthStore, name: &str, resource: Resource, actions: &'static [Action], ip: &str) -> Result<(), AuthError> {
        let check = Check { resource, actions };
        store.authorize(&on(), 10, &Principal::User(name.into()), &[check], ip.parse().unwrap())
    }

    #[test]
    fn authentication_needs_a_known_enabled_user_and_the_right_signature() {
        let store = AuthStore::in_memory();
        user(&store, "alice", "Normal");
        let mut r = RemotingCommand::request(10, 1);
        assert!(matches!(store.authenticate(&on(), &r), Err(AuthError::Authentication(m)) if m.contains("not signed")));
        sign(&mut r, "alice", "alice-secret");
        assert_eq!(store.authenticate(&on(), &r), Ok(Principal::User("alice".into())));
        let mut wrong = RemotingCommand::request(10, 1);
        sign(&mut wrong, "alice", "guess");
        assert!(matches!(store.authenticate(&on(), &wrong), Err(AuthError::Authentication(m)) if m.contains("signature")));
        let mut nobody = RemotingCommand::request(10, 1);
        sign(&mut nobody, "mallory", "x");
        assert!(matches!(store.authenticate(&on(), &nobody), Err(AuthError::Authentication(m)) if m.contains("not found")));
        store
            .update_user(&UserInfo {
                username: Some("alice".into()),
                user_status: Some("disable".into()),
                ..UserInfo::default()
            })
            .unwrap();
        assert!(matches!(store.authenticate(&on(), &r), Err(AuthError::Authentication(m)) if m.contains("disabled")));
        // Whitelisted codes and authentication off pass unsigned requests.
        let unsigned = RemotingCommand::request(10, 1);
        let white = AuthSettings {
            authentication_whitelist: vec![10],
            ..on()
        };
        assert_eq!(store.authenticate(&white, &unsigned), Ok(Principal::Unchecked(None)));
        assert!(store.authenticate(&AuthSettings::default(), &unsigned).is_ok());
    }

    #[test]
    fn the_most_specific_entry_decides_and_deny_wins_a_tie() {
        let store = AuthStore::in_memory();
        user(&store, "bob", "Normal");
        acl(
            &store,
            "bob",
            "Custom",
            vec![
                entry("Topic:*", &["Pub"], &[], "Allow"),
                entry("Topic:secret-*", &["Pub", "Sub"], &[], "Deny"),
                entry("Topic:secret-open", &["Pub"], &[], "Allow"),
                entry("Group:g1", &["Sub"], &["10.0.0.0/8"], "Allow"),
            ],
        );
        let pub_ = &[Action::Pub];
        assert!(may(&store, "bob", Resource::topic("orders"), pub_, "127.0.0.1").is_ok());
        let denied = may(&store, "bob", Resource::topic("secret-x"), pub_, "127.0.0.1").unwrap_err();
        assert_eq!(
            denied.to_string(),
            "User:bob has no permission to access Topic:secret-x from 127.0.0.1, the decision is deny."
        );
        assert!(may(&store, "bob", Resource::topic("secret-open"), pub_, "127.0.0.1").is_ok());
        // No Sub entry on an ordinary topic: refused.
        assert!(may(&store, "bob", Resource::topic("orders"), &[Action::Sub], "127.0.0.1").is_err());
        // Source addresses: inside the block only; a retry topic stands for its group.
        assert!(may(&store, "bob", Resource::group("g1"), &[Action::Sub], "10.1.2.3").is_ok());
        assert!(may(&store, "bob", Resource::topic("%RETRY%g1"), &[Action::Sub], "10.1.2.3").is_ok());
        assert!(may(&store, "bob", Resource::group("g1"), &[Action::Sub], "192.168.0.1").is_err());
        // A literal Deny beats a prefix's Allow.
        acl(&store, "bob", "Default", vec![entry("Topic:tie", &["Pub"], &[], "Allow")]);
        acl(
            &store,
            "bob",
            "Custom",
            vec![
                entry("Topic:tie2", &["Pub"], &[], "Deny"),
                entry("Topic:tie2*", &["All"], &[], "Allow"),
            ],
        );
        assert!(may(&store, "bob", Resource::topic("tie2"), pub_, "127.0.0.1").is_err());
        // The DEFAULT policy is consulted only when nothing in CUSTOM matches: Topic:* covers
        // `tie` in CUSTOM, so the DEFAULT entry is not needed; a Get on `tie` finds nothing.
        assert!(may(&store, "bob", Resource::topic("tie"), &[Action::Get], "127.0.0.1").is_err());
    }

    #[test]
    fn super_users_pass_and_unknown_or_unsigned_subjects_do_not() {
        let store = AuthStore::in_memory();
        user(&store, "root", "Super");
        assert!(may(&store, "root", Resource::cluster("c"), &[Action::Update], "1.2.3.4").is_ok());
        assert!(may(&store, "ghost", Resource::topic("t"), &[Action::Pub], "1.2.3.4").is_err());
        let check = Check {
            resource: Resource::topic("t"),
            actions: &[Action::Pub],
        };
        let e = store.authorize(&on(), 10, &Principal::Unchecked(None), &[check], "1.2.3.4".parse().unwrap());
        assert!(matches!(e, Err(AuthError::Authorization(_))));
    }

    #[test]
    fn tables_survive_a_reopen_and_changes_follow_rocketmq() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = AuthStore::open(dir.path()).unwrap();
            user(&store, "carol", "Normal");
            assert!(
                store
                    .create_user(&UserInfo {
                        username: Some("carol".into()),
                        password: Some("p".into()),
                        ..UserInfo::default()
                    })
                    .is_err()
            );
            acl(
                &store,
                "carol",
                "Custom",
                vec![entry("Topic:a", &["Pub"], &[], "Allow"), entry("Topic:b", &["Pub"], &[], "Allow")],
            );
            // Merged by resource: the entry for Topic:a is replaced.
            acl(&store, "carol", "Custom", vec![entry("Topic:a", &["Sub"], &["127.0.0.1"], "Deny")]);
            store.delete_acl("User:carol", None, Some("Topic:b")).unwrap();
            assert!(
                store
                    .put_acl(
                        &AclInfo {
                            subject: Some("User:nobody".into()),
                            policies: Some(vec![])
                        },
                        None
                    )
                    .is_err()
            );
        }
        let store = AuthStore::open(dir.path()).unwrap();
        let got = store.get_acl("User:carol").unwrap().unwrap();
        let entries = got.policies.unwrap()[0].entries.clone().unwrap();
        assert_eq!(entries, vec![entry("Topic:a", &["Sub"], &["127.0.0.1"], "Deny")]);
        assert_eq!(store.get_user("carol").unwrap().password.as_deref(), Some("carol-secret"));
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(dir.path().join("users.json")).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        store.delete_user("carol").unwrap();
        assert!(store.get_acl("User:carol").unwrap().is_none());
        assert!(store.list_users(None).is_empty());
    }

    #[test]
    fn malformed_policies_are_refused_with_the_reason() {
        let store = AuthStore::in_memory();
        user(&store, "dan", "Normal");
        for (bad, why) in [
            (entry("Queue:x", &["Pub"], &[], "Allow"), "resource"),
            (entry("Topic:x", &["Fly"], &[], "Allow"), "action"),
            (entry("Topic:x", &["Pub"], &["10.0.0.0/33"], "Allow"), "source ip"),
            (entry("Topic:x", &["Pub"], &[], "Maybe"), "decision"),
        ] {
            let info = AclInfo {
                subject: Some("User:dan".into()),
                policies: Some(vec![PolicyInfo {
                    policy_type: None,
                    entries: Some(vec![bad]),
                }]),
            };
            let e = store.put_acl(&info, None).unwrap_err();
            assert!(e.to_string().contains(why), "{e} should name the {why}");
        }
    }
}
