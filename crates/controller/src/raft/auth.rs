//! The Raft port's authentication, when the controllers share a secret (`controllerRaftSecret`):
//! a connection must prove it (PETREL_RAFT_HELLO with the connecting side's nonce, answered
//! with ours and our proof; then PETREL_RAFT_AUTH with its proof, see `petrel_auth::PeerSecret`)
//! before any Raft message on it is served. Without it, a VoteRequest with a higher term from
//! anyone would depose the leader. Brokers' and mqadmin's requests on the same port are not
//! affected (they are RocketMQ's codes). Without a secret, Raft messages are served to whoever
//! sends them: the port must then stay on a trusted network.
//!
//! Owns: which connections proved the secret, and the exchanges in progress. Must never: serve a
//! Raft message on a connection that has not proved it (when there is a secret), hold more than
//! [`MAX_PENDING`] exchanges in progress, or keep anything of a closed connection.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use petrel_auth::{Exchange, NONCE_BYTES, PROOF_BYTES, PeerRole, PeerSecret, nonce};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_remoting::{Connection, answer, error};

/// The protocol name proofs are bound to.
const PROTOCOL: &str = "raft";
/// Exchanges begun and not finished, at most (each is one connection's HELLO).
pub const MAX_PENDING: usize = 64;
/// How long a connecting controller waits for each step of the exchange.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a HELLO waits for its AUTH before it is forgotten.
pub const PENDING_EXPIRY: Duration = Duration::from_secs(10);

/// The codes that carry Raft's messages.
#[must_use]
pub fn is_raft_message(code: i32) -> bool {
    matches!(
        code,
        rc::PETREL_RAFT_APPEND_ENTRIES | rc::PETREL_RAFT_VOTE | rc::PETREL_RAFT_INSTALL_SNAPSHOT
    )
}

/// Our nonce and the connecting side's, between HELLO and AUTH, and when HELLO came.
type Nonces = ([u8; NONCE_BYTES], [u8; NONCE_BYTES], std::time::Instant);

/// The TLS session's channel binding, empty on a plain connection.
fn binding_of(conn: &Connection) -> &[u8] {
    conn.channel_binding().map_or(&[][..], |b| &b[..])
}

/// The serving side.
pub struct RaftGate {
    secret: Option<PeerSecret>,
    /// Connection id → the exchange in progress on it.
    pending: Mutex<HashMap<u64, Nonces>>,
    trusted: Mutex<HashSet<u64>>,
    /// Raft messages and exchanges refused, for metrics and logs.
    refused: AtomicU64,
}

impl RaftGate {
    #[must_use]
    pub fn new(secret: Option<PeerSecret>) -> RaftGate {
        RaftGate {
            secret,
            pending: Mutex::new(HashMap::new()),
            trusted: Mutex::new(HashSet::new()),
            refused: AtomicU64::new(0),
        }
    }

    /// Refusals so far.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Whether a Raft message on `conn` may be served.
    #[must_use]
    pub fn admits(&self, conn: &Connection) -> bool {
        self.secret.is_none() || self.trusted.lock().contains(&conn.id())
    }

    /// The answer to a Raft message on a connection that has not proved the secret.
    pub fn refuse(&self, conn: &Connection, request: &RemotingCommand) -> RemotingCommand {
        let n = self.refused.fetch_add(1, Ordering::Relaxed);
        // The first refusals and then one in a thousand: a flood must not flood the log.
        if n < 16 || n.is_multiple_of(1000) {
            tracing::warn!(peer = %conn.peer(), code = request.code, refused = n + 1, "refused a Raft message from a peer that did not prove controllerRaftSecret");
        }
        error(
            request,
            resp::NO_PERMISSION,
            "Raft messages need controllerRaftSecret's proof first",
        )
    }

