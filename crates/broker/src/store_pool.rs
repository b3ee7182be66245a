//! `StorePool`: a few dedicated threads for store work that may block — an append that must
//! wait for a segment or take page faults, reads of data that may not be in memory — so that it
//! never runs on the async runtime's workers.
//!
//! Owns: the threads and a bounded queue. Must never: queue without bound (a full queue is
//! [`BrokerError::Busy`], answered `SYSTEM_BUSY`), or lose a job's result (a job that panics
//! reports an internal error to its caller).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::error::BrokerError;

type Job = Box<dyn FnOnce() + Send>;

/// Threads for store work that may block, fed by a bounded queue.
pub struct StorePool {
    tx: Mutex<Option<SyncSender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    queued: Arc<AtomicUsize>,
    capacity: usize,
}

impl StorePool {
    /// Starts `threads` workers with room for `capacity` queued jobs.
    ///
    /// # Errors
    /// A thread cannot be started.
    pub fn new(threads: usize, capacity: usize) -> std::io::Result<StorePool> {
        assert!(threads > 0 && capacity > 0, "a pool needs a thread and a queue slot");
        let (tx, rx) = sync_channel::<Job>(capacity);
        let rx = Arc::new(Mutex::new(rx));
        let queued = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (rx, queued) = (rx.clone(), queued.clone());
            handles.push(
                std::thread::Builder::new()
                    .name(format!("store-pool-{i}"))
                    .spawn(move || worker(&rx, &queued))?,
            );
        }
        Ok(StorePool {
            tx: Mutex::new(Some(tx)),
            threads: Mutex::new(handles),
            queued,
            capacity,
        })
    }

    /// Runs `f` on a pool thread and resolves to its result.
    ///
    /// # Errors
    /// [`BrokerError::Busy`] when the queue is full, [`BrokerError::Unavailable`] after shutdown.
    pub fn run<R: Send + 'static, F: FnOnce() -> R + Send + 'static>(
        &self,
        f: F,
    ) -> Result<impl Future<Output = Result<R, BrokerError>> + use<R, F>, BrokerError> {
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = done.send(f());
        });
        let guard = self
            .tx
            .lock()
            .map_err(|_| BrokerError::Internal("store pool lock poisoned".into()))?;
        let Some(tx) = guard.as_ref() else {
            return Err(BrokerError::Unavailable("the broker is shutting down".into()));
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        match tx.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                return Err(BrokerError::Busy(format!(
                    "[STORE_POOL_FULL] {} store jobs are already waiting; try again later",
                    self.capacity
                )));
            }
            Err(TrySendError::Disconnected(_)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                return Err(BrokerError::Unavailable("the broker is shutting down".into()));
            }
        }
        Ok(async move { result.await.map_err(|_| BrokerError::Internal("a store job failed".into())) })
    }

    /// Jobs queued or running.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Jobs that may wait in the queue at once (the broker's `storePoolQueueCapacity`).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Lets queued jobs finish and stops the threads.
    pub fn shutdown(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        let handles = self.threads.lock().map(|mut h| std::mem::take(&mut *h)).unwrap_or_default();
        for h in handles {
            let _ = h.join();
        }
    }
}

impl Drop for StorePool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn worker(rx: &Mutex<Receiver<Job>>, queued: &AtomicUsize) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        // A panicking job drops its result sender: the caller sees an internal error.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        queued.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn jobs_run_off_the_runtime_and_a_full_queue_is_busy() {
        let pool = StorePool::new(1, 2).unwrap();
        let here = std::thread::current().id();
        let there = pool.run(move || std::thread::current().id()).unwrap().await.unwrap();
        assert_ne!(here, there);

        let (release, hold) = std::sync::mpsc::channel::<()>();
        let hold = Arc::new(Mutex::new(hold));
        let blocker = {
            let hold = hold.clone();
            pool.run(move || hold.lock().unwrap().recv().unwrap()).unwrap()
        };
        while pool.queued() != 1 {
            tokio::task::yield_now().await;
        }
        std::thread::sleep(Duration::from_millis(20)); // the worker has taken the blocker
        let queued: Vec<_> = (0..2).map(|i| pool.run(move || i).unwrap()).collect();
        assert!(matches!(pool.run(|| 0), Err(BrokerError::Busy(_))), "the queue holds 2");
        release.send(()).unwrap();
        blocker.await.unwrap();
        for (i, q) in queued.into_iter().enumerate() {
            assert_eq!(q.await.unwrap(), i);
        }
        let panicked = pool.run(|| -> i32 { panic!("boom") }).unwrap().await;
        assert!(matches!(panicked, Err(BrokerError::Internal(_))));
        pool.shutdown();
        assert!(matches!(pool.run(|| 0), Err(BrokerError::Unavailable(_))));
    }
}
