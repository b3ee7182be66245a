//! The one framed read/write loop, for both sides: a server's accepted connections and a
//! client's outbound ones. One task per connection reads frames, hands requests to the handler
//! and answers to waiting calls, and writes whatever is queued (answers, pushes, calls) with one
//! system call per batch. A deferred answer that is not ready at once (a send waiting for the
//! flush or a replica, a suspended pull) is kept by the connection's own task, not spawned: what
//! it waits on wakes that one task, which encodes every answer that became ready and writes
//! them together — one wake-up and one write for a whole group commit's sends, where a task per
//! answer cost a spawn, a wake-up and a write each. What a deferred answer does after its wait
//! is small by contract (the work happens before it, on the caller's poll, or elsewhere).
//!
//! A server's connections report the unfinished input they hold to the server's
//! [`FrameBudget`], which closes the slowest of them when all of them together hold too much.
//!
//! Owns: the socket, the read buffer (only the unfinished frame) and the write buffer. Must never: read a new request while the connection is at its bound on
//! requests in flight or on queued bytes (the peer then feels TCP back-pressure instead of the
//! broker growing), keep buffers on an idle connection (an idle connection holds no buffer at
//! all, so tens of thousands of them cost little), or let a bad frame touch another connection.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use petrel_protocol::{RemotingCommand, encode_frame, split_frame};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncRead;
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::watch;
use tokio::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use crate::budget::FrameBudget;
use crate::connection::Connection;
use crate::handler::{Deferred, Handler, Reply};
use crate::limits::ConnectionLimits;

/// Bytes read per wake-up at most, so one busy peer cannot starve the others on its worker.
const MAX_READ_PER_WAKE_BYTES: usize = 256 * 1024;
/// Smallest read-buffer reservation.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Why a connection's loop ended.
#[derive(Debug)]
pub enum CloseReason {
    /// The peer closed and everything owed was written.
    PeerClosed,
    /// Nothing either way for the idle timeout.
    Idle,
    /// The peer sent bytes that are not a frame.
    BadFrame(String),
    /// The socket failed.
    Io(std::io::Error),
    /// The server drained the connection.
    Drained,
    /// `Connection::shutdown` was called.
    Shutdown,
}

struct State {
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// The socket may still give bytes.
    socket_readable: bool,
    /// New requests are still served (false once draining).
    accepting: bool,
    /// A complete frame may still be in `rbuf` (processing stopped at a bound).
    frames_waiting: bool,
    last_activity: Instant,
    drain_deadline: Option<Instant>,
    /// When the first byte of the oldest unfinished frame in `rbuf` arrived.
    front_since: Option<std::time::Instant>,
    /// The budget was told this connection holds bytes (so it must be told when it holds none).
    holding: bool,
    /// Deferred answers not ready yet: at most `max_in_flight` (no request is read beyond it).
    pending: FuturesUnordered<Deferred>,
}

fn encode(cmd: &RemotingCommand, wbuf: &mut BytesMut) {
    if let Err(e) = encode_frame(cmd, wbuf) {
        // Only a header over 16 MiB fails; the peer gets nothing rather than a torn frame.
        tracing::error!(code = cmd.code, error = %e, "cannot encode a command; dropped");
    }
}

/// A byte stream the loop can serve: a TCP socket, or its end of the socket pair a TLS bridge
/// holds the other end of. The loop needs non-blocking writes and readiness either way.
pub(crate) trait Socket: AsyncRead + Unpin + Send + 'static {
    fn try_write(&self, buf: &[u8]) -> std::io::Result<usize>;
    fn readable(&self) -> impl Future<Output = std::io::Result<()>> + Send + '_;
    fn writable(&self) -> impl Future<Output = std::io::Result<()>> + Send + '_;
}

macro_rules! socket {
    ($t:ty) => {
        impl Socket for $t {
            fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
                <$t>::try_write(self, buf)
            }
            fn readable(&self) -> impl Future<Output = std::io::Result<()>> + Send + '_ {
                <$t>::readable(self)
            }
            fn writable(&self) -> impl Future<Output = std::io::Result<()>> + Send + '_ {
                <$t>::writable(self)
            }
        }
    };
}
socket!(TcpStream);
socket!(UnixStream);

