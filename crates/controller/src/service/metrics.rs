//! The controller's state in Prometheus's text format: its Raft role and term, and per broker
//! set the master, the epochs and the SyncStateSet, plus the election and refusal counters.
//! Rendered from the applied state at each scrape, so what it shows is what Raft has applied here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Controller;

/// Counters the request handlers and the scan advance.
#[derive(Debug, Default)]
pub struct ControllerCounters {
    /// New masters elected (not counting answers that kept the old one).
    pub elections: AtomicU64,
    /// Proposals the state machine refused (fenced epochs, unknown replicas, …).
    pub refused: AtomicU64,
    /// Proposals that could not be committed (not the leader, no quorum in time).
    pub not_committed: AtomicU64,
}

type PerSet = Family<Vec<(String, String)>, Gauge>;

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let g: Gauge = Gauge::default();
    g.set(value);
    registry.register(name, help, g);
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: &AtomicU64) {
    let c: Counter = Counter::default();
    c.inc_by(value.load(Ordering::Relaxed));
    registry.register(name, help, c);
}

fn as_gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The whole scrape.
pub fn render(controller: &Controller) -> String {
    let mut registry = Registry::default();
    let node = controller.node();
    let id = node.id();
    gauge(
        &mut registry,
        "petrel_controller_raft_term",
        "Raft term this controller is in",
        as_gauge(node.term()),
    );
    gauge(
        &mut registry,
        "petrel_controller_is_leader",
        "1 while this controller leads the group",
        i64::from(node.leader() == Some(id)),
    );
    gauge(
        &mut registry,
        "petrel_controller_leader_id",
        "Raft id of the leader this controller knows of, -1 for none",
        node.leader().map_or(-1, as_gauge),
    );
    let refused = AtomicU64::new(controller.raft_gate.refused());
    counter(
        &mut registry,
        "petrel_controller_raft_refused",
        "Raft messages and authentication exchanges refused because the peer did not prove controllerRaftSecret",
        &refused,
    );
    let now = Instant::now();
    let live = controller.live.lock().values().filter(|hb| hb.alive_at(now)).count();
    gauge(
        &mut registry,
        "petrel_controller_live_brokers",
        "Brokers whose last heartbeat is within their timeout",
        as_gauge(live as u64),
    );
    let families: [(&str, &str, PerSet); 5] = [
        (
            "petrel_controller_master_broker_id",
            "Broker id of the set's master, -1 for none",
            PerSet::default(),
        ),
        ("petrel_controller_master_epoch", "The set's masterEpoch", PerSet::default()),
        (
            "petrel_controller_sync_state_set_size",
            "Members of the set's SyncStateSet",
            PerSet::default(),
        ),
        (
            "petrel_controller_sync_state_set_epoch",
            "The SyncStateSet's epoch",
            PerSet::default(),
        ),
        ("petrel_controller_replicas", "Replicas registered in the set", PerSet::default()),
    ];
    node.read_local(|state| {
        for set in state.broker_sets() {
            let labels = vec![("broker_name".to_owned(), set.broker_name.clone())];
            let values = [
                set.master.map_or(-1, as_gauge),
                i64::from(set.master_epoch),
                as_gauge(set.sync_state_set.len() as u64),
                i64::from(set.sync_state_set_epoch),
                as_gauge(set.replicas.len() as u64),
            ];
            for ((_, _, family), value) in families.iter().zip(values) {
                family.get_or_create(&labels).set(value);
            }
        }
    });
    for (name, help, family) in families {
        registry.register(name, help, family);
    }
    let counters = &controller.counters;
    counter(
        &mut registry,
        "petrel_controller_elections",
        "New masters elected",
        &counters.elections,
    );
    counter(
        &mut registry,
        "petrel_controller_proposals_refused",
        "Changes the state refused (fenced, invalid)",
        &counters.refused,
    );
    counter(
        &mut registry,
        "petrel_controller_proposals_not_committed",
        "Changes not committed (not the leader, no quorum)",
        &counters.not_committed,
    );
    let mut out = String::new();
    if let Err(e) = encode(&mut out, &registry) {
        tracing::warn!(error = %e, "controller metrics did not encode");
    }
    out
}
