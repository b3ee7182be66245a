//! The slave's HA client: connects to the master's HA port, reports the end of its commit log,
//! appends every frame the master sends at the master's offset, and reports again — after each
//! frame that grew the log, and every `haSendHeartbeatInterval` as a heartbeat.
//!
//! The master's address comes from `haMasterAddress`, else from the name server's answer to
//! the slave's registration; when it changes, the client reconnects. A frame that does not
//! continue the slave's log (RocketMQ checks the same) closes the connection: the slave
//! reconnects and reports its end again, so nothing is skipped or written twice.
//!
//! Owns: the connection to the master and the slave's reports. Must never: append a byte at an
//! offset other than its log's end, report an offset it has not written, or buffer more than
//! one frame.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use parking_lot::{Mutex, RwLock};
use petrel_store::{EpochEntry, EpochFile, MessageStore, StoreError, Watermark};

use crate::error::{ReplicationError, Step};
use crate::stream::HaStream;
use crate::wire::autoswitch::{MasterHeader, SlaveMessage, decode_epochs};
use crate::wire::{FRAME_HEADER_BYTES, FrameHeader, encode_report};

/// Controller mode's extras on the slave side (RocketMQ's AutoSwitch protocol).
#[derive(Clone)]
pub struct AutoSwitchSlave {
    /// This broker's id in its set, named in the handshake.
    pub broker_id: u64,
    /// This broker's epoch file: cut to agree with the master's, then appended as frames name new epochs.
    pub epochs: Arc<EpochFile>,
    /// Advanced to the master's confirm offset (never past this log's end).
    pub confirmed: Arc<Watermark>,
    /// Never join the SyncStateSet (`isAsyncLearner`).
    pub async_learner: bool,
    /// An empty replica starts at the master's newest segment (`syncFromLastFile`).
    pub sync_from_last_file: bool,
}

impl std::fmt::Debug for AutoSwitchSlave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoSwitchSlave")
            .field("broker_id", &self.broker_id)
            .finish_non_exhaustive()
    }
}

