//! The broker's part in replication: from `brokerRole` and the HA keys, a master's HA server
//! and ack gate, or a slave's HA client (see `petrel-replication` for the protocol).
//!
//! Owns: turning configuration into the replication pieces, and the roles' rules (a slave has
//! brokerId > 0, a master brokerId 0). Must never: start a master's HA server on a slave or a
//! slave's client on a master.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use petrel_replication::{
    AckGate, AckMode, AckPolicy, AutoSwitchMaster, AutoSwitchSlave, HaMaster, HaSlave, MasterConfig, SlaveConfig, SyncStateView,
};
use petrel_store::{EpochEntry, EpochFile, MessageStore, Watermark};

use crate::config::{BrokerConfig, BrokerRole};
use crate::error::BrokerError;

/// How long a slave waits between attempts to reach its master.
const RECONNECT_INTERVAL: Duration = Duration::from_secs(1);
/// An ASYNC_MASTER's frames wait this long for more records: a slave at most this much further
/// behind, for one frame (and one wake-up on each side) per millisecond rather than per record.
const ASYNC_LINGER: Duration = Duration::from_millis(1);

/// This broker's replication, as `brokerRole` or controller mode sets it up.
pub enum Replication {
    /// A master (ASYNC_MASTER or SYNC_MASTER): slaves copy its commit log.
    Master {
        /// The HA server slaves connect to, with the gate sends wait on for their acks.
        ha: HaMaster,
    },
    /// A slave: copies its master's commit log.
    Slave {
        /// The HA client following the master.
        ha: HaSlave,
    },
    /// Controller mode: either, as the controllers say, switching at run time.
    Controlled(Arc<Controlled>),
}

/// A controller-mode broker's replication: an HA server that takes slaves only while this
/// broker is master, and an HA client started when it first becomes a slave.
pub struct Controlled {
    /// The HA server, taking slaves only while this broker is master.
    pub ha: HaMaster,
    slave: Mutex<Option<HaSlave>>,
    /// The epoch file: which master epoch wrote which stretch of the commit log.
    pub epochs: Arc<EpochFile>,
    /// What every in-sync replica holds: consumers read no further, on a master or a slave.
    pub confirmed: Arc<Watermark>,
    store: Arc<MessageStore>,
    slave_config: SlaveConfig,
    /// The controllers announced a new role (NOTIFY_BROKER_ROLE_CHANGED): ask them now.
    pub role_changed: tokio::sync::Notify,
    /// Until then this broker sends the controllers no heartbeat: it declined to lead (its log
    /// lost what the set had confirmed), and they must take it for dead to elect another.
    silent_until: Mutex<Option<std::time::Instant>>,
    /// It declined once already in this process's life: a second time it leads anyway (no
    /// other replica was elected meanwhile, so none holds more).
    declined: std::sync::atomic::AtomicBool,
    /// How long the controllers take to give up on a silent broker (`controllerHeartBeatTimeoutMills`).
    heartbeat_timeout: Duration,
}

impl Controlled {
    /// Becomes the master of `epoch` with `sync_state_set` (broker ids, `own_id` included):
    /// stops following, cuts a partial record the old master's stream left at the end,
    /// records the epoch's start and takes slaves.
    ///
    /// # Errors
    /// The cut or the epoch file failing.
    pub fn become_master(&self, epoch: i32, own_id: u64, sync_state_set: &std::collections::BTreeSet<u64>) -> Result<(), BrokerError> {
        if let Some(slave) = self.slave.lock().take() {
            slave.stop();
        }
        self.check_nothing_confirmed_lost(epoch, own_id, sync_state_set)?;
        let log = self.store.commit_log();
        log.cut_partial_record().map_err(BrokerError::from)?;
        match self.epochs.entries().last() {
            // This broker led `epoch` before it restarted, quicker than the controllers' heartbeat
            // timeout, so they still name it: everything past the epoch's start is its own
            // writes as that master, and the epoch goes on from where it began. (Refusing here
            // left the set masterless for as long as the controllers kept naming it.)
            Some(last) if last.epoch == epoch => {
                tracing::info!(
                    epoch,
                    since = last.start_offset,
                    end = log.max_offset(),
                    "resuming as the master of its epoch"
                );
            }
            _ => {
                self.epochs
                    .append(EpochEntry {
                        epoch,
                        start_offset: log.max_offset(),
                    })
                    .map_err(BrokerError::from)?;
                tracing::info!(epoch, start = log.max_offset(), "became master");
            }
        }
        self.set_sync_state_set(own_id, sync_state_set);
        self.ha.set_accepting(true);
        Ok(())
    }

