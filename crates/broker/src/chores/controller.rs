//! A controller-mode broker's dealings with its controllers, as RocketMQ's `ReplicasManager`
//! has them: get an id for this broker in its set (GET_NEXT_BROKER_ID, APPLY_BROKER_ID, kept in
//! `config/brokerIdentity`), register (REGISTER_BROKER), heartbeat every controller, take the
//! role the controllers give (ELECT_MASTER when the set has no master; GET_REPLICA_INFO every
//! `syncBrokerMetadataPeriod` and at once on NOTIFY_BROKER_ROLE_CHANGED), and, while master,
//! keep the SyncStateSet (ALTER_SYNC_STATE_SET: slaves that caught up join, slaves that fell
//! behind or went away leave; the union counts while a change is pending).
//!
//! A broker's role only moves to a higher master epoch, so a stale answer never undoes a newer
//! one, and a master that lost its set (a newer epoch exists) cannot change the SyncStateSet:
//! the controllers refuse its epoch.
//!
//! Owns: the connections to the controllers and the broker's id file. Must never: wait on a
//! controller without a deadline, or take writes before the controllers named this broker
//! master.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::SyncStateSetBody;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
    CommandHeader, ControllerMetadataResponseHeader, ElectMasterRequestHeader, ExchangeHaInfoHeader, GetNextBrokerIdHeader,
    GetReplicaInfoRequestHeader, MasterInfoHeader, RegisterBrokerToControllerRequestHeader,
};
use petrel_remoting::{Connection, ConnectionLimits, IgnoreRequests};

use super::ChoreError;
use crate::broker::Broker;
use crate::replication::Controlled;

const CALL_TIMEOUT: Duration = Duration::from_secs(3);
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Connecting to a new master and its answer to EXCHANGE_BROKER_HA_INFO, each.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
const IDENTITY_FILE: &str = "config/brokerIdentity";

/// The controllers and a connection to each.
struct Controllers {
    addrs: Vec<String>,
    conns: parking_lot::Mutex<HashMap<String, Arc<Connection>>>,
    leader: parking_lot::Mutex<Option<String>>,
}

impl Controllers {
    fn new(list: &str) -> Controllers {
        Controllers {
            addrs: list
                .split(';')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            conns: parking_lot::Mutex::new(HashMap::new()),
            leader: parking_lot::Mutex::new(None),
        }
    }

    async fn conn(&self, addr: &str) -> Result<Arc<Connection>, ChoreError> {
        if let Some(c) = self.conns.lock().get(addr).filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        // Not under the lock: an unreachable controller delays nobody else.
        let c = petrel_remoting::connect(addr, CALL_TIMEOUT, ConnectionLimits::default(), Arc::new(IgnoreRequests))
            .await
            .map_err(ChoreError::call(addr))?;
        self.conns.lock().insert(addr.to_owned(), c.clone());
        Ok(c)
    }

    /// The leader's address, asking the controllers in turn when it is not known.
    async fn leader(&self) -> Result<String, ChoreError> {
        if let Some(l) = self.leader.lock().clone() {
            return Ok(l);
        }
        for addr in &self.addrs {
            let Ok(c) = self.conn(addr).await else { continue };
            let Ok(answer) = c
                .call(RemotingCommand::request(rc::CONTROLLER_GET_METADATA_INFO, 0), CALL_TIMEOUT)
                .await
            else {
                continue;
            };
            if let Ok(h) = ControllerMetadataResponseHeader::from_command(&answer)
                && let Some(leader) = h.controller_leader_address.filter(|l| !l.is_empty())
            {
                *self.leader.lock() = Some(leader.clone());
                return Ok(leader);
            }
        }
        Err(ChoreError::Unusable(format!("no controller of {:?} names a leader", self.addrs)))
    }

    /// `request` to the leader; a refusal is an error naming its code and remark.
    async fn call(&self, request: RemotingCommand) -> Result<RemotingCommand, ChoreError> {
        let leader = self.leader().await?;
        let result = match self.conn(&leader).await {
            Ok(c) => c.call(request, CALL_TIMEOUT).await.map_err(ChoreError::call(&leader)),
            Err(e) => Err(e),
        };
        match result {
            Ok(a) if a.code == resp::SUCCESS => Ok(a),
            Ok(a) => {
                if a.code == resp::CONTROLLER_NOT_LEADER {
                    *self.leader.lock() = None;
                }
                Err(ChoreError::refused(&leader, a))
            }
            Err(e) => {
                *self.leader.lock() = None;
                Err(e)
            }
        }
    }
}

