//! The file descriptors a process's connections hold, within a budget (the open-file limit less
//! what the store and the listeners need). A plain connection holds one descriptor; a TLS
//! connection three, since its decrypted stream reaches the connection loop over a socket pair.
//! Counting connections alone would let TLS connections take the descriptors the store needs to
//! open a new segment or consume queue, failing writes for everyone; counted here, a connection
//! that would pass the budget is closed as it arrives, and the store keeps its reserve.
//!
//! Owns: the process-wide count and its budget. Must never: let the count pass the budget, or
//! outlive a connection (a [`Descriptors`] gives its share back on drop).

use std::sync::atomic::{AtomicUsize, Ordering};

static HELD: AtomicUsize = AtomicUsize::new(0);
static BUDGET: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Descriptors one plain connection holds.
pub const PLAIN_CONNECTION_DESCRIPTORS: usize = 1;
/// Descriptors a TLS connection holds besides its socket: the bridge's socket pair.
pub const TLS_BRIDGE_DESCRIPTORS: usize = 2;

/// Sets the budget for every connection of this process (once, at start).
pub fn set_descriptor_budget(descriptors: usize) {
    BUDGET.store(descriptors, Ordering::Release);
}

/// Descriptors connections hold now.
#[must_use]
pub fn descriptors_held() -> usize {
    HELD.load(Ordering::Acquire)
}

/// A connection's share of the budget; given back on drop.
#[must_use]
pub(crate) struct Descriptors(usize);

impl Drop for Descriptors {
    fn drop(&mut self) {
        let before = HELD.fetch_sub(self.0, Ordering::AcqRel);
        assert!(before >= self.0, "descriptors held never go below zero");
    }
}

/// Takes `n` descriptors of the budget; `None` when they would pass it.
pub(crate) fn take(n: usize) -> Option<Descriptors> {
    let budget = BUDGET.load(Ordering::Acquire);
    let mut held = HELD.load(Ordering::Acquire);
    loop {
        if held + n > budget {
            return None;
        }
        match HELD.compare_exchange_weak(held, held + n, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(Descriptors(n)),
            Err(now) => held = now,
        }
    }
}