    /// Refuses the master's role, once in this process's life, when this log recovered to less
    /// than readers could read before the restart (a power loss, or a damaged tail recovery
    /// cut): the other members of the SyncStateSet hold what it lost, and as master it would
    /// make them cut it. It then stays silent to the controllers past their heartbeat timeout so
    /// that they elect one of those members, and follows it.
    fn check_nothing_confirmed_lost(&self, epoch: i32, own_id: u64, members: &std::collections::BTreeSet<u64>) -> Result<(), BrokerError> {
        let end = self.store.commit_log().max_offset();
        let before = self.store.readable_before_restart();
        if end >= before {
            return Ok(());
        }
        let declined = || {
            BrokerError::Unavailable(format!(
                "this broker's log ends at {end}, below the {before} readers could reach before its restart; another replica must lead"
            ))
        };
        if self.silent() {
            return Err(declined());
        }
        let others = members.iter().any(|m| *m != own_id);
        if !others || self.declined.swap(true, std::sync::atomic::Ordering::AcqRel) {
            tracing::error!(
                epoch,
                recovered_end = end,
                readable_before = before,
                "leading although this log lost records consumers could read: no other replica was elected"
            );
            return Ok(());
        }
        let quiet = self.heartbeat_timeout * 2;
        *self.silent_until.lock() = Some(std::time::Instant::now() + quiet);
        tracing::error!(
            epoch,
            recovered_end = end,
            readable_before = before,
            quiet_ms = u64::try_from(quiet.as_millis()).unwrap_or(u64::MAX),
            "declining to lead: this log recovered to less than the SyncStateSet confirmed; silent to the controllers so that they elect a member that holds it"
        );
        Err(declined())
    }

    /// Whether heartbeats to the controllers are held back now (see
    /// [`Controlled::check_nothing_confirmed_lost`]).
    #[must_use]
    pub fn silent(&self) -> bool {
        self.silent_until.lock().is_some_and(|until| std::time::Instant::now() < until)
    }

    /// Counts `members` (the current set) and those `joiners` that hold what is confirmed, in one
    /// step; returns the joiners taken (see `AckGate::admit_joiners`).
    pub fn admit_joiners(
        &self,
        own_id: u64,
        members: &std::collections::BTreeSet<u64>,
        joiners: &std::collections::BTreeSet<u64>,
    ) -> std::collections::BTreeSet<u64> {
        let mut members = members.clone();
        members.insert(own_id);
        self.ha.gate().admit_joiners(
            &SyncStateView {
                master_id: own_id,
                members,
            },
            joiners,
        )
    }

    /// The SyncStateSet the controllers confirmed (or the union while a change is pending).
    pub fn set_sync_state_set(&self, own_id: u64, members: &std::collections::BTreeSet<u64>) {
        let mut members = members.clone();
        members.insert(own_id);
        self.ha.gate().set_sync_state_set(&SyncStateView {
            master_id: own_id,
            members,
        });
    }

    /// Becomes a slave (id `own_id`) following the master whose HA server is at `master_ha`
    /// (unknown until the name servers name it).
    ///
    /// # Errors
    /// The HA client cannot start.
    pub fn become_slave(&self, own_id: u64, master_ha: Option<String>) -> Result<(), BrokerError> {
        // Another replica leads: nothing more to be silent about.
        *self.silent_until.lock() = None;
        self.ha.set_accepting(false);
        self.ha.gate().deactivate();
        let mut slave = self.slave.lock();
        if slave.is_none() {
            let mut config = self.slave_config.clone();
            if let Some(auto) = config.autoswitch.as_mut() {
                auto.broker_id = own_id;
            }
            let ha = HaSlave::start(self.store.clone(), None, config).map_err(BrokerError::io("start the HA client"))?;
            *slave = Some(ha);
        }
        if let Some(s) = slave.as_ref() {
            s.set_master(master_ha);
        }
        Ok(())
    }

    /// Points the HA client at the master's HA server once it is known.
    pub fn follow(&self, master_ha: Option<String>) {
        if let Some(s) = self.slave.lock().as_ref() {
            s.set_master(master_ha);
        }
    }

    fn stop(&self) {
        if let Some(s) = self.slave.lock().take() {
            s.stop();
        }
        self.ha.stop();
    }
}

