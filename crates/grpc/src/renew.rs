//! Auto-renew: a push consumer receives with `auto_renew` and leaves the message's invisible
//! time to the broker, as RocketMQ's proxy does it. The broker keeps each such message invisible
//! while its client is connected — renewing it [`RenewPolicy::ahead`] before it would come back —
//! so a listener slower than the invisible time does not see its message delivered twice. The
//! client acks with the handle it was given; the broker acks with the latest one.
//!
//! Owns: each client's held messages (by the handle the client holds) and the renewer task.
//! Must never: hold more than [`MAX_HELD_PER_CLIENT`] messages for one client, renew a message
//! past [`RenewPolicy::max`], or renew for a client whose Telemetry stream is gone (its messages
//! then come back when their invisible time ends, as a disconnected client's must).

use std::collections::HashMap;
use std::sync::Weak;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use petrel_broker::Broker;
use petrel_kit::clock::now_ms;

use crate::clients::Clients;
use crate::receipt::ReceiptHandle;

/// Messages one client may have renewed at once; past it, a message keeps the invisible time
/// it was received with (the Java SDK caches at most 1,024 messages per push consumer).
pub const MAX_HELD_PER_CLIENT: usize = 8_192;

/// How the broker renews.
#[derive(Debug, Clone, Copy)]
pub struct RenewPolicy {
    /// The invisible time a renewable receive gets, and each renewal (RocketMQ proxy's
    /// `defaultInvisibleTimeMills`).
    pub invisible: Duration,
    /// How long before a message would come back it is renewed.
    pub ahead: Duration,
    /// How long after its receive a message is no longer renewed (a listener stuck that long
    /// lets it come back).
    pub max: Duration,
    /// How often the renewer looks.
    pub period: Duration,
}

impl Default for RenewPolicy {
    fn default() -> RenewPolicy {
        RenewPolicy {
            invisible: Duration::from_secs(60),
            ahead: Duration::from_secs(10),
            max: Duration::from_secs(3_600),
            period: Duration::from_secs(1),
        }
    }
}

/// One renewed message.
#[derive(Debug, Clone)]
struct Held {
    group: String,
    topic: String,
    /// The handle that names the message's current invisible time.
    current: ReceiptHandle,
    received: Instant,
}

/// The messages renewed for one client, by the handle the client was given.
#[derive(Default)]
pub struct Renewals {
    held: Mutex<HashMap<String, Held>>,
}

impl Renewals {
    /// Renews the message `given` names from now on; false when the client holds too many.
    pub(crate) fn hold(&self, given: String, group: &str, topic: &str, current: ReceiptHandle) -> bool {
        let mut held = self.held.lock();
        if held.len() >= MAX_HELD_PER_CLIENT {
            return false;
        }
        let entry = Held {
            group: group.to_owned(),
            topic: topic.to_owned(),
            current,
            received: Instant::now(),
        };
        held.insert(given, entry);
        true
    }

    /// Stops renewing the message `given` names (the client acks it, changes its invisible time
    /// or forwards it): the handle that names it now, if it was renewed.
    pub(crate) fn release(&self, given: &str) -> Option<ReceiptHandle> {
        self.held.lock().remove(given).map(|h| h.current)
    }

    /// Messages held now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.held.lock().len()
    }

    /// Whether none is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn clear(&self) {
        self.held.lock().clear();
    }

    /// The held messages due for renewal (or past renewing, which are dropped).
    fn due(&self, policy: &RenewPolicy, now: i64) -> Vec<(String, Held)> {
        let ahead_ms = i64::try_from(policy.ahead.as_millis()).unwrap_or(i64::MAX);
        let mut held = self.held.lock();
        held.retain(|_, h| h.received.elapsed() < policy.max);
        held.iter()
            .filter(|(_, h)| h.current.visible_at_ms().saturating_sub(now) <= ahead_ms)
            .map(|(k, h)| (k.clone(), h.clone()))
            .collect()
    }

    /// Records a renewal, unless the client let go of the message meanwhile.
    fn renewed(&self, given: &str, current: ReceiptHandle) {
        if let Some(h) = self.held.lock().get_mut(given) {
            h.current = current;
        }
    }
}

