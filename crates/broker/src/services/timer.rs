//! `TimerService`: RocketMQ 5's timer messages, delivered at an arbitrary time. A send with
//! `TIMER_DELIVER_MS` (an absolute time), `TIMER_DELAY_SEC` or `TIMER_DELAY_MS` (from now) in the
//! future is stored in `rmq_sys_wheel_timer`, queue 0, with its due time in `TIMER_OUT_MS` and its
//! real topic and queue in `REAL_TOPIC` / `REAL_QID`. The timer chore (`chores/timer.rs`) reads
//! that queue into an index ordered by due time and stores each message in its real queue once
//! its time has come.
//!
//! Unlike a delay level, one queue holds every due time, so "delivered" is not a prefix of the
//! queue. What is durable (`config/timerCheckpoint.json`), per queue: `low`, below which every
//! message is delivered, and the delivered offsets at or above it as ranges. After a restart the
//! queue is read again from `low`, skipping those ranges. A message due much later than those
//! around it would pin `low` and let the ranges grow; once they are more than
//! [`MAX_DONE_RANGES`], the chore *rolls* the pinning messages: stores them again at the end of
//! queue 1 (RocketMQ's roll, `TIMER_ROLL_TIMES` + 1) and counts their old copies as delivered.
//!
//! Owns: which sends are timer messages, the index, the checkpoint. Must never: count a message
//! as delivered before its copy is stored (a crash then delivers it again, never not at all), or
//! index more than `timerMaxPending` messages.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use petrel_protocol::fastjson::from_slice_lenient as from_json;
use petrel_protocol::properties::{Properties, keys};
use serde::{Deserialize, Serialize};

use super::BrokerError;
use crate::persist::{read_if_exists, write_atomically};

/// The topic timer messages wait in (RocketMQ's name).
pub const TIMER_TOPIC: &str = petrel_protocol::topics::TIMER_TOPIC;
/// Its queue of messages as sent.
pub const ARRIVALS_QUEUE: i32 = 0;
/// Its queue of rolled messages.
pub const ROLLED_QUEUE: i32 = 1;
const QUEUES: usize = 2;

/// Delivered ranges above `low`, per queue, past which pinning messages are rolled.
pub const MAX_DONE_RANGES: usize = 1024;
/// A message due within this is never rolled: it is delivered soon anyway.
pub const NO_ROLL_WITHIN_MS: i64 = 60_000;

/// The timer settings of the broker configuration.
#[derive(Debug, Clone, Copy)]
pub struct TimerSettings {
    /// `timerWheelEnable`: false refuses timer messages.
    pub enabled: bool,
    /// `timerMaxDelaySec` in milliseconds: the furthest due time a send may ask for.
    pub max_delay_ms: u64,
    /// `timerMaxPending`: timer messages stored and not yet delivered; a send past it is refused.
    pub max_pending: usize,
}

/// `config/timerCheckpoint.json`, also the body of GET_TIMER_CHECK_POINT between Petrel brokers.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerCheckpoint {
    /// One entry per timer queue, in queue id order (arrivals, then rolled).
    #[serde(default)]
    pub queues: Vec<QueueCheckpoint>,
}

/// How far one timer queue has been delivered.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueCheckpoint {
    /// Every message below this offset is delivered.
    pub low: i64,
    /// Delivered offsets at or above `low`: `[start, end)` pairs, sorted, disjoint.
    #[serde(default)]
    pub done: Vec<[i64; 2]>,
}

/// One queue's progress.
#[derive(Debug, Default)]
struct QueueState {
    low: i64,
    /// The next offset to read into the index.
    scanned: i64,
    /// Indexed and not yet delivered: offset → due time.
    pending: BTreeMap<i64, i64>,
    /// Delivered offsets in `[low, scanned)`: start → end (exclusive).
    done: BTreeMap<i64, i64>,
}

impl QueueState {
    fn is_done(&self, offset: i64) -> bool {
        offset < self.low || self.done.range(..=offset).next_back().is_some_and(|(_, &end)| offset < end)
    }

    fn insert_done(&mut self, offset: i64) {
        debug_assert!(!self.is_done(offset), "offset {offset} delivered twice");
        let mut start = offset;
        let mut end = offset + 1;
        if let Some((&s, &e)) = self.done.range(..offset).next_back()
            && e == offset
        {
            start = s;
        }
        if let Some(e) = self.done.remove(&end) {
            end = e;
        }
        self.done.insert(start, end);
    }

