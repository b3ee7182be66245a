//! Traffic counted under the labels of RocketMQ 5's broker metrics: messages and bytes in by
//! topic and message type, out by topic and consumer group, dead-lettered, transactions ended,
//! timer messages in and out, POP checkpoints and acks, topic and group creation times, and
//! each remoting request's latency.
//!
//! Owns: the labelled counters and their bound. Every family keeps at most
//! `metricsOtelCardinalityLimit` label sets; past it, new label sets count in the family's one
//! overflow series, as RocketMQ's OpenTelemetry views fold them. Must never: take a lock a
//! scrape holds for longer than a copy, or grow a family past its bound.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};

use parking_lot::RwLock;
use petrel_protocol::properties::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, keys};

/// RocketMQ 5's default `metricsOtelCardinalityLimit`: label sets per family.
pub const DEFAULT_CARDINALITY_LIMIT: usize = 50_000;

/// `rocketmq_rpc_latency`'s bounds, ms (RocketMQ's view).
pub const RPC_LATENCY_BOUNDS_MS: &[u64] = &[1, 3, 5, 7, 10, 100, 1000, 2000, 3000];
/// `rocketmq_message_size`'s bounds, bytes.
pub const MESSAGE_SIZE_BOUNDS_BYTES: &[u64] = &[1024, 4096, 524_288, 1_048_576, 2_097_152, 4_194_304];
/// Topic and group creation times' bounds, ms.
pub const CREATE_TIME_BOUNDS_MS: &[u64] = &[10, 100, 1000, 3000, 5000];
/// `rocketmq_finish_message_latency`'s bounds: seconds, whatever the name says (RocketMQ
/// records seconds under a millisecond unit; the same numbers keep its dashboards right).
pub const FINISH_LATENCY_BOUNDS_S: &[u64] = &[5, 60, 600, 3600, 43_200, 86_400];
/// `rocketmq_delay_message_latency`'s bounds, seconds.
pub const DELAY_LATENCY_BOUNDS_S: &[u64] = &[60, 600, 3600, 43_200, 86_400, 259_200];
/// `rocketmq_pop_buffer_scan_time_consume`'s bounds, ms.
pub const POP_SCAN_BOUNDS_MS: &[u64] = &[1, 10, 100, 1000, 2000, 3000];

/// A histogram over fixed upper bounds, in whole units.
pub struct FixedHistogram {
    bounds: &'static [u64],
    /// One count per bound, then the +Inf bucket's.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl FixedHistogram {
    /// An empty histogram over `bounds` (ascending; +Inf is implied).
    #[must_use]
    pub fn new(bounds: &'static [u64]) -> FixedHistogram {
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bounds ascend");
        FixedHistogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts `value` in the first bucket whose bound it does not pass.
    pub fn record(&self, value: u64) {
        let bucket = self.bounds.partition_point(|b| *b < value);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// (upper bound, count in that bucket alone), the last bound `None` (+Inf); the sum; the count.
    #[must_use]
    pub fn snapshot(&self) -> (Vec<(Option<u64>, u64)>, u64, u64) {
        let buckets: Vec<(Option<u64>, u64)> = self
            .bounds
            .iter()
            .map(|b| Some(*b))
            .chain(std::iter::once(None))
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        (buckets, self.sum.load(Ordering::Relaxed), count)
    }
}

/// One family's label sets, at most `limit` of them, and the overflow series past it.
pub struct Family<K, V> {
    make: fn() -> V,
    series: RwLock<HashMap<K, V>>,
    overflow: V,
    overflowed: AtomicBool,
}

impl<K: Eq + Hash, V> Family<K, V> {
    fn new(make: fn() -> V) -> Family<K, V> {
        Family {
            make,
            series: RwLock::new(HashMap::new()),
            overflow: make(),
            overflowed: AtomicBool::new(false),
        }
    }

    /// Runs `f` on the series of `key` (looked up as borrowed, made owned only when the series
    /// is new), or on the overflow series when the family holds `limit` label sets already.
    pub fn with<Q, R>(&self, key: &Q, limit: usize, f: impl FnOnce(&V) -> R) -> R
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        {
            let series = self.series.read();
            if let Some(v) = series.get(key) {
                return f(v);
            }
            // A full family sends new label sets to the overflow series without the write lock.
            if series.len() >= limit {
                drop(series);
                self.overflowed.store(true, Ordering::Relaxed);
                return f(&self.overflow);
            }
        }
        let mut series = self.series.write();
        if !series.contains_key(key) && series.len() >= limit {
            drop(series);
            self.overflowed.store(true, Ordering::Relaxed);
            return f(&self.overflow);
        }
        let v = series.entry(key.to_owned()).or_insert_with(self.make);
        f(v)
    }

    /// Each series' key and what `read` takes of its value (the overflow series last, its key
    /// `None`), copied under the read lock so that a scrape builds its labels without it.
    pub fn snapshot<S>(&self, read: impl Fn(&V) -> S) -> Vec<(Option<K>, S)>
    where
        K: Clone,
    {
        let mut out: Vec<(Option<K>, S)> = self.series.read().iter().map(|(k, v)| (Some(k.clone()), read(v))).collect();
        if self.overflowed.load(Ordering::Relaxed) {
            out.push((None, read(&self.overflow)));
        }
        out
    }

    /// Label sets held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.series.read().len()
    }

