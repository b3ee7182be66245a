//! RocketMQ 5's broker metrics under their own names, types and labels, so that the dashboards
//! and alerts written for Apache RocketMQ read Petrel unchanged. Names are as RocketMQ's
//! OpenTelemetry Prometheus exporter writes them: the unit appended (`_milliseconds`,
//! `_seconds`, `_bytes`), counters ending in `_total`. Every series carries the common labels
//! (`cluster`, `node_type="broker"`, `node_id` = brokerName, `otel_scope_name="broker-meter"`,
//! `metricsLabel`'s pairs, `aggregation="delta"` under `metricsInDelta`).
//!
//! Owns: mapping Petrel's state onto RocketMQ's families. Must never: read more than one record
//! per scrape from the commit log, or report a family RocketMQ's switch for it turned off.

use std::sync::atomic::Ordering;

use petrel_protocol::codes::{request_code_name, response_code_name};
use petrel_protocol::message::RecordView;
use petrel_protocol::model::ConsumeType;
use prometheus_client::metrics::MetricType;

use super::{Family, Labels, Scrape, Value};
use crate::broker::Broker;
use crate::services::timer::TIMER_TOPIC;
use crate::traffic::{FixedHistogram, RpcResult};

/// The request kinds whose queue RocketMQ reports as `rocketmq_processor_watermark`.
const PROCESSORS: &[&str] = &[
    "send",
    "async_put",
    "pull",
    "ack",
    "query_message",
    "client_manager",
    "heartbeat",
    "lite_pull",
    "transaction",
    "consumer_manager",
    "admin",
    "reply",
];
/// RocketMQ's timer snapshot bounds, seconds.
const TIMER_BOUNDS_S: &[u64] = &[5, 60, 300, 900, 3600, 14_400, 28_800, 86_400];
/// RocketMQ's readable-and-writable broker permission.
const PERM_READ_WRITE: f64 = 6.0;

/// The labels every series carries.
fn common(broker: &Broker) -> Labels {
    let c = &broker.config;
    let mut labels: Labels = vec![
        ("cluster", c.broker_cluster_name.clone()),
        ("node_type", "broker".to_owned()),
        ("node_id", c.broker_name.clone()),
        ("otel_scope_name", "broker-meter".to_owned()),
    ];
    if c.metrics_in_delta {
        labels.push(("aggregation", "delta".to_owned()));
    }
    for (k, v) in custom_labels(&c.metrics_label) {
        labels.push((k, v));
    }
    labels
}

/// `metricsLabel`'s `key:value` pairs (keys leaked once per distinct key: the label API takes
/// `&'static str`, and the configuration is read once).
fn custom_labels(spec: &str) -> Vec<(&'static str, String)> {
    static KEYS: std::sync::OnceLock<parking_lot::Mutex<Vec<&'static str>>> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((k, v)) = item.split_once(':') else {
            continue;
        };
        let mut known = keys.lock();
        let key = match known.iter().find(|x| **x == k) {
            Some(x) => *x,
            None if known.len() < 64 => {
                let leaked: &'static str = Box::leak(k.to_owned().into_boxed_str());
                known.push(leaked);
                leaked
            }
            None => continue,
        };
        out.push((key, v.to_owned()));
    }
    out
}

/// Builds families with the common labels before each series' own.
struct Out<'a> {
    scrape: &'a mut Scrape,
    common: Labels,
}

impl Out<'_> {
    fn labels(&self, own: Labels) -> Labels {
        let mut l = self.common.clone();
        l.extend(own);
        l
    }

    /// A counter or gauge family (a counter's name ends in `_total`); nothing when empty.
    fn family(&mut self, name: &str, kind: MetricType, help: &str, samples: Vec<(Labels, f64)>) {
        if samples.is_empty() {
            return;
        }
        let samples = samples.into_iter().map(|(l, v)| (self.labels(l), v)).collect();
        self.scrape.metric(name, kind, help, samples);
    }

    /// A histogram family; nothing when empty.
    fn histograms(&mut self, name: &str, help: &str, samples: Vec<(Labels, &FixedHistogram)>) {
        if samples.is_empty() {
            return;
        }
        let samples = samples
            .into_iter()
            .map(|(l, h)| {
                let (buckets, sum, count) = h.snapshot();
                let buckets = buckets
                    .into_iter()
                    .map(|(le, n)| (le.map_or(f64::INFINITY, |b| b as f64), n))
                    .collect();
                (
                    self.labels(l),
                    Value::Histogram {
                        sum: sum as f64,
                        count,
                        buckets,
                    },
                )
            })
            .collect();
        self.scrape.families.push(Family {
            name: name.to_owned(),
            help: help.to_owned(),
            kind: MetricType::Histogram,
            samples,
        });
    }
}

