//! ACL 2.0 in the broker: the settings from `broker.conf`, the user and policy store, and the
//! gate every request passes before its handler — authentication, then the checks of
//! [`checks::checks_for`] — plus the cap on failed authentications per connection.
//!
//! Owns: turning a refusal into NO_PERMISSION with RocketMQ's remark, and counting a
//! connection's failures. Must never: log a secret or a signature, or refuse one client's request
//! by closing anything but that client's connection.

mod checks;

pub use checks::CheckError;
pub(crate) use checks::{GET, PUB, Rule, SUB, rules};

use std::path::PathBuf;
use std::sync::Arc;

use petrel_auth::{Action, AuthError, AuthSettings, AuthStore, Check, Credentials, Principal, Resource};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, error};

use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::services::TopicCheck;

/// The broker's access control.
pub struct Access {
    /// The users and policies, kept under `authConfigPath`.
    pub store: Arc<AuthStore>,
    /// Whether authentication and authorization are on, their whitelists, and how long a
    /// checked signature is trusted on its connection.
    pub settings: AuthSettings,
    /// What this broker signs its own requests with.
    pub inner: Option<Credentials>,
    cluster: String,
    max_failures: u64,
}

/// The resources and actions `request` names, by the access map (for the fuzzer: any request,
/// any code, must get a rule's answer or a refusal, never a panic).
///
/// # Errors
/// As the gate refuses: no rule, or a body that cannot be read.
#[doc(hidden)]
pub fn checks_for_fuzzing(request: &RemotingCommand, cluster: &str) -> Result<Vec<Check>, CheckError> {
    checks::checks_for(request, cluster)
}

pub use petrel_auth::{check_strategy, is_stateful, parse_codes, parse_credentials, parse_init_user};

impl Access {
    /// Opens the store under `authConfigPath` and creates the configured super users.
    ///
    /// # Errors
    /// The tables cannot be read or written, or a key does not parse (already checked by the
    /// configuration, so only on a hand-built config).
    pub fn open(config: &BrokerConfig) -> Result<Access, BrokerError> {
        let dir = config
            .auth_config_path
            .clone()
            .unwrap_or_else(|| PathBuf::from(&config.store_path_root_dir).join("config").join("auth"));
        // Its entry in the config folder is durable before any user is written into it.
        petrel_kit::fs::create_dir_durably(&dir).map_err(BrokerError::io(format!("access control: {}", dir.display())))?;
        let store = AuthStore::open(&dir).map_err(BrokerError::Auth)?;
        if let Some(json) = &config.init_authentication_user {
            let (name, password) = parse_init_user(json.expose()).map_err(BrokerError::Auth)?;
            store.ensure_super_user(&name, &password).map_err(BrokerError::Auth)?;
        }
        let inner = match &config.inner_client_authentication_credentials {
            Some(json) => {
                let c = parse_credentials(json.expose()).map_err(BrokerError::Auth)?;
                store.ensure_super_user(&c.access_key, &c.secret_key).map_err(BrokerError::Auth)?;
                Some(c)
            }
            None => None,
        };
        let settings = AuthSettings {
            authentication_enabled: config.authentication_enabled,
            authorization_enabled: config.authorization_enabled,
            authentication_whitelist: parse_codes(&config.authentication_whitelist).map_err(BrokerError::Auth)?,
            authorization_whitelist: parse_codes(&config.authorization_whitelist).map_err(BrokerError::Auth)?,
            stateful_for: is_stateful(&config.authentication_strategy)
                .then(|| std::time::Duration::from_secs(config.stateful_authentication_cache_expired_second)),
        };
        if settings.any_enabled() {
            tracing::info!(
                authentication = settings.authentication_enabled,
                authorization = settings.authorization_enabled,
                dir = %dir.display(),
                users = store.list_users(None).len(),
                "access control on"
            );
        }
        Ok(Access {
            store: Arc::new(store),
            settings,
            inner,
            cluster: config.broker_cluster_name.clone(),
            max_failures: config.max_authentication_failures_per_connection,
        })
    }

    /// Signs a request this broker sends with its inner credentials, if it has them.
    pub fn sign(&self, request: &mut RemotingCommand) {
        if let Some(c) = &self.inner {
            petrel_auth::sign(request, &c.access_key, &c.secret_key);
        }
    }

