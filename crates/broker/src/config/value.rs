//! broker.conf's own value types; the common ones (numbers, paths, secrets, ranges) are
//! `petrel_kit::config`'s, and the lock's, the store's and TLS's live with their types.

use petrel_kit::config::ConfigValue;

pub use petrel_kit::config::{MetricsExporter, REDACTED, Secret, at_least, at_least_if_set, within};
pub use petrel_remoting::TlsMode;

/// RocketMQ's `brokerRole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerRole {
    /// A master whose sends do not wait for slaves.
    AsyncMaster,
    /// A master whose sends wait for slaves' acks (how many: `inSyncReplicas`,
    /// `allAckInSyncStateSet`).
    SyncMaster,
    /// Follows a master's commit log; refuses sends.
    Slave,
}

impl BrokerRole {
    /// Whether this role takes sends (either kind of master).
    #[must_use]
    pub fn is_master(self) -> bool {
        self != BrokerRole::Slave
    }
}

impl ConfigValue for BrokerRole {
    const EXPECTED: &'static str = "ASYNC_MASTER, SYNC_MASTER or SLAVE";
    fn parse(raw: &str) -> Option<Self> {
        match raw {
            "ASYNC_MASTER" => Some(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Some(BrokerRole::SyncMaster),
            "SLAVE" => Some(BrokerRole::Slave),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        }
        .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use petrel_lock::LockKind;
    use petrel_store::FlushMode;

    use super::*;

    #[test]
    fn broker_values_parse_only_their_own_spellings() {
        assert_eq!(FlushMode::parse("SYNC_FLUSH"), Some(FlushMode::Sync));
        assert_eq!(FlushMode::parse("sync"), None);
        assert_eq!(LockKind::Adaptive.render(), "abs");
        assert_eq!(BrokerRole::parse("SLAVE"), Some(BrokerRole::Slave));
        assert_eq!(TlsMode::parse("Enforcing"), Some(TlsMode::Enforcing));
    }
}
