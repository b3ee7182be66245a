//! The broker's part in replication: from `brokerRole` and the HA keys, a master's HA server
//! and ack gate, or a slave's HA client (see `petrel-replication` for the protocol).
//!
//! Owns: turning configuration into the replication pieces, and the roles' rules (a slave has
//! brokerId > 0, a master brokerId 0). Must never: start a master's HA server on a slave or a
//! slave's client on a master.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use petrel_replication::{AckGate, AckMode, AckPolicy, HaMaster, HaSlave, MasterConfig, SlaveConfig};
use petrel_store::MessageStore;

use crate::config::{BrokerConfig, BrokerRole};
use crate::error::BrokerError;

/// How long a slave waits between attempts to reach its master.
const RECONNECT_INTERVAL: Duration = Duration::from_secs(1);
/// An ASYNC_MASTER's frames wait this long for more records: a slave at most this much further
/// behind, for one frame (and one wake-up on each side) per millisecond rather than per record.
const ASYNC_LINGER: Duration = Duration::from_millis(1);

pub enum Replication {
    Master { ha: HaMaster },
    Slave { ha: HaSlave },
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

/// Replication's keys in GET_BROKER_RUNTIME_INFO: on a master the slaves connected and in
/// sync, the replicated offset and each slave's lag; on a slave its master and how far behind.
#[must_use]
pub fn runtime_keys(broker: &crate::Broker) -> Vec<(String, String)> {
    let mut out = vec![(
        "brokerRole".to_owned(),
        crate::config::ConfigValue::render(&broker.config.broker_role),
    )];
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
        if config.broker_role == BrokerRole::Slave {
            let ha = HaSlave::start(
                store.clone(),
                config.ha_master_address.clone(),
                SlaveConfig {
                    heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval_ms),
                    housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval_ms),
                    // Room for any master's batch (RocketMQ's slave reads into 4 MiB).
                    max_frame_bytes: 64 << 20,
                    reconnect_interval: RECONNECT_INTERVAL,
                },
            )
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
        let listen = SocketAddr::from(([0, 0, 0, 0], ha_port(config)));
        let ha = HaMaster::start(
            store.clone(),
            gate,
            MasterConfig {
                listen,
                transfer_batch_bytes: config.ha_transfer_batch_size,
                heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval_ms),
                housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval_ms),
                max_slaves: config.ha_max_slaves,
                sync_from_last_file: config.sync_from_last_file,
                linger: if config.broker_role == BrokerRole::AsyncMaster {
                    ASYNC_LINGER
                } else {
                    Duration::ZERO
                },
            },
        )
        .map_err(|e| io(&format!("HA server: listen on {listen}"), e))?;
        Ok(Replication::Master { ha })
    }

    /// A master's gate (the produce service waits on it).
    #[must_use]
    pub fn gate(&self) -> Option<Arc<AckGate>> {
        match self {
            Replication::Master { ha } => Some(ha.gate().clone()),
            Replication::Slave { .. } => None,
        }
    }

    /// The port a master's HA server took.
    #[must_use]
    pub fn listen_port(&self) -> Option<u16> {
        match self {
            Replication::Master { ha } => Some(ha.local_addr().port()),
            Replication::Slave { .. } => None,
        }
    }

    #[must_use]
    pub fn slave(&self) -> Option<&HaSlave> {
        match self {
            Replication::Slave { ha } => Some(ha),
            Replication::Master { .. } => None,
        }
    }

    pub fn stop(&self) {
        match self {
            Replication::Master { ha } => ha.stop(),
            Replication::Slave { ha } => ha.stop(),
        }
    }
}