/// Runs until the task is dropped.
pub async fn run(broker: Arc<Broker>) {
    let Some(controlled) = broker.replication.controlled().cloned() else {
        return;
    };
    let controllers = Arc::new(Controllers::new(&broker.config.controller_addr));
    let own_id = loop {
        match register(&broker, &controllers).await {
            Ok(id) => break id,
            Err(e) => {
                tracing::warn!(error = %e, "registering with the controllers failed; retrying");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    };
    tracing::info!(broker_id = own_id, "registered with the controllers");
    tokio::spawn(heartbeats(broker.clone(), controllers.clone(), own_id));
    let mut sync = tokio::time::interval(Duration::from_millis(broker.config.sync_broker_metadata_period_ms));
    let mut check = tokio::time::interval(Duration::from_millis(broker.config.check_sync_state_set_period_ms));
    // A call that waited out its deadline is not followed by a burst of the ticks it missed.
    sync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut state = SetState::default();
    let ctx = Ctx {
        broker: &broker,
        controlled: &controlled,
        controllers: &controllers,
        own_id,
    };
    loop {
        tokio::select! {
            _ = sync.tick() => {}
            () = controlled.role_changed.notified() => {}
            _ = check.tick() => {
                if broker.role.is_master() && let Err(e) = check_sync_state_set(&ctx, &mut state).await {
                    tracing::warn!(error = %e, "changing the SyncStateSet failed");
                }
                continue;
            }
        }
        if let Err(e) = sync_role(&ctx, &mut state).await {
            tracing::debug!(error = %e, "asking the controllers for this set's master failed");
        }
    }
}

/// What the role chores work with.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    broker: &'a Broker,
    controlled: &'a Controlled,
    controllers: &'a Controllers,
    /// This broker's id in its set.
    own_id: u64,
}

/// The SyncStateSet this master last had confirmed.
#[derive(Default)]
struct SetState {
    members: BTreeSet<u64>,
    epoch: i32,
    /// The HA server the master of an epoch named (EXCHANGE_BROKER_HA_INFO).
    master_ha: Option<KnownHa>,
}

/// A master's HA server as it named it, for the epoch it was asked in: a later epoch asks again
/// (the master may have restarted on another port).
struct KnownHa {
    master_addr: String,
    epoch: i32,
    ha_addr: String,
}

/// This broker's id in its set: from `config/brokerIdentity`, else applied for and written
/// there; then REGISTER_BROKER, taking the role the answer names (or electing).
async fn register(broker: &Broker, controllers: &Controllers) -> Result<u64, ChoreError> {
    let c = &broker.config;
    let path = c.store_path_root_dir.join(IDENTITY_FILE);
    let id = match std::fs::read_to_string(&path).ok().and_then(|t| t.trim().parse::<u64>().ok()) {
        Some(id) => id,
        None => {
            let header = GetNextBrokerIdHeader {
                cluster_name: c.broker_cluster_name.clone(),
                broker_name: c.broker_name.clone(),
                next_broker_id: None,
            };
            let answer = controllers
                .call(RemotingCommand::request(rc::CONTROLLER_GET_NEXT_BROKER_ID, 0).with_ext_fields(header.to_ext()))
                .await?;
            let next = GetNextBrokerIdHeader::from_command(&answer)
                .ok()
                .and_then(|h| h.next_broker_id)
                .ok_or_else(|| ChoreError::Unusable("no nextBrokerId in the answer".into()))?;
            let apply = ApplyBrokerIdRequestHeader {
                cluster_name: c.broker_cluster_name.clone(),
                broker_name: c.broker_name.clone(),
                applied_broker_id: next,
                register_check_code: format!("{};{}", broker.store_host, crate::now_ms()),
            };
            controllers
                .call(RemotingCommand::request(rc::CONTROLLER_APPLY_BROKER_ID, 0).with_ext_fields(apply.to_ext()))
                .await?;
            crate::persist::write_atomically(&path, next.to_string().as_bytes()).map_err(|source| ChoreError::Io {
                what: "writing config/brokerIdentity",
                source,
            })?;
            u64::try_from(next).map_err(|_| ChoreError::Unusable(format!("the controllers gave id {next}")))?
        }
    };
    let header = RegisterBrokerToControllerRequestHeader {
        cluster_name: c.broker_cluster_name.clone(),
        broker_name: c.broker_name.clone(),
        broker_id: Some(id as i64),
        broker_address: broker.store_host.to_string(),
        invoke_time: Some(crate::now_ms()),
    };
    controllers
        .call(RemotingCommand::request(rc::CONTROLLER_REGISTER_BROKER, 0).with_ext_fields(header.to_ext()))
        .await?;
    Ok(id)
}

/// BROKER_HEARTBEAT to every controller (a new leader knows the live brokers at once).
async fn heartbeats(broker: Arc<Broker>, controllers: Arc<Controllers>, own_id: u64) {
    let mut tick = tokio::time::interval(Duration::from_millis(broker.config.broker_heartbeat_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let epochs = broker.replication.controlled().map(|c| c.epochs.clone());
    loop {
        tick.tick().await;
        if broker.replication.controlled().is_some_and(|c| c.silent()) {
            continue;
        }
        let c = &broker.config;
        let header = BrokerHeartbeatRequestHeader {
            cluster_name: c.broker_cluster_name.clone(),
            broker_addr: broker.store_host.to_string(),
            broker_name: c.broker_name.clone(),
            broker_id: Some(own_id as i64),
            epoch: epochs.as_ref().map(|e| e.last_epoch()),
            max_offset: Some(broker.store.commit_log().max_offset() as i64),
            confirm_offset: broker.store.commit_log().reader_gate().map(|g| g as i64),
            heartbeat_timeout_mills: Some(c.controller_heart_beat_timeout_ms as i64),
            election_priority: Some(c.broker_election_priority),
        };
        let request = RemotingCommand::request(rc::BROKER_HEARTBEAT, 0).with_ext_fields(header.to_ext());
        // All at once: an unreachable controller does not hold the others' heartbeats back.
        let beats = controllers.addrs.iter().map(|addr| {
            let request = request.clone();
            let controllers = &controllers;
            async move {
                if let Ok(conn) = controllers.conn(addr).await {
                    let _ = conn.oneway(request);
                }
            }
        });
        futures::future::join_all(beats).await;
    }
}

/// GET_REPLICA_INFO, electing when the set has no master, and the role the answer names.
async fn sync_role(ctx: &Ctx<'_>, state: &mut SetState) -> Result<(), ChoreError> {
    let Ctx {
        broker,
        controllers,
        own_id,
        ..
    } = *ctx;
    let header = GetReplicaInfoRequestHeader {
        broker_name: broker.config.broker_name.clone(),
    };
    let mut answer = controllers
        .call(RemotingCommand::request(rc::CONTROLLER_GET_REPLICA_INFO, 0).with_ext_fields(header.to_ext()))
        .await?;
    let mut info = MasterInfoHeader::from_command(&answer).map_err(|source| ChoreError::Header {
        what: "the replica info",
        source,
    })?;
    if info.master_broker_id.is_none_or(|m| m < 0) || info.master_address.as_deref().is_none_or(str::is_empty) {
        let elect = ElectMasterRequestHeader {
            cluster_name: Some(broker.config.broker_cluster_name.clone()),
            broker_name: broker.config.broker_name.clone(),
            broker_id: Some(own_id as i64),
            designate_elect: Some(false),
            invoke_time: Some(crate::now_ms()),
        };
        answer = controllers
            .call(RemotingCommand::request(rc::CONTROLLER_ELECT_MASTER, 0).with_ext_fields(elect.to_ext()))
            .await?;
        info = MasterInfoHeader::from_command(&answer).map_err(|source| ChoreError::Header {
            what: "the replica info",
            source,
        })?;
    }
    let set: SyncStateSetBody = petrel_protocol::body::from_json(&answer.body).map_err(|source| ChoreError::Body {
        what: "the SyncStateSet",
        source,
    })?;
    let other_master = match (info.master_broker_id, info.master_address.as_deref(), info.master_epoch) {
        (Some(id), Some(addr), Some(epoch)) if id != own_id as i64 && !addr.is_empty() => Some((addr.to_owned(), epoch)),
        _ => None,
    };
    // The role first, with the master's HA server if it is known already: a master that must
    // step down never waits on the network to do so.
    let known = other_master
        .as_ref()
        .and_then(|(addr, epoch)| known_master_ha(broker, addr, *epoch, state));
    apply_role(ctx, &info, &set, known.clone(), state)?;
    if let (Some((addr, epoch)), None) = (other_master, known)
        && !broker.role.is_master()
        && let Some(ha_addr) = resolve_master_ha(broker, &addr, epoch, state).await
    {
        ctx.controlled.follow(Some(ha_addr));
    }
    Ok(())
}

fn members(set: &SyncStateSetBody) -> BTreeSet<u64> {
    set.sync_state_set.iter().filter_map(|id| u64::try_from(*id).ok()).collect()
}

/// Takes the role `info` names if its epoch is newer than this broker's; on a master, takes a
/// newer SyncStateSet of the same epoch.
fn apply_role(
    ctx: &Ctx<'_>,
    info: &MasterInfoHeader,
    set: &SyncStateSetBody,
    master_ha: Option<String>,
    state: &mut SetState,
) -> Result<(), ChoreError> {
    let Ctx {
        broker,
        controlled,
        own_id,
        ..
    } = *ctx;
    let (Some(master_id), Some(master_addr), Some(epoch)) = (info.master_broker_id, info.master_address.clone(), info.master_epoch) else {
        return Err(ChoreError::Unusable("the set has no master".into()));
    };
    let role = &broker.role;
    if epoch > role.master_epoch() || (role.broker_id() == crate::role::UNKNOWN_ID) {
        if master_id == own_id as i64 {
            let sss = members(set);
            controlled.become_master(epoch, own_id, &sss).map_err(|e| {
                // Not a passing network error: the set has no master until this changes.
                tracing::warn!(epoch, error = %e, "the controllers name this broker master, but it cannot take the role");
                e
            })?;
            *state = SetState {
                members: sss,
                epoch: set.sync_state_set_epoch,
                master_ha: None,
            };
            role.become_master(epoch, &broker.store_host.to_string());
        } else {
            role.become_slave(epoch, own_id as i64, &master_addr);
            controlled.become_slave(own_id, master_ha)?;
            tracing::info!(epoch, master = %master_addr, "following the new master");
        }
        broker.registrar.request();
    } else if epoch == role.master_epoch() {
        if role.is_master() && set.sync_state_set_epoch > state.epoch {
            state.members = members(set);
            state.epoch = set.sync_state_set_epoch;
            controlled.set_sync_state_set(own_id, &state.members);
        } else if !role.is_master()
            && let Some(ha_addr) = master_ha
        {
            controlled.follow(Some(ha_addr));
        }
    }
    Ok(())
}

/// The master's HA server if this broker knows it without asking: as the master itself named it
/// in this epoch (EXCHANGE_BROKER_HA_INFO, kept), else as the name servers name it when they name
/// this master.
fn known_master_ha(broker: &Broker, master_addr: &str, epoch: i32, state: &SetState) -> Option<String> {
    if let Some(known) = state
        .master_ha
        .as_ref()
        .filter(|k| k.master_addr == master_addr && k.epoch == epoch)
    {
        return Some(known.ha_addr.clone());
    }
    broker
        .registrar
        .learned_master()
        .filter(|m| m.addr == master_addr)
        .map(|m| m.ha_addr)
}

/// Asks the master where its HA server listens, as RocketMQ's slave does before it connects, and
/// keeps the answer for this epoch. `None` while the master cannot say (it has not taken the role
/// yet, or is unreachable): the next sync asks again, and meanwhile the slave keeps what it
/// follows. Only a broker that does not know the request (REQUEST_CODE_NOT_SUPPORTED) is taken
/// to listen on its remoting port plus one, the default `haListenPort`. Guessing otherwise would
/// be wrong in a way that costs: a slave that streamed from a guessed address and then moved to
/// the real one (another name of the same server, such as RocketMQ's `brokerIP2`) dropped a
/// connection that was in sync, and the master took it out of the SyncStateSet.
async fn resolve_master_ha(broker: &Broker, master_addr: &str, epoch: i32, state: &mut SetState) -> Option<String> {
    // The name servers' answer to this broker's registration names the master's HA server too.
    broker.registrar.request();
    match ask_master_ha_addr(broker, master_addr).await {
        Ok(HaAnswer::Named(ha_addr)) => {
            state.master_ha = Some(KnownHa {
                master_addr: master_addr.to_owned(),
                epoch,
                ha_addr: ha_addr.clone(),
            });
            Some(ha_addr)
        }
        Ok(HaAnswer::NotYet) => {
            tracing::debug!(master = %master_addr, "the master names no HA server yet; asking again at the next sync");
            None
        }
        Ok(HaAnswer::Unsupported) => Some(match master_addr.rsplit_once(':') {
            Some((host, port)) => format!("{host}:{}", port.parse::<u16>().map_or(0, |p| p.saturating_add(1))),
            None => master_addr.to_owned(),
        }),
        Err(e) => {
            tracing::debug!(master = %master_addr, error = %e, "asking the master for its HA server failed");
            None
        }
    }
}

/// What a master answered EXCHANGE_BROKER_HA_INFO.
enum HaAnswer {
    /// Its HA server, `host:port`.
    Named(String),
    /// SUCCESS without an address: it is not master (yet).
    NotYet,
    /// It does not serve the request.
    Unsupported,
}

/// EXCHANGE_BROKER_HA_INFO to the master, as RocketMQ's slave sends it (no `masterHaAddress`).
async fn ask_master_ha_addr(broker: &Broker, master_addr: &str) -> Result<HaAnswer, ChoreError> {
    let conn = petrel_remoting::connect(master_addr, ASK_TIMEOUT, ConnectionLimits::default(), Arc::new(IgnoreRequests))
        .await
        .map_err(ChoreError::call(master_addr))?;
    let mut request = RemotingCommand::request(rc::EXCHANGE_BROKER_HA_INFO, 0).with_ext_fields(ExchangeHaInfoHeader::default().to_ext());
    broker.access.sign(&mut request);
    let answer = conn.call(request, ASK_TIMEOUT).await;
    conn.shutdown();
    let answer = answer.map_err(ChoreError::call(master_addr))?;
    match answer.code {
        resp::SUCCESS => {}
        resp::REQUEST_CODE_NOT_SUPPORTED => return Ok(HaAnswer::Unsupported),
        _ => return Err(ChoreError::refused(master_addr, answer)),
    }
    let header = ExchangeHaInfoHeader::from_command(&answer).map_err(|source| ChoreError::Header {
        what: "the master's HA info",
        source,
    })?;
    Ok(header
        .master_ha_address
        .filter(|a| !a.is_empty())
        .map_or(HaAnswer::NotYet, HaAnswer::Named))
}

/// A master's SyncStateSet check: who joins, who leaves, and ALTER_SYNC_STATE_SET when that
/// changes the set; the union of old and new counts while the controllers decide.
async fn check_sync_state_set(ctx: &Ctx<'_>, state: &mut SetState) -> Result<(), ChoreError> {
    let Ctx {
        broker,
        controlled,
        controllers,
        own_id,
    } = *ctx;
    let gate = controlled.ha.gate();
    let epoch_start = controlled.epochs.entries().last().map_or(0, |e| e.start_offset);
    let leave: BTreeSet<u64> = gate
        .shrink_candidates(Duration::from_millis(broker.config.ha_max_time_slave_not_catchup_ms))
        .into_iter()
        .collect();
    let mut proposed: BTreeSet<u64> = state.members.iter().copied().filter(|m| !leave.contains(m)).collect();
    let joiners: BTreeSet<u64> = gate
        .expand_candidates(epoch_start)
        .into_iter()
        .filter(|j| !state.members.contains(j))
        .collect();
    // The union counts from here on; a joiner is counted only if it holds what is confirmed at
    // the very moment it starts to count.
    let joined = if joiners.is_empty() {
        joiners
    } else {
        controlled.admit_joiners(own_id, &state.members, &joiners)
    };
    proposed.extend(joined);
    proposed.insert(own_id);
    if proposed == state.members {
        return Ok(());
    }
    let union: BTreeSet<u64> = proposed.union(&state.members).copied().collect();
    controlled.set_sync_state_set(own_id, &union);
    let header = AlterSyncStateSetRequestHeader {
        broker_name: broker.config.broker_name.clone(),
        master_broker_id: own_id as i64,
        master_epoch: broker.role.master_epoch(),
        invoke_time: Some(crate::now_ms()),
    };
    let body = SyncStateSetBody {
        sync_state_set: proposed.iter().map(|id| *id as i64).collect(),
        sync_state_set_epoch: state.epoch,
    };
    let request = RemotingCommand::request(rc::CONTROLLER_ALTER_SYNC_STATE_SET, 0)
        .with_ext_fields(header.to_ext())
        .with_body(petrel_protocol::body::to_json(&body).into_bytes());
    match controllers.call(request).await {
        Ok(answer) => {
            let epoch = AlterSyncStateSetResponseHeader::from_command(&answer)
                .map(|h| h.new_sync_state_set_epoch)
                .unwrap_or(state.epoch + 1);
            tracing::info!(from = ?state.members, to = ?proposed, epoch, "SyncStateSet changed");
            state.members = proposed;
            state.epoch = epoch;
            controlled.set_sync_state_set(own_id, &state.members);
            Ok(())
        }
        Err(e) => {
            controlled.set_sync_state_set(own_id, &state.members);
            Err(e)
        }
    }
}
