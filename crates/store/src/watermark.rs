//! `Watermark`: a monotonic offset (flushed, or acknowledged by k replicas) that tasks and
//! threads wait to pass a target — without a thread per waiter.
//!
//! A writer reserves a slot *before* it appends, so that a full waiter table answers "busy"
//! before anything is written, never after. The slot stays taken until the waiter leaves the
//! table (the watermark passed it, or failed), not merely until its future is dropped: the table
//! is therefore bounded by the capacity even while a stalled disk makes every waiter time out.
//!
//! Owns: the value, the waiter table (a min-heap by target) and the failure that ends all waits.
//! Must never: go backwards, wake a waiter before the value reaches its target, or lose a
//! wake-up between a waiter's check and its registration (both happen under the table's lock
//! when the fast path fails).

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

/// Why a wait ended without the watermark reaching its target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The stream failed (a flush error, say); no later value will come.
    #[error("{0}")]
    Failed(Arc<str>),
    /// Every waiter slot is taken.
    #[error("{capacity} waiters already wait on the {name} watermark")]
    Busy {
        /// The watermark's name.
        name: &'static str,
        /// Waiters it holds at most.
        capacity: usize,
    },
    /// A blocking wait ran out of time.
    #[error("the {name} watermark did not reach {target} within {timeout:?}")]
    TimedOut {
        /// The watermark's name.
        name: &'static str,
        /// The value waited for.
        target: u64,
        /// The time the wait was allowed.
        timeout: Duration,
    },
}

struct Waiter {
    target: u64,
    tx: oneshot::Sender<Result<(), WaitError>>,
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        self.target == other.target
    }
}
impl Eq for Waiter {}
impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiter {
    /// Reversed: the heap's top is the smallest target.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        other.target.cmp(&self.target)
    }
}

#[derive(Default)]
struct Table {
    waiters: BinaryHeap<Waiter>,
    failed: Option<Arc<str>>,
    /// Threads in `wait_blocking`.
    blocked: usize,
}

/// A monotonic offset with bounded async and blocking waiters.
pub struct Watermark {
    name: &'static str,
    value: AtomicU64,
    capacity: usize,
    /// Slots not reserved.
    free: AtomicUsize,
    table: Mutex<Table>,
    moved: Condvar,
    /// Waits that could not complete at once and went into the table (each costs a wake-up).
    parked: AtomicU64,
}

impl Watermark {
    /// A watermark at `initial` with room for `capacity` waiters.
    #[must_use]
    pub fn new(name: &'static str, initial: u64, capacity: usize) -> Arc<Watermark> {
        assert!(capacity > 0, "a watermark needs room for one waiter");
        Arc::new(Watermark {
            name,
            value: AtomicU64::new(initial),
            capacity,
            free: AtomicUsize::new(capacity),
            table: Mutex::new(Table::default()),
            moved: Condvar::new(),
            parked: AtomicU64::new(0),
        })
    }

