//! The broker's counters and stage timers, read by runtime info and the metrics endpoint.
//!
//! Owns: the numbers. Must never: take a lock on the send or pull path to count.

use std::sync::atomic::AtomicU64;

use petrel_store::Log2Histogram;

/// Counters and stage timers since the broker started; every one only grows.
#[derive(Default)]
pub struct BrokerStats {
    /// Messages stored (each message of a batch counts).
    pub put_messages: AtomicU64,
    /// Bytes of stored records, as laid out in the commit log.
    pub put_bytes: AtomicU64,
    /// Sends refused or failed.
    pub put_failures: AtomicU64,
    /// Messages returned to pulls.
    pub got_messages: AtomicU64,
    /// Sends whose durability wait passed `syncFlushTimeout`.
    pub flush_timeouts: AtomicU64,
    /// Appends that went to the store pool because the non-blocking path would have blocked.
    pub appends_offloaded: AtomicU64,
    /// Pulls read on the store pool (cold data).
    pub pulls_offloaded: AtomicU64,
    /// Requests refused because a bound was reached (waiters, pool, long polls).
    pub busy_refusals: AtomicU64,
    /// A send from its arrival to its answer being ready, ns.
    pub send_ns: Log2Histogram,
    /// A SYNC_FLUSH send from its append to the flushed watermark passing it, ns.
    pub flush_wait_ns: Log2Histogram,
    /// SYNC_MASTER sends whose replicas did not confirm within `slaveTimeout`.
    pub slave_timeouts: AtomicU64,
    /// SYNC_MASTER sends answered SLAVE_NOT_AVAILABLE (too few slaves in sync).
    pub slave_not_available: AtomicU64,
    /// A SYNC_MASTER send from its append to the replicated watermark passing it, ns.
    pub replica_wait_ns: Log2Histogram,
    /// What RocketMQ 5's metrics count, under their labels.
    pub traffic: crate::traffic::Traffic,
}