/// Writes what the socket takes now; releases the buffer once it is empty.
fn write_now<S: Socket>(stream: &S, wbuf: &mut BytesMut) -> std::io::Result<usize> {
    let mut written = 0;
    while !wbuf.is_empty() {
        match stream.try_write(wbuf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                wbuf.advance(n);
                written += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    if wbuf.is_empty() && wbuf.capacity() > 0 {
        *wbuf = BytesMut::new();
    }
    Ok(written)
}

enum ReadOutcome {
    Data,
    Nothing,
    Eof,
}

/// Reads what the socket has now, up to [`MAX_READ_PER_WAKE_BYTES`]. Goes through tokio's
/// `poll_read`, which takes a read that did not fill the buffer as proof that the socket is
/// drained (epoll is edge-triggered): no second `recv` that only returns EAGAIN — that probe
/// was one system call in three on the send path.
fn read_now<S: Socket>(stream: &mut S, rbuf: &mut BytesMut) -> std::io::Result<ReadOutcome> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut got = 0;
    while got < MAX_READ_PER_WAKE_BYTES {
        if rbuf.capacity() - rbuf.len() < READ_CHUNK_BYTES / 4 {
            rbuf.reserve(READ_CHUNK_BYTES);
        }
        let spare = rbuf.capacity() - rbuf.len();
        // A noop waker: the loop registers its real one in `stream.readable()` next time round.
        match tokio_util::io::poll_read_buf(Pin::new(&mut *stream), &mut cx, rbuf) {
            Poll::Ready(Ok(0)) => return Ok(ReadOutcome::Eof),
            Poll::Ready(Ok(n)) => {
                got += n;
                if n < spare {
                    break;
                }
            }
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => break,
        }
    }
    Ok(if got > 0 { ReadOutcome::Data } else { ReadOutcome::Nothing })
}

/// Resolves when the server starts draining; never without a drain signal.
async fn drain_started(drain: &mut Option<watch::Receiver<bool>>) {
    let Some(rx) = drain else {
        return std::future::pending().await;
    };
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Encodes every deferred answer that is ready into `wbuf`; returns how many were. Registers
/// `cx`'s waker with the set, so that the next one to become ready wakes this task.
fn answer_ready(pending: &mut FuturesUnordered<Deferred>, wbuf: &mut BytesMut, cx: &mut Context<'_>) -> usize {
    let mut ready = 0;
    // Bounded: the set holds at most `max_in_flight` futures, and each leaves it once.
    while let Poll::Ready(Some(answer)) = pending.poll_next_unpin(cx) {
        ready += 1;
        if let Some(answer) = answer {
            encode(&answer, wbuf);
        }
    }
    ready
}

/// Ready once at least one deferred answer was encoded.
fn answered(pending: &mut FuturesUnordered<Deferred>, wbuf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<()> {
    if answer_ready(pending, wbuf, cx) > 0 {
        Poll::Ready(())
    } else {
        Poll::Pending
    }
}

impl State {
    fn room(&self, limits: &ConnectionLimits) -> bool {
        self.wbuf.len() < limits.max_queued_bytes
    }

    /// Hands buffered frames to the handler (requests) or to waiting calls (answers) while the
    /// bounds allow; a bad frame ends the connection.
    fn process_frames(&mut self, conn: &Arc<Connection>, handler: &dyn Handler, limits: &ConnectionLimits) -> Result<(), CloseReason> {
        self.frames_waiting = false;
        if !self.accepting {
            self.rbuf.clear();
            return Ok(());
        }
        loop {
            if !self.room(limits) || self.pending.len() >= limits.max_in_flight {
                self.frames_waiting = !self.rbuf.is_empty();
                return Ok(());
            }
            let raw = match split_frame(&mut self.rbuf, limits.max_frame_bytes) {
                Ok(Some(raw)) => raw,
                Ok(None) => return Ok(()),
                Err(e) => return Err(CloseReason::BadFrame(e.to_string())),
            };
            // The frame that is now at the front began arriving with the bytes after this one.
            self.front_since = None;
            let command = raw.into_command().map_err(|e| CloseReason::BadFrame(e.to_string()))?;
            if command.is_response() {
                conn.complete(command);
                continue;
            }
            match handler.handle(conn, command) {
                Reply::None => {}
                Reply::Now(answer) => encode(&answer, &mut self.wbuf),
                Reply::Later(mut deferred) => {
                    // Most deferred answers are ready at once (an ASYNC_FLUSH send whose own
                    // thread wrote it): answer those here and keep only the ones that wait. The
                    // set polls a future it is given again, with this task's waker, before the
                    // loop sleeps.
                    match deferred.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                        Poll::Ready(Some(answer)) => encode(&answer, &mut self.wbuf),
                        Poll::Ready(None) => {}
                        Poll::Pending => self.pending.push(deferred),
                    }
                }
            }
        }
    }

    /// Tells the budget what unfinished input this connection holds; a connection whose frames
    /// arrive whole never takes the budget's lock.
    fn report_held(&mut self, conn: &Arc<Connection>, budget: Option<&FrameBudget>) {
        let Some(budget) = budget else { return };
        if self.rbuf.is_empty() {
            self.front_since = None;
            if std::mem::take(&mut self.holding) {
                budget.hold(conn, 0, std::time::Instant::now());
            }
            return;
        }
        let since = *self.front_since.get_or_insert_with(std::time::Instant::now);
        // What the buffer holds in memory, reserved room included, not only the bytes in it.
        budget.hold(conn, self.rbuf.capacity().max(self.rbuf.len()), since);
        self.holding = true;
    }

    fn take_queued(&mut self, conn: &Connection, limits: &ConnectionLimits) {
        if !self.room(limits) {
            return;
        }
        let mut batch = Vec::new();
        conn.take_queued(limits.max_queued_bytes - self.wbuf.len(), &mut batch);
        for cmd in &batch {
            encode(cmd, &mut self.wbuf);
        }
    }

    fn finished(&self, conn: &Connection) -> bool {
        (!self.socket_readable || !self.accepting)
            && !self.frames_waiting
            && self.pending.is_empty()
            && self.wbuf.is_empty()
            && !conn.has_queued()
    }

    /// When the loop ends: the budget hears that this connection holds nothing, and answers
    /// still owed are finished on a task, not dropped — a request may have several steps (a
    /// transaction's decision, its append, its op record) that must not stop halfway because the
    /// connection broke. Their answers have nowhere to go.
    fn release(&mut self, conn: &Arc<Connection>, budget: Option<&FrameBudget>) {
        if self.holding
            && let Some(budget) = budget
        {
            budget.hold(conn, 0, std::time::Instant::now());
        }
        let owed = std::mem::take(&mut self.pending);
        if !owed.is_empty() {
            tokio::spawn(owed.for_each(|_| async {}));
        }
    }

    /// Whether nothing has moved for the idle timeout and nothing is owed either way.
    fn idle(&self, conn: &Connection, idle_timeout: Duration) -> bool {
        self.pending.is_empty() && conn.calls_in_flight() == 0 && self.last_activity.elapsed() >= idle_timeout
    }
}

/// Serves one connection until it closes; then fails its waiting calls and tells the handler.
/// A server's connections hold their unfinished frames within `budget`.
pub(crate) async fn run<S: Socket>(
    mut stream: S,
    conn: Arc<Connection>,
    handler: Arc<dyn Handler>,
    limits: ConnectionLimits,
    mut drain: Option<watch::Receiver<bool>>,
    budget: Option<Arc<FrameBudget>>,
) -> CloseReason {
    let mut st = State {
        rbuf: BytesMut::new(),
        wbuf: BytesMut::new(),
        socket_readable: true,
        accepting: true,
        frames_waiting: false,
        last_activity: Instant::now(),
        drain_deadline: None,
        front_since: None,
        holding: false,
        pending: FuturesUnordered::new(),
    };
    let idle = tokio::time::sleep(limits.idle_timeout);
    tokio::pin!(idle);
    let mut yielded = false;
    let reason = loop {
        if conn.is_closed() {
            break CloseReason::Shutdown;
        }
        std::future::poll_fn(|cx| {
            answer_ready(&mut st.pending, &mut st.wbuf, cx);
            Poll::Ready(())
        })
        .await;
        st.take_queued(&conn, &limits);
        if let Err(reason) = st.process_frames(&conn, handler.as_ref(), &limits) {
            break reason;
        }
        st.report_held(&conn, budget.as_deref());
        if st.rbuf.is_empty() && st.rbuf.capacity() > 0 {
            st.rbuf = BytesMut::new();
        }
        // Answers still being worked out usually finish within microseconds: give them one
        // turn of the scheduler and write them with these — one system call for several.
        if !yielded && !st.wbuf.is_empty() && !st.pending.is_empty() && st.room(&limits) {
            yielded = true;
            tokio::task::yield_now().await;
            continue;
        }
        yielded = false;
        match write_now(&stream, &mut st.wbuf) {
            Ok(0) => {}
            Ok(_) => st.last_activity = Instant::now(),
            Err(e) => break CloseReason::Io(e),
        }
        if st.finished(&conn) {
            break if st.accepting {
                CloseReason::PeerClosed
            } else {
                CloseReason::Drained
            };
        }
        let room = st.room(&limits);
        let can_read = st.socket_readable && st.accepting && !st.frames_waiting && room && st.pending.len() < limits.max_in_flight;
        tokio::select! {
            biased;
            ready = stream.writable(), if !st.wbuf.is_empty() => {
                if let Err(e) = ready {
                    break CloseReason::Io(e);
                }
            }
            ready = stream.readable(), if can_read => {
                if let Err(e) = ready {
                    break CloseReason::Io(e);
                }
                match read_now(&mut stream, &mut st.rbuf) {
                    Ok(ReadOutcome::Data) => st.last_activity = Instant::now(),
                    Ok(ReadOutcome::Nothing) => {}
                    Ok(ReadOutcome::Eof) => st.socket_readable = false,
                    Err(e) => break CloseReason::Io(e),
                }
            }
            () = conn.wake.notified() => {}
            () = std::future::poll_fn(|cx| answered(&mut st.pending, &mut st.wbuf, cx)), if !st.pending.is_empty() => {}
            () = &mut idle => {
                if st.idle(&conn, limits.idle_timeout) {
                    break CloseReason::Idle;
                }
                let from = if st.pending.is_empty() { st.last_activity } else { Instant::now() };
                idle.as_mut().reset(from + limits.idle_timeout);
            }
            () = drain_started(&mut drain), if st.accepting => {
                st.accepting = false;
                st.drain_deadline = Some(Instant::now() + limits.drain_timeout);
                drain = None;
            }
            () = sleep_until_some(st.drain_deadline) => break CloseReason::Drained,
        }
    };
    st.release(&conn, budget.as_deref());
    conn.close();
    handler.on_close(&conn);
    reason
}