    /// Whether `username` may act as a super user (for the user admin requests).
    #[must_use]
    pub fn is_super(&self, principal: Option<&str>) -> bool {
        principal.is_none_or(|name| self.store.is_super_user(name))
    }

    /// Lets `request` through, with who sent it, or answers why not. The failure that reaches the
    /// connection's cap closes it once the answer is written.
    ///
    /// # Errors
    /// The answer to send instead of serving the request.
    pub fn admit(&self, conn: &Arc<Connection>, request: &RemotingCommand) -> Result<Principal, Box<RemotingCommand>> {
        if !self.settings.any_enabled() {
            return Ok(Principal::Unchecked(None));
        }
        let principal = match self.settings.stateful_for {
            None => self.store.authenticate(&self.settings, request),
            Some(within) => {
                // Only a signature actually checked starts a new trusted window.
                let hit = std::cell::Cell::new(false);
                let result = self.store.authenticate_cached(&self.settings, request, |name| {
                    hit.set(conn.verified_within(name, within));
                    hit.get()
                });
                if let Ok(Principal::User(name)) = &result
                    && !hit.get()
                {
                    conn.remember_verified(name);
                }
                result
            }
        };
        let principal = match principal {
            Ok(p) => p,
            Err(e) => return Err(Box::new(self.refuse_authentication(conn, request, &e))),
        };
        if !self.settings.authorization_enabled || self.settings.authorization_whitelist.contains(&request.code) {
            return Ok(principal);
        }
        let checks = checks::checks_for(request, &self.cluster).map_err(|why| {
            Box::new(error(
                request,
                resp::NO_PERMISSION,
                format!("cannot tell what the request accesses: {why}"),
            ))
        })?;
        let source = conn.peer().ip();
        self.store
            .authorize(&self.settings, request.code, &principal, &checks, source)
            .map_err(|e| {
                tracing::debug!(code = request.code, user = principal.name().unwrap_or("-"), %source, reason = %e, "request refused");
                Box::new(error(request, resp::NO_PERMISSION, e.to_string()))
            })?;
        Ok(principal)
    }

    /// Who sent a request the gate already let through: the user its `AccessKey` names (the
    /// gate verified the signature), or nobody checked.
    fn principal_of_admitted(&self, request: &RemotingCommand) -> Principal {
        let name = request.ext(petrel_auth::ACCESS_KEY).map(str::to_owned);
        match name {
            Some(name) if self.settings.authentication_enabled && !self.settings.authentication_whitelist.contains(&request.code) => {
                Principal::User(name)
            }
            other => Principal::Unchecked(other),
        }
    }

    /// A check of a topic a handler finds while serving `request` (the topic of the record at
    /// a commit-log offset, which the request's fields need not name truthfully), for the
    /// sender of `request`, which the gate has let through. Everyone passes with authorization
    /// off. A retry topic stands for its group.
    #[must_use]
    pub fn topic_check(self: &Arc<Self>, conn: &Connection, request: &RemotingCommand, actions: &'static [Action]) -> TopicCheck {
        let principal = self.principal_of_admitted(request);
        let (access, code, source) = (self.clone(), request.code, conn.peer().ip());
        Arc::new(move |topic: &str| {
            let checks = [Check {
                resource: Resource::topic(topic),
                actions,
            }];
            access
                .store
                .authorize(&access.settings, code, &principal, &checks, source)
                .map_err(|e| {
                    tracing::debug!(code, user = principal.name().unwrap_or("-"), %source, reason = %e, "found record refused");
                    BrokerError::NoPermission(e.to_string())
                })
        })
    }

    fn refuse_authentication(&self, conn: &Arc<Connection>, request: &RemotingCommand, e: &AuthError) -> RemotingCommand {
        let failures = conn.add_strike(self.max_failures);
        let peer = conn.peer();
        tracing::debug!(code = request.code, %peer, failures, reason = %e, "authentication failed");
        if failures >= self.max_failures {
            tracing::warn!(%peer, failures, "closing a connection after too many failed authentications");
            return error(
                request,
                resp::NO_PERMISSION,
                format!("{e}; {failures} failed authentications on this connection, closing it"),
            );
        }
        error(request, resp::NO_PERMISSION, e.to_string())
    }
}
