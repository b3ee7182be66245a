//! `namesrv.conf`: the name server's own keys (RocketMQ's names: `listenPort`, the ACL 2.0 and
//! TLS keys a broker.conf spells the same way), declared once in a `petrel_kit::config_table!`
//! that also documents them in docs/configuration.md. With `enableControllerInNamesrv=true` the
//! same file carries controller.conf's keys; the `petrel` binary applies those to the
//! controller's table.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use petrel_auth::{AuthError, AuthSettings, AuthStore};
use petrel_kit::config::{ConfigError, Secret, at_least};
use petrel_remoting::TlsMode;

use crate::NamesrvAccess;

/// Where a name-server key is documented (one table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamesrvSection {
    /// The name server's keys, all in one table.
    Namesrv,
}

/// RocketMQ's namesrv.conf keys (its NamesrvConfig and Netty settings, and with
/// `enableControllerInNamesrv` its ControllerConfig and JraftConfig, from rocketmq-all-5.3.3):
/// those Petrel does not use are ignored with a warning.
const ROCKETMQ_KEYS: &str = include_str!("rocketmq_namesrv_keys.txt");

/// Whether RocketMQ's name server reads `key` in namesrv.conf.
#[must_use]
pub fn known_to_rocketmq(key: &str) -> bool {
    ROCKETMQ_KEYS.lines().any(|k| k == key)
}

petrel_kit::config_table! {
    /// `petrel namesrv`'s settings; see [`NAMESRV_KEYS`].
    pub struct NamesrvConfig, sections NamesrvSection, keys NAMESRV_KEYS {
        Namesrv {
            "listenPort" => listen_port: u16 = 9876, check at_least(1);
                "The name server's port (`--listen` overrides `bindAddress:listenPort`)."
            "bindAddress" => bind_address: IpAddr = IpAddr::from([0, 0, 0, 0]);
                "Petrel: the address the name server listens on (every interface by default)."
            "enableControllerInNamesrv" => enable_controller_in_namesrv: bool = false;
                "Run a controller in this process too, on its own peer address, with the controller keys (RocketMQ's embedded controller); the same file then carries them."
            "authenticationEnabled" => authentication_enabled: bool = false;
                "Requests that change routes (REGISTER/UNREGISTER_BROKER, DELETE_TOPIC_IN_NAMESRV, the KV writes) must be signed by a known user (ACL 2.0, as broker.conf's key)."
            "authorizationEnabled" => authorization_enabled: bool = false;
                "A registering broker's user must be a super user or hold the clusters it registers in."
            "initAuthenticationUser" => init_authentication_user: Option<Secret> = None, check |v: &Option<Secret>| v.as_ref().map_or(Ok(()), |j| petrel_auth::parse_init_user(j.expose()).map(drop));
                "A super user created at start, `{\"username\":…,\"password\":…}` (shown masked)."
            "innerClientAuthenticationCredentials" => inner_client_authentication_credentials: Option<Secret> = None, check |v: &Option<Secret>| v.as_ref().map_or(Ok(()), |j| petrel_auth::parse_credentials(j.expose()).map(drop));
                "The brokers' own credentials, `{\"accessKey\":…,\"secretKey\":…}`, taken as a super user (shown masked)."
            "maxAuthenticationFailuresPerConnection" => max_authentication_failures_per_connection: u64 = 8, check at_least(1);
                "Petrel: a connection is closed after this many failed signatures."
            "tls.server.mode" => tls_server_mode: TlsMode = TlsMode::Disabled;
                "TLS on the name server's port: `disabled`, `permissive` (TLS and plain connections) or `enforcing`."
            "tls.server.certPath" => tls_server_cert_path: Option<PathBuf> = None;
                "PEM certificate chain the name server presents (leaf first)."
            "tls.server.keyPath" => tls_server_key_path: Option<PathBuf> = None;
                "PEM private key of that certificate, unencrypted."
        }
    }
}

impl petrel_kit::config::Table for NamesrvConfig {
    const FILE: &'static str = "namesrv.conf";
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        self.set_from_table(key, value)
    }
    fn known_to_rocketmq(key: &str) -> bool {
        known_to_rocketmq(key)
    }
}

impl NamesrvConfig {
    /// `bindAddress:listenPort`.
    #[must_use]
    pub fn listen_address(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// The users and switches of access control, the configured super users created.
    ///
    /// # Errors
    /// A super user cannot be created (the values were checked when set).
    pub fn access(&self) -> Result<NamesrvAccess, AuthError> {
        let store = AuthStore::in_memory();
        if let Some(json) = &self.init_authentication_user {
            let (name, password) = petrel_auth::parse_init_user(json.expose())?;
            store.ensure_super_user(&name, &password)?;
        }
        if let Some(json) = &self.inner_client_authentication_credentials {
            let c = petrel_auth::parse_credentials(json.expose())?;
            store.ensure_super_user(&c.access_key, &c.secret_key)?;
        }
        let settings = AuthSettings {
            authentication_enabled: self.authentication_enabled,
            authorization_enabled: self.authorization_enabled,
            ..AuthSettings::default()
        };
        Ok(NamesrvAccess {
            store: Arc::new(store),
            settings,
            max_failures: self.max_authentication_failures_per_connection,
        })
    }

    /// The port's TLS; `None` when disabled.
    ///
    /// # Errors
    /// The certificate or key cannot be loaded.
    pub fn server_tls(&self) -> Result<Option<Arc<petrel_remoting::ServerTls>>, petrel_remoting::SetupError> {
        petrel_remoting::ServerTls::load(
            self.tls_server_mode,
            self.tls_server_cert_path.as_deref(),
            self.tls_server_key_path.as_deref(),
        )
    }

    /// The Markdown table of every key, as docs/configuration.md shows it.
    #[must_use]
    pub fn markdown_table() -> String {
        petrel_kit::config::markdown_table(NAMESRV_KEYS, &NamesrvSection::Namesrv)
    }
}
