//! Writes `config/consumerOffset.json` every `flushConsumerOffsetInterval` when offsets changed.

use std::sync::Arc;
use std::time::Duration;

use crate::services::offsets::OffsetTable;

/// Runs until the task is dropped; the write itself runs on the blocking pool.
pub async fn run(table: Arc<OffsetTable>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let table = table.clone();
        match tokio::task::spawn_blocking(move || table.persist()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "cannot persist consumer offsets"),
            Err(e) => tracing::error!(error = %e, "the offset writer failed"),
        }
    }
}
