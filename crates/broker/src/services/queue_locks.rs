//! `QueueLockService`: which client of a consumer group may consume each queue in order
//! (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, RocketMQ's `RebalanceLockManager`).
//!
//! An orderly consumer consumes a queue only while it holds the queue's lock here, so two
//! members of a group never consume one queue at once, even while a rebalance moves it. A lock
//! is granted when nobody holds the queue, its holder's lock expired (not renewed for
//! `rebalanceLockMaxLiveTime`), or the requester holds it already (then it is renewed). Clients
//! renew every 20 s and release the queues they give up and at shutdown; a client that dies
//! holding locks loses them by expiry.
//!
//! Owns: the lock table. Must never: grant a queue another live holder has, or hold more than
//! `maxQueueLocks` locks (a lock beyond it is simply not granted, and said once at WARN).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{BrokerError, validate_group_name};

struct Holder {
    client_id: String,
    renewed: Instant,
}

/// A topic queue on a broker, as the services name one (the front end maps its wire form).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueRef {
    /// The queue's topic.
    pub topic: String,
    /// The broker the queue is on, as the client named it.
    pub broker_name: String,
    /// The queue's id within the topic on that broker.
    pub queue_id: i32,
}

type Key = (String, QueueRef);

/// The orderly-consumption locks: per consumer group and queue, the client that holds it.
pub struct QueueLockService {
    max_live: Duration,
    max_locks: usize,
    table: Mutex<HashMap<Key, Holder>>,
    /// The table was found full: said once at WARN, again once it had room in between.
    full_said: AtomicBool,
}

impl QueueLockService {
    /// An empty lock table: locks expire when not renewed within `max_live`, and at most
    /// `max_locks` are held. Panics when `max_locks` is 0.
    #[must_use]
    pub fn new(max_live: Duration, max_locks: usize) -> QueueLockService {
        assert!(max_locks > 0, "a lock table must hold at least one lock");
        QueueLockService {
            max_live,
            max_locks,
            table: Mutex::new(HashMap::new()),
            full_said: AtomicBool::new(false),
        }
    }

    /// Locks `queues` of `group` for `client_id`; answers the queues it now holds (a subset).
    ///
    /// # Errors
    /// A group name RocketMQ would refuse, or an empty client id.
    pub fn lock(&self, group: &str, client_id: &str, queues: &[QueueRef], now: Instant) -> Result<Vec<QueueRef>, BrokerError> {
        check(group, client_id)?;
        let mut table = self.table.lock();
        let mut granted = Vec::with_capacity(queues.len());
        for mq in queues {
            let key = (group.to_owned(), mq.clone());
            if let Some(h) = table.get_mut(&key) {
                let expired = now.saturating_duration_since(h.renewed) > self.max_live;
                if h.client_id == client_id || expired {
                    if h.client_id != client_id {
                        tracing::info!(group, topic = %mq.topic, queue = mq.queue_id, from = %h.client_id, to = client_id, "a queue lock expired; it passes to another client");
                        h.client_id = client_id.to_owned();
                    }
                    h.renewed = now;
                    granted.push(mq.clone());
                }
                continue;
            }
            if table.len() >= self.max_locks {
                let max_live = self.max_live;
                table.retain(|_, h| now.saturating_duration_since(h.renewed) <= max_live);
            }
            if table.len() >= self.max_locks {
                if !self.full_said.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        max_locks = self.max_locks,
                        group,
                        "the queue lock table is full (maxQueueLocks); further queues are not locked"
                    );
                }
                continue;
            }
            self.full_said.store(false, Ordering::Relaxed);
            table.insert(
                key,
                Holder {
                    client_id: client_id.to_owned(),
                    renewed: now,
                },
            );
            granted.push(mq.clone());
        }
        debug_assert!(table.len() <= self.max_locks);
        Ok(granted)
    }

    /// Releases those of `queues` that `client_id` holds in `group`; answers how many.
    ///
    /// # Errors
    /// As [`QueueLockService::lock`].
    pub fn unlock(&self, group: &str, client_id: &str, queues: &[QueueRef]) -> Result<usize, BrokerError> {
        check(group, client_id)?;
        let mut table = self.table.lock();
        let mut released = 0;
        for mq in queues {
            let key = (group.to_owned(), mq.clone());
            if table.get(&key).is_some_and(|h| h.client_id == client_id) {
                table.remove(&key);
                released += 1;
            }
        }
        Ok(released)
    }

    /// Who holds `mq` for `group` now, if anybody.
    #[must_use]
    pub fn holder(&self, group: &str, mq: &QueueRef, now: Instant) -> Option<String> {
        let table = self.table.lock();
        table
            .get(&(group.to_owned(), mq.clone()))
            .filter(|h| now.saturating_duration_since(h.renewed) <= self.max_live)
            .map(|h| h.client_id.clone())
    }
}

