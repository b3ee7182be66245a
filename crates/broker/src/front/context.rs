//! The narrow contexts request handlers run against: one trait per service, so a handler's
//! signature lists the services it uses (`fn handle<C: Offsets + Topics>(ctx: &Arc<C>, …)`) and
//! nothing else. The broker provides every one; a test provides only those the handler under
//! test names, built over a temporary directory (see `front/tests.rs`).
//!
//! Owns: which service each accessor hands out. Must never: hand out the whole broker, or a
//! service by value (each accessor borrows what the provider holds).

use std::net::SocketAddr;
use std::sync::Arc;

use petrel_store::MessageStore;

use crate::access::Access;
use crate::broker::{Broker, Quotas};
use crate::config::BrokerConfig;
use crate::replication::Replication;
use crate::role::Role;
use crate::services::admin::AdminService;
use crate::services::consume::ConsumeService;
use crate::services::groups::GroupService;
use crate::services::offsets::OffsetService;
use crate::services::pop::PopService;
use crate::services::produce::ProduceService;
use crate::services::queue_locks::QueueLockService;
use crate::services::schedule::ScheduleService;
use crate::services::timer::TimerService;

/// What every context is: shared between the connection's tasks, so a handler may move an
/// `Arc` of it into the answer it computes later.
pub(crate) trait Context: Send + Sync + 'static {}

impl Context for Broker {}

/// A shared context is the context it shares, so helpers may take either.
impl<T: Context> Context for Arc<T> {}

/// Declares one service's trait and the broker's accessor for it.
macro_rules! service {
    ($($(#[$meta:meta])* $name:ident: $method:ident -> $ty:ty;)*) => {$(
        $(#[$meta])*
        pub(crate) trait $name: Context {
            fn $method(&self) -> &$ty;
        }

        impl $name for Broker {
            fn $method(&self) -> &$ty {
                &self.$method
            }
        }

        impl<T: $name> $name for Arc<T> {
            fn $method(&self) -> &$ty {
                (**self).$method()
            }
        }
    )*};
}

service! {
    /// The broker's configuration.
    Config: config -> Arc<BrokerConfig>;
    /// Topics and their configuration.
    Topics: topics -> Arc<crate::services::topics::TopicService>;
    /// Consumer groups, their members and settings.
    Groups: groups -> Arc<GroupService>;
    /// Consumer offsets and the queues' bounds.
    Offsets: offsets -> Arc<OffsetService>;
    /// Orderly consumers' queue locks.
    QueueLocks: queue_locks -> QueueLockService;
    /// Sends: validation, routing and storing.
    Produce: produce -> ProduceService;
    /// Delay levels.
    Schedule: schedule -> Arc<ScheduleService>;
    /// Timer messages.
    Timer: timer -> Arc<TimerService>;
    /// Pulls.
    Consume: consume -> ConsumeService;
    /// POP consumption.
    Pop: pop -> Arc<PopService>;
    /// Administration reads and resets.
    Admin: admin -> Arc<AdminService>;
    /// A master's HA server or a slave's HA client.
    Replicas: replication -> Replication;
    /// Master or slave, and the id registered under.
    Roles: role -> Arc<Role>;
    /// ACL 2.0's users, policies and gate.
    Acl: access -> Arc<Access>;
    /// Each client's share of the broker's pools.
    Shares: quotas -> Quotas;
    /// The address written into message ids.
    StoreHost: store_host -> SocketAddr;
    /// The message store, for reads by physical offset.
    Store: store -> Arc<MessageStore>;
}

/// The `key = value` lines GET_BROKER_RUNTIME_INFO adds for replication.
pub(crate) trait RuntimeKeys: Context {
    fn runtime_keys(&self) -> Vec<(String, String)>;
}

impl RuntimeKeys for Broker {
    fn runtime_keys(&self) -> Vec<(String, String)> {
        crate::replication::runtime_keys(self)
    }
}
