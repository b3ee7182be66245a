//! Exhaustive interleaving checks (loom) of the adaptive lock's mode swap.
//!
//!   RUSTFLAGS="--cfg loom" cargo test -p petrel-lock --test loom --release
//!
//! Two threads take the lock while a third swaps the inner lock, in both directions; loom runs
//! every interleaving (up to its preemption bound) and a shared flag catches two holders. The
//! last test runs the same check against RocketMQ's order (check the gate, then register and
//! take the current inner lock without looking at the mode again) and requires the checker to
//! find the overlap, so the check is known to be able to fail. (Dropping the adaptive lock's
//! re-read of the mode under its inner lock fails the first two tests the same way.)
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use loom::thread;
use petrel_lock::{AdaptiveConfig, AdaptiveLock, LockToken, Mode, PutMessageLock};

/// Preemption bound 1: every interleaving with at most one forced preemption per thread. That
/// bound already finds RocketMQ's overlap; at 2 the spin-waits make the model unbounded.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.max_branches = 20_000;
    b.check(f);
}

fn small() -> AdaptiveConfig {
    AdaptiveConfig {
        initial_k: 1,
        max_k: 2,
        k_step: 1,
        ..AdaptiveConfig::default()
    }
}

trait TestLock: Send + Sync + 'static {
    fn acquire(&self);
    fn release(&self);
    fn swap(&self);
}

struct Abs(AdaptiveLock, Mode, loom::sync::Mutex<Option<LockToken>>);

impl TestLock for Abs {
    fn acquire(&self) {
        let token = self.0.lock();
        *self.2.lock().unwrap() = Some(token);
    }
    fn release(&self) {
        let token = self.2.lock().unwrap().take().expect("acquired");
        // SAFETY: called only by the thread that acquired, with its token.
        unsafe { self.0.unlock(token) }
    }
    fn swap(&self) {
        self.0.switch_to(self.1);
    }
}

/// Two workers take and release the lock once while the main thread swaps.
fn exclusion_under_swap<L: TestLock>(make: fn() -> L) {
    model(move || {
        let lock = Arc::new(make());
        let holder = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (lock, holder) = (lock.clone(), holder.clone());
                thread::spawn(move || {
                    lock.acquire();
                    assert!(!holder.swap(true, Ordering::SeqCst), "two threads hold the lock");
                    holder.store(false, Ordering::SeqCst);
                    lock.release();
                })
            })
            .collect();
        lock.swap();
        for w in workers {
            w.join().unwrap();
        }
    });
}

#[test]
fn spin_to_mutex_keeps_exclusion() {
    exclusion_under_swap(|| Abs(AdaptiveLock::new(small()), Mode::Mutex, Default::default()));
}

#[test]
fn mutex_to_spin_keeps_exclusion() {
    exclusion_under_swap(|| {
        let lock = AdaptiveLock::new(small());
        lock.switch_to(Mode::Mutex);
        Abs(lock, Mode::Spin, Default::default())
    });
}

/// RocketMQ's `AdaptiveBackOffSpinLockImpl` order, reduced to its gate: wait for the gate,
/// *then* register, then take whichever inner lock is current.
struct CheckThenRegister {
    gate_open: AtomicBool,
    active: AtomicUsize,
    mode: AtomicU8,
    held: AtomicU8,
    inner: [AtomicBool; 2],
}

impl TestLock for CheckThenRegister {
    fn acquire(&self) {
        while !self.gate_open.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        self.active.fetch_add(1, Ordering::SeqCst);
        let m = self.mode.load(Ordering::SeqCst);
        while self.inner[m as usize]
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            thread::yield_now();
        }
        self.held.store(m, Ordering::Relaxed);
    }
    fn release(&self) {
        let m = self.held.load(Ordering::Relaxed);
        self.inner[m as usize].store(false, Ordering::Release);
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
    fn swap(&self) {
        if self
            .gate_open
            .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            while self.active.load(Ordering::SeqCst) != 0 {
                thread::yield_now();
            }
            self.mode.store(1, Ordering::SeqCst);
            self.gate_open.store(true, Ordering::SeqCst);
        }
    }
}

#[test]
fn rocketmq_order_is_caught() {
    let found = std::panic::catch_unwind(|| {
        exclusion_under_swap(|| CheckThenRegister {
            gate_open: AtomicBool::new(true),
            active: AtomicUsize::new(0),
            mode: AtomicU8::new(0),
            held: AtomicU8::new(0),
            inner: [AtomicBool::new(false), AtomicBool::new(false)],
        })
    });
    assert!(
        found.is_err(),
        "loom must find two holders when the gate is checked before registering"
    );
}
