//! The HA connection's byte stream: a TCP socket, or, over TLS, this process's end of a socket
//! pair whose other end a bridge joins to the TLS session. The HA code reads and writes either
//! the same way, from the two threads each connection has.
//!
//! The bridge (two threads per connection, as the HA code's own) shares the rustls session
//! under a lock and blocks on sockets, never on the lock: one thread takes the peer's records
//! in, decrypts them and hands the plaintext on; the other takes plaintext, encrypts it and
//! sends the records. Either side closing ends both.
//!
//! Owns: the TLS session of an HA connection and its channel binding. Must never: hold the
//! session's lock while waiting for a socket to be readable, or keep running once either end
//! is closed.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Bytes read from a socket at a time by the bridge.
const BRIDGE_CHUNK_BYTES: usize = 64 * 1024;
/// Longest a bridge's write to the peer may block.
const BRIDGE_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of a session's channel binding.
pub const CHANNEL_BINDING_BYTES: usize = 32;
/// The RFC 5705 exporter label of the binding (the same as Petrel's remoting connections').
const CHANNEL_BINDING_LABEL: &[u8] = b"EXPORTER-petrel-channel-binding";

/// An HA connection's stream.
pub(crate) enum HaStream {
    Tcp(TcpStream),
    /// Over TLS: the plaintext end of the bridge, the peer's address, and the socket under the
    /// session (shut down with the stream, so a bridge blocked on a dead peer ends too).
    Tls(UnixStream, SocketAddr, Arc<TcpStream>),
}

impl HaStream {
    pub(crate) fn try_clone(&self) -> std::io::Result<HaStream> {
        Ok(match self {
            HaStream::Tcp(s) => HaStream::Tcp(s.try_clone()?),
            HaStream::Tls(s, peer, tcp) => HaStream::Tls(s.try_clone()?, *peer, tcp.clone()),
        })
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            HaStream::Tcp(s) => s.set_read_timeout(t),
            HaStream::Tls(s, ..) => s.set_read_timeout(t),
        }
    }

    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            HaStream::Tcp(s) => s.set_write_timeout(t),
            HaStream::Tls(s, ..) => s.set_write_timeout(t),
        }
    }

    pub(crate) fn shutdown(&self) {
        match self {
            HaStream::Tcp(s) => {
                let _ = s.shutdown(Shutdown::Both);
            }
            HaStream::Tls(s, _, tcp) => {
                let _ = s.shutdown(Shutdown::Both);
                let _ = tcp.shutdown(Shutdown::Both);
            }
        }
    }

    /// Writes what the socket takes now without waiting (`MSG_DONTWAIT`, for a caller that must
    /// not block: the append path). Returns the bytes taken, 0 when the socket's buffer is full.
    pub(crate) fn send_now(&self, buf: &[u8]) -> std::io::Result<usize> {
        use nix::sys::socket::{MsgFlags, send};
        use std::os::fd::AsRawFd;
        let fd = match self {
            HaStream::Tcp(s) => s.as_raw_fd(),
            HaStream::Tls(s, ..) => s.as_raw_fd(),
        };
        match send(fd, buf, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL) {
            Ok(n) => Ok(n),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => Ok(0),
            Err(e) => Err(std::io::Error::from(e)),
        }
    }

    /// Writes all of `buf` within `timeout`, whether the socket is blocking or not (the master's
    /// reader makes it non-blocking): what the socket takes now, then a wait until it takes more.
    pub(crate) fn write_all_within(&self, buf: &[u8], timeout: Duration) -> std::io::Result<()> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let deadline = std::time::Instant::now() + timeout;
        let mut at = 0;
        // Bounded: each turn writes something or waits, and the waits end at the deadline.
        while at < buf.len() {
            let n = self.send_now(&buf[at..])?;
            at += n;
            if n > 0 || at == buf.len() {
                continue;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the peer took no bytes for {timeout:?}"),
                ));
            }
            let fd = match self {
                HaStream::Tcp(s) => s.as_fd(),
                HaStream::Tls(s, ..) => s.as_fd(),
            };
            let wait = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
            match poll(&mut [PollFd::new(fd, PollFlags::POLLOUT)], wait) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(std::io::Error::from(e)),
            }
        }
        Ok(())
    }

    pub(crate) fn peer_addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            HaStream::Tcp(s) => s.peer_addr(),
            HaStream::Tls(_, peer, _) => Ok(*peer),
        }
    }
}

impl Read for HaStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            HaStream::Tcp(s) => s.read(buf),
            HaStream::Tls(s, ..) => s.read(buf),
        }
    }
}