fn flag(b: bool) -> String {
    if b { "true" } else { "false" }.to_owned()
}

fn count(c: &std::sync::atomic::AtomicU64) -> f64 {
    c.load(Ordering::Relaxed) as f64
}

/// Every enabled family.
pub(super) fn render(scrape: &mut Scrape, broker: &Broker) {
    let common = common(broker);
    let mut out = Out { scrape, common };
    let c = &broker.config;
    if c.enable_stats_metrics {
        stats(&mut out, broker);
    }
    if c.enable_request_metrics {
        requests(&mut out, broker);
    }
    if c.enable_connection_metrics {
        connections(&mut out, broker);
    }
    if c.enable_lag_and_dlq_metrics {
        lag(&mut out, broker);
    }
    if c.enable_transaction_metrics {
        transactions(&mut out, broker);
    }
    if c.enable_remoting_metrics {
        rpc(&mut out, broker);
    }
    if c.enable_pop_metrics {
        pop(&mut out, broker);
    }
    if c.enable_message_store_metrics {
        store(&mut out, broker);
        timer(&mut out, broker);
    }
    // OpenTelemetry's resource, empty in RocketMQ's broker.
    out.scrape
        .metric("target_info", MetricType::Gauge, "Target metadata.", vec![(Vec::new(), 1.0)]);
}

fn stats(out: &mut Out<'_>, broker: &Broker) {
    // Petrel has no request thread pools: a request runs on its connection's task or the store
    // pool, so nothing waits in a processor's queue. The store pool's backlog is the send
    // path's only queue.
    let pool_queued = broker.pool.queued() as f64;
    let samples = PROCESSORS
        .iter()
        .map(|p| {
            (
                vec![("processor", (*p).to_owned())],
                if *p == "async_put" { pool_queued } else { 0.0 },
            )
        })
        .collect();
    out.family(
        "rocketmq_processor_watermark",
        MetricType::Gauge,
        "Requests waiting for a processor.",
        samples,
    );
    out.family(
        "rocketmq_broker_permission",
        MetricType::Gauge,
        "The broker's permission (6: read and write).",
        vec![(Vec::new(), PERM_READ_WRITE)],
    );
    out.family(
        "rocketmq_topic_number",
        MetricType::Gauge,
        "Topics, system topics included.",
        vec![(Vec::new(), broker.topics.count() as f64)],
    );
    out.family(
        "rocketmq_consumer_group_number",
        MetricType::Gauge,
        "Consumer groups.",
        vec![(Vec::new(), broker.groups.known_count() as f64)],
    );
}