    /// Whether no label set was counted yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && !self.overflowed.load(Ordering::Relaxed)
    }
}

/// A message's kind as RocketMQ's metrics tell it, from its properties: transaction
/// (`TRAN_MSG=true`), delay (a delay level or a timer property), FIFO (a sharding key), else
/// normal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// None of the others.
    Normal,
    /// With a sharding key (`__SHARDINGKEY`).
    Fifo,
    /// With a delay level or a timer property.
    Delay,
    /// The half of a transaction (`TRAN_MSG=true`).
    Transaction,
}

impl MessageKind {
    /// The kind `properties` (RocketMQ's encoded property string) say.
    #[must_use]
    pub fn of(properties: &str) -> MessageKind {
        // One pass over the properties: RocketMQ's order is transaction, then delay, then FIFO.
        let (mut transaction, mut delay, mut fifo) = (false, false, false);
        for pair in properties.split(PROPERTY_SEPARATOR) {
            let Some((key, value)) = pair.split_once(NAME_VALUE_SEPARATOR) else {
                continue;
            };
            match key {
                keys::TRANSACTION_PREPARED => transaction = value.eq_ignore_ascii_case("true"),
                keys::DELAY_TIME_LEVEL | keys::TIMER_DELIVER_MS | keys::TIMER_DELAY_SEC | keys::TIMER_DELAY_MS => delay = true,
                keys::SHARDING_KEY => fifo = true,
                _ => {}
            }
        }
        match (transaction, delay, fifo) {
            (true, _, _) => MessageKind::Transaction,
            (false, true, _) => MessageKind::Delay,
            (false, false, true) => MessageKind::Fifo,
            (false, false, false) => MessageKind::Normal,
        }
    }

    /// The index of this kind in a topic's per-kind counters.
    #[must_use]
    pub fn index(self) -> usize {
        match self {
            MessageKind::Normal => 0,
            MessageKind::Fifo => 1,
            MessageKind::Delay => 2,
            MessageKind::Transaction => 3,
        }
    }

    /// Every kind, in index order.
    pub const ALL: [MessageKind; 4] = [MessageKind::Normal, MessageKind::Fifo, MessageKind::Delay, MessageKind::Transaction];

    /// The `message_type` label's value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            MessageKind::Normal => "normal",
            MessageKind::Fifo => "fifo",
            MessageKind::Delay => "delay",
            MessageKind::Transaction => "transaction",
        }
    }
}

