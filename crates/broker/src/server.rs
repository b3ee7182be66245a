//! The TCP loop: frames in, answers out, one task per connection.
//!
//! Owns: accepting connections and framing. Must never: let one connection's bad input touch
//! another — a frame that does not decode closes that connection alone, as Java does.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use petrel_protocol::{FrameCodec, RemotingCommand};
use tokio::net::TcpListener;
use tokio_util::codec::Framed;

/// Something that answers requests (`None`: no answer, as for a oneway request).
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: &RemotingCommand) -> Option<RemotingCommand>;
}

impl Handler for crate::namesrv::NameServer {
    fn handle(&self, request: &RemotingCommand) -> Option<RemotingCommand> {
        crate::namesrv::NameServer::handle(self, request)
    }
}

/// Serves `handler` on `listener` until the task is dropped.
pub async fn serve<H: Handler>(listener: TcpListener, handler: Arc<H>, max_frame_bytes: usize) -> std::io::Result<()> {
    loop {
        let (socket, peer) = listener.accept().await?;
        let _ = socket.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let mut framed = Framed::new(socket, FrameCodec::new(max_frame_bytes));
            while let Some(frame) = framed.next().await {
                let request = match frame {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "closing connection after a bad frame");
                        return;
                    }
                };
                if request.is_response() {
                    continue; // answers to requests we never sent
                }
                if let Some(response) = handler.handle(&request)
                    && framed.send(response).await.is_err()
                {
                    return; // the peer went away (the Go client closes right after oneway-style calls)
                }
            }
        });
    }
}