/// The slave side's settings.
#[derive(Debug, Clone)]
pub struct SlaveConfig {
    /// A report at least this often (`haSendHeartbeatInterval`).
    pub heartbeat_interval: Duration,
    /// A master silent for this long is disconnected (`haHousekeepingInterval`).
    pub housekeeping_interval: Duration,
    /// Largest frame accepted, bytes: a frame of the master's `haTransferBatchSize` or less,
    /// with room for masters configured larger.
    pub max_frame_bytes: u32,
    /// Pause between connection attempts.
    pub reconnect_interval: Duration,
    /// `Some`: speak controller mode's protocol instead of the classic one.
    pub autoswitch: Option<AutoSwitchSlave>,
    /// `Some`: prove this secret to the master, and have it proven, before anything else (see
    /// [`crate::handshake`]).
    pub secret: Option<petrel_auth::PeerSecret>,
    /// `Some`: reach the master over TLS with this configuration (its trust decides whether the
    /// master's certificate is verified; the secret's proof is bound to the session either way).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// What the slave's client is doing, for metrics and runtime info.
#[derive(Debug, Default)]
pub struct SlaveState {
    /// Whether a connection to the master is open now.
    pub connected: AtomicBool,
    /// The master's offset in the last frame received (its end, as far as the slave knows).
    pub master_offset: AtomicU64,
    /// Milliseconds since the epoch of the last frame received.
    pub last_frame_ms: AtomicU64,
    /// Frames received, heartbeats included.
    pub frames: AtomicU64,
    /// Commit-log bytes received in frames.
    pub bytes: AtomicU64,
    /// Connections to the master that failed or ended in an error, each followed by a retry.
    pub reconnects: AtomicU64,
}

/// A running HA client.
pub struct HaSlave {
    stop: Arc<AtomicBool>,
    master: Arc<RwLock<Option<String>>>,
    state: Arc<SlaveState>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl HaSlave {
    /// Starts following the master at `master` (`host:port` of its HA server), which may be
    /// unknown yet and may change (see [`HaSlave::set_master`]).
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn start(store: Arc<MessageStore>, master: Option<String>, config: SlaveConfig) -> std::io::Result<HaSlave> {
        let stop = Arc::new(AtomicBool::new(false));
        let master = Arc::new(RwLock::new(master));
        let state = Arc::new(SlaveState::default());
        let thread = {
            let (stop, master, state) = (stop.clone(), master.clone(), state.clone());
            std::thread::Builder::new()
                .name("ha-slave".into())
                .spawn(move || follow(&store, &master, &config, &state, &stop))?
        };
        Ok(HaSlave {
            stop,
            master,
            state,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Points the client at another master (it reconnects if the address changed).
    pub fn set_master(&self, addr: Option<String>) {
        let mut m = self.master.write();
        if *m != addr {
            tracing::info!(master = ?addr, "HA master address");
            *m = addr;
        }
    }

    /// The master the client follows now (`host:port` of its HA server), if one is known.
    #[must_use]
    pub fn master(&self) -> Option<String> {
        self.master.read().clone()
    }

    /// What the client is doing, updated as it runs.
    #[must_use]
    pub fn state(&self) -> &Arc<SlaveState> {
        &self.state
    }

    /// Stops following and waits for the client's thread to end; later calls do nothing.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }
}

impl Drop for HaSlave {
    fn drop(&mut self) {
        self.stop();
    }
}

fn follow(store: &MessageStore, master: &RwLock<Option<String>>, config: &SlaveConfig, state: &SlaveState, stop: &AtomicBool) {
    let mut last_error: Option<String> = None;
    // Compared by text: the same failure again is not logged again.
    while !stop.load(Ordering::Acquire) {
        let Some(addr) = master.read().clone() else {
            pause(config.reconnect_interval, stop);
            continue;
        };
        let result = connect(&addr, config).and_then(|stream| {
            state.connected.store(true, Ordering::Release);
            if last_error.take().is_some() {
                tracing::info!(master = %addr, "connected to the HA master again");
            }
            match &config.autoswitch {
                Some(auto) => autoswitch_session(store, stream, &addr, master, config, auto, state, stop),
                None => session(store, stream, &addr, master, config, state, stop),
            }
        });
        state.connected.store(false, Ordering::Release);
        if let Err(e) = result {
            // Logged once per distinct error, not once per retry.
            let text = e.to_string();
            if last_error.as_deref() != Some(text.as_str()) {
                tracing::warn!(master = %addr, error = %e, "HA connection to the master ended; retrying");
                last_error = Some(text);
            }
            state.reconnects.fetch_add(1, Ordering::Relaxed);
            pause(config.reconnect_interval, stop);
        }
    }
}

/// Longest a stop waits for the client's thread: a replica being promoted to master waits for
/// exactly this, so it bounds failover.
const STOP_LATENCY: Duration = Duration::from_millis(50);

/// Sleeps `total`, waking early on a stop.
fn pause(total: Duration, stop: &AtomicBool) {
    let until = Instant::now() + total;
    // Bounded: every turn sleeps at least STOP_LATENCY or ends.
    while !stop.load(Ordering::Acquire) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(STOP_LATENCY));
    }
}

fn connect(addr: &str, config: &SlaveConfig) -> Result<HaStream, ReplicationError> {
    let target: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| ReplicationError::Address {
            addr: addr.to_owned(),
            why: e.to_string(),
        })?
        .next()
        .ok_or_else(|| ReplicationError::Address {
            addr: addr.to_owned(),
            why: "resolves to nothing".into(),
        })?;
    let tcp = TcpStream::connect_timeout(&target, Duration::from_secs(3)).step("connect")?;
    tcp.set_nodelay(true).step("TCP_NODELAY")?;
    let bound = crate::handshake::HANDSHAKE_TIMEOUT;
    let deadline = crate::stream::Deadline::start(&tcp, bound).step("the handshake's deadline")?;
    let (mut stream, binding) = match &config.tls {
        None => (HaStream::Tcp(tcp), None),
        Some(tls) => {
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
            let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| ReplicationError::Address {
                addr: addr.to_owned(),
                why: e.to_string(),
            })?;
            let session = rustls::ClientConnection::new(tls.clone(), name)?;
            let (stream, binding) = crate::stream::tls_bridge(tcp, session, bound).step("TLS handshake")?;
            (stream, Some(binding))
        }
    };
    if let Some(secret) = &config.secret {
        stream.set_read_timeout(Some(bound)).step("read timeout")?;
        stream.set_write_timeout(Some(bound)).step("write timeout")?;
        let binding = binding.as_ref().map_or(&[][..], |b| &b[..]);
        crate::handshake::connect(&mut stream, secret, binding)?;
    }
    drop(deadline);
    // Short reads, so that heartbeats go out on time while no frame arrives.
    stream
        .set_read_timeout(Some(config.heartbeat_interval.min(STOP_LATENCY)))
        .step("read timeout")?;
    stream.set_write_timeout(Some(config.housekeeping_interval)).step("write timeout")?;
    Ok(stream)
}

fn report(stream: &mut HaStream, offset: u64) -> Result<(), ReplicationError> {
    stream.write_all(&encode_report(offset)).step("report")
}

/// One connection: report, then frames until an error, a stop or a new master address.
fn session(
    store: &MessageStore,
    mut stream: HaStream,
    addr: &str,
    master: &RwLock<Option<String>>,
    config: &SlaveConfig,
    state: &SlaveState,
    stop: &AtomicBool,
) -> Result<(), ReplicationError> {
    let log = store.commit_log();
    let mut reported = log.max_offset();
    report(&mut stream, reported)?;
    let mut last_report = Instant::now();
    let mut last_read = Instant::now();
    let mut buf = BytesMut::with_capacity(FRAME_HEADER_BYTES + config.max_frame_bytes as usize);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if master.read().as_deref() != Some(addr) {
            return Ok(());
        }
        // Frames first: everything already buffered is applied before reading more.
        while let Some(header) = FrameHeader::decode(&buf, config.max_frame_bytes)? {
            let total = FRAME_HEADER_BYTES + header.size as usize;
            if buf.len() < total {
                break;
            }
            let frame = buf.split_to(total).split_off(FRAME_HEADER_BYTES).freeze();
            let end = apply(store, header, frame)?;
            state.master_offset.store(header.offset + u64::from(header.size), Ordering::Relaxed);
            state.last_frame_ms.store(now_ms(), Ordering::Relaxed);
            state.frames.fetch_add(1, Ordering::Relaxed);
            state.bytes.fetch_add(u64::from(header.size), Ordering::Relaxed);
            if end > reported {
                report(&mut stream, end)?;
                reported = end;
                last_report = Instant::now();
            }
        }
        if last_report.elapsed() >= config.heartbeat_interval {
            report(&mut stream, reported)?;
            last_report = Instant::now();
        }
        read_more(&mut stream, &mut buf, &mut chunk, &mut last_read, config)?;
    }
}

