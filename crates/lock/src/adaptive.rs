//! The adaptive backoff spin lock (ABS): a backoff spin whose budget `k` follows contention,
//! which becomes a blocking mutex when even the largest `k` keeps retreating and returns to
//! spinning when the load falls.
//!
//! Owns: the mode swap and the adaptation policy. Must never: let two threads hold the lock
//! across a swap. RocketMQ's implementation checks a gate and then takes whichever inner lock is
//! current, so a thread can pass the gate, stall, and take the old inner lock while others take
//! the new one. Here the mode is a hand-off between holders:
//!
//! - the mode changes only while one thread holds *both* inner locks ([`AdaptiveLock::switch_to`]
//!   first takes the lock the usual way, then the other inner lock, then flips the mode);
//! - a thread enters the critical section only after taking the inner lock the mode names and
//!   reading the mode again *while holding it*; if the mode moved, it lets go and follows it.
//!
//! So while a thread holds inner lock X having read "X", the mode stays X (changing it needs
//! X), and every holder at that moment holds X: at most one. The re-read needs no fence: taking
//! the inner lock synchronizes with the switcher's release of it, which came after the store.
//! The uncontended path is one relaxed load, one compare-exchange and one relaxed load; the
//! release is one store — the same as the fixed locks. `tests/loom.rs` checks both swap
//! directions exhaustively, and that RocketMQ's order fails the same check.

use std::time::{Duration, Instant};

use crate::raw::BlockingWord;
use crate::stats::{Acquisition, LockStats, ns_since};
use crate::strategies::{BackoffSpinLock, acquire_blocking};
use crate::sync::{AtomicU8, AtomicU64, Ordering};
use crate::{LockKind, LockSnapshot, LockToken, PutMessageLock};

/// Which inner lock the adaptive lock is using.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The backoff spin with the adaptive budget `k`.
    Spin,
    /// The blocking mutex, taken once even the largest `k` kept retreating.
    Mutex,
}

const MODE_SPIN: u8 = 0;
const MODE_MUTEX: u8 = 1;

fn mode_of(raw: u8) -> Mode {
    if raw == MODE_SPIN { Mode::Spin } else { Mode::Mutex }
}

fn raw_of(mode: Mode) -> u8 {
    match mode {
        Mode::Spin => MODE_SPIN,
        Mode::Mutex => MODE_MUTEX,
    }
}

/// Tuning of the adaptive lock. Defaults are RocketMQ's constants except `window`, which
/// RocketMQ fixes at one wall-clock second.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveConfig {
    /// Spin budget to start with (RocketMQ `INITIAL_DEGREE`).
    pub initial_k: u32,
    /// Largest spin budget (RocketMQ `MAX_OPTIMAL_DEGREE`); reaching it and still retreating
    /// switches to the mutex.
    pub max_k: u32,
    /// `k` doubles while the double stays ≤ `max_k`, then grows by this step; it falls by it.
    pub k_step: u32,
    /// Raise `k` (or switch) when retreats × this ≥ acquisitions (RocketMQ `BASE_SWAP_LOCK_RATIO`).
    pub retreat_ratio: u64,
    /// Lower `k` when retreats × `retreat_ratio` × this ≤ acquisitions (RocketMQ `SPIN_LOCK_ADAPTIVE_RATIO`).
    pub lower_ratio_factor: u64,
    /// Return to spinning when load ≤ this × the load recorded at the switch (RocketMQ `SWAP_SPIN_LOCK_RATIO`).
    pub switch_back_ratio: f64,
    /// Length of one evaluation window.
    pub window: Duration,
    /// A thread looks at the clock once per this many of its releases.
    pub check_every_releases: u32,
    /// Samples of `k` and mode kept for [`AdaptiveLock::history`].
    pub history_len: usize,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            initial_k: 1_000,
            max_k: 10_000,
            k_step: 1_000,
            retreat_ratio: 320,
            lower_ratio_factor: 4,
            switch_back_ratio: 0.8,
            window: Duration::from_millis(200),
            check_every_releases: 8,
            history_len: 4_096,
        }
    }
}

