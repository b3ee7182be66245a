//! The raw lock words under every strategy: a test-and-test-and-set flag and a blocking mutex.
//!
//! Owns: acquiring and releasing one word. Must never: count statistics or adapt; the
//! strategies on top do that.

#[cfg(loom)]
use crate::sync::yield_now;
use crate::sync::{AtomicBool, Ordering, spin_hint};

/// Longest pause between two looks at a contended word, in spin hints.
pub(crate) const MAX_PAUSE_SPINS: u64 = 64;

/// A test-and-test-and-set flag: spinning reads the line shared, and only a read that saw it
/// free tries the exclusive compare-exchange.
/// Alone on its cache line: the word bounces between waiters, and nothing read on every
/// acquisition (budgets, pointers, statistics) may bounce with it.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct SpinWord {
    locked: AtomicBool,
}

impl SpinWord {
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Up to `budget` spin iterations; returns the iterations used, or `None` if the budget ran out.
    /// After each failed try the pause doubles, up to [`MAX_PAUSE_SPINS`], so waiters stop
    /// pulling the line away from the holder (every pause iteration counts against `budget`).
    #[inline]
    pub(crate) fn spin_lock(&self, budget: u64) -> Option<u64> {
        let mut i = 0;
        let mut pause = 1u64;
        while i < budget {
            if !self.locked.load(Ordering::Relaxed) && self.try_lock() {
                return Some(i);
            }
            for _ in 0..pause.min(budget - i) {
                spin_hint();
            }
            i += pause;
            pause = (pause * 2).min(MAX_PAUSE_SPINS);
        }
        None
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        debug_assert!(self.locked.load(Ordering::Relaxed), "unlock of a free spin lock");
        self.locked.store(false, Ordering::Release);
    }
}

/// A blocking mutex: parking_lot's raw mutex (a barging lock that spins briefly, then parks,
/// like the JDK's non-fair `ReentrantLock` RocketMQ uses by default). Under loom, whose model
/// cannot see parking, a yielding flag stands in for it.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct BlockingWord {
    #[cfg(not(loom))]
    raw: ParkingRaw,
    #[cfg(loom)]
    raw: SpinWord,
}

#[cfg(not(loom))]
struct ParkingRaw(parking_lot::RawMutex);

#[cfg(not(loom))]
impl Default for ParkingRaw {
    fn default() -> Self {
        use parking_lot::lock_api::RawMutex as _;
        ParkingRaw(parking_lot::RawMutex::INIT)
    }
}

impl BlockingWord {
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        #[cfg(not(loom))]
        {
            use parking_lot::lock_api::RawMutex as _;
            self.raw.0.try_lock()
        }
        #[cfg(loom)]
        self.raw.try_lock()
    }

    #[inline]
    pub(crate) fn lock(&self) {
        #[cfg(not(loom))]
        {
            use parking_lot::lock_api::RawMutex as _;
            self.raw.0.lock()
        }
        #[cfg(loom)]
        while self.raw.spin_lock(1).is_none() {
            yield_now();
        }
    }

    /// # Safety
    /// The caller holds this lock.
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        #[cfg(not(loom))]
        {
            use parking_lot::lock_api::RawMutex as _;
            // SAFETY: forwarded from this function's contract.
            unsafe { self.raw.0.unlock() }
        }
        #[cfg(loom)]
        self.raw.unlock()
    }
}
