//! `controller.conf`: RocketMQ's controller keys (Java properties), with Petrel's defaults
//! where they differ, each documented in docs/configuration.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::node::RaftTiming;

/// Every key `petrel controller` reads, with what it means.
pub const CONTROLLER_KEYS: &[(&str, &str, &str)] = &[
    (
        "controllerDLegerGroup",
        "petrel-controller",
        "Name of the controller group (reported by getControllerMetaData).",
    ),
    (
        "controllerDLegerPeers",
        "n0-127.0.0.1:9877",
        "Every controller of the group, `id-host:port;…`. Ids are `n` and a number. Each controller listens on its own address for the other controllers' Raft messages and for brokers and mqadmin (as RocketMQ's DLedger controller does), so brokers' `controllerAddr` lists these same addresses.",
    ),
    ("controllerDLegerSelfId", "n0", "This controller's id among the peers."),
    (
        "bindAddress",
        "",
        "Petrel: the address this controller listens on, with the port of its own `controllerDLegerPeers` entry. Empty: that entry's host. For a controller that others reach through an address it does not own (a proxy, a NAT).",
    ),
    (
        "controllerStorePath",
        "./controller",
        "Directory of this controller's Raft log, vote and snapshot.",
    ),
    (
        "scanNotActiveBrokerInterval",
        "1000",
        "Milliseconds between the leader's scans for masters that stopped heartbeating (RocketMQ: 5000).",
    ),
    (
        "enableElectUncleanMaster",
        "false",
        "Elect a replica outside the SyncStateSet when none inside is alive (may lose acknowledged messages).",
    ),
    (
        "notifyBrokerRoleChanged",
        "true",
        "Tell every live replica of a set at once when its master changes (NOTIFY_BROKER_ROLE_CHANGED).",
    ),
    (
        "raftHeartbeatIntervalMs",
        "100",
        "Petrel: the Raft leader's heartbeat to the other controllers.",
    ),
    (
        "raftElectionTimeoutMs",
        "500",
        "Petrel: a controller that hears no leader for this long (to twice it) stands for election.",
    ),
    (
        "controllerRaftSecret",
        "",
        "Petrel: a secret (16 bytes or more) the controllers of a group share. With it, a connection must prove it (HMAC-SHA256 over fresh nonces, both ways) before any Raft message on it is served; a forged VoteRequest or AppendEntries from anyone else is refused and logged. Unset: Raft messages are served to whoever sends them (keep the port on a trusted network). Brokers' and mqadmin's requests need no secret either way. Shown masked.",
    ),
    (
        "tls.server.mode",
        "disabled",
        "TLS on this controller's port (RocketMQ's key): `disabled`, `permissive` (TLS and plain connections, told apart by their first byte) or `enforcing` (TLS only). Not `disabled`: this controller also connects to its peers over TLS, and a `controllerRaftSecret` proof is bound to each TLS session, so a relay between two sessions cannot pass it. Brokers connect in plain text unless they use TLS themselves: keep `permissive` where they do not.",
    ),
    (
        "tls.server.certPath",
        "",
        "PEM certificate chain this controller presents (leaf first).",
    ),
    ("tls.server.keyPath", "", "PEM private key of that certificate, unencrypted."),
    (
        "tls.client.trustCertPath",
        "",
        "PEM CA certificates a peer controller's certificate is verified against. Empty: sessions to peers are encrypted without verifying their certificate; `controllerRaftSecret`, bound to the session, is then what authenticates them.",
    ),
    (
        "raftSnapshotEveryEntries",
        "1000",
        "Petrel: applied entries between two snapshots; the log before a snapshot is purged.",
    ),
];

