//! The adaptive backoff spin lock (ABS): a backoff spin whose budget `k` follows contention,
//! which becomes a blocking mutex when even the largest `k` keeps retreating and returns to
//! spinning when the load falls.
//!
//! Owns: the mode swap and the adaptation policy. Must never: let two threads hold the lock
//! across a swap. RocketMQ's implementation checks its gate *before* registering, so a thread
//! can pass the gate, stall, and take the old inner lock while others take the new one. Here a
//! thread registers first and checks the gate second (backing out if it is closed), and the
//! swapper closes the gate first and waits for the registrations to drain. Both sides write
//! then read with `SeqCst` (Dekker's pattern): all `SeqCst` operations fall in one total order,
//! so of any registering thread and the swapper at least one sees the other — every holder was
//! either counted by the swapper or saw the gate closed. (loom models `SeqCst` accesses as
//! acquire/release only, so under `--cfg loom` a `SeqCst` fence stands between them, which
//! loom does model; in production that fence would cost an `mfence` per acquisition, measured
//! at 2.5× the acquisition time on x86.) `tests/loom.rs` checks both swap
//! directions exhaustively, and that RocketMQ's order fails the same check.

use std::time::{Duration, Instant};

use crate::raw::BlockingWord;
use crate::stats::{Acquisition, LockStats};
use crate::strategies::BackoffSpinLock;
#[cfg(loom)]
use crate::sync::fence;
use crate::sync::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, wait_until};
use crate::{LockKind, LockSnapshot, LockToken, PutMessageLock};

/// Between a `SeqCst` write and a `SeqCst` read of another location: nothing in production (the
/// total order of `SeqCst` operations already forbids both reads missing both writes), a
/// `SeqCst` fence under loom, whose model weakens `SeqCst` accesses to acquire/release.
#[inline(always)]
fn store_load_barrier() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// Which inner lock the adaptive lock is using.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Spin,
    Mutex,
}

const MODE_SPIN: u8 = 0;
const MODE_MUTEX: u8 = 1;

fn mode_of(raw: u8) -> Mode {
    if raw == MODE_SPIN { Mode::Spin } else { Mode::Mutex }
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
    pub acquisitions: u64,
    pub retreats: u64,
    pub threads: u64,
    /// Acquisitions per second × distinct threads: RocketMQ's load measure.
    pub load: f64,
    pub k: u32,
    pub mode: Mode,
}

/// Registration counters, one cache line each, so registering does not serialize threads on
/// one line; the swapper waits for every shard to drain.
#[repr(align(128))]
#[derive(Default)]
struct ActiveShard(AtomicUsize);

#[cfg(not(loom))]
const ACTIVE_SHARDS: usize = crate::stats::SHARDS;
#[cfg(loom)]
const ACTIVE_SHARDS: usize = 1;

#[inline]
fn active_index() -> usize {
    #[cfg(not(loom))]
    return crate::stats::shard_index();
    #[cfg(loom)]
    0
}

/// Read by every acquisition, written only by a swap: kept off the lines holders write.
#[repr(align(128))]
struct Gate {
    open: AtomicBool,
    mode: AtomicU8,
}

/// The ABS lock.
pub struct AdaptiveLock {
    gate: Gate,
    active: Box<[ActiveShard]>,
    spin: BackoffSpinLock,
    mutex: BlockingWord,
    config: AdaptiveConfig,
    stats: LockStats,
    created: Instant,
    window_start_ns: AtomicU64,
    epoch: AtomicU64,
    critical_load_bits: AtomicU64,
    switches: AtomicU64,
    history: parking_lot::Mutex<std::collections::VecDeque<Sample>>,
}

