//! BROKER_HEARTBEAT (904): a broker in controller mode says it is alive, with what election
//! needs (its last epoch, max offset, priority). Kept by each controller in memory, not in Raft:
//! liveness is an observation, and it travels into the log only inside the commands that use it.

use super::Unit;
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{BrokerHeartbeatRequestHeader, CommandHeader};
use petrel_remoting::{Connection, Reply, answer};

use super::{Controller, Failure, now_or_fail};

/// A broker that sends no timeout is dead after this long (RocketMQ's `controllerHeartBeatTimeoutMills`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Brokers a controller tracks at once; heartbeats from more are refused.
pub const MAX_LIVE_BROKERS: usize = 16_384;
/// Timeouts a silent broker stays in the table (as dead) before it is forgotten.
const FORGET_AFTER_TIMEOUTS: u32 = 10;

/// The last heartbeat of one broker.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    /// The cluster the broker says it belongs to.
    pub cluster: String,
    /// The broker's address (`host:port`).
    pub broker_addr: String,
    /// The last epoch in the broker's epoch file; 0 when it sent none.
    pub epoch: u32,
    /// The broker's max commit-log offset; election prefers the highest.
    pub max_offset: u64,
    /// The broker's confirm offset: how far its commit log is known to be replicated.
    pub confirm_offset: u64,
    /// `brokerElectionPriority`: lower wins among equals.
    pub election_priority: i32,
    /// When this controller received the heartbeat.
    pub last_seen: Instant,
    /// How long after `last_seen` the broker still counts as alive (the broker's own timeout, or [`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// The connection the heartbeat came on; when it closes, the broker counts as dead at once
    /// (a killed broker's socket closes long before its heartbeat timeout runs out).
    pub connection: u64,
    /// Whether `connection` has closed since the heartbeat.
    pub connection_closed: bool,
}

impl Heartbeat {
    /// Whether the broker counts as alive at `now`: its connection is open and its timeout has not run out.
    pub fn alive_at(&self, now: Instant) -> bool {
        !self.connection_closed && now.saturating_duration_since(self.last_seen) < self.timeout
    }

    pub(crate) fn forgotten_at(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_seen) > self.timeout * FORGET_AFTER_TIMEOUTS
    }
}

pub(super) fn beat(controller: &Arc<Controller>, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
    if request.is_oneway() {
        // RocketMQ's brokers send their heartbeats oneway: nothing to answer, even a refusal.
        if let Err(failure) = record(controller, conn.id(), &request) {
            tracing::debug!(%failure, "heartbeat refused");
        }
        return Reply::None;
    }
    let answered = record(controller, conn.id(), &request).map(|()| answer(&request, resp::SUCCESS).with_remark("Heart beat success"));
    now_or_fail(&request, answered)
}

fn record(controller: &Controller, connection: u64, request: &RemotingCommand) -> Result<(), Failure> {
    let h = BrokerHeartbeatRequestHeader::from_command(request)?;
    let broker_id = h.broker_id.ok_or_else(|| Failure::Body("Heart beat with empty brokerId".into()))?;
    let non_negative = |v: Option<i64>| u64::try_from(v.unwrap_or(0)).unwrap_or(0);
    let timeout_ms = h
        .heartbeat_timeout_mills
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(ms.unsigned_abs()));
    let beat = Heartbeat {
        cluster: h.cluster_name,
        broker_addr: h.broker_addr,
        epoch: u32::try_from(h.epoch.unwrap_or(0)).unwrap_or(0),
        max_offset: non_negative(h.max_offset),
        confirm_offset: non_negative(h.confirm_offset),
        election_priority: h.election_priority.unwrap_or(0),
        last_seen: Instant::now(),
        timeout: timeout_ms,
        connection,
        connection_closed: false,
    };
    let broker_id = u64::try_from(broker_id).map_err(|_| Failure::Body(format!("brokerId {broker_id} is negative")))?;
    let mut live = controller.live.lock();
    let key = (h.broker_name, broker_id);
    if !live.contains_key(&key) && live.len() >= MAX_LIVE_BROKERS {
        return Err(Failure::Body(format!("the controller tracks {MAX_LIVE_BROKERS} brokers already")));
    }
    live.insert(key, beat);
    Ok(())
}

/// A connection closed: every broker whose last heartbeat came on it is dead from now on, and
/// the leader's scan runs at once (RocketMQ's controller does the same on a channel close).
pub(super) fn connection_closed(controller: &Controller, connection: u64) {
    let mut any = false;
    for hb in controller.live.lock().values_mut().filter(|hb| hb.connection == connection) {
        hb.connection_closed = true;
        any = true;
    }
    if any {
        controller.wake_scan.notify_one();
    }
}

/// This file's requests, registered by one line in `service/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::BROKER_HEARTBEAT,
    rule: (),
    handle: beat,
}];
