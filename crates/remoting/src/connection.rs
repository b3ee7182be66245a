//! `Connection`: the handle to one remoting connection that other tasks hold — to push a command
//! to the peer, or to call the peer and wait for its answer by `opaque`.
//!
//! Owns: the queue of commands other tasks want written (bounded in bytes), the table of calls
//! awaiting an answer (bounded in count), and the closed flag. Must never: let a caller wait on a
//! closed connection (closing fails every waiter), or grow either queue past its bound.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use petrel_protocol::RemotingCommand;
use tokio::sync::{Notify, oneshot};

use crate::error::CallError;

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// What a queued command costs against the byte bound before it is encoded: its body plus a
/// typical header.
pub(crate) const HEADER_ESTIMATE_BYTES: usize = 256;
/// How long a connection that reached its strike cap lives on, so its last answer is written.
const CLOSE_AFTER_LAST_STRIKE: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Outbound {
    commands: VecDeque<RemotingCommand>,
    queued_bytes: usize,
}

/// One connection, as the tasks that did not create it see it.
pub struct Connection {
    id: u64,
    peer: SocketAddr,
    outbound: Mutex<Outbound>,
    /// Wakes the connection's task: something was queued, or it must close.
    pub(crate) wake: Notify,
    waiters: Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>,
    next_opaque: AtomicI32,
    closed: AtomicBool,
    max_queued_bytes: usize,
    max_in_flight: usize,
    /// Requests the handler refused as the peer's fault (failed authentications), for a cap.
    strikes: AtomicU64,
    /// Who the handler last verified this peer to be, and when (a cache of a check that is
    /// costly to repeat on every request).
    verified: Mutex<Option<(String, std::time::Instant)>>,
    /// Over TLS: keying material both ends derive from their session (RFC 5705), which a proof
    /// of a shared secret can bind to this very channel.
    channel_binding: std::sync::OnceLock<[u8; crate::tls::CHANNEL_BINDING_BYTES]>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .finish()
    }
}

impl Connection {
    pub(crate) fn new(peer: SocketAddr, max_queued_bytes: usize, max_in_flight: usize) -> Connection {
        assert!(max_queued_bytes > 0 && max_in_flight > 0, "a connection needs room for one command");
        Connection {
            id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
            peer,
            outbound: Mutex::new(Outbound::default()),
            wake: Notify::new(),
            waiters: Mutex::new(HashMap::new()),
            next_opaque: AtomicI32::new(1),
            closed: AtomicBool::new(false),
            max_queued_bytes,
            max_in_flight,
            strikes: AtomicU64::new(0),
            verified: Mutex::new(None),
            channel_binding: std::sync::OnceLock::new(),
        }
    }

    /// A connection attached to no socket, for in-process callers and tests: what is pushed to
    /// it waits in its queue ([`Connection::drain_pushed`]) instead of being written.
    #[must_use]
    pub fn detached(peer: SocketAddr) -> Arc<Connection> {
        Arc::new(Connection::new(peer, 1 << 20, 64))
    }

    /// Takes what was pushed to a [`Connection::detached`] (notifications, transaction checks).
    #[must_use]
    pub fn drain_pushed(&self) -> Vec<RemotingCommand> {
        let mut out = self.outbound.lock();
        out.queued_bytes = 0;
        out.commands.drain(..).collect()
    }

    /// The TLS session's channel binding; `None` on a plain connection.
    #[must_use]
    pub fn channel_binding(&self) -> Option<&[u8; crate::tls::CHANNEL_BINDING_BYTES]> {
        self.channel_binding.get()
    }

    pub(crate) fn set_channel_binding(&self, binding: [u8; crate::tls::CHANNEL_BINDING_BYTES]) {
        let _ = self.channel_binding.set(binding);
    }