fn requests(out: &mut Out<'_>, broker: &Broker) {
    let t = &broker.stats.traffic;
    let system = |topic: &str| flag(broker.topics.is_system_topic(topic));
    let (mut messages, mut bytes) = (Vec::new(), Vec::new());
    let mut sizes: Vec<(Labels, &FixedHistogram)> = Vec::new();
    let ins = t.messages_in.series_guard();
    for (key, v) in ins.iter() {
        let labels = vec![
            ("topic", key.0.clone()),
            ("message_type", key.1.label().to_owned()),
            ("is_system", system(&key.0)),
        ];
        messages.push((labels.clone(), count(&v.messages)));
        bytes.push((labels.clone(), count(&v.bytes)));
        sizes.push((labels, &v.size));
    }
    if let Some(v) = t.messages_in.overflow_if_used() {
        let labels = vec![("otel_metric_overflow", flag(true))];
        messages.push((labels.clone(), count(&v.messages)));
        bytes.push((labels.clone(), count(&v.bytes)));
        sizes.push((labels, &v.size));
    }
    out.family("rocketmq_messages_in_total", MetricType::Counter, "Messages stored.", messages);
    out.family("rocketmq_throughput_in_total", MetricType::Counter, "Bytes stored.", bytes);
    out.histograms("rocketmq_message_size", "Incoming messages size", sizes);
    drop(ins);

    let (mut messages, mut bytes) = (Vec::new(), Vec::new());
    t.messages_out.each(|key, v| {
        let labels = match key {
            Some((topic, group, retry)) => {
                let mut l = vec![
                    ("topic", topic.clone()),
                    ("consumer_group", group.clone()),
                    (
                        "is_system",
                        flag(broker.topics.is_system_topic(topic) || group.starts_with("CID_RMQ_SYS_")),
                    ),
                ];
                if let Some(retry) = retry {
                    l.push(("is_retry", flag(*retry)));
                }
                l
            }
            None => vec![("otel_metric_overflow", flag(true))],
        };
        messages.push((labels.clone(), count(&v.messages)));
        bytes.push((labels, count(&v.bytes)));
    });
    out.family("rocketmq_messages_out_total", MetricType::Counter, "Messages read.", messages);
    out.family("rocketmq_throughput_out_total", MetricType::Counter, "Bytes read.", bytes);

    let topics = t.topic_create.series_guard();
    let samples = topics
        .iter()
        .map(|((success, system), h)| (vec![("invocation_status", status(*success)), ("is_system", flag(*system))], h))
        .collect();
    out.histograms(
        "rocketmq_topic_create_execution_time_milliseconds",
        "The distribution of create topic time",
        samples,
    );
    drop(topics);
    let groups = t.group_create.series_guard();
    let samples = groups
        .iter()
        .map(|(success, h)| (vec![("invocation_status", status(*success))], h))
        .collect();
    out.histograms(
        "rocketmq_consumer_group_create_execution_time_milliseconds",
        "The distribution of create subscription time",
        samples,
    );
}

fn status(success: bool) -> String {
    if success { "success" } else { "failure" }.to_owned()
}

/// A client version code as RocketMQ's `MQVersion` names it, lower-cased (`v5_5_0`).
fn version_label(code: i32) -> String {
    // MQVersion's ordinals: each release is odd (V4_9_0 is 393, V5_0_0 is 413, ten patches a
    // minor version), its snapshot the even one before it.
    let (release, snapshot) = if code % 2 == 0 { (code + 1, "_snapshot") } else { (code, "") };
    let (major, minor, patch) = match release {
        413.. => (5, (release - 413) / 20, (release - 413) % 20 / 2),
        393..=411 => (4, 9, (release - 393) / 2),
        _ => return code.to_string(),
    };
    format!("v{major}_{minor}_{patch}{snapshot}")
}

fn consume_mode(t: ConsumeType) -> &'static str {
    match t {
        ConsumeType::ConsumeActively => "pull",
        ConsumeType::ConsumePassively => "push",
        ConsumeType::ConsumePop => "pop",
    }
}

fn connections(out: &mut Out<'_>, broker: &Broker) {
    let census = broker.groups.census();
    let producers = census
        .producers
        .iter()
        .map(|((language, version, protocol), n)| {
            let labels = vec![
                ("language", language.name().to_ascii_lowercase()),
                ("version", version_label(*version)),
                ("protocol_type", (*protocol).to_owned()),
            ];
            (labels, *n as f64)
        })
        .collect();
    out.family(
        "rocketmq_producer_connections",
        MetricType::Gauge,
        "Producer connections.",
        producers,
    );
    let consumers = census
        .consumers
        .iter()
        .map(|((group, language, version, mode, protocol), n)| {
            let labels = vec![
                ("consumer_group", group.clone()),
                ("language", language.name().to_ascii_lowercase()),
                ("version", version_label(*version)),
                ("consume_mode", consume_mode(*mode).to_owned()),
                ("protocol_type", (*protocol).to_owned()),
                ("is_system", flag(group.to_ascii_lowercase().starts_with("cid_rmq_sys_"))),
            ];
            (labels, *n as f64)
        })
        .collect();
    out.family(
        "rocketmq_consumer_connections",
        MetricType::Gauge,
        "Consumer connections.",
        consumers,
    );
}