/// The ack policy of a master.
#[must_use]
pub fn ack_policy(config: &BrokerConfig) -> AckPolicy {
    let mode = match config.broker_role {
        BrokerRole::SyncMaster if config.all_ack_in_sync_state_set == Some(true) => AckMode::AllInSync,
        // Stricter than RocketMQ 5, whose default inSyncReplicas of 1 waits for no slave.
        BrokerRole::SyncMaster => AckMode::Count(config.in_sync_replicas.max(2)),
        BrokerRole::AsyncMaster | BrokerRole::Slave => AckMode::None,
    };
    AckPolicy {
        mode,
        min_in_sync_replicas: config.min_in_sync_replicas,
        max_gap_bytes: config.ha_max_gap_not_in_sync,
    }
}

/// How long a controller-mode master's sends wait: every SyncStateSet member unless told
/// otherwise (`inSyncReplicas` of 2 or more, or `allAckInSyncStateSet=false` for RocketMQ's
/// own default of waiting for no slave). The elected master comes from the SyncStateSet, so
/// only the first keeps every acknowledged message through a failover; consumers read only what
/// every member holds whichever mode sends use.
#[must_use]
pub fn controlled_ack_mode(config: &BrokerConfig) -> AckMode {
    match (config.all_ack_in_sync_state_set, config.in_sync_replicas) {
        (Some(true), _) => AckMode::AllInSync,
        (_, n) if n >= 2 => AckMode::Count(n),
        (None, _) => AckMode::AllInSync,
        (Some(false), _) => AckMode::None,
    }
}

/// The rules RocketMQ's broker enforces at start between `brokerRole` and `brokerId`.
///
/// # Errors
/// A slave with brokerId 0, or a master with another id.
pub fn check_roles(config: &BrokerConfig) -> Result<(), BrokerError> {
    match (config.broker_role, config.broker_id) {
        (BrokerRole::Slave, 0) => Err(BrokerError::InvalidParameter(
            "brokerRole=SLAVE needs brokerId above 0 (0 is the master's id)".into(),
        )),
        (role, id) if role.is_master() && id != 0 => Err(BrokerError::InvalidParameter(format!(
            "brokerRole={} needs brokerId=0 (a master's id), not {id}",
            crate::config::ConfigValue::render(&role)
        ))),
        _ => Ok(()),
    }
}

/// The port a master's HA server listens on: `haListenPort`, else `listenPort + 1` (0 when the
/// broker itself takes any free port).
#[must_use]
pub fn ha_port(config: &BrokerConfig) -> u16 {
    config.ha_listen_port.unwrap_or(if config.listen_port == 0 {
        0
    } else {
        config.listen_port.saturating_add(1)
    })
}

fn slave_config(config: &BrokerConfig) -> Result<SlaveConfig, BrokerError> {
    Ok(SlaveConfig {
        heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval_ms),
        housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval_ms),
        // Room for any master's batch (RocketMQ's slave reads into 4 MiB).
        max_frame_bytes: 64 << 20,
        reconnect_interval: RECONNECT_INTERVAL,
        autoswitch: None,
        secret: ha_secret(config),
        tls: ha_client_tls(config)?,
    })
}

/// A slave reaches its master over TLS when its own `tls.server.mode` is not disabled (a set's
/// brokers are configured alike), verifying the master against `tls.client.trustCertPath` when
/// given (checked at start).
fn ha_client_tls(config: &BrokerConfig) -> Result<Option<Arc<rustls::ClientConfig>>, BrokerError> {
    if config.tls_server_mode == crate::config::TlsMode::Disabled {
        return Ok(None);
    }
    petrel_remoting::ClientTls::load(config.tls_client_trust_cert_path.as_deref())
        .map(|t| Some(t.config().clone()))
        .map_err(|e| BrokerError::InvalidParameter(format!("tls.client.trustCertPath: {e}")))
}

/// A master's HA port takes TLS as `tls.server.mode` says (the certificate checked at start).
fn ha_server_tls(config: &BrokerConfig) -> Option<petrel_replication::MasterTls> {
    let tls = config.server_tls().ok().flatten()?;
    Some(petrel_replication::MasterTls {
        config: tls.rustls_config(),
        enforcing: tls.mode() == crate::config::TlsMode::Enforcing,
    })
}

/// `haSecret`, checked by the configuration already.
fn ha_secret(config: &BrokerConfig) -> Option<petrel_auth::PeerSecret> {
    config
        .ha_secret
        .as_ref()
        .and_then(|s| petrel_auth::PeerSecret::new(s.expose()).ok())
}

fn master_config(config: &BrokerConfig, listen: SocketAddr, autoswitch: Option<AutoSwitchMaster>) -> MasterConfig {
    MasterConfig {
        listen,
        transfer_batch_bytes: config.ha_transfer_batch_size,
        heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval_ms),
        housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval_ms),
        max_slaves: config.ha_max_slaves,
        sync_from_last_file: config.sync_from_last_file,
        linger: if config.broker_role == BrokerRole::AsyncMaster && autoswitch.is_none() {
            ASYNC_LINGER
        } else {
            Duration::ZERO
        },
        autoswitch,
        secret: ha_secret(config),
        tls: ha_server_tls(config),
    }
}