fn check(group: &str, client_id: &str) -> Result<(), BrokerError> {
    validate_group_name(group)?;
    if client_id.is_empty() {
        return Err(BrokerError::InvalidParameter("a queue lock needs the client's id".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(queue_id: i32) -> QueueRef {
        QueueRef {
            topic: "T".into(),
            broker_name: "broker-a".into(),
            queue_id,
        }
    }

    #[test]
    fn a_queue_has_one_holder_until_it_unlocks_or_its_lock_expires() {
        let locks = QueueLockService::new(Duration::from_secs(60), 100);
        let t0 = Instant::now();
        assert_eq!(locks.lock("G", "a", &[mq(0), mq(1)], t0).unwrap(), vec![mq(0), mq(1)]);
        assert_eq!(
            locks.lock("G", "b", &[mq(1), mq(2)], t0).unwrap(),
            vec![mq(2)],
            "b gets only the free queue"
        );
        assert_eq!(
            locks.lock("H", "b", &[mq(1)], t0).unwrap(),
            vec![mq(1)],
            "another group locks on its own"
        );
        assert_eq!(locks.unlock("G", "b", &[mq(0)]).unwrap(), 0, "b cannot release a's queue");
        assert_eq!(locks.unlock("G", "a", &[mq(1)]).unwrap(), 1);
        assert_eq!(locks.lock("G", "b", &[mq(1)], t0).unwrap(), vec![mq(1)]);
        // a renews queue 0 at 50 s; at 100 s it is still a's, at 111 s it expired.
        let renewed = t0 + Duration::from_secs(50);
        assert_eq!(locks.lock("G", "a", &[mq(0)], renewed).unwrap(), vec![mq(0)]);
        assert!(locks.lock("G", "b", &[mq(0)], t0 + Duration::from_secs(100)).unwrap().is_empty());
        assert_eq!(locks.holder("G", &mq(0), t0 + Duration::from_secs(100)).as_deref(), Some("a"));
        let later = t0 + Duration::from_secs(111);
        assert_eq!(locks.holder("G", &mq(0), later), None);
        assert_eq!(locks.lock("G", "b", &[mq(0)], later).unwrap(), vec![mq(0)]);
        assert_eq!(locks.holder("G", &mq(0), later).as_deref(), Some("b"));
    }

    #[test]
    fn a_full_table_grants_nothing_new_until_locks_expire() {
        let locks = QueueLockService::new(Duration::from_secs(60), 2);
        let t0 = Instant::now();
        assert_eq!(locks.lock("G", "a", &[mq(0), mq(1), mq(2)], t0).unwrap(), vec![mq(0), mq(1)]);
        assert_eq!(locks.lock("G", "a", &[mq(0)], t0).unwrap(), vec![mq(0)], "renewing needs no room");
        let later = t0 + Duration::from_secs(61);
        assert_eq!(
            locks.lock("G", "b", &[mq(2)], later).unwrap(),
            vec![mq(2)],
            "expired locks make room"
        );
    }

    #[test]
    fn bad_groups_and_client_ids_are_refused() {
        let locks = QueueLockService::new(Duration::from_secs(60), 10);
        assert!(locks.lock("bad group", "a", &[mq(0)], Instant::now()).is_err());
        assert!(locks.lock("G", "", &[mq(0)], Instant::now()).is_err());
        assert!(locks.unlock("", "a", &[mq(0)]).is_err());
    }
}
