//! One connection to a broker or name server: `petrel-remoting`'s multiplexed connection, with
//! the client's error type.
//!
//! Owns: nothing beyond the address it was made for. Must never: leave a caller waiting after
//! the connection died (the transport fails every waiter when it closes).

use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_remoting::{CallError, ConnectionLimits, IgnoreRequests};

use crate::error::ClientError;

/// How long a connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An access key and its secret: every request is signed with them, as `AclClientRPCHook` does.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The access key, sent with every request.
    pub access_key: String,
    /// The secret key, used to compute the signature and never sent.
    pub secret_key: String,
}

/// A multiplexed connection to one broker or name server, signing requests when given credentials.
pub struct Connection {
    /// The address connected to, `host:port`.
    pub addr: String,
    inner: Arc<petrel_remoting::Connection>,
    signer: Option<Arc<Credentials>>,
}

fn client_error(addr: &str, e: CallError) -> ClientError {
    match e {
        CallError::Connect { addr, source } => ClientError::Connect { addr, source },
        CallError::Closed(_) => ClientError::Closed(addr.to_owned()),
        CallError::Timeout { timeout, .. } => ClientError::Timeout {
            addr: addr.to_owned(),
            timeout,
        },
        CallError::Busy(n) => ClientError::Busy(format!("{n} calls already wait on the connection to {addr}")),
    }
}

impl Connection {
    /// Connects to `addr`; requests the server sends (notifications) are ignored.
    ///
    /// # Errors
    /// The address cannot be reached.
    pub async fn connect(addr: &str) -> Result<Arc<Connection>, ClientError> {
        Self::connect_signed(addr, None).await
    }

    /// [`Connection::connect`], signing every request with `signer` when given.
    ///
    /// # Errors
    /// The address cannot be reached.
    pub async fn connect_signed(addr: &str, signer: Option<Arc<Credentials>>) -> Result<Arc<Connection>, ClientError> {
        let inner = petrel_remoting::connect(addr, CONNECT_TIMEOUT, ConnectionLimits::default(), Arc::new(IgnoreRequests))
            .await
            .map_err(|e| client_error(addr, e))?;
        Ok(Arc::new(Connection {
            addr: addr.to_owned(),
            inner,
            signer,
        }))
    }

    /// Whether the connection is still open.
    #[must_use]
    pub fn is_alive(&self) -> bool {
        !self.inner.is_closed()
    }

    /// Sends `request` and waits for its answer.
    ///
    /// # Errors
    /// The connection closed, too many calls wait, or no answer came within `timeout`.
    pub async fn call(&self, request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ClientError> {
        let request = self.signed(request);
        self.inner.call(request, timeout).await.map_err(|e| client_error(&self.addr, e))
    }

    /// Sends `request` marked oneway; no answer comes.
    ///
    /// # Errors
    /// The connection closed or its queue is full.
    pub async fn oneway(&self, request: RemotingCommand) -> Result<(), ClientError> {
        let request = self.signed(request);
        self.inner.oneway(request).map_err(|e| client_error(&self.addr, e))
    }

    fn signed(&self, mut request: RemotingCommand) -> RemotingCommand {
        if let Some(c) = &self.signer {
            petrel_auth::sign(&mut request, &c.access_key, &c.secret_key);
        }
        request
    }

    /// Closes the connection.
    pub fn close(&self) {
        self.inner.shutdown();
    }
}
