//! Small JSON files under `<store root>/config/`, written whole and atomically, and the
//! coalescing worker that writes them off the async runtime and off every table lock.
//!
//! Owns: the write-temp, fsync, rename, fsync-directory sequence, and [`Coalesced`]: many
//! changes, one write. Must never: leave a torn file where the old one was (a crash mid-write
//! keeps the previous version), or write on a runtime worker or while holding the table's lock
//! (the table is snapshotted under its lock, serialized and written after).

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::BrokerError;
use tokio::sync::{Notify, watch};

/// Pause before retrying a job that failed (a full disk, say).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Replaces `path` with `contents` so that a crash leaves either the old or the new file.
///
/// # Errors
/// Any step of the sequence failing.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    petrel_kit::fs::write_atomically(path, contents, petrel_kit::fs::Mode::Default)
}

pub use petrel_kit::fs::read_if_exists;

/// What a [`Coalesced`] worker runs: an async job (a registration) or a blocking one wrapped
/// by [`blocking`] (a file write).
pub type Job = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), BrokerError>> + Send>> + Send + Sync>;

/// Wraps a blocking job so that it runs on the blocking pool, never on a runtime worker.
pub fn blocking(f: Arc<dyn Fn() -> Result<(), BrokerError> + Send + Sync>) -> Job {
    Arc::new(move || {
        let f = f.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || f())
                .await
                .unwrap_or_else(|e| Err(BrokerError::Internal(format!("the writer panicked: {e}"))))
        })
    })
}

/// Why a waiter's run did not write: the run's own error, shared by every waiter it covered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteFailed {
    #[error("{0}")]
    Failed(#[source] Arc<BrokerError>),
    #[error("the writer stopped")]
    Stopped,
}

#[derive(Clone, Default)]
struct Done {
    generation: u64,
    error: Option<Arc<BrokerError>>,
}

/// A job many callers ask for and one worker does for all of them: every request gets a
/// generation; each run serves every generation asked before it started; a waiter resolves
/// once a run that covers its generation finished.
pub struct Coalesced {
    name: &'static str,
    requested: AtomicU64,
    done: watch::Sender<Done>,
    wake: Notify,
}

impl Coalesced {
    #[must_use]
    pub fn new(name: &'static str) -> Arc<Coalesced> {
        Arc::new(Coalesced {
            name,
            requested: AtomicU64::new(0),
            done: watch::channel(Done::default()).0,
            wake: Notify::new(),
        })
    }

    /// Asks for a run; returns the generation to wait for.
    pub fn request(&self) -> u64 {
        let generation = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake.notify_one();
        generation
    }

    /// Resolves once a run covering `generation` finished.
    ///
    /// # Errors
    /// That run failed; the remark says why (the worker retries on its own).
    pub async fn wait(&self, generation: u64) -> Result<(), WriteFailed> {
        let mut rx = self.done.subscribe();
        loop {
            let done = rx.borrow_and_update().clone();
            if done.generation >= generation {
                return done.error.map_or(Ok(()), |e| Err(WriteFailed::Failed(e)));
            }
            if rx.changed().await.is_err() {
                return Err(WriteFailed::Stopped);
            }
        }
    }

    /// Whether requests wait for a run.
    #[must_use]
    pub fn pending(&self) -> bool {
        self.requested.load(Ordering::Acquire) > self.done.borrow().generation
    }

    /// The worker: runs `job` whenever generations are pending, until the task is dropped.
    pub async fn run(self: Arc<Self>, job: Job) {
        let mut retry = false;
        loop {
            let target = self.requested.load(Ordering::Acquire);
            if target <= self.done.borrow().generation && !retry {
                self.wake.notified().await;
                continue;
            }
            let result = job().await;
            retry = result.is_err();
            let error = result.err().map(|e| {
                tracing::error!(file = self.name, error = %e, "cannot write; retrying");
                Arc::new(e)
            });
            // Read before sending: a `borrow` guard held across `send_replace` deadlocks.
            let generation = target.max(self.done.borrow().generation);
            self.done.send_replace(Done { generation, error });
            if retry {
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test]
    async fn many_requests_share_runs_and_waiters_see_their_generation_done() {
        let c = Coalesced::new("test");
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let worker = tokio::spawn(c.clone().run(blocking(Arc::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            Ok(())
        }))));
        let generations: Vec<u64> = (0..50).map(|_| c.request()).collect();
        for g in &generations {
            c.wait(*g).await.unwrap();
        }
        assert!(!c.pending());
        assert!(
            runs.load(Ordering::SeqCst) <= 3,
            "50 requests, {} runs",
            runs.load(Ordering::SeqCst)
        );
        worker.abort();
    }

    #[tokio::test]
    async fn a_failed_run_reports_to_its_waiters_and_is_retried() {
        let c = Coalesced::new("test");
        let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let failing = fail.clone();
        let worker = tokio::spawn(c.clone().run(blocking(Arc::new(move || {
            if failing.load(Ordering::SeqCst) {
                Err(BrokerError::Unavailable("disk full".into()))
            } else {
                Ok(())
            }
        }))));
        let g = c.request();
        assert_eq!(c.wait(g).await.unwrap_err().to_string(), "disk full");
        fail.store(false, Ordering::SeqCst);
        let g = c.request();
        tokio::time::timeout(Duration::from_secs(10), c.wait(g)).await.unwrap().unwrap();
        worker.abort();
    }
}
