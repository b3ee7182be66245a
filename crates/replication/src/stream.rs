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
/// Bytes of a session's channel binding.
pub const CHANNEL_BINDING_BYTES: usize = 32;
/// The RFC 5705 exporter label of the binding (the same as Petrel's remoting connections').
const CHANNEL_BINDING_LABEL: &[u8] = b"EXPORTER-petrel-channel-binding";

/// An HA connection's stream.
pub(crate) enum HaStream {
    Tcp(TcpStream),
    /// Over TLS: the plaintext end of the bridge, and the peer's address.
    Tls(UnixStream, SocketAddr),
}

impl HaStream {
    pub(crate) fn try_clone(&self) -> std::io::Result<HaStream> {
        Ok(match self {
            HaStream::Tcp(s) => HaStream::Tcp(s.try_clone()?),
            HaStream::Tls(s, peer) => HaStream::Tls(s.try_clone()?, *peer),
        })
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            HaStream::Tcp(s) => s.set_read_timeout(t),
            HaStream::Tls(s, _) => s.set_read_timeout(t),
        }
    }

    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            HaStream::Tcp(s) => s.set_write_timeout(t),
            HaStream::Tls(s, _) => s.set_write_timeout(t),
        }
    }

    pub(crate) fn shutdown(&self) {
        let _ = match self {
            HaStream::Tcp(s) => s.shutdown(Shutdown::Both),
            HaStream::Tls(s, _) => s.shutdown(Shutdown::Both),
        };
    }

    pub(crate) fn peer_addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            HaStream::Tcp(s) => s.peer_addr(),
            HaStream::Tls(_, peer) => Ok(*peer),
        }
    }
}

impl Read for HaStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            HaStream::Tcp(s) => s.read(buf),
            HaStream::Tls(s, _) => s.read(buf),
        }
    }
}

impl Write for HaStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            HaStream::Tcp(s) => s.write(buf),
            HaStream::Tls(s, _) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            HaStream::Tcp(s) => s.flush(),
            HaStream::Tls(s, _) => s.flush(),
        }
    }
}

/// Finishes the TLS handshake of `conn` over `tcp` (within `bound`), then bridges the session
/// to a socket pair; returns the plaintext end and the session's channel binding.
///
/// # Errors
/// The handshake fails or times out, or a socket or thread cannot be made.
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
    // Bounded: each turn moves the handshake on or fails by the socket's timeouts.
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
    Ok((HaStream::Tls(ours, peer), binding))
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
    loop {
        let n = match tcp.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        clear.clear();
        let mut conn = bridge.session.lock();
        let mut records = &buf[..n];
        let mut ok = true;
        // Bounded by the bytes read: each call takes some of them.
        while !records.is_empty() && ok {
            ok = conn.read_tls(&mut records).is_ok() && conn.process_new_packets().is_ok();
        }
        let _ = conn.reader().read_to_end(&mut clear);
        // Alerts and key updates the session owes the peer (rare: nothing waits here otherwise).
        if !ok || !bridge.flush(conn) || plain.write_all(&clear).is_err() {
            break;
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