/// One (group, topic)'s consumption figures, summed over the topic's queues.
#[derive(Default)]
struct Lag {
    lag: i64,
    inflight: i64,
    ready: i64,
    /// Store time of the earliest message not consumed / not pulled, ms.
    oldest_unconsumed_ms: Option<i64>,
    oldest_unpulled_ms: Option<i64>,
}

fn lag_of(broker: &Broker, group: &str, topic: &str) -> Lag {
    let queues = broker
        .topics
        .with(topic, |t| t.read_queue_nums.max(t.write_queue_nums))
        .unwrap_or(0);
    let mut lag = Lag::default();
    let earlier = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    for queue_id in 0..queues {
        let Some(committed) = broker.offsets.query(group, topic, queue_id) else {
            continue;
        };
        let (_, max) = broker.store.queue_offsets(topic, queue_id);
        let committed = committed.min(max);
        let pulled = broker
            .offsets
            .pulled(group, topic, queue_id)
            .unwrap_or(committed)
            .clamp(committed, max);
        lag.lag += max - committed;
        lag.inflight += pulled - committed;
        lag.ready += max - pulled;
        if committed < max {
            lag.oldest_unconsumed_ms = earlier(lag.oldest_unconsumed_ms, broker.store.store_time_at(topic, queue_id, committed));
        }
        if pulled < max {
            lag.oldest_unpulled_ms = earlier(lag.oldest_unpulled_ms, broker.store.store_time_at(topic, queue_id, pulled));
        }
    }
    lag
}

fn lag(out: &mut Out<'_>, broker: &Broker) {
    let now = crate::now_ms();
    let limit = broker.config.metrics_otel_cardinality_limit;
    let mut rows: [Vec<(Labels, f64)>; 5] = Default::default();
    let pairs = broker
        .groups
        .subscribed()
        .into_iter()
        .flat_map(|(group, topics)| topics.into_iter().map(move |topic| (group.clone(), topic)))
        .filter(|(_, topic)| !topic.starts_with("%RETRY%"))
        .take(limit);
    for (group, topic) in pairs {
        let l = lag_of(broker, &group, &topic);
        let system = broker.topics.is_system_topic(&topic) || group.to_ascii_lowercase().starts_with("cid_rmq_sys_");
        let labels = vec![
            ("consumer_group", group),
            ("topic", topic),
            ("is_retry", flag(false)),
            ("is_system", flag(system)),
        ];
        let age = |t: Option<i64>| t.map_or(0.0, |t| (now - t).max(0) as f64);
        let values = [
            l.lag as f64,
            age(l.oldest_unconsumed_ms),
            l.inflight as f64,
            age(l.oldest_unpulled_ms),
            l.ready as f64,
        ];
        for (row, v) in rows.iter_mut().zip(values) {
            row.push((labels.clone(), v));
        }
    }
    let [lag, lag_latency, inflight, queueing, ready] = rows;
    out.family(
        "rocketmq_consumer_lag_messages",
        MetricType::Gauge,
        "Messages not yet consumed.",
        lag,
    );
    out.family(
        "rocketmq_consumer_lag_latency_milliseconds",
        MetricType::Gauge,
        "Age of the earliest message not yet consumed.",
        lag_latency,
    );
    out.family(
        "rocketmq_consumer_inflight_messages",
        MetricType::Gauge,
        "Messages pulled and not yet consumed.",
        inflight,
    );
    out.family(
        "rocketmq_consumer_queueing_latency_milliseconds",
        MetricType::Gauge,
        "Age of the earliest message not yet pulled.",
        queueing,
    );
    out.family(
        "rocketmq_consumer_ready_messages",
        MetricType::Gauge,
        "Messages not yet pulled.",
        ready,
    );

    let mut dlq = Vec::new();
    broker.stats.traffic.sent_to_dlq.each(|key, n| {
        let labels = match key {
            Some((group, topic)) => vec![
                ("consumer_group", group.clone()),
                ("topic", topic.clone()),
                (
                    "is_system",
                    flag(broker.topics.is_system_topic(topic) || group.to_ascii_lowercase().starts_with("cid_rmq_sys_")),
                ),
            ],
            None => vec![("otel_metric_overflow", flag(true))],
        };
        dlq.push((labels, count(n)));
    });
    out.family(
        "rocketmq_send_to_dlq_messages_total",
        MetricType::Counter,
        "Messages moved to a DLQ.",
        dlq,
    );
}