impl Write for HaStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            HaStream::Tcp(s) => s.write(buf),
            HaStream::Tls(s, ..) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            HaStream::Tcp(s) => s.flush(),
            HaStream::Tls(s, ..) => s.flush(),
        }
    }
}

/// The reading half of an HA connection on the async runtime (the master's reports): a report
/// wakes the runtime's worker that answers the sends it releases, not a thread that then has
/// to wake one.
pub(crate) enum AsyncReader {
    Tcp(tokio::net::TcpStream),
    Tls(tokio::net::UnixStream),
}

impl AsyncReader {
    /// Takes a clone of the stream onto the runtime of the calling task. The socket becomes
    /// non-blocking for every clone: the writers use [`HaStream::send_now`] and
    /// [`HaStream::write_all_within`], which do not depend on it.
    pub(crate) fn new(stream: HaStream) -> std::io::Result<AsyncReader> {
        Ok(match stream {
            HaStream::Tcp(s) => {
                s.set_nonblocking(true)?;
                AsyncReader::Tcp(tokio::net::TcpStream::from_std(s)?)
            }
            HaStream::Tls(s, ..) => {
                s.set_nonblocking(true)?;
                AsyncReader::Tls(tokio::net::UnixStream::from_std(s)?)
            }
        })
    }

    /// Fills `buf`, or fails (end of stream included) or times out after `timeout`.
    pub(crate) async fn read_exact_within(&mut self, buf: &mut [u8], timeout: Duration) -> std::io::Result<()> {
        use tokio::io::AsyncReadExt;
        let read = async {
            match self {
                AsyncReader::Tcp(s) => s.read_exact(buf).await,
                AsyncReader::Tls(s) => s.read_exact(buf).await,
            }
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(r) => r.map(|_| ()),
            Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no bytes within the timeout")),
        }
    }
}

/// Finishes the TLS handshake of `conn` over `tcp` (the caller bounds it: see [`Deadline`]),
/// then bridges the session to a socket pair; returns the plaintext end and the session's
/// channel binding.
///
/// # Errors
/// The handshake fails, or a socket or thread cannot be made.
pub(crate) fn tls_bridge(
    tcp: TcpStream,
    conn: impl Into<rustls::Connection>,
    bound: Duration,
) -> std::io::Result<(HaStream, [u8; CHANNEL_BINDING_BYTES])> {
    let mut conn: rustls::Connection = conn.into();
    let peer = tcp.peer_addr()?;
    tcp.set_read_timeout(Some(bound))?;
    tcp.set_write_timeout(Some(bound))?;
    let mut sock = &tcp;
    // Bounded: each turn moves the handshake on or fails (the caller's deadline shuts the
    // socket down past its time).
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)?;
    }
    let binding = match &conn {
        rustls::Connection::Client(c) => c.export_keying_material([0u8; CHANNEL_BINDING_BYTES], CHANNEL_BINDING_LABEL, None),
        rustls::Connection::Server(s) => s.export_keying_material([0u8; CHANNEL_BINDING_BYTES], CHANNEL_BINDING_LABEL, None),
    }
    .map_err(std::io::Error::other)?;
    tcp.set_read_timeout(None)?;
    tcp.set_write_timeout(None)?;
    let (ours, theirs) = UnixStream::pair()?;
    let tcp_in = tcp.try_clone()?;
    let tcp_shut = Arc::new(tcp.try_clone()?);
    // A peer that stops reading must not hold the sending thread past the time a slave or
    // master would give up on it anyway.
    tcp.set_write_timeout(Some(BRIDGE_WRITE_TIMEOUT))?;
    let bridge = Arc::new(Bridge {
        session: Mutex::new(conn),
        out: Mutex::new(tcp),
    });
    let (plain_out, plain_in) = (theirs.try_clone()?, theirs);
    let b = bridge.clone();
    std::thread::Builder::new()
        .name("ha-tls-in".into())
        .spawn(move || records_in(&b, tcp_in, plain_out))?;
    std::thread::Builder::new()
        .name("ha-tls-out".into())
        .spawn(move || records_out(&bridge, plain_in))?;
    Ok((HaStream::Tls(ours, peer, tcp_shut), binding))
}

/// The session, and the socket its records are written to. Lock order: `session`, then `out`;
/// `session` is released before a write blocks, and `out` taken first keeps records in the
/// order the session made them.
struct Bridge {
    session: Mutex<rustls::Connection>,
    out: Mutex<TcpStream>,
}