    /// Answers PETREL_RAFT_HELLO and PETREL_RAFT_AUTH; `None` for any other code.
    pub fn serve(&self, conn: &Connection, request: &RemotingCommand) -> Option<RemotingCommand> {
        if request.code != rc::PETREL_RAFT_HELLO && request.code != rc::PETREL_RAFT_AUTH {
            return None;
        }
        let Some(secret) = &self.secret else {
            return Some(error(request, resp::NO_PERMISSION, "this controller has no controllerRaftSecret"));
        };
        let outcome = if request.code == rc::PETREL_RAFT_HELLO {
            self.hello(conn, secret, &request.body)
        } else {
            self.auth(conn, secret, &request.body).map(|()| Vec::new())
        };
        Some(match outcome {
            Ok(body) => answer(request, resp::SUCCESS).with_body(body),
            Err(why) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(peer = %conn.peer(), why = %why, "refused a controller that did not prove controllerRaftSecret");
                error(request, resp::NO_PERMISSION, why.to_string())
            }
        })
    }

    fn hello(&self, conn: &Connection, secret: &PeerSecret, body: &[u8]) -> Result<Vec<u8>, RaftAuthError> {
        let theirs: [u8; NONCE_BYTES] = body.try_into().map_err(|_| RaftAuthError::BadNonce)?;
        let mut pending = self.pending.lock();
        // An exchange not finished within its time bound is forgotten: HELLOs left hanging on
        // idle connections cannot keep a real controller out.
        pending.retain(|_, (_, _, at)| at.elapsed() < PENDING_EXPIRY);
        if pending.len() >= MAX_PENDING && !pending.contains_key(&conn.id()) {
            return Err(RaftAuthError::Busy(MAX_PENDING));
        }
        let ours = nonce();
        pending.insert(conn.id(), (ours, theirs, std::time::Instant::now()));
        let exchange = Exchange {
            accepting: &ours,
            connecting: &theirs,
            binding: binding_of(conn),
        };
        let proof = secret.proof(PROTOCOL, PeerRole::Accepting, exchange);
        Ok([&ours[..], &proof].concat())
    }

    fn auth(&self, conn: &Connection, secret: &PeerSecret, body: &[u8]) -> Result<(), RaftAuthError> {
        let (ours, theirs, at) = self
            .pending
            .lock()
            .remove(&conn.id())
            .ok_or(RaftAuthError::Refused("no PETREL_RAFT_HELLO before"))?;
        if at.elapsed() >= PENDING_EXPIRY {
            return Err(RaftAuthError::Refused("the exchange took longer than its time bound"));
        }
        let exchange = Exchange {
            accepting: &ours,
            connecting: &theirs,
            binding: binding_of(conn),
        };
        if !secret.verify(PROTOCOL, PeerRole::Connecting, exchange, body) {
            return Err(RaftAuthError::Refused("the proof is wrong (another controllerRaftSecret)"));
        }
        self.trusted.lock().insert(conn.id());
        Ok(())
    }

    /// Forgets a closed connection.
    pub fn closed(&self, conn: &Connection) {
        self.pending.lock().remove(&conn.id());
        self.trusted.lock().remove(&conn.id());
    }
}

/// Why a controller was not let in, or could not get in.
#[derive(Debug, thiserror::Error)]
pub enum RaftAuthError {
    /// The exchange broke off or a proof was wrong; the text says which.
    #[error("{0}")]
    Refused(&'static str),
    #[error("a nonce is {} bytes", NONCE_BYTES)]
    BadNonce,
    /// Too many exchanges are half done.
    #[error("{0} exchanges are in progress; try again")]
    Busy(usize),
    /// The peer answered with a refusal (its remark).
    #[error("the peer refused: {0}")]
    PeerRefused(String),
    #[error(transparent)]
    Call(#[from] petrel_remoting::CallError),
}

/// The connecting side: proves `secret` on a new connection to a peer controller, and checks the
/// peer's proof.
///
/// # Errors
/// The peer does not answer, refuses, or cannot prove the secret itself.
pub async fn authenticate(conn: &Connection, secret: &PeerSecret) -> Result<(), RaftAuthError> {
    let ours = nonce();
    let hello = RemotingCommand::request(rc::PETREL_RAFT_HELLO, 0).with_body(ours.to_vec());
    let reply = conn.call(hello, AUTH_TIMEOUT).await?;
    if reply.code != resp::SUCCESS {
        return Err(RaftAuthError::PeerRefused(reply.remark.unwrap_or_default()));
    }
    if reply.body.len() != NONCE_BYTES + PROOF_BYTES {
        return Err(RaftAuthError::Refused("the peer's answer is not a nonce and a proof"));
    }
    let (theirs, proof) = reply.body.split_at(NONCE_BYTES);
    let exchange = Exchange {
        accepting: theirs,
        connecting: &ours,
        binding: binding_of(conn),
    };
    if !secret.verify(PROTOCOL, PeerRole::Accepting, exchange, proof) {
        return Err(RaftAuthError::Refused(
            "the peer's proof is wrong (another controllerRaftSecret, or a relay between two TLS sessions)",
        ));
    }
    let mine = secret.proof(PROTOCOL, PeerRole::Connecting, exchange);
    let auth = RemotingCommand::request(rc::PETREL_RAFT_AUTH, 0).with_body(mine.to_vec());
    let reply = conn.call(auth, AUTH_TIMEOUT).await?;
    if reply.code != resp::SUCCESS {
        return Err(RaftAuthError::PeerRefused(reply.remark.unwrap_or_default()));
    }
    Ok(())
}
