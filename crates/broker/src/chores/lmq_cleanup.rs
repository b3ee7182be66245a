//! Removes light message queues that hold nothing readable any more (`lmqCleanupIntervalSeconds`):
//! with one queue per device or client, queues whose messages all passed retention would
//! otherwise pile up, each a directory, a mapping and a count against `maxLmqConsumeQueueNum`.
//!
//! Owns: the pass and the offsets of the queues it removes. Must never: remove a queue with a
//! readable message, or one that got a message while the pass looked (the store checks that
//! under the put-message lock).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::broker::Broker;

/// Queues one pass removes at most, so that a pass is bounded however many expired at once.
pub const MAX_REMOVED_PER_PASS: usize = 10_000;

/// Runs until the task is dropped, on every role: a slave's retention expires the same
/// segments as its master's.
pub async fn run(broker: Arc<Broker>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let store = broker.store.clone();
        let removed = match tokio::task::spawn_blocking(move || store.remove_expired_light_queues(MAX_REMOVED_PER_PASS)).await {
            Ok(Ok(removed)) => removed,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "cannot remove expired light message queues");
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, "the light message queue cleanup failed");
                continue;
            }
        };
        if removed.is_empty() {
            continue;
        }
        tracing::info!(queues = removed.len(), "light message queues removed: their messages all expired");
        let removed: HashSet<String> = removed.into_iter().collect();
        broker.offsets.remove_topics(&removed);
    }
}
