//! The gRPC server: HTTP/2 on its own port (`grpcServerPort`, RocketMQ proxy's 8081), serving
//! `GrpcFront` until told to stop, in plain text or over TLS with the remoting ports'
//! certificate and `tls.server.mode` (permissive: a connection whose first byte opens a TLS
//! handshake record gets TLS, any other is plain HTTP/2, as on the remoting ports).
//!
//! Owns: the listener, the accept task, TLS handshakes and the server task. Must never: take a
//! message larger than the broker's `maxMessageSize` (plus its fields), more streams per
//! connection than configured, more handshakes at once than [`MAX_HANDSHAKES`], or let a silent
//! client hold a handshake past [`HANDSHAKE_TIMEOUT`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_rustls::rustls;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

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

/// A client must open its TLS session (its first byte, then the whole handshake) within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// TLS handshakes in progress at once; past it, accepting waits for one to end.
pub const MAX_HANDSHAKES: usize = 256;
/// Accepted connections waiting for the HTTP/2 server to take them.
const ACCEPTED_QUEUE_LEN: usize = 64;
/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// TLS on the gRPC port: the remoting ports' certificate, offering HTTP/2 by ALPN (gRPC clients
/// over TLS require it).
#[derive(Clone)]
pub struct GrpcTls {
    acceptor: tokio_rustls::TlsAcceptor,
    plain_too: bool,
}

impl std::fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTls")
            .field("plain_too", &self.plain_too)
            .finish_non_exhaustive()
    }
}

impl GrpcTls {
    /// TLS with `config`'s certificate; `plain_too` also serves plain HTTP/2 on the same port
    /// (`tls.server.mode=permissive`), otherwise TLS only (`enforcing`).
    #[must_use]
    pub fn new(config: &rustls::ServerConfig, plain_too: bool) -> GrpcTls {
        let mut config = config.clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        GrpcTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            plain_too,
        }
    }

    /// Tells TLS from plain text (when both are served) and does the handshake, the two together
    /// within [`HANDSHAKE_TIMEOUT`].
    async fn accept(&self, socket: TcpStream) -> std::io::Result<Connection> {
        let opened = async {
            if self.plain_too {
                let mut first = [0u8; 1];
                let n = socket.peek(&mut first).await?;
                if n == 0 || first[0] != TLS_HANDSHAKE_RECORD {
                    return Ok(Connection::Plain(socket));
                }
            }
            let tls = self.acceptor.accept(socket).await?;
            Ok(Connection::Tls(Box::new(tls)))
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, opened)
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no TLS handshake within the time bound"))?
    }
}

/// An accepted connection, plain or TLS: what the HTTP/2 server reads and writes.
enum Connection {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Connected for Connection {
    // The peer's address either way: what `Request::remote_addr` reads.
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            Connection::Plain(s) => s.connect_info(),
            Connection::Tls(s) => s.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Connection::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Connection::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Connection::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(s) => Pin::new(s).poll_flush(cx),
            Connection::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Connection::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Sets up an accepted connection: no Nagle delay on its small frames.
fn configure(stream: &TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY refused on a gRPC connection");
    }
}

/// Accepts connections until the server stops taking them, handing each to the server once it
/// is plain or its handshake is done. A handshake runs in its own task so a slow client holds up
/// nobody else; past [`MAX_HANDSHAKES`] in progress, a new connection is closed at once rather
/// than waited for (silent sockets must not stop the port accepting).
async fn accept_loop(listener: TcpListener, tls: Option<GrpcTls>, accepted: mpsc::Sender<Connection>) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    while !accepted.is_closed() {
        let socket = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(e) => {
                // Out of descriptors and the like: pause rather than spin, then go on.
                tracing::warn!(error = %e, "gRPC accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        configure(&socket);
        let Some(tls) = tls.clone() else {
            if accepted.send(Connection::Plain(socket)).await.is_err() {
                return;
            }
            continue;
        };
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::debug!(peer = ?socket.peer_addr().ok(), "{MAX_HANDSHAKES} TLS handshakes in progress; a connection closed");
            continue;
        };
        let accepted = accepted.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let peer = socket.peer_addr().ok();
            match tls.accept(socket).await {
                Ok(connection) => {
                    let _ = accepted.send(connection).await;
                }
                Err(e) => tracing::debug!(?peer, error = %e, "gRPC connection dropped before its TLS session opened"),
            }
        });
    }
}

/// A running gRPC server.
pub struct GrpcServer {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    accepting: JoinHandle<()>,
    renewing: JoinHandle<()>,
    local_addr: std::net::SocketAddr,
}

impl GrpcServer {
    /// Serves `front` on `listener`, over TLS as `tls` says (plain text only when `None`).
    ///
    /// # Errors
    /// The listener's address cannot be read.
    pub fn start(listener: TcpListener, front: GrpcFront, limits: GrpcLimits, tls: Option<GrpcTls>) -> std::io::Result<GrpcServer> {
        assert!(limits.max_streams_per_connection > 0, "a connection needs a stream to ask anything");
        let local_addr = listener.local_addr()?;
        // The renewer of push consumers' messages ends with the client table or the broker.
        let renewing = tokio::spawn(crate::renew::renewer(
            Arc::downgrade(&front.clients),
            Arc::downgrade(&front.broker),
            front.renew,
        ));
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
        // The builder's `tcp_nodelay` covers only listeners it binds itself: each accepted stream
        // gets it in the accept loop, or small answers wait out the peer's delayed ACK (a 40 ms
        // stall per exchange that capped a synchronous producer's rate).
        let (to_server, incoming) = mpsc::channel::<Connection>(ACCEPTED_QUEUE_LEN);
        let accepting = tokio::spawn(accept_loop(listener, tls, to_server));
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::StreamExt::map(ReceiverStream::new(incoming), Ok::<_, std::io::Error>);
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
            accepting,
            renewing,
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
        self.accepting.abort();
        self.renewing.abort();
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