/// Messages stored under one (topic, kind).
pub struct InTraffic {
    /// Messages stored.
    pub messages: AtomicU64,
    /// Their bytes, as laid out in the commit log.
    pub bytes: AtomicU64,
    /// Each store's bytes per message.
    pub size: FixedHistogram,
}

fn new_in() -> InTraffic {
    InTraffic {
        messages: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        size: FixedHistogram::new(MESSAGE_SIZE_BOUNDS_BYTES),
    }
}

fn new_in_by_kind() -> [InTraffic; 4] {
    [new_in(), new_in(), new_in(), new_in()]
}

/// Messages read by one (topic, group, retry or not).
#[derive(Default)]
pub struct OutTraffic {
    /// Messages read.
    pub messages: AtomicU64,
    /// Their stored bytes.
    pub bytes: AtomicU64,
}

/// How a request's answer went, RocketMQ's `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RpcResult {
    /// Answered.
    Success,
    /// A oneway request: nothing to answer.
    Oneway,
    /// The handler ended without an answer (the client's call times out).
    ProcessRequestFailed,
}

impl RpcResult {
    /// The `result` label's value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            RpcResult::Success => "success",
            RpcResult::Oneway => "oneway",
            RpcResult::ProcessRequestFailed => "process_request_failed",
        }
    }
}

/// The request code counted for every code this broker does not serve: one series for them all,
/// so that clients sending made-up codes cannot grow the family.
pub const UNKNOWN_REQUEST_CODE: i32 = i32::MIN;

/// What was asked, on which wire, and what it was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RpcRequest {
    /// A remoting request.
    Remoting {
        /// The request's code.
        request_code: i32,
        /// The answer's code; `None` when nothing was answered.
        response_code: Option<i32>,
    },
    /// A gRPC call, by names from closed sets (the service's methods, the protocol's codes).
    Grpc {
        /// The method, in snake case as RocketMQ labels request codes (`send_message`).
        method: &'static str,
        /// The answer's `apache.rocketmq.v2.Code` (`OK`, `MESSAGE_NOT_FOUND`, …).
        code: &'static str,
    },
}

/// One request's labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RpcKey {
    /// The request and its answer.
    pub request: RpcRequest,
    /// How it went.
    pub result: RpcResult,
    /// Whether the broker held it until messages arrived (a deferred pull or pop).
    pub long_polling: bool,
}

/// A POP record of RocketMQ's revive log: a checkpoint (a message handed out) or an ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviveKind {
    /// A message handed out.
    Checkpoint,
    /// A message acked.
    Ack,
}

impl ReviveKind {
    /// The `revive_message_type` label's value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            ReviveKind::Checkpoint => "CK",
            ReviveKind::Ack => "ACK",
        }
    }
}

fn counter() -> AtomicU64 {
    AtomicU64::new(0)
}
fn gauge() -> AtomicI64 {
    AtomicI64::new(0)
}
fn rpc_histogram() -> FixedHistogram {
    FixedHistogram::new(RPC_LATENCY_BOUNDS_MS)
}
fn create_histogram() -> FixedHistogram {
    FixedHistogram::new(CREATE_TIME_BOUNDS_MS)
}
fn finish_histogram() -> FixedHistogram {
    FixedHistogram::new(FINISH_LATENCY_BOUNDS_S)
}
fn delay_histogram() -> FixedHistogram {
    FixedHistogram::new(DELAY_LATENCY_BOUNDS_S)
}

/// (group, topic).
pub type GroupTopic = (String, String);