    /// The name it was created with (`written`, `flushed`...), for errors and metrics.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Acquire)
    }

    /// Waiters it holds at most.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Waiter slots in use.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.capacity - self.free.load(Ordering::Relaxed)
    }

    /// Async waits so far that did not find the value at their target and had to be woken.
    #[must_use]
    pub fn parked_waits(&self) -> u64 {
        self.parked.load(Ordering::Relaxed)
    }

    /// The failure that ended the stream, if any.
    #[must_use]
    pub fn failure(&self) -> Option<Arc<str>> {
        self.table.lock().failed.clone()
    }

    /// Moves the value to `to` (never backwards) and completes every waiter it passes.
    pub fn advance(&self, to: u64) {
        let previous = self.value.fetch_max(to, Ordering::AcqRel);
        if to <= previous {
            return;
        }
        let mut table = self.table.lock();
        let mut released = 0;
        while table.waiters.peek().is_some_and(|w| w.target <= to) {
            if let Some(w) = table.waiters.pop() {
                let _ = w.tx.send(Ok(()));
                released += 1;
            }
        }
        if table.blocked > 0 {
            self.moved.notify_all();
        }
        drop(table);
        self.free.fetch_add(released, Ordering::AcqRel);
    }

    /// Lowers the value to `to` (a commit log cut back on a replica). Waiters past `to` keep
    /// waiting for the log to grow there again.
    pub fn lower_to(&self, to: u64) {
        let _table = self.table.lock();
        self.value.fetch_min(to, Ordering::AcqRel);
    }

    /// Fails every waiter, now and later, with `reason` (the first failure is kept).
    pub fn fail(&self, reason: &str) {
        let mut table = self.table.lock();
        let reason: Arc<str> = table.failed.get_or_insert_with(|| reason.into()).clone();
        let waiters = std::mem::take(&mut table.waiters);
        let released = waiters.len();
        for w in waiters {
            let _ = w.tx.send(Err(WaitError::Failed(reason.clone())));
        }
        self.moved.notify_all();
        drop(table);
        self.free.fetch_add(released, Ordering::AcqRel);
    }

    /// Takes a waiter slot, to be used by [`Slot::wait`] once the writer knows its target.
    ///
    /// # Errors
    /// [`WaitError::Busy`] when every slot is taken, [`WaitError::Failed`] after a failure.
    pub fn reserve(self: &Arc<Self>) -> Result<Slot, WaitError> {
        let mut free = self.free.load(Ordering::Acquire);
        loop {
            if free == 0 {
                return Err(WaitError::Busy {
                    name: self.name,
                    capacity: self.capacity,
                });
            }
            match self.free.compare_exchange_weak(free, free - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(now) => free = now,
            }
        }
        let slot = Slot { mark: Some(self.clone()) };
        if let Some(reason) = self.table.lock().failed.clone() {
            return Err(WaitError::Failed(reason)); // `slot` drops here and gives its place back
        }
        Ok(slot)
    }

    /// Blocks this thread until the value reaches `target`, the stream fails or `timeout`
    /// passes. For threads only (tests, the checkpointer); tasks use [`Slot::wait`].
    ///
    /// # Errors
    /// [`WaitError::Failed`] or [`WaitError::TimedOut`].
    pub fn wait_blocking(&self, target: u64, timeout: Duration) -> Result<(), WaitError> {
        let deadline = Instant::now() + timeout;
        let mut table = self.table.lock();
        table.blocked += 1;
        let result = loop {
            if let Some(reason) = &table.failed {
                break Err(WaitError::Failed(reason.clone()));
            }
            if self.get() >= target {
                break Ok(());
            }
            if self.moved.wait_until(&mut table, deadline).timed_out() && self.get() < target {
                break Err(WaitError::TimedOut {
                    name: self.name,
                    target,
                    timeout,
                });
            }
        };
        table.blocked -= 1;
        result
    }
}