/// One evaluation: what the lock saw in a window and what it decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Since the lock was created.
    pub at: Duration,
    /// Acquisitions in the window.
    pub acquisitions: u64,
    /// Spin rounds that ended in a yield during the window.
    pub retreats: u64,
    /// Distinct threads that took the lock during the window.
    pub threads: u64,
    /// Acquisitions per second × distinct threads: RocketMQ's load measure.
    pub load: f64,
    /// The spin budget after the decision.
    pub k: u32,
    /// The inner lock in use after the decision.
    pub mode: Mode,
}

/// Read on every acquisition, written only by a switch: kept off the lines holders write.
#[repr(align(128))]
struct ModeCell(AtomicU8);

/// The ABS lock.
pub struct AdaptiveLock {
    mode: ModeCell,
    spin: BackoffSpinLock,
    mutex: BlockingWord,
    config: AdaptiveConfig,
    stats: LockStats,
    created: Instant,
    window_start_ns: AtomicU64,
    epoch: AtomicU64,
    critical_load_bits: AtomicU64,
    switches: AtomicU64,
    /// `config.window` in ns, saturated, so that evaluating does not convert it each time.
    window_ns: u64,
    history: parking_lot::Mutex<std::collections::VecDeque<Sample>>,
}

thread_local! {
    static RELEASES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl AdaptiveLock {
    /// Builds the lock in spin mode with `k = initial_k`.
    ///
    /// # Panics
    /// If `initial_k` is not in `1..=max_k`, `k_step`, `retreat_ratio` or `lower_ratio_factor`
    /// is zero, or `switch_back_ratio` is not in (0, 1).
    pub fn new(config: AdaptiveConfig) -> AdaptiveLock {
        assert!(
            config.initial_k > 0 && config.initial_k <= config.max_k,
            "need 0 < initial_k <= max_k"
        );
        assert!(config.k_step > 0 && config.retreat_ratio > 0 && config.lower_ratio_factor > 0);
        assert!(
            config.switch_back_ratio > 0.0 && config.switch_back_ratio < 1.0,
            "switch_back_ratio in (0, 1)"
        );
        AdaptiveLock {
            mode: ModeCell(AtomicU8::new(MODE_SPIN)),
            spin: BackoffSpinLock::new(config.initial_k),
            mutex: BlockingWord::default(),
            stats: LockStats::default(),
            created: Instant::now(),
            window_start_ns: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            critical_load_bits: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            window_ns: u64::try_from(config.window.as_nanos()).unwrap_or(u64::MAX),
            history: parking_lot::Mutex::new(std::collections::VecDeque::with_capacity(config.history_len.min(65_536))),
            config,
        }
    }

    /// The inner lock in use now.
    pub fn mode(&self) -> Mode {
        mode_of(self.mode.0.load(Ordering::Relaxed))
    }

    /// The current spin budget of the spin mode.
    pub fn k(&self) -> u32 {
        self.spin.k()
    }

    /// The tuning the lock was built with.
    pub fn config(&self) -> &AdaptiveConfig {
        &self.config
    }

    /// Evaluations so far, oldest first (at most `history_len`).
    pub fn history(&self) -> Vec<Sample> {
        self.history.lock().iter().copied().collect()
    }

    /// Switches to `mode` now (no-op if already there), for operators and tests; the policy
    /// switches in place from `unlock`. It takes the lock like any caller, then the other inner
    /// lock (free but for threads about to see the mode and let go), flips the mode and releases
    /// both: whoever takes either lock next sees the new mode.
    pub fn switch_to(&self, mode: Mode) -> bool {
        let target = raw_of(mode);
        if self.mode.0.load(Ordering::Relaxed) == target {
            return false;
        }
        let (held, _) = self.acquire_validated();
        let changed = self.switch_held(held, target);
        self.release_inner(held);
        changed
    }

    /// Flips the mode to `target` for a caller that holds the inner lock of mode `held` (and saw
    /// that mode while holding it); the caller still releases `held` afterwards.
    fn switch_held(&self, held: u8, target: u8) -> bool {
        if held == target {
            return false;
        }
        self.acquire_inner(target);
        assert_eq!(
            self.mode.0.load(Ordering::Relaxed),
            held,
            "the mode moved under a holder of its inner lock"
        );
        self.mode.0.store(target, Ordering::Relaxed);
        self.switches.fetch_add(1, Ordering::Relaxed);
        self.release_inner(target);
        true
    }

    /// Takes one inner lock.
    #[inline]
    fn acquire_inner(&self, mode: u8) -> Acquisition {
        if mode == MODE_SPIN {
            self.spin.acquire()
        } else {
            acquire_blocking(&self.mutex)
        }
    }

    #[inline]
    fn release_inner(&self, mode: u8) {
        if mode == MODE_SPIN {
            self.spin.release();
        } else {
            // SAFETY: only called by the thread that took the mutex through `acquire_inner`.
            unsafe { self.mutex.unlock() };
        }
    }

    /// Takes the inner lock the mode names and checks, holding it, that the mode still names it.
    /// Returns the mode held and what the wait cost (all tries together).
    #[inline]
    fn acquire_validated(&self) -> (u8, Acquisition) {
        let mut mode = self.mode.0.load(Ordering::Relaxed);
        let mut cost = Acquisition::default();
        // Each pass follows a switch that happened meanwhile; switches are rare, so this is short.
        loop {
            let a = self.acquire_inner(mode);
            cost.contended |= a.contended;
            cost.spins += a.spins;
            cost.retreats += a.retreats;
            cost.wait_ns += a.wait_ns;
            let now = self.mode.0.load(Ordering::Relaxed);
            if now == mode {
                return (mode, cost);
            }
            self.release_inner(mode);
            cost.contended = true;
            mode = now;
        }
    }

    fn now_ns(&self) -> u64 {
        ns_since(self.created)
    }

    /// Runs the policy if this thread is due to look and a window has passed; at most one
    /// thread evaluates a window. The caller still holds the inner lock of mode `held`, so a
    /// switch costs no second acquisition; the common case is one thread-local increment.
    #[cfg(not(loom))]
    fn maybe_evaluate(&self, held: u8) {
        let due = RELEASES.with(|r| {
            let n = r.get().wrapping_add(1);
            r.set(n);
            n.is_multiple_of(self.config.check_every_releases.max(1))
        });
        if !due {
            return;
        }
        let start = self.window_start_ns.load(Ordering::Relaxed);
        let now = self.now_ns();
        if now.saturating_sub(start) < self.window_ns {
            return;
        }
        if self
            .window_start_ns
            .compare_exchange(start, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        self.epoch.fetch_add(1, Ordering::Relaxed);
        let (acquisitions, retreats, threads) = self.stats.take_window();
        if acquisitions == 0 {
            return;
        }
        let elapsed_s = (now - start) as f64 / 1e9;
        let load = acquisitions as f64 / elapsed_s * threads.max(1) as f64;
        self.decide(acquisitions, retreats, load, Some(held));
        let sample = Sample {
            at: Duration::from_nanos(now),
            acquisitions,
            retreats,
            threads,
            load,
            k: self.k(),
            mode: self.mode(),
        };
        let mut h = self.history.lock();
        if h.len() >= self.config.history_len {
            h.pop_front();
        }
        if self.config.history_len > 0 {
            h.push_back(sample);
        }
    }

    #[cfg(loom)]
    fn maybe_evaluate(&self, _held: u8) {}

    /// Switches for `decide`: in place if the caller holds an inner lock, else by taking the lock.
    fn switch_for_policy(&self, mode: Mode, held: Option<u8>) -> bool {
        match held {
            Some(h) => self.switch_held(h, raw_of(mode)),
            None => self.switch_to(mode),
        }
    }

    /// The policy: RocketMQ's rules on one window's counts. `held`: the inner lock the caller
    /// holds, if any.
    pub(crate) fn decide(&self, acquisitions: u64, retreats: u64, load: f64, held: Option<u8>) {
        let c = &self.config;
        match self.mode() {
            Mode::Spin => {
                if retreats.saturating_mul(c.retreat_ratio) >= acquisitions {
                    let k = self.k();
                    if k < c.max_k {
                        self.spin.set_k(raise_k(k, c.max_k, c.k_step));
                    } else {
                        self.critical_load_bits.store(load.to_bits(), Ordering::Relaxed);
                        self.switch_for_policy(Mode::Mutex, held);
                    }
                } else if retreats.saturating_mul(c.retreat_ratio).saturating_mul(c.lower_ratio_factor) <= acquisitions {
                    self.spin.set_k(lower_k(self.k(), c.initial_k, c.k_step));
                }
            }
            Mode::Mutex => {
                let critical = f64::from_bits(self.critical_load_bits.load(Ordering::Relaxed));
                if load <= c.switch_back_ratio * critical && self.switch_for_policy(Mode::Spin, held) {
                    self.spin.set_k(lower_k(self.k(), c.initial_k, c.k_step));
                }
            }
        }
    }
}

/// Doubles while that stays within `max`, else adds `step` while that does.
pub(crate) fn raise_k(k: u32, max: u32, step: u32) -> u32 {
    if k.saturating_mul(2) <= max {
        k * 2
    } else if k.saturating_add(step) <= max {
        k + step
    } else {
        k
    }
}

/// Falls by `step`, never below `floor`.
pub(crate) fn lower_k(k: u32, floor: u32, step: u32) -> u32 {
    if k >= floor.saturating_add(step) { k - step } else { k }
}

impl Default for AdaptiveLock {
    fn default() -> Self {
        AdaptiveLock::new(AdaptiveConfig::default())
    }
}

impl PutMessageLock for AdaptiveLock {
    fn lock(&self) -> LockToken {
        #[cfg(not(loom))]
        self.stats
            .note_thread(self as *const _ as usize, self.epoch.load(Ordering::Relaxed));
        let (mode, acquisition) = self.acquire_validated();
        #[cfg(not(loom))]
        self.stats.record(acquisition);
        #[cfg(loom)]
        let _ = acquisition;
        LockToken(u32::from(mode))
    }

    unsafe fn unlock(&self, token: LockToken) {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the token is one `lock` made by widening a mode byte, per the trait's safety contract"
        )]
        let mode = token.0 as u8;
        debug_assert!(mode == MODE_SPIN || mode == MODE_MUTEX, "token from another lock");
        // The policy looks before the release, so that a switch it decides on is made by us,
        // a holder, instead of by queueing for the lock again behind the contention it saw.
        self.maybe_evaluate(mode);
        // Release: the next holder, through either inner lock, must see our writes.
        self.release_inner(mode);
    }

    fn kind(&self) -> LockKind {
        LockKind::Adaptive
    }

    fn snapshot(&self) -> LockSnapshot {
        LockSnapshot {
            kind: LockKind::Adaptive,
            counters: self.stats.snapshot(),
            k: Some(self.k()),
            mode: Some(self.mode()),
            switches: self.switches.load(Ordering::Relaxed),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn k_follows_rocketmq_steps() {
        let mut k = 1_000;
        let mut seen = vec![k];
        while k < 10_000 {
            k = raise_k(k, 10_000, 1_000);
            seen.push(k);
        }
        assert_eq!(seen, [1_000, 2_000, 4_000, 8_000, 9_000, 10_000]);
        assert_eq!(raise_k(10_000, 10_000, 1_000), 10_000);
        assert_eq!(lower_k(9_000, 1_000, 1_000), 8_000);
        assert_eq!(lower_k(1_000, 1_000, 1_000), 1_000);
    }

    /// The worked timeline of RocketMQ's adaptive lock test: five contended windows raise k to
    /// 10,000, the sixth switches to the mutex, a quiet one switches back with k = 9,000.
    #[test]
    fn policy_timeline() {
        let lock = AdaptiveLock::default();
        let ks: Vec<u32> = (0..5)
            .map(|_| {
                lock.decide(3_200, 10, 1e6, None);
                lock.k()
            })
            .collect();
        assert_eq!(ks, [2_000, 4_000, 8_000, 9_000, 10_000]);
        assert_eq!(lock.mode(), Mode::Spin);
        lock.decide(3_200, 10, 1e6, None);
        assert_eq!(lock.mode(), Mode::Mutex);
        lock.decide(3_200, 0, 0.9e6, None);
        assert_eq!(lock.mode(), Mode::Mutex, "90% of the switch load stays on the mutex");
        lock.decide(3_200, 0, 0.8e6, None);
        assert_eq!(lock.mode(), Mode::Spin);
        assert_eq!(lock.k(), 9_000);
        assert_eq!(lock.snapshot().switches, 2);
        // with no retreats k falls a step per window, down to the initial value
        for _ in 0..20 {
            lock.decide(10_000, 0, 1.0, None);
        }
        assert_eq!(lock.k(), 1_000);
    }
}
