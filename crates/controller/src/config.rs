//! `controller.conf`: RocketMQ's controller keys (Java properties), with Petrel's defaults
//! where they differ, declared once in a `petrel_kit::config_table!` that also documents them
//! in docs/configuration.md.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use petrel_kit::config::{ConfigError, ConfigValue, MetricsExporter, Secret, at_least};
use petrel_remoting::TlsMode;

use crate::node::RaftTiming;

/// Where a controller key is documented (one table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerSection {
    /// Every controller key: `controller.conf` has one table.
    Controller,
}

/// `controllerDLegerPeers`: Raft id → (the peer's name, e.g. `n0`; its Raft address).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Peers(pub BTreeMap<u64, (String, String)>);

impl ConfigValue for Peers {
    const EXPECTED: &'static str = "id-host:port;… with ids n0, n1, …, each once, at least one";
    fn parse(raw: &str) -> Option<Self> {
        let mut peers = BTreeMap::new();
        for peer in raw.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, addr) = peer.split_once('-')?;
            let id = PeerId::parse(name)?.0;
            if peers.insert(id, (name.trim().to_owned(), addr.trim().to_owned())).is_some() {
                return None;
            }
        }
        (!peers.is_empty()).then_some(Peers(peers))
    }
    fn render(&self) -> String {
        let entries: Vec<String> = self.0.values().map(|(name, addr)| format!("{name}-{addr}")).collect();
        entries.join(";")
    }
}

/// A controller's id as RocketMQ names it: `n3` is Raft id 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerId(pub u64);

impl ConfigValue for PeerId {
    const EXPECTED: &'static str = "a peer id such as n0";
    fn parse(raw: &str) -> Option<Self> {
        raw.trim().strip_prefix('n').and_then(|n| n.parse().ok()).map(PeerId)
    }
    fn render(&self) -> String {
        format!("n{}", self.0)
    }
}

/// RocketMQ's controller.conf keys (its ControllerConfig, JraftConfig and Netty settings, from
/// rocketmq-all-5.3.3): those Petrel does not use are ignored with a warning.
const ROCKETMQ_KEYS: &str = include_str!("rocketmq_controller_keys.txt");

petrel_kit::config_table! {
    /// A controller's settings; see [`CONTROLLER_KEYS`].
    pub struct ControllerConfig, sections ControllerSection, keys CONTROLLER_KEYS {
        Controller {
            "controllerDLegerGroup" => group: String = "petrel-controller".into();
                "Name of the controller group (reported by getControllerMetaData)."
            "controllerDLegerPeers" => peers: Peers = Peers(BTreeMap::from([(0, ("n0".to_owned(), "127.0.0.1:9877".to_owned()))]));
                "Every controller of the group, `id-host:port;…`. Ids are `n` and a number. Each controller listens on its own address for the other controllers' Raft messages and for brokers and mqadmin (as RocketMQ's DLedger controller does), so brokers' `controllerAddr` lists these same addresses."
            "controllerDLegerSelfId" => self_id: PeerId = PeerId(0);
                "This controller's id among the peers."
            "bindAddress" => bind_address: Option<IpAddr> = None;
                "Petrel: the address this controller listens on, with the port of its own `controllerDLegerPeers` entry. Empty: that entry's host. For a controller that others reach through an address it does not own (a proxy, a NAT)."
            "controllerStorePath" => store_path: PathBuf = PathBuf::from("./controller");
                "Directory of this controller's Raft log, vote and snapshot."
            "scanNotActiveBrokerInterval" => scan_not_active_broker_interval_ms: u64 = 1000, check at_least(1);
                "Milliseconds between the leader's scans for masters that stopped heartbeating (RocketMQ: 5000)."
            "enableElectUncleanMaster" => enable_elect_unclean_master: bool = false;
                "Elect a replica outside the SyncStateSet when none inside is alive (may lose acknowledged messages)."
            "notifyBrokerRoleChanged" => notify_broker_role_changed: bool = true;
                "Tell every live replica of a set at once when its master changes (NOTIFY_BROKER_ROLE_CHANGED)."
            "raftHeartbeatIntervalMs" => raft_heartbeat_interval_ms: u64 = 100, check at_least(1);
                "Petrel: the Raft leader's heartbeat to the other controllers."
            "raftElectionTimeoutMs" => raft_election_timeout_ms: u64 = 500, check at_least(1);
                "Petrel: a controller that hears no leader for this long (to twice it) stands for election."
            "controllerRaftSecret" => controller_raft_secret: Option<Secret> = None, check |v: &Option<Secret>| v.as_ref().map_or(Ok(()), |s| petrel_auth::PeerSecret::new(s.expose()).map(drop));
                "Petrel: a secret (16 bytes or more) the controllers of a group share. With it, a connection must prove it (HMAC-SHA256 over fresh nonces, both ways) before any Raft message on it is served; a forged VoteRequest or AppendEntries from anyone else is refused and logged. Unset: Raft messages are served to whoever sends them (keep the port on a trusted network). Brokers' and mqadmin's requests need no secret either way. Shown masked."
            "tls.server.mode" => tls_mode: TlsMode = TlsMode::Disabled;
                "TLS on this controller's port (RocketMQ's key): `disabled`, `permissive` (TLS and plain connections, told apart by their first byte) or `enforcing` (TLS only). Not `disabled`: this controller also connects to its peers over TLS, and a `controllerRaftSecret` proof is bound to each TLS session, so a relay between two sessions cannot pass it. Brokers connect in plain text unless they use TLS themselves: keep `permissive` where they do not."
            "tls.server.certPath" => tls_cert_path: Option<PathBuf> = None;
                "PEM certificate chain this controller presents (leaf first)."
            "tls.server.keyPath" => tls_key_path: Option<PathBuf> = None;
                "PEM private key of that certificate, unencrypted."
            "tls.client.trustCertPath" => tls_trust_cert_path: Option<PathBuf> = None;
                "PEM CA certificates a peer controller's certificate is verified against. Empty: sessions to peers are encrypted without verifying their certificate; `controllerRaftSecret`, bound to the session, is then what authenticates them."
            "raftSnapshotEveryEntries" => raft_snapshot_every_entries: u64 = 1000, check at_least(1);
                "Petrel: applied entries between two snapshots; the log before a snapshot is purged."
            "metricsExporterType" => metrics_exporter_type: MetricsExporter = MetricsExporter::Disable;
                "`PROM` serves Prometheus metrics of this controller (its Raft role and term, each broker set's master, epochs and SyncStateSet, elections) at `http://metricsPromExporterHost:metricsPromExporterPort/metrics` (RocketMQ's keys; `DISABLE` serves none)."
            "metricsPromExporterHost" => metrics_prom_exporter_host: IpAddr = IpAddr::from([127, 0, 0, 1]);
                "Address the metrics endpoint listens on. Petrel's default is this host only: set `0.0.0.0` or an interface's address for a Prometheus elsewhere."
            "metricsPromExporterPort" => metrics_prom_exporter_port: u16 = 5557;
                "Port of the metrics endpoint (RocketMQ's default)."
        }
    }
}

