//! TLS on a server's port, as RocketMQ's `tls.server.mode` configures it: `disabled`,
//! `permissive` (a connection whose first byte opens a TLS handshake record, 0x16, gets TLS; any
//! other is served in plain text, as RocketMQ's `HandshakeHandler` tells them apart) or
//! `enforcing` (TLS only). rustls does the TLS; the decrypted stream is handed to the one
//! read/write loop over a socket pair, so the plain-text path is the same code as without TLS.
//!
//! Owns: loading the certificate and key, telling TLS from plain text, the handshake's time
//! bound, and the bridge task. Must never: let a slow or silent handshake hold a connection past
//! [`HANDSHAKE_TIMEOUT`].

use crate::error::SetupError;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// A client must open its session (its first byte, then the whole handshake) within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a session's channel binding.
pub const CHANNEL_BINDING_BYTES: usize = 32;
/// The RFC 5705 exporter label both ends of Petrel's own connections derive the binding with.
pub const CHANNEL_BINDING_LABEL: &[u8] = b"EXPORTER-petrel-channel-binding";
/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// RocketMQ's `tls.server.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain TCP only.
    Disabled,
    /// Both: a connection whose first byte starts a TLS handshake gets TLS, any other is plain.
    Permissive,
    /// TLS only.
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
    /// The loop's end of the socket pair whose other end the TLS bridge holds, and the session's
    /// channel binding.
    Tls(UnixStream, [u8; CHANNEL_BINDING_BYTES]),
}

/// Copies between a TLS session and the loop's socket pair. When the loop closes its end, the
/// bridge ends at once, whatever the peer does: a peer that never closes its side keeps no task
/// or descriptor past its connection. When the peer closes first, the loop is told (EOF) and the
/// bridge carries what the loop still owes until the loop closes its end too.
async fn bridge<T: tokio::io::AsyncRead + tokio::io::AsyncWrite>(tls: T, plain: UnixStream) {
    let (mut tls_in, mut tls_out) = tokio::io::split(tls);
    let (mut plain_in, mut plain_out) = plain.into_split();
    let inbound = async {
        let _ = tokio::io::copy(&mut tls_in, &mut plain_out).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut plain_out).await;
    };
    let outbound = async {
        let _ = tokio::io::copy(&mut plain_in, &mut tls_out).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls_out).await;
    };
    tokio::pin!(outbound);
    tokio::select! {
        () = &mut outbound => return,
        () = inbound => {}
    }
    outbound.await;
}

/// The session's channel binding (RFC 5705 keying material under [`CHANNEL_BINDING_LABEL`]).
///
/// # Errors
/// The handshake is not finished.
pub fn channel_binding<D>(conn: &rustls::ConnectionCommon<D>) -> std::io::Result<[u8; CHANNEL_BINDING_BYTES]> {
    conn.export_keying_material([0u8; CHANNEL_BINDING_BYTES], CHANNEL_BINDING_LABEL, None)
        .map_err(std::io::Error::other)
}

/// How Petrel's own processes connect over TLS (a controller to its peers, a slave to its
/// master): with a CA file, the server's certificate is verified against it; without, the
/// session is encrypted but the server is not verified — then a shared secret proven over the
/// session, bound to it, is what authenticates the server.
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
    verifies: bool,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("verifies", &self.verifies)
            .finish_non_exhaustive()
    }
}

