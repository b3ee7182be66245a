//! Mutual exclusion under load: many threads (more than cores) increment a non-atomic counter
//! under each lock; for the adaptive lock a chaos thread forces mode swaps both ways throughout,
//! and tiny windows make the policy itself swap too. Any overlap shows as a lost increment or
//! as two holders seen at once.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use petrel_lock::{AdaptiveConfig, AdaptiveLock, LockKind, Mode, PutMessageLock, acquire, new_lock};

struct Counter {
    value: UnsafeCell<u64>,
    holder: AtomicBool,
}
// SAFETY: `value` is only touched while the lock under test is held; that is what is tested.
unsafe impl Sync for Counter {}

impl Counter {
    /// # Safety
    /// The lock under test is held.
    unsafe fn bump(&self) {
        // SAFETY: forwarded from the caller.
        unsafe {
            let v = std::ptr::read_volatile(self.value.get());
            std::ptr::write_volatile(self.value.get(), v + 1);
        }
    }
}

const THREADS: usize = 8;
const PER_THREAD: u64 = 20_000;

/// Every worker takes the lock at least `PER_THREAD` times, and goes on until `during` (run on
/// a thread of its own at the same time) has returned.
fn hammer(lock: &dyn PutMessageLock, during: impl FnOnce() + Send) {
    let counter = Counter {
        value: UnsafeCell::new(0),
        holder: AtomicBool::new(false),
    };
    let during_done = AtomicBool::new(false);
    let total = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0u64;
                    while n < PER_THREAD || !during_done.load(Ordering::Relaxed) {
                        let _g = acquire(lock);
                        assert!(!counter.holder.swap(true, Ordering::Relaxed), "two holders at once");
                        // SAFETY: the lock is held.
                        unsafe { counter.bump() };
                        counter.holder.store(false, Ordering::Relaxed);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        s.spawn(|| {
            during();
            during_done.store(true, Ordering::Relaxed);
        });
        workers.into_iter().map(|w| w.join().unwrap()).sum::<u64>()
    });
    // SAFETY: all threads have joined.
    assert_eq!(unsafe { *counter.value.get() }, total);
    assert!(total >= THREADS as u64 * PER_THREAD);
    assert_eq!(lock.snapshot().counters.acquisitions, total);
}

#[test]
fn every_strategy_excludes() {
    for kind in LockKind::ALL {
        let lock = new_lock(kind, 64, AdaptiveConfig::default());
        hammer(lock.as_ref(), || {});
    }
}

#[test]
fn adaptive_excludes_across_forced_and_policy_swaps() {
    let lock = AdaptiveLock::new(AdaptiveConfig {
        initial_k: 1,
        max_k: 4,
        k_step: 1,
        window: Duration::from_micros(200),
        check_every_releases: 1,
        ..AdaptiveConfig::default()
    });
    const SWAPS: u64 = 200;
    hammer(&lock, || {
        let mut to_mutex = true;
        let mut forced = 0;
        while forced < SWAPS {
            if lock.switch_to(if to_mutex { Mode::Mutex } else { Mode::Spin }) {
                forced += 1;
            }
            to_mutex = !to_mutex;
            std::thread::yield_now();
        }
    });
    let s = lock.snapshot();
    assert!(s.switches >= SWAPS, "the test must actually swap modes: {} switches", s.switches);
    assert!(!lock.history().is_empty(), "the policy ran");
}