/// A controller's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    pub group: String,
    /// Raft id → (the peer's name, e.g. `n0`; its Raft address).
    pub peers: BTreeMap<u64, (String, String)>,
    pub self_id: u64,
    /// Listen here rather than on the host of this controller's own peer entry.
    pub bind_address: Option<std::net::IpAddr>,
    pub store_path: PathBuf,
    pub scan_not_active_broker_interval_ms: u64,
    pub enable_elect_unclean_master: bool,
    pub notify_broker_role_changed: bool,
    pub timing: RaftTiming,
    /// Serve Prometheus metrics (`metricsExporterType=PROM`).
    pub metrics_prom: bool,
    pub metrics_prom_exporter_host: std::net::IpAddr,
    pub metrics_prom_exporter_port: u16,
    /// `controllerRaftSecret`: proved on every Raft connection, both ways.
    pub raft_secret: Option<petrel_auth::PeerSecret>,
    /// `tls.server.mode`: TLS on the port, and on the connections to peers when not disabled.
    pub tls_mode: petrel_remoting::TlsMode,
    pub tls_cert_path: Option<PathBuf>,
    pub tls_key_path: Option<PathBuf>,
    /// `tls.client.trustCertPath`: the CAs peers' certificates are verified against.
    pub tls_trust_cert_path: Option<PathBuf>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        let mut config = ControllerConfig {
            group: String::new(),
            peers: BTreeMap::new(),
            self_id: 0,
            bind_address: None,
            store_path: PathBuf::new(),
            scan_not_active_broker_interval_ms: 0,
            enable_elect_unclean_master: false,
            notify_broker_role_changed: false,
            timing: RaftTiming::default(),
            metrics_prom: false,
            // This host only unless configured: metrics are not for everyone who can reach the port.
            metrics_prom_exporter_host: std::net::IpAddr::from([127, 0, 0, 1]),
            metrics_prom_exporter_port: 0,
            raft_secret: None,
            tls_mode: petrel_remoting::TlsMode::Disabled,
            tls_cert_path: None,
            tls_key_path: None,
            tls_trust_cert_path: None,
        };
        for (key, default, _) in CONTROLLER_KEYS {
            assert!(config.set(key, default).is_ok(), "the default of {key} parses");
        }
        config
    }
}

/// A key with a value it cannot use.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {value:?} is not valid: {expected}")]
pub struct BadValue {
    pub key: String,
    pub value: String,
    pub expected: String,
}

fn bad(key: &str, value: &str, expected: &str) -> BadValue {
    BadValue {
        key: key.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    }
}

fn parse<T: std::str::FromStr>(key: &str, value: &str, expected: &str) -> Result<T, BadValue> {
    value.trim().parse().map_err(|_| bad(key, value, expected))
}

/// `n3` → 3: RocketMQ names peers `n0`, `n1`, …; the number is the Raft id.
fn peer_id(key: &str, name: &str) -> Result<u64, BadValue> {
    name.trim()
        .strip_prefix('n')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| bad(key, name, "a peer id such as n0"))
}

