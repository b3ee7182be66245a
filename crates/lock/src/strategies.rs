//! The three fixed strategies: `MutexLock`, `SpinLock` and `BackoffSpinLock { k }`.
//!
//! Owns: their acquire/release paths and what each acquisition costs in the statistics.
//! Must never: read the clock on an uncontended acquisition.

use std::time::Instant;

use crate::raw::{BlockingWord, SpinWord};
use crate::stats::{Acquisition, LockStats, ns_since};
use crate::sync::{AtomicU32, Ordering, yield_now};
use crate::{LockKind, LockSnapshot, LockToken, PutMessageLock};

/// The blocking mutex: RocketMQ's default (`useReentrantLockWhenPutMessage=true`).
#[derive(Default)]
pub struct MutexLock {
    word: BlockingWord,
    stats: LockStats,
}

/// Takes a blocking word and returns what it cost; shared with the adaptive lock's mutex mode.
#[inline]
pub(crate) fn acquire_blocking(word: &BlockingWord) -> Acquisition {
    if word.try_lock() {
        return Acquisition::default();
    }
    let start = Instant::now();
    word.lock();
    Acquisition {
        contended: true,
        wait_ns: ns_since(start),
        ..Acquisition::default()
    }
}

impl PutMessageLock for MutexLock {
    fn lock(&self) -> LockToken {
        self.stats.record(acquire_blocking(&self.word));
        LockToken::default()
    }

    unsafe fn unlock(&self, _token: LockToken) {
        // SAFETY: forwarded from the trait's contract.
        unsafe { self.word.unlock() }
    }

    fn kind(&self) -> LockKind {
        LockKind::Mutex
    }

    fn snapshot(&self) -> LockSnapshot {
        LockSnapshot::fixed(LockKind::Mutex, self.stats.snapshot(), None)
    }
}

/// Spins until it gets the lock: never yields, so it burns a core per waiter.
#[derive(Default)]
pub struct SpinLock {
    word: SpinWord,
    stats: LockStats,
}

impl PutMessageLock for SpinLock {
    fn lock(&self) -> LockToken {
        if self.word.try_lock() {
            self.stats.record(Acquisition::default());
            return LockToken::default();
        }
        let start = Instant::now();
        // Rounds only bound the counter arithmetic; a plain spin never yields.
        const ROUND: u64 = 1 << 16;
        let mut spins = 0u64;
        loop {
            match self.word.spin_lock(ROUND) {
                Some(used) => {
                    spins += used;
                    break;
                }
                None => spins += ROUND,
            }
        }
        self.stats.record(Acquisition {
            contended: true,
            spins,
            retreats: 0,
            wait_ns: ns_since(start),
        });
        LockToken::default()
    }

    unsafe fn unlock(&self, _token: LockToken) {
        self.word.unlock()
    }

    fn kind(&self) -> LockKind {
        LockKind::Spin
    }

    fn snapshot(&self) -> LockSnapshot {
        LockSnapshot::fixed(LockKind::Spin, self.stats.snapshot(), None)
    }
}

/// RocketMQ's initial spin budget (`BackOffSpinLock.INITIAL_DEGREE`).
pub const DEFAULT_BACKOFF_K: u32 = 1_000;

/// Spins up to `k` times, then yields the CPU (a "retreat") and starts another round.
pub struct BackoffSpinLock {
    word: SpinWord,
    k: AtomicU32,
    stats: LockStats,
}

impl BackoffSpinLock {
    /// Builds the lock with a budget of `k` spins per round.
    ///
    /// # Panics
    /// If `k` is zero.
    pub fn new(k: u32) -> BackoffSpinLock {
        assert!(k > 0, "a backoff spin needs at least one spin per round");
        BackoffSpinLock {
            word: SpinWord::default(),
            k: AtomicU32::new(k),
            stats: LockStats::default(),
        }
    }

    /// Spins per round before yielding.
    pub fn k(&self) -> u32 {
        self.k.load(Ordering::Relaxed)
    }

    pub(crate) fn set_k(&self, k: u32) {
        self.k.store(k, Ordering::Relaxed);
    }

    /// Acquires the word and returns what it cost; shared with the adaptive lock's spin mode.
    #[inline]
    pub(crate) fn acquire(&self) -> Acquisition {
        if self.word.try_lock() {
            return Acquisition::default();
        }
        let start = Instant::now();
        let k = u64::from(self.k.load(Ordering::Relaxed));
        let mut a = Acquisition {
            contended: true,
            ..Acquisition::default()
        };
        loop {
            match self.word.spin_lock(k) {
                Some(used) => {
                    a.spins += used;
                    a.wait_ns = ns_since(start);
                    return a;
                }
                None => {
                    a.spins += k;
                    a.retreats += 1;
                    yield_now();
                }
            }
        }
    }

    #[inline]
    pub(crate) fn release(&self) {
        self.word.unlock()
    }
}

impl Default for BackoffSpinLock {
    fn default() -> Self {
        BackoffSpinLock::new(DEFAULT_BACKOFF_K)
    }
}

impl PutMessageLock for BackoffSpinLock {
    fn lock(&self) -> LockToken {
        let a = self.acquire();
        self.stats.record(a);
        LockToken::default()
    }

    unsafe fn unlock(&self, _token: LockToken) {
        self.release()
    }

    fn kind(&self) -> LockKind {
        LockKind::BackoffSpin
    }

    fn snapshot(&self) -> LockSnapshot {
        LockSnapshot::fixed(LockKind::BackoffSpin, self.stats.snapshot(), Some(self.k()))
    }
}
