//! The chore that drops brokers silent for longer than the expiry.

use std::sync::Arc;
use std::time::Duration;

use crate::state::{BROKER_EXPIRY, NameServer};

/// How often silent brokers are looked for (RocketMQ: every 5 s after a 5 s delay; Petrel: 10 s).
pub const EXPIRY_SCAN_INTERVAL: Duration = Duration::from_secs(10);

/// Scans every [`EXPIRY_SCAN_INTERVAL`] until the task is dropped.
pub async fn run_expiry(ns: Arc<NameServer>) {
    let mut tick = tokio::time::interval(EXPIRY_SCAN_INTERVAL);
    loop {
        tick.tick().await;
        for addr in ns.expire_brokers(BROKER_EXPIRY) {
            tracing::warn!(%addr, "broker expired: no registration for 120 s");
        }
    }
}
