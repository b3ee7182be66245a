//! Auto-renew: a push consumer receives with `auto_renew` and leaves the message's invisible
//! time to the broker, as RocketMQ's proxy does it. The broker keeps each such message invisible
//! while its client is connected — renewing it [`RenewPolicy::ahead`] before it would come back —
//! so a listener slower than the invisible time does not see its message delivered twice. The
//! client acks with the handle it was given; the broker acks with the latest one.
//!
//! Owns: each client's held messages (by the handle the client holds) and the renewer task.
//! Must never: hold more than [`MAX_HELD_PER_CLIENT`] messages for one client, renew a message
//! past [`RenewPolicy::max`], renew for a client whose Telemetry stream is gone (its messages
//! then come back when their invisible time ends, as a disconnected client's must), or keep
//! renewing a message its client never got (a receive cancelled before its answer was written
//! gives its messages back at once: `HeldGuard`).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use petrel_broker::Broker;
use petrel_kit::clock::now_ms;

use crate::clients::{Clients, GrpcClient};
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

    /// [`Renewals::release`], with the message's group and topic.
    fn take(&self, given: &str) -> Option<Held> {
        self.held.lock().remove(given)
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

    /// The handle that names a held message now, leaving it held (a forward that may fail).
    pub(crate) fn current(&self, given: &str) -> Option<ReceiptHandle> {
        self.held.lock().get(given).map(|h| h.current.clone())
    }

    /// Renews each held message due for it (back within `policy.ahead` of `now`) when
    /// `connected`: `renew` gives its new pop time, or `None` when it is no longer in flight
    /// (then it is let go). A message held past `policy.max`, or any message while the client is
    /// not connected, is not renewed but stays in the table until its current handle's time
    /// ends: an ack with the handle the client was given still finds the current one meanwhile,
    /// and a client whose stream comes back within `ahead` loses nothing.
    ///
    /// All under the table's lock, so an ack that releases a message waits for a renewal in
    /// progress and gets the renewed handle. (Acked with the old one, the POP service would take
    /// the ack for a stale one and keep the message in flight, to come back as a duplicate.)
    pub(crate) fn renew_due(
        &self,
        policy: &RenewPolicy,
        now: i64,
        connected: bool,
        mut renew: impl FnMut(&str, &str, &ReceiptHandle, i64) -> Option<i64>,
    ) {
        let ahead_ms = i64::try_from(policy.ahead.as_millis()).unwrap_or(i64::MAX);
        let invisible_ms = i64::try_from(policy.invisible.as_millis()).unwrap_or(i64::MAX);
        let mut held = self.held.lock();
        held.retain(|_, h| {
            let visible_at_ms = h.current.visible_at_ms();
            if visible_at_ms.saturating_sub(now) > ahead_ms {
                return true;
            }
            if !connected || h.received.elapsed() >= policy.max {
                // Not renewed: kept only while its handle still names it.
                return visible_at_ms > now;
            }
            match renew(&h.group, &h.topic, &h.current, invisible_ms) {
                Some(pop_time_ms) => {
                    h.current.pop_time_ms = pop_time_ms;
                    h.current.invisible_ms = invisible_ms;
                    true
                }
                None => false,
            }
        });
    }
}

/// The messages one receive put on hold. If the answer is dropped before it was all written
/// (the call cancelled, the client gone mid-receive), they are given back: no longer renewed,
/// and visible again at once, as RocketMQ's proxy does when its write fails. Without this a
/// message the client never got would be renewed for as long as the client stays connected.
pub(crate) struct HeldGuard {
    client: Arc<GrpcClient>,
    broker: Arc<Broker>,
    given: Vec<String>,
    written: bool,
}

impl HeldGuard {
    pub(crate) fn new(client: Arc<GrpcClient>, broker: Arc<Broker>) -> HeldGuard {
        HeldGuard {
            client,
            broker,
            given: Vec::new(),
            written: false,
        }
    }

    /// [`Renewals::hold`], remembered so that an unwritten answer gives the message back.
    pub(crate) fn hold(&mut self, given: String, group: &str, topic: &str, current: ReceiptHandle) -> bool {
        if !self.client.renewals.hold(given.clone(), group, topic, current) {
            return false;
        }
        self.given.push(given);
        true
    }

    /// The answer was written: its messages stay held.
    pub(crate) fn written(mut self) {
        self.written = true;
    }
}