thread_local! {
    static RELEASES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl AdaptiveLock {
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
            gate: Gate {
                open: AtomicBool::new(true),
                mode: AtomicU8::new(MODE_SPIN),
            },
            active: (0..ACTIVE_SHARDS).map(|_| ActiveShard::default()).collect(),
            spin: BackoffSpinLock::new(config.initial_k),
            mutex: BlockingWord::default(),
            stats: LockStats::default(),
            created: Instant::now(),
            window_start_ns: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            critical_load_bits: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            history: parking_lot::Mutex::new(std::collections::VecDeque::with_capacity(config.history_len.min(65_536))),
            config,
        }
    }

    pub fn mode(&self) -> Mode {
        mode_of(self.gate.mode.load(Ordering::Acquire))
    }

    pub fn k(&self) -> u32 {
        self.spin.k()
    }

    pub fn config(&self) -> &AdaptiveConfig {
        &self.config
    }

    /// Evaluations so far, oldest first (at most `history_len`).
    pub fn history(&self) -> Vec<Sample> {
        self.history.lock().iter().copied().collect()
    }

    /// Switches to `mode` now (no-op if already there or another swap is running). The policy
    /// calls this; it is public for operators and tests.
    pub fn switch_to(&self, mode: Mode) -> bool {
        let target = match mode {
            Mode::Spin => MODE_SPIN,
            Mode::Mutex => MODE_MUTEX,
        };
        if self.gate.mode.load(Ordering::Acquire) == target {
            return false;
        }
        // Close the gate: newcomers back out and wait.
        if self
            .gate
            .open
            .compare_exchange(true, false, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        store_load_barrier();
        // Everyone who registered before the gate closed finishes (or backs out).
        for shard in self.active.iter() {
            wait_until(|| shard.0.load(Ordering::SeqCst) == 0);
        }
        let changed = self.gate.mode.load(Ordering::Relaxed) != target;
        if changed {
            self.gate.mode.store(target, Ordering::Relaxed);
            self.switches.fetch_add(1, Ordering::Relaxed);
        }
        self.gate.open.store(true, Ordering::Release);
        changed
    }

    fn now_ns(&self) -> u64 {
        self.created.elapsed().as_nanos() as u64
    }

    /// Runs the policy if this thread is due to look and a window has passed; at most one
    /// thread evaluates a window.
    #[cfg(not(loom))]
    fn maybe_evaluate(&self) {
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
        let window_ns = self.config.window.as_nanos() as u64;
        if now.saturating_sub(start) < window_ns {
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
        self.decide(acquisitions, retreats, load);
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
    fn maybe_evaluate(&self) {}

    /// The policy: RocketMQ's rules on one window's counts.
    pub(crate) fn decide(&self, acquisitions: u64, retreats: u64, load: f64) {
        let c = &self.config;
        match self.mode() {
            Mode::Spin => {
                if retreats.saturating_mul(c.retreat_ratio) >= acquisitions {
                    let k = self.k();
                    if k < c.max_k {
                        self.spin.set_k(raise_k(k, c.max_k, c.k_step));
                    } else {
                        self.critical_load_bits.store(load.to_bits(), Ordering::Relaxed);
                        self.switch_to(Mode::Mutex);
                    }
                } else if retreats.saturating_mul(c.retreat_ratio).saturating_mul(c.lower_ratio_factor) <= acquisitions {
                    self.spin.set_k(lower_k(self.k(), c.initial_k, c.k_step));
                }
            }
            Mode::Mutex => {
                let critical = f64::from_bits(self.critical_load_bits.load(Ordering::Relaxed));
                if load <= c.switch_back_ratio * critical && self.switch_to(Mode::Spin) {
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
        let shard = active_index();
        // Register, then check the gate; back out and wait while a swap runs.
        loop {
            self.active[shard].0.fetch_add(1, Ordering::SeqCst);
            store_load_barrier();
            if self.gate.open.load(Ordering::SeqCst) {
                break;
            }
            self.active[shard].0.fetch_sub(1, Ordering::Release);
            wait_until(|| self.gate.open.load(Ordering::Acquire));
        }
        #[cfg(not(loom))]
        self.stats
            .note_thread(self as *const _ as usize, self.epoch.load(Ordering::Relaxed));
        // Stable while we are registered and the gate was open: a swapper waits for us.
        let mode = self.gate.mode.load(Ordering::Acquire);
        let acquisition = if mode == MODE_SPIN {
            self.spin.acquire()
        } else if self.mutex.try_lock() {
            Acquisition::default()
        } else {
            let start = Instant::now();
            self.mutex.lock();
            Acquisition {
                contended: true,
                wait_ns: start.elapsed().as_nanos() as u64,
                ..Acquisition::default()
            }
        };
        #[cfg(not(loom))]
        self.stats.record(acquisition);
        #[cfg(loom)]
        let _ = acquisition;
        LockToken(u32::from(mode) | (shard as u32) << 8)
    }

    unsafe fn unlock(&self, token: LockToken) {
        let mode = (token.0 & 0xff) as u8;
        let shard = (token.0 >> 8) as usize;
        debug_assert!(shard < ACTIVE_SHARDS, "token from another lock");
        if mode == MODE_SPIN {
            self.spin.release();
        } else {
            // SAFETY: the caller holds the lock, and it was taken through the mutex.
            unsafe { self.mutex.unlock() };
        }
        // Release: the next holder may take the other inner lock after a swap, and must see our writes.
        self.active[shard].0.fetch_sub(1, Ordering::Release);
        self.maybe_evaluate();
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
                lock.decide(3_200, 10, 1e6);
                lock.k()
            })
            .collect();
        assert_eq!(ks, [2_000, 4_000, 8_000, 9_000, 10_000]);
        assert_eq!(lock.mode(), Mode::Spin);
        lock.decide(3_200, 10, 1e6);
        assert_eq!(lock.mode(), Mode::Mutex);
        lock.decide(3_200, 0, 0.9e6);
        assert_eq!(lock.mode(), Mode::Mutex, "90% of the switch load stays on the mutex");
        lock.decide(3_200, 0, 0.8e6);
        assert_eq!(lock.mode(), Mode::Spin);
        assert_eq!(lock.k(), 9_000);
        assert_eq!(lock.snapshot().switches, 2);
        // with no retreats k falls a step per window, down to the initial value
        for _ in 0..20 {
            lock.decide(10_000, 0, 1.0);
        }
        assert_eq!(lock.k(), 1_000);
    }
}
