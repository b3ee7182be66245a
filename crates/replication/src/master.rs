//! The master's HA server: accepts slaves on `haListenPort` and streams its commit log to each,
//! concurrently and independently — a slow or dead slave delays nobody but itself.
//!
//! Each slave gets a reader of its reports (the acks) and a sender of `[offset][size][bytes]`
//! frames of the log, up to `haTransferBatchSize` bytes each, or a heartbeat frame after
//! `haSendHeartbeatInterval` without data. The reader is a task on the broker's runtime: a
//! report wakes the worker that answers the sends it releases (a thread of its own, as in
//! RocketMQ, cost a wake-up of the thread and then one of the worker per round trip). Frames
//! leave from whoever is awake when one is due — the thread that published the records, the
//! reader that took an ack — or from the slave's transfer thread for what may block or must
//! stream (see [`outbox`]). A frame carries everything written since the last one, so one frame
//! carries many records at high load.
//!
//! Where a slave starts: at the offset it reports; an empty slave (offset 0) gets the
//! master's whole log from its oldest segment, or only the newest segment with
//! `syncFromLastFile=true` (RocketMQ's classic master always does the latter). A slave that
//! reports an offset the master cannot serve (below its oldest segment, or past its end: the
//! slave diverged) is disconnected with an error naming both offsets.
//!
//! Owns: the listener, the slave connections, their threads and reader tasks. Must never: block
//! the async runtime (its tasks only read what arrived, and send what the socket takes at once),
//! hold more than `maxSlaves` connections, or send a byte the master has not written.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use petrel_store::{EpochFile, MessageStore, Watermark};

mod outbox;

use crate::acks::AckGate;
use crate::error::{ReplicationError, Step};
use crate::stream::{AsyncReader, HaStream};
use crate::wire::autoswitch::{MasterHeader, SLAVE_HANDSHAKE_BYTES, SlaveMessage, encode_epochs};
use crate::wire::{FrameHeader, REPORT_BYTES, decode_report};
use outbox::Outbox;

/// Controller mode's extras on the master side: the epochs its frames name and the confirm
/// offset they carry (RocketMQ's AutoSwitch protocol, see [`crate::wire::autoswitch`]).
#[derive(Clone)]
pub struct AutoSwitchMaster {
    /// This broker's epoch file: the handshake sends its entries, and each frame names the epoch its bytes belong to.
    pub epochs: Arc<EpochFile>,
    /// What every in-sync replica holds; readers on both sides stop there.
    pub confirmed: Arc<Watermark>,
}

impl std::fmt::Debug for AutoSwitchMaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoSwitchMaster")
            .field("last_epoch", &self.epochs.last_epoch())
            .field("confirmed", &self.confirmed.get())
            .finish()
    }
}

/// What a controller-mode slave said in its handshake.
#[derive(Debug, Clone, Copy)]
struct Handshake {
    sync_from_last_file: bool,
}

/// The master side's settings.
#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// The address the HA server binds (`haListenPort`).
    pub listen: SocketAddr,
    /// Largest frame body, bytes (`haTransferBatchSize`).
    pub transfer_batch_bytes: usize,
    /// A heartbeat frame after this long without data (`haSendHeartbeatInterval`).
    pub heartbeat_interval: Duration,
    /// A slave silent for this long is disconnected (`haHousekeepingInterval`).
    pub housekeeping_interval: Duration,
    /// Slaves connected at once; more are refused as they arrive.
    pub max_slaves: usize,
    /// An empty slave gets only the newest segment, as RocketMQ's classic master sends.
    pub sync_from_last_file: bool,
    /// How long a partial frame may wait for more records when no send waits for the slaves
    /// (ASYNC_MASTER): fewer, fuller frames for a lag of at most this. Zero when sends wait
    /// (they hold a frame only while the previous one is unacknowledged).
    pub linger: Duration,
    /// `Some`: speak controller mode's protocol instead of the classic one.
    pub autoswitch: Option<AutoSwitchMaster>,
    /// `Some`: a slave must prove it holds this secret before it is served (see
    /// [`crate::handshake`]).
    pub secret: Option<petrel_auth::PeerSecret>,
    /// `Some`: TLS on the port (`tls.server.mode`).
    pub tls: Option<MasterTls>,
}

