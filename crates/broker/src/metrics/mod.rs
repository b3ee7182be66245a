//! The broker's Prometheus metrics, encoded by `prometheus-client` in the OpenMetrics text
//! format and served by the `petrel` binary's scrape endpoint when `metricsExporterType=PROM`
//! (RocketMQ's key; port `metricsPromExporterPort`, 5557).
//!
//! Owns: naming the broker's counters, the put-message lock's statistics and the process's CPU
//! and memory, read at each scrape into one [`Scrape`]. Must never: take a lock the append path
//! takes, or write the exposition format by hand (the crate does).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use petrel_remoting::ServerStats;
use petrel_store::HistogramSnapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::broker::Broker;
use crate::services::timer::TIMER_TOPIC;

mod rocketmq;

pub use rocketmq::parse_metrics_label;

/// A sample's labels, in order.
type Labels = Vec<(&'static str, String)>;

/// One unlabelled sample.
fn one(value: f64) -> Vec<(Labels, f64)> {
    vec![(Vec::new(), value)]
}

#[derive(Debug)]
enum Value {
    Number(f64),
    /// Per-bucket counts (not cumulative) by upper bound, the last bound +∞.
    Histogram {
        sum: f64,
        count: u64,
        buckets: Vec<(f64, u64)>,
    },
}

#[derive(Debug)]
struct Family {
    /// A counter's name without the `_total` the encoder appends to its samples.
    name: String,
    help: String,
    kind: MetricType,
    samples: Vec<(Labels, Value)>,
}

/// The families of one scrape, read from the broker's atomics and handed to `prometheus-client`
/// as a collector (the values are snapshots: the broker keeps its own counters).
#[derive(Debug, Default)]
struct Scrape {
    families: Vec<Family>,
}

impl Scrape {
    /// A counter or gauge family; a counter's `name` ends in `_total`, as its samples are named.
    fn metric(&mut self, name: &str, kind: MetricType, help: &str, samples: Vec<(Labels, f64)>) {
        assert!(
            matches!(kind, MetricType::Counter | MetricType::Gauge),
            "{name}: a counter or a gauge"
        );
        let name = if matches!(kind, MetricType::Counter) {
            let family = name.strip_suffix("_total");
            assert!(family.is_some(), "counter {name} is named without _total");
            family.unwrap_or(name)
        } else {
            name
        };
        let samples = samples.into_iter().map(|(l, v)| (l, Value::Number(v))).collect();
        self.families.push(Family {
            name: name.to_owned(),
            help: help.to_owned(),
            kind,
            samples,
        });
    }

    /// One unlabelled sample per family, all of one kind.
    fn metrics_of_kind(&mut self, kind: MetricType, families: &[(&str, &str, f64)]) {
        for (name, help, v) in families {
            self.metric(name, kind, help, one(*v));
        }
    }

    /// A histogram from per-bucket counts by upper bound (the +∞ bucket included).
    fn histogram_buckets(&mut self, name: &str, help: &str, labels: Labels, sum: f64, count: u64, buckets: Vec<(f64, u64)>) {
        debug_assert!(buckets.last().is_some_and(|(le, _)| le.is_infinite()), "{name} ends at +Inf");
        self.families.push(Family {
            name: name.to_owned(),
            help: help.to_owned(),
            kind: MetricType::Histogram,
            samples: vec![(labels, Value::Histogram { sum, count, buckets })],
        });
    }

    /// A log2-bucketed snapshot, its bounds scaled by `scale` (1e-9 turns ns into seconds).
    fn histogram(&mut self, name: &str, help: &str, h: &HistogramSnapshot, scale: f64) {
        let last = h.buckets.iter().rposition(|n| *n > 0).unwrap_or(0);
        let mut buckets: Vec<(f64, u64)> = h
            .buckets
            .iter()
            .enumerate()
            .take(last + 1)
            .map(|(b, n)| (HistogramSnapshot::upper_bound(b) as f64 * scale, *n))
            .collect();
        let counted: u64 = buckets.iter().map(|(_, n)| n).sum();
        buckets.push((f64::INFINITY, h.count.saturating_sub(counted)));
        self.histogram_buckets(name, help, Vec::new(), h.sum as f64 * scale, h.count, buckets);
    }

    /// The scrape in the OpenMetrics text format.
    fn encode(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail; a Collector's own error would be a bug here.
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("a scrape encodes into a String");
        out
    }
}

/// `v` as an integer if it is one (and fits).
fn whole(v: f64) -> Option<i64> {
    // 2^53: beyond it an f64 is not every integer, and the cast below stays exact below it.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if v.fract() != 0.0 || v.abs() >= EXACT {
        return None;
    }
    #[expect(clippy::cast_possible_truncation, reason = "whole and below 2^53 in magnitude: exact")]
    let n = v as i64;
    Some(n)
}