    /// Unique within this process.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The address of the other end.
    #[must_use]
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Whether the connection is closed or asked to close; nothing more can be sent on it.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Queues a command for the peer without waiting; false if the connection is closed or its
    /// queue is at its byte bound (a notification is not worth blocking for).
    pub fn push(&self, command: RemotingCommand) -> bool {
        if self.is_closed() {
            return false;
        }
        let cost = command.body.len() + HEADER_ESTIMATE_BYTES;
        {
            let mut out = self.outbound.lock();
            if out.queued_bytes + cost > self.max_queued_bytes && !out.commands.is_empty() {
                return false;
            }
            out.queued_bytes += cost;
            out.commands.push_back(command);
        }
        self.wake.notify_one();
        true
    }

    /// Takes queued commands, oldest first, while `room` bytes allow (at least one if any).
    pub(crate) fn take_queued(&self, mut room: usize, into: &mut Vec<RemotingCommand>) {
        let mut out = self.outbound.lock();
        while let Some(front) = out.commands.front() {
            let cost = front.body.len() + HEADER_ESTIMATE_BYTES;
            if cost > room && !into.is_empty() {
                break;
            }
            room = room.saturating_sub(cost);
            out.queued_bytes -= cost;
            into.extend(out.commands.pop_front());
        }
        if out.commands.is_empty() && out.commands.capacity() > 64 {
            out.commands = VecDeque::new();
        }
    }

    /// Sends `request` and waits up to `timeout` for the answer with its opaque.
    ///
    /// # Errors
    /// [`CallError::Closed`] if the connection is or becomes closed, [`CallError::Busy`] if
    /// `max_in_flight` calls are already waiting, [`CallError::Timeout`] if no answer came.
    pub async fn call(&self, mut request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, CallError> {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.opaque = opaque;
        let (tx, rx) = oneshot::channel();
        {
            let mut waiters = self.waiters.lock();
            if waiters.len() >= self.max_in_flight {
                return Err(CallError::Busy(self.max_in_flight));
            }
            waiters.insert(opaque, tx);
        }
        // Checked after registering: `close` either saw the waiter or runs after this check.
        if self.is_closed() || !self.push(request) {
            self.waiters.lock().remove(&opaque);
            return Err(CallError::Closed(self.peer));
        }
        // A caller may drop this future before the answer or the timeout (openraft wraps its
        // calls in a timeout of its own): the guard then takes the waiter out, so that calls
        // given up on cannot fill `max_in_flight` while their answers never come.
        let mut waiter = WaiterGuard {
            conn: self,
            opaque: Some(opaque),
        };
        let answered = tokio::time::timeout(timeout, rx).await;
        match answered {
            Ok(Ok(answer)) => {
                // `complete` took the waiter out before answering it.
                waiter.opaque = None;
                Ok(answer)
            }
            Ok(Err(_)) => Err(CallError::Closed(self.peer)),
            Err(_) => Err(CallError::Timeout { peer: self.peer, timeout }),
        }
    }

    /// Sends `request` marked oneway; no answer comes.
    ///
    /// # Errors
    /// [`CallError::Closed`] if the connection is closed or its queue is full.
    pub fn oneway(&self, mut request: RemotingCommand) -> Result<(), CallError> {
        request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.mark_oneway();
        if self.push(request) {
            Ok(())
        } else {
            Err(CallError::Closed(self.peer))
        }
    }

    /// Hands an answer to the call waiting on its opaque (answers nobody waits for are dropped:
    /// the call timed out, or it answers a push).
    pub(crate) fn complete(&self, answer: RemotingCommand) {
        let waiter = self.waiters.lock().remove(&answer.opaque);
        if let Some(tx) = waiter {
            let _ = tx.send(answer);
        }
    }

    /// Marks the connection closed, fails every waiting call and drops queued commands.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let waiters = std::mem::take(&mut *self.waiters.lock());
        drop(waiters); // every receiver sees its sender dropped: CallError::Closed
        *self.outbound.lock() = Outbound::default();
        self.wake.notify_one();
    }