/// TLS on a master's HA port.
#[derive(Clone)]
pub struct MasterTls {
    /// The server's certificate and TLS settings.
    pub config: Arc<rustls::ServerConfig>,
    /// Plain connections are refused (`enforcing`); otherwise served too (`permissive`).
    pub enforcing: bool,
}

impl std::fmt::Debug for MasterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterTls")
            .field("enforcing", &self.enforcing)
            .finish_non_exhaustive()
    }
}

/// Connections whose handshake is in progress at once; more are closed as they arrive (each
/// handshake ends within [`crate::handshake::HANDSHAKE_TIMEOUT`]).
const MAX_PENDING_HANDSHAKES: usize = 8;

struct Slave {
    id: u64,
    addr: SocketAddr,
    stream: HaStream,
    /// The latest report (the first tells the transfer where to start; each one is an ack).
    acked: Mutex<Option<u64>>,
    /// The same, for inline senders, which must not wait on a lock (0 before the first).
    last_ack: AtomicU64,
    /// Signalled on every report.
    reported: Condvar,
    closed: AtomicBool,
    /// The sending side, once the transfer has its start point (see [`outbox`]).
    out: Mutex<Option<Outbox>>,
    /// A send was asked for: set before the sender tries `out`, so that its holder looks again.
    wanted: AtomicBool,
    /// Set, under its lock, to call the transfer thread back; `kicked` wakes it.
    kick: Mutex<bool>,
    kicked: Condvar,
    /// Controller mode: the slave's handshake, once read.
    handshake: Mutex<Option<Handshake>>,
}

impl Slave {
    fn close(&self, why: &str) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            tracing::info!(slave = self.id, addr = %self.addr, why, "slave connection closed");
            self.stream.shutdown();
            self.reported.notify_all();
            self.call_thread();
        }
    }

    /// Takes a report: the ack that lets the next frame go.
    fn take_report(&self, inner: &Inner, offset: u64) {
        *self.acked.lock() = Some(offset);
        self.last_ack.store(offset, Ordering::Release);
        self.reported.notify_all();
        inner.gate.acked(self.id, offset);
        self.pump(inner);
    }
}

struct Inner {
    store: Arc<MessageStore>,
    config: MasterConfig,
    gate: Arc<AckGate>,
    slaves: Mutex<Vec<Arc<Slave>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_id: AtomicU64,
    stop: AtomicBool,
    /// Slaves are taken (a controller-mode broker that is not master takes none).
    accepting: AtomicBool,
    /// Handshakes in progress.
    pending: std::sync::atomic::AtomicUsize,
    /// Peers refused (no or a wrong proof, too many handshakes at once), for metrics.
    pub(crate) refused: AtomicU64,
    /// Frames leave inline (see [`outbox`]): sends wait for the slaves, and the store tells
    /// this server of each new written end.
    inline: bool,
    /// The runtime the slaves' reports are read on: the broker's, when it started this server.
    runtime: Option<tokio::runtime::Handle>,
    /// Frames sent so far, by who sent them.
    frames: FrameCounts,
}

/// Frames a master sent to its slaves (heartbeats included), by who sent them: in the steady
/// state of sends that wait, nearly all leave inline (see [`outbox`]).
#[derive(Debug, Default)]
pub struct FrameCounts {
    /// Sent from the thread that published the records, or the one that read an ack.
    pub inline: AtomicU64,
    /// Sent by a slave's transfer thread: starts, backlogs, the rest of a frame, heartbeats.
    pub by_thread: AtomicU64,
}