impl petrel_kit::config::Table for ControllerConfig {
    const FILE: &'static str = "controller.conf";
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        self.set_from_table(key, value)
    }
    fn known_to_rocketmq(key: &str) -> bool {
        ROCKETMQ_KEYS.lines().any(|k| k == key)
    }
}

impl ControllerConfig {
    /// Sets one key; `Ok(false)` for a key that is not the controller's.
    ///
    /// # Errors
    /// A value the key cannot use, naming the key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        self.set_from_table(key, value)
    }

    /// Reads a `controller.conf`; returns the RocketMQ keys it ignored.
    ///
    /// # Errors
    /// The file cannot be read, a line is not properties syntax, a value is bad or a key is
    /// unknown, naming the line.
    pub fn apply_file(&mut self, path: &std::path::Path) -> Result<Vec<String>, ConfigError> {
        petrel_kit::config::apply_file(self, path)
    }

    /// Checks what a single key cannot: this controller is one of the peers, and Raft's
    /// heartbeat is well inside its election timeout.
    ///
    /// # Errors
    /// The keys that do not fit together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.peers.0.contains_key(&self.self_id.0) {
            return Err(ConfigError::Inconsistent(format!(
                "controllerDLegerSelfId n{} is not in controllerDLegerPeers",
                self.self_id.0
            )));
        }
        if self.raft_heartbeat_interval_ms.saturating_mul(3) > self.raft_election_timeout_ms {
            return Err(ConfigError::Inconsistent(
                "raftElectionTimeoutMs must be at least three raftHeartbeatIntervalMs".into(),
            ));
        }
        Ok(())
    }

    /// Raft's timings: an election after `raftElectionTimeoutMs` to twice it.
    #[must_use]
    pub fn timing(&self) -> RaftTiming {
        RaftTiming {
            heartbeat_interval_ms: self.raft_heartbeat_interval_ms,
            election_timeout_min_ms: self.raft_election_timeout_ms,
            election_timeout_max_ms: self.raft_election_timeout_ms.saturating_mul(2),
            snapshot_every_entries: self.raft_snapshot_every_entries,
            ..RaftTiming::default()
        }
    }

    /// `controllerRaftSecret`, proved on every Raft connection both ways.
    #[must_use]
    pub fn raft_secret(&self) -> Option<petrel_auth::PeerSecret> {
        // Checked when set: a secret that is set parses.
        self.controller_raft_secret
            .as_ref()
            .and_then(|s| petrel_auth::PeerSecret::new(s.expose()).ok())
    }

    /// Whether Prometheus metrics are served.
    #[must_use]
    pub fn metrics_prom(&self) -> bool {
        self.metrics_exporter_type == MetricsExporter::Prom
    }

    /// This controller's Raft address.
    #[must_use]
    pub fn raft_address(&self) -> Option<&str> {
        self.peers.0.get(&self.self_id.0).map(|(_, addr)| addr.as_str())
    }

    /// Where this controller listens: its Raft address, or `bindAddress` with that address's port.
    #[must_use]
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
            TlsMode::Disabled => None,
            _ => Some(petrel_remoting::ClientTls::load(self.tls_trust_cert_path.as_deref())?),
        };
        Ok((server, client))
    }

    /// The Markdown table of every key, as docs/configuration.md shows it.
    #[must_use]
    pub fn markdown_table() -> String {
        petrel_kit::config::markdown_table(CONTROLLER_KEYS, &ControllerSection::Controller)
    }
}
