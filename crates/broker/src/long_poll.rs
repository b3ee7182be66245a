//! Long polling: pulls that found nothing wait here until the dispatcher reports new entries
//! for their queue, or their hold time ends.
//!
//! Owns: one `Notify` per queue that has had a waiter. Must never: lose a wake-up between a
//! waiter's last look and its sleep (the waiter registers interest first, then looks).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::Notify;

#[derive(Default)]
pub struct LongPoll {
    /// topic -> queue id -> notifier; keyed by topic first so the dispatcher looks up by `&str`
    /// without allocating.
    queues: RwLock<HashMap<String, HashMap<i32, Arc<Notify>>>>,
}

impl LongPoll {
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

    /// Wakes every waiter of the queue (called on the dispatcher thread).
    pub fn notify(&self, topic: &str, queue_id: i32) {
        if let Some(n) = self.queues.read().get(topic).and_then(|q| q.get(&queue_id)) {
            n.notify_waiters();
        }
    }

    /// Waits until `ready()` is true or `hold` passes; returns `ready()` at the end.
    pub async fn wait(&self, topic: &str, queue_id: i32, hold: Duration, ready: impl Fn() -> bool) -> bool {
        let notify = self.notifier(topic, queue_id);
        let deadline = tokio::time::Instant::now() + hold;
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready() {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return ready();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn a_notify_wakes_a_waiter_and_a_timeout_ends_it() {
        let lp = Arc::new(LongPoll::default());
        let flag = Arc::new(AtomicBool::new(false));
        let (lp2, flag2) = (lp.clone(), flag.clone());
        let waiter = tokio::spawn(async move { lp2.wait("T", 0, Duration::from_secs(10), || flag2.load(Ordering::SeqCst)).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        flag.store(true, Ordering::SeqCst);
        lp.notify("T", 0);
        let woke = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken before the hold ends");
        assert!(woke.unwrap());
        let started = std::time::Instant::now();
        assert!(!lp.wait("T", 1, Duration::from_millis(100), || false).await);
        assert!(started.elapsed() >= Duration::from_millis(100));
    }
}
