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
use crate::error::BrokerError;
use crate::services::timer::TIMER_TOPIC;
use crate::traffic::{FixedHistogram, MessageKind, RpcRequest, RpcResult};

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

/// Labels `metricsLabel` may not name: the common ones and the families' own.
const RESERVED_LABELS: &[&str] = &[
    "cluster",
    "node_type",
    "node_id",
    "aggregation",
    "otel_scope_name",
    "otel_metric_overflow",
    "le",
    "topic",
    "consumer_group",
    "message_type",
    "is_system",
    "is_retry",
    "protocol_type",
];
/// Pairs `metricsLabel` may hold.
const MAX_CUSTOM_LABELS: usize = 16;

/// `metricsLabel`'s `key:value` pairs, checked: each key a Prometheus label name that no series
/// uses already, at most [`MAX_CUSTOM_LABELS`] pairs. A scrape with a bad or repeated label name
/// is refused whole by Prometheus, so a bad setting is refused at start instead.
///
/// # Errors
/// The first item that breaks a rule, named.
pub fn parse_metrics_label(spec: &str) -> Result<Vec<(String, String)>, BrokerError> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once(':') else {
            return Err(BrokerError::InvalidParameter(format!(
                "metricsLabel item `{item}` is not key:value"
            )));
        };
        let valid = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !key.starts_with("__");
        if !valid {
            return Err(BrokerError::InvalidParameter(format!(
                "metricsLabel key `{key}` is not a Prometheus label name"
            )));
        }
        if RESERVED_LABELS.contains(&key) || pairs.iter().any(|(k, _)| k == key) {
            return Err(BrokerError::InvalidParameter(format!(
                "metricsLabel key `{key}` is already a label of the series"
            )));
        }
        pairs.push((key.to_owned(), value.to_owned()));
    }
    if pairs.len() > MAX_CUSTOM_LABELS {
        return Err(BrokerError::InvalidParameter(format!(
            "metricsLabel holds {} pairs; at most {MAX_CUSTOM_LABELS}",
            pairs.len()
        )));
    }
    Ok(pairs)
}