/// A reserved waiter slot; dropping it unused gives the place back.
pub struct Slot {
    mark: Option<Arc<Watermark>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(mark) = self.mark.take() {
            mark.free.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Slot {
    /// Resolves when the watermark reaches `target` (at once if it already has).
    #[must_use]
    pub fn wait(mut self, target: u64) -> WaitFuture {
        let Some(mark) = self.mark.take() else {
            return WaitFuture::Ready(Some(Ok(())));
        };
        let ready = |mark: &Watermark| mark.free.fetch_add(1, Ordering::AcqRel);
        if mark.get() >= target {
            ready(&mark);
            return WaitFuture::Ready(Some(Ok(())));
        }
        let mut table = mark.table.lock();
        if let Some(reason) = table.failed.clone() {
            drop(table);
            ready(&mark);
            return WaitFuture::Ready(Some(Err(WaitError::Failed(reason))));
        }
        // Checked again under the lock `advance` takes: no wake-up can slip between.
        if mark.get() >= target {
            drop(table);
            ready(&mark);
            return WaitFuture::Ready(Some(Ok(())));
        }
        let (tx, rx) = oneshot::channel();
        mark.parked.fetch_add(1, Ordering::Relaxed);
        // The slot now belongs to the table entry; `advance` or `fail` gives it back.
        table.waiters.push(Waiter { target, tx });
        WaitFuture::Pending(rx)
    }
}

/// The future of [`Slot::wait`].
pub enum WaitFuture {
    /// Decided when the wait began; `None` once polled to completion.
    Ready(Option<Result<(), WaitError>>),
    /// In the table, until `advance` or `fail` answers.
    Pending(oneshot::Receiver<Result<(), WaitError>>),
}

impl Future for WaitFuture {
    type Output = Result<(), WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            WaitFuture::Ready(r) => Poll::Ready(r.take().unwrap_or(Ok(()))),
            WaitFuture::Pending(rx) => Pin::new(rx).poll(cx).map(|r| {
                // A dropped sender means the watermark itself went away: treat as a failure.
                r.unwrap_or_else(|_| Err(WaitError::Failed("the watermark was dropped".into())))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_complete_in_target_order_as_the_mark_passes_them() {
        let mark = Watermark::new("flushed", 10, 8);
        let now = mark.reserve().unwrap().wait(5);
        assert_eq!(now.await, Ok(()), "already passed");
        let a = mark.reserve().unwrap().wait(30);
        let b = mark.reserve().unwrap().wait(20);
        assert_eq!(mark.waiting(), 2);
        mark.advance(25);
        assert_eq!(b.await, Ok(()));
        assert_eq!(mark.waiting(), 1, "the passed waiter left the table");
        mark.advance(15);
        assert_eq!(mark.get(), 25, "never backwards");
        mark.advance(30);
        assert_eq!(a.await, Ok(()));
        assert_eq!(mark.waiting(), 0);
    }

    #[tokio::test]
    async fn capacity_counts_table_entries_until_they_leave_even_when_their_future_is_dropped() {
        let mark = Watermark::new("flushed", 0, 2);
        let first = mark.reserve().unwrap();
        let second = mark.reserve().unwrap().wait(100);
        assert!(matches!(mark.reserve(), Err(WaitError::Busy { capacity: 2, .. })));
        drop(first);
        let third = mark.reserve().unwrap();
        drop(second); // timed out, say: its entry stays until the mark passes it
        assert!(matches!(mark.reserve(), Err(WaitError::Busy { .. })));
        mark.advance(100);
        assert_eq!(mark.waiting(), 1, "only the unused reservation is left");
        drop(third);
        assert_eq!(mark.waiting(), 0);
    }

    #[tokio::test]
    async fn a_failure_ends_every_wait_and_refuses_new_ones() {
        let mark = Watermark::new("flushed", 0, 4);
        let waiting = mark.reserve().unwrap().wait(10);
        let blocked = {
            let mark = mark.clone();
            std::thread::spawn(move || mark.wait_blocking(10, Duration::from_secs(30)))
        };
        std::thread::sleep(Duration::from_millis(20));
        mark.fail("flush failed: EIO");
        mark.fail("a second failure is not kept");
        let expected = WaitError::Failed("flush failed: EIO".into());
        assert_eq!(waiting.await, Err(expected.clone()));
        assert_eq!(blocked.join().unwrap(), Err(expected.clone()));
        assert_eq!(mark.reserve().err(), Some(expected));
        assert_eq!(mark.waiting(), 0);
    }

    #[test]
    fn blocking_waits_time_out_and_wake_on_advance() {
        let mark = Watermark::new("flushed", 0, 1);
        assert!(matches!(
            mark.wait_blocking(5, Duration::from_millis(20)),
            Err(WaitError::TimedOut { target: 5, .. })
        ));
        let waiter = {
            let mark = mark.clone();
            std::thread::spawn(move || mark.wait_blocking(5, Duration::from_secs(30)))
        };
        std::thread::sleep(Duration::from_millis(20));
        mark.advance(7);
        assert_eq!(waiter.join().unwrap(), Ok(()));
    }
}
