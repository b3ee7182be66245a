//! Long polling: pulls that found nothing wait here until the dispatcher reports new entries
//! for their queue, their hold time ends, or the broker shuts down.
//!
//! Owns: one `Notify` per queue that has had a waiter, and the count of waiters. Must never:
//! lose a wake-up between a waiter's last look and its sleep (the waiter registers interest
//! first, then looks), or hold more than its bound of waiters.

tokio::task_local! {
    /// Set within a request's scope (the front end's) once the request waits here.
    pub(crate) static SUSPENDED: std::cell::Cell<bool>;
}

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::Notify;

use crate::error::BrokerError;

/// The pulls and pops waiting for new messages, by queue, up to a bound on how many wait at once.
pub struct LongPoll {
    /// topic -> queue id -> notifier; keyed by topic first so the dispatcher looks up by `&str`
    /// without allocating.
    queues: RwLock<HashMap<String, HashMap<i32, Arc<Notify>>>>,
    waiting: AtomicUsize,
    max_waiters: usize,
    closing: AtomicBool,
    closed: Notify,
}

/// A place among the waiters; dropping it gives the place back.
pub struct Place<'a>(&'a LongPoll);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl LongPoll {
    /// Room for `max_waiters` held pulls at once (`maxLongPollWaiters`); panics if it is 0.
    #[must_use]
    pub fn new(max_waiters: usize) -> LongPoll {
        assert!(max_waiters > 0, "room for one waiter at least");
        LongPoll {
            queues: RwLock::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
            max_waiters,
            closing: AtomicBool::new(false),
            closed: Notify::new(),
        }
    }

    fn notifier(&self, topic: &str, queue_id: i32) -> Arc<Notify> {
        if let Some(n) = self.queues.read().get(topic).and_then(|q| q.get(&queue_id)) {
            return n.clone();
        }
        self.queues
            .write()
            .entry(topic.to_owned())
            .or_default()
            .entry(queue_id)
            .or_default()
            .clone()
    }

    /// Wakes every waiter of the queue, and the waiters of any queue of the topic (called on
    /// the dispatcher thread).
    pub fn notify(&self, topic: &str, queue_id: i32) {
        let queues = self.queues.read();
        let Some(topic_queues) = queues.get(topic) else {
            return;
        };
        if let Some(n) = topic_queues.get(&queue_id) {
            n.notify_waiters();
        }
        // Pops of any queue (queue id -1) wait on the topic as a whole.
        if let Some(n) = topic_queues.get(&-1).filter(|_| queue_id != -1) {
            n.notify_waiters();
        }
    }

    /// Pulls held now.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Takes a place among the waiters.
    ///
    /// # Errors
    /// [`BrokerError::Busy`] when `max_waiters` pulls are held already.
    pub fn enter(&self) -> Result<Place<'_>, BrokerError> {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_waiters {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(BrokerError::Busy(format!(
                "[LONG_POLL_FULL] {} pulls are already held; pull again later",
                self.max_waiters
            )));
        }
        Ok(Place(self))
    }

    /// Wakes every waiter now and every later one at once (shutdown).
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.closed.notify_waiters();
        for queues in self.queues.read().values() {
            for n in queues.values() {
                n.notify_waiters();
            }
        }
    }

    /// Waits until `ready()` is true, `hold` passes or the broker closes; returns `ready()`.
    pub async fn wait(&self, _place: &Place<'_>, topic: &str, queue_id: i32, hold: Duration, ready: impl Fn() -> bool) -> bool {
        // The request is held: its answer is a long poll's (`rocketmq_rpc_latency`'s label).
        let _ = SUSPENDED.try_with(|s| s.set(true));
        let notify = self.notifier(topic, queue_id);
        let deadline = tokio::time::Instant::now() + hold;
        loop {
            let notified = notify.notified();
            let closed = self.closed.notified();
            tokio::pin!(notified, closed);
            notified.as_mut().enable();
            closed.as_mut().enable();
            if ready() || self.closing.load(Ordering::Acquire) {
                return ready();
            }
            tokio::select! {
                () = &mut notified => {}
                () = &mut closed => {}
                () = tokio::time::sleep_until(deadline) => return ready(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[tokio::test]
    async fn a_notify_wakes_a_waiter_and_a_timeout_ends_it() {
        let lp = Arc::new(LongPoll::new(8));
        let flag = Arc::new(AtomicBool::new(false));
        let (lp2, flag2) = (lp.clone(), flag.clone());
        let waiter = tokio::spawn(async move {
            let place = lp2.enter().unwrap();
            lp2.wait(&place, "T", 0, Duration::from_secs(10), || flag2.load(Ordering::SeqCst))
                .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        flag.store(true, Ordering::SeqCst);
        lp.notify("T", 0);
        let woke = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken before the hold ends");
        assert!(woke.unwrap());
        let started = std::time::Instant::now();
        let place = lp.enter().unwrap();
        assert!(!lp.wait(&place, "T", 1, Duration::from_millis(100), || false).await);
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn waiters_are_bounded_and_closing_releases_them() {
        let lp = Arc::new(LongPoll::new(2));
        let (a, b) = (lp.enter().unwrap(), lp.enter().unwrap());
        assert!(matches!(lp.enter(), Err(BrokerError::Busy(_))), "a third waiter is refused");
        drop(a);
        let held = {
            let lp = lp.clone();
            tokio::spawn(async move {
                let place = lp.enter().unwrap();
                lp.wait(&place, "T", 0, Duration::from_secs(3600), || false).await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        lp.close();
        let ended = tokio::time::timeout(Duration::from_secs(5), held).await;
        assert!(!ended.expect("closing ends the wait").unwrap());
        drop(b);
        assert_eq!(lp.waiting(), 0);
    }
}