    /// Moves `low` up to the first pending offset (or what was read) and forgets the ranges below.
    fn raise_low(&mut self) {
        let low = self.pending.keys().next().copied().unwrap_or(self.scanned);
        debug_assert!(low >= self.low, "low moves forward only");
        self.low = low;
        while let Some((&start, &end)) = self.done.iter().next() {
            if start >= low {
                break;
            }
            self.done.remove(&start);
            if end > low {
                self.done.insert(low, end);
            }
        }
    }

    fn checkpoint(&self) -> QueueCheckpoint {
        QueueCheckpoint {
            low: self.low,
            done: self.done.iter().map(|(&s, &e)| [s, e]).collect(),
        }
    }

    fn restored(c: &QueueCheckpoint) -> QueueState {
        let low = c.low.max(0);
        let done = c
            .done
            .iter()
            .filter(|[s, e]| s < e && *e > low)
            .map(|&[s, e]| (s.max(low), e))
            .collect();
        QueueState {
            low,
            scanned: low,
            pending: BTreeMap::new(),
            done,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    queues: [QueueState; QUEUES],
    /// The index: (due time, queue, offset) of every pending message.
    due: BTreeSet<(i64, i32, i64)>,
}

/// What [`TimerService::wheel`] counts.
#[derive(Debug, Clone, Default)]
pub struct TimerWheel {
    /// Messages indexed and not yet delivered.
    pub indexed: usize,
    /// The earliest due time among them, ms since the epoch.
    pub earliest_due_ms: Option<i64>,
    /// Messages due within each bound asked for (past the previous bound).
    pub within: Vec<usize>,
}

/// Timer messages: which sends wait in the timer topic, the index of those waiting by due time,
/// and the checkpoint of what was delivered.
pub struct TimerService {
    settings: TimerSettings,
    state: Mutex<State>,
    dirty: AtomicBool,
    path: PathBuf,
}

/// Where a send goes: nowhere special, or the timer topic, due at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerRoute {
    /// Not held by the timer: no timer property, already due, or a delay level takes precedence.
    Now,
    /// Held in the timer topic until `due_ms`.
    At {
        /// When the message is due, in milliseconds since the Unix epoch.
        due_ms: i64,
    },
}

impl TimerService {
    /// The service with the checkpoint persisted under `root` (none: both queues from 0).
    ///
    /// # Errors
    /// An unreadable checkpoint file.
    pub fn open(root: &Path, settings: TimerSettings) -> std::io::Result<TimerService> {
        let service = TimerService {
            settings,
            state: Mutex::new(State::default()),
            dirty: AtomicBool::new(false),
            path: root.join("config").join("timerCheckpoint.json"),
        };
        if let Some(bytes) = read_if_exists(&service.path)? {
            let c: TimerCheckpoint = from_json(&bytes).map_err(|e| std::io::Error::other(format!("{}: {e}", service.path.display())))?;
            service.restore(&c);
            service.dirty.store(false, Ordering::Release);
        }
        Ok(service)
    }

    /// Where a send with `properties` goes at `now_ms`. A `DELAY` level wins over the timer
    /// properties (which are then dropped, as RocketMQ does); a message that already went
    /// through the timer (`TIMER_OUT_MS`) or is due now is stored as it is.
    ///
    /// # Errors
    /// A timer property that is not a number, or a due time further than `timerMaxDelaySec`
    /// (`MessageIllegal`); timer messages are off, or `timerMaxPending` are waiting (`Internal`,
    /// RocketMQ's SYSTEM_ERROR).
    pub fn route(
        &self,
        properties: &mut Properties,
        delay_level: bool,
        now_ms: i64,
        pending: impl FnOnce() -> usize,
    ) -> Result<TimerRoute, BrokerError> {
        const TIMER_KEYS: [&str; 3] = [keys::TIMER_DELAY_SEC, keys::TIMER_DELAY_MS, keys::TIMER_DELIVER_MS];
        if delay_level {
            for key in TIMER_KEYS {
                properties.shift_remove(key);
            }
            return Ok(TimerRoute::Now);
        }
        if properties.contains_key(keys::TIMER_OUT_MS) || !TIMER_KEYS.iter().any(|k| properties.contains_key(*k)) {
            return Ok(TimerRoute::Now);
        }
        if !self.settings.enabled {
            return Err(BrokerError::Internal(
                "accurate timer message is not enabled, timerWheelEnable is false".into(),
            ));
        }
        let due_ms = due_time(properties, now_ms).ok_or_else(|| self.illegal())?;
        if due_ms <= now_ms {
            return Ok(TimerRoute::Now);
        }
        if u64::try_from(due_ms - now_ms).unwrap_or(u64::MAX) > self.settings.max_delay_ms {
            return Err(self.illegal());
        }
        if pending() >= self.settings.max_pending {
            return Err(BrokerError::Internal(format!(
                "timer message is under flow control, max num limit is {} (timerMaxPending)",
                self.settings.max_pending
            )));
        }
        Ok(TimerRoute::At { due_ms })
    }

