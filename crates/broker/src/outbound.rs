//! One request over a fresh TCP connection, for the few calls a broker makes itself
//! (REGISTER_BROKER and UNREGISTER_BROKER to external name servers).
//!
//! Owns: connect, send, wait for the answer with the same opaque, time out. Must never: wait
//! without a deadline.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use petrel_protocol::{FrameCodec, RemotingCommand};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("bad frame from peer: {0}")]
    Frame(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connection closed before the answer")]
    Closed,
}

/// Sends `request` to `addr` and returns the answer.
pub async fn call(addr: &str, mut request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, CallError> {
    request.opaque = NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed);
    let opaque = request.opaque;
    let exchange = async {
        let socket = TcpStream::connect(addr).await?;
        let _ = socket.set_nodelay(true);
        let mut framed = Framed::new(socket, FrameCodec::default());
        framed.send(request).await.map_err(|e| CallError::Frame(e.to_string()))?;
        while let Some(frame) = framed.next().await {
            let cmd = frame.map_err(|e| CallError::Frame(e.to_string()))?;
            if cmd.is_response() && cmd.opaque == opaque {
                return Ok(cmd);
            }
        }
        Err(CallError::Closed)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| CallError::Timeout(timeout))?
}