/// Replication's keys in GET_BROKER_RUNTIME_INFO: on a master the slaves connected and in
/// sync, the replicated offset and each slave's lag; on a slave its master and how far behind.
#[must_use]
pub fn runtime_keys(broker: &crate::Broker) -> Vec<(String, String)> {
    let role = if !broker.config.enable_controller_mode {
        crate::config::ConfigValue::render(&broker.config.broker_role)
    } else if broker.role.is_master() {
        "SYNC_MASTER".to_owned()
    } else {
        "SLAVE".to_owned()
    };
    let mut out = vec![("brokerRole".to_owned(), role)];
    if let Replication::Controlled(c) = &broker.replication {
        out.push(("masterEpoch".into(), broker.role.master_epoch().to_string()));
        out.push(("epochLast".into(), c.epochs.last_epoch().to_string()));
        out.push(("confirmOffset".into(), c.confirmed.get().to_string()));
        out.push(("masterAddress".into(), broker.role.master_addr().unwrap_or_default()));
        return out;
    }
    match &broker.replication {
        Replication::Master { ha } => {
            let slaves = ha.gate().slaves();
            out.push(("haConnectedSlaves".into(), slaves.len().to_string()));
            out.push(("haInSyncSlaves".into(), slaves.iter().filter(|s| s.in_sync).count().to_string()));
            out.push(("haReplicatedOffset".into(), ha.gate().replicated().get().to_string()));
            for s in &slaves {
                out.push((format!("haSlaveLagBytes_{}", s.addr), s.lag_bytes.to_string()));
            }
        }
        Replication::Slave { ha } => {
            let st = ha.state();
            let master_offset = st.master_offset.load(std::sync::atomic::Ordering::Relaxed);
            out.push(("haMasterAddress".into(), ha.master().unwrap_or_default()));
            out.push((
                "haMasterConnected".into(),
                st.connected.load(std::sync::atomic::Ordering::Relaxed).to_string(),
            ));
            out.push((
                "haLagBytes".into(),
                master_offset.saturating_sub(broker.store.commit_log().max_offset()).to_string(),
            ));
        }
        Replication::Controlled(_) => {}
    }
    out
}

impl Replication {
    /// Starts the master's HA server or the slave's client.
    ///
    /// # Errors
    /// The HA port cannot be bound, or a thread cannot start.
    pub fn start(config: &BrokerConfig, store: &Arc<MessageStore>) -> Result<Replication, BrokerError> {
        if config.enable_controller_mode {
            return Self::start_controlled(config, store).map(|c| Replication::Controlled(Arc::new(c)));
        }
        if config.broker_role == BrokerRole::Slave {
            let ha = HaSlave::start(store.clone(), config.ha_master_address.clone(), slave_config(config)?)
                .map_err(BrokerError::io("start the HA client"))?;
            return Ok(Replication::Slave { ha });
        }
        let log = store.clone();
        let gate = AckGate::new(
            ack_policy(config),
            store.commit_log().max_offset(),
            config.max_durability_waiters,
            Box::new(move || log.commit_log().max_offset()),
        );
        if gate.policy().mode == AckMode::AllInSync {
            // Consumers read only what every in-sync replica holds (RocketMQ's confirmOffset):
            // a message they saw survives the loss of the master.
            store.commit_log().gate_readers_on(gate.replicated());
            let readers = store.clone();
            gate.set_on_advance(Box::new(move |_| readers.commit_log().wake_readers()));
        }
        let listen = SocketAddr::new(config.bind_address, ha_port(config));
        let ha = HaMaster::start(store.clone(), gate, master_config(config, listen, None))
            .map_err(BrokerError::io(format!("HA server: listen on {listen}")))?;
        Ok(Replication::Master { ha })
    }

