//! A slave's chores: follow the master the name servers name (unless `haMasterAddress` fixes
//! it), and take the master's metadata over remoting — topics (GET_ALL_TOPIC_CONFIG), committed
//! consumer offsets (GET_ALL_CONSUMER_OFFSET) and consumer groups
//! (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and the delay levels' offsets (GET_ALL_DELAY_OFFSET) and timer checkpoint (GET_TIMER_CHECK_POINT) — as RocketMQ's `SlaveSynchronize` does, but every
//! [`SYNC_PERIOD`] rather than every 60 s: a topic created on the master is readable on the slave
//! within seconds, and offsets a consumer would resume from are at most that old.
//!
//! Owns: the slave's connection to its master's remoting port. Must never: wait on the master
//! without a deadline, or stop the slave when the master is away.

use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{TopicConfigSerializeWrapper, from_json};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_remoting::{Connection, ConnectionLimits, IgnoreRequests};

use super::ChoreError;
use crate::broker::Broker;
use crate::services::schedule::DelayOffsetTable;
use crate::services::timer::TimerCheckpoint;

/// Between two looks at the master (its address, its topics).
pub const SYNC_PERIOD: Duration = Duration::from_secs(3);
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs until the task is dropped.
pub async fn run(broker: Arc<Broker>) {
    let mut tick = tokio::time::interval(SYNC_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut conn: Option<(String, Arc<Connection>)> = None;
    loop {
        tick.tick().await;
        if broker.replication.controlled().is_some() {
            // Controller mode: while a slave, take the metadata of the master the controllers named.
            let Some(master) = broker.role.master_addr().filter(|_| !broker.role.is_master()) else {
                continue;
            };
            if let Err(e) = sync_metadata(&broker, &master, &mut conn).await {
                tracing::debug!(master = %master, error = %e, "metadata sync from the master failed; retrying");
                conn = None;
            }
            continue;
        }
        let Some(slave) = broker.replication.slave() else { return };
        let learned = broker.registrar.learned_master();
        if learned.is_none() {
            // Until a master registers, ask again sooner than the registration period.
            broker.registrar.request();
        }
        if broker.config.ha_master_address.is_none() {
            slave.set_master(learned.as_ref().map(|m| m.ha_addr.clone()));
        }
        let Some(master) = learned else { continue };
        if let Err(e) = sync_metadata(&broker, &master.addr, &mut conn).await {
            tracing::debug!(master = %master.addr, error = %e, "metadata sync from the master failed; retrying");
            conn = None;
        }
    }
}

async fn sync_metadata(broker: &Broker, addr: &str, conn: &mut Option<(String, Arc<Connection>)>) -> Result<(), ChoreError> {
    if conn.as_ref().is_none_or(|(a, c)| a != addr || c.is_closed()) {
        let c = petrel_remoting::connect(addr, CALL_TIMEOUT, ConnectionLimits::default(), Arc::new(IgnoreRequests))
            .await
            .map_err(ChoreError::call(addr))?;
        *conn = Some((addr.to_owned(), c));
    }
    let (_, c) = conn.as_ref().ok_or_else(|| ChoreError::Unusable("no connection".into()))?;
    let table: TopicConfigSerializeWrapper =
        from_json(&fetch(c, &broker.access, rc::GET_ALL_TOPIC_CONFIG).await?).map_err(|source| ChoreError::Body {
            what: "the master's topics",
            source,
        })?;
    broker.topics.replace_from_master(table);
    let offsets = fetch(c, &broker.access, rc::GET_ALL_CONSUMER_OFFSET).await?;
    broker.offsets.table().merge_from_master(&offsets)?;
    let groups = fetch(c, &broker.access, rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG).await?;
    broker.groups.merge_from_master(&groups)?;
    match fetch(c, &broker.access, rc::GET_ALL_MESSAGE_REQUEST_MODE).await {
        Ok(modes) => broker.pop.replace_modes_from_master(&modes)?,
        Err(e) => tracing::debug!(error = %e, "no message request modes from the master"),
    }
    // A RocketMQ master that never scheduled a message answers SYSTEM_ERROR ("No delay offset in
    // this broker"): nothing to copy, and no reason to fail the rest of the sync.
    match fetch(c, &broker.access, rc::GET_ALL_DELAY_OFFSET).await {
        Ok(body) => {
            let delays: DelayOffsetTable = from_json(&body).map_err(|source| ChoreError::Body {
                what: "the master's delay offsets",
                source,
            })?;
            broker.schedule.merge(&delays);
        }
        Err(e) => tracing::debug!(error = %e, "no delay offsets from the master"),
    }
    // Petrel's own checkpoint layout: a RocketMQ master's (binary) is not taken.
    match fetch(c, &broker.access, rc::GET_TIMER_CHECK_POINT)
        .await
        .map(|body| from_json::<TimerCheckpoint>(&body))
    {
        Ok(Ok(checkpoint)) => broker.timer.restore(&checkpoint),
        Ok(Err(e)) => tracing::debug!(error = %e, "the master's timer checkpoint is not Petrel's"),
        Err(e) => tracing::debug!(error = %e, "no timer checkpoint from the master"),
    }
    let (schedule, timer) = (broker.schedule.clone(), broker.timer.clone());
    super::write_off_runtime("the copied delay offsets and timer checkpoint", move || {
        schedule.persist()?;
        timer.persist()
    })
    .await;
    Ok(())
}

/// The body of the master's answer to `code`.
async fn fetch(c: &Connection, access: &crate::access::Access, code: i32) -> Result<bytes::Bytes, ChoreError> {
    let mut request = RemotingCommand::request(code, 0);
    access.sign(&mut request);
    let peer = c.peer().to_string();
    let answer = c.call(request, CALL_TIMEOUT).await.map_err(ChoreError::call(&peer))?;
    if answer.code != resp::SUCCESS {
        return Err(ChoreError::refused(&format!("{peer} (request {code})"), answer));
    }
    Ok(answer.body)
}