    fn illegal(&self) -> BrokerError {
        BrokerError::MessageIllegal(format!(
            "timer message illegal, the delay time should not be bigger than the max delay {}ms; or if set del msg, the delay time should be bigger than the current time",
            self.settings.max_delay_ms
        ))
    }

    /// The next offset of `queue_id` to read into the index.
    #[must_use]
    pub fn scanned(&self, queue_id: i32) -> i64 {
        self.state.lock().queues[index(queue_id)].scanned
    }

    /// Whether the index is full: reading waits until deliveries make room.
    #[must_use]
    pub fn index_full(&self) -> bool {
        self.state.lock().due.len() >= self.settings.max_pending
    }

    /// Adds what was read at `offset` of `queue_id` (the next unread one) to the index, due at
    /// `due_ms`; a message delivered before a restart is passed over.
    pub fn index(&self, queue_id: i32, offset: i64, due_ms: i64) {
        let mut state = self.state.lock();
        let q = &mut state.queues[index(queue_id)];
        assert_eq!(offset, q.scanned, "the timer queue is read in order");
        q.scanned = offset + 1;
        if q.is_done(offset) {
            return;
        }
        q.pending.insert(offset, due_ms);
        state.due.insert((due_ms, queue_id, offset));
    }

    /// Moves `queue_id`'s reading to `offset` (the queue's bounds moved: retention, or a new
    /// master's shorter log); what was indexed below it is dropped.
    pub fn skip_to(&self, queue_id: i32, offset: i64) {
        let mut state = self.state.lock();
        let State { queues, due } = &mut *state;
        let q = &mut queues[index(queue_id)];
        let dropped: Vec<(i64, i64)> = q.pending.range(..offset).map(|(&o, &d)| (o, d)).collect();
        for (o, d) in dropped {
            q.pending.remove(&o);
            due.remove(&(d, queue_id, o));
        }
        if offset < q.scanned {
            // The log is shorter than what was read: forget everything above it too.
            let above: Vec<(i64, i64)> = q.pending.range(offset..).map(|(&o, &d)| (o, d)).collect();
            for (o, d) in above {
                q.pending.remove(&o);
                due.remove(&(d, queue_id, o));
            }
            q.done.clear();
            q.low = offset.min(q.low);
        }
        q.scanned = offset;
        q.raise_low();
        self.dirty.store(true, Ordering::Release);
    }

    /// Up to `max` indexed messages due at `now_ms`, earliest first: (queue, offset).
    #[must_use]
    pub fn due(&self, now_ms: i64, max: usize) -> Vec<(i32, i64)> {
        self.state
            .lock()
            .due
            .iter()
            .take_while(|(due_ms, _, _)| *due_ms <= now_ms)
            .take(max)
            .map(|&(_, q, o)| (q, o))
            .collect()
    }

    /// Counts the message at `offset` of `queue_id` as delivered (or rolled): its copy is stored.
    pub fn done(&self, queue_id: i32, offset: i64) {
        let mut state = self.state.lock();
        let State { queues, due } = &mut *state;
        let q = &mut queues[index(queue_id)];
        let Some(due_ms) = q.pending.remove(&offset) else {
            return;
        };
        due.remove(&(due_ms, queue_id, offset));
        q.insert_done(offset);
        q.raise_low();
        self.dirty.store(true, Ordering::Release);
    }