/// A running HA server.
pub struct HaMaster {
    inner: Arc<Inner>,
    local_addr: SocketAddr,
    acceptor: Mutex<Option<JoinHandle<()>>>,
}

impl HaMaster {
    /// Binds `config.listen` and starts accepting slaves.
    ///
    /// # Errors
    /// The address cannot be bound.
    ///
    /// # Panics
    /// A `transfer_batch_bytes` of 0 or past `i32::MAX` (a frame's size field), or a `max_slaves` of 0.
    pub fn start(store: Arc<MessageStore>, gate: Arc<AckGate>, config: MasterConfig) -> std::io::Result<HaMaster> {
        assert!(config.transfer_batch_bytes > 0 && config.max_slaves > 0);
        assert!(
            i32::try_from(config.transfer_batch_bytes).is_ok(),
            "a frame's size is an i32 on the wire"
        );
        let listener = TcpListener::bind(config.listen)?;
        let local_addr = listener.local_addr()?;
        let inner = Arc::new_cyclic(|me: &std::sync::Weak<Inner>| {
            let me = me.clone();
            let listener: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                if let Some(inner) = me.upgrade() {
                    for slave in inner.slaves.lock().iter() {
                        slave.pump(&inner);
                    }
                }
            });
            // Only where sends wait (SYNC_MASTER): elsewhere frames linger on the transfer
            // thread, and the append path is not asked to look.
            let inline = config.linger.is_zero() && {
                let registered = store.commit_log().set_written_listener(listener);
                if !registered {
                    tracing::warn!("another HA server registered with this store first: frames leave from the transfer threads only");
                }
                registered
            };
            Inner {
                store,
                config,
                gate,
                slaves: Mutex::new(Vec::new()),
                threads: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(1),
                stop: AtomicBool::new(false),
                accepting: AtomicBool::new(true),
                pending: std::sync::atomic::AtomicUsize::new(0),
                refused: AtomicU64::new(0),
                inline,
                runtime: tokio::runtime::Handle::try_current().ok(),
                frames: FrameCounts::default(),
            }
        });
        let acceptor = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("ha-accept".into())
                .spawn(move || accept_loop(&inner, &listener))?
        };
        let housekeeping = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("ha-housekeeping".into())
                .spawn(move || housekeeping_loop(&inner))?
        };
        inner.threads.lock().push(housekeeping);
        tracing::info!(%local_addr, "HA server listening");
        Ok(HaMaster {
            inner,
            local_addr,
            acceptor: Mutex::new(Some(acceptor)),
        })
    }

    /// The address the HA server listens on (with the port the system chose, when asked for port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The ack gate the slaves' reports feed, which sends wait on.
    #[must_use]
    pub fn gate(&self) -> &Arc<AckGate> {
        &self.inner.gate
    }

    /// Frames sent so far, by who sent them.
    #[must_use]
    pub fn frames(&self) -> &FrameCounts {
        &self.inner.frames
    }

    /// Peers refused so far: no proof of `haSecret`, a wrong one, or too many at once.
    #[must_use]
    pub fn refused_peers(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Whether slaves are taken: a controller-mode broker stops taking them (and drops those
    /// it has) when it stops being the master, and starts again when it becomes one.
    pub fn set_accepting(&self, accepting: bool) {
        self.inner.accepting.store(accepting, Ordering::Release);
        if !accepting {
            for s in self.inner.slaves.lock().drain(..) {
                s.close("this broker is no longer the master");
            }
        }
    }

    /// Closes every slave connection and stops the threads.
    pub fn stop(&self) {
        if self.inner.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wake the acceptor with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.local_addr, Duration::from_secs(1));
        if let Some(h) = self.acceptor.lock().take() {
            let _ = h.join();
        }
        for s in self.inner.slaves.lock().drain(..) {
            s.close("the master stops");
        }
        let threads: Vec<JoinHandle<()>> = self.inner.threads.lock().drain(..).collect();
        for h in threads {
            let _ = h.join();
        }
    }
}

