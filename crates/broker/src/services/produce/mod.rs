//! `ProduceService`: a send, from checks to a durable record — topic auto-creation, retry/DLQ
//! routing, the stored record exactly as RocketMQ lays it out, the append, and under
//! SYNC_FLUSH the wait for the flushed watermark.
//!
//! A send never parks a thread. The append runs inline when the store can take it without
//! blocking (the segment is prepared and the pages are faulted in), else on the store pool;
//! the durability wait is a future that the flusher completes. A waiter slot is reserved before
//! the append, so a full waiter table refuses the send with nothing written.
//!
//! Owns: turning a send into commit-log records. Must never: store a message it then reports as
//! refused, report success before the store does (under SYNC_FLUSH that means durable), or hold
//! more durability waiters than the watermark's bound.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use petrel_protocol::batch::decode_batch;
use petrel_protocol::message::{MessageExt, sys_flag};
use petrel_protocol::model::perm;
use petrel_protocol::msgid::{UniqKeyGenerator, create_offset_msg_id};
use petrel_protocol::properties::{Properties, decode_properties, keys};
use petrel_replication::{AckGate, AckMode, Refusal, ReplicaWait};
use petrel_store::{AppendResult, FlushMode, MessageStore, StoreError, Target, WaitError};

use super::BrokerError;
use super::schedule::{SCHEDULE_TOPIC, ScheduleService};
use super::timer::{ARRIVALS_QUEUE, TIMER_TOPIC, TimerRoute, TimerService};
use super::topics::{NOT_ALLOWED_SEND_TOPICS, RETRY_GROUP_TOPIC_PREFIX, TopicService, validate_topic_name};
use super::transactions::{HALF_TOPIC, TransactionService};
use crate::stats::BrokerStats;
use crate::store_pool::StorePool;
use crate::traffic::MessageKind;

/// Retries before a message goes to the DLQ when the request does not say (`retryMaxTimes`).
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;

/// A send, as any front end hands it over.
#[derive(Debug, Clone, Default)]
pub struct SendRequest {
    /// The sending producer's group.
    pub producer_group: String,
    /// The topic to store in; `%RETRY%<group>` for a consumer's retry.
    pub topic: String,
    /// The template topic for auto-creation (`TBW102` when empty).
    pub default_topic: String,
    /// Queues an auto-created topic gets (capped by the template topic's).
    pub default_topic_queue_nums: i32,
    /// Negative: the broker picks a queue.
    pub queue_id: i32,
    /// RocketMQ's message system flags (compression, transaction phase, ...), stored as sent.
    pub sys_flag: i32,
    /// When the producer created the message, in milliseconds since the Unix epoch.
    pub born_timestamp: i64,
    /// The application's flag, stored as sent.
    pub flag: i32,
    /// Encoded properties (`k\u{1}v\u{2}`).
    pub properties: Option<String>,
    /// Times the message was consumed before (a retry's count).
    pub reconsume_times: i32,
    /// Retries before a retry-topic send goes to the DLQ; `None`: [`DEFAULT_MAX_RECONSUME_TIMES`].
    pub max_reconsume_times: Option<i32>,
    /// `body` is a batch of messages, not one body.
    pub batch: bool,
    /// The message body, or the encoded batch.
    pub body: Bytes,
    /// The producer's address; `None`: this broker's own (`store_host`).
    pub born_host: Option<SocketAddr>,
}

/// How durable the stored record is when the send is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// As the flush mode promises: on disk under SYNC_FLUSH, in the page cache under ASYNC_FLUSH.
    Stored,
    /// Stored, but the disk did not confirm within `syncFlushTimeout`; it will later.
    FlushTimedOut,
    /// Stored (and durable as the flush mode promises), but the replicas the policy needs did
    /// not confirm within `slaveTimeout`.
    SlaveTimedOut,
    /// Stored on the master, but too few slaves were in sync to wait for.
    SlaveNotAvailable,
}

/// A stored send: where it went and how durable it is.
#[derive(Debug, Clone)]
pub struct SendOutcome {
    /// How durable the record was when the send was answered.
    pub durability: Durability,
    /// Offset message ids, comma-separated for a batch.
    pub msg_id: String,
    /// The queue the answer names: the requested one, also for a delayed message.
    pub queue_id: i32,
    /// Queue offset of the (first) stored record.
    pub queue_offset: i64,
    /// The client's unique key (`UNIQ_KEY`), echoed as RocketMQ does.
    pub transaction_id: Option<String>,
}

