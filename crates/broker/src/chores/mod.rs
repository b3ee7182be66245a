//! The broker's background chores, one file each: registration with name servers, writing
//! consumer offsets, expiring silent clients. The metadata writers (topics, groups) run from
//! here too.
//!
//! Owns: starting them. Must never: run blocking work on a runtime worker (file writes go to
//! the blocking pool).

pub mod controller;
mod cursor;
mod error;
pub mod expiry;
pub mod lmq_cleanup;
pub mod offset_flush;
pub mod registration;
pub mod schedule;
pub mod slave_sync;
pub mod timer;
pub mod transaction_check;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::broker::Broker;
pub use error::ChoreError;

/// Starts every chore of `broker` in `tasks` (they run until the set is dropped or aborted).
pub fn start(broker: &Arc<Broker>, tasks: &mut JoinSet<()>) {
    let (topics, job) = broker.topics.persister();
    tasks.spawn(topics.run(job));
    let (groups, job) = broker.groups.persister();
    tasks.spawn(groups.run(job));
    let (request_modes, job) = broker.pop.persister();
    tasks.spawn(request_modes.run(job));
    let (registrations, job) = broker.registrar.worker();
    tasks.spawn(registrations.run(job));
    tasks.spawn(registration::run_periodic(
        broker.registrar.clone(),
        Duration::from_millis(broker.config.register_name_server_period_ms),
    ));
    tasks.spawn(offset_flush::run(
        broker.offsets.table().clone(),
        Duration::from_millis(broker.config.flush_consumer_offset_interval_ms),
    ));
    tasks.spawn(expiry::run(
        broker.groups.clone(),
        Duration::from_millis(broker.config.channel_expired_timeout_ms),
    ));
    tasks.spawn(schedule::run(broker.clone()));
    tasks.spawn(timer::run(broker.clone()));
    tasks.spawn(transaction_check::run(broker.clone()));
    if broker.config.lmq() {
        tasks.spawn(lmq_cleanup::run(
            broker.clone(),
            Duration::from_secs(broker.config.lmq_cleanup_interval_s),
        ));
    }
    if broker.replication.controlled().is_some() {
        tasks.spawn(controller::run(broker.clone()));
    }
    if broker.replication.slave().is_some() || broker.replication.controlled().is_some() {
        tasks.spawn(slave_sync::run(broker.clone()));
    }
}

/// Runs `work` every `every` (the first time at once) while this broker is the master.
async fn every_while_master<F, Fut>(broker: Arc<Broker>, every: Duration, mut work: F)
where
    F: FnMut(Arc<Broker>) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if broker.role.is_master() {
            work(broker.clone()).await;
        }
    }
}

/// Writes `what` on the blocking pool; a failure is logged (the next write tries again).
async fn write_off_runtime(what: &'static str, write: impl FnOnce() -> std::io::Result<()> + Send + 'static) {
    match tokio::task::spawn_blocking(write).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "cannot persist {what}"),
        Err(e) => tracing::error!(error = %e, "the writer of {what} failed"),
    }
}