impl Drop for HaMaster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(inner: &Arc<Inner>, listener: &TcpListener) {
    for stream in listener.incoming() {
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "HA accept failed");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let result = if inner.config.secret.is_none() && inner.config.tls.is_none() {
            admit(inner, HaStream::Tcp(stream))
        } else {
            authenticate_then_admit(inner, stream)
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not start serving a slave");
        }
    }
}

/// Runs the peer's TLS and secret handshakes on a thread of its own (the acceptor goes on),
/// then admits it.
fn authenticate_then_admit(inner: &Arc<Inner>, stream: TcpStream) -> std::io::Result<()> {
    let addr = stream.peer_addr()?;
    if inner.pending.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING_HANDSHAKES {
        inner.pending.fetch_sub(1, Ordering::AcqRel);
        inner.refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%addr, max = MAX_PENDING_HANDSHAKES, "refusing an HA peer: too many handshakes in progress");
        return Ok(());
    }
    let worker = inner.clone();
    let spawned = std::thread::Builder::new().name("ha-handshake".into()).spawn(move || {
        // Given back however the handshake ends (a panic included).
        let _pending = Pending(&worker.pending);
        let checked = handshake(&worker.config, stream);
        match checked {
            Ok(stream) => {
                if let Err(e) = admit(&worker, stream) {
                    tracing::warn!(%addr, error = %e, "could not start serving a slave");
                }
            }
            Err(why) => {
                worker.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%addr, why = %why, "refused an HA peer: it did not open TLS, or did not prove it holds haSecret");
            }
        }
    });
    if let Err(e) = spawned {
        inner.pending.fetch_sub(1, Ordering::AcqRel);
        return Err(e);
    }
    Ok(())
}

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A handshake in progress, counted until dropped.
struct Pending<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The master's side of the TLS session (as the port's mode says) and of
/// [`crate::handshake`], each within its time bound; the stream to serve the slave on.
fn handshake(config: &MasterConfig, tcp: TcpStream) -> Result<HaStream, ReplicationError> {
    let bound = crate::handshake::HANDSHAKE_TIMEOUT;
    // The whole exchange, TLS included, within `bound`, however slowly the peer sends.
    let _deadline = crate::stream::Deadline::start(&tcp, bound).step("the handshake's deadline")?;
    tcp.set_read_timeout(Some(bound)).step("read timeout")?;
    tcp.set_write_timeout(Some(bound)).step("write timeout")?;
    let (mut stream, binding) = match &config.tls {
        None => (HaStream::Tcp(tcp), None),
        Some(tls) => {
            let mut first = [0u8; 1];
            let n = tcp.peek(&mut first).step("read")?;
            if n == 1 && first[0] == TLS_HANDSHAKE_RECORD {
                let session = rustls::ServerConnection::new(tls.config.clone())?;
                let (stream, binding) = crate::stream::tls_bridge(tcp, session, bound).step("TLS handshake")?;
                (stream, Some(binding))
            } else if tls.enforcing {
                return Err(ReplicationError::Protocol(
                    "a plain-text peer on an HA port with tls.server.mode=enforcing".into(),
                ));
            } else {
                (HaStream::Tcp(tcp), None)
            }
        }
    };
    if let Some(secret) = &config.secret {
        stream.set_read_timeout(Some(bound)).step("read timeout")?;
        stream.set_write_timeout(Some(bound)).step("write timeout")?;
        let mut first = [0u8; 8];
        stream.read_exact(&mut first).step("read")?;
        crate::handshake::accept(&mut stream, secret, &first, binding.as_ref().map_or(&[][..], |b| &b[..]))?;
    }
    Ok(stream)
}