/// A send's encoded records, and where they go.
struct Encoded {
    records: BytesMut,
    count: usize,
    uniq_key: Option<String>,
    /// The topic and queue stored in: the schedule topic's for a delayed message.
    stored_at: (String, i32),
    /// Where the message waits, if it does.
    route: Route,
    /// The light message queues the record is filed in too (see [`ProduceSettings::lmq`]).
    lmq: Vec<String>,
}

/// One message encoded where it waits or belongs (see [`ProduceService::encode_routed`]).
struct Routed {
    records: BytesMut,
    /// The topic and queue it is stored in.
    stored_at: (String, i32),
    route: Route,
    /// The light message queues it is filed in too.
    lmq: Vec<String>,
}

/// Where an encoded message waits before its real topic, as the metrics count it.
#[derive(Debug, Default)]
enum Route {
    /// In its topic (or a retry or dead-letter topic).
    #[default]
    Plain,
    /// In the half-message topic, for `real_topic`.
    Half { real_topic: String },
    /// In the timer topic, for `real_topic`, `delay_s` after its birth.
    Timer { real_topic: String, delay_s: u64 },
}

/// What RocketMQ's metrics count of a send once it is stored.
#[derive(Debug, Default)]
struct Counted {
    /// A client's send, of this kind; `None` for the broker's own writes.
    kind: Option<MessageKind>,
    route: Route,
    /// Moved to a dead-letter queue: (group, the retry topic it was sent to).
    dead_letter: Option<(String, String)>,
}

/// What a checked send will append.
struct Prepared {
    topic: String,
    queue_id: i32,
    /// The queue the answer names: the requested one, also for a delayed message stored in the
    /// schedule topic.
    answer_queue_id: i32,
    records: BytesMut,
    count: usize,
    uniq_key: Option<String>,
    topic_created: bool,
    counted: Counted,
    /// Light message queues the one record is filed in too.
    lmq: Vec<String>,
}

/// What the service needs to know of the broker it runs in.
pub struct ProduceSettings {
    /// This broker's address, stored in each record and in its offset message id.
    pub store_host: SocketAddr,
    /// `brokerClusterName`, stored in the `CLUSTER` property of each message not sent in a batch.
    pub cluster: String,
    /// `brokerName`, named in refusals.
    pub broker_name: String,
    /// `regionId`, stored in the `MSG_REGION` property of each message not sent in a batch.
    pub region_id: String,
    /// `traceOn`, stored in the `TRACE_ON` property of each message not sent in a batch.
    pub trace_on: bool,
    /// `maxMessageSize`: the largest body a message may have.
    pub max_message_size_bytes: usize,
    /// `syncFlushTimeout`: how long a send waits for its record to be written (durable under
    /// SYNC_FLUSH).
    pub sync_flush_timeout: Duration,
    /// Whether this broker takes writes now (a slave refuses them).
    pub role: Arc<crate::role::Role>,
    /// A SYNC_MASTER's gate: which replicas a send waits for.
    pub replicas: Option<Arc<AckGate>>,
    /// `slaveTimeout`: how long a send waits for the replicas it needs.
    pub slave_timeout: Duration,
    /// `rejectTransactionMessage`: refuse half messages.
    pub reject_transaction_message: bool,
    /// `enableLmq` and `enableMultiDispatch`: a message whose `INNER_MULTI_DISPATCH` names
    /// light message queues is filed in each when it reaches its topic.
    pub lmq: bool,
}

/// The services that decide where a message waits before its queue.
pub struct Routing {
    /// Holds messages with a delay level in the schedule topic.
    pub schedule: Arc<ScheduleService>,
    /// Holds messages with a delivery time in the timer topic.
    pub timer: Arc<TimerService>,
    /// Holds half messages until their transaction ends.
    pub transactions: Arc<TransactionService>,
}

/// Turns sends into commit-log records and answers them once stored as durably as configured.
pub struct ProduceService {
    store: Arc<MessageStore>,
    topics: Arc<TopicService>,
    schedule: Arc<ScheduleService>,
    timer: Arc<TimerService>,
    transactions: Arc<TransactionService>,
    pool: Arc<StorePool>,
    stats: Arc<BrokerStats>,
    settings: ProduceSettings,
    queue_picker: AtomicI32,
    uniq_keys: UniqKeyGenerator,
}