/// A per-topic counter family's samples.
fn per_topic<V>(family: &crate::traffic::Family<String, V>, value: impl Fn(&V) -> f64) -> Vec<(Labels, f64)> {
    let mut samples = Vec::new();
    family.each(|topic, v| {
        let labels = match topic {
            Some(t) => vec![("topic", t.clone())],
            None => vec![("otel_metric_overflow", flag(true))],
        };
        samples.push((labels, value(v)));
    });
    samples
}

fn transactions(out: &mut Out<'_>, broker: &Broker) {
    let t = &broker.stats.traffic;
    out.family(
        "rocketmq_commit_messages_total",
        MetricType::Counter,
        "Transactions committed.",
        per_topic(&t.commits, count),
    );
    out.family(
        "rocketmq_rollback_messages_total",
        MetricType::Counter,
        "Transactions rolled back.",
        per_topic(&t.rollbacks, count),
    );
    let latency = t.finish_latency.series_guard();
    let samples = latency.iter().map(|(topic, h)| (vec![("topic", topic.clone())], h)).collect();
    // Seconds, under RocketMQ's millisecond name: its dashboards read these numbers.
    out.histograms(
        "rocketmq_finish_message_latency_milliseconds",
        "Transaction finish latency",
        samples,
    );
    drop(latency);
    out.family(
        "rocketmq_half_messages",
        MetricType::Gauge,
        "Half messages not yet decided (counted since this broker started).",
        per_topic(&t.half_messages, |g| g.load(Ordering::Relaxed).max(0) as f64),
    );
}

fn code_label(name: Option<&str>, code: i32) -> String {
    name.map_or_else(|| code.to_string(), str::to_ascii_lowercase)
}

fn rpc(out: &mut Out<'_>, broker: &Broker) {
    let series = broker.stats.traffic.rpc_latency.series_guard();
    let samples = series
        .iter()
        .map(|(k, h)| {
            let mut labels = vec![
                ("protocol_type", "remoting".to_owned()),
                ("request_code", code_label(request_code_name(k.request_code), k.request_code)),
                ("result", k.result.label().to_owned()),
            ];
            if k.result != RpcResult::ProcessRequestFailed {
                let response = k
                    .response_code
                    .map_or_else(|| "success".to_owned(), |c| code_label(response_code_name(c), c));
                labels.push(("response_code", response));
                labels.push(("is_long_polling", flag(k.long_polling)));
            }
            (labels, h)
        })
        .collect::<Vec<_>>();
    let mut samples = samples;
    if let Some(h) = broker.stats.traffic.rpc_latency.overflow_if_used() {
        samples.push((vec![("otel_metric_overflow", flag(true))], h));
    }
    out.histograms("rocketmq_rpc_latency_milliseconds", "Rpc latency", samples);
}

