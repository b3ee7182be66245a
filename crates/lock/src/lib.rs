//! Put-message locks: the lock around the commit log's append.
//!
//! Owns: the [`PutMessageLock`] trait, four strategies — [`MutexLock`], [`SpinLock`],
//! [`BackoffSpinLock`] and the adaptive [`AdaptiveLock`] (ABS) — their live statistics, and the
//! choice between them by name. Must never: depend on other Petrel crates, or hold the lock
//! longer than its caller does (the critical section is the caller's: offset assignment + copy).

#![cfg_attr(loom, allow(dead_code))]

mod adaptive;
mod raw;
mod stats;
mod strategies;
mod sync;

pub use adaptive::{AdaptiveConfig, AdaptiveLock, Mode, Sample};
pub use stats::{Counters, SHARDS, WAIT_BUCKETS};
pub use strategies::{BackoffSpinLock, DEFAULT_BACKOFF_K, MutexLock, SpinLock};

use std::fmt;
use std::str::FromStr;

/// What a holder must hand back when releasing: the adaptive lock records here which inner lock
/// it holds, so that releasing reads nothing shared. The fixed strategies ignore it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockToken(pub(crate) u32);

/// A mutual-exclusion lock with explicit lock/unlock, so one trait object can stand for any
/// strategy on the append path.
pub trait PutMessageLock: Send + Sync {
    /// Blocks (by spinning, yielding or parking, per strategy) until the caller holds the lock.
    fn lock(&self) -> LockToken;

    /// Releases the lock.
    ///
    /// # Safety
    /// The caller holds the lock, and `token` is what the [`PutMessageLock::lock`] call that
    /// acquired it returned. Releasing a lock one does not hold breaks mutual exclusion.
    unsafe fn unlock(&self, token: LockToken);

    /// Which strategy this lock is.
    fn kind(&self) -> LockKind;

    /// Live statistics.
    fn snapshot(&self) -> LockSnapshot;
}

/// Holds a lock until dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub struct PutMessageGuard<'a, L: PutMessageLock + ?Sized> {
    lock: &'a L,
    token: LockToken,
}

/// Takes `lock` and returns a guard that releases it.
pub fn acquire<L: PutMessageLock + ?Sized>(lock: &L) -> PutMessageGuard<'_, L> {
    let token = lock.lock();
    PutMessageGuard { lock, token }
}

impl<L: PutMessageLock + ?Sized> Drop for PutMessageGuard<'_, L> {
    fn drop(&mut self) {
        // SAFETY: the guard exists only while `acquire` holds the lock, with its token.
        unsafe { self.lock.unlock(self.token) }
    }
}

/// The strategies, as named in `broker.conf` (`putMessageLock = abs|mutex|spin|backoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// [`MutexLock`]: blocks in the kernel while contended (`mutex`).
    Mutex,
    /// [`SpinLock`]: spins without ever yielding (`spin`).
    Spin,
    /// [`BackoffSpinLock`]: spins `k` times, then yields (`backoff`).
    BackoffSpin,
    /// [`AdaptiveLock`]: a backoff spin that tunes `k` and turns into a mutex under load (`abs`).
    Adaptive,
}

impl LockKind {
    /// Every strategy, in declaration order.
    pub const ALL: [LockKind; 4] = [LockKind::Mutex, LockKind::Spin, LockKind::BackoffSpin, LockKind::Adaptive];

    /// The name `broker.conf` uses for this strategy, also its `Display` form.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Spin => "spin",
            LockKind::BackoffSpin => "backoff",
            LockKind::Adaptive => "abs",
        }
    }

    /// RocketMQ's two switches: `useABSLock` wins, else `useReentrantLockWhenPutMessage`
    /// chooses the mutex over the plain spin.
    pub fn from_rocketmq_flags(use_abs_lock: bool, use_reentrant_lock_when_put_message: bool) -> LockKind {
        if use_abs_lock {
            LockKind::Adaptive
        } else if use_reentrant_lock_when_put_message {
            LockKind::Mutex
        } else {
            LockKind::Spin
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A lock name that is not one of the strategies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown put-message lock {0:?}: expected abs, mutex, spin or backoff")]
pub struct UnknownLockKind(pub String);

impl FromStr for LockKind {
    type Err = UnknownLockKind;

    fn from_str(s: &str) -> Result<LockKind, UnknownLockKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "abs" | "adaptive" => Ok(LockKind::Adaptive),
            "mutex" | "reentrant" => Ok(LockKind::Mutex),
            "spin" => Ok(LockKind::Spin),
            "backoff" | "backoffspin" | "backoff_spin" => Ok(LockKind::BackoffSpin),
            _ => Err(UnknownLockKind(s.to_owned())),
        }
    }
}