fn admit(inner: &Arc<Inner>, stream: HaStream) -> std::io::Result<()> {
    let addr = stream.peer_addr()?;
    if !inner.accepting.load(Ordering::Acquire) {
        tracing::info!(%addr, "refusing a slave: this broker is not the master");
        return Ok(());
    }
    let mut slaves = inner.slaves.lock();
    slaves.retain(|s| !s.closed.load(Ordering::Acquire));
    if slaves.len() >= inner.config.max_slaves {
        tracing::warn!(%addr, max = inner.config.max_slaves, "refusing a slave: the master already serves its maximum");
        return Ok(());
    }
    let slave = Arc::new(Slave {
        id: inner.next_id.fetch_add(1, Ordering::Relaxed),
        addr,
        stream,
        acked: Mutex::new(None),
        last_ack: AtomicU64::new(0),
        reported: Condvar::new(),
        closed: AtomicBool::new(false),
        out: Mutex::new(None),
        wanted: AtomicBool::new(false),
        kick: Mutex::new(false),
        kicked: Condvar::new(),
        handshake: Mutex::new(None),
    });
    tracing::info!(slave = slave.id, %addr, tls = matches!(slave.stream, HaStream::Tls(..)), "slave connected");
    inner.gate.connected(slave.id, addr.to_string());
    slaves.push(slave.clone());
    drop(slaves);
    let (reader, writer) = (slave.stream.try_clone()?, slave.stream.try_clone()?);
    let mut threads = inner.threads.lock();
    threads.retain(|h| !h.is_finished());
    let reading = read_reports(inner.clone(), slave.clone(), reader);
    match &inner.runtime {
        Some(runtime) => drop(runtime.spawn(reading)),
        None => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            threads.push(
                std::thread::Builder::new()
                    .name(format!("ha-read-{}", slave.id))
                    .spawn(move || runtime.block_on(reading))?,
            );
        }
    }
    let (i, s) = (inner.clone(), slave);
    threads.push(
        std::thread::Builder::new()
            .name(format!("ha-send-{}", s.id))
            .spawn(move || transfer(&i, &s, writer))?,
    );
    Ok(())
}

/// The reader: every report is an ack. Ends on EOF, an error, or silence past housekeeping.
/// Runs on the broker's runtime where there is one (a report then wakes the worker that answers
/// the sends it releases), else on a thread of its own.
async fn read_reports(inner: Arc<Inner>, slave: Arc<Slave>, stream: HaStream) {
    let why = match AsyncReader::new(stream) {
        Ok(mut reader) if inner.config.autoswitch.is_some() => read_autoswitch_reports(&inner, &slave, &mut reader).await,
        Ok(mut reader) => read_classic_reports(&inner, &slave, &mut reader).await,
        Err(e) => format!("read: {e}"),
    };
    slave.close(&why);
    inner.gate.disconnected(slave.id);
}

fn read_error(inner: &Inner, e: &std::io::Error) -> String {
    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
        format!("no report for {:?}", inner.config.housekeeping_interval)
    } else {
        format!("read: {e}")
    }
}

/// Controller mode: a handshake naming the slave, then reports. Returns why it ended.
async fn read_autoswitch_reports(inner: &Inner, slave: &Slave, stream: &mut AsyncReader) -> String {
    let mut buf = [0u8; SLAVE_HANDSHAKE_BYTES];
    let silence = inner.config.housekeeping_interval;
    loop {
        if let Err(e) = stream.read_exact_within(&mut buf[..4], silence).await {
            return read_error(inner, &e);
        }
        if buf[..4] == crate::handshake::MAGIC[..4] {
            return "the slave authenticates with haSecret, and this master has none".to_owned();
        }
        let state = i32::from_be_bytes(buf[..4].try_into().expect("4 bytes"));
        let len = if state == crate::wire::autoswitch::STATE_HANDSHAKE {
            SLAVE_HANDSHAKE_BYTES
        } else {
            crate::wire::autoswitch::SLAVE_REPORT_BYTES
        };
        if let Err(e) = stream.read_exact_within(&mut buf[4..len], silence).await {
            return read_error(inner, &e);
        }
        match SlaveMessage::decode(&buf[..len]) {
            Ok(Some((
                SlaveMessage::Handshake {
                    sync_from_last_file,
                    async_learner,
                    broker_id,
                },
                _,
            ))) => {
                tracing::info!(slave = slave.id, broker_id, async_learner, "slave handshake");
                inner.gate.identified(slave.id, broker_id, async_learner);
                *slave.handshake.lock() = Some(Handshake { sync_from_last_file });
            }
            Ok(Some((SlaveMessage::Report { max_offset }, _))) => slave.take_report(inner, max_offset),
            Ok(None) => unreachable!("read a whole message"),
            Err(e) => return e.to_string(),
        }
        if slave.closed.load(Ordering::Acquire) {
            return "closed".into();
        }
    }
}