/// Takes any certificate: for a session whose peer a bound secret authenticates instead.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl ClientTls {
    /// Trusting the CAs of `trust_cert_path` (PEM), or, without one, encrypting without
    /// verifying the server.
    ///
    /// # Errors
    /// The file cannot be read or holds no certificate.
    pub fn load(trust_cert_path: Option<&Path>) -> Result<Arc<ClientTls>, SetupError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
        let (config, verifies) = match trust_cert_path {
            Some(path) => {
                let pem = std::fs::read(path).map_err(SetupError::file(path))?;
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                    roots.add(cert.map_err(SetupError::file(path))?)?;
                }
                if roots.is_empty() {
                    return Err(SetupError::Pem {
                        path: path.to_owned(),
                        why: "no PEM certificate",
                    });
                }
                (builder.with_root_certificates(roots).with_no_client_auth(), true)
            }
            None => (
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                    .with_no_client_auth(),
                false,
            ),
        };
        Ok(Arc::new(ClientTls {
            config: Arc::new(config),
            verifies,
        }))
    }

    /// The rustls configuration (for blocking sessions, as the HA client's).
    #[must_use]
    pub fn config(&self) -> &Arc<rustls::ClientConfig> {
        &self.config
    }

    /// Whether the server's certificate is verified.
    #[must_use]
    pub fn verifies(&self) -> bool {
        self.verifies
    }

    /// The name a server at `addr` (`host:port`) is verified under.
    ///
    /// # Errors
    /// A host that is neither an IP address nor a DNS name.
    pub fn server_name(addr: &str) -> std::io::Result<rustls::pki_types::ServerName<'static>> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
        rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}")))
    }

    /// Opens a session to `addr` over `socket` and bridges it to a socket pair, as a server's
    /// accepted TLS connection is: the loop's end, and the session's channel binding.
    pub(crate) async fn connect(&self, addr: &str, socket: TcpStream) -> std::io::Result<(UnixStream, [u8; CHANNEL_BINDING_BYTES])> {
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(Self::server_name(addr)?, socket))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no TLS handshake within the time bound"))??;
        let binding = channel_binding(tls.get_ref().1)?;
        let (ours, theirs) = UnixStream::pair()?;
        tokio::spawn(bridge(tls, theirs));
        Ok((ours, binding))
    }
}

impl ServerTls {
    /// Loads a PEM certificate chain and its private key; `None` for `TlsMode::Disabled`.
    ///
    /// # Errors
    /// A file that cannot be read, holds no certificate or key, or a key that does not match.
    pub fn load(mode: TlsMode, cert_path: Option<&Path>, key_path: Option<&Path>) -> Result<Option<Arc<ServerTls>>, SetupError> {
        if mode == TlsMode::Disabled {
            return Ok(None);
        }
        let (Some(cert_path), Some(key_path)) = (cert_path, key_path) else {
            return Err(SetupError::TlsConfig(
                "tls.server.mode is not disabled, so tls.server.certPath and tls.server.keyPath are required",
            ));
        };
        let cert_pem = std::fs::read(cert_path).map_err(SetupError::file(cert_path))?;
        let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .map_err(SetupError::file(cert_path))?;
        if certs.is_empty() {
            return Err(SetupError::Pem {
                path: cert_path.to_owned(),
                why: "no PEM certificate",
            });
        }
        let key_pem = std::fs::read(key_path).map_err(SetupError::file(key_path))?;
        let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
            .map_err(SetupError::file(key_path))?
            .ok_or_else(|| SetupError::Pem {
                path: key_path.to_owned(),
                why: "no PEM private key (PKCS#8, PKCS#1 or SEC1, unencrypted)",
            })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        Ok(Some(Arc::new(ServerTls {
            mode,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })))
    }

    /// Whether TLS is optional or required.
    #[must_use]
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// The rustls configuration (for blocking sessions, as the HA server's).
    #[must_use]
    pub fn rustls_config(&self) -> Arc<rustls::ServerConfig> {
        self.acceptor.config().clone()
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
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(socket))
            .await
            .map_err(|_| timed_out())??;
        // The bridge's socket pair: two more descriptors, counted like the socket's.
        let Some(share) = crate::descriptors::take(crate::descriptors::TLS_BRIDGE_DESCRIPTORS) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "the process's descriptors for connections are spent; no TLS bridge",
            ));
        };
        let binding = channel_binding(tls.get_ref().1)?;
        let (ours, theirs) = UnixStream::pair()?;
        tokio::spawn(async move {
            let _share = share;
            bridge(tls, theirs).await;
        });
        Ok(Accepted::Tls(ours, binding))
    }
}

/// `tls.server.mode` in every process's file.
impl petrel_kit::config::ConfigValue for TlsMode {
    const EXPECTED: &'static str = "disabled, permissive or enforcing";
    fn parse(raw: &str) -> Option<Self> {
        match raw.to_ascii_lowercase().as_str() {
            "disabled" => Some(TlsMode::Disabled),
            "permissive" => Some(TlsMode::Permissive),
            "enforcing" => Some(TlsMode::Enforcing),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
        .to_owned()
    }
}