/// The labelled counters, one family per RocketMQ metric that counts events.
pub struct Traffic {
    /// Whether anything is counted: only while metrics are exported (`metricsExporterType=PROM`).
    enabled: AtomicBool,
    limit: AtomicUsize,
    /// Stored topic -> its messages by kind ([`MessageKind::index`]).
    pub messages_in: Family<String, [InTraffic; 4]>,
    /// (topic, group, `Some(is_retry)` for POP reads).
    pub messages_out: Family<(String, String, Option<bool>), OutTraffic>,
    /// (group, topic) -> messages moved to the group's DLQ.
    pub sent_to_dlq: Family<GroupTopic, AtomicU64>,
    /// Real topic -> transactions committed.
    pub commits: Family<String, AtomicU64>,
    /// Real topic -> transactions rolled back.
    pub rollbacks: Family<String, AtomicU64>,
    /// Real topic -> seconds from a committed half message's birth to its commit.
    pub finish_latency: Family<String, FixedHistogram>,
    /// Real topic -> half messages stored and not yet decided (since this start).
    pub half_messages: Family<String, AtomicI64>,
    /// (success, system topic) -> ms a topic update took.
    pub topic_create: Family<(bool, bool), FixedHistogram>,
    /// success -> ms a group update took.
    pub group_create: Family<bool, FixedHistogram>,
    /// Remoting requests' latency, ms.
    pub rpc_latency: Family<RpcKey, FixedHistogram>,
    /// Real topic -> timer messages taken in.
    pub timer_enqueued: Family<String, AtomicU64>,
    /// Real topic -> timer messages delivered.
    pub timer_dequeued: Family<String, AtomicU64>,
    /// Real topic -> a timer message's requested delay, seconds.
    pub delay_latency: Family<String, FixedHistogram>,
    /// (group, topic, kind) -> POP checkpoints and acks recorded.
    pub revive_in: Family<(String, String, ReviveKind), AtomicU64>,
    /// (group, topic) -> POP messages handed out again after their invisible time passed.
    pub revived: Family<GroupTopic, AtomicU64>,
    /// How long each pop took to look through its queues, ms.
    pub pop_scan: FixedHistogram,
}