    /// Counts one request refused as the peer's fault; returns the count so far. At `max` the
    /// connection is closed a moment later (after the answer to that request is written), so a
    /// peer cannot keep guessing over one connection.
    pub fn add_strike(self: &Arc<Self>, max: u64) -> u64 {
        let strikes = self.strikes.fetch_add(1, Ordering::Relaxed) + 1;
        if strikes == max {
            let conn = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(CLOSE_AFTER_LAST_STRIKE).await;
                conn.shutdown();
            });
        }
        strikes
    }

    /// Records that the peer proved to be `who` just now.
    pub fn remember_verified(&self, who: &str) {
        *self.verified.lock() = Some((who.to_owned(), std::time::Instant::now()));
    }

    /// Whether the peer proved to be `who` less than `within` ago.
    #[must_use]
    pub fn verified_within(&self, who: &str, within: Duration) -> bool {
        self.verified
            .lock()
            .as_ref()
            .is_some_and(|(name, at)| name == who && at.elapsed() < within)
    }

    /// Asks the connection's task to close (the peer sees the socket close).
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Whether commands wait to be written.
    pub(crate) fn has_queued(&self) -> bool {
        !self.outbound.lock().commands.is_empty()
    }

    /// Calls waiting for an answer.
    #[must_use]
    pub fn calls_in_flight(&self) -> usize {
        self.waiters.lock().len()
    }
}

/// Takes a call's waiter out of its connection when the call ends without an answer.
struct WaiterGuard<'a> {
    conn: &'a Connection,
    opaque: Option<i32>,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        if let Some(opaque) = self.opaque {
            self.conn.waiters.lock().remove(&opaque);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn conn(max_queued_bytes: usize) -> Connection {
        Connection::new("127.0.0.1:1".parse().unwrap(), max_queued_bytes, 2)
    }

    #[test]
    fn pushes_stop_at_the_byte_bound_but_one_always_fits() {
        let c = conn(300);
        let big = RemotingCommand::request(40, 0).with_body(vec![0u8; 1000]);
        assert!(c.push(big.clone()), "an empty queue takes one command of any size");
        assert!(!c.push(RemotingCommand::request(40, 0)), "over the bound");
        let mut taken = Vec::new();
        c.take_queued(10, &mut taken);
        assert_eq!(taken.len(), 1);
        assert!(c.push(RemotingCommand::request(40, 0)), "room again once taken");
        c.close();
        assert!(!c.push(big), "a closed connection takes nothing");
    }

    #[tokio::test]
    async fn calls_are_bounded_and_closing_fails_the_waiters() {
        let c = Arc::new(conn(1 << 20));
        let (a, b) = (c.clone(), c.clone());
        let first = tokio::spawn(async move { a.call(RemotingCommand::request(1, 0), Duration::from_secs(30)).await });
        let second = tokio::spawn(async move { b.call(RemotingCommand::request(1, 0), Duration::from_secs(30)).await });
        while c.calls_in_flight() < 2 {
            tokio::task::yield_now().await;
        }
        let third = c.call(RemotingCommand::request(1, 0), Duration::from_secs(30)).await;
        assert!(matches!(third, Err(CallError::Busy(2))), "{third:?}");
        c.close();
        assert!(matches!(first.await.unwrap(), Err(CallError::Closed(_))));
        assert!(matches!(second.await.unwrap(), Err(CallError::Closed(_))));
    }

    #[tokio::test]
    async fn a_call_given_up_on_frees_its_place() {
        let c = conn(1 << 20);
        for _ in 0..5 {
            // The caller's own, shorter timeout drops the call before its answer or timeout.
            let given_up = tokio::time::timeout(
                Duration::from_millis(5),
                c.call(RemotingCommand::request(1, 0), Duration::from_secs(30)),
            )
            .await;
            assert!(given_up.is_err(), "no answer comes");
        }
        assert_eq!(c.calls_in_flight(), 0, "no waiter outlives its call");
        let answered = {
            let call = c.call(RemotingCommand::request(1, 0), Duration::from_secs(30));
            tokio::pin!(call);
            assert!(futures_poll_once(call.as_mut()).await.is_none(), "waiting");
            let mut queued = Vec::new();
            c.take_queued(usize::MAX, &mut queued);
            let request = queued.pop().expect("the request was queued");
            c.complete(RemotingCommand::response_to(&request, 0));
            call.await
        };
        assert!(answered.is_ok(), "{answered:?}");
        assert_eq!(c.calls_in_flight(), 0);
    }

    /// Polls `f` once: `Some` if it finished.
    async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
