//! The master's view of its slaves' acks, and the gate a SYNC_MASTER send passes through.
//!
//! Acks are offsets: a slave reports the end of what it holds, so one report acknowledges every
//! record below it, however many. The gate turns the reports of the slaves *in sync* into one
//! monotonic offset, the `replicated` watermark, which sends wait on exactly as SYNC_FLUSH sends
//! wait on `flushed` — a future per send, no thread per send, a bounded waiter table.
//!
//! A slave is in sync once it holds everything the watermark already covers (it cannot hold
//! back what was acknowledged before it came) and while it is connected and behind the
//! master by at most `haMaxGapNotInSync` bytes.
//!
//! In controller mode the gate also computes the *confirm offset*, what consumers may read: the
//! lowest ack of the SyncStateSet's members, whatever the ack mode (RocketMQ's
//! `computeConfirmOffset`). The controllers elect a new master only from that set, so a message a
//! consumer saw is on every replica that can become master. The ack mode only decides how long a
//! *send* waits; it never lets a consumer past a member that lacks the bytes.
//!
//! Owns: each connected slave's ack offset and in-sync state, the `replicated` watermark and the
//! confirm offset. Must never: move either past the master's own end, count a slave that is not
//! in sync, move the confirm offset past any SyncStateSet member's ack (or at all while a member
//! is not heard from), or let a send wait when the policy cannot be met (it is told so before it
//! appends).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use petrel_store::{Slot, WaitError, Watermark};

/// How many replicas a send waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// ASYNC_MASTER: sends never wait for slaves.
    None,
    /// This many replicas, the master included (at least 2), must hold the bytes.
    Count(usize),
    /// Every replica in sync must hold the bytes (the master alone: no wait).
    AllInSync,
}

/// How sends wait for slaves, and which slaves count as in sync.
#[derive(Debug, Clone, Copy)]
pub struct AckPolicy {
    /// How many replicas a send waits for.
    pub mode: AckMode,
    /// Sends are refused before anything is written while fewer replicas (the master included)
    /// are in sync.
    pub min_in_sync_replicas: usize,
    /// A slave further behind than this is not in sync.
    pub max_gap_bytes: u64,
}

/// What a send must do about replicas, decided before it appends.
pub enum ReplicaWait {
    /// Nothing: no slave needs to ack.
    None,
    /// Wait on the `replicated` watermark with this slot.
    Wait(Slot),
    /// Too few slaves are in sync for the policy: store on the master and say so at once
    /// (RocketMQ's SLAVE_NOT_AVAILABLE) rather than wait out the timeout.
    NotEnough {
        /// Replicas in sync now, the master included.
        in_sync: usize,
        /// Replicas the ack mode asks for, the master included.
        needed: usize,
    },
}

/// Why a send is refused before it is written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// Fewer replicas are in sync than `minInSyncReplicas`.
    #[error("in-sync replicas not enough: {in_sync} in sync (the master included), minInSyncReplicas is {min}")]
    InSyncReplicasNotEnough {
        /// Replicas in sync now, the master included.
        in_sync: usize,
        /// `minInSyncReplicas`.
        min: usize,
    },
    /// Every slot of the bounded waiter table is taken.
    #[error("{0}")]
    Busy(String),
    /// The `replicated` watermark has failed; no send can wait on it.
    #[error("{0}")]
    Failed(String),
}

/// One connected slave as the gate tracks it.
struct SlaveAck {
    addr: String,
    /// Its broker id, once its handshake named it (controller mode).
    broker_id: Option<u64>,
    /// It asked never to join the SyncStateSet (`isAsyncLearner`).
    learner: bool,
    /// The last time its ack reached the master's end (for shrinking the SyncStateSet).
    caught_up_at: Instant,
    ack_offset: Option<u64>,
    in_sync: bool,
    connected_at: Instant,
    last_report_at: Option<Instant>,
}

