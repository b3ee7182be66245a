//! Per-client shares of the broker's global pools: the long-poll waiters, the waiters for a
//! send's durability, and the consumer groups heartbeats may create. Without them one client
//! could take a whole pool and every other client would be answered SYSTEM_BUSY (or be refused
//! a group). A client is the address its connections come from: the one identity a client
//! cannot choose for itself (its `clientID`, its group names and its connection count it can).
//!
//! Owns: the count each client holds of each pool, and the refusal past its share. Must never:
//! count the broker's own work against a client (it has no client), keep an entry for a client
//! that holds nothing, or let a place outlive its release (a place gives itself back on drop).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::BrokerError;

/// One pool's per-client share.
pub struct Quota {
    /// What the pool is, for the refusal.
    what: &'static str,
    per_client: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// A place a client holds in a pool, for as long as its request is served (it travels with
/// the deferred answer); dropping it gives the place back.
#[must_use]
pub struct QuotaPlace {
    quota: Arc<Quota>,
    client: IpAddr,
}

impl Drop for QuotaPlace {
    fn drop(&mut self) {
        let mut held = self.quota.held.lock();
        let n = held.get_mut(&self.client).expect("a place is counted until it is dropped");
        assert!(*n > 0, "a held count never goes below zero");
        *n -= 1;
        if *n == 0 {
            held.remove(&self.client);
        }
    }
}

impl Quota {
    /// A pool named `what` in refusals, of which each client may hold `per_client` places;
    /// panics if that is 0.
    #[must_use]
    pub fn new(what: &'static str, per_client: usize) -> Arc<Quota> {
        assert!(per_client > 0, "a client may hold one place at least");
        Arc::new(Quota {
            what,
            per_client,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// Takes a place for `client`; `None` (the broker's own work) takes none and is never refused.
    ///
    /// # Errors
    /// [`BrokerError::Busy`] when `client` holds its whole share; other clients are unaffected.
    pub fn take(self: &Arc<Self>, client: Option<IpAddr>) -> Result<Option<QuotaPlace>, BrokerError> {
        let Some(client) = client else {
            return Ok(None);
        };
        let mut held = self.held.lock();
        let n = held.entry(client).or_insert(0);
        if *n >= self.per_client {
            return Err(BrokerError::Busy(format!(
                "[CLIENT_QUOTA] client {client} holds {} {}, its share; others are served",
                self.per_client, self.what
            )));
        }
        *n += 1;
        Ok(Some(QuotaPlace {
            quota: self.clone(),
            client,
        }))
    }

    /// Places `client` holds now.
    #[must_use]
    pub fn held_by(&self, client: IpAddr) -> usize {
        self.held.lock().get(&client).copied().unwrap_or(0)
    }
}

/// A count per client that only grows (the groups a client's heartbeats created), bounded per
/// client; clients that never created anything have no entry.
pub struct Allowance {
    what: &'static str,
    per_client: usize,
    used: Mutex<HashMap<IpAddr, usize>>,
}

impl Allowance {
    /// An allowance of `per_client` for each client, named `what` in refusals.
    #[must_use]
    pub fn new(what: &'static str, per_client: usize) -> Allowance {
        Allowance {
            what,
            per_client,
            used: Mutex::new(HashMap::new()),
        }
    }

    /// Spends one of `client`'s allowance (`None`, the broker's own work, spends nothing).
    ///
    /// # Errors
    /// [`BrokerError::LimitReached`] once `client` has spent its allowance.
    pub fn spend(&self, client: Option<IpAddr>) -> Result<(), BrokerError> {
        let Some(client) = client else {
            return Ok(());
        };
        let mut used = self.used.lock();
        let n = used.entry(client).or_insert(0);
        if *n >= self.per_client {
            return Err(BrokerError::LimitReached(format!(
                "client {client} already created {} {}, its allowance until the broker restarts",
                self.per_client, self.what
            )));
        }
        *n += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_held_to_its_share_and_others_are_not_touched() {
        let q = Quota::new("long polls", 2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let one = q.take(Some(a)).unwrap();
        let _two = q.take(Some(a)).unwrap();
        let e = q.take(Some(a)).err().unwrap();
        assert!(
            matches!(&e, BrokerError::Busy(m) if m.contains("[CLIENT_QUOTA] client 10.0.0.1 holds 2 long polls")),
            "{e}"
        );
        assert!(q.take(Some(b)).unwrap().is_some(), "another client has its own share");
        assert!(q.take(None).unwrap().is_none(), "the broker's own work counts against nobody");
        drop(one);
        assert_eq!(q.held_by(a), 1);
        assert!(q.take(Some(a)).is_ok(), "a place given back can be taken again");
    }

    #[test]
    fn an_allowance_is_spent_once_per_creation() {
        let groups = Allowance::new("consumer groups", 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        groups.spend(Some(a)).unwrap();
        groups.spend(Some(a)).unwrap();
        assert!(matches!(groups.spend(Some(a)), Err(BrokerError::LimitReached(_))));
        groups.spend(None).unwrap();
        groups.spend(Some("10.0.0.2".parse().unwrap())).unwrap();
    }
}
