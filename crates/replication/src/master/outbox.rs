//! Who sends a slave its next frame, and how, without a thread wake-up per round trip.
//!
//! When sends wait for the slaves, a round trip is: records published, a frame to the slave,
//! the slave's ack, the waiting sends answered. With a transfer thread that sleeps on the
//! written end, every round woke it once for the new records and again for the ack that freed
//! the next frame. Here, in the steady state, the frame leaves from a thread that is awake
//! anyway: the one that published the records (the append path) or the reader that took the
//! ack. Both only ever send what the socket takes at once (`MSG_DONTWAIT`) and never wait.
//!
//! The transfer thread keeps what may block or must stream: the start, a backlog of a whole
//! frame or more (sent back to back, not one per ack), a frame the socket did not take whole,
//! heartbeats, lingering (ASYNC_MASTER), and a slave behind the local log, whose bytes come
//! from the cold tier. It hands over to the inline senders once it has
//! sent everything written, and is called back by them ([`Sender::Thread`] and a kick).
//!
//! Owns: a slave's sending side (the socket's writing half, the next offset, the frame in
//! progress). Must never: block an inline sender (on the socket, or on a lock held across I/O),
//! interleave two frames' bytes, leave published bytes unsent with nobody due to look at them,
//! or send a frame past what is written.

use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use super::{Inner, Slave, frame_header};
use crate::error::{ReplicationError, Step};
use crate::stream::HaStream;

/// Who sends the next frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sender {
    /// The transfer thread.
    Thread,
    /// Whoever is awake when there is something to send (see the module's header).
    Inline,
}

/// A slave's sending side, under [`Slave::out`]: whoever holds the lock may write.
pub(super) struct Outbox {
    stream: HaStream,
    /// Where the next frame starts: everything below is on the socket, or in `frame`.
    next: u64,
    /// The last frame: header and bytes.
    frame: Vec<u8>,
    /// Bytes of `frame` on the socket; short of its length only in [`Sender::Thread`].
    frame_sent: usize,
    /// When the last frame left (a heartbeat is due `haSendHeartbeatInterval` after).
    last_sent: Instant,
    /// Since when a partial frame has been held back (see [`hold`] and [`linger`]).
    held_since: Option<Instant>,
    sender: Sender,
    /// When the transfer thread, asleep while the inline senders send, wakes next.
    thread_wakes_at: Option<Instant>,
}

impl Outbox {
    pub(super) fn new(stream: HaStream, next: u64, frame_capacity_bytes: usize) -> Outbox {
        Outbox {
            stream,
            next,
            frame: Vec::with_capacity(frame_capacity_bytes),
            frame_sent: 0,
            last_sent: Instant::now(),
            held_since: None,
            sender: Sender::Thread,
            thread_wakes_at: None,
        }
    }
}

/// Longest a partial frame waits for the previous frame's ack.
const MAX_HOLD: Duration = Duration::from_millis(2);
/// Longest the transfer thread sleeps at once, so that a stop is noticed soon.
const WAIT_SLICE: Duration = Duration::from_millis(500);

