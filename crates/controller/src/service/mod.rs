//! The controller's front: RocketMQ's controller request codes (what brokers in controller mode
//! and mqadmin send) and Petrel's Raft codes, on one remoting listener per controller — the
//! peer address, as RocketMQ's DLedger controller serves both on its DLedger port.
//!
//! Owns: dispatch, the one place a failure becomes a wire answer, the brokers' heartbeats and
//! the leader's scan for dead masters. Must never: change the state except by a Raft proposal.

mod alter;
mod broker_id;
mod clean;
mod elect;
mod heartbeat;
mod metadata;
mod metrics;
mod register;
mod replicas;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::{HeaderError, RemotingCommand};
use petrel_remoting::dispatch::Dispatcher;
use petrel_remoting::{Connection, Handler, Reply, error};

use crate::config::ControllerConfig;
use crate::node::{ControllerNode, ProposeError};
use crate::raft::{RaftGate, is_raft_message, serve_raft};
use crate::state::{Candidate, Command, Outcome, Refused};

pub use heartbeat::{Heartbeat, MAX_LIVE_BROKERS};
pub use metrics::{ControllerCounters, render as render_metrics};

/// Why a request got no success answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    #[error("{0}")]
    Header(#[from] HeaderError),
    #[error("{0}")]
    Body(String),
    #[error("{0}")]
    Propose(#[from] ProposeError),
    #[error("{0}")]
    Refused(#[from] Refused),
}

/// The one place a failure becomes RocketMQ's answer.
fn to_wire(request: &RemotingCommand, failure: &Failure) -> RemotingCommand {
    let code = match failure {
        Failure::Header(_) | Failure::Body(_) => resp::CONTROLLER_INVALID_REQUEST,
        Failure::Propose(ProposeError::NotLeader { .. }) => resp::CONTROLLER_NOT_LEADER,
        Failure::Propose(ProposeError::Unavailable(_)) => resp::CONTROLLER_JRAFT_INTERNAL_ERROR,
        Failure::Refused(r) => r.code,
    };
    error(request, code, failure.to_string())
}

pub(crate) use petrel_protocol::body::SyncStateSetBody;

/// RocketMQ's `SyncStateSet` body for `set` at `epoch`.
pub(crate) fn sync_state_set_body(set: &std::collections::BTreeSet<u64>, epoch: u32) -> Result<Vec<u8>, Failure> {
    let body = SyncStateSetBody {
        sync_state_set: set.iter().map(|id| i64::try_from(*id).unwrap_or(i64::MAX)).collect(),
        sync_state_set_epoch: i32::try_from(epoch).unwrap_or(i32::MAX),
    };
    serde_json::to_vec(&body).map_err(|e| Failure::Body(e.to_string()))
}

/// One controller process: its Raft node, its settings and the brokers it hears from.
pub struct Controller {
    node: ControllerNode,
    config: ControllerConfig,
    live: Mutex<BTreeMap<(String, u64), Heartbeat>>,
    /// (term, when this node became leader in it): dead-master scans wait one heartbeat
    /// timeout into a term, so brokers that heartbeat the old leader are not taken for dead.
    leading_since: Mutex<Option<(u64, Instant)>>,
    counters: ControllerCounters,
    /// Wakes the dead-master scan before its next tick (a broker's connection closed).
    wake_scan: tokio::sync::Notify,
    /// Which connections may send Raft messages (`controllerRaftSecret`).
    raft_gate: RaftGate,
}

impl Controller {
    /// A controller serving `node`'s state, configured by `config`, with no broker heard from yet.
    pub fn new(node: ControllerNode, config: ControllerConfig) -> Arc<Controller> {
        Arc::new(Controller {
            node,
            live: Mutex::new(BTreeMap::new()),
            leading_since: Mutex::new(None),
            counters: ControllerCounters::default(),
            wake_scan: tokio::sync::Notify::new(),
            raft_gate: RaftGate::new(config.raft_secret()),
            config,
        })
    }

    /// Orders `command` through Raft, counting what became of it.
    pub(crate) async fn propose(&self, command: Command) -> Result<Outcome, Failure> {
        let counters = &self.counters;
        match self.node.propose(command).await {
            Ok(Ok(outcome)) => {
                if matches!(outcome, Outcome::Elected { still_exist: false, .. }) {
                    counters.elections.fetch_add(1, Ordering::Relaxed);
                }
                Ok(outcome)
            }
            Ok(Err(refused)) => {
                counters.refused.fetch_add(1, Ordering::Relaxed);
                Err(refused.into())
            }
            Err(e) => {
                counters.not_committed.fetch_add(1, Ordering::Relaxed);
                Err(e.into())
            }
        }
    }

    /// The Raft node this controller proposes to and reads from.
    pub fn node(&self) -> &ControllerNode {
        &self.node
    }

    /// The live brokers of `broker_name`, as election candidates.
    pub(crate) fn candidates(&self, broker_name: &str) -> Vec<Candidate> {
        let now = Instant::now();
        self.live
            .lock()
            .iter()
            .filter(|((name, _), hb)| name == broker_name && hb.alive_at(now))
            .map(|((_, id), hb)| Candidate {
                broker_id: *id,
                epoch: hb.epoch,
                max_offset: hb.max_offset,
                priority: hb.election_priority,
            })
            .collect()
    }

    pub(crate) fn is_alive(&self, broker_name: &str, broker_id: u64) -> bool {
        self.live
            .lock()
            .get(&(broker_name.to_owned(), broker_id))
            .is_some_and(|hb| hb.alive_at(Instant::now()))
    }

    /// The address (`n0:host:port;…`) list getControllerMetaData shows.
    fn peers_text(&self) -> String {
        self.config.peers.0.values().map(|(name, addr)| format!("{name}:{addr};")).collect()
    }
}

/// Answers a request whose answer needs Raft, when Raft has answered.
fn later<F>(request: RemotingCommand, work: F) -> Reply
where
    F: Future<Output = Result<RemotingCommand, Failure>> + Send + 'static,
{
    Reply::Later(Box::pin(async move {
        Some(match work.await {
            Ok(answer) => answer,
            Err(failure) => {
                tracing::debug!(code = request.code, %failure, "controller request refused");
                to_wire(&request, &failure)
            }
        })
    }))
}

fn now_or_fail(request: &RemotingCommand, answered: Result<RemotingCommand, Failure>) -> Reply {
    Reply::Now(answered.unwrap_or_else(|failure| to_wire(request, &failure)))
}

type HandlerFn = fn(&Arc<Controller>, &Arc<Connection>, RemotingCommand) -> Reply;

/// One RocketMQ controller request's declaration. Its rule is `()`: brokers and mqadmin need no
/// signature here, as on RocketMQ's controller; Petrel's Raft messages are served before these,
/// behind the Raft gate (`raft::tcp::serve_raft`).
pub(crate) type Unit = petrel_remoting::dispatch::Declared<(), HandlerFn>;

/// Every request file of a controller, one line each.
const FILES: &[&[Unit]] = &[
    metadata::UNITS,
    heartbeat::UNITS,
    broker_id::UNITS,
    register::UNITS,
    replicas::UNITS,
    elect::UNITS,
    alter::UNITS,
    clean::UNITS,
];

static DISPATCHER: std::sync::LazyLock<Dispatcher<Unit>> = std::sync::LazyLock::new(|| Dispatcher::new(FILES));

/// The request codes a controller answers (besides Petrel's Raft codes).
#[must_use]
pub fn served_codes() -> Vec<i32> {
    DISPATCHER.served_codes().collect()
}

/// The remoting handler of a controller's listener.
pub struct ControllerHandler(pub Arc<Controller>);

impl Handler for ControllerHandler {
    fn on_close(&self, conn: &Arc<Connection>) {
        self.0.raft_gate.closed(conn);
        heartbeat::connection_closed(&self.0, conn.id());
    }

    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        if let Some(answer) = self.0.raft_gate.serve(conn, &request) {
            return Reply::Now(answer);
        }
        if is_raft_message(request.code) && !self.0.raft_gate.admits(conn) {
            return Reply::Now(self.0.raft_gate.refuse(conn, &request));
        }
        if let Some(deferred) = serve_raft(self.0.node.raft(), &request) {
            return Reply::Later(deferred);
        }
        DISPATCHER.dispatch(request, |unit, request| (unit.handle)(&self.0, conn, request))
    }
}

/// A scan this much later than its interval means the process was paused.
const PAUSE_THRESHOLD: Duration = Duration::from_secs(1);

/// The leader's scan for masters that stopped heartbeating: each is replaced by election
/// (RocketMQ's `scanNotActiveBroker` and its inactive-master election). Runs until aborted.
pub async fn scan_for_dead_masters(controller: Arc<Controller>) {
    let every = Duration::from_millis(controller.config.scan_not_active_broker_interval_ms);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_scan = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = controller.wake_scan.notified() => {}
        }
        if last_scan.elapsed() > every + PAUSE_THRESHOLD {
            // This process did not run for a while (SIGSTOP, a stalled VM): the heartbeats
            // that arrived meanwhile are still unread, so silence proves nothing yet. Wait one
            // heartbeat timeout again, as a new leader does.
            tracing::warn!(
                gap_ms = u64::try_from(last_scan.elapsed().as_millis()).unwrap_or(u64::MAX),
                "the scan was held up; waiting a heartbeat timeout before judging brokers dead"
            );
            *controller.leading_since.lock() = None;
        }
        last_scan = Instant::now();
        controller.live.lock().retain(|_, hb| !hb.forgotten_at(Instant::now()));
        if !controller.leading_long_enough() {
            continue;
        }
        let dead: Vec<String> = controller.node.read_local(|state| {
            state
                .broker_sets()
                .filter_map(|set| {
                    set.master
                        .filter(|m| !controller.is_alive(&set.broker_name, *m))
                        .map(|_| set.broker_name.clone())
                })
                .collect()
        });
        for broker_name in dead {
            elect::elect_for_dead_master(&controller, &broker_name).await;
        }
    }
}

impl Controller {
    /// Whether this node has led the group for longer than any broker's heartbeat timeout.
    fn leading_long_enough(&self) -> bool {
        let (id, term, leader) = (self.node.id(), self.node.term(), self.node.leader());
        let mut since = self.leading_since.lock();
        if leader != Some(id) {
            *since = None;
            return false;
        }
        let started = match *since {
            Some((t, at)) if t == term => at,
            _ => {
                *since = Some((term, Instant::now()));
                return false;
            }
        };
        let grace = self
            .live
            .lock()
            .values()
            .map(|hb| hb.timeout)
            .max()
            .unwrap_or(heartbeat::DEFAULT_TIMEOUT);
        started.elapsed() >= grace
    }
}
