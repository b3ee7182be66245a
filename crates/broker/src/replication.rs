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

pub enum Replication {
    Master {
        ha: HaMaster,
    },
    Slave {
        ha: HaSlave,
    },
    /// Controller mode: either, as the controllers say, switching at run time.
    Controlled(Arc<Controlled>),
}

/// A controller-mode broker's replication: an HA server that takes slaves only while this
/// broker is master, and an HA client started when it first becomes a slave.
pub struct Controlled {
    pub ha: HaMaster,
    slave: Mutex<Option<HaSlave>>,
    pub epochs: Arc<EpochFile>,
    /// What every in-sync replica holds: consumers read no further, on a master or a slave.
    pub confirmed: Arc<Watermark>,
    store: Arc<MessageStore>,
    slave_config: SlaveConfig,
    /// The controllers announced a new role (NOTIFY_BROKER_ROLE_CHANGED): ask them now.
    pub role_changed: tokio::sync::Notify,
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
        self.ha.set_accepting(false);
        self.ha.gate().deactivate();
        let mut slave = self.slave.lock();
        if slave.is_none() {
            let mut config = self.slave_config.clone();
            if let Some(auto) = config.autoswitch.as_mut() {
                auto.broker_id = own_id;
            }
            let ha =
                HaSlave::start(self.store.clone(), None, config).map_err(|e| BrokerError::Internal(format!("start the HA client: {e}")))?;
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
        BrokerRole::SyncMaster if config.all_ack_in_sync_state_set => AckMode::AllInSync,
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

fn slave_config(config: &BrokerConfig) -> SlaveConfig {
    SlaveConfig {
        heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval_ms),
        housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval_ms),
        // Room for any master's batch (RocketMQ's slave reads into 4 MiB).
        max_frame_bytes: 64 << 20,
        reconnect_interval: RECONNECT_INTERVAL,
        autoswitch: None,
    }
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
        let io = |what: &str, e: std::io::Error| BrokerError::Internal(format!("{what}: {e}"));
        if config.enable_controller_mode {
            return Self::start_controlled(config, store).map(|c| Replication::Controlled(Arc::new(c)));
        }
        if config.broker_role == BrokerRole::Slave {
            let ha = HaSlave::start(store.clone(), config.ha_master_address.clone(), slave_config(config))
                .map_err(|e| io("start the HA client", e))?;
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
            store.commit_log().gate_readers_on(gate.replicated().clone());
            let readers = store.clone();
            gate.set_on_advance(Box::new(move || readers.commit_log().wake_readers()));
        }
        let listen = SocketAddr::new(config.bind_address, ha_port(config));
        let ha = HaMaster::start(store.clone(), gate, master_config(config, listen, None))
            .map_err(|e| io(&format!("HA server: listen on {listen}"), e))?;
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
        let mode = if config.all_ack_in_sync_state_set {
            AckMode::AllInSync
        } else if config.in_sync_replicas >= 2 {
            AckMode::Count(config.in_sync_replicas)
        } else {
            AckMode::None
        };
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
        {
            let (readers, confirmed, mark) = (store.clone(), confirmed.clone(), gate.replicated().clone());
            gate.set_on_advance(Box::new(move || {
                confirmed.advance(mark.get());
                readers.commit_log().wake_readers();
            }));
        }
        let listen = SocketAddr::new(config.bind_address, ha_port(config));
        let auto = AutoSwitchMaster {
            epochs: epochs.clone(),
            confirmed: confirmed.clone(),
        };
        let ha = HaMaster::start(store.clone(), gate, master_config(config, listen, Some(auto)))
            .map_err(|e| BrokerError::Internal(format!("HA server: listen on {listen}: {e}")))?;
        ha.set_accepting(false);
        let slave_config = SlaveConfig {
            autoswitch: Some(AutoSwitchSlave {
                broker_id: 0,
                epochs: epochs.clone(),
                confirmed: confirmed.clone(),
                async_learner: config.async_learner,
                sync_from_last_file: config.sync_from_last_file,
            }),
            ..slave_config(config)
        };
        Ok(Controlled {
            ha,
            slave: Mutex::new(None),
            epochs,
            confirmed,
            store: store.clone(),
            slave_config,
            role_changed: tokio::sync::Notify::new(),
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

    #[must_use]
    pub fn controlled(&self) -> Option<&Arc<Controlled>> {
        match self {
            Replication::Controlled(c) => Some(c),
            _ => None,
        }
    }

    #[must_use]
    pub fn slave(&self) -> Option<&HaSlave> {
        match self {
            Replication::Slave { ha } => Some(ha),
            Replication::Master { .. } | Replication::Controlled(_) => None,
        }
    }

    pub fn stop(&self) {
        match self {
            Replication::Master { ha } => ha.stop(),
            Replication::Slave { ha } => ha.stop(),
            Replication::Controlled(c) => c.stop(),
        }
    }
}
