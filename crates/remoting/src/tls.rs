//! TLS on a server's port, as RocketMQ's `tls.server.mode` configures it: `disabled`,
//! `permissive` (a connection whose first byte opens a TLS handshake record, 0x16, gets TLS; any
//! other is served in plain text, as RocketMQ's `HandshakeHandler` tells them apart) or
//! `enforcing` (TLS only). rustls does the TLS; the decrypted stream is handed to the one
//! read/write loop over a socket pair, so the plain-text path is the same code as without TLS.
//!
//! Owns: loading the certificate and key, telling TLS from plain text, the handshake's time
//! bound, and the bridge task. Must never: let a slow or silent handshake hold a connection past
//! [`HANDSHAKE_TIMEOUT`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// A client must open its session (its first byte, then the whole handshake) within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// RocketMQ's `tls.server.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disabled,
    Permissive,
    Enforcing,
}

/// A server's TLS: its mode and its certificate.
pub struct ServerTls {
    mode: TlsMode,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("mode", &self.mode).finish_non_exhaustive()
    }
}

/// What an accepted connection turned out to be.
pub(crate) enum Accepted {
    Plain(TcpStream),
    /// The loop's end of the socket pair whose other end the TLS bridge holds.
    Tls(UnixStream),
}

impl ServerTls {
    /// Loads a PEM certificate chain and its private key; `None` for `TlsMode::Disabled`.
    ///
    /// # Errors
    /// A file that cannot be read, holds no certificate or key, or a key that does not match.
    pub fn load(mode: TlsMode, cert_path: Option<&Path>, key_path: Option<&Path>) -> Result<Option<Arc<ServerTls>>, String> {
        if mode == TlsMode::Disabled {
            return Ok(None);
        }
        let (Some(cert_path), Some(key_path)) = (cert_path, key_path) else {
            return Err("tls.server.mode is not disabled, so tls.server.certPath and tls.server.keyPath are required".into());
        };
        let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
        let cert_pem = read(cert_path)?;
        let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: {e}", cert_path.display()))?;
        if certs.is_empty() {
            return Err(format!("{}: no PEM certificate", cert_path.display()));
        }
        let key_pem = read(key_path)?;
        let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
            .map_err(|e| format!("{}: {e}", key_path.display()))?
            .ok_or_else(|| format!("{}: no PEM private key (PKCS#8, PKCS#1 or SEC1, unencrypted)", key_path.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("{} and {}: {e}", cert_path.display(), key_path.display()))?;
        Ok(Some(Arc::new(ServerTls {
            mode,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })))
    }

    #[must_use]
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// Tells TLS from plain text (permissive), does the handshake, and starts the bridge.
    pub(crate) async fn accept(&self, socket: TcpStream) -> std::io::Result<Accepted> {
        let timed_out = || std::io::Error::new(std::io::ErrorKind::TimedOut, "no TLS handshake within the time bound");
        if self.mode == TlsMode::Permissive {
            let mut first = [0u8; 1];
            let n = tokio::time::timeout(HANDSHAKE_TIMEOUT, socket.peek(&mut first))
                .await
                .map_err(|_| timed_out())??;
            if n == 0 || first[0] != TLS_HANDSHAKE_RECORD {
                return Ok(Accepted::Plain(socket));
            }
        }
        let mut tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(socket))
            .await
            .map_err(|_| timed_out())??;
        // The bridge's socket pair: two more descriptors, counted like the socket's.
        let Some(share) = crate::descriptors::take(crate::descriptors::TLS_BRIDGE_DESCRIPTORS) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "the process's descriptors for connections are spent; no TLS bridge",
            ));
        };
        let (ours, mut theirs) = UnixStream::pair()?;
        tokio::spawn(async move {
            let _share = share;
            // Ends when either side closes; dropping both ends closes the other side too.
            let _ = tokio::io::copy_bidirectional(&mut tls, &mut theirs).await;
        });
        Ok(Accepted::Tls(ours))
    }
}