/// The classic protocol: reports only. Returns why it ended.
async fn read_classic_reports(inner: &Inner, slave: &Slave, stream: &mut AsyncReader) -> String {
    let mut buf = [0u8; REPORT_BYTES];
    loop {
        if let Err(e) = stream.read_exact_within(&mut buf, inner.config.housekeeping_interval).await {
            return read_error(inner, &e);
        }
        if crate::handshake::opens_handshake(&buf) {
            return "the slave authenticates with haSecret, and this master has none".to_owned();
        }
        let offset = match decode_report(buf) {
            Ok(o) => o,
            Err(e) => return e.to_string(),
        };
        slave.take_report(inner, offset);
        if slave.closed.load(Ordering::Acquire) {
            return "closed".into();
        }
    }
}

/// Where the transfer to a slave that reported `reported` starts, or why it cannot.
fn start_offset(inner: &Inner, reported: u64, sync_from_last_file: bool) -> Result<u64, ReplicationError> {
    let log = inner.store.commit_log();
    let (min, max) = (log.min_offset(), log.max_offset());
    if reported == 0 {
        if sync_from_last_file {
            let size = log.config().segment_size_bytes;
            return Ok(max - max % size);
        }
        return Ok(min);
    }
    if reported < min && inner.store.oldest_offset() <= reported {
        // The cold tier holds what the disk no longer keeps: the slave catches up from there.
        tracing::info!(
            reported,
            local_min = min,
            "a slave behind the local log catches up from the cold tier"
        );
        return Ok(reported);
    }
    if reported < min {
        return Err(ReplicationError::Protocol(format!(
            "the slave holds up to {reported}, but the master's log now begins at {min}: the bytes between are gone; give the slave an empty store"
        )));
    }
    if reported > max {
        return Err(ReplicationError::Protocol(format!(
            "the slave holds up to {reported}, past the master's end {max}: their logs diverged; give the slave an empty store"
        )));
    }
    Ok(reported)
}

