//! The gRPC server: HTTP/2 on its own port (`grpcServerPort`, RocketMQ proxy's 8081), serving
//! `GrpcFront` until told to stop.
//!
//! Owns: the listener and the server task. Must never: take a message larger than the broker's
//! `maxMessageSize` (plus its fields), or more streams per connection than configured.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::TcpListenerStream;

use crate::front::GrpcFront;
use crate::pb::messaging_service_server::MessagingServiceServer;

/// Room a request needs beyond its bodies: topics, properties, handles.
pub const REQUEST_OVERHEAD_BYTES: usize = 1 << 20;
/// How often the server pings an idle connection, and how long it waits for the answer.
pub const KEEPALIVE: (Duration, Duration) = (Duration::from_secs(60), Duration::from_secs(20));

/// How the server is bounded.
#[derive(Debug, Clone, Copy)]
pub struct GrpcLimits {
    /// Streams one connection may have open at once (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_streams_per_connection: u32,
    /// The largest body a message may have (`maxMessageSize`).
    pub max_message_bytes: usize,
}

/// Sets up an accepted connection: no Nagle delay on its small frames.
fn configure(stream: &tokio::net::TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY refused on a gRPC connection");
    }
}

/// A running gRPC server.
pub struct GrpcServer {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    local_addr: std::net::SocketAddr,
}

impl GrpcServer {
    /// Serves `front` on `listener`.
    ///
    /// # Errors
    /// The listener's address cannot be read.
    pub fn start(listener: TcpListener, front: GrpcFront, limits: GrpcLimits) -> std::io::Result<GrpcServer> {
        assert!(limits.max_streams_per_connection > 0, "a connection needs a stream to ask anything");
        let local_addr = listener.local_addr()?;
        let max_bytes = limits.max_message_bytes.saturating_add(REQUEST_OVERHEAD_BYTES);
        let service = MessagingServiceServer::new(front)
            .max_decoding_message_size(max_bytes)
            .max_encoding_message_size(max_bytes.saturating_mul(crate::session::RECEIVE_BATCH_SIZE.unsigned_abs() as usize));
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tonic::transport::Server::builder()
            .max_concurrent_streams(Some(limits.max_streams_per_connection))
            .http2_keepalive_interval(Some(KEEPALIVE.0))
            .http2_keepalive_timeout(Some(KEEPALIVE.1))
            .add_service(service);
        let task = tokio::spawn(async move {
            // The builder's `tcp_nodelay` covers only listeners it binds itself: each accepted
            // stream gets it here, or small answers wait out the peer's delayed ACK (a 40 ms
            // stall per exchange that capped a synchronous producer's rate).
            let incoming = TcpListenerStream::new(listener).map(|accepted| accepted.inspect(configure));
            if let Err(e) = server
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await
            {
                tracing::error!(error = %e, "gRPC server stopped");
            }
        });
        Ok(GrpcServer {
            stop: Some(stop),
            task,
            local_addr,
        })
    }

    /// Where the server listens.
    #[must_use]
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.local_addr
    }

    /// Stops taking connections and waits for the streams in progress to end.
    pub async fn drain(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn an_accepted_connection_sends_without_delay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("bound");
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connected");
        let (accepted, _) = listener.accept().await.expect("accepted");
        assert!(!accepted.nodelay().expect("readable"), "the kernel's default: Nagle on");
        super::configure(&accepted);
        assert!(accepted.nodelay().expect("readable"));
    }
}