impl Bridge {
    /// Sends what the session owes the peer, in order, without holding the session while the
    /// socket blocks. Consumes the session's guard.
    fn flush(&self, mut conn: parking_lot::MutexGuard<'_, rustls::Connection>) -> bool {
        if !conn.wants_write() {
            return true;
        }
        let mut records = Vec::new();
        // Bounded: each call moves the session's queued records into `records`.
        while conn.wants_write() {
            if conn.write_tls(&mut records).is_err() {
                return false;
            }
        }
        let mut out = self.out.lock();
        drop(conn);
        out.write_all(&records).is_ok()
    }
}

/// The peer's records in, plaintext out to this process's end, until either side closes.
fn records_in(bridge: &Bridge, mut tcp: TcpStream, mut plain: UnixStream) {
    let mut buf = vec![0u8; BRIDGE_CHUNK_BYTES];
    let mut clear = Vec::with_capacity(BRIDGE_CHUNK_BYTES);
    'read: loop {
        let n = match tcp.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut records = &buf[..n];
        // Bounded by the bytes read: each turn takes some of them, or ends the bridge. The
        // session takes a few KiB at a time and holds at most 16 KiB of plaintext, so what it
        // decrypted is handed on each turn, not once at the end.
        while !records.is_empty() {
            clear.clear();
            let mut conn = bridge.session.lock();
            let taken = conn.read_tls(&mut records);
            let processed = conn.process_new_packets();
            let _ = conn.reader().read_to_end(&mut clear);
            // After the peer's close_notify the session takes nothing more: stop, not spin.
            let closed = matches!(taken, Ok(0)) || processed.as_ref().is_ok_and(|s| s.peer_has_closed());
            let ok = taken.is_ok() && processed.is_ok();
            // Alerts and key updates the session owes the peer (rare: nothing waits here otherwise).
            if !bridge.flush(conn) || (!clear.is_empty() && plain.write_all(&clear).is_err()) || !ok || closed {
                break 'read;
            }
        }
    }
    let _ = plain.shutdown(Shutdown::Both);
    let _ = tcp.shutdown(Shutdown::Both);
}

/// This process's plaintext in, records out to the peer, until either side closes.
fn records_out(bridge: &Bridge, mut plain: UnixStream) {
    let mut buf = vec![0u8; BRIDGE_CHUNK_BYTES];
    loop {
        let n = match plain.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut conn = bridge.session.lock();
        if conn.writer().write_all(&buf[..n]).is_err() || !bridge.flush(conn) {
            break;
        }
    }
    let mut conn = bridge.session.lock();
    conn.send_close_notify();
    let _ = bridge.flush(conn);
    let _ = bridge.out.lock().shutdown(Shutdown::Both);
    let _ = plain.shutdown(Shutdown::Both);
}

/// A time by which a peer's handshake must be done, whatever pace it sends at: past it, a
/// watchdog shuts the socket down, which ends any read or write blocked on it. Dropping the
/// deadline (the handshake ended) stops the watchdog.
pub(crate) struct Deadline {
    done: Arc<(Mutex<bool>, parking_lot::Condvar)>,
}

impl Deadline {
    /// Starts the watchdog for `tcp`, `within` from now.
    ///
    /// # Errors
    /// The socket cannot be cloned or the thread cannot start.
    pub(crate) fn start(tcp: &TcpStream, within: Duration) -> std::io::Result<Deadline> {
        let done = Arc::new((Mutex::new(false), parking_lot::Condvar::new()));
        let (d, sock) = (done.clone(), tcp.try_clone()?);
        std::thread::Builder::new().name("ha-deadline".into()).spawn(move || {
            let (lock, cv) = &*d;
            let mut finished = lock.lock();
            let until = std::time::Instant::now() + within;
            // Bounded by `within`: wakes at the deadline or when the handshake ends.
            while !*finished {
                if cv.wait_until(&mut finished, until).timed_out() {
                    if !*finished {
                        let _ = sock.shutdown(Shutdown::Both);
                    }
                    return;
                }
            }
        })?;
        Ok(Deadline { done })
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        let (lock, cv) = &*self.done;
        *lock.lock() = true;
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that sends one byte at a time, each just within the read timeout, still cannot hold
    /// a handshake past its deadline.
    #[test]
    fn a_deadline_ends_a_slow_handshake() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let started = std::time::Instant::now();
        let deadline = Deadline::start(&s, Duration::from_millis(300)).expect("deadline");
        let trickle = std::thread::spawn(move || {
            for _ in 0..20 {
                if c.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut buf = [0u8; 64];
        let mut sock = &s;
        assert!(sock.read_exact(&mut buf).is_err(), "the read ends at the deadline");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        drop(deadline);
        let _ = trickle.join();
    }
}
