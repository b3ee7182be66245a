//! Delivers timer messages: every [`TICK`], while this broker is the master, the timer topic's
//! queues are read into the index from where reading stopped, the messages whose time has come
//! are stored in their real queues, messages that pin the checkpoint are rolled, and
//! `config/timerCheckpoint.json` is written. A slave only copies its master's checkpoint.
//!
//! Owns: when a timer message becomes visible. Must never: count a message as delivered before
//! its copy is stored (it is tried again at the next tick), or do more than [`MAX_PER_TICK`]
//! reads, deliveries or rolls of each kind in one tick (a backlog is worked off over ticks).

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use petrel_protocol::message::MessageExt;

use super::cursor::{self, Read};
use crate::broker::Broker;
use crate::services::BrokerError;
use crate::services::produce::Delivered;
use crate::services::timer::{ARRIVALS_QUEUE, ROLLED_QUEUE, TIMER_TOPIC, stored_due_ms};

/// Between two passes: a due message is delivered within this of its time.
pub const TICK: Duration = Duration::from_millis(100);
/// Messages read, or stored concurrently, at once.
const BATCH: usize = 64;
/// The most messages read, delivered, or rolled in one tick.
pub const MAX_PER_TICK: usize = 16 * BATCH;

/// Runs until the task is dropped.
pub async fn run(broker: Arc<Broker>) {
    super::every_while_master(broker, TICK, |broker| async move {
        for queue_id in [ARRIVALS_QUEUE, ROLLED_QUEUE] {
            read_into_index(&broker, queue_id).await;
        }
        deliver_due(&broker).await;
        roll_pinning(&broker).await;
        let timer = broker.timer.clone();
        super::write_off_runtime("the timer checkpoint", move || timer.persist()).await;
    })
    .await;
}

/// Indexes what was stored in `queue_id` since the last read, up to [`MAX_PER_TICK`].
async fn read_into_index(broker: &Broker, queue_id: i32) {
    let mut read = 0;
    while read < MAX_PER_TICK && !broker.timer.index_full() {
        let offset = broker.timer.scanned(queue_id);
        let records = match cursor::read(broker, TIMER_TOPIC, queue_id, offset, BATCH).await {
            Read::Records(records) => records,
            Read::TooSmall { next } | Read::PastEnd { next } => {
                tracing::warn!(queue_id, offset, next, "timer queue read moved to the queue's bounds");
                broker.timer.skip_to(queue_id, next);
                return;
            }
            Read::End => return,
            Read::Unreadable => {
                tracing::error!(queue_id, offset, "unreadable record in the timer queue; reading waits");
                return;
            }
        };
        let messages: Vec<MessageExt> = records.into_iter().map(|(_, m)| m).collect();
        for m in &messages {
            if m.queue_offset != broker.timer.scanned(queue_id) {
                tracing::error!(queue_id, offset = m.queue_offset, "timer queue record out of order; reading waits");
                return;
            }
            // One without a due time (none of ours) is delivered at once.
            let due_ms = stored_due_ms(&m.properties).unwrap_or(0);
            broker.timer.index(queue_id, m.queue_offset, due_ms);
        }
        read += messages.len();
        if messages.len() < BATCH {
            return;
        }
    }
}

/// Stores what is due in its real queues, earliest first, up to [`MAX_PER_TICK`].
async fn deliver_due(broker: &Broker) {
    let due = broker.timer.due(crate::now_ms(), MAX_PER_TICK);
    store_each(broker, &due, "delivery of a due timer message", |m| async move {
        if let Delivered::Skipped(why) = broker.produce.deliver_scheduled(m).await? {
            tracing::warn!(why, "timer message passed over");
        }
        Ok(())
    })
    .await;
}

/// Rolls the messages [`crate::services::timer::TimerService::to_roll`] names.
async fn roll_pinning(broker: &Broker) {
    let to_roll = broker.timer.to_roll(crate::now_ms(), MAX_PER_TICK);
    store_each(broker, &to_roll, "rolling a timer message", |m| broker.produce.roll_timer(m)).await;
}

/// Reads each (queue, offset) of `list`, stores it with `store` ([`BATCH`] at once) and counts it
/// done once stored; at the first failure the rest waits for the next tick.
async fn store_each<F, Fut>(broker: &Broker, list: &[(i32, i64)], what: &str, store: F)
where
    F: Fn(MessageExt) -> Fut,
    Fut: Future<Output = Result<(), BrokerError>>,
{
    for chunk in list.chunks(BATCH) {
        let found = cursor::read_each(broker, TIMER_TOPIC, chunk.to_vec()).await;
        let read: Vec<_> = chunk
            .iter()
            .zip(found)
            .filter_map(|(&(q, o), found)| one_record(broker, q, o, found).map(|m| (q, o, m)))
            .collect();
        let results = join_all(read.into_iter().map(|(q, o, m)| {
            let stored = store(m);
            async move { (q, o, stored.await) }
        }))
        .await;
        for (queue_id, offset, result) in results {
            if let Err(e) = result {
                tracing::debug!(error = %e, "{what} failed; tried again next tick");
                return;
            }
            broker.timer.done(queue_id, offset);
        }
    }
}

/// The message at `offset` of timer queue `queue_id`; `None` when retention removed it (it is
/// counted as done: nothing is left to deliver).
fn one_record(broker: &Broker, queue_id: i32, offset: i64, found: Read) -> Option<MessageExt> {
    match found {
        Read::Records(records) => records.into_iter().next().map(|(_, m)| m),
        Read::TooSmall { .. } => {
            tracing::warn!(queue_id, offset, "a pending timer message was removed by retention");
            broker.timer.done(queue_id, offset);
            None
        }
        Read::End | Read::PastEnd { .. } | Read::Unreadable => None,
    }
}
