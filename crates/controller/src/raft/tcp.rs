//! Raft's messages between controller processes, over RocketMQ remoting: Petrel's own request
//! codes (`PETREL_RAFT_*`) with the openraft message as a JSON body, answered with the JSON of
//! the peer's `Result`. One multiplexed connection per peer, opened on first use and again
//! after it drops, shared by every client openraft asks for.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest, VoteResponse,
};
use parking_lot::Mutex;
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_remoting::{CallError, Connection, ConnectionLimits, Deferred, IgnoreRequests, answer, error};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Raft, TypeConfig};

/// How long connecting to a peer may take before the message counts as lost.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The factory openraft asks for a client per peer. openraft asks for new clients for every
/// linearizable read and every election round, so the connections live here, one per peer
/// address (the group's members: a bounded few), and every client shares its peer's.
#[derive(Clone, Default)]
pub struct TcpNetwork {
    connections: Arc<Mutex<HashMap<String, Arc<Connection>>>>,
    /// Proved on every new connection (`controllerRaftSecret`).
    secret: Option<petrel_auth::PeerSecret>,
    /// Connections to peers over TLS, when the controller's port has it.
    tls: Option<Arc<petrel_remoting::ClientTls>>,
}

impl TcpNetwork {
    /// A network whose connections first prove `secret` (none: they prove nothing), over TLS
    /// when `tls` is given.
    #[must_use]
    pub fn new(secret: Option<petrel_auth::PeerSecret>, tls: Option<Arc<petrel_remoting::ClientTls>>) -> TcpNetwork {
        TcpNetwork {
            connections: Arc::default(),
            secret,
            tls,
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for TcpNetwork {
    type Network = TcpPeer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> TcpPeer {
        TcpPeer {
            target,
            addr: node.addr.clone(),
            connections: Arc::clone(&self.connections),
            secret: self.secret.clone(),
            tls: self.tls.clone(),
        }
    }
}

/// A client of one peer controller.
pub struct TcpPeer {
    target: u64,
    addr: String,
    connections: Arc<Mutex<HashMap<String, Arc<Connection>>>>,
    secret: Option<petrel_auth::PeerSecret>,
    tls: Option<Arc<petrel_remoting::ClientTls>>,
}

type RpcResult<T, E = openraft::error::Infallible> = Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

impl TcpPeer {
    async fn call<Req: Serialize, T: DeserializeOwned, E: DeserializeOwned + std::error::Error>(
        &mut self,
        code: i32,
        message: &Req,
        timeout: Duration,
    ) -> RpcResult<T, E> {
        let body = serde_json::to_vec(message).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let conn = self.connection().await?;
        let request = RemotingCommand::request(code, 0).with_body(body);
        let response = conn.call(request, timeout).await.map_err(|e| match e {
            CallError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&e)),
            other => RPCError::Network(NetworkError::new(&other)),
        })?;
        if response.code != resp::SUCCESS {
            let why = std::io::Error::other(format!(
                "peer {} answered code {}: {}",
                self.target,
                response.code,
                response.remark.unwrap_or_default()
            ));
            return Err(RPCError::Network(NetworkError::new(&why)));
        }
        let answered: Result<T, RaftError<u64, E>> =
            serde_json::from_slice(&response.body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answered.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl TcpPeer {
    /// The open connection to this peer, opened if there is none.
    async fn connection<E: std::error::Error>(&self) -> RpcResult<Arc<Connection>, E> {
        if let Some(c) = self.connections.lock().get(&self.addr).filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(c));
        }
        let opened = petrel_remoting::connect_with_tls(
            &self.addr,
            CONNECT_TIMEOUT,
            ConnectionLimits::default(),
            Arc::new(IgnoreRequests),
            self.tls.as_deref(),
        )
        .await
        .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        if let Some(secret) = &self.secret
            && let Err(why) = super::auth::authenticate(&opened, secret).await
        {
            opened.shutdown();
            tracing::warn!(peer = self.target, addr = %self.addr, why = %why, "a peer controller did not prove controllerRaftSecret");
            let e = std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
            return Err(RPCError::Unreachable(Unreachable::new(&e)));
        }
        let mut connections = self.connections.lock();
        if let Some(c) = connections.get(&self.addr).filter(|c| !c.is_closed()) {
            // Another client connected meanwhile: keep one connection per peer.
            opened.shutdown();
            return Ok(Arc::clone(c));
        }
        connections.insert(self.addr.clone(), Arc::clone(&opened));
        Ok(opened)
    }
}

impl RaftNetwork<TypeConfig> for TcpPeer {
    async fn append_entries(&mut self, rpc: AppendEntriesRequest<TypeConfig>, option: RPCOption) -> RpcResult<AppendEntriesResponse<u64>> {
        self.call(rc::PETREL_RAFT_APPEND_ENTRIES, &rpc, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        self.call(rc::PETREL_RAFT_INSTALL_SNAPSHOT, &rpc, option.hard_ttl()).await
    }

    async fn vote(&mut self, rpc: VoteRequest<u64>, option: RPCOption) -> RpcResult<VoteResponse<u64>> {
        self.call(rc::PETREL_RAFT_VOTE, &rpc, option.hard_ttl()).await
    }
}

/// Answers a `PETREL_RAFT_*` request by handing it to `raft`; `None` for any other code.
pub fn serve_raft(raft: &Raft, request: &RemotingCommand) -> Option<Deferred> {
    let raft = raft.clone();
    let request = request.clone();
    let code = request.code;
    if ![
        rc::PETREL_RAFT_APPEND_ENTRIES,
        rc::PETREL_RAFT_VOTE,
        rc::PETREL_RAFT_INSTALL_SNAPSHOT,
    ]
    .contains(&code)
    {
        return None;
    }
    Some(Box::pin(async move {
        let body = match code {
            rc::PETREL_RAFT_APPEND_ENTRIES => decode_then(&request.body, |m| raft.append_entries(m)).await,
            rc::PETREL_RAFT_VOTE => decode_then(&request.body, |m| raft.vote(m)).await,
            _ => decode_then(&request.body, |m| raft.install_snapshot(m)).await,
        };
        Some(match body {
            Ok(body) => answer(&request, resp::SUCCESS).with_body(body),
            Err(why) => error(&request, resp::CONTROLLER_INVALID_REQUEST, why.to_string()),
        })
    }))
}

/// A Raft message or answer that is not the JSON it should be.
#[derive(Debug, thiserror::Error)]
enum RaftWireError {
    #[error("a Raft message that does not decode: {0}")]
    Decode(#[source] serde_json::Error),
    #[error("a Raft answer that does not encode: {0}")]
    Encode(#[source] serde_json::Error),
}

async fn decode_then<M, T, F>(body: &[u8], call: impl FnOnce(M) -> F) -> Result<Vec<u8>, RaftWireError>
where
    M: DeserializeOwned,
    T: Serialize,
    F: std::future::Future<Output = T>,
{
    let message: M = serde_json::from_slice(body).map_err(RaftWireError::Decode)?;
    let answered = call(message).await;
    serde_json::to_vec(&answered).map_err(RaftWireError::Encode)
}
