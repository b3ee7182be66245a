//! Store statistics: counters and log2 histograms of the append and flush stages, read live by
//! the broker's metrics.
//!
//! Owns: the numbers. Must never: take a lock or allocate when recording — the append path
//! records on every message.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of a [`Log2Histogram`]: bucket `b` counts values in `[2^(b-1), 2^b)`, bucket 0 zeros.
pub const LOG2_BUCKETS: usize = 48;

/// A lock-free histogram with power-of-two buckets.
pub struct Log2Histogram {
    buckets: [AtomicU64; LOG2_BUCKETS],
    sum: AtomicU64,
    count: AtomicU64,
}

impl Default for Log2Histogram {
    fn default() -> Self {
        Log2Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

/// A histogram's values at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// `buckets[b]`: values in `[2^(b-1), 2^b)`; `buckets[0]`: zeros.
    pub buckets: Vec<u64>,
    /// All recorded values added up.
    pub sum: u64,
    /// Values recorded.
    pub count: u64,
}

impl HistogramSnapshot {
    /// Upper bound (exclusive) of bucket `b`.
    #[must_use]
    pub fn upper_bound(b: usize) -> u64 {
        if b == 0 { 1 } else { 1u64 << b.min(63) }
    }

    /// The value below which `q` (0..=1) of the samples fall, to bucket precision.
    #[must_use]
    pub fn quantile(&self, q: f64) -> u64 {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "q <= 1 keeps the rank within count, a u64; outside 0..=1 the cast saturates, as wanted"
        )]
        let rank = (q * self.count as f64).ceil() as u64;
        let mut seen = 0;
        for (b, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank.max(1) {
                return Self::upper_bound(b);
            }
        }
        0
    }
}

impl Log2Histogram {
    /// Records one value.
    pub fn record(&self, value: u64) {
        let b = (u64::BITS - value.leading_zeros()) as usize;
        self.buckets[b.min(LOG2_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    #[must_use]
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect(),
            sum: self.sum.load(Ordering::Relaxed),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

/// The commit log's stage statistics.
#[derive(Default)]
pub struct CommitLogStats {
    /// Records appended (a batch counts each record).
    pub appended_records: AtomicU64,
    /// Time inside `append` once the put-message lock is held (offsets, patch, copy), ns.
    pub append_ns: Log2Histogram,
    /// Appends the non-blocking path handed back because the next segment was not prepared yet.
    pub appends_would_block: AtomicU64,
    /// Rolls that had to wait for the next segment to be prepared.
    pub roll_waits: AtomicU64,
    /// Flushes done.
    pub flushes: AtomicU64,
    /// Duration of each flush, ns.
    pub flush_ns: Log2Histogram,
    /// Records each flush made durable.
    pub records_per_flush: Log2Histogram,
    /// `appended_records` when the last flush started.
    pub(crate) records_at_last_flush: AtomicU64,
    /// Bytes made durable, summed over the flushes.
    pub flushed_bytes: AtomicU64,
    /// Segments created ahead of need.
    pub segments_prepared: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_power_of_two_buckets() {
        let h = Log2Histogram::default();
        for v in [0, 1, 2, 3, 4, 1000, u64::MAX] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.count, 7);
        assert_eq!((s.buckets[0], s.buckets[1], s.buckets[2], s.buckets[3]), (1, 1, 2, 1));
        assert_eq!(s.buckets[10], 1, "1000 is in [512, 1024)");
        assert_eq!(s.buckets[LOG2_BUCKETS - 1], 1, "the largest values share the last bucket");
        assert_eq!(s.quantile(0.5), 4, "the 4th of 7 values is 2 or 3, below 4");
    }
}
