//! Delivers delayed messages: every [`TICK`], while this broker is the master, each delay level's
//! schedule queue is read from its offset, and the messages whose store time plus the level's
//! delay has passed are stored in their real queues; then the level's offset moves past them and
//! `config/delayOffset.json` is written. A slave only copies its master's offsets.
//!
//! Owns: when a delayed message becomes visible. Must never: move an offset past a message that
//! failed to store (it is tried again at the next tick), or deliver more than
//! [`MAX_DUE_PER_TICK`] messages of one level per tick (a backlog is worked off over ticks, and the
//! other levels and sends are not starved).

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;

use super::cursor::{self, Read};
use crate::broker::Broker;
use crate::services::produce::Delivered;
use crate::services::schedule::SCHEDULE_TOPIC;

/// Between two looks at the schedule queues: a due message is delivered within this of its time.
pub const TICK: Duration = Duration::from_millis(100);
/// Messages read (and stored concurrently) at once from one level.
const BATCH: usize = 64;
/// The most messages of one level delivered in one tick.
pub const MAX_DUE_PER_TICK: usize = 16 * BATCH;

/// Runs until the task is dropped.
pub async fn run(broker: Arc<Broker>) {
    super::every_while_master(broker, TICK, |broker| async move {
        for level in 1..=broker.schedule.levels() {
            deliver_due(&broker, level).await;
        }
        let schedule = broker.schedule.clone();
        super::write_off_runtime("the delay levels' offsets", move || schedule.persist()).await;
    })
    .await;
}

/// Delivers what is due at `level`, up to [`MAX_DUE_PER_TICK`].
async fn deliver_due(broker: &Broker, level: i32) {
    let queue_id = level - 1;
    let delay_ms = i64::try_from(broker.schedule.delay_ms(level)).unwrap_or(i64::MAX);
    let mut delivered_this_tick = 0;
    while delivered_this_tick < MAX_DUE_PER_TICK {
        let offset = broker.schedule.offset(level);
        let records = match cursor::read(broker, SCHEDULE_TOPIC, queue_id, offset, BATCH).await {
            Read::Records(records) => records,
            Read::TooSmall { next } | Read::PastEnd { next } => {
                // Retention removed the level's oldest messages, or this broker's log is shorter
                // than the offset it was given (a new master): go on from where the queue is.
                tracing::warn!(level, offset, next, "delay level offset moved to the queue's bounds");
                broker.schedule.reset(level, next);
                return;
            }
            Read::End => return,
            Read::Unreadable => {
                tracing::error!(level, offset, "unreadable record in the schedule queue; the level waits");
                return;
            }
        };
        let read = records.len();
        let now_ms = crate::now_ms();
        let due: Vec<_> = records
            .into_iter()
            .map(|(_, m)| m)
            .take_while(|m| m.store_timestamp.saturating_add(delay_ms) <= now_ms)
            .collect();
        let all_read_were_due = due.len() == read;
        if due.is_empty() {
            return;
        }
        let results = join_all(due.into_iter().map(|m| broker.produce.deliver_scheduled(m))).await;
        let mut stored: i64 = 0;
        for result in &results {
            match result {
                Ok(Delivered::Stored) => {}
                Ok(Delivered::Skipped(why)) => tracing::warn!(level, offset = offset + stored, why, "delayed message passed over"),
                Err(e) => {
                    tracing::debug!(level, error = %e, "delivery of a due message failed; tried again next tick");
                    break;
                }
            }
            stored += 1;
        }
        broker.schedule.advance(level, offset + stored);
        let stored = usize::try_from(stored).expect("counted up from 0");
        delivered_this_tick += stored;
        if stored < results.len() || !all_read_were_due {
            return;
        }
    }
}