/// A connected slave, for metrics and runtime info.
#[derive(Debug, Clone)]
pub struct SlaveStatus {
    /// The master's number for this connection, unique while the process runs.
    pub id: u64,
    /// The broker id its handshake named (controller mode).
    pub broker_id: Option<u64>,
    /// The slave's address, as the master sees the connection.
    pub addr: String,
    /// The end of what it reported holding; `None` before its first report.
    pub ack_offset: Option<u64>,
    /// Whether its acks count for sends (see the module's notes on being in sync).
    pub in_sync: bool,
    /// The master's end minus the slave's.
    pub lag_bytes: u64,
    /// How long it has been connected, in milliseconds.
    pub connected_ms: u64,
    /// Since its last report.
    pub silent_ms: u64,
}

/// The offset `mode` lets the watermark reach, given the acks of the slaves in sync; `None`
/// when too few are in sync to reach any.
#[must_use]
pub fn agreed_offset(mode: AckMode, master_end: u64, in_sync_acks: &mut [u64]) -> Option<u64> {
    match mode {
        AckMode::None => Some(master_end),
        AckMode::Count(n) => {
            let slaves_needed = n.saturating_sub(1);
            if slaves_needed == 0 {
                return Some(master_end);
            }
            in_sync_acks.sort_unstable_by(|a, b| b.cmp(a));
            in_sync_acks.get(slaves_needed - 1).map(|ack| (*ack).min(master_end))
        }
        AckMode::AllInSync => Some(in_sync_acks.iter().copied().min().unwrap_or(master_end).min(master_end)),
    }
}

/// The lowest ack of the SyncStateSet's members (the master's end bounds it), or `None` while a
/// member has not been heard from: then nothing is known to be on every member. `member_acks`
/// holds each member's lowest ack over its connections (a member connected twice counts by
/// the connection that holds less).
#[must_use]
pub fn confirm_offset(master_end: u64, members: &BTreeSet<u64>, member_acks: &BTreeMap<u64, u64>) -> Option<u64> {
    let mut confirm = master_end;
    for member in members {
        confirm = confirm.min(*member_acks.get(member)?);
    }
    Some(confirm)
}

/// The gate: slaves' acks in, the `replicated` watermark and the confirm offset out.
pub struct AckGate {
    policy: AckPolicy,
    /// Replaced (never lowered in place) when a controller-mode broker becomes master again
    /// with a log shorter than what it had settled as master before.
    mark: parking_lot::RwLock<Arc<Watermark>>,
    /// Room for waiting sends, for a replaced mark.
    capacity: usize,
    /// One recompute or SyncStateSet change at a time: the confirm offset is computed and
    /// advanced against the set it was computed from.
    serial: Mutex<()>,
    slaves: Mutex<BTreeMap<u64, SlaveAck>>,
    master_end: Box<dyn Fn() -> u64 + Send + Sync>,
    /// Runs after what readers may read moved, with its new end: the `replicated` watermark in
    /// classic all-ack mode, the confirm offset in controller mode.
    on_advance: std::sync::OnceLock<Box<dyn Fn(u64) + Send + Sync>>,
    /// Controller mode: the confirm offset, which readers on this broker stop at (the store's
    /// confirm gate; on a slave it follows the master's frames, here the members' acks).
    confirm: std::sync::OnceLock<Arc<Watermark>>,
    /// Controller mode: the broker ids whose acks count, the master's own included. `None`:
    /// classic mode, where the gate decides who is in sync from the gap alone.
    sync_state_set: Mutex<Option<BTreeSet<u64>>>,
    /// Controller mode, while this broker is not the master: the watermark stays where it is
    /// (the log grows from another master's stream, which no ack of ours covers).
    inactive: std::sync::atomic::AtomicBool,
}

/// The SyncStateSet as the gate applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStateView {
    /// The master's own broker id.
    pub master_id: u64,
    /// Members, the master included: while a change is pending, the union of the old and the
    /// proposed set (a member leaving still counts, a member joining counts already).
    pub members: BTreeSet<u64>,
}