/// Reads what the master sent (waiting at most the read timeout); errors on EOF, a failure, or
/// silence past `haHousekeepingInterval`.
///
/// A read interrupted by a signal (EINTR: a socket with a receive timeout is not restarted
/// after SIGSTOP and SIGCONT) is no failure: the bytes the kernel buffered meanwhile are still
/// there. Silence is judged only after a read found nothing, so a process resumed after a long
/// stop reads what waited for it before deciding that its master went quiet.
fn read_more(
    stream: &mut impl Read,
    buf: &mut BytesMut,
    chunk: &mut [u8],
    last_read: &mut Instant,
    config: &SlaveConfig,
) -> Result<(), ReplicationError> {
    match stream.read(chunk) {
        Ok(0) => return Err(ReplicationError::Closed),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            *last_read = Instant::now();
            return Ok(());
        }
        Err(e) if is_harmless(&e) => {}
        Err(e) => return Err(ReplicationError::Io { step: "read", source: e }),
    }
    if last_read.elapsed() >= config.housekeeping_interval {
        return Err(ReplicationError::Silent(config.housekeeping_interval));
    }
    Ok(())
}

/// A read that found nothing yet or was interrupted: try again.
fn is_harmless(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
    )
}

/// Controller mode, after the master's handshake: cuts this log back to where it agrees with
/// the master's (the epoch files say where), so that nothing the old master wrote and the new
/// one never had survives. An empty epoch file (a new replica) keeps everything.
fn cut_to_consistent_point(
    store: &MessageStore,
    auto: &AutoSwitchSlave,
    master_epochs: &[EpochEntry],
    master_end: u64,
) -> Result<(), ReplicationError> {
    let local = auto.epochs.entries();
    if local.is_empty() {
        return Ok(());
    }
    let end = store.commit_log().max_offset();
    let Some(point) = petrel_store::consistent_point(&local, end, master_epochs, master_end) else {
        return Err(ReplicationError::Protocol(format!(
            "this replica shares no epoch with its master (local {local:?}, master {master_epochs:?}): it needs an empty store"
        )));
    };
    if point < end {
        let cut = store.truncate_to(point)?;
        tracing::warn!(
            point,
            cut_bytes = cut,
            "cut the log's divergent tail before following the new master"
        );
    }
    Ok(auto.epochs.truncate_from(point)?)
}

