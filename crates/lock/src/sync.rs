//! The atomics and waiting primitives the locks are built on: std normally, loom's models
//! under `--cfg loom` so the swap protocol can be checked exhaustively.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

/// One iteration of a busy-wait: the CPU's pause hint (loom: a scheduling point).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Gives the CPU away: what a backoff spin does after a full round.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}
