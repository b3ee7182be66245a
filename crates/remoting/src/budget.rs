//! One memory budget for the bytes of unfinished frames that connections hold: what a peer has
//! sent of a request that is not complete yet (or not served yet), counted as the buffer's
//! memory (its reserved room too), so that many connections holding a byte each count what
//! they cost. A frame's length word may
//! claim up to `max_frame_bytes`; the buffer only ever holds what actually arrived, and all the
//! connections sharing a budget (a process's ports) hold at most `max_bytes` together. Past it,
//! the connections whose unfinished frame has waited longest — the slowest senders, where a
//! peer trickling nearly complete frames to pin memory always ends up — are closed first, until
//! the rest fit.
//!
//! Owns: the per-connection figures and the choice of whom to close. Must never: close a
//! connection that holds nothing, let the total it reports drift from what connections hold, or
//! take its lock on a connection whose requests arrive whole (it registers only leftovers).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use parking_lot::Mutex;

use crate::connection::Connection;

/// RocketMQ has no such bound; this one lets 8 unfinished frames of the largest size (16 MiB)
/// arrive at once, far more than clients send concurrently, and keeps a flood of trickled ones
/// to a fraction of a small container.
pub const DEFAULT_PARTIAL_FRAME_BUDGET_BYTES: usize = 128 << 20;

struct Holder {
    bytes: usize,
    /// When the first byte of its oldest unfinished frame arrived.
    since: Instant,
    conn: Weak<Connection>,
}

/// The budget several servers may share (clone the `Arc`).
pub struct FrameBudget {
    max_bytes: usize,
    total: AtomicUsize,
    holders: Mutex<HashMap<u64, Holder>>,
    evicted: AtomicU64,
}

impl std::fmt::Debug for FrameBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameBudget")
            .field("max_bytes", &self.max_bytes)
            .field("held_bytes", &self.held_bytes())
            .finish_non_exhaustive()
    }
}

/// Two budgets of the same size are the same setting.
impl PartialEq for FrameBudget {
    fn eq(&self, other: &Self) -> bool {
        self.max_bytes == other.max_bytes
    }
}

impl Eq for FrameBudget {}

impl FrameBudget {
    /// A budget of `max_bytes` for all the connections that share it.
    ///
    /// # Panics
    /// `max_bytes` is 0.
    #[must_use]
    pub fn new(max_bytes: usize) -> Arc<FrameBudget> {
        assert!(max_bytes > 0, "a budget of 0 bytes could hold no frame");
        Arc::new(FrameBudget {
            max_bytes,
            total: AtomicUsize::new(0),
            holders: Mutex::new(HashMap::new()),
            evicted: AtomicU64::new(0),
        })
    }

    /// Bytes of unfinished frames all sharing connections may hold together.
    #[must_use]
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Bytes all connections hold now.
    #[must_use]
    pub fn held_bytes(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// Connections closed to keep within the budget, so far.
    #[must_use]
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// `conn` now holds `bytes` of unfinished input (0: none), the oldest of it since `since`.
    /// Over the budget, the longest-waiting holders are closed (perhaps `conn` itself) until
    /// the rest fit.
    pub(crate) fn hold(&self, conn: &Arc<Connection>, bytes: usize, since: Instant) {
        let mut holders = self.holders.lock();
        let before = if bytes == 0 {
            holders.remove(&conn.id()).map_or(0, |h| h.bytes)
        } else {
            let h = holders.entry(conn.id()).or_insert_with(|| Holder {
                bytes: 0,
                since,
                conn: Arc::downgrade(conn),
            });
            h.since = since;
            std::mem::replace(&mut h.bytes, bytes)
        };
        let total = self.total.load(Ordering::Acquire) + bytes - before;
        self.total.store(total, Ordering::Release);
        if total > self.max_bytes {
            self.evict(&mut holders);
        }
        debug_assert_eq!(
            self.total.load(Ordering::Acquire),
            holders.values().map(|h| h.bytes).sum::<usize>(),
            "the total is what the holders hold"
        );
    }

    /// Closes the longest-waiting holders until the total fits. Bounded: each turn removes one.
    fn evict(&self, holders: &mut HashMap<u64, Holder>) {
        let mut total = self.total.load(Ordering::Acquire);
        while total > self.max_bytes {
            let Some((&id, _)) = holders.iter().min_by_key(|(_, h)| h.since) else {
                break;
            };
            let h = holders.remove(&id).expect("just found");
            total -= h.bytes;
            self.evicted.fetch_add(1, Ordering::Relaxed);
            if let Some(conn) = h.conn.upgrade() {
                tracing::warn!(
                    peer = %conn.peer(),
                    held_bytes = h.bytes,
                    waiting_ms = u64::try_from(h.since.elapsed().as_millis()).unwrap_or(u64::MAX),
                    budget_bytes = self.max_bytes,
                    "closing a connection: unfinished frames over the budget, and its has waited longest"
                );
                conn.shutdown();
            }
        }
        self.total.store(total, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Arc<Connection> {
        Arc::new(Connection::new("127.0.0.1:1".parse().expect("addr"), 1024, 4))
    }

    #[test]
    fn over_the_budget_the_longest_waiting_holders_go_first_and_the_total_follows() {
        let budget = FrameBudget::new(100);
        let (old, mid, new) = (conn(), conn(), conn());
        let t0 = Instant::now();
        budget.hold(&old, 40, t0);
        budget.hold(&mid, 40, t0 + std::time::Duration::from_millis(1));
        assert_eq!(budget.held_bytes(), 80);
        budget.hold(&new, 50, t0 + std::time::Duration::from_millis(2));
        assert!(old.is_closed(), "the oldest unfinished frame goes");
        assert!(!mid.is_closed() && !new.is_closed());
        assert_eq!((budget.held_bytes(), budget.evicted()), (90, 1));
        // A holder that finished its frame holds nothing and is never chosen.
        budget.hold(&mid, 0, t0);
        budget.hold(&new, 120, t0 + std::time::Duration::from_millis(2));
        assert!(new.is_closed(), "alone over the budget, it goes itself");
        assert!(!mid.is_closed());
        assert_eq!(budget.held_bytes(), 0);
        // The closed connection's loop reports 0 on its way out: nothing changes.
        budget.hold(&old, 0, t0);
        assert_eq!(budget.held_bytes(), 0);
    }
}
