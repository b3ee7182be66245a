//! The TCP loop: frames in, answers out, one reader and one writer task per connection.
//!
//! Owns: accepting connections, framing, the bounded outbound queue of each connection (answers
//! and broker-initiated requests such as NOTIFY_CONSUMER_IDS_CHANGED share it), and running
//! deferred answers (long polls, flush waits) off the reader. Must never: let one connection's
//! bad input touch another — a frame that does not decode closes that connection alone, as
//! Java does — or let a slow reader grow memory without bound.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{SinkExt, StreamExt};
use petrel_protocol::{FrameCodec, RemotingCommand};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

/// Commands waiting to be written to one connection; a full queue back-pressures the reader.
pub const OUTBOUND_QUEUE_LEN: usize = 1024;

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// One client connection, as handlers see it.
#[derive(Debug)]
pub struct Connection {
    pub id: u64,
    pub peer: SocketAddr,
    outbound: mpsc::Sender<RemotingCommand>,
}

impl Connection {
    /// Queues a broker-initiated command; false if the connection is gone or its queue is full
    /// (a oneway notification is not worth blocking for).
    pub fn push(&self, command: RemotingCommand) -> bool {
        self.outbound.try_send(command).is_ok()
    }
}

/// A JSON answer to `request`: Java answers in its own serialization, whatever the request used.
pub fn answer(request: &RemotingCommand, code: i32) -> RemotingCommand {
    let mut r = RemotingCommand::response_to(request, code);
    r.serialize_type = petrel_protocol::SerializeType::Json;
    r
}

pub fn error(request: &RemotingCommand, code: i32, remark: impl Into<String>) -> RemotingCommand {
    answer(request, code).with_remark(remark)
}

/// An answer that is not ready yet.
pub type Deferred = Pin<Box<dyn Future<Output = Option<RemotingCommand>> + Send>>;

/// What a handler does with a request.
pub enum Reply {
    /// No answer (oneway requests).
    None,
    Now(RemotingCommand),
    /// Answered when the future completes; the connection keeps reading meanwhile.
    Later(Deferred),
}

impl From<Option<RemotingCommand>> for Reply {
    fn from(r: Option<RemotingCommand>) -> Reply {
        r.map_or(Reply::None, Reply::Now)
    }
}

/// Something that answers requests.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply;
    /// The connection closed (either side); handlers drop what they hold of it.
    fn on_close(&self, _conn: &Arc<Connection>) {}
}

impl Handler for crate::namesrv::NameServer {
    fn handle(&self, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        crate::namesrv::NameServer::handle(self, &request).into()
    }
}

/// Serves `handler` on `listener` until the task is dropped.
pub async fn serve<H: Handler>(listener: TcpListener, handler: Arc<H>, max_frame_bytes: usize) -> std::io::Result<()> {
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: keep the listener, back off briefly.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let (read_half, write_half) = socket.into_split();
            let (tx, mut rx) = mpsc::channel::<RemotingCommand>(OUTBOUND_QUEUE_LEN);
            let conn = Arc::new(Connection {
                id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
                peer,
                outbound: tx.clone(),
            });
            let writer = tokio::spawn(async move {
                let mut sink = FramedWrite::new(write_half, FrameCodec::new(max_frame_bytes));
                while let Some(first) = rx.recv().await {
                    // Batch what is already queued into one write.
                    if sink.feed(first).await.is_err() {
                        return;
                    }
                    while let Ok(more) = rx.try_recv() {
                        if sink.feed(more).await.is_err() {
                            return;
                        }
                    }
                    if SinkExt::<RemotingCommand>::flush(&mut sink).await.is_err() {
                        return; // the peer went away (the Go client closes right after some calls)
                    }
                }
            });
            let mut frames = FramedRead::new(read_half, FrameCodec::new(max_frame_bytes));
            while let Some(frame) = frames.next().await {
                let request = match frame {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "closing connection after a bad frame");
                        break;
                    }
                };
                if request.is_response() {
                    continue; // answers to oneway pushes we never wait for
                }
                match handler.handle(&conn, request) {
                    Reply::None => {}
                    Reply::Now(response) => {
                        if tx.send(response).await.is_err() {
                            break;
                        }
                    }
                    Reply::Later(fut) => {
                        let tx = tx.clone();
                        tokio::spawn(async move {
                            if let Some(response) = fut.await {
                                let _ = tx.send(response).await;
                            }
                        });
                    }
                }
            }
            handler.on_close(&conn);
            drop(conn);
            drop(tx);
            // Deferred answers still hold senders; the writer ends when they finish or the
            // socket fails.
            let _ = writer.await;
        });
    }
}