/// Builds a lock of `kind`; `backoff_k` is the fixed budget of [`BackoffSpinLock`].
pub fn new_lock(kind: LockKind, backoff_k: u32, adaptive: AdaptiveConfig) -> Box<dyn PutMessageLock> {
    match kind {
        LockKind::Mutex => Box::new(MutexLock::default()),
        LockKind::Spin => Box::new(SpinLock::default()),
        LockKind::BackoffSpin => Box::new(BackoffSpinLock::new(backoff_k)),
        LockKind::Adaptive => Box::new(AdaptiveLock::new(adaptive)),
    }
}

/// A lock's statistics at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockSnapshot {
    /// The strategy the statistics are from.
    pub kind: LockKind,
    /// Acquisition, contention and wait totals since the lock was created.
    pub counters: Counters,
    /// The spin budget, for backoff and adaptive locks.
    pub k: Option<u32>,
    /// The adaptive lock's current inner lock.
    pub mode: Option<Mode>,
    /// Mode switches so far (adaptive only).
    pub switches: u64,
}

impl LockSnapshot {
    pub(crate) fn fixed(kind: LockKind, counters: Counters, k: Option<u32>) -> LockSnapshot {
        LockSnapshot {
            kind,
            counters,
            k,
            mode: None,
            switches: 0,
        }
    }

    /// `(key, value)` pairs for a runtime-info table or a metrics endpoint.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let c = &self.counters;
        let mut v = vec![
            ("putMessageLockKind".to_owned(), self.kind.name().to_owned()),
            ("putMessageLockAcquisitions".to_owned(), c.acquisitions.to_string()),
            ("putMessageLockContended".to_owned(), c.contended.to_string()),
            ("putMessageLockSpins".to_owned(), c.spins.to_string()),
            ("putMessageLockRetreats".to_owned(), c.retreats.to_string()),
            ("putMessageLockWaitNsTotal".to_owned(), c.wait_ns_total.to_string()),
            ("putMessageLockWaitP99Ns".to_owned(), c.wait_quantile_ns(0.99).to_string()),
            ("putMessageLockWaitP9999Ns".to_owned(), c.wait_quantile_ns(0.9999).to_string()),
            ("putMessageLockSwitches".to_owned(), self.switches.to_string()),
        ];
        if let Some(k) = self.k {
            v.push(("putMessageLockK".to_owned(), k.to_string()));
        }
        if let Some(m) = self.mode {
            v.push(("putMessageLockMode".to_owned(), format!("{m:?}").to_ascii_lowercase()));
        }
        v
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_by_name_and_rocketmq_flags() {
        for kind in LockKind::ALL {
            assert_eq!(kind.name().parse::<LockKind>(), Ok(kind));
        }
        assert_eq!("ABS".parse::<LockKind>(), Ok(LockKind::Adaptive));
        assert!("ticket".parse::<LockKind>().is_err());
        assert_eq!(LockKind::from_rocketmq_flags(true, true), LockKind::Adaptive);
        assert_eq!(LockKind::from_rocketmq_flags(false, true), LockKind::Mutex);
        assert_eq!(LockKind::from_rocketmq_flags(false, false), LockKind::Spin);
    }

    #[test]
    fn guards_count_acquisitions() {
        for kind in LockKind::ALL {
            let lock = new_lock(kind, 100, AdaptiveConfig::default());
            for _ in 0..10 {
                let _g = acquire(lock.as_ref());
            }
            let s = lock.snapshot();
            assert_eq!(s.kind, kind);
            assert_eq!(s.counters.acquisitions, 10);
            assert_eq!(s.counters.wait_histogram[0], 10, "uncontended acquisitions wait 0");
            assert!(s.to_pairs().iter().any(|(k, v)| k == "putMessageLockAcquisitions" && v == "10"));
        }
    }
}

/// `putMessageLock` in broker.conf.
impl petrel_kit::config::ConfigValue for LockKind {
    const EXPECTED: &'static str = "abs, mutex, spin or backoff";
    fn parse(raw: &str) -> Option<Self> {
        raw.parse().ok()
    }
    fn render(&self) -> String {
        match self {
            LockKind::Adaptive => "abs".to_owned(),
            other => other.name().to_owned(),
        }
    }
}