impl Default for Traffic {
    fn default() -> Traffic {
        Traffic {
            enabled: AtomicBool::new(true),
            limit: AtomicUsize::new(DEFAULT_CARDINALITY_LIMIT),
            messages_in: Family::new(new_in_by_kind),
            messages_out: Family::new(OutTraffic::default),
            sent_to_dlq: Family::new(counter),
            commits: Family::new(counter),
            rollbacks: Family::new(counter),
            finish_latency: Family::new(finish_histogram),
            half_messages: Family::new(gauge),
            topic_create: Family::new(create_histogram),
            group_create: Family::new(create_histogram),
            rpc_latency: Family::new(rpc_histogram),
            timer_enqueued: Family::new(counter),
            timer_dequeued: Family::new(counter),
            delay_latency: Family::new(delay_histogram),
            revive_in: Family::new(counter),
            revived: Family::new(counter),
            pop_scan: FixedHistogram::new(POP_SCAN_BOUNDS_MS),
        }
    }
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Traffic {
    /// Sets `metricsOtelCardinalityLimit`.
    pub fn set_cardinality_limit(&self, limit: usize) {
        assert!(limit > 0, "a family holds at least one label set");
        self.limit.store(limit, Ordering::Relaxed);
    }

    fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Turns counting on or off (off: every call below returns at once).
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    /// Whether counting is on.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// `count` messages of `kind` stored in `topic`, `bytes` as laid out in the commit log.
    /// Retry and dead-letter topics are not counted (as RocketMQ does not).
    pub fn stored(&self, topic: &str, kind: MessageKind, count: u64, bytes: u64) {
        if !self.enabled() || count == 0 || is_retry_or_dlq(topic) {
            return;
        }
        self.messages_in.with(topic, self.limit(), |by_kind| {
            let t = &by_kind[kind.index()];
            add(&t.messages, count);
            add(&t.bytes, bytes);
            t.size.record(bytes / count);
        });
    }

    /// `count` messages (`bytes` stored bytes) read from `topic` by `group`; `pop_retry` is
    /// `Some` for POP reads (whether handed out again). Pulls of retry and dead-letter topics are
    /// not counted (as RocketMQ does not).
    pub fn read(&self, topic: &str, group: &str, pop_retry: Option<bool>, count: u64, bytes: u64) {
        if !self.enabled() || count == 0 || (pop_retry.is_none() && is_retry_or_dlq(topic)) {
            return;
        }
        let key = (topic.to_owned(), group.to_owned(), pop_retry);
        self.messages_out.with(&key, self.limit(), |t| {
            add(&t.messages, count);
            add(&t.bytes, bytes);
        });
    }

    /// A message of `topic` (its original topic) moved to `group`'s dead-letter queue.
    pub fn dead_lettered(&self, group: &str, topic: &str) {
        if !self.enabled() {
            return;
        }
        let key = (group.to_owned(), topic.to_owned());
        self.sent_to_dlq.with(&key, self.limit(), |c| add(c, 1));
    }

    /// A half message for `topic` stored.
    pub fn half_stored(&self, topic: &str) {
        if !self.enabled() {
            return;
        }
        self.half_messages.with(topic, self.limit(), |g| {
            g.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// A half message for `topic` given up (checked `transactionCheckMax` times): no longer
    /// pending, neither committed nor rolled back.
    pub fn half_discarded(&self, topic: &str) {
        if !self.enabled() {
            return;
        }
        self.half_messages.with(topic, self.limit(), |g| {
            g.fetch_sub(1, Ordering::Relaxed);
        });
    }

    /// A transaction of `topic` decided: committed (`born_ms` its half message's birth) or not.
    pub fn transaction_ended(&self, topic: &str, committed: bool, born_ms: i64, now_ms: i64) {
        if !self.enabled() {
            return;
        }
        let limit = self.limit();
        self.half_messages.with(topic, limit, |g| {
            g.fetch_sub(1, Ordering::Relaxed);
        });
        if committed {
            self.commits.with(topic, limit, |c| add(c, 1));
            let seconds = u64::try_from(now_ms.saturating_sub(born_ms) / 1000).unwrap_or(0);
            self.finish_latency.with(topic, limit, |h| h.record(seconds));
        } else {
            self.rollbacks.with(topic, limit, |c| add(c, 1));
        }
    }

    /// A topic update answered (`success`) after `elapsed_ms`.
    pub fn topic_updated(&self, success: bool, system: bool, elapsed_ms: u64) {
        if self.enabled() {
            self.topic_create.with(&(success, system), self.limit(), |h| h.record(elapsed_ms));
        }
    }

    /// A group update answered (`success`) after `elapsed_ms`.
    pub fn group_updated(&self, success: bool, elapsed_ms: u64) {
        if self.enabled() {
            self.group_create.with(&success, self.limit(), |h| h.record(elapsed_ms));
        }
    }

    /// A remoting request or a gRPC call answered (or not) after `elapsed_ms`.
    pub fn rpc(&self, key: RpcKey, elapsed_ms: u64) {
        if self.enabled() {
            self.rpc_latency.with(&key, self.limit(), |h| h.record(elapsed_ms));
        }
    }

    /// A timer message for `topic` taken in, due `delay_s` after its birth.
    pub fn timer_enqueued(&self, topic: &str, delay_s: u64) {
        if !self.enabled() {
            return;
        }
        let limit = self.limit();
        self.timer_enqueued.with(topic, limit, |c| add(c, 1));
        self.delay_latency.with(topic, limit, |h| h.record(delay_s));
    }

    /// A timer message for `topic` delivered.
    pub fn timer_dequeued(&self, topic: &str) {
        if self.enabled() {
            self.timer_dequeued.with(topic, self.limit(), |c| add(c, 1));
        }
    }

    /// `count` POP checkpoints (messages handed out) or acks of `group` on `topic`.
    pub fn revive_log(&self, group: &str, topic: &str, kind: ReviveKind, count: u64) {
        if !self.enabled() || count == 0 {
            return;
        }
        let key = (group.to_owned(), topic.to_owned(), kind);
        self.revive_in.with(&key, self.limit(), |c| add(c, count));
    }

    /// `count` POP messages of `group` on `topic` handed out again after their invisible time.
    pub fn revived(&self, group: &str, topic: &str, count: u64) {
        if !self.enabled() || count == 0 {
            return;
        }
        let key = (group.to_owned(), topic.to_owned());
        self.revived.with(&key, self.limit(), |c| add(c, count));
    }
}

fn is_retry_or_dlq(topic: &str) -> bool {
    topic.starts_with("%RETRY%") || topic.starts_with("%DLQ%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_a_value_in_the_first_bucket_whose_bound_it_does_not_pass() {
        let h = FixedHistogram::new(&[1, 10]);
        for v in [0, 1, 2, 10, 11] {
            h.record(v);
        }
        let (buckets, sum, count) = h.snapshot();
        assert_eq!(buckets, vec![(Some(1), 2), (Some(10), 2), (None, 1)]);
        assert_eq!((sum, count), (24, 5));
    }

    #[test]
    fn a_family_past_its_limit_counts_new_label_sets_in_its_overflow_series() {
        let t = Traffic::default();
        t.set_cardinality_limit(2);
        for topic in ["a", "b", "c", "d", "a"] {
            t.stored(topic, MessageKind::Normal, 1, 100);
        }
        let mut seen = t
            .messages_in
            .snapshot(|v| v[MessageKind::Normal.index()].messages.load(Ordering::Relaxed));
        seen.sort();
        assert_eq!(
            seen,
            vec![(None, 2), (Some("a".to_owned()), 2), (Some("b".to_owned()), 1)],
            "c and d fold into the overflow series"
        );
        assert_eq!(t.messages_in.len(), 2);
    }

    #[test]
    fn nothing_is_counted_while_metrics_are_not_exported() {
        let t = Traffic::default();
        t.set_enabled(false);
        t.stored("a", MessageKind::Normal, 1, 100);
        t.read("a", "g", None, 1, 100);
        t.rpc(
            RpcKey {
                request: RpcRequest::Remoting {
                    request_code: 10,
                    response_code: Some(0),
                },
                result: RpcResult::Success,
                long_polling: false,
            },
            1,
        );
        assert!(t.messages_in.is_empty() && t.messages_out.is_empty() && t.rpc_latency.is_empty());
    }

    #[test]
    fn retry_and_dead_letter_topics_are_not_counted_in_or_by_pulls_but_pop_retries_are() {
        let t = Traffic::default();
        t.stored("%RETRY%g", MessageKind::Normal, 1, 10);
        t.stored("%DLQ%g", MessageKind::Normal, 1, 10);
        t.read("%RETRY%g", "g", None, 1, 10);
        assert!(t.messages_in.is_empty() && t.messages_out.is_empty());
        t.read("%RETRY%g", "g", Some(true), 1, 10);
        assert_eq!(t.messages_out.len(), 1);
    }

    #[test]
    fn the_kind_follows_rocketmqs_order_transaction_then_delay_then_fifo() {
        let props = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| format!("{k}\u{1}{v}\u{2}")).collect::<String>();
        assert_eq!(MessageKind::of(""), MessageKind::Normal);
        assert_eq!(MessageKind::of(&props(&[("DELAY", "3")])), MessageKind::Delay);
        assert_eq!(MessageKind::of(&props(&[("TIMER_DELAY_SEC", "3")])), MessageKind::Delay);
        assert_eq!(MessageKind::of(&props(&[("__SHARDINGKEY", "k")])), MessageKind::Fifo);
        assert_eq!(
            MessageKind::of(&props(&[("__SHARDINGKEY", "k"), ("DELAY", "3")])),
            MessageKind::Delay
        );
        assert_eq!(
            MessageKind::of(&props(&[("TRAN_MSG", "TRUE"), ("__SHARDINGKEY", "k")])),
            MessageKind::Transaction
        );
        assert_eq!(MessageKind::of(&props(&[("TRAN_MSG", "false")])), MessageKind::Normal);
    }
}