/// Renews every connected client's due messages every `policy.period`, until the client table
/// or the broker is dropped (the server stopped).
pub(crate) async fn renewer(clients: Weak<Clients>, broker: Weak<Broker>, policy: RenewPolicy) {
    assert!(!policy.period.is_zero(), "a renewer that never waits would spin");
    let mut tick = tokio::time::interval(policy.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (Some(clients), Some(broker)) = (clients.upgrade(), broker.upgrade()) else {
            return;
        };
        renew_all(&clients, &broker, &policy);
    }
}

fn renew_all(clients: &Clients, broker: &Broker, policy: &RenewPolicy) {
    let invisible_ms = i64::try_from(policy.invisible.as_millis()).unwrap_or(i64::MAX);
    for client in clients.all() {
        if !client.has_telemetry() {
            // Gone (or between streams): its messages come back when their time ends.
            client.renewals.clear();
            continue;
        }
        for (given, held) in client.renewals.due(policy, now_ms()) {
            let h = &held.current;
            let changed =
                broker
                    .pop
                    .change_invisible_time(&held.group, &held.topic, h.queue_id, h.queue_offset, h.pop_time_ms, invisible_ms);
            match changed {
                Ok(pop_time_ms) => client.renewals.renewed(
                    &given,
                    ReceiptHandle {
                        pop_time_ms,
                        invisible_ms,
                        ..held.current.clone()
                    },
                ),
                Err(e) => {
                    // Acked meanwhile, or already back: nothing left to renew.
                    tracing::debug!(client = %client.client_id, error = %e, "a held message could not be renewed");
                    client.renewals.release(&given);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(pop_time_ms: i64, invisible_ms: i64, queue_offset: i64) -> ReceiptHandle {
        ReceiptHandle {
            pop_time_ms,
            invisible_ms,
            broker_name: "broker-a".into(),
            queue_id: 0,
            queue_offset,
            commit_log_offset: 0,
        }
    }

    #[test]
    fn held_messages_are_bounded_due_before_they_would_come_back_and_released_with_their_latest_handle() {
        let policy = RenewPolicy {
            invisible: Duration::from_secs(60),
            ahead: Duration::from_secs(10),
            max: Duration::from_secs(3_600),
            period: Duration::from_secs(1),
        };
        let renewals = Renewals::default();
        let now = 1_000_000;
        // Back in 5 s (due: within the 10 s ahead) and in 30 s (not yet).
        assert!(renewals.hold("soon".into(), "G", "T", handle(now - 55_000, 60_000, 1)));
        assert!(renewals.hold("later".into(), "G", "T", handle(now - 30_000, 60_000, 2)));
        let due: Vec<String> = renewals.due(&policy, now).into_iter().map(|(k, _)| k).collect();
        assert_eq!(due, ["soon"]);
        renewals.renewed("soon", handle(now, 60_000, 1));
        assert!(renewals.due(&policy, now).is_empty(), "renewed: 60 s to go");
        assert_eq!(renewals.release("soon"), Some(handle(now, 60_000, 1)), "the latest handle");
        assert_eq!(renewals.release("soon"), None, "released once");
        renewals.renewed("soon", handle(now, 1, 1));
        assert_eq!(renewals.len(), 1, "a renewal after the release brings nothing back");

        let past_max = RenewPolicy {
            max: Duration::ZERO,
            ..policy
        };
        assert!(renewals.due(&past_max, now).is_empty());
        assert!(renewals.is_empty(), "held past the longest renewal: let go");

        for i in 0..MAX_HELD_PER_CLIENT {
            assert!(renewals.hold(format!("h{i}"), "G", "T", handle(now, 60_000, 3)));
        }
        assert!(
            !renewals.hold("one-more".into(), "G", "T", handle(now, 60_000, 4)),
            "the bound holds"
        );
    }
}