    /// Up to `max` messages to roll: when a queue's delivered ranges are more than
    /// [`MAX_DONE_RANGES`], its lowest pending messages not due within [`NO_ROLL_WITHIN_MS`].
    #[must_use]
    pub fn to_roll(&self, now_ms: i64, max: usize) -> Vec<(i32, i64)> {
        let state = self.state.lock();
        let mut out = Vec::new();
        for (queue_id, q) in (0..).zip(&state.queues) {
            if q.done.len() <= MAX_DONE_RANGES {
                continue;
            }
            let room = max - out.len();
            out.extend(
                q.pending
                    .iter()
                    .filter(|(_, due_ms)| **due_ms > now_ms.saturating_add(NO_ROLL_WITHIN_MS))
                    .take(room)
                    .map(|(&o, _)| (queue_id, o)),
            );
        }
        out
    }

    /// Timer messages stored and not yet delivered: indexed, plus not yet read (`max_offset` of
    /// each queue, from the store).
    #[must_use]
    pub fn pending(&self, max_offset: impl Fn(i32) -> i64) -> usize {
        let state = self.state.lock();
        (0..)
            .zip(&state.queues)
            .map(|(queue_id, q)| q.pending.len() + usize::try_from(max_offset(queue_id) - q.scanned).unwrap_or(0))
            .sum()
    }

    /// The index for the metrics: messages indexed and not yet delivered, the earliest due time
    /// among them, and how many are due within each of `bounds_s` from `now_ms` (each bound's
    /// count excludes the earlier bounds', as RocketMQ's timer snapshot does).
    #[must_use]
    pub fn wheel(&self, now_ms: i64, bounds_s: &[u64]) -> TimerWheel {
        let state = self.state.lock();
        let mut within = vec![0usize; bounds_s.len()];
        let mut lower_ms = i64::MIN;
        for (slot, bound_s) in within.iter_mut().zip(bounds_s) {
            let upper_ms = now_ms.saturating_add(i64::try_from(*bound_s).unwrap_or(i64::MAX).saturating_mul(1000));
            *slot = state
                .due
                .range((lower_ms, i32::MIN, i64::MIN)..(upper_ms, i32::MIN, i64::MIN))
                .count();
            lower_ms = upper_ms;
        }
        TimerWheel {
            indexed: state.due.len(),
            earliest_due_ms: state.due.first().map(|(due_ms, _, _)| *due_ms),
            within,
        }
    }

    /// What was delivered of each queue, as the checkpoint file holds it.
    #[must_use]
    pub fn checkpoint(&self) -> TimerCheckpoint {
        let state = self.state.lock();
        TimerCheckpoint {
            queues: state.queues.iter().map(QueueState::checkpoint).collect(),
        }
    }

    /// Takes `c` (a restart, or a slave copying its master): the index is emptied and each queue
    /// is read again from its `low`.
    pub fn restore(&self, c: &TimerCheckpoint) {
        if *c == self.checkpoint() {
            return;
        }
        let mut state = self.state.lock();
        state.due.clear();
        for (q, from) in state.queues.iter_mut().zip(&c.queues) {
            *q = QueueState::restored(from);
        }
        self.dirty.store(true, Ordering::Release);
    }

    /// The checkpoint as `config/timerCheckpoint.json` holds it (GET_TIMER_CHECK_POINT's body).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.checkpoint()).expect("the timer checkpoint serializes to JSON")
    }

    /// Writes the checkpoint if it changed since the last write. Blocking.
    ///
    /// # Errors
    /// The file cannot be written (it is tried again at the next call).
    pub fn persist(&self) -> std::io::Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        write_atomically(&self.path, &self.to_json()).inspect_err(|_| self.dirty.store(true, Ordering::Release))
    }
}

/// The due time the timer properties ask for, RocketMQ's precedence: `TIMER_DELAY_SEC`, then
/// `TIMER_DELAY_MS`, then `TIMER_DELIVER_MS`. `None`: not a number.
fn due_time(properties: &Properties, now_ms: i64) -> Option<i64> {
    let number = |key| properties.get(key).map(|v: &String| v.trim().parse::<i64>());
    if let Some(sec) = number(keys::TIMER_DELAY_SEC) {
        return now_ms.checked_add(sec.ok()?.checked_mul(1000)?);
    }
    if let Some(ms) = number(keys::TIMER_DELAY_MS) {
        return now_ms.checked_add(ms.ok()?);
    }
    number(keys::TIMER_DELIVER_MS)?.ok()
}