/// Controller mode: waits for the slave's handshake and answers it with this master's end,
/// last epoch and epoch entries. Returns the handshake, or why there is none.
fn autoswitch_handshake(
    inner: &Inner,
    auto: &AutoSwitchMaster,
    slave: &Slave,
    stream: &mut HaStream,
) -> Result<Handshake, ReplicationError> {
    let deadline = Instant::now() + inner.config.housekeeping_interval;
    // Bounded by the deadline; RocketMQ's master polls for the handshake the same way.
    let hs = loop {
        if let Some(hs) = *slave.handshake.lock() {
            break hs;
        }
        if slave.closed.load(Ordering::Acquire) || Instant::now() >= deadline {
            return Err(ReplicationError::Protocol("no handshake".into()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let entries = auto.epochs.entries();
    let body = encode_epochs(&entries);
    let body_bytes = u32::try_from(body.len())
        .map_err(|_| ReplicationError::Protocol(format!("{} epoch entries are more than a handshake frame can carry", entries.len())))?;
    let header = MasterHeader::Handshake {
        body_bytes,
        max_offset: inner.store.commit_log().max_offset(),
        last_epoch: auto.epochs.last_epoch(),
    };
    stream
        .write_all_within(&[header.encode(), body].concat(), inner.config.housekeeping_interval)
        .step("answering the handshake")?;
    Ok(hs)
}

/// The header of a frame of `len` bytes at `offset` (cut so that it stays in one epoch).
fn frame_header(inner: &Inner, offset: u64, len: &mut usize) -> Vec<u8> {
    let Some(auto) = &inner.config.autoswitch else {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "len <= transfer_batch_bytes, which HaMaster::start checks fits an i32"
        )]
        let size = *len as u32;
        return FrameHeader { offset, size }.encode().to_vec();
    };
    let (entry, epoch_end) = auto
        .epochs
        .entry_at(offset)
        .or_else(|| auto.epochs.entries().first().map(|e| (*e, None)))
        .map_or(
            (
                petrel_store::EpochEntry {
                    epoch: -1,
                    start_offset: 0,
                },
                None,
            ),
            |x| x,
        );
    if let Some(end) = epoch_end {
        // Saturating: a distance past usize::MAX (32-bit targets) only means the epoch ends beyond this frame.
        *len = (*len).min(usize::try_from(end - offset).unwrap_or(usize::MAX));
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "len <= transfer_batch_bytes, which HaMaster::start checks fits an i32"
    )]
    let body_bytes = *len as u32;
    MasterHeader::Transfer {
        body_bytes,
        offset,
        epoch: entry.epoch,
        epoch_start: entry.start_offset,
        confirm_offset: auto.confirmed.get(),
    }
    .encode()
}

/// The transfer: frames of the log from the slave's start point, heartbeats when idle.
fn transfer(inner: &Inner, slave: &Slave, mut stream: HaStream) {
    let mut sync_from_last_file = inner.config.sync_from_last_file;
    if let Some(auto) = &inner.config.autoswitch {
        match autoswitch_handshake(inner, auto, slave, &mut stream) {
            Ok(hs) => sync_from_last_file = hs.sync_from_last_file,
            Err(why) => {
                slave.close(&why.to_string());
                return;
            }
        }
    }
    let reported = {
        let mut first = slave.acked.lock();
        let deadline = Instant::now() + inner.config.housekeeping_interval;
        while first.is_none() && !slave.closed.load(Ordering::Acquire) {
            if slave.reported.wait_until(&mut first, deadline).timed_out() {
                break;
            }
        }
        *first
    };
    let Some(reported) = reported else {
        slave.close("no first report");
        return;
    };
    let next = match start_offset(inner, reported, sync_from_last_file) {
        Ok(o) => o,
        Err(why) => {
            tracing::error!(slave = slave.id, addr = %slave.addr, "{why}");
            slave.close(&why.to_string());
            return;
        }
    };
    tracing::info!(slave = slave.id, reported, from = next, "transfer starts");
    let capacity = crate::wire::autoswitch::MASTER_TRANSFER_BYTES + inner.config.transfer_batch_bytes;
    *slave.out.lock() = Some(Outbox::new(stream, next, capacity));
    let why = loop {
        if slave.closed.load(Ordering::Acquire) || inner.stop.load(Ordering::Acquire) {
            break "stopped".to_owned();
        }
        if let Err(why) = outbox::transfer_step(inner, slave) {
            break why.to_string();
        }
    };
    slave.close(&why);
    // The writing half goes now, not when the slave's entry is pruned at the next admission.
    *slave.out.lock() = None;
}

/// Re-derives sync states every second: a master with no traffic still notices a slave that
/// stopped reporting, and its watermark still follows its end where the policy says so.
fn housekeeping_loop(inner: &Inner) {
    while !inner.stop.load(Ordering::Acquire) {
        std::thread::park_timeout(Duration::from_millis(200));
        inner.gate.recompute();
    }
}