impl AckGate {
    /// A gate whose watermark starts at `initial` (everything stored before the master started
    /// counts as settled) with room for `capacity` waiting sends; `master_end` reads the
    /// master's written end.
    #[must_use]
    pub fn new(policy: AckPolicy, initial: u64, capacity: usize, master_end: Box<dyn Fn() -> u64 + Send + Sync>) -> Arc<AckGate> {
        assert!(
            !matches!(policy.mode, AckMode::Count(n) if n < 2),
            "a count of acks below 2 waits for no slave: use AckMode::None"
        );
        Arc::new(AckGate {
            policy,
            mark: parking_lot::RwLock::new(Watermark::new("replicated", initial, capacity.max(1))),
            capacity: capacity.max(1),
            serial: Mutex::new(()),
            slaves: Mutex::new(BTreeMap::new()),
            master_end,
            on_advance: std::sync::OnceLock::new(),
            confirm: std::sync::OnceLock::new(),
            sync_state_set: Mutex::new(None),
            inactive: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Registers what runs each time what readers may read moves, with its new end (set once).
    pub fn set_on_advance(&self, f: Box<dyn Fn(u64) + Send + Sync>) {
        let _ = self.on_advance.set(f);
    }

    /// Controller mode: the confirm offset this gate moves (set once, before the gate is
    /// given a SyncStateSet).
    pub fn set_confirm_mark(&self, confirm: Arc<Watermark>) {
        let _ = self.confirm.set(confirm);
    }

    /// Controller mode: what every SyncStateSet member holds (and consumers may read).
    #[must_use]
    pub fn confirmed(&self) -> u64 {
        self.confirm.get().map_or(0, |c| c.get())
    }

    /// The policy the gate was built with.
    #[must_use]
    pub fn policy(&self) -> AckPolicy {
        self.policy
    }

    /// What sends wait on.
    #[must_use]
    pub fn replicated(&self) -> Arc<Watermark> {
        self.mark.read().clone()
    }

    /// Decides, before a send appends, whether it will wait for slaves.
    ///
    /// # Errors
    /// [`Refusal::InSyncReplicasNotEnough`] below `minInSyncReplicas`; [`Refusal::Busy`] when
    /// every waiter slot is taken.
    pub fn before_append(&self) -> Result<ReplicaWait, Refusal> {
        if self.policy.mode == AckMode::None {
            return Ok(ReplicaWait::None);
        }
        let in_sync = match &*self.sync_state_set.lock() {
            // The members other than the master, and the master.
            Some(members) => members.len() + 1,
            None => 1 + self.slaves.lock().values().filter(|s| s.in_sync).count(),
        };
        if in_sync < self.policy.min_in_sync_replicas {
            return Err(Refusal::InSyncReplicasNotEnough {
                in_sync,
                min: self.policy.min_in_sync_replicas,
            });
        }
        match self.policy.mode {
            AckMode::Count(needed) if in_sync < needed => return Ok(ReplicaWait::NotEnough { in_sync, needed }),
            AckMode::AllInSync if in_sync == 1 => return Ok(ReplicaWait::None),
            _ => {}
        }
        self.replicated().reserve().map(ReplicaWait::Wait).map_err(|e| match e {
            WaitError::Busy { .. } => Refusal::Busy(format!("[REPLICA_WAITERS_FULL] {e}")),
            other => Refusal::Failed(other.to_string()),
        })
    }

    pub(crate) fn connected(&self, id: u64, addr: String) {
        self.slaves.lock().insert(
            id,
            SlaveAck {
                addr,
                broker_id: None,
                learner: false,
                caught_up_at: Instant::now(),
                ack_offset: None,
                in_sync: false,
                connected_at: Instant::now(),
                last_report_at: None,
            },
        );
    }

    pub(crate) fn disconnected(&self, id: u64) {
        if self.slaves.lock().remove(&id).is_some_and(|s| s.in_sync) {
            tracing::warn!(slave = id, "an in-sync slave disconnected");
        }
        self.recompute();
    }

    /// A slave reported holding everything below `offset`.
    pub(crate) fn acked(&self, id: u64, offset: u64) {
        {
            let mut slaves = self.slaves.lock();
            let Some(s) = slaves.get_mut(&id) else { return };
            s.ack_offset = Some(offset);
            s.last_report_at = Some(Instant::now());
        }
        self.recompute();
    }

    /// A slave's handshake named its broker id (controller mode).
    pub(crate) fn identified(&self, id: u64, broker_id: u64, learner: bool) {
        if let Some(s) = self.slaves.lock().get_mut(&id) {
            s.broker_id = Some(broker_id);
            s.learner = learner;
        }
        self.recompute();
    }

    /// Controller mode: from now on exactly the members of `view` count (the master itself
    /// always does); a member not connected holds the watermark where it is.
    pub fn set_sync_state_set(&self, view: &SyncStateView) {
        assert!(view.members.contains(&view.master_id), "the master is in its own SyncStateSet");
        assert!(self.confirm.get().is_some(), "controller mode moves a confirm offset");
        let serial = self.serial.lock();
        let mut members = view.members.clone();
        members.remove(&view.master_id);
        *self.sync_state_set.lock() = Some(members);
        if self.inactive.swap(false, std::sync::atomic::Ordering::AcqRel) {
            // Master again: what it settled as master before may lie past its log now (a cut
            // to a new master's consistent point); a fresh mark starts at its end.
            let end = (self.master_end)();
            if self.mark.read().get() > end {
                *self.mark.write() = Watermark::new("replicated", end, self.capacity);
            }
        }
        self.recompute_serial(&serial);
    }

    /// Controller mode, while proposing to grow the SyncStateSet: counts `view` and those of
    /// `joiners` whose ack has reached the confirm offset now, in one step, so that the confirm
    /// offset cannot pass a joiner between the check and its counting (it would lack what
    /// consumers read, and could be elected). Returns the joiners taken.
    pub fn admit_joiners(&self, view: &SyncStateView, joiners: &BTreeSet<u64>) -> BTreeSet<u64> {
        assert!(view.members.contains(&view.master_id), "the master is in its own SyncStateSet");
        let serial = self.serial.lock();
        let (confirmed, acks) = (self.confirmed(), self.member_acks());
        let taken: BTreeSet<u64> = joiners
            .iter()
            .copied()
            .filter(|j| acks.get(j).is_some_and(|a| *a >= confirmed))
            .collect();
        let mut members: BTreeSet<u64> = view.members.union(&taken).copied().collect();
        members.remove(&view.master_id);
        *self.sync_state_set.lock() = Some(members);
        self.recompute_serial(&serial);
        taken
    }

    /// Each identified connected slave's lowest ack, by broker id.
    fn member_acks(&self) -> BTreeMap<u64, u64> {
        let mut out: BTreeMap<u64, u64> = BTreeMap::new();
        for s in self.slaves.lock().values() {
            if let (Some(b), Some(ack)) = (s.broker_id, s.ack_offset) {
                out.entry(b).and_modify(|a| *a = (*a).min(ack)).or_insert(ack);
            }
        }
        out
    }

    /// Whether a SyncStateSet decides who counts (controller mode).
    #[must_use]
    pub fn is_controlled(&self) -> bool {
        self.sync_state_set.lock().is_some()
    }

    /// Controller mode: holds the watermark still while this broker is not the master;
    /// [`AckGate::set_sync_state_set`] makes it move again.
    pub fn deactivate(&self) {
        self.inactive.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Re-derives who is in sync and advances the watermark as far as the policy allows, and in
    /// controller mode the confirm offset to the slowest member.
    pub fn recompute(&self) {
        let serial = self.serial.lock();
        self.recompute_serial(&serial);
    }

    /// [`AckGate::recompute`], with the serializing lock held.
    fn recompute_serial(&self, _serial: &parking_lot::MutexGuard<'_, ()>) {
        if self.inactive.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let end = (self.master_end)();
        let members = self.sync_state_set.lock().clone();
        let (mut acks, member_acks) = self.in_sync_acks(end, members.as_ref());
        if let Some(m) = &members {
            // Every member must be heard from: one not connected holds both marks.
            let Some(confirm) = confirm_offset(end, m, &member_acks) else {
                return;
            };
            self.advance_mark(agreed_offset(self.policy.mode, end, &mut acks));
            let mark = self
                .confirm
                .get()
                .expect("controller mode sets the confirm mark before the SyncStateSet");
            if confirm > mark.get() {
                mark.advance(confirm);
                if let Some(f) = self.on_advance.get() {
                    f(confirm);
                }
            }
            return;
        }
        if self.advance_mark(agreed_offset(self.policy.mode, end, &mut acks))
            && let Some(f) = self.on_advance.get()
        {
            f(self.replicated().get());
        }
    }

    /// Moves the `replicated` watermark up to `to`; whether it moved.
    fn advance_mark(&self, to: Option<u64>) -> bool {
        match to {
            Some(to) if to > self.replicated().get() => {
                self.replicated().advance(to);
                true
            }
            _ => false,
        }
    }

    /// Updates each slave's sync state; returns the acks of those in sync and, in controller
    /// mode, each member's lowest ack.
    fn in_sync_acks(&self, end: u64, members: Option<&BTreeSet<u64>>) -> (Vec<u64>, BTreeMap<u64, u64>) {
        let settled = self.replicated().get();
        let mut acks = Vec::new();
        let mut member_acks: BTreeMap<u64, u64> = BTreeMap::new();
        let mut slaves = self.slaves.lock();
        for (id, s) in slaves.iter_mut() {
            let Some(ack) = s.ack_offset else { continue };
            if ack >= end {
                s.caught_up_at = Instant::now();
            }
            let was = s.in_sync;
            s.in_sync = match members {
                Some(m) => s.broker_id.is_some_and(|b| m.contains(&b)),
                None => end.saturating_sub(ack) <= self.policy.max_gap_bytes && (was || ack >= settled),
            };
            if s.in_sync != was {
                tracing::info!(slave = id, addr = %s.addr, ack, end, in_sync = s.in_sync, "slave sync state changed");
            }
            if !s.in_sync {
                continue;
            }
            acks.push(ack);
            if let Some(b) = s.broker_id {
                member_acks.entry(b).and_modify(|a| *a = (*a).min(ack)).or_insert(ack);
            }
        }
        (acks, member_acks)
    }

    /// Controller mode: connected slaves outside the SyncStateSet that may join it — not
    /// learners, holding everything settled and everything since `epoch_start` (RocketMQ's
    /// rule: a joiner must hold the confirm offset and the current epoch's start).
    #[must_use]
    pub fn expand_candidates(&self, epoch_start: u64) -> Vec<u64> {
        let members = self.sync_state_set.lock().clone().unwrap_or_default();
        // Everything a consumer may have read, and everything a send was told is replicated
        // (with sends that wait for no slave, the replicated mark is merely the master's end).
        let settled = match self.policy.mode {
            AckMode::None => self.confirmed(),
            _ => self.confirmed().max(self.replicated().get()),
        };
        self.slaves
            .lock()
            .values()
            .filter(|s| !s.learner)
            .filter_map(|s| Some((s.broker_id?, s.ack_offset?)))
            .filter(|(b, ack)| !members.contains(b) && *ack >= settled && *ack >= epoch_start)
            .map(|(b, _)| b)
            .collect()
    }

    /// Controller mode: members (the master aside) that should leave the SyncStateSet: not
    /// connected, or not caught up with the master's end for `max_not_caught_up`.
    #[must_use]
    pub fn shrink_candidates(&self, max_not_caught_up: std::time::Duration) -> Vec<u64> {
        let members = self.sync_state_set.lock().clone().unwrap_or_default();
        let slaves = self.slaves.lock();
        members
            .into_iter()
            .filter(|b| {
                let mut conns = slaves.values().filter(|s| s.broker_id == Some(*b));
                !conns.any(|s| s.caught_up_at.elapsed() <= max_not_caught_up)
            })
            .collect()
    }

    /// The connected slaves.
    #[must_use]
    pub fn slaves(&self) -> Vec<SlaveStatus> {
        let end = (self.master_end)();
        self.slaves
            .lock()
            .iter()
            .map(|(id, s)| SlaveStatus {
                id: *id,
                broker_id: s.broker_id,
                addr: s.addr.clone(),
                ack_offset: s.ack_offset,
                in_sync: s.in_sync,
                lag_bytes: end.saturating_sub(s.ack_offset.unwrap_or(0)),
                connected_ms: u64::try_from(s.connected_at.elapsed().as_millis()).unwrap_or(u64::MAX),
                silent_ms: u64::try_from(s.last_report_at.unwrap_or(s.connected_at).elapsed().as_millis()).unwrap_or(u64::MAX),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn a_count_takes_the_kth_highest_ack_of_the_slaves_it_needs() {
        let mut acks = vec![10, 30, 20];
        assert_eq!(agreed_offset(AckMode::Count(2), 100, &mut acks), Some(30));
        assert_eq!(agreed_offset(AckMode::Count(3), 100, &mut acks), Some(20));
        assert_eq!(agreed_offset(AckMode::Count(4), 100, &mut acks), Some(10));
        assert_eq!(agreed_offset(AckMode::Count(5), 100, &mut acks), None, "only three slaves");
        assert_eq!(
            agreed_offset(AckMode::Count(2), 25, &mut acks),
            Some(25),
            "never past the master's end"
        );
    }

    #[test]
    fn all_in_sync_takes_the_slowest_and_the_master_alone_settles_at_its_end() {
        assert_eq!(agreed_offset(AckMode::AllInSync, 100, &mut [40, 70]), Some(40));
        assert_eq!(agreed_offset(AckMode::AllInSync, 100, &mut []), Some(100));
    }

    fn gate(mode: AckMode, end: &Arc<AtomicU64>) -> Arc<AckGate> {
        let e = end.clone();
        AckGate::new(
            AckPolicy {
                mode,
                min_in_sync_replicas: 1,
                max_gap_bytes: 1000,
            },
            0,
            4,
            Box::new(move || e.load(Ordering::SeqCst)),
        )
    }

    #[test]
    fn a_slave_joins_only_holding_what_is_settled_and_leaves_when_too_far_behind() {
        let end = Arc::new(AtomicU64::new(500));
        let g = gate(AckMode::Count(2), &end);
        assert!(matches!(
            g.before_append().unwrap(),
            ReplicaWait::NotEnough { in_sync: 1, needed: 2 }
        ));
        g.connected(1, "a".into());
        g.acked(1, 400);
        assert!(g.slaves()[0].in_sync);
        assert_eq!(g.replicated().get(), 400);
        assert!(matches!(g.before_append().unwrap(), ReplicaWait::Wait(_)));
        // A second slave that holds less than what is settled does not count yet.
        g.connected(2, "b".into());
        g.acked(2, 100);
        assert!(!g.slaves()[1].in_sync);
        g.acked(2, 450);
        assert!(g.slaves()[1].in_sync);
        // The master runs 1,000 bytes past the first slave: it drops out.
        end.store(1500, Ordering::SeqCst);
        g.acked(1, 401);
        assert!(!g.slaves()[0].in_sync);
        g.disconnected(2);
        assert!(matches!(g.before_append().unwrap(), ReplicaWait::NotEnough { .. }));
    }

    #[test]
    fn the_watermark_never_passes_the_master_or_goes_back() {
        let end = Arc::new(AtomicU64::new(100));
        let g = gate(AckMode::AllInSync, &end);
        g.connected(1, "a".into());
        g.acked(1, 80);
        assert_eq!(g.replicated().get(), 80);
        g.connected(2, "b".into());
        g.acked(2, 90);
        g.acked(1, 95);
        assert_eq!(g.replicated().get(), 90);
        g.disconnected(2);
        assert_eq!(g.replicated().get(), 95);
        g.disconnected(1);
        assert_eq!(g.replicated().get(), 100, "the master alone settles at its end");
    }

    #[test]
    fn in_controller_mode_exactly_the_sync_state_set_counts_and_a_missing_member_holds_the_mark() {
        let end = Arc::new(AtomicU64::new(100));
        let g = gate(AckMode::AllInSync, &end);
        let confirm = Watermark::new("confirmed", 0, 1);
        g.set_confirm_mark(confirm.clone());
        g.deactivate();
        g.connected(1, "a".into());
        g.identified(1, 7, false);
        g.acked(1, 60);
        assert_eq!(g.replicated().get(), 0, "not the master yet: the mark stays");
        let view = |members: &[u64]| SyncStateView {
            master_id: 0,
            members: members.iter().copied().collect(),
        };
        g.set_sync_state_set(&view(&[0]));
        assert_eq!(g.replicated().get(), 100, "the master alone: its end");
        assert!(g.expand_candidates(50).is_empty(), "broker 7 lacks what is settled (60 < 100)");
        g.acked(1, 100);
        assert!(g.expand_candidates(120).is_empty(), "nor the current epoch's start");
        assert_eq!(g.expand_candidates(50), vec![7]);
        assert!(
            matches!(g.before_append().unwrap(), ReplicaWait::None),
            "the master alone waits for nobody"
        );
        end.store(200, Ordering::SeqCst);
        g.set_sync_state_set(&view(&[0, 7]));
        assert!(
            matches!(g.before_append().unwrap(), ReplicaWait::Wait(_)),
            "a set of the master and one slave waits for the slave"
        );
        g.acked(1, 150);
        assert_eq!(g.replicated().get(), 150, "the slowest member");
        // Member 8 joins the set but has no connection: nothing moves until it is heard from.
        g.set_sync_state_set(&view(&[0, 7, 8]));
        g.acked(1, 200);
        assert_eq!(g.replicated().get(), 150);
        assert_eq!(g.shrink_candidates(std::time::Duration::from_secs(60)), vec![8]);
        g.connected(2, "b".into());
        g.identified(2, 8, false);
        g.acked(2, 180);
        assert_eq!(g.replicated().get(), 180);
        assert_eq!(confirm.get(), 180, "consumers read what every member holds");
        // A learner never joins.
        g.connected(3, "c".into());
        g.identified(3, 9, true);
        g.acked(3, 200);
        assert!(g.expand_candidates(0).is_empty());
    }

    /// The failover that lost consumed messages: with sends that wait for no slave (RocketMQ's
    /// default keys) or for fewer than all of them, consumers still read no further than the
    /// slowest SyncStateSet member holds.
    #[test]
    fn in_controller_mode_consumers_stop_at_the_slowest_member_whatever_the_ack_mode() {
        for mode in [AckMode::None, AckMode::Count(2), AckMode::AllInSync] {
            let end = Arc::new(AtomicU64::new(1000));
            let e = end.clone();
            let g = AckGate::new(
                AckPolicy {
                    mode,
                    min_in_sync_replicas: 1,
                    max_gap_bytes: 1 << 30,
                },
                0,
                4,
                Box::new(move || e.load(Ordering::SeqCst)),
            );
            let confirm = Watermark::new("confirmed", 0, 1);
            g.set_confirm_mark(confirm.clone());
            let advanced = Arc::new(AtomicU64::new(0));
            let seen = advanced.clone();
            g.set_on_advance(Box::new(move |to| seen.store(to, Ordering::SeqCst)));
            g.connected(1, "fast".into());
            g.identified(1, 1, false);
            g.connected(2, "stopped".into());
            g.identified(2, 2, false);
            g.acked(1, 1000);
            g.acked(2, 400);
            g.set_sync_state_set(&SyncStateView {
                master_id: 0,
                members: [0, 1, 2].into_iter().collect(),
            });
            assert_eq!(confirm.get(), 400, "{mode:?}: the slowest member bounds what consumers read");
            assert_eq!(advanced.load(Ordering::SeqCst), 400, "{mode:?}: readers woken with the new end");
            // The stopped member sends nothing while the master writes on.
            end.store(5000, Ordering::SeqCst);
            g.acked(1, 5000);
            assert_eq!(confirm.get(), 400, "{mode:?}");
            // It disconnects but stays in the set: nothing is known to be on it, nothing moves.
            g.disconnected(2);
            g.acked(1, 5000);
            assert_eq!(confirm.get(), 400, "{mode:?}: a member not heard from holds the confirm offset");
            // The set shrinks without it: the rest hold everything.
            g.set_sync_state_set(&SyncStateView {
                master_id: 0,
                members: [0, 1].into_iter().collect(),
            });
            assert_eq!(confirm.get(), 5000, "{mode:?}");
            // A rogue or duplicate connection naming a member cannot lift it past the member.
            g.connected(3, "second".into());
            g.identified(3, 1, false);
            end.store(6000, Ordering::SeqCst);
            g.acked(3, 6000);
            assert_eq!(confirm.get(), 5000, "{mode:?}: the member's lower connection counts");
        }
    }

    /// A joiner counts only if it holds what is confirmed when it starts to count; one that fell
    /// behind between the check and the counting is left out.
    #[test]
    fn a_joiner_behind_the_confirm_offset_is_not_counted() {
        let end = Arc::new(AtomicU64::new(1000));
        let g = gate(AckMode::None, &end);
        let confirm = Watermark::new("confirmed", 0, 1);
        g.set_confirm_mark(confirm.clone());
        g.connected(1, "member".into());
        g.identified(1, 1, false);
        g.acked(1, 1000);
        let view = |members: &[u64]| SyncStateView {
            master_id: 0,
            members: members.iter().copied().collect(),
        };
        g.set_sync_state_set(&view(&[0, 1]));
        assert_eq!(confirm.get(), 1000);
        g.connected(2, "late".into());
        g.identified(2, 2, false);
        g.acked(2, 900);
        assert!(g.expand_candidates(0).is_empty(), "behind the confirm offset: no candidate");
        let taken = g.admit_joiners(&view(&[0, 1]), &[2].into_iter().collect());
        assert!(
            taken.is_empty(),
            "a joiner behind the confirm offset is refused at the last moment too"
        );
        g.acked(2, 1000);
        assert_eq!(
            g.expand_candidates(0),
            vec![2],
            "with sends that wait for no slave, the confirm offset is the rule"
        );
        let taken = g.admit_joiners(&view(&[0, 1]), &[2].into_iter().collect());
        assert_eq!(taken, [2].into_iter().collect());
        end.store(1500, Ordering::SeqCst);
        g.acked(1, 1500);
        assert_eq!(confirm.get(), 1000, "the new member holds the confirm offset back");
    }

    /// A broker that led, lost the role and had its log cut back, then leads again: its
    /// `replicated` mark starts again at its end rather than acknowledging what it no longer has.
    #[test]
    fn a_master_again_with_a_shorter_log_gets_a_fresh_mark() {
        let end = Arc::new(AtomicU64::new(1000));
        let g = gate(AckMode::Count(2), &end);
        g.set_confirm_mark(Watermark::new("confirmed", 0, 1));
        g.connected(1, "a".into());
        g.identified(1, 1, false);
        g.acked(1, 1000);
        let view = SyncStateView {
            master_id: 0,
            members: [0, 1].into_iter().collect(),
        };
        g.set_sync_state_set(&view);
        assert_eq!(g.replicated().get(), 1000);
        g.deactivate();
        g.disconnected(1);
        end.store(600, Ordering::SeqCst);
        g.set_sync_state_set(&view);
        assert_eq!(g.replicated().get(), 600, "not the 1000 it held before its log was cut");
    }

    #[test]
    fn confirm_offset_is_the_lowest_member_ack_or_none_while_one_is_unheard() {
        let members: BTreeSet<u64> = [1, 2].into_iter().collect();
        let acks: BTreeMap<u64, u64> = [(1, 70), (2, 40)].into_iter().collect();
        assert_eq!(confirm_offset(100, &members, &acks), Some(40));
        assert_eq!(confirm_offset(30, &members, &acks), Some(30), "never past the master's end");
        let one: BTreeMap<u64, u64> = [(1, 70)].into_iter().collect();
        assert_eq!(confirm_offset(100, &members, &one), None);
        assert_eq!(confirm_offset(100, &BTreeSet::new(), &one), Some(100), "the master alone");
    }

    #[test]
    fn below_min_in_sync_replicas_a_send_is_refused_before_it_writes() {
        let end = Arc::new(AtomicU64::new(0));
        let e = end.clone();
        let g = AckGate::new(
            AckPolicy {
                mode: AckMode::AllInSync,
                min_in_sync_replicas: 2,
                max_gap_bytes: 1000,
            },
            0,
            1,
            Box::new(move || e.load(Ordering::SeqCst)),
        );
        assert!(matches!(
            g.before_append(),
            Err(Refusal::InSyncReplicasNotEnough { in_sync: 1, min: 2 })
        ));
        g.connected(1, "a".into());
        g.acked(1, 0);
        let held = g.before_append().unwrap();
        assert!(matches!(held, ReplicaWait::Wait(_)));
        assert!(matches!(g.before_append(), Err(Refusal::Busy(_))), "one waiter slot");
    }
}