impl ControllerConfig {
    /// Sets one key; `Ok(false)` for a key Petrel does not know (a warning, not an error,
    /// because RocketMQ's controller files carry keys Petrel has no use for).
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, BadValue> {
        match key {
            "controllerDLegerGroup" => self.group = value.trim().to_owned(),
            "controllerDLegerPeers" => {
                let mut peers = BTreeMap::new();
                for peer in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                    let (name, addr) = peer.split_once('-').ok_or_else(|| bad(key, peer, "id-host:port"))?;
                    if peers
                        .insert(peer_id(key, name)?, (name.trim().to_owned(), addr.trim().to_owned()))
                        .is_some()
                    {
                        return Err(bad(key, value, "each peer id once"));
                    }
                }
                if peers.is_empty() {
                    return Err(bad(key, value, "at least one peer"));
                }
                self.peers = peers;
            }
            "controllerDLegerSelfId" => self.self_id = peer_id(key, value)?,
            "bindAddress" if value.trim().is_empty() => self.bind_address = None,
            "bindAddress" => self.bind_address = Some(parse(key, value, "an IP address")?),
            "controllerStorePath" => self.store_path = PathBuf::from(value.trim()),
            "scanNotActiveBrokerInterval" => self.scan_not_active_broker_interval_ms = positive(key, value)?,
            "enableElectUncleanMaster" => self.enable_elect_unclean_master = parse(key, value, "true or false")?,
            "notifyBrokerRoleChanged" => self.notify_broker_role_changed = parse(key, value, "true or false")?,
            "metricsExporterType" => {
                self.metrics_prom = match value.trim().to_ascii_uppercase().as_str() {
                    "PROM" => true,
                    "DISABLE" => false,
                    _ => return Err(bad(key, value, "PROM or DISABLE (Petrel has no gRPC or log exporter)")),
                }
            }
            "metricsPromExporterHost" => self.metrics_prom_exporter_host = parse(key, value, "an IP address")?,
            "metricsPromExporterPort" => self.metrics_prom_exporter_port = parse(key, value, "a port")?,
            "raftHeartbeatIntervalMs" => self.timing.heartbeat_interval_ms = positive(key, value)?,
            "raftElectionTimeoutMs" => {
                let ms = positive(key, value)?;
                self.timing.election_timeout_min_ms = ms;
                self.timing.election_timeout_max_ms = ms * 2;
            }
            "raftSnapshotEveryEntries" => self.timing.snapshot_every_entries = positive(key, value)?,
            "tls.server.mode" => {
                self.tls_mode = match value.trim().to_ascii_lowercase().as_str() {
                    "disabled" => petrel_remoting::TlsMode::Disabled,
                    "permissive" => petrel_remoting::TlsMode::Permissive,
                    "enforcing" => petrel_remoting::TlsMode::Enforcing,
                    _ => return Err(bad(key, value, "disabled, permissive or enforcing")),
                }
            }
            "tls.server.certPath" => self.tls_cert_path = path_or_none(value),
            "tls.server.keyPath" => self.tls_key_path = path_or_none(value),
            "tls.client.trustCertPath" => self.tls_trust_cert_path = path_or_none(value),
            "controllerRaftSecret" if value.is_empty() => self.raft_secret = None,
            // The value never reaches an error message: it is a secret.
            "controllerRaftSecret" => {
                self.raft_secret = Some(petrel_auth::PeerSecret::new(value).map_err(|why| bad(key, "******", &why.to_string()))?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads a `controller.conf`; returns the keys Petrel does not know.
    pub fn apply_file(&mut self, path: &Path) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let map = java_properties::read(std::io::BufReader::new(file)).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut unknown = Vec::new();
        for (key, value) in map {
            if !self.set(&key, &value)? {
                unknown.push(key);
            }
        }
        Ok(unknown)
    }

    /// Checks what a single key cannot: this controller is one of the peers, and Raft's
    /// heartbeat is well inside its election timeout.
    pub fn validate(&self) -> Result<(), String> {
        if !self.peers.contains_key(&self.self_id) {
            return Err(format!("controllerDLegerSelfId n{} is not in controllerDLegerPeers", self.self_id));
        }
        if self.timing.heartbeat_interval_ms * 3 > self.timing.election_timeout_min_ms {
            return Err("raftElectionTimeoutMs must be at least three raftHeartbeatIntervalMs".into());
        }
        Ok(())
    }

    /// This controller's Raft address.
    pub fn raft_address(&self) -> Option<&str> {
        self.peers.get(&self.self_id).map(|(_, addr)| addr.as_str())
    }

    /// Where this controller listens: its Raft address, or `bindAddress` with that address's port.
    pub fn listen_address(&self) -> Option<String> {
        let own = self.raft_address()?;
        match self.bind_address {
            None => Some(own.to_owned()),
            Some(ip) => {
                let port: u16 = own.rsplit_once(':')?.1.parse().ok()?;
                Some(std::net::SocketAddr::new(ip, port).to_string())
            }
        }
    }
}

fn path_or_none(value: &str) -> Option<PathBuf> {
    let v = value.trim();
    (!v.is_empty()).then(|| PathBuf::from(v))
}

impl ControllerConfig {
    /// The port's TLS (`None` when disabled), and the TLS of connections to peers.
    ///
    /// # Errors
    /// A certificate, key or CA file that cannot be loaded.
    #[allow(clippy::type_complexity, reason = "the two halves of one setting")]
    pub fn tls(
        &self,
    ) -> Result<
        (
            Option<std::sync::Arc<petrel_remoting::ServerTls>>,
            Option<std::sync::Arc<petrel_remoting::ClientTls>>,
        ),
        petrel_remoting::SetupError,
    > {
        let server = petrel_remoting::ServerTls::load(self.tls_mode, self.tls_cert_path.as_deref(), self.tls_key_path.as_deref())?;
        let client = match self.tls_mode {
            petrel_remoting::TlsMode::Disabled => None,
            _ => Some(petrel_remoting::ClientTls::load(self.tls_trust_cert_path.as_deref())?),
        };
        Ok((server, client))
    }
}

fn positive(key: &str, value: &str) -> Result<u64, BadValue> {
    let n: u64 = parse(key, value, "a positive integer")?;
    if n == 0 {
        return Err(bad(key, value, "a positive integer"));
    }
    Ok(n)
}
