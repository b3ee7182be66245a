//! The broker's replication role as it stands now: fixed by `brokerRole` and `brokerId` in
//! classic mode, decided by the controllers in controller mode (and changed at run time).
//!
//! Owns: whether this broker takes writes and the id it registers under. Must never: report
//! master with an id other than 0, or a slave with id 0.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};

use parking_lot::RwLock;

use crate::config::BrokerConfig;

/// The id a broker registers under while it is not yet known (controller mode, before the
/// controllers answered): the broker does not register at all then.
pub const UNKNOWN_ID: i64 = -1;

/// Whether this broker is master now and the id it registers under, shared by the services
/// that refuse writes on a slave and the chores that register and heartbeat.
pub struct Role {
    master: AtomicBool,
    /// The id registered with the name servers: 0 while master.
    broker_id: AtomicI64,
    /// Controller mode: the master epoch this role belongs to.
    master_epoch: AtomicI32,
    /// Controller mode: the master's remoting address, as the controllers named it.
    master_addr: RwLock<Option<String>>,
}

impl Role {
    /// The role the configuration fixes (classic mode), or "not yet known" (controller mode).
    #[must_use]
    pub fn from_config(config: &BrokerConfig) -> Role {
        let (master, id) = if config.enable_controller_mode {
            (false, UNKNOWN_ID)
        } else {
            (config.broker_role.is_master(), config.broker_id)
        };
        Role {
            master: AtomicBool::new(master),
            broker_id: AtomicI64::new(id),
            master_epoch: AtomicI32::new(0),
            master_addr: RwLock::new(None),
        }
    }

    /// Whether this broker is master now and takes writes.
    #[must_use]
    pub fn is_master(&self) -> bool {
        self.master.load(Ordering::Acquire)
    }

    /// The id to register under; [`UNKNOWN_ID`] before the controllers gave one.
    #[must_use]
    pub fn broker_id(&self) -> i64 {
        self.broker_id.load(Ordering::Acquire)
    }

    /// Controller mode: the master epoch of the current role; 0 in classic mode and before the
    /// controllers named one.
    #[must_use]
    pub fn master_epoch(&self) -> i32 {
        self.master_epoch.load(Ordering::Acquire)
    }

    /// Controller mode: the master's remoting address (this broker's own while it is master);
    /// `None` in classic mode and before the controllers named one.
    #[must_use]
    pub fn master_addr(&self) -> Option<String> {
        self.master_addr.read().clone()
    }

    /// Controller mode: this broker is the master of `epoch`.
    pub fn become_master(&self, epoch: i32, own_addr: &str) {
        *self.master_addr.write() = Some(own_addr.to_owned());
        self.broker_id.store(0, Ordering::Release);
        self.master_epoch.store(epoch, Ordering::Release);
        self.master.store(true, Ordering::Release);
    }

    /// Controller mode: this broker (id `own_id`) follows `master_addr` in `epoch`.
    pub fn become_slave(&self, epoch: i32, own_id: i64, master_addr: &str) {
        assert!(own_id > 0, "a slave's id is above 0");
        self.master.store(false, Ordering::Release);
        *self.master_addr.write() = Some(master_addr.to_owned());
        self.broker_id.store(own_id, Ordering::Release);
        self.master_epoch.store(epoch, Ordering::Release);
    }
}