/// The due time a stored timer message carries; `None` when it has none (it is delivered at once).
#[must_use]
pub fn stored_due_ms(properties: &Properties) -> Option<i64> {
    properties.get(keys::TIMER_OUT_MS)?.trim().parse().ok()
}

fn index(queue_id: i32) -> usize {
    let i = usize::try_from(queue_id).expect("timer queues are 0 and 1");
    assert!(i < QUEUES, "timer queue {queue_id}");
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(dir: &Path, max_pending: usize) -> TimerService {
        let settings = TimerSettings {
            enabled: true,
            max_delay_ms: 3 * 24 * 3600 * 1000,
            max_pending,
        };
        TimerService::open(dir, settings).unwrap()
    }

    fn props(pairs: &[(&str, &str)]) -> Properties {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_route_follows_rocketmqs_precedence_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let t = service(dir.path(), 10);
        let now = 1_000_000;
        let route = |pairs: &[(&str, &str)]| t.route(&mut props(pairs), false, now, || 0);
        assert_eq!(route(&[("TIMER_DELAY_SEC", "3")]).unwrap(), TimerRoute::At { due_ms: now + 3000 });
        assert_eq!(route(&[("TIMER_DELAY_MS", "1500")]).unwrap(), TimerRoute::At { due_ms: now + 1500 });
        assert_eq!(
            route(&[("TIMER_DELIVER_MS", "1000700")]).unwrap(),
            TimerRoute::At { due_ms: now + 700 }
        );
        assert_eq!(
            route(&[("TIMER_DELAY_SEC", "2"), ("TIMER_DELIVER_MS", "1000700")]).unwrap(),
            TimerRoute::At { due_ms: now + 2000 },
            "TIMER_DELAY_SEC wins"
        );
        assert_eq!(route(&[("TIMER_DELIVER_MS", "999999")]).unwrap(), TimerRoute::Now, "already due");
        assert_eq!(route(&[]).unwrap(), TimerRoute::Now);
        assert_eq!(
            route(&[("TIMER_DELAY_SEC", "3"), ("TIMER_OUT_MS", "5")]).unwrap(),
            TimerRoute::Now,
            "delivered before"
        );
        let max_s = (3 * 24 * 3600).to_string();
        assert!(
            matches!(route(&[("TIMER_DELAY_SEC", max_s.as_str())]), Ok(TimerRoute::At { .. })),
            "the edge is allowed"
        );
        let over = (3 * 24 * 3600 + 1).to_string();
        for bad in [
            &[("TIMER_DELAY_SEC", over.as_str())][..],
            &[("TIMER_DELAY_MS", "soon")],
            &[("TIMER_DELAY_SEC", "99999999999999999")],
        ] {
            let e = route(bad).unwrap_err();
            assert!(
                matches!(e, BrokerError::MessageIllegal(ref r) if r.contains("timer message illegal")),
                "{bad:?}: {e}"
            );
        }
        let full = t.route(&mut props(&[("TIMER_DELAY_SEC", "3")]), false, now, || 10).unwrap_err();
        assert!(
            matches!(full, BrokerError::Internal(ref r) if r.contains("timerMaxPending")),
            "{full}"
        );
        assert!(
            t.route(&mut props(&[("TIMER_DELAY_SEC", "3")]), false, now, || 9).is_ok(),
            "one below the limit"
        );
        let mut both = props(&[("DELAY", "2"), ("TIMER_DELAY_SEC", "3"), ("TIMER_DELIVER_MS", "1")]);
        assert_eq!(t.route(&mut both, true, now, || 0).unwrap(), TimerRoute::Now);
        assert_eq!(both, props(&[("DELAY", "2")]), "a delay level drops the timer properties");
        let off = TimerService::open(
            dir.path(),
            TimerSettings {
                enabled: false,
                ..t.settings
            },
        )
        .unwrap();
        let e = off.route(&mut props(&[("TIMER_DELAY_SEC", "3")]), false, now, || 0).unwrap_err();
        assert!(e.to_string().contains("timerWheelEnable is false"), "{e}");
    }

    #[test]
    fn messages_come_due_in_time_order_whatever_their_queue_order() {
        let dir = tempfile::tempdir().unwrap();
        let t = service(dir.path(), 10);
        for (offset, due) in [(0, 300), (1, 100), (2, 200)] {
            t.index(ARRIVALS_QUEUE, offset, due);
        }
        t.index(ROLLED_QUEUE, 0, 150);
        assert_eq!(t.due(99, 10), []);
        assert_eq!(t.due(200, 10), [(0, 1), (1, 0), (0, 2)]);
        assert_eq!(t.due(1000, 2), [(0, 1), (1, 0)], "at most max");
        assert_eq!(t.pending(|q| if q == ARRIVALS_QUEUE { 3 } else { 1 }), 4, "all read, all indexed");
    }

    #[test]
    fn delivered_offsets_survive_a_restart_and_are_not_delivered_again() {
        let dir = tempfile::tempdir().unwrap();
        let t = service(dir.path(), 100);
        for offset in 0..6 {
            t.index(ARRIVALS_QUEUE, offset, 1000 - offset);
        }
        for offset in [1, 3, 4] {
            t.done(ARRIVALS_QUEUE, offset);
        }
        t.done(ARRIVALS_QUEUE, 3); // twice: nothing more
        let c = t.checkpoint();
        assert_eq!(
            c.queues[0],
            QueueCheckpoint {
                low: 0,
                done: vec![[1, 2], [3, 5]]
            }
        );
        t.done(ARRIVALS_QUEUE, 0);
        assert_eq!(
            t.checkpoint().queues[0],
            QueueCheckpoint {
                low: 2,
                done: vec![[3, 5]]
            },
            "low moved to the first pending"
        );
        t.persist().unwrap();

        let again = service(dir.path(), 100);
        assert_eq!(again.scanned(ARRIVALS_QUEUE), 2, "read again from low");
        for offset in 2..7 {
            again.index(ARRIVALS_QUEUE, offset, 500);
        }
        assert_eq!(
            again.due(500, 10),
            [(0, 2), (0, 5), (0, 6)],
            "3 and 4 were delivered before the restart"
        );
        assert_eq!(again.pending(|q| if q == 0 { 9 } else { 0 }), 3 + 2, "indexed plus not yet read");
    }

    #[test]
    fn a_message_due_much_later_is_rolled_once_the_ranges_pile_up() {
        let dir = tempfile::tempdir().unwrap();
        let t = service(dir.path(), 10_000);
        let now = 0;
        let far = 10 * NO_ROLL_WITHIN_MS;
        // Every other message is due far later: each delivered one is a range of its own.
        let n = i64::try_from(2 * MAX_DONE_RANGES + 4).unwrap();
        for offset in 0..n {
            t.index(ARRIVALS_QUEUE, offset, if offset % 2 == 0 { far + offset } else { now });
        }
        for (q, o) in t.due(now, usize::MAX) {
            t.done(q, o);
        }
        assert_eq!(t.checkpoint().queues[0].done.len(), MAX_DONE_RANGES + 2);
        let roll = t.to_roll(now, 8);
        assert_eq!(
            roll,
            (0..8).map(|i| (0, 2 * i)).collect::<Vec<_>>(),
            "the lowest pending, which pin low"
        );
        for (q, o) in roll {
            t.done(q, o);
        }
        let c = t.checkpoint();
        assert_eq!((c.queues[0].low, c.queues[0].done.len()), (16, MAX_DONE_RANGES - 6));
        assert_eq!(t.to_roll(now, 8), [], "few enough ranges now");
    }

    #[test]
    fn skipping_forward_drops_what_retention_removed_and_backward_reads_again() {
        let dir = tempfile::tempdir().unwrap();
        let t = service(dir.path(), 100);
        for offset in 0..4 {
            t.index(ARRIVALS_QUEUE, offset, 10);
        }
        t.done(ARRIVALS_QUEUE, 3);
        t.skip_to(ARRIVALS_QUEUE, 6);
        assert_eq!(t.due(100, 10), []);
        assert_eq!((t.scanned(0), t.checkpoint().queues[0].low), (6, 6));
        t.index(ARRIVALS_QUEUE, 6, 10);
        t.skip_to(ARRIVALS_QUEUE, 2);
        assert_eq!(
            (t.scanned(0), t.checkpoint().queues[0].clone()),
            (2, QueueCheckpoint { low: 2, done: vec![] })
        );
        assert_eq!(t.due(100, 10), []);
    }
}
