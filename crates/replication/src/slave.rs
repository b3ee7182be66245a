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
use petrel_store::{MessageStore, StoreError};

use crate::wire::{FRAME_HEADER_BYTES, FrameHeader, encode_report};

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
}

/// What the slave's client is doing, for metrics and runtime info.
#[derive(Debug, Default)]
pub struct SlaveState {
    pub connected: AtomicBool,
    /// The master's offset in the last frame received (its end, as far as the slave knows).
    pub master_offset: AtomicU64,
    /// Milliseconds since the epoch of the last frame received.
    pub last_frame_ms: AtomicU64,
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
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

    #[must_use]
    pub fn master(&self) -> Option<String> {
        self.master.read().clone()
    }

    #[must_use]
    pub fn state(&self) -> &Arc<SlaveState> {
        &self.state
    }

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
    while !stop.load(Ordering::Acquire) {
        let Some(addr) = master.read().clone() else {
            std::thread::sleep(config.reconnect_interval);
            continue;
        };
        let result = connect(&addr, config).and_then(|stream| {
            state.connected.store(true, Ordering::Release);
            if last_error.take().is_some() {
                tracing::info!(master = %addr, "connected to the HA master again");
            }
            session(store, stream, &addr, master, config, state, stop)
        });
        state.connected.store(false, Ordering::Release);
        if let Err(e) = result {
            // Logged once per distinct error, not once per retry.
            if last_error.as_deref() != Some(e.as_str()) {
                tracing::warn!(master = %addr, error = %e, "HA connection to the master ended; retrying");
                last_error = Some(e);
            }
            state.reconnects.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(config.reconnect_interval);
        }
    }
}

fn connect(addr: &str, config: &SlaveConfig) -> Result<TcpStream, String> {
    let target: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} resolves to nothing"))?;
    let stream = TcpStream::connect_timeout(&target, Duration::from_secs(3)).map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    // Short reads, so that heartbeats go out on time while no frame arrives.
    stream
        .set_read_timeout(Some(config.heartbeat_interval.min(Duration::from_millis(500))))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(config.housekeeping_interval))
        .map_err(|e| e.to_string())?;
    Ok(stream)
}

fn report(stream: &mut TcpStream, offset: u64) -> Result<(), String> {
    stream.write_all(&encode_report(offset)).map_err(|e| format!("report: {e}"))
}

/// One connection: report, then frames until an error, a stop or a new master address.
fn session(
    store: &MessageStore,
    mut stream: TcpStream,
    addr: &str,
    master: &RwLock<Option<String>>,
    config: &SlaveConfig,
    state: &SlaveState,
    stop: &AtomicBool,
) -> Result<(), String> {
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
        if last_read.elapsed() >= config.housekeeping_interval {
            return Err(format!("nothing from the master for {:?}", config.housekeeping_interval));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err("the master closed the connection".into()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                last_read = Instant::now();
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

/// Appends one frame; returns the log's end after it (what to report).
fn apply(store: &MessageStore, header: FrameHeader, body: bytes::Bytes) -> Result<u64, String> {
    let log = store.commit_log();
    if header.size == 0 {
        return Ok(log.max_offset());
    }
    if log.max_offset() == 0 && header.offset != 0 {
        // An empty store begins where the master's stream does.
        log.start_at(header.offset).map_err(|e| e.to_string())?;
    }
    let end = log.append_replicated(header.offset, body).map_err(|e| match e {
        StoreError::ReplicaGap { expected, got } => {
            format!("the master sent offset {got} but this log ends at {expected}; reconnecting to report the end again")
        }
        other => other.to_string(),
    })?;
    log.wait_written(end).map_err(|e| e.to_string())?;
    Ok(end)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