/// `metricsLabel`'s pairs with their keys as the label API takes them (`&'static str`: each
/// distinct key is leaked once; the setting is read once, and holds at most 16 keys).
fn custom_labels(spec: &str) -> Vec<(&'static str, String)> {
    static KEYS: std::sync::OnceLock<parking_lot::Mutex<Vec<&'static str>>> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    // Checked when the configuration was read.
    let pairs = parse_metrics_label(spec).unwrap_or_default();
    let mut known = keys.lock();
    pairs
        .into_iter()
        .filter_map(|(k, v)| {
            let key = match known.iter().find(|x| **x == k) {
                Some(x) => *x,
                None if known.len() < 4 * MAX_CUSTOM_LABELS => {
                    let leaked: &'static str = Box::leak(k.into_boxed_str());
                    known.push(leaked);
                    leaked
                }
                None => return None,
            };
            Some((key, v))
        })
        .collect()
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

    /// A histogram family from snapshots; nothing when empty.
    fn histograms(&mut self, name: &str, help: &str, samples: Vec<(Labels, Hist)>) {
        if samples.is_empty() {
            return;
        }
        let samples = samples
            .into_iter()
            .map(|(l, (buckets, sum, count))| {
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

/// A histogram's snapshot: (bucket bound, count in it) with +Inf last, the sum, the count.
type Hist = (Vec<(Option<u64>, u64)>, u64, u64);

/// The labels of a family's overflow series.
fn overflow() -> Labels {
    vec![("otel_metric_overflow", flag(true))]
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
    let ins = t.messages_in.snapshot(|by_kind| {
        by_kind
            .iter()
            .map(|k| (count(&k.messages), count(&k.bytes), k.size.snapshot()))
            .collect::<Vec<_>>()
    });
    let (mut messages, mut bytes, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    for (topic, by_kind) in ins {
        for (kind, (n, b, size)) in MessageKind::ALL.iter().zip(by_kind) {
            if n == 0.0 {
                continue;
            }
            let labels = match &topic {
                Some(topic) => vec![
                    ("topic", topic.clone()),
                    ("message_type", kind.label().to_owned()),
                    ("is_system", system(topic)),
                ],
                None => overflow(),
            };
            messages.push((labels.clone(), n));
            bytes.push((labels.clone(), b));
            sizes.push((labels, size));
        }
    }
    out.family("rocketmq_messages_in_total", MetricType::Counter, "Messages stored.", messages);
    out.family("rocketmq_throughput_in_total", MetricType::Counter, "Bytes stored.", bytes);
    out.histograms("rocketmq_message_size", "Incoming messages size", sizes);

    let (mut messages, mut bytes) = (Vec::new(), Vec::new());
    for (key, (n, b)) in t.messages_out.snapshot(|v| (count(&v.messages), count(&v.bytes))) {
        let labels = match key {
            Some((topic, group, retry)) => {
                let is_system = broker.topics.is_system_topic(&topic) || group.starts_with("CID_RMQ_SYS_");
                let mut l = vec![("topic", topic), ("consumer_group", group), ("is_system", flag(is_system))];
                if let Some(retry) = retry {
                    l.push(("is_retry", flag(retry)));
                }
                l
            }
            None => overflow(),
        };
        messages.push((labels.clone(), n));
        bytes.push((labels, b));
    }
    out.family("rocketmq_messages_out_total", MetricType::Counter, "Messages read.", messages);
    out.family("rocketmq_throughput_out_total", MetricType::Counter, "Bytes read.", bytes);

    let samples = t
        .topic_create
        .snapshot(FixedHistogram::snapshot)
        .into_iter()
        .map(|(key, h)| {
            let labels = key.map_or_else(overflow, |(success, system)| {
                vec![("invocation_status", status(success)), ("is_system", flag(system))]
            });
            (labels, h)
        })
        .collect();
    out.histograms(
        "rocketmq_topic_create_execution_time_milliseconds",
        "The distribution of create topic time",
        samples,
    );
    let samples = t
        .group_create
        .snapshot(FixedHistogram::snapshot)
        .into_iter()
        .map(|(key, h)| (key.map_or_else(overflow, |success| vec![("invocation_status", status(success))]), h))
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

    let dlq = broker
        .stats
        .traffic
        .sent_to_dlq
        .snapshot(count)
        .into_iter()
        .map(|(key, n)| {
            let labels = key.map_or_else(overflow, |(group, topic)| {
                let is_system = broker.topics.is_system_topic(&topic) || group.to_ascii_lowercase().starts_with("cid_rmq_sys_");
                vec![("consumer_group", group), ("topic", topic), ("is_system", flag(is_system))]
            });
            (labels, n)
        })
        .collect();
    out.family(
        "rocketmq_send_to_dlq_messages_total",
        MetricType::Counter,
        "Messages moved to a DLQ.",
        dlq,
    );
}

/// A per-topic family's samples.
fn per_topic<V>(family: &crate::traffic::Family<String, V>, value: impl Fn(&V) -> f64) -> Vec<(Labels, f64)> {
    family
        .snapshot(value)
        .into_iter()
        .map(|(topic, v)| (topic.map_or_else(overflow, |t| vec![("topic", t)]), v))
        .collect()
}

/// A per-topic histogram family's samples.
fn per_topic_histograms(family: &crate::traffic::Family<String, FixedHistogram>) -> Vec<(Labels, Hist)> {
    family
        .snapshot(FixedHistogram::snapshot)
        .into_iter()
        .map(|(topic, h)| (topic.map_or_else(overflow, |t| vec![("topic", t)]), h))
        .collect()
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
    // Seconds, under RocketMQ's millisecond name: its dashboards read these numbers.
    out.histograms(
        "rocketmq_finish_message_latency_milliseconds",
        "Transaction finish latency",
        per_topic_histograms(&t.finish_latency),
    );
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
    let samples = broker
        .stats
        .traffic
        .rpc_latency
        .snapshot(FixedHistogram::snapshot)
        .into_iter()
        .map(|(key, h)| {
            let Some(k) = key else {
                return (overflow(), h);
            };
            let (protocol, request, response) = match k.request {
                RpcRequest::Remoting {
                    request_code,
                    response_code,
                } => {
                    let request = if request_code == crate::traffic::UNKNOWN_REQUEST_CODE {
                        "unknown".to_owned()
                    } else {
                        code_label(request_code_name(request_code), request_code)
                    };
                    let response = response_code.map_or_else(|| "success".to_owned(), |c| code_label(response_code_name(c), c));
                    ("remoting", request, response)
                }
                RpcRequest::Grpc { method, code } => ("grpc", method.to_owned(), code.to_ascii_lowercase()),
            };
            let mut labels = vec![
                ("protocol_type", protocol.to_owned()),
                ("request_code", request),
                ("result", k.result.label().to_owned()),
            ];
            if k.result != RpcResult::ProcessRequestFailed {
                labels.push(("response_code", response));
                labels.push(("is_long_polling", flag(k.long_polling)));
            }
            (labels, h)
        })
        .collect();
    out.histograms("rocketmq_rpc_latency_milliseconds", "Rpc latency", samples);
}

fn pop(out: &mut Out<'_>, broker: &Broker) {
    let t = &broker.stats.traffic;
    out.histograms(
        "rocketmq_pop_buffer_scan_time_consume_milliseconds",
        "Time consuming of pop buffer scan",
        vec![(Vec::new(), t.pop_scan.snapshot())],
    );
    let revive_in = t
        .revive_in
        .snapshot(count)
        .into_iter()
        .map(|(key, n)| {
            let labels = key.map_or_else(overflow, |(group, topic, kind)| {
                vec![
                    ("consumer_group", group),
                    ("topic", topic),
                    ("revive_message_type", kind.label().to_owned()),
                    ("put_status", "PUT_OK".to_owned()),
                ]
            });
            (labels, n)
        })
        .collect();
    out.family(
        "rocketmq_pop_revive_in_message_total",
        MetricType::Counter,
        "POP checkpoints and acks.",
        revive_in,
    );
    let (mut revive_out, mut retried) = (Vec::new(), Vec::new());
    for (key, n) in t.revived.snapshot(count) {
        let (out_labels, retry_labels) = match key {
            Some((group, topic)) => (
                vec![
                    ("consumer_group", group.clone()),
                    ("topic", topic.clone()),
                    ("queue_id", "0".to_owned()),
                    ("revive_message_type", "CK".to_owned()),
                ],
                vec![("consumer_group", group), ("topic", topic), ("put_status", "PUT_OK".to_owned())],
            ),
            None => (overflow(), overflow()),
        };
        revive_out.push((out_labels, n));
        retried.push((retry_labels, n));
    }
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
    let delivered: std::collections::HashMap<&Labels, f64> = dequeued.iter().map(|(l, n)| (l, *n)).collect();
    let timing = enqueued
        .iter()
        .map(|(labels, n)| {
            (
                with_store(labels.clone()),
                (n - delivered.get(labels).copied().unwrap_or(0.0)).max(0.0),
            )
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
    let samples = per_topic_histograms(&t.delay_latency)
        .into_iter()
        .map(|(l, h)| (with_store(l), h))
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
    fn metrics_label_pairs_are_read_and_bad_ones_refused() {
        let labels = custom_labels("region:eu, zone:a");
        assert_eq!(labels, vec![("region", "eu".to_owned()), ("zone", "a".to_owned())]);
        for bad in ["broken", "1x:y", "a-b:c", "__x:y", "cluster:c", "topic:t", "a:1,a:2"] {
            assert!(parse_metrics_label(bad).is_err(), "{bad} is refused");
        }
        let sixteen: Vec<String> = (0..16).map(|i| format!("k{i}:v")).collect();
        assert!(parse_metrics_label(&sixteen.join(",")).is_ok(), "16 pairs");
        let seventeen: Vec<String> = (0..17).map(|i| format!("k{i}:v")).collect();
        assert!(parse_metrics_label(&seventeen.join(",")).is_err(), "17 pairs");
    }
}
