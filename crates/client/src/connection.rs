//! One TCP connection: a writer task fed by a bounded queue and a reader task that hands each
//! answer to the caller waiting on its opaque.
//!
//! Owns: the socket and the table of requests in flight. Must never: leave a caller waiting
//! after the connection died (every waiter is failed when the reader ends).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use petrel_protocol::{FrameCodec, RemotingCommand};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::error::ClientError;

/// Requests queued for the writer at most; a full queue makes callers wait.
pub const WRITE_QUEUE_LEN: usize = 4096;

type Waiters = Arc<Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>>;

pub struct Connection {
    pub addr: String,
    next_opaque: AtomicI32,
    writer: mpsc::Sender<RemotingCommand>,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
}

impl Connection {
    pub async fn connect(addr: &str) -> Result<Arc<Connection>, ClientError> {
        let socket = TcpStream::connect(addr).await.map_err(|source| ClientError::Connect {
            addr: addr.to_owned(),
            source,
        })?;
        let _ = socket.set_nodelay(true);
        let (read_half, write_half) = socket.into_split();
        let (tx, mut rx) = mpsc::channel::<RemotingCommand>(WRITE_QUEUE_LEN);
        let waiters: Waiters = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let writer_alive = alive.clone();
        tokio::spawn(async move {
            let mut sink = FramedWrite::new(write_half, FrameCodec::default());
            while let Some(first) = rx.recv().await {
                if sink.feed(first).await.is_err() {
                    break;
                }
                while let Ok(more) = rx.try_recv() {
                    if sink.feed(more).await.is_err() {
                        writer_alive.store(false, Ordering::Release);
                        return;
                    }
                }
                if SinkExt::<RemotingCommand>::flush(&mut sink).await.is_err() {
                    break;
                }
            }
            writer_alive.store(false, Ordering::Release);
        });
        let reader_waiters = waiters.clone();
        let reader_alive = alive.clone();
        let peer = addr.to_owned();
        tokio::spawn(async move {
            let mut frames = FramedRead::new(read_half, FrameCodec::default());
            while let Some(frame) = frames.next().await {
                match frame {
                    Ok(cmd) if cmd.is_response() => {
                        if let Some(w) = reader_waiters.lock().remove(&cmd.opaque) {
                            let _ = w.send(cmd);
                        }
                    }
                    Ok(_) => {} // broker-initiated requests: a load generator ignores them
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "bad frame; closing");
                        break;
                    }
                }
            }
            reader_alive.store(false, Ordering::Release);
            reader_waiters.lock().clear(); // fails every waiter
        });
        Ok(Arc::new(Connection {
            addr: addr.to_owned(),
            next_opaque: AtomicI32::new(1),
            writer: tx,
            waiters,
            alive,
        }))
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Sends `request` and waits for its answer.
    pub async fn call(&self, mut request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ClientError> {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.opaque = opaque;
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().insert(opaque, tx);
        if !self.is_alive() || self.writer.send(request).await.is_err() {
            self.waiters.lock().remove(&opaque);
            return Err(ClientError::Closed(self.addr.clone()));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(ClientError::Closed(self.addr.clone())),
            Err(_) => {
                self.waiters.lock().remove(&opaque);
                Err(ClientError::Timeout {
                    addr: self.addr.clone(),
                    timeout,
                })
            }
        }
    }

    /// Sends `request` marked oneway; no answer comes.
    pub async fn oneway(&self, mut request: RemotingCommand) -> Result<(), ClientError> {
        request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.mark_oneway();
        if !self.is_alive() || self.writer.send(request).await.is_err() {
            return Err(ClientError::Closed(self.addr.clone()));
        }
        Ok(())
    }
}