/// One controller-mode connection: handshake, cut to the consistent point, report, then frames.
#[allow(clippy::too_many_arguments, reason = "the session's whole context, passed once")]
fn autoswitch_session(
    store: &MessageStore,
    mut stream: HaStream,
    addr: &str,
    master: &RwLock<Option<String>>,
    config: &SlaveConfig,
    auto: &AutoSwitchSlave,
    state: &SlaveState,
    stop: &AtomicBool,
) -> Result<(), ReplicationError> {
    let hello = SlaveMessage::Handshake {
        sync_from_last_file: auto.sync_from_last_file,
        async_learner: auto.async_learner,
        broker_id: auto.broker_id,
    };
    stream.write_all(&hello.encode()).step("handshake")?;
    let log = store.commit_log();
    let mut last_read = Instant::now();
    let mut buf = BytesMut::with_capacity(crate::wire::autoswitch::MASTER_TRANSFER_BYTES + config.max_frame_bytes as usize);
    let mut chunk = vec![0u8; 64 * 1024];
    let epoch_list_bytes = u32::try_from(petrel_store::MAX_EPOCH_ENTRIES * crate::wire::autoswitch::EPOCH_ENTRY_BYTES)
        .expect("1,000 epoch entries of 12 bytes fit a u32");
    let (master_epochs, master_end) = loop {
        if stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some((
            MasterHeader::Handshake {
                body_bytes, max_offset, ..
            },
            len,
        )) = MasterHeader::decode(&buf, epoch_list_bytes)?
        {
            if buf.len() >= len + body_bytes as usize {
                let body = buf.split_to(len + body_bytes as usize).split_off(len);
                break (decode_epochs(&body)?, max_offset);
            }
        } else if buf.len() >= crate::wire::autoswitch::MASTER_HANDSHAKE_BYTES {
            return Err(ReplicationError::Protocol("the master did not answer the handshake".into()));
        }
        read_more(&mut stream, &mut buf, &mut chunk, &mut last_read, config)?;
    };
    cut_to_consistent_point(store, auto, &master_epochs, master_end)?;
    let mut reported = log.max_offset();
    stream
        .write_all(&SlaveMessage::Report { max_offset: reported }.encode())
        .step("report")?;
    let mut last_report = Instant::now();
    let mut epoch = None;
    loop {
        if stop.load(Ordering::Acquire) || master.read().as_deref() != Some(addr) {
            return Ok(());
        }
        while let Some((header, len)) = MasterHeader::decode(&buf, config.max_frame_bytes)? {
            let MasterHeader::Transfer {
                body_bytes,
                offset,
                epoch: frame_epoch,
                epoch_start,
                confirm_offset,
            } = header
            else {
                return Err(ReplicationError::Protocol("a second handshake from the master".into()));
            };
            if buf.len() < len + body_bytes as usize {
                break;
            }
            let body = buf.split_to(len + body_bytes as usize).split_off(len).freeze();
            if frame_epoch >= 0 && epoch != Some(frame_epoch) && body_bytes > 0 {
                auto.epochs
                    .append(EpochEntry {
                        epoch: frame_epoch,
                        start_offset: epoch_start,
                    })
                    .map_err(|source| ReplicationError::Epoch {
                        epoch: frame_epoch,
                        start: epoch_start,
                        source,
                    })?;
                epoch = Some(frame_epoch);
            }
            let end = apply(store, FrameHeader { offset, size: body_bytes }, body)?;
            auto.confirmed.advance(confirm_offset.min(end));
            log.wake_readers();
            state.master_offset.store(offset + u64::from(body_bytes), Ordering::Relaxed);
            state.last_frame_ms.store(now_ms(), Ordering::Relaxed);
            state.frames.fetch_add(1, Ordering::Relaxed);
            state.bytes.fetch_add(u64::from(body_bytes), Ordering::Relaxed);
            if end > reported || last_report.elapsed() >= config.heartbeat_interval {
                stream
                    .write_all(&SlaveMessage::Report { max_offset: end }.encode())
                    .step("report")?;
                reported = end;
                last_report = Instant::now();
            }
        }
        if last_report.elapsed() >= config.heartbeat_interval {
            stream
                .write_all(&SlaveMessage::Report { max_offset: reported }.encode())
                .step("report")?;
            last_report = Instant::now();
        }
        read_more(&mut stream, &mut buf, &mut chunk, &mut last_read, config)?;
    }
}