fn pop(out: &mut Out<'_>, broker: &Broker) {
    let t = &broker.stats.traffic;
    out.histograms(
        "rocketmq_pop_buffer_scan_time_consume_milliseconds",
        "Time consuming of pop buffer scan",
        vec![(Vec::new(), &t.pop_scan)],
    );
    let mut revive_in = Vec::new();
    t.revive_in.each(|key, n| {
        let labels = match key {
            Some((group, topic, kind)) => vec![
                ("consumer_group", group.clone()),
                ("topic", topic.clone()),
                ("revive_message_type", kind.label().to_owned()),
                ("put_status", "PUT_OK".to_owned()),
            ],
            None => vec![("otel_metric_overflow", flag(true))],
        };
        revive_in.push((labels, count(n)));
    });
    out.family(
        "rocketmq_pop_revive_in_message_total",
        MetricType::Counter,
        "POP checkpoints and acks.",
        revive_in,
    );
    let (mut revive_out, mut retried) = (Vec::new(), Vec::new());
    t.revived.each(|key, n| {
        let (out_labels, retry_labels) = match key {
            Some((group, topic)) => (
                vec![
                    ("consumer_group", group.clone()),
                    ("topic", topic.clone()),
                    ("queue_id", "0".to_owned()),
                    ("revive_message_type", "CK".to_owned()),
                ],
                vec![
                    ("consumer_group", group.clone()),
                    ("topic", topic.clone()),
                    ("put_status", "PUT_OK".to_owned()),
                ],
            ),
            None => {
                let overflow = vec![("otel_metric_overflow", flag(true))];
                (overflow.clone(), overflow)
            }
        };
        revive_out.push((out_labels, count(n)));
        retried.push((retry_labels, count(n)));
    });
    out.family(
        "rocketmq_pop_revive_out_message_total",
        MetricType::Counter,
        "POP messages whose invisible time passed without an ack.",
        revive_out,
    );
    out.family(
        "rocketmq_pop_revive_retry_messages_total",
        MetricType::Counter,
        "POP messages handed out again.",
        retried,
    );
    let now = crate::now_ms();
    let backlog = broker.pop.backlog(now);
    out.family(
        "rocketmq_pop_offset_buffer_size",
        MetricType::Gauge,
        "Queues with POP state.",
        vec![(Vec::new(), backlog.queues as f64)],
    );
    out.family(
        "rocketmq_pop_checkpoint_buffer_size",
        MetricType::Gauge,
        "POP messages in flight.",
        vec![(Vec::new(), broker.pop.inflight() as f64)],
    );
    let queue = || vec![("queue_id", "0".to_owned())];
    // A message count under RocketMQ's millisecond name, as RocketMQ reports it.
    out.family(
        "rocketmq_pop_revive_lag_milliseconds",
        MetricType::Gauge,
        "POP messages visible again and not yet handed out.",
        vec![(queue(), backlog.visible_again as f64)],
    );
    let latency = backlog.earliest_visible_ms.map_or(0.0, |t| (now - t).max(0) as f64);
    out.family(
        "rocketmq_pop_revive_latency_milliseconds",
        MetricType::Gauge,
        "How long the earliest of those has been visible again.",
        vec![(queue(), latency)],
    );
}

fn store(out: &mut Out<'_>, broker: &Broker) {
    let labels = || vec![("storage_type", "local".to_owned()), ("storage_medium", "disk".to_owned())];
    let log = broker.store.commit_log();
    if let Ok(used) = log.disk_used_bytes() {
        out.family(
            "rocketmq_storage_size_bytes",
            MetricType::Gauge,
            "Bytes in use on the store's file system.",
            vec![(labels(), used as f64)],
        );
    }
    let max = log.max_offset();
    out.family(
        "rocketmq_storage_flush_behind_bytes",
        MetricType::Gauge,
        "Bytes appended and not yet flushed.",
        vec![(labels(), max.saturating_sub(log.flushed_offset()) as f64)],
    );
    out.family(
        "rocketmq_storage_dispatch_behind_bytes",
        MetricType::Gauge,
        "Bytes appended and not yet in the consume queues.",
        vec![(labels(), max.saturating_sub(broker.store.dispatched_offset()) as f64)],
    );
    let oldest = log
        .read_record(log.min_offset())
        .ok()
        .flatten()
        .and_then(|r| RecordView::parse(&r).ok().map(|v| v.store_timestamp));
    if let Some(stored_ms) = oldest {
        out.family(
            "rocketmq_storage_message_reserve_time_milliseconds",
            MetricType::Gauge,
            "Age of the oldest message stored.",
            vec![(labels(), (crate::now_ms() - stored_ms).max(0) as f64)],
        );
    }
}