impl ProduceService {
    /// A service over the broker's shared parts; message ids are seeded from this broker's
    /// address, the process id and the clock.
    #[must_use]
    pub fn new(
        store: Arc<MessageStore>,
        topics: Arc<TopicService>,
        routing: Routing,
        pool: Arc<StorePool>,
        stats: Arc<BrokerStats>,
        settings: ProduceSettings,
    ) -> ProduceService {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as i32);
        let Routing {
            schedule,
            timer,
            transactions,
        } = routing;
        ProduceService {
            uniq_keys: UniqKeyGenerator::new(settings.store_host.ip(), std::process::id(), seed),
            store,
            topics,
            schedule,
            timer,
            transactions,
            pool,
            stats,
            settings,
            queue_picker: AtomicI32::new(0),
        }
    }

    fn sync_flush(&self) -> bool {
        self.store.commit_log().config().flush_mode == FlushMode::Sync
    }

    /// Stores the message(s) of `req` and answers when the flush mode is satisfied.
    ///
    /// # Errors
    /// Every refusal, before anything is written; a store failure.
    pub async fn send(&self, req: SendRequest) -> Result<SendOutcome, BrokerError> {
        let started = Instant::now();
        let result = self.send_inner(req).await;
        match &result {
            Ok(_) => self.stats.send_ns.record(elapsed_ns(started)),
            Err(e) => {
                self.stats.put_failures.fetch_add(1, Ordering::Relaxed);
                if matches!(e, BrokerError::Busy(_)) {
                    self.stats.busy_refusals.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        result
    }

    async fn send_inner(&self, req: SendRequest) -> Result<SendOutcome, BrokerError> {
        self.check_writable()?;
        let p = self.prepare(&req)?;
        self.commit(p).await
    }

    /// Refuses a write while the page cache is over budget or this broker is not the master.
    fn check_writable(&self) -> Result<(), BrokerError> {
        if self.store.page_cache_busy() {
            self.store.page_cache_stats().busy_refusals.fetch_add(1, Ordering::Relaxed);
            return Err(BrokerError::Busy(
                "[PC_SYNCHRONIZED]broker busy, start flow control for a while (unflushed data keeps the page cache over pageCacheBudgetBytes)".into(),
            ));
        }
        if !self.settings.role.is_master() {
            return Err(BrokerError::Unavailable(
                "service not available now: this broker is a slave (brokerRole=SLAVE); messages are put to the master".into(),
            ));
        }
        Ok(())
    }

    /// Appends checked records and answers when the flush mode and the replicas are satisfied.
    async fn commit(&self, mut p: Prepared) -> Result<SendOutcome, BrokerError> {
        let replicas = self.replica_wait()?;
        // Reserved before the append: a full waiter table refuses the send with nothing written.
        let log = self.store.commit_log();
        let mark = if self.sync_flush() {
            log.flushed_watermark()
        } else {
            log.written_watermark()
        };
        let slot = mark.reserve().map_err(|e| match e {
            WaitError::Busy { .. } => BrokerError::Busy(format!("[DURABILITY_WAITERS_FULL] {e}")),
            other => BrokerError::Unavailable(other.to_string()),
        })?;
        let (topic, queue_id, count, uniq_key, topic_created) =
            (p.topic.clone(), p.answer_queue_id, p.count, p.uniq_key.clone(), p.topic_created);
        let counted = std::mem::take(&mut p.counted);
        let results = self.append(p).await?;
        let end = results.last().map_or(0, AppendResult::end_offset);
        let bytes: u64 = results.iter().map(|r| u64::from(r.size_bytes)).sum();
        assert_eq!(results.len(), count, "one result per record");
        let (durability, replicated) = tokio::join!(self.wait_durable(slot, end), self.wait_replicated(replicas, end));
        let durability = match (durability?, replicated) {
            (Durability::Stored, Some(replicated)) => replicated,
            (durability, _) => durability,
        };
        self.stats.put_messages.fetch_add(results.len() as u64, Ordering::Relaxed);
        self.stats.put_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.count_stored(counted, &topic, results.len() as u64, bytes);
        if topic_created {
            // Clients look the new topic's route up next: answer after the name server knows it.
            self.topics.settle().await?;
        }
        let msg_id = results
            .iter()
            .map(|r| create_offset_msg_id(self.settings.store_host, r.physical_offset as i64))
            .collect::<Vec<_>>()
            .join(",");
        tracing::trace!(%topic, queue_id, end, "stored");
        Ok(SendOutcome {
            durability,
            msg_id,
            queue_id,
            queue_offset: results[0].queue_offset,
            transaction_id: uniq_key,
        })
    }

    /// Counts a stored send under RocketMQ's metrics' labels.
    fn count_stored(&self, counted: Counted, topic: &str, count: u64, bytes: u64) {
        let traffic = &self.stats.traffic;
        if let Some(kind) = counted.kind {
            traffic.stored(topic, kind, count, bytes);
        }
        match counted.route {
            Route::Plain => {}
            Route::Half { real_topic } => traffic.half_stored(&real_topic),
            Route::Timer { real_topic, delay_s } => traffic.timer_enqueued(&real_topic, delay_s),
        }
        if let Some((group, topic)) = counted.dead_letter {
            traffic.dead_lettered(&group, &topic);
        }
    }

    /// Waits until the record is written (ASYNC_FLUSH) or durable (SYNC_FLUSH).
    async fn wait_durable(&self, slot: petrel_store::Slot, end: u64) -> Result<Durability, BrokerError> {
        let started = Instant::now();
        let waited = tokio::time::timeout(self.settings.sync_flush_timeout, slot.wait(end)).await;
        if self.sync_flush() {
            self.stats.flush_wait_ns.record(elapsed_ns(started));
        }
        match waited {
            Ok(Ok(())) => Ok(Durability::Stored),
            Ok(Err(e)) => Err(BrokerError::Unavailable(e.to_string())),
            Err(_) if self.sync_flush() => {
                self.stats.flush_timeouts.fetch_add(1, Ordering::Relaxed);
                Ok(Durability::FlushTimedOut)
            }
            Err(_) => Err(BrokerError::Unavailable(format!(
                "the record was not written within {} ms",
                self.settings.sync_flush_timeout.as_millis()
            ))),
        }
    }

    /// Whether this send waits for replicas, decided before anything is written.
    fn replica_wait(&self) -> Result<ReplicaWait, BrokerError> {
        let Some(gate) = &self.settings.replicas else {
            return Ok(ReplicaWait::None);
        };
        gate.before_append().map_err(|e| match e {
            Refusal::InSyncReplicasNotEnough { .. } => BrokerError::InSyncReplicasNotEnough(e.to_string()),
            Refusal::Busy(why) => BrokerError::Busy(why),
            Refusal::Failed(why) => BrokerError::Unavailable(why),
        })
    }

    /// Waits until the replicas the policy needs hold everything below `end`; `None` when the
    /// send waits for none.
    async fn wait_replicated(&self, wait: ReplicaWait, end: u64) -> Option<Durability> {
        let slot = match wait {
            ReplicaWait::None => {
                if let Some(gate) = self
                    .settings
                    .replicas
                    .as_ref()
                    .filter(|g| g.policy().mode == AckMode::AllInSync || g.is_controlled())
                {
                    // No slave to wait for: what consumers may read (gated on the watermark in
                    // all-ack mode) moves on now, not at the next housekeeping tick.
                    gate.recompute();
                }
                return None;
            }
            ReplicaWait::NotEnough { in_sync, needed } => {
                self.stats.slave_not_available.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(in_sync, needed, "too few replicas in sync to wait for");
                return Some(Durability::SlaveNotAvailable);
            }
            ReplicaWait::Wait(slot) => slot,
        };
        let started = Instant::now();
        let waited = tokio::time::timeout(self.settings.slave_timeout, slot.wait(end)).await;
        self.stats.replica_wait_ns.record(elapsed_ns(started));
        match waited {
            Ok(Ok(())) => Some(Durability::Stored),
            Ok(Err(_)) | Err(_) => {
                self.stats.slave_timeouts.fetch_add(1, Ordering::Relaxed);
                Some(Durability::SlaveTimedOut)
            }
        }
    }

    /// Appends inline when the store can without blocking, else on the store pool.
    async fn append(&self, p: Prepared) -> Result<Vec<AppendResult>, BrokerError> {
        let Prepared {
            mut records,
            topic,
            queue_id,
            lmq,
            ..
        } = p;
        match self.store.try_append_to(&mut records, Target::with_lmq(&topic, queue_id, &lmq)) {
            Err(StoreError::WouldBlock(_)) => {}
            other => return other.map_err(BrokerError::from),
        }
        self.stats.appends_offloaded.fetch_add(1, Ordering::Relaxed);
        let store = self.store.clone();
        let appended = self
            .pool
            .run(move || store.append_to(&mut records, Target::with_lmq(&topic, queue_id, &lmq)))?;
        appended.await?.map_err(BrokerError::from)
    }

    /// A queue for a send that did not name one (`queueId < 0`).
    fn pick_queue(&self, write_queue_nums: i32) -> i32 {
        self.queue_picker
            .fetch_add(1, Ordering::Relaxed)
            .rem_euclid(write_queue_nums.max(1))
    }

    /// Checks the request and encodes its records.
    fn prepare(&self, req: &SendRequest) -> Result<Prepared, BrokerError> {
        validate_topic_name(&req.topic)?;
        if self.settings.lmq && petrel_protocol::lmq::is_lmq(&req.topic) {
            return Err(BrokerError::NoPermission(format!(
                "Sending message to topic[{}] is forbidden: a light message queue takes messages sent to a topic that name it in INNER_MULTI_DISPATCH",
                req.topic
            )));
        }
        if NOT_ALLOWED_SEND_TOPICS.contains(&req.topic.as_str()) {
            return Err(BrokerError::NoPermission(format!(
                "Sending message to topic[{}] is forbidden.",
                req.topic
            )));
        }
        let (topic_config, topic_created) = self.topics.for_send(&req.topic, &req.default_topic, req.default_topic_queue_nums)?;
        if topic_config.perm & perm::WRITE == 0 {
            return Err(BrokerError::NoPermission(format!(
                "the topic[{}] sending message is forbidden",
                req.topic
            )));
        }
        let queue_nums = topic_config.write_queue_nums.max(topic_config.read_queue_nums);
        if req.queue_id >= queue_nums {
            let peer = req.born_host.map(|h| h.to_string()).unwrap_or_default();
            return Err(BrokerError::InvalidParameter(format!(
                "request queueId[{}] is illegal, {} producer: {peer}",
                req.queue_id, req.topic
            )));
        }
        let queue_id = if req.queue_id < 0 {
            self.pick_queue(topic_config.write_queue_nums)
        } else {
            req.queue_id
        };
        if req.batch && req.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(BrokerError::MessageIllegal("batch request does not support retry group".into()));
        }
        let (topic, queue_id, reconsume_times, dlq_created) = self.route_retry(req, queue_id)?;
        let base = MessageExt {
            topic: topic.clone(),
            queue_id,
            sys_flag: req.sys_flag,
            born_timestamp: req.born_timestamp,
            born_host: req.born_host.unwrap_or(self.settings.store_host),
            store_host: self.settings.store_host,
            reconsume_times,
            ..MessageExt::default()
        };
        let Encoded {
            records,
            count,
            uniq_key,
            stored_at,
            route,
            lmq,
        } = if req.batch {
            self.encode_batch(req, &base)?
        } else {
            self.encode_single(req, base)?
        };
        Ok(Prepared {
            topic: stored_at.0,
            queue_id: stored_at.1,
            answer_queue_id: queue_id,
            records,
            count,
            uniq_key,
            // A dead-letter topic made now must reach the name servers before the answer too.
            topic_created: topic_created || dlq_created,
            lmq,
            counted: Counted {
                // Read only while metrics are exported: a scan of the properties per send.
                kind: self
                    .stats
                    .traffic
                    .enabled()
                    .then(|| MessageKind::of(req.properties.as_deref().unwrap_or(""))),
                route,
                dead_letter: (topic != req.topic).then(|| (req.producer_group.clone(), req.topic.clone())),
            },
        })
    }

    /// Retry topics: past the retry limit the message goes to the group's DLQ.
    /// Returns the topic, queue and reconsume count to store with, and whether the group's
    /// dead-letter topic was created for it.
    fn route_retry(&self, req: &SendRequest, queue_id: i32) -> Result<(String, i32, i32, bool), BrokerError> {
        let reconsume_times = req.reconsume_times;
        if let Some(group) = req.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
            let max = req.max_reconsume_times.unwrap_or(DEFAULT_MAX_RECONSUME_TIMES);
            if reconsume_times > max {
                let (dlq, created) = self.topics.ensure_dlq(group)?;
                return Ok((dlq.topic_name, 0, reconsume_times.max(0), created));
            }
        }
        Ok((req.topic.clone(), queue_id, reconsume_times, false))
    }

    fn encode(&self, m: &MessageExt, out: &mut BytesMut) -> Result<(), BrokerError> {
        if m.body.len() > self.settings.max_message_size_bytes {
            return Err(BrokerError::MessageIllegal(format!(
                "the message body size {} is over the limit {}",
                m.body.len(),
                self.settings.max_message_size_bytes
            )));
        }
        // `encode` refuses properties over 32767 bytes.
        m.encode(out).map_err(|e| BrokerError::MessageIllegal(e.to_string()))
    }

    /// A batch's records, all in `base`'s topic and queue (a batch is never delayed).
    fn encode_batch(&self, req: &SendRequest, base: &MessageExt) -> Result<Encoded, BrokerError> {
        let items = decode_batch(&req.body).map_err(|e| BrokerError::MessageIllegal(format!("bad batch body: {e}")))?;
        if items.is_empty() {
            return Err(BrokerError::MessageIllegal("empty batch".into()));
        }
        let mut records = BytesMut::new();
        let count = items.len();
        for item in items {
            let m = MessageExt {
                flag: item.flag,
                body: item.body,
                properties: item.properties,
                ..base.clone()
            };
            self.encode(&m, &mut records)?;
        }
        let uniq_key = req
            .properties
            .as_deref()
            .map(decode_properties)
            .and_then(|p| p.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).cloned());
        Ok(Encoded {
            records,
            count,
            uniq_key,
            stored_at: (base.topic.clone(), base.queue_id),
            route: Route::Plain,
            // As RocketMQ: a batch's messages are not filed in light message queues.
            lmq: Vec::new(),
        })
    }

    /// One message's record, and the topic and queue it is stored in.
    fn encode_single(&self, req: &SendRequest, base: MessageExt) -> Result<Encoded, BrokerError> {
        let mut properties: Properties = req.properties.as_deref().map(decode_properties).unwrap_or_default();
        // Only the broker writes a message's light-queue offsets.
        properties.shift_remove(keys::INNER_MULTI_QUEUE_OFFSET);
        if self.settings.reject_transaction_message && TransactionService::is_half(&properties) {
            return Err(BrokerError::NoPermission(format!(
                "the broker[{}] sending transaction message is forbidden",
                self.settings.broker_name
            )));
        }
        if !properties.contains_key(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX) {
            properties.insert(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX.to_owned(), self.uniq_keys.next());
        }
        properties.insert(keys::MSG_REGION.to_owned(), self.settings.region_id.clone());
        properties.insert(keys::CLUSTER.to_owned(), self.settings.cluster.clone());
        properties.insert(keys::TRACE_SWITCH.to_owned(), self.settings.trace_on.to_string());
        let uniq_key = properties.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).cloned();
        let m = MessageExt {
            flag: req.flag,
            body: req.body.clone(),
            properties,
            ..base
        };
        let Routed {
            records,
            stored_at,
            route,
            lmq,
        } = self.encode_routed(m)?;
        Ok(Encoded {
            records,
            count: 1,
            uniq_key,
            stored_at,
            route,
            lmq,
        })
    }

    /// Encodes one message, moved to the half-message topic when it is the first phase of a
    /// transaction, to the schedule topic when its `DELAY` level asks for it, or to the timer
    /// topic when its timer properties name a time to come; returns the record and the topic and
    /// queue it goes to, and the light message queues it is filed in too.
    fn encode_routed(&self, mut m: MessageExt) -> Result<Routed, BrokerError> {
        // A message past its retries goes to the dead-letter queue at once, whatever its level.
        let dead_letter = m.topic.starts_with(super::topics::DLQ_GROUP_TOPIC_PREFIX);
        let mut route = Route::Plain;
        if TransactionService::is_half(&m.properties) && m.topic != HALF_TOPIC {
            // Stored as a plain message so that the half queue is indexed like any other.
            m.sys_flag &= !sys_flag::TRANSACTION_TYPE_MASK;
            route = Route::Half {
                real_topic: m.topic.clone(),
            };
            wait_in(&mut m, HALF_TOPIC, 0);
        } else if !dead_letter {
            let level = self.schedule.level_of(&m.properties);
            let pending = || self.timer.pending(|q| self.store.queue_offsets(TIMER_TOPIC, q).1);
            let timer = self.timer.route(&mut m.properties, level.is_some(), crate::now_ms(), pending)?;
            if let Some(level) = level {
                m.properties.insert(keys::DELAY_TIME_LEVEL.to_owned(), level.to_string());
                wait_in(&mut m, SCHEDULE_TOPIC, level - 1);
            } else if let TimerRoute::At { due_ms } = timer {
                m.properties.insert(keys::TIMER_OUT_MS.to_owned(), due_ms.to_string());
                route = Route::Timer {
                    real_topic: m.topic.clone(),
                    delay_s: u64::try_from(due_ms.saturating_sub(m.born_timestamp) / 1000).unwrap_or(0),
                };
                wait_in(&mut m, TIMER_TOPIC, ARRIVALS_QUEUE);
            }
        }
        let lmq = self.light_queues(&m)?;
        let mut records = BytesMut::with_capacity(m.body.len() + 256);
        self.encode(&m, &mut records)?;
        Ok(Routed {
            records,
            stored_at: (m.topic, m.queue_id),
            route,
            lmq,
        })
    }

    /// The light message queues a message stored in `m.topic` is filed in too: those its
    /// `INNER_MULTI_DISPATCH` names, when LMQs are on and the topic is not a retry or system
    /// topic (a delayed or half message is filed when it reaches its real topic).
    ///
    /// # Errors
    /// `MESSAGE_ILLEGAL` for a name that is not a valid `%LMQ%` topic name or is repeated, or
    /// properties without room for the offsets.
    fn light_queues(&self, m: &MessageExt) -> Result<Vec<String>, BrokerError> {
        use petrel_protocol::lmq;
        if !self.settings.lmq || !lmq::topic_allows_lmq(&m.topic) {
            return Ok(Vec::new());
        }
        let Some(list) = m.properties.get(keys::INNER_MULTI_DISPATCH).filter(|v| !v.trim().is_empty()) else {
            return Ok(Vec::new());
        };
        let names: Vec<String> = list.split(lmq::LMQ_DISPATCH_SEPARATOR).map(str::to_owned).collect();
        for (i, name) in names.iter().enumerate() {
            let illegal = |why: String| BrokerError::MessageIllegal(format!("INNER_MULTI_DISPATCH names {name:?}: {why}"));
            if !lmq::is_lmq(name) {
                return Err(illegal(format!("not a light message queue (they begin with {})", lmq::LMQ_PREFIX)));
            }
            validate_topic_name(name).map_err(|e| illegal(e.to_string()))?;
            if names[..i].contains(name) {
                return Err(illegal("named twice".into()));
            }
        }
        let properties_bytes: usize = m.properties.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        if properties_bytes + lmq::offsets_property_max_bytes(names.len()) > petrel_protocol::properties::MAX_PROPERTIES_BYTES {
            return Err(BrokerError::MessageIllegal(format!(
                "the properties ({properties_bytes} bytes) leave no room for the offsets of {} light message queues",
                names.len()
            )));
        }
        Ok(names)
    }
}

/// Moves `m` to `topic` / `queue_id` to wait there, its real topic and queue kept in properties.
fn wait_in(m: &mut MessageExt, topic: &str, queue_id: i32) {
    m.properties.insert(keys::REAL_TOPIC.to_owned(), std::mem::take(&mut m.topic));
    m.properties.insert(keys::REAL_QUEUE_ID.to_owned(), m.queue_id.to_string());
    topic.clone_into(&mut m.topic);
    m.queue_id = queue_id;
}

/// Nanoseconds since `started`, for the latency histograms; saturates rather than wraps (u64
/// nanoseconds last 584 years).
fn elapsed_ns(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

mod later;
#[cfg(test)]
mod tests;
mod transaction;

pub use later::{Delivered, RetryPolicy, SendBackRequest};
pub use transaction::{EndTransaction, Ended};