/// Appends one frame; returns the log's end after it (what to report).
fn apply(store: &MessageStore, header: FrameHeader, body: bytes::Bytes) -> Result<u64, ReplicationError> {
    let log = store.commit_log();
    if header.size == 0 {
        return Ok(log.max_offset());
    }
    if log.max_offset() == 0 && header.offset != 0 {
        // An empty store begins where the master's stream does.
        log.start_at(header.offset)?;
    }
    let end = log.append_replicated(header.offset, body).map_err(|e| match e {
        StoreError::ReplicaGap { expected, got } => ReplicationError::Gap { expected, got },
        other => ReplicationError::Store(other),
    })?;
    log.wait_written(end)?;
    Ok(end)
}

/// The wall clock for `last_frame_ms`, which is unsigned.
fn now_ms() -> u64 {
    u64::try_from(petrel_kit::clock::now_ms()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SlaveConfig {
        SlaveConfig {
            heartbeat_interval: Duration::from_millis(100),
            housekeeping_interval: Duration::from_millis(300),
            max_frame_bytes: 1024,
            reconnect_interval: Duration::from_millis(100),
            autoswitch: None,
            secret: None,
            tls: None,
        }
    }

    /// Reads that fail as a socket does: first a signal's interruption, then a timeout.
    struct Interrupted(Vec<std::io::ErrorKind>);

    impl Read for Interrupted {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            match self.0.pop() {
                Some(kind) => Err(kind.into()),
                None => Ok(0),
            }
        }
    }

    #[test]
    fn an_interrupted_read_keeps_the_connection() {
        let mut stream = Interrupted(vec![std::io::ErrorKind::TimedOut, std::io::ErrorKind::Interrupted]);
        let (mut buf, mut chunk, mut last) = (BytesMut::new(), [0u8; 16], Instant::now());
        assert!(read_more(&mut stream, &mut buf, &mut chunk, &mut last, &config()).is_ok());
        assert!(read_more(&mut stream, &mut buf, &mut chunk, &mut last, &config()).is_ok());
        assert!(
            read_more(&mut stream, &mut buf, &mut chunk, &mut last, &config()).is_err(),
            "EOF ends it"
        );
    }

    /// A real socket with a receive timeout, its reading thread hit by a signal whose handler is
    /// installed without SA_RESTART (what SIGSTOP and SIGCONT do to a blocked recv).
    #[test]
    #[allow(unsafe_code, reason = "sigaction and pthread_kill have no safe wrapper that leaves SA_RESTART off")]
    fn a_signal_during_a_socket_read_is_not_a_failure() {
        extern "C" fn nothing(_: libc::c_int) {}
        // SAFETY: installs a handler that does nothing for SIGUSR2, which no other test uses.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = nothing as *const () as usize;
            action.sa_flags = 0;
            assert_eq!(libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut()), 0);
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (mut server, _) = listener.accept().expect("accept");
        client.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() }).expect("send");
            let mut stream = client;
            let (mut buf, mut chunk, mut last) = (BytesMut::new(), [0u8; 16], Instant::now());
            let cfg = SlaveConfig {
                housekeeping_interval: Duration::from_secs(30),
                ..config()
            };
            let first = read_more(&mut stream, &mut buf, &mut chunk, &mut last, &cfg);
            let second = read_more(&mut stream, &mut buf, &mut chunk, &mut last, &cfg);
            (first, second, buf)
        });
        let thread = rx.recv().expect("thread id");
        // Until the reader is blocked in recv; a signal before that only makes the test weaker.
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: the thread is alive until it has read twice, which needs the bytes below.
        assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR2) }, 0);
        std::thread::sleep(Duration::from_millis(100));
        server.write_all(b"after").expect("write");
        let (first, second, buf) = reader.join().expect("reader");
        assert!(first.is_ok(), "the interrupted read: {first:?}");
        assert!(second.is_ok(), "{second:?}");
        assert_eq!(&buf[..], b"after", "what was sent after the signal is read on the same connection");
    }
}