fn timer(out: &mut Out<'_>, broker: &Broker) {
    let t = &broker.stats.traffic;
    let now = crate::now_ms();
    let with_store = |mut own: Labels| {
        own.push(("storage_type", "local".to_owned()));
        own.push(("storage_medium", "disk".to_owned()));
        own
    };
    let wheel = broker.timer.wheel(now, TIMER_BOUNDS_S);
    let stored_and_unread = broker.timer.pending(|q| broker.store.queue_offsets(TIMER_TOPIC, q).1);
    let gauges = [
        (
            "rocketmq_timer_enqueue_lag",
            "Timer messages stored and not yet read into the index.",
            stored_and_unread.saturating_sub(wheel.indexed) as f64,
        ),
        (
            "rocketmq_timer_enqueue_latency_milliseconds",
            "How late the index's reading of due messages is (Petrel reads them as they are stored).",
            0.0,
        ),
        (
            "rocketmq_timer_dequeue_lag",
            "Timer messages indexed and not yet delivered.",
            wheel.indexed as f64,
        ),
        (
            "rocketmq_timer_dequeue_latency_milliseconds",
            "How long the earliest due message has been due.",
            wheel.earliest_due_ms.map_or(0.0, |d| (now - d).max(0) as f64),
        ),
    ];
    for (name, help, v) in gauges {
        out.family(name, MetricType::Gauge, help, vec![(with_store(Vec::new()), v)]);
    }
    let snapshot = TIMER_BOUNDS_S
        .iter()
        .zip(&wheel.within)
        .map(|(b, n)| (with_store(vec![("timer_bound_s", b.to_string())]), *n as f64))
        .collect();
    out.family(
        "rocketmq_timer_message_snapshot",
        MetricType::Gauge,
        "Timer messages due within each bound.",
        snapshot,
    );
    let enqueued = per_topic(&t.timer_enqueued, count);
    let dequeued = per_topic(&t.timer_dequeued, count);
    let timing = enqueued
        .iter()
        .map(|(labels, n)| {
            let out_n = dequeued.iter().find(|(l, _)| l == labels).map_or(0.0, |(_, d)| *d);
            (with_store(labels.clone()), (n - out_n).max(0.0))
        })
        .collect();
    out.family(
        "rocketmq_timing_messages",
        MetricType::Gauge,
        "Timer messages waiting, per topic (counted since this broker started).",
        timing,
    );
    let store_labels = |v: Vec<(Labels, f64)>| v.into_iter().map(|(l, n)| (with_store(l), n)).collect::<Vec<_>>();
    out.family(
        "rocketmq_timer_enqueue_total",
        MetricType::Counter,
        "Timer messages taken in.",
        store_labels(enqueued),
    );
    out.family(
        "rocketmq_timer_dequeue_total",
        MetricType::Counter,
        "Timer messages delivered.",
        store_labels(dequeued),
    );
    let latency = t.delay_latency.series_guard();
    let samples = latency
        .iter()
        .map(|(topic, h)| (with_store(vec![("topic", topic.clone())]), h))
        .collect();
    out.histograms(
        "rocketmq_delay_message_latency_seconds",
        "Timer message set latency distribution",
        samples,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_versions_are_named_as_mqversion_names_them() {
        assert_eq!(version_label(413), "v5_0_0");
        assert_eq!(version_label(413 + 20 * 5), "v5_5_0");
        assert_eq!(version_label(413 + 20 * 2 + 2 * 3), "v5_2_3");
        assert_eq!(version_label(401), "v4_9_4");
        assert_eq!(version_label(402), "v4_9_5_snapshot");
        assert_eq!(version_label(412), "v5_0_0_snapshot");
        assert_eq!(version_label(12), "12");
    }

    #[test]
    fn metrics_label_pairs_are_read_and_items_without_a_colon_skipped() {
        let labels = custom_labels("region:eu, broken ,zone:a");
        assert_eq!(labels, vec![("region", "eu".to_owned()), ("zone", "a".to_owned())]);
    }
}
