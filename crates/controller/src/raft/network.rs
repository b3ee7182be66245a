//! An in-process network for Raft: every node's messages are calls on the other nodes'
//! [`Raft`] handles, through a router that can cut links one way or both. The deterministic
//! tests run whole controller groups on it, with partitions, without sockets.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest, VoteResponse,
};
use parking_lot::Mutex;

use super::{Raft, TypeConfig};

#[derive(Default)]
struct Links {
    nodes: BTreeMap<u64, Raft>,
    /// `(from, to)` pairs whose messages are lost.
    cut: BTreeSet<(u64, u64)>,
}

/// The nodes of one in-process group and the links between them.
#[derive(Clone, Default)]
pub struct Router {
    links: Arc<Mutex<Links>>,
}

impl Router {
    /// Makes `raft` reachable as node `id`.
    pub fn add(&self, id: u64, raft: Raft) {
        self.links.lock().nodes.insert(id, raft);
    }

    /// Makes node `id` unreachable, as a crashed process is.
    pub fn remove(&self, id: u64) -> Option<Raft> {
        self.links.lock().nodes.remove(&id)
    }

    /// Cuts every link between `id` and the rest, both ways.
    pub fn isolate(&self, id: u64) {
        let mut links = self.links.lock();
        let others: Vec<u64> = links.nodes.keys().copied().filter(|n| *n != id).collect();
        for other in others {
            links.cut.insert((id, other));
            links.cut.insert((other, id));
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.links.lock().cut.clear();
    }

    /// A network factory for node `from`.
    pub fn network(&self, from: u64) -> RouterNetwork {
        RouterNetwork {
            router: self.clone(),
            from,
            to: from,
        }
    }

    fn target(&self, from: u64, to: u64) -> Result<Raft, Unreachable> {
        let links = self.links.lock();
        if links.cut.contains(&(from, to)) {
            return Err(Unreachable::new(&io::Error::new(
                io::ErrorKind::TimedOut,
                format!("link {from}->{to} is cut"),
            )));
        }
        links
            .nodes
            .get(&to)
            .cloned()
            .ok_or_else(|| Unreachable::new(&io::Error::new(io::ErrorKind::ConnectionRefused, format!("node {to} is down"))))
    }

    /// Whether the answer from `to` reaches `from` (a link cut one way loses the answer).
    fn answer_arrives(&self, from: u64, to: u64) -> Result<(), Unreachable> {
        if self.links.lock().cut.contains(&(to, from)) {
            return Err(Unreachable::new(&io::Error::new(
                io::ErrorKind::TimedOut,
                format!("link {to}->{from} is cut"),
            )));
        }
        Ok(())
    }
}

/// One node's view of the router: a factory, and (per target) a client.
#[derive(Clone)]
pub struct RouterNetwork {
    router: Router,
    from: u64,
    to: u64,
}

impl RaftNetworkFactory<TypeConfig> for RouterNetwork {
    type Network = RouterNetwork;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Self::Network {
        RouterNetwork {
            router: self.router.clone(),
            from: self.from,
            to: target,
        }
    }
}

type RpcResult<T, E = openraft::error::Infallible> = Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

impl RouterNetwork {
    fn deliver<T, E: std::error::Error>(&self, answer: Result<T, RaftError<u64, E>>) -> RpcResult<T, E> {
        self.router.answer_arrives(self.from, self.to).map_err(RPCError::Unreachable)?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }
}

impl RaftNetwork<TypeConfig> for RouterNetwork {
    async fn append_entries(&mut self, rpc: AppendEntriesRequest<TypeConfig>, _option: RPCOption) -> RpcResult<AppendEntriesResponse<u64>> {
        let raft = self.router.target(self.from, self.to).map_err(RPCError::Unreachable)?;
        self.deliver(raft.append_entries(rpc).await)
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        let raft = self.router.target(self.from, self.to).map_err(RPCError::Unreachable)?;
        self.deliver(raft.install_snapshot(rpc).await)
    }

    async fn vote(&mut self, rpc: VoteRequest<u64>, _option: RPCOption) -> RpcResult<VoteResponse<u64>> {
        let raft = self.router.target(self.from, self.to).map_err(RPCError::Unreachable)?;
        self.deliver(raft.vote(rpc).await)
    }
}
