//! Lock statistics: acquisitions, contention, spins, retreats and a wait-time histogram, kept in
//! per-thread shards so that counting does not become the contention it measures.
//!
//! Owns: the counters and their snapshot. Must never: take a lock or read the clock on an
//! uncontended acquisition.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// Counter shards; threads are spread over them round-robin.
pub const SHARDS: usize = 32;
/// Log2 buckets of the wait-time histogram: bucket `b` counts waits in `[2^(b-1), 2^b)` ns.
pub const WAIT_BUCKETS: usize = 40;

#[repr(align(128))]
pub(crate) struct Shard {
    pub(crate) acquisitions: AtomicU64,
    pub(crate) contended: AtomicU64,
    pub(crate) spins: AtomicU64,
    pub(crate) retreats: AtomicU64,
    pub(crate) wait_ns: AtomicU64,
    pub(crate) waits: [AtomicU64; WAIT_BUCKETS],
    /// Acquisitions and retreats since the adaptive lock's last evaluation.
    pub(crate) window_acquisitions: AtomicU64,
    pub(crate) window_retreats: AtomicU64,
    /// Distinct threads seen since the last evaluation (each counts itself once per epoch).
    pub(crate) window_threads: AtomicU64,
}

impl Default for Shard {
    fn default() -> Self {
        Shard {
            acquisitions: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            spins: AtomicU64::new(0),
            retreats: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            waits: std::array::from_fn(|_| AtomicU64::new(0)),
            window_acquisitions: AtomicU64::new(0),
            window_retreats: AtomicU64::new(0),
            window_threads: AtomicU64::new(0),
        }
    }
}

thread_local! {
    static SHARD_INDEX: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
    };
    /// (lock identity, epoch) this thread last counted itself in.
    static LAST_EPOCH: Cell<(usize, u64)> = const { Cell::new((0, u64::MAX)) };
}

/// This thread's shard.
#[inline]
pub(crate) fn shard_index() -> usize {
    SHARD_INDEX.with(|i| *i)
}

pub(crate) struct LockStats {
    shards: Box<[Shard]>,
}

impl Default for LockStats {
    fn default() -> Self {
        LockStats {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

/// Nanoseconds since `start`, for waits and the adaptive lock's clock.
#[inline]
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 nanoseconds last 584 years, longer than any wait or lock lifetime"
)]
pub(crate) fn ns_since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// What one acquisition cost.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Acquisition {
    pub(crate) contended: bool,
    pub(crate) spins: u64,
    pub(crate) retreats: u64,
    pub(crate) wait_ns: u64,
}

impl LockStats {
    #[inline]
    pub(crate) fn shard(&self) -> &Shard {
        &self.shards[shard_index()]
    }

    #[inline]
    pub(crate) fn record(&self, a: Acquisition) {
        let s = self.shard();
        s.acquisitions.fetch_add(1, Ordering::Relaxed);
        s.window_acquisitions.fetch_add(1, Ordering::Relaxed);
        if a.contended {
            s.contended.fetch_add(1, Ordering::Relaxed);
            s.spins.fetch_add(a.spins, Ordering::Relaxed);
            s.retreats.fetch_add(a.retreats, Ordering::Relaxed);
            s.window_retreats.fetch_add(a.retreats, Ordering::Relaxed);
            s.wait_ns.fetch_add(a.wait_ns, Ordering::Relaxed);
            let bucket = (64 - a.wait_ns.leading_zeros() as usize).min(WAIT_BUCKETS - 1);
            s.waits[bucket].fetch_add(1, Ordering::Relaxed);
        } else {
            s.waits[0].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts this thread once in the current evaluation epoch of the lock at `lock_id`.
    #[inline]
    pub(crate) fn note_thread(&self, lock_id: usize, epoch: u64) {
        LAST_EPOCH.with(|last| {
            if last.get() != (lock_id, epoch) {
                last.set((lock_id, epoch));
                self.shard().window_threads.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    /// Reads and resets the window counters: (acquisitions, retreats, threads).
    pub(crate) fn take_window(&self) -> (u64, u64, u64) {
        let mut out = (0, 0, 0);
        for s in self.shards.iter() {
            out.0 += s.window_acquisitions.swap(0, Ordering::Relaxed);
            out.1 += s.window_retreats.swap(0, Ordering::Relaxed);
            out.2 += s.window_threads.swap(0, Ordering::Relaxed);
        }
        out
    }

    pub(crate) fn snapshot(&self) -> Counters {
        let mut c = Counters::default();
        for s in self.shards.iter() {
            c.acquisitions += s.acquisitions.load(Ordering::Relaxed);
            c.contended += s.contended.load(Ordering::Relaxed);
            c.spins += s.spins.load(Ordering::Relaxed);
            c.retreats += s.retreats.load(Ordering::Relaxed);
            c.wait_ns_total += s.wait_ns.load(Ordering::Relaxed);
            for (b, w) in s.waits.iter().enumerate() {
                c.wait_histogram[b] += w.load(Ordering::Relaxed);
            }
        }
        c
    }
}

/// Totals since the lock was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Times the lock was taken.
    pub acquisitions: u64,
    /// Acquisitions that did not get the lock on the first try.
    pub contended: u64,
    /// Busy-wait iterations spent by contended acquisitions.
    pub spins: u64,
    /// Full spin rounds that ended in a yield (backoff and adaptive spin modes).
    pub retreats: u64,
    /// Time contended acquisitions spent waiting, summed, in ns.
    pub wait_ns_total: u64,
    /// `wait_histogram[b]`: acquisitions that waited in `[2^(b-1), 2^b)` ns; bucket 0 = no wait.
    pub wait_histogram: [u64; WAIT_BUCKETS],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            acquisitions: 0,
            contended: 0,
            spins: 0,
            retreats: 0,
            wait_ns_total: 0,
            wait_histogram: [0; WAIT_BUCKETS],
        }
    }
}

impl Counters {
    /// Upper bound, in ns, of the bucket holding quantile `q` (0..=1) of the waits.
    pub fn wait_quantile_ns(&self, q: f64) -> u64 {
        let total: u64 = self.wait_histogram.iter().sum();
        if total == 0 {
            return 0;
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "q ≤ 1 keeps the product within `total`, a u64; rounding at the top saturates"
        )]
        let target = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in self.wait_histogram.iter().enumerate() {
            seen += n;
            if seen >= target {
                return if b == 0 { 0 } else { 1u64 << b };
            }
        }
        1u64 << (WAIT_BUCKETS - 1)
    }
}
