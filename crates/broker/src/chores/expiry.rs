//! Drops clients not heard from within `channelExpiredTimeout`.

use std::sync::Arc;
use std::time::Duration;

use crate::services::groups::GroupService;

/// How often silent clients are looked for.
pub const EXPIRY_SCAN_INTERVAL: Duration = Duration::from_secs(10);

/// Runs until the task is dropped.
pub async fn run(groups: Arc<GroupService>, timeout: Duration) {
    let mut tick = tokio::time::interval(EXPIRY_SCAN_INTERVAL);
    loop {
        tick.tick().await;
        groups.expire(timeout);
    }
}