fn encode_value(value: &Value, kind: MetricType, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
    match (value, kind) {
        // Whole numbers as integers (`7`, not `7.0`), as the text format was written before.
        (Value::Number(v), MetricType::Counter) => match whole(*v).and_then(|n| u64::try_from(n).ok()) {
            Some(n) => ConstCounter::new(n).encode(encoder),
            None => ConstCounter::new(*v).encode(encoder),
        },
        (Value::Number(v), _) => match whole(*v) {
            Some(n) => ConstGauge::new(n).encode(encoder),
            None => ConstGauge::new(*v).encode(encoder),
        },
        (Value::Histogram { sum, count, buckets }, _) => encoder.encode_histogram::<NoLabelSet>(*sum, *count, buckets, None),
    }
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.families {
            let mut metric = encoder.encode_descriptor(&family.name, &family.help, None, family.kind)?;
            if let [(labels, value)] = family.samples.as_slice()
                && labels.is_empty()
            {
                // Without labels: `name value`, where a family's empty label set writes `name{}`.
                encode_value(value, family.kind, metric)?;
                continue;
            }
            for (labels, value) in &family.samples {
                assert!(!labels.is_empty(), "{}: an unlabelled sample among labelled ones", family.name);
                encode_value(value, family.kind, metric.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}

/// What a scrape reads besides the broker: the servers' connection counters.
pub struct Sources {
    /// The broker whose services and store the scrape reads.
    pub broker: Arc<Broker>,
    /// Each server's name (the `server` label, e.g. `broker`, `namesrv`) and its connection counters.
    pub servers: Vec<(&'static str, Arc<ServerStats>)>,
}

/// The whole scrape.
pub fn render(sources: &Sources) -> String {
    let broker = &sources.broker;
    let mut out = Scrape::default();
    let s = &broker.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    out.metric(
        "petrel_messages_put_total",
        MetricType::Counter,
        "Messages stored.",
        one(load(&s.put_messages)),
    );
    out.metric(
        "petrel_message_bytes_put_total",
        MetricType::Counter,
        "Bytes of messages stored.",
        one(load(&s.put_bytes)),
    );
    out.metric(
        "petrel_put_failures_total",
        MetricType::Counter,
        "Sends refused or failed.",
        one(load(&s.put_failures)),
    );
    out.metric(
        "petrel_messages_got_total",
        MetricType::Counter,
        "Messages returned to pulls.",
        one(load(&s.got_messages)),
    );

    render_store(&mut out, broker);
    let pending = broker.schedule.pending(&broker.store);
    let samples: Vec<(Labels, f64)> = pending
        .iter()
        .enumerate()
        .map(|(i, &n)| (vec![("level", (i + 1).to_string())], n as f64))
        .collect();
    out.metric(
        "petrel_delayed_messages_pending",
        MetricType::Gauge,
        "Delayed messages (DELAY levels, retries) not yet moved to their queues, per level.",
        samples,
    );
    let timer_pending = broker.timer.pending(|q| broker.store.queue_offsets(TIMER_TOPIC, q).1);
    out.metric(
        "petrel_timer_messages_pending",
        MetricType::Gauge,
        "Timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) stored and not yet delivered.",
        one(timer_pending as f64),
    );
    out.metric(
        "petrel_pop_messages_inflight",
        MetricType::Gauge,
        "Messages popped (POP consumption) and not yet acked, over all groups and queues.",
        one(broker.pop.inflight() as f64),
    );
    out.metric(
        "petrel_disk_used_ratio",
        MetricType::Gauge,
        "Used fraction of the commit log's disk.",
        one(broker.store.commit_log().disk_used_ratio().unwrap_or(0.0)),
    );
    let (consumers, producers) = broker.groups.connection_count();
    out.metric(
        "petrel_client_connections",
        MetricType::Gauge,
        "Connected clients by role.",
        vec![
            (vec![("role", "consumer".to_owned())], consumers as f64),
            (vec![("role", "producer".to_owned())], producers as f64),
        ],
    );
    out.metric(
        "petrel_uptime_seconds",
        MetricType::Gauge,
        "Seconds since the broker started.",
        one(broker.admin.uptime().as_secs_f64()),
    );
    render_pipeline(&mut out, broker);
    render_bounds(&mut out, sources);
    rocketmq::render(&mut out, broker);
    render_lock(&mut out, broker.store.commit_log());
    if let Some((cpu_s, rss_bytes)) = process_usage() {
        out.metric(
            "process_cpu_seconds_total",
            MetricType::Counter,
            "User and system CPU time.",
            one(cpu_s),
        );
        out.metric(
            "process_resident_memory_bytes",
            MetricType::Gauge,
            "Resident set size.",
            one(rss_bytes),
        );
    }
    out.encode()
}

/// The commit log's extent and the dispatcher's progress.
fn render_store(out: &mut Scrape, broker: &Broker) {
    let log = broker.store.commit_log();
    let max = log.max_offset() as f64;
    out.metric(
        "petrel_commitlog_max_offset_bytes",
        MetricType::Gauge,
        "End of the commit log.",
        one(max),
    );
    out.metric(
        "petrel_commitlog_min_offset_bytes",
        MetricType::Gauge,
        "Start of the commit log's oldest segment.",
        one(log.min_offset() as f64),
    );
    out.metric(
        "petrel_commitlog_unflushed_bytes",
        MetricType::Gauge,
        "Appended but not yet on disk.",
        one(max - log.flushed_offset() as f64),
    );
    out.metric(
        "petrel_dispatch_behind_bytes",
        MetricType::Gauge,
        "Appended but not yet in the consume queues.",
        one(max - broker.store.dispatched_offset() as f64),
    );
    let stall = broker.store.dispatch_stall();
    out.metric("petrel_dispatch_stuck_seconds",
        MetricType::Gauge,
        "How long the dispatcher has been stuck at a record it cannot read (0: it is not); while it is, consumers see nothing past it and sends are refused.",
        one(stall.as_ref().map_or(0.0, |s| s.since.elapsed().as_secs_f64())),
    );
    out.metric(
        "petrel_dispatch_stuck_offset_bytes",
        MetricType::Gauge,
        "The commit-log offset of the record the dispatcher is stuck at (-1: it is not stuck).",
        one(stall.as_ref().map_or(-1.0, |s| s.offset as f64)),
    );
}

/// The put-message lock: its counters, and the wait histogram it keeps.
fn render_lock(out: &mut Scrape, log: &petrel_store::CommitLog) {
    let lock = log.lock_snapshot();
    let c = &lock.counters;
    let kind = || vec![("kind", lock.kind.name().to_owned())];
    let with_kind = |v: f64| vec![(kind(), v)];
    out.metric(
        "petrel_put_lock_acquisitions_total",
        MetricType::Counter,
        "Put-message lock acquisitions.",
        with_kind(c.acquisitions as f64),
    );
    out.metric(
        "petrel_put_lock_contended_total",
        MetricType::Counter,
        "Acquisitions that found the lock held.",
        with_kind(c.contended as f64),
    );
    out.metric(
        "petrel_put_lock_spins_total",
        MetricType::Counter,
        "Busy-wait iterations of contended acquisitions.",
        with_kind(c.spins as f64),
    );
    out.metric(
        "petrel_put_lock_retreats_total",
        MetricType::Counter,
        "Spin rounds that ended in a yield.",
        with_kind(c.retreats as f64),
    );
    out.metric(
        "petrel_put_lock_switches_total",
        MetricType::Counter,
        "Adaptive lock switches between spinning and the mutex.",
        with_kind(lock.switches as f64),
    );
    if let Some(k) = lock.k {
        out.metric(
            "petrel_put_lock_spin_budget",
            MetricType::Gauge,
            "Spins per round before a yield (k).",
            with_kind(f64::from(k)),
        );
    }
    if let Some(mode) = lock.mode {
        let mutex = matches!(mode, petrel_lock::Mode::Mutex);
        out.metric(
            "petrel_put_lock_mutex_mode",
            MetricType::Gauge,
            "1 while the adaptive lock blocks, 0 while it spins.",
            with_kind(if mutex { 1.0 } else { 0.0 }),
        );
    }
    // The lock keeps log2 buckets: bucket b holds waits in [2^(b-1), 2^b) ns, bucket 0 no wait.
    let mut buckets: Vec<(f64, u64)> = c
        .wait_histogram
        .iter()
        .enumerate()
        .map(|(b, n)| (if b == 0 { 0.0 } else { (1u64 << b) as f64 / 1e9 }, *n))
        .collect();
    let counted: u64 = c.wait_histogram.iter().sum();
    buckets.push((f64::INFINITY, c.acquisitions.saturating_sub(counted)));
    out.histogram_buckets(
        "petrel_put_lock_wait_seconds",
        "Time waited for the put-message lock.",
        kind(),
        c.wait_ns_total as f64 / 1e9,
        c.acquisitions,
        buckets,
    );
}

/// The send path's stages: the append's critical section, the flush, the wait for it, and
/// how many records each flush carried.
fn render_pipeline(out: &mut Scrape, broker: &Broker) {
    let log = broker.store.commit_log().stats();
    let s = &broker.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    out.histogram(
        "petrel_send_seconds",
        "A send from its arrival to its answer.",
        &s.send_ns.snapshot(),
        1e-9,
    );
    out.histogram(
        "petrel_flush_wait_seconds",
        "A SYNC_FLUSH send from its append to the flushed watermark passing it.",
        &s.flush_wait_ns.snapshot(),
        1e-9,
    );
    out.histogram(
        "petrel_commitlog_append_seconds",
        "Time inside the put-message lock per append (offsets, patch, hand-off to the stage).",
        &log.append_ns.snapshot(),
        1e-9,
    );
    out.histogram(
        "petrel_commitlog_flush_seconds",
        "Duration of one flush (fdatasync of the segments the dirty range spans).",
        &log.flush_ns.snapshot(),
        1e-9,
    );
    out.histogram(
        "petrel_commitlog_records_per_flush",
        "Records made durable by one flush (group commit).",
        &log.records_per_flush.snapshot(),
        1.0,
    );
    let parked = |mark: &petrel_store::Watermark| mark.parked_waits() as f64;
    let commit_log = broker.store.commit_log();
    let counters: [(&str, &str, f64); 11] = [
        (
            "petrel_written_waits_parked_total",
            "ASYNC_FLUSH sends that found their record not yet written and waited for the writer.",
            parked(commit_log.written_watermark()),
        ),
        (
            "petrel_flushed_waits_parked_total",
            "SYNC_FLUSH sends that waited for a flush (nearly all of them).",
            parked(commit_log.flushed_watermark()),
        ),
        ("petrel_commitlog_flushes_total", "Flushes done.", load(&log.flushes)),
        (
            "petrel_commitlog_flushed_bytes_total",
            "Bytes made durable.",
            load(&log.flushed_bytes),
        ),
        (
            "petrel_commitlog_segments_prepared_total",
            "Segments created ahead of the writer.",
            load(&log.segments_prepared),
        ),
        (
            "petrel_commitlog_appends_would_block_total",
            "Appends the non-blocking path handed back.",
            load(&log.appends_would_block),
        ),
        (
            "petrel_commitlog_roll_waits_total",
            "Rolls that waited for the next segment.",
            load(&log.roll_waits),
        ),
        (
            "petrel_appends_offloaded_total",
            "Appends run on the store pool.",
            load(&s.appends_offloaded),
        ),
        (
            "petrel_pulls_offloaded_total",
            "Pulls read on the store pool (cold data).",
            load(&s.pulls_offloaded),
        ),
        (
            "petrel_flush_timeouts_total",
            "SYNC_FLUSH sends answered FLUSH_DISK_TIMEOUT.",
            load(&s.flush_timeouts),
        ),
        (
            "petrel_busy_refusals_total",
            "Requests answered SYSTEM_BUSY at a bound.",
            load(&s.busy_refusals),
        ),
    ];
    out.metrics_of_kind(MetricType::Counter, &counters);
    render_page_cache(out, broker.store.page_cache_stats());
    render_replication(out, broker);
}

/// A master's slaves (each one's lag, who is in sync, the replicated watermark and the wait
/// for it), or a slave's view of its master.
fn render_replication(out: &mut Scrape, broker: &Broker) {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    if let Some(c) = broker.replication.controlled() {
        let gauges = [
            (
                "petrel_role_master",
                "Controller mode: 1 while this broker is its set's master.",
                if broker.role.is_master() { 1.0 } else { 0.0 },
            ),
            (
                "petrel_master_epoch",
                "Controller mode: the master epoch this broker's role belongs to.",
                f64::from(broker.role.master_epoch()),
            ),
            (
                "petrel_confirm_offset",
                "Controller mode: what every in-sync replica holds; consumers read no further.",
                c.confirmed.get() as f64,
            ),
        ];
        out.metrics_of_kind(MetricType::Gauge, &gauges);
    }
    if let Some(slave) = broker.replication.slave() {
        let st = slave.state();
        let gauges = [
            (
                "petrel_ha_master_connected",
                "1 while this slave is connected to its master's HA server.",
                if st.connected.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
            ),
            (
                "petrel_ha_lag_bytes",
                "The master's offset in its last frame minus this slave's end.",
                (load(&st.master_offset) - broker.store.commit_log().max_offset() as f64).max(0.0),
            ),
        ];
        out.metrics_of_kind(MetricType::Gauge, &gauges);
        let counters = [
            (
                "petrel_ha_received_bytes_total",
                "Log bytes received from the master.",
                load(&st.bytes),
            ),
            (
                "petrel_ha_reconnects_total",
                "Connections to the master that ended.",
                load(&st.reconnects),
            ),
        ];
        out.metrics_of_kind(MetricType::Counter, &counters);
        return;
    }
    let Some(gate) = broker.replication.gate() else { return };
    let slaves = gate.slaves();
    let samples: Vec<(Labels, f64)> = slaves
        .iter()
        .map(|s| (vec![("slave", s.addr.to_string())], s.lag_bytes as f64))
        .collect();
    out.metric(
        "petrel_ha_slave_lag_bytes",
        MetricType::Gauge,
        "The master's end minus what each slave reported holding.",
        samples,
    );
    let gauges = [
        ("petrel_ha_slaves", "Slaves connected.", slaves.len() as f64),
        (
            "petrel_ha_in_sync_replicas",
            "Replicas in sync, the master included.",
            1.0 + slaves.iter().filter(|s| s.in_sync).count() as f64,
        ),
        (
            "petrel_ha_replicated_offset",
            "The offset every send below it has the acks its policy needs for.",
            gate.replicated().get() as f64,
        ),
    ];
    out.metrics_of_kind(MetricType::Gauge, &gauges);
    let s = &broker.stats;
    out.histogram(
        "petrel_replica_wait_seconds",
        "A SYNC_MASTER send from its append to the replicated watermark passing it.",
        &s.replica_wait_ns.snapshot(),
        1e-9,
    );
    let counters = [
        (
            "petrel_slave_timeouts_total",
            "SYNC_MASTER sends answered FLUSH_SLAVE_TIMEOUT.",
            load(&s.slave_timeouts),
        ),
        (
            "petrel_slave_not_available_total",
            "SYNC_MASTER sends answered SLAVE_NOT_AVAILABLE (too few slaves in sync).",
            load(&s.slave_not_available),
        ),
    ];
    out.metrics_of_kind(MetricType::Counter, &counters);
}

/// The page-cache budget: resident bytes against it, and what releasing and flow control did.
fn render_page_cache(out: &mut Scrape, pc: &petrel_store::PageCacheStats) {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    let gauges = [
        (
            "petrel_page_cache_budget_bytes",
            "Resident bytes the store's files are held under.",
            load(&pc.budget_bytes),
        ),
        (
            "petrel_page_cache_resident_bytes",
            "Resident bytes of the store's files at the last check.",
            load(&pc.resident_bytes),
        ),
        (
            "petrel_page_cache_tier_cache_bytes",
            "Bytes the cold tier's read cache holds, counted in the budget before the files.",
            load(&pc.tier_cache_bytes),
        ),
        (
            "petrel_page_cache_busy",
            "1 while unflushed data keeps the cache over budget and sends are refused.",
            if pc.busy.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
        ),
    ];
    out.metrics_of_kind(MetricType::Gauge, &gauges);
    let counters = [
        (
            "petrel_page_cache_releases_total",
            "Budget passes that released cold ranges.",
            load(&pc.releases),
        ),
        (
            "petrel_page_cache_released_bytes_total",
            "Resident bytes those passes released.",
            load(&pc.released_bytes),
        ),
        (
            "petrel_page_cache_busy_refusals_total",
            "Sends refused with [PC_SYNCHRONIZED].",
            load(&pc.busy_refusals),
        ),
    ];
    out.metrics_of_kind(MetricType::Counter, &counters);
}

/// Every bound's current use beside its limit.
fn render_bounds(out: &mut Scrape, sources: &Sources) {
    let broker = &sources.broker;
    let mark = broker.store.commit_log().flushed_watermark();
    let c = &broker.config;
    let gauges: [(&str, &str, f64, f64); 5] = [
        (
            "petrel_durability_waiters",
            "SYNC_FLUSH sends waiting for the disk.",
            mark.waiting() as f64,
            mark.capacity() as f64,
        ),
        (
            "petrel_store_pool_jobs",
            "Store jobs queued or running.",
            broker.pool.queued() as f64,
            broker.pool.capacity() as f64,
        ),
        (
            "petrel_long_poll_waiters",
            "Pulls held for new messages.",
            broker.long_poll.waiting() as f64,
            c.max_long_poll_waiters as f64,
        ),
        ("petrel_topics", "Topics held.", broker.topics.count() as f64, c.max_topics as f64),
        (
            "petrel_consumer_groups",
            "Consumer groups known.",
            broker.groups.known_count() as f64,
            c.max_groups as f64,
        ),
    ];
    for (name, help, now, limit) in gauges {
        out.metric(name, MetricType::Gauge, help, one(now));
        out.metric(
            &format!("{name}_limit"),
            MetricType::Gauge,
            &format!("The bound on {}", help.to_ascii_lowercase()),
            one(limit),
        );
    }
    let per_server = |read: fn(&ServerStats) -> f64| -> Vec<(Labels, f64)> {
        sources
            .servers
            .iter()
            .map(|(server, stats)| (vec![("server", (*server).to_owned())], read(stats)))
            .collect()
    };
    // (name, type, help, reading)
    type Family = (&'static str, MetricType, &'static str, fn(&ServerStats) -> f64);
    let families: [Family; 5] = [
        ("petrel_connections", MetricType::Gauge, "Open connections.", |s| {
            s.open.load(Ordering::Relaxed) as f64
        }),
        (
            "petrel_connections_accepted_total",
            MetricType::Counter,
            "Connections accepted.",
            |s| s.accepted.load(Ordering::Relaxed) as f64,
        ),
        (
            "petrel_connections_refused_total",
            MetricType::Counter,
            "Connections closed on arrival at maxConnections.",
            |s| s.refused.load(Ordering::Relaxed) as f64,
        ),
        (
            "petrel_connections_closed_idle_total",
            MetricType::Counter,
            "Connections closed after the idle timeout.",
            |s| s.closed_idle.load(Ordering::Relaxed) as f64,
        ),
        (
            "petrel_connections_closed_bad_frame_total",
            MetricType::Counter,
            "Connections closed after a bad frame.",
            |s| s.closed_bad_frame.load(Ordering::Relaxed) as f64,
        ),
    ];
    for (name, kind, help, read) in families {
        out.metric(name, kind, help, per_server(read));
    }
}

/// CPU seconds and resident bytes of this process, from /proc (Linux only).
fn process_usage() -> Option<(f64, f64)> {
    use procfs::WithCurrentSystemInfo;
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    let ticks = (stat.utime + stat.stime) as f64;
    let hz = procfs::ticks_per_second().max(1) as f64;
    Some((ticks / hz, stat.rss_bytes().get() as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The families a fresh, idle Apache RocketMQ 5.5.0 broker shows (its counters and most
    /// histograms appear with their first event), sorted.
    const ROCKETMQ_FAMILIES_OF_A_FRESH_BROKER: &[&str] = &[
        "rocketmq_broker_permission",
        "rocketmq_consumer_group_number",
        "rocketmq_pop_buffer_scan_time_consume_milliseconds",
        "rocketmq_pop_checkpoint_buffer_size",
        "rocketmq_pop_offset_buffer_size",
        "rocketmq_pop_revive_lag_milliseconds",
        "rocketmq_pop_revive_latency_milliseconds",
        "rocketmq_processor_watermark",
        "rocketmq_storage_dispatch_behind_bytes",
        "rocketmq_storage_flush_behind_bytes",
        "rocketmq_storage_size_bytes",
        "rocketmq_timer_dequeue_lag",
        "rocketmq_timer_dequeue_latency_milliseconds",
        "rocketmq_timer_enqueue_lag",
        "rocketmq_timer_enqueue_latency_milliseconds",
        "rocketmq_timer_message_snapshot",
        "rocketmq_topic_number",
        "target_info",
    ];

    /// Every family a fresh broker showed when its text was written by hand, as `name type` with
    /// the name its samples carry (a counter's with `_total`): moving to the crate renamed none.
    const FAMILIES_OF_A_FRESH_BROKER: &[&str] = &[
        "petrel_messages_put_total counter",
        "petrel_message_bytes_put_total counter",
        "petrel_put_failures_total counter",
        "petrel_messages_got_total counter",
        "petrel_commitlog_max_offset_bytes gauge",
        "petrel_commitlog_min_offset_bytes gauge",
        "petrel_commitlog_unflushed_bytes gauge",
        "petrel_dispatch_behind_bytes gauge",
        "petrel_dispatch_stuck_seconds gauge",
        "petrel_dispatch_stuck_offset_bytes gauge",
        "petrel_delayed_messages_pending gauge",
        "petrel_timer_messages_pending gauge",
        "petrel_pop_messages_inflight gauge",
        "petrel_disk_used_ratio gauge",
        "petrel_client_connections gauge",
        "petrel_uptime_seconds gauge",
        "petrel_send_seconds histogram",
        "petrel_flush_wait_seconds histogram",
        "petrel_commitlog_append_seconds histogram",
        "petrel_commitlog_flush_seconds histogram",
        "petrel_commitlog_records_per_flush histogram",
        "petrel_written_waits_parked_total counter",
        "petrel_flushed_waits_parked_total counter",
        "petrel_commitlog_flushes_total counter",
        "petrel_commitlog_flushed_bytes_total counter",
        "petrel_commitlog_segments_prepared_total counter",
        "petrel_commitlog_appends_would_block_total counter",
        "petrel_commitlog_roll_waits_total counter",
        "petrel_appends_offloaded_total counter",
        "petrel_pulls_offloaded_total counter",
        "petrel_flush_timeouts_total counter",
        "petrel_busy_refusals_total counter",
        "petrel_page_cache_budget_bytes gauge",
        "petrel_page_cache_resident_bytes gauge",
        "petrel_page_cache_tier_cache_bytes gauge",
        "petrel_page_cache_busy gauge",
        "petrel_page_cache_releases_total counter",
        "petrel_page_cache_released_bytes_total counter",
        "petrel_page_cache_busy_refusals_total counter",
        "petrel_ha_slave_lag_bytes gauge",
        "petrel_ha_slaves gauge",
        "petrel_ha_in_sync_replicas gauge",
        "petrel_ha_replicated_offset gauge",
        "petrel_replica_wait_seconds histogram",
        "petrel_slave_timeouts_total counter",
        "petrel_slave_not_available_total counter",
        "petrel_durability_waiters gauge",
        "petrel_durability_waiters_limit gauge",
        "petrel_store_pool_jobs gauge",
        "petrel_store_pool_jobs_limit gauge",
        "petrel_long_poll_waiters gauge",
        "petrel_long_poll_waiters_limit gauge",
        "petrel_topics gauge",
        "petrel_topics_limit gauge",
        "petrel_consumer_groups gauge",
        "petrel_consumer_groups_limit gauge",
        "petrel_connections gauge",
        "petrel_connections_accepted_total counter",
        "petrel_connections_refused_total counter",
        "petrel_connections_closed_idle_total counter",
        "petrel_connections_closed_bad_frame_total counter",
        "petrel_put_lock_acquisitions_total counter",
        "petrel_put_lock_contended_total counter",
        "petrel_put_lock_spins_total counter",
        "petrel_put_lock_retreats_total counter",
        "petrel_put_lock_switches_total counter",
        "petrel_put_lock_spin_budget gauge",
        "petrel_put_lock_mutex_mode gauge",
        "petrel_put_lock_wait_seconds histogram",
        "process_cpu_seconds_total counter",
        "process_resident_memory_bytes gauge",
    ];

    /// A descriptor line's family name and type.
    fn type_line(line: &str) -> Option<(&str, &str)> {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("#"), Some("TYPE"), Some(name), Some(kind)) => Some((name, kind)),
            _ => None,
        }
    }

    fn fresh_broker_scrape() -> (Arc<Broker>, String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::BrokerConfig {
            store_path_root_dir: dir.path().to_owned(),
            broker_ip1: Some("127.0.0.1".parse().unwrap()),
            ha_listen_port: Some(0),
            ..crate::BrokerConfig::default()
        };
        let broker = Broker::open(config, crate::NameServers::External(vec![])).unwrap();
        broker.stats.put_messages.fetch_add(7, Ordering::Relaxed);
        let servers = vec![
            ("broker", Arc::new(ServerStats::default())),
            ("namesrv", Arc::new(ServerStats::default())),
        ];
        servers[0].1.refused.fetch_add(3, Ordering::Relaxed);
        let text = render(&Sources {
            broker: broker.clone(),
            servers,
        });
        (broker, text, dir)
    }

    #[test]
    fn the_crate_encodes_the_same_families_under_the_same_names() {
        let (broker, text, _dir) = fresh_broker_scrape();
        let families: Vec<String> = text
            .lines()
            .filter_map(type_line)
            .map(|(name, kind)| {
                let suffix = if kind == "counter" { "_total" } else { "" };
                format!("{name}{suffix} {kind}")
            })
            .collect();
        let (rocketmq, ours): (Vec<String>, Vec<String>) = families
            .into_iter()
            .partition(|f| f.starts_with("rocketmq_") || f.starts_with("target_info"));
        assert_eq!(ours, FAMILIES_OF_A_FRESH_BROKER);
        let mut rocketmq: Vec<&str> = rocketmq.iter().map(|f| f.split(' ').next().unwrap_or("")).collect();
        rocketmq.sort_unstable();
        assert_eq!(rocketmq, ROCKETMQ_FAMILIES_OF_A_FRESH_BROKER);
        assert_eq!(text.lines().last(), Some("# EOF"), "OpenMetrics ends with # EOF");
        broker.store.shutdown().unwrap();
    }

    /// Every sample line is `name{labels} value` with a number for the value, and every metric
    /// has its TYPE before its samples.
    #[test]
    fn a_fresh_broker_renders_valid_exposition_text() {
        let (broker, text, _dir) = fresh_broker_scrape();
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some((family, _)) = type_line(line) {
                let family = family.to_owned();
                assert!(typed.insert(family.clone()), "{family} is typed twice");
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count", "_total"]
                .iter()
                .fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
            assert!(typed.contains(family), "{name} has no TYPE line before it");
        }
        let value = |series: &str| -> f64 {
            let line = text.lines().find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series));
            line.unwrap_or_else(|| panic!("no {series} in {text}"))
                .rsplit_once(' ')
                .unwrap()
                .1
                .parse()
                .unwrap()
        };
        assert_eq!(value("petrel_messages_put_total"), 7.0);
        assert!(
            text.lines().any(|l| l == "petrel_messages_put_total 7"),
            "whole numbers as integers"
        );
        let acquisitions = value("petrel_put_lock_acquisitions_total{kind=\"abs\"}");
        assert_eq!(value("petrel_put_lock_wait_seconds_bucket{le=\"+Inf\",kind=\"abs\"}"), acquisitions);
        assert_eq!(value("petrel_put_lock_wait_seconds_count{kind=\"abs\"}"), acquisitions);
        assert_eq!(value("petrel_put_lock_mutex_mode{kind=\"abs\"}"), 0.0);
        assert_eq!(value("petrel_put_lock_spin_budget{kind=\"abs\"}"), 1000.0);
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_cpu_seconds_total") >= 0.0, "present, in seconds");
        assert_eq!(value("petrel_durability_waiters_limit"), 65_536.0);
        assert_eq!(value("petrel_connections_refused_total{server=\"broker\"}"), 3.0);
        assert_eq!(value("petrel_commitlog_records_per_flush_count"), 0.0);
        assert_eq!(value("petrel_commitlog_records_per_flush_bucket{le=\"+Inf\"}"), 0.0);
        broker.store.shutdown().unwrap();
    }

    #[test]
    fn a_histogram_snapshot_keeps_its_counts_cumulative_up_to_inf() {
        let mut scrape = Scrape::default();
        let mut buckets = vec![0u64; 64];
        buckets[1] = 2;
        buckets[3] = 5;
        let h = HistogramSnapshot {
            buckets,
            count: 7,
            sum: 40,
        };
        scrape.histogram("x_seconds", "X.", &h, 1.0);
        let text = scrape.encode();
        let bucket_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("x_seconds_bucket")).collect();
        let counts: Vec<&str> = bucket_lines.iter().map(|l| l.rsplit_once(' ').unwrap().1).collect();
        assert_eq!(counts, ["0", "2", "2", "7", "7"], "{text}");
        assert!(bucket_lines.last().unwrap().contains("+Inf"));
        assert!(text.contains("x_seconds_sum 40.0"), "{text}");
    }
}