impl Slave {
    /// Sends what is new, inline, if the inline senders have the connection and no frame is in
    /// flight; never blocks. With the lock taken, the holder is told to look again instead.
    pub(super) fn pump(&self, inner: &Inner) {
        self.wanted.store(true, Ordering::SeqCst);
        // Paired with the fence a holder passes between letting go of `out` and looking at
        // `wanted`: either this `try_lock` finds `out` free, or that look finds `wanted` set.
        fence(Ordering::SeqCst);
        // Bounded: each turn either returns or sends (or finds nothing) for a `wanted` that
        // was set since the last turn; a turn that loses the lock returns.
        loop {
            // The holder looks at `wanted` before it lets go (the transfer thread too, before
            // it sleeps: see `wait_inline`).
            let Some(mut guard) = self.out.try_lock() else {
                return;
            };
            while self.wanted.swap(false, Ordering::SeqCst) {
                let Some(out) = guard.as_mut() else { break };
                if let Err(why) = send_inline(inner, self, out, By::Inline) {
                    drop(guard);
                    self.close(&why.to_string());
                    return;
                }
            }
            drop(guard);
            fence(Ordering::SeqCst);
            if !self.wanted.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Wakes the transfer thread (it was handed the connection back, or must stop).
    pub(super) fn call_thread(&self) {
        let mut kicked = self.kick.lock();
        *kicked = true;
        self.kicked.notify_one();
    }
}

/// Who sent a frame, for [`crate::master::FrameCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Inline,
    Thread,
}

/// One send outside the thread's streaming: the next frame if one is due, all of it or what
/// the socket takes (the thread finishes the rest). It never blocks: on the append path, the
/// runtime, or the thread's own wait.
fn send_inline(inner: &Inner, slave: &Slave, out: &mut Outbox, by: By) -> Result<(), ReplicationError> {
    if out.sender != Sender::Inline || slave.closed.load(Ordering::Acquire) {
        return Ok(());
    }
    if out.frame_sent < out.frame.len() {
        // Not reached (a partial frame hands the connection to the thread); if it were, the
        // thread finishes the frame rather than a frame starting mid-frame.
        debug_assert!(false, "inline senders start only on a whole frame");
        hand_to_thread(slave, out);
        return Ok(());
    }
    let in_flight = slave.last_ack.load(Ordering::Acquire) < out.next;
    if in_flight && out.last_sent.elapsed() < MAX_HOLD {
        // Held: the ack's reader sends what came meanwhile, one frame for all of it, or the
        // thread does once the hold is over (it sleeps no longer than that while one is in
        // flight; one that planned a longer sleep is called now).
        if out.thread_wakes_at.is_some_and(|at| at > out.last_sent + MAX_HOLD) {
            out.thread_wakes_at = None;
            slave.call_thread();
        }
        return Ok(());
    }
    let log = inner.store.commit_log();
    let (end, batch) = (log.max_offset(), inner.config.transfer_batch_bytes);
    if end <= out.next {
        return Ok(());
    }
    let segment_bytes = log.config().segment_size_bytes;
    let segment_end = out.next - out.next % segment_bytes + segment_bytes;
    if end.min(segment_end) - out.next >= batch as u64 {
        // A backlog: the thread streams it, frame after frame, without waiting for acks (and
        // reads it there, where a read from disk may block).
        hand_to_thread(slave, out);
        return Ok(());
    }
    let Some(bytes) = log.read_raw(out.next, batch) else {
        if out.next < log.min_offset() {
            // Below the local log: the cold tier's bytes, read on the thread, which may block.
            hand_to_thread(slave, out);
            return Ok(());
        }
        return Err(ReplicationError::Gone(out.next));
    };
    if bytes.is_empty() {
        return Ok(());
    }
    let len = fill_frame(inner, out, &bytes);
    let taken = out.stream.send_now(&out.frame).map_err(|e| {
        // The connection ends (the caller closes it); the thread finds it so.
        out.sender = Sender::Thread;
        ReplicationError::Io { step: "write", source: e }
    })?;
    out.frame_sent = taken;
    out.next += len as u64;
    out.last_sent = Instant::now();
    let counter = match by {
        By::Inline => &inner.frames.inline,
        By::Thread => &inner.frames.by_thread,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    if taken < out.frame.len() {
        hand_to_thread(slave, out);
    }
    Ok(())
}

/// Gives the connection back to the transfer thread, and wakes it.
fn hand_to_thread(slave: &Slave, out: &mut Outbox) {
    out.sender = Sender::Thread;
    out.thread_wakes_at = None;
    slave.call_thread();
}

/// Puts the frame for `bytes` at `out.next` (cut to its epoch in controller mode) in
/// `out.frame`; returns the log bytes it carries.
fn fill_frame(inner: &Inner, out: &mut Outbox, bytes: &[u8]) -> usize {
    let mut len = bytes.len();
    let header = frame_header(inner, out.next, &mut len);
    out.frame.clear();
    out.frame.extend_from_slice(&header);
    out.frame.extend_from_slice(&bytes[..len]);
    out.frame_sent = 0;
    len
}

/// One turn of the transfer thread: a frame, a heartbeat, a hand-over to the inline senders,
/// or a bounded wait. `Err` says why the connection ends.
pub(super) fn transfer_step(inner: &Inner, slave: &Slave) -> Result<(), ReplicationError> {
    let mut guard = slave.out.lock();
    let out = guard.as_mut().expect("the outbox is set before the transfer's turns");
    if out.sender == Sender::Inline {
        drop(guard);
        return wait_inline(inner, slave);
    }
    if out.frame_sent < out.frame.len() {
        let from = out.frame_sent;
        out.stream
            .write_all_within(&out.frame[from..], inner.config.housekeeping_interval)
            .step("write")?;
        out.frame_sent = out.frame.len();
        out.last_sent = Instant::now();
        return Ok(());
    }
    let config = &inner.config;
    let log = inner.store.commit_log();
    let bytes = match log.read_raw(out.next, config.transfer_batch_bytes) {
        Some(bytes) => bytes,
        None => match inner.store.read_cold_raw(out.next, config.transfer_batch_bytes) {
            // A slave catching up on what this disk no longer keeps, from the cold tier.
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(ReplicationError::Gone(out.next)),
            Err(e) => return cold_tier_failed(inner, slave, guard, &e),
        },
    };
    if bytes.is_empty() && out.last_sent.elapsed() < config.heartbeat_interval {
        if inner.inline {
            out.sender = Sender::Inline;
            drop(guard);
            // What was published since the read above found the thread still sending.
            slave.pump(inner);
            return Ok(());
        }
        let wait = config.heartbeat_interval.saturating_sub(out.last_sent.elapsed()).min(WAIT_SLICE);
        let target = out.next + 1;
        drop(guard);
        if let Err(petrel_store::WaitError::Failed(reason)) = log.written_watermark().wait_blocking(target, wait) {
            return Err(ReplicationError::LogFailed(reason));
        }
        return Ok(());
    }
    if !bytes.is_empty() && bytes.len() < config.transfer_batch_bytes {
        let (next, mut held_since) = (out.next, out.held_since);
        drop(guard);
        let held = if config.linger.is_zero() {
            hold(slave, next, &mut held_since)
        } else {
            let full = next + config.transfer_batch_bytes as u64;
            linger(log, full, config.linger, &mut held_since)
        };
        let mut guard = slave.out.lock();
        let out = guard.as_mut().expect("the outbox stays set");
        out.held_since = held_since;
        if held {
            return Ok(());
        }
        // Sent as it was read: only the thread sends in this mode, so `next` has not moved.
        assert_eq!(out.next, next, "only the transfer thread sends while it has the connection");
        return send_blocking(inner, out, &bytes);
    }
    send_blocking(inner, out, &bytes)
}

/// The cold tier could not give the bytes a catching-up slave needs: the connection stays (the
/// tier is retried after a pause, as a consumer's busy answer is), kept alive by heartbeats.
fn cold_tier_failed(
    inner: &Inner,
    slave: &Slave,
    mut guard: parking_lot::MutexGuard<'_, Option<Outbox>>,
    e: &petrel_store::StoreError,
) -> Result<(), ReplicationError> {
    let out = guard.as_mut().expect("the outbox stays set");
    if let petrel_store::StoreError::ColdLost { .. } = e {
        // Gone from the bucket: the slave cannot have a log without a hole; it needs a new store.
        return Err(ReplicationError::Gone(out.next));
    }
    tracing::warn!(slave = slave.id, offset = out.next, error = %e, "a slave's catch-up from the cold tier failed; retried");
    if out.last_sent.elapsed() >= inner.config.heartbeat_interval {
        send_blocking(inner, out, &[])?;
    }
    drop(guard);
    let mut kicked = slave.kick.lock();
    if !*kicked && !slave.closed.load(Ordering::Acquire) {
        slave.kicked.wait_for(&mut kicked, WAIT_SLICE);
    }
    *kicked = false;
    Ok(())
}

/// A frame (or a heartbeat, for empty `bytes`) written whole by the thread, blocking.
fn send_blocking(inner: &Inner, out: &mut Outbox, bytes: &[u8]) -> Result<(), ReplicationError> {
    out.held_since = None;
    let len = fill_frame(inner, out, bytes);
    // One write per frame: header and bytes together.
    out.stream
        .write_all_within(&out.frame, inner.config.housekeeping_interval)
        .step("write")?;
    out.frame_sent = out.frame.len();
    out.next += len as u64;
    out.last_sent = Instant::now();
    inner.frames.by_thread.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The thread while the inline senders have the connection: it sleeps until it is called
/// back, a heartbeat is due, a held frame's [`MAX_HOLD`] is over (no ack came: the frame goes
/// anyway, as a thread holding it would send it), or a slice passes; it also sends for a pump
/// that found it holding the lock.
fn wait_inline(inner: &Inner, slave: &Slave) -> Result<(), ReplicationError> {
    let left = {
        let mut guard = slave.out.lock();
        let out = guard.as_mut().expect("the outbox stays set");
        out.thread_wakes_at = None;
        let in_flight = slave.last_ack.load(Ordering::Acquire) < out.next;
        let hold_over = in_flight && out.last_sent.elapsed() >= MAX_HOLD;
        if slave.wanted.swap(false, Ordering::SeqCst) || hold_over {
            send_inline(inner, slave, out, By::Thread)?;
        }
        if out.sender == Sender::Thread {
            return Ok(());
        }
        let left = inner.config.heartbeat_interval.saturating_sub(out.last_sent.elapsed());
        if left.is_zero() {
            out.sender = Sender::Thread;
            return Ok(());
        }
        let in_flight = slave.last_ack.load(Ordering::Acquire) < out.next;
        let left = if in_flight {
            // Whatever is held behind the frame in flight leaves at the end of the hold.
            left.min(MAX_HOLD.saturating_sub(out.last_sent.elapsed()).max(Duration::from_micros(100)))
        } else {
            left.min(WAIT_SLICE)
        };
        out.thread_wakes_at = Some(Instant::now() + left);
        left
    };
    // A pump that lost `out` to this thread above set `wanted` for it to look at: look now
    // (the fence pairs with the pump's), under `kick`, which every call back takes too.
    fence(Ordering::SeqCst);
    let mut kicked = slave.kick.lock();
    if !*kicked && !slave.wanted.load(Ordering::SeqCst) && !slave.closed.load(Ordering::Acquire) {
        let _ = slave.kicked.wait_for(&mut kicked, left);
    }
    *kicked = false;
    Ok(())
}

/// Whether to hold a partial frame back, waiting (here, up to [`MAX_HOLD`] in all) for the
/// slave to ack what was sent before it. While a frame is on its way, the records that arrive
/// then travel together in the next one — one frame, one ack, one wake-up on each side for
/// many messages when many senders wait — and a lone sender, whose previous record is already
/// acknowledged, is never held.
fn hold(slave: &Slave, sent_end: u64, held_since: &mut Option<Instant>) -> bool {
    let since = *held_since.get_or_insert_with(Instant::now);
    let Some(left) = MAX_HOLD.checked_sub(since.elapsed()) else {
        return false;
    };
    let mut acked = slave.acked.lock();
    if acked.is_none_or(|a| a >= sent_end) || slave.closed.load(Ordering::Acquire) {
        return false;
    }
    let _ = slave.reported.wait_for(&mut acked, left);
    // Look again at the log: more may have been written meanwhile.
    true
}

/// Whether to hold a partial frame back for more records (up to `limit` in all, or until the
/// log reaches `full`, a whole frame). Only where no send waits for the slave.
fn linger(log: &petrel_store::CommitLog, full: u64, limit: Duration, held_since: &mut Option<Instant>) -> bool {
    let since = *held_since.get_or_insert_with(Instant::now);
    let Some(left) = limit.checked_sub(since.elapsed()) else {
        return false;
    };
    if log.max_offset() >= full {
        return false;
    }
    let _ = log.written_watermark().wait_blocking(full, left);
    true
}
