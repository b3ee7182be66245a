//! `Wakeup`: how a producer (an appender, the flusher) wakes a store thread that sleeps when it
//! has nothing to do — one atomic load on the producer's side while the thread is busy, one
//! unpark when it sleeps.
//!
//! Owns: the sleeping flag and the thread handle. Must never: lose a wake-up. The sleeper
//! publishes "sleeping" and then re-checks its condition; the producer publishes its data and
//! then reads the flag; both with sequentially consistent operations, so at least one of them
//! sees the other (and `unpark` before `park` makes the park return at once).

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use std::time::Duration;

use parking_lot::Mutex;

#[derive(Default)]
pub struct Wakeup {
    sleeping: AtomicBool,
    thread: Mutex<Option<Thread>>,
}

impl Wakeup {
    /// Records the calling thread as the one to wake; call once from that thread.
    pub fn register_current(&self) {
        *self.thread.lock() = Some(std::thread::current());
    }

    /// Wakes the thread if it sleeps. Call after publishing what it should see.
    pub fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst) {
            self.unpark();
        }
    }

    /// Wakes the thread whether or not it sleeps (shutdown).
    pub fn wake_always(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
        self.unpark();
    }

    fn unpark(&self) {
        if let Some(t) = self.thread.lock().as_ref() {
            t.unpark();
        }
    }

    /// Sleeps up to `timeout` unless `ready()` holds; returns early when woken. Spurious
    /// returns are possible: callers loop.
    pub fn sleep_unless(&self, timeout: Duration, ready: impl Fn() -> bool) {
        self.sleeping.store(true, Ordering::SeqCst);
        if ready() {
            self.sleeping.store(false, Ordering::SeqCst);
            return;
        }
        std::thread::park_timeout(timeout);
        self.sleeping.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;

    /// A producer that bumps a counter and wakes; the sleeper must see every bump promptly
    /// even though each sleep is an hour long.
    #[test]
    fn no_wakeup_is_lost() {
        let w = Arc::new(Wakeup::default());
        let seen = Arc::new(AtomicU64::new(0));
        let produced = Arc::new(AtomicU64::new(0));
        let sleeper = {
            let (w, seen, produced) = (w.clone(), seen.clone(), produced.clone());
            std::thread::spawn(move || {
                w.register_current();
                loop {
                    let p = produced.load(Ordering::SeqCst);
                    seen.store(p, Ordering::SeqCst);
                    if p == 10_000 {
                        break;
                    }
                    w.sleep_unless(Duration::from_secs(3600), || produced.load(Ordering::SeqCst) > p);
                }
            })
        };
        let started = Instant::now();
        for i in 1..=10_000 {
            produced.store(i, Ordering::SeqCst);
            w.wake();
            while seen.load(Ordering::SeqCst) < i {
                assert!(started.elapsed() < Duration::from_secs(60), "a wake-up was lost at {i}");
                std::hint::spin_loop();
            }
        }
        sleeper.join().unwrap();
    }
}