impl Drop for HeldGuard {
    fn drop(&mut self) {
        if self.written {
            return;
        }
        for given in &self.given {
            let Some(held) = self.client.renewals.take(given) else { continue };
            let h = &held.current;
            let back = self
                .broker
                .pop
                .change_invisible_time(&held.group, &held.topic, h.queue_id, h.queue_offset, h.pop_time_ms, 0);
            if let Err(e) = back {
                tracing::debug!(client = %self.client.client_id, error = %e, "an unwritten message was no longer in flight");
            }
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
    for client in clients.all() {
        // A client without its Telemetry stream is gone (or between streams): its messages are
        // not renewed, and come back when their time ends unless the stream returns first.
        let connected = client.has_telemetry();
        client
            .renewals
            .renew_due(policy, now_ms(), connected, |group, topic, h, invisible_ms| {
                broker
                    .pop
                    .change_invisible_time(group, topic, h.queue_id, h.queue_offset, h.pop_time_ms, invisible_ms)
                    // Acked meanwhile, or already back: nothing left to renew.
                    .inspect_err(|e| tracing::debug!(client = %client.client_id, error = %e, "a held message could not be renewed"))
                    .ok()
            });
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
        let mut asked = Vec::new();
        renewals.renew_due(&policy, now, true, |group, topic, h, invisible_ms| {
            asked.push((group.to_owned(), topic.to_owned(), h.queue_offset, invisible_ms));
            Some(now)
        });
        assert_eq!(asked, [("G".to_owned(), "T".to_owned(), 1, 60_000)], "only the one due");
        renewals.renew_due(&policy, now, true, |_, _, _, _| panic!("renewed: 60 s to go, nothing due"));
        assert_eq!(renewals.release("soon"), Some(handle(now, 60_000, 1)), "the latest handle");
        assert_eq!(renewals.release("soon"), None, "released once");
        assert_eq!(renewals.len(), 1);

        // One no longer in flight (acked elsewhere, or back) is let go.
        let much_later = now + 25_000;
        renewals.renew_due(&policy, much_later, true, |_, _, _, _| None);
        assert!(renewals.is_empty(), "a message that could not be renewed is let go");

        // Past the longest renewal, or with the client away: not renewed, but kept while the
        // current handle still names the message (the client's ack still finds it).
        let past_max = RenewPolicy {
            max: Duration::ZERO,
            ..policy
        };
        assert!(renewals.hold("old".into(), "G", "T", handle(now - 55_000, 60_000, 5)));
        renewals.renew_due(&past_max, now, true, |_, _, _, _| panic!("past the longest renewal: not renewed"));
        renewals.renew_due(&policy, now, false, |_, _, _, _| panic!("the client is away: not renewed"));
        assert_eq!(
            renewals.current("old"),
            Some(handle(now - 55_000, 60_000, 5)),
            "kept until its time ends"
        );
        renewals.renew_due(&policy, now + 5_000, false, |_, _, _, _| panic!("not renewed"));
        assert!(renewals.is_empty(), "its time ended: let go");

        for i in 0..MAX_HELD_PER_CLIENT {
            assert!(renewals.hold(format!("h{i}"), "G", "T", handle(now, 60_000, 3)));
        }
        assert!(
            !renewals.hold("one-more".into(), "G", "T", handle(now, 60_000, 4)),
            "the bound holds"
        );
    }

    #[test]
    fn an_ack_racing_a_renewal_gets_the_renewed_handle() {
        let policy = RenewPolicy::default();
        let renewals = std::sync::Arc::new(Renewals::default());
        let now = 1_000_000;
        assert!(renewals.hold("given".into(), "G", "T", handle(now - 55_000, 60_000, 1)));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let acker = {
            let renewals = renewals.clone();
            std::thread::spawn(move || {
                started_rx.recv().expect("the renewal started");
                // The ack releases while the renewal is in progress.
                renewals.release("given")
            })
        };
        renewals.renew_due(&policy, now, true, |_, _, _, _| {
            started_tx.send(()).expect("the acker waits");
            std::thread::sleep(Duration::from_millis(50));
            Some(now)
        });
        let released = acker.join().expect("joined");
        assert_eq!(
            released,
            Some(handle(now, 60_000, 1)),
            "the ack must use the renewed handle, not the one it replaced"
        );
    }
}