    /// Controller mode: one HA server for the broker's life (slaves taken only while master),
    /// an ack gate over the SyncStateSet, and a confirm offset that holds consumers back.
    fn start_controlled(config: &BrokerConfig, store: &Arc<MessageStore>) -> Result<Controlled, BrokerError> {
        let epochs = Arc::new(EpochFile::open(&config.store_path_root_dir).map_err(BrokerError::from)?);
        // Only what readers already saw counts as confirmed: the rest of the log may be a tail
        // a new master never had (the store set the gate before its dispatcher started).
        let confirmed = store.commit_log().reader_gate_mark().ok_or_else(|| {
            BrokerError::Internal("controller mode needs the store's confirm gate (MessageStoreConfig::confirm_gate)".into())
        })?;
        let mode = controlled_ack_mode(config);
        let log = store.clone();
        let gate = AckGate::new(
            AckPolicy {
                mode,
                min_in_sync_replicas: config.min_in_sync_replicas,
                max_gap_bytes: config.ha_max_gap_not_in_sync,
            },
            confirmed.get(),
            config.max_durability_waiters,
            Box::new(move || log.commit_log().max_offset()),
        );
        // Not the master until the controllers say so.
        gate.deactivate();
        // Consumers read what every SyncStateSet member holds, whatever the ack mode: the gate
        // moves the store's confirm offset to the slowest member's ack.
        gate.set_confirm_mark(confirmed.clone());
        {
            let readers = store.clone();
            gate.set_on_advance(Box::new(move |_| readers.commit_log().wake_readers()));
        }
        let listen = SocketAddr::new(config.bind_address, ha_port(config));
        let auto = AutoSwitchMaster {
            epochs: epochs.clone(),
            confirmed: confirmed.clone(),
        };
        let ha = HaMaster::start(store.clone(), gate, master_config(config, listen, Some(auto)))
            .map_err(BrokerError::io(format!("HA server: listen on {listen}")))?;
        ha.set_accepting(false);
        let slave_config = SlaveConfig {
            autoswitch: Some(AutoSwitchSlave {
                broker_id: 0,
                epochs: epochs.clone(),
                confirmed: confirmed.clone(),
                async_learner: config.async_learner,
                sync_from_last_file: config.sync_from_last_file,
            }),
            ..slave_config(config)?
        };
        Ok(Controlled {
            ha,
            slave: Mutex::new(None),
            epochs,
            confirmed,
            store: store.clone(),
            slave_config,
            role_changed: tokio::sync::Notify::new(),
            silent_until: Mutex::new(None),
            declined: std::sync::atomic::AtomicBool::new(false),
            heartbeat_timeout: Duration::from_millis(config.controller_heart_beat_timeout_ms),
        })
    }

    /// A master's gate (the produce service waits on it).
    #[must_use]
    pub fn gate(&self) -> Option<Arc<AckGate>> {
        match self {
            Replication::Master { ha } => Some(ha.gate().clone()),
            Replication::Controlled(c) => Some(c.ha.gate().clone()),
            Replication::Slave { .. } => None,
        }
    }

    /// The port a master's HA server took.
    #[must_use]
    pub fn listen_port(&self) -> Option<u16> {
        match self {
            Replication::Master { ha } => Some(ha.local_addr().port()),
            Replication::Controlled(c) => Some(c.ha.local_addr().port()),
            Replication::Slave { .. } => None,
        }
    }

    /// A controller-mode broker's replication, which switches roles at run time.
    #[must_use]
    pub fn controlled(&self) -> Option<&Arc<Controlled>> {
        match self {
            Replication::Controlled(c) => Some(c),
            _ => None,
        }
    }

    /// A slave's HA client (not a controller-mode broker's, which [`Replication::controlled`] holds).
    #[must_use]
    pub fn slave(&self) -> Option<&HaSlave> {
        match self {
            Replication::Slave { ha } => Some(ha),
            Replication::Master { .. } | Replication::Controlled(_) => None,
        }
    }

    /// Stops the HA server and client, whichever run (shutdown).
    pub fn stop(&self) {
        match self {
            Replication::Master { ha } => ha.stop(),
            Replication::Slave { ha } => ha.stop(),
            Replication::Controlled(c) => c.stop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let mut c = BrokerConfig::default();
        for (k, v) in pairs {
            c.set(k, v).expect("a valid key");
        }
        c
    }

    #[test]
    fn controller_mode_waits_for_the_whole_sync_state_set_unless_told_otherwise() {
        assert_eq!(controlled_ack_mode(&config(&[])), AckMode::AllInSync, "Petrel's default");
        assert_eq!(
            controlled_ack_mode(&config(&[("allAckInSyncStateSet", "false")])),
            AckMode::None,
            "RocketMQ's own default, asked for"
        );
        assert_eq!(controlled_ack_mode(&config(&[("inSyncReplicas", "2")])), AckMode::Count(2));
        assert_eq!(
            controlled_ack_mode(&config(&[("inSyncReplicas", "2"), ("allAckInSyncStateSet", "true")])),
            AckMode::AllInSync
        );
        // Classic mode keeps its meaning: unset is false.
        assert_eq!(ack_policy(&config(&[("brokerRole", "SYNC_MASTER")])).mode, AckMode::Count(2));
    }
}
