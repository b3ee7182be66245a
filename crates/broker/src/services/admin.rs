//! `AdminService`: what `mqadmin` and dashboards read — topic and consume statistics, the
//! runtime information table, a stored message by offset.
//!
//! Owns: those answers. Must never: read the commit log on the runtime (every answer that reads
//! stored records — store times, a message — is computed on the store pool).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use indexmap::IndexMap;
use petrel_store::{Boundary, MessageStore};

use super::BrokerError;
use super::groups::GroupService;
use super::offsets::OffsetService;
use super::topics::TopicService;
use crate::config::BrokerConfig;
use crate::stats::BrokerStats;
use crate::store_pool::StorePool;

/// The version string mqadmin shows; Petrel speaks the 5.5.0 protocol.
pub const BROKER_VERSION_DESC: &str = "V5_5_0";

/// One queue's offsets and last store time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue's id within the topic.
    pub queue_id: i32,
    /// Offset of the oldest message still stored in the queue.
    pub min_offset: i64,
    /// Offset the next message written to the queue will get.
    pub max_offset: i64,
    /// Store time of the newest message, 0 if none.
    pub last_update_ms: i64,
}

/// One queue's progress for a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupQueueProgress {
    /// Topic the queue belongs to.
    pub topic: String,
    /// The queue's id within the topic.
    pub queue_id: i32,
    /// The queue's max offset: where the next message written to it will go.
    pub broker_offset: i64,
    /// The offset the group has committed, 0 if none.
    pub consumer_offset: i64,
    /// The furthest offset the group has pulled to, never below the committed offset.
    pub pull_offset: i64,
    /// Store time of the last consumed message, 0 if none.
    pub last_timestamp_ms: i64,
}

/// Answers the admin and monitoring requests: statistics, runtime information, stored messages,
/// server-side offset resets.
pub struct AdminService {
    config: Arc<BrokerConfig>,
    store: Arc<MessageStore>,
    topics: Arc<TopicService>,
    groups: Arc<GroupService>,
    offsets: Arc<OffsetService>,
    pool: Arc<StorePool>,
    stats: Arc<BrokerStats>,
    boot: Instant,
    boot_timestamp_ms: i64,
}

impl AdminService {
    /// A service over the broker's shared parts; the uptime counts from this call.
    #[must_use]
    pub fn new(
        config: Arc<BrokerConfig>,
        store: Arc<MessageStore>,
        topics: Arc<TopicService>,
        groups: Arc<GroupService>,
        offsets: Arc<OffsetService>,
        pool: Arc<StorePool>,
        stats: Arc<BrokerStats>,
    ) -> AdminService {
        AdminService {
            config,
            store,
            topics,
            groups,
            offsets,
            pool,
            stats,
            boot: Instant::now(),
            boot_timestamp_ms: crate::now_ms(),
        }
    }

    /// Seconds since the broker started.
    #[must_use]
    pub fn uptime(&self) -> std::time::Duration {
        self.boot.elapsed()
    }

    /// Every queue of `topic` with its offsets and last store time.
    ///
    /// # Errors
    /// The topic does not exist; the store pool is full.
    pub async fn topic_stats(&self, topic: &str) -> Result<Vec<QueueStats>, BrokerError> {
        let config = self
            .topics
            .get(topic)
            .ok_or_else(|| BrokerError::TopicNotExist(format!("topic[{topic}] not exist")))?;
        let queues = config.write_queue_nums.max(config.read_queue_nums);
        let (store, topic) = (self.store.clone(), topic.to_owned());
        self.pool
            .run(move || {
                (0..queues)
                    .map(|q| {
                        let (min_offset, max_offset) = store.queue_offsets(&topic, q);
                        QueueStats {
                            queue_id: q,
                            min_offset,
                            max_offset,
                            last_update_ms: store.latest_store_time(&topic, q),
                        }
                    })
                    .collect()
            })?
            .await
    }

    /// A group's progress on the topics asked for: `topics`, else every topic it committed
    /// offsets for (those it still subscribes to, if it is online).
    ///
    /// # Errors
    /// The store pool is full.
    pub async fn consume_stats(&self, group: &str, topics: Vec<String>) -> Result<Vec<GroupQueueProgress>, BrokerError> {
        let topics = if topics.is_empty() {
            let mut t = self.offsets.topics_of_group(group);
            if self.groups.has_subscriptions(group) {
                t.retain(|topic| self.groups.subscription(group, topic).is_some());
            }
            t
        } else {
            topics
        };
        let mut rows = Vec::new();
        for topic in topics {
            let Some(config) = self.topics.get(&topic) else { continue };
            for q in 0..config.read_queue_nums {
                let consumer_offset = self.offsets.query(group, &topic, q).unwrap_or(0);
                rows.push(GroupQueueProgress {
                    broker_offset: self.store.queue_offsets(&topic, q).1,
                    pull_offset: self.offsets.pulled(group, &topic, q).unwrap_or(0).max(consumer_offset),
                    consumer_offset,
                    last_timestamp_ms: 0,
                    topic: topic.clone(),
                    queue_id: q,
                });
            }
        }
        let store = self.store.clone();
        self.pool
            .run(move || {
                for r in &mut rows {
                    r.last_timestamp_ms = store.store_time_at(&r.topic, r.queue_id, r.consumer_offset - 1).unwrap_or(0);
                }
                rows
            })?
            .await
    }

    /// QUERY_MESSAGE: up to `max` messages of `topic` stored in `[begin_ms, end_ms]` with
    /// `key` (a `UNIQ_KEY` when `unique`, else one of the `KEYS`), newest first.
    ///
    /// # Errors
    /// The store pool is full, or the cold tier cannot answer now and nothing was found.
    pub async fn query_message(
        &self,
        topic: String,
        key: String,
        unique: bool,
        max: usize,
        (begin_ms, end_ms): (i64, i64),
    ) -> Result<petrel_store::QueryResult, BrokerError> {
        let store = self.store.clone();
        self.pool
            .run(move || store.query_by_key(&topic, &key, unique, max, begin_ms, end_ms))?
            .await?
            .map_err(BrokerError::from)
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET, RocketMQ's server-side reset: moves `group`'s offsets of
    /// `topic` — one queue, or every read queue — to the first message stored at or after
    /// `timestamp_ms` (the end of the queue for a negative time), or to `target` for one queue;
    /// the group's next pull of each queue is told. Returns (queue, offset) pairs.
    ///
    /// # Errors
    /// An unknown topic or group, a target outside the queue, or the store pool is full.
    pub async fn reset_offset(
        &self,
        topic: &str,
        group: &str,
        queue_id: Option<i32>,
        target: Option<i64>,
        timestamp_ms: i64,
    ) -> Result<Vec<(i32, i64)>, BrokerError> {
        let config = self
            .topics
            .get(topic)
            .ok_or_else(|| BrokerError::TopicNotExist(format!("Topic {topic} does not exist")))?;
        if !self.groups.is_known(group) {
            return Err(BrokerError::GroupNotExist(format!("Group {group} does not exist")));
        }
        let one = queue_id.filter(|q| *q >= 0);
        let queues: Vec<i32> = one.map_or_else(|| (0..config.read_queue_nums).collect(), |q| vec![q]);
        let mut out = Vec::with_capacity(queues.len());
        for q in queues {
            let (min, max) = self.store.queue_offsets(topic, q);
            let offset = match target.filter(|o| *o != -1 && one.is_some()) {
                Some(o) if o < min || o > max + 1 => {
                    return Err(BrokerError::Internal(format!(
                        "Target offset {o} not in consume queue range [{min}-{max}]"
                    )));
                }
                Some(o) => o,
                None if timestamp_ms < 0 => max,
                None => self.offsets.search_by_time(topic, q, timestamp_ms, Boundary::Lower).await?,
            };
            out.push((q, offset.max(0)));
        }
        for &(q, offset) in &out {
            self.offsets.reset(group, topic, q, offset)?;
        }
        Ok(out)
    }

    /// Removes a deleted topic's consume queues and their files.
    ///
    /// # Errors
    /// The store pool is full, or the files cannot be removed.
    pub async fn delete_topic_files(&self, topic: String) -> Result<usize, BrokerError> {
        let store = self.store.clone();
        Ok(self.pool.run(move || store.delete_topic(&topic))?.await??)
    }

    /// The stored record at `offset`, if the caller may read its topic.
    ///
    /// # Errors
    /// No record starts there, the store pool is full, the cold tier cannot answer now, or
    /// `may_read` refuses its topic.
    pub async fn view_message(&self, offset: i64, may_read: super::TopicCheck) -> Result<Vec<u8>, BrokerError> {
        let found = super::record_at(&self.store, &self.pool, offset).await?;
        let record = found.ok_or_else(|| BrokerError::Internal(format!("can not find message by the offset, {offset}")))?;
        let (message, _) = petrel_protocol::message::MessageExt::decode(&record).map_err(|source| BrokerError::Record {
            what: format!("the record at {offset}"),
            source,
        })?;
        may_read(&message.topic)?;
        Ok(record)
    }

    /// The runtime information table (`GET_BROKER_RUNTIME_INFO`): the keys mqadmin reads, and
    /// the put-message lock's statistics.
    ///
    /// # Errors
    /// The store pool is full.
    pub async fn runtime_info(self: &Arc<Self>) -> Result<IndexMap<String, String>, BrokerError> {
        let me = self.clone();
        self.pool.run(move || me.runtime_table())?.await
    }

    #[expect(clippy::too_many_lines, reason = "RocketMQ's runtime-info keys, one line each")]
    fn runtime_table(&self) -> IndexMap<String, String> {
        let mut t: IndexMap<String, String> = IndexMap::new();
        let mut put = |k: &str, v: String| {
            t.insert(k.to_owned(), v);
        };
        let log = self.store.commit_log();
        let disk_ratio = log.disk_used_ratio().unwrap_or(0.0);
        let puts = self.stats.put_messages.load(Ordering::Relaxed);
        let gets = self.stats.got_messages.load(Ordering::Relaxed);
        let put_bytes = self.stats.put_bytes.load(Ordering::Relaxed);
        let uptime = self.boot.elapsed().as_secs();
        let (consumers, producers) = self.groups.connection_count();
        put("brokerVersionDesc", BROKER_VERSION_DESC.to_owned());
        put("brokerVersion", "505".to_owned());
        put("brokerActive", "true".to_owned());
        put("bootTimestamp", self.boot_timestamp_ms.to_string());
        put("startAcceptSendRequestTimeStamp", "0".to_owned());
        let pc = self.store.page_cache_stats();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed).to_string();
        put("pageCacheBudgetBytes", load(&pc.budget_bytes));
        put("pageCacheResidentBytes", load(&pc.resident_bytes));
        put("pageCacheTierCacheBytes", load(&pc.tier_cache_bytes));
        put("pageCacheReleases", load(&pc.releases));
        put("pageCacheReleasedBytes", load(&pc.released_bytes));
        put("pageCacheBusyRefusals", load(&pc.busy_refusals));
        put(
            "runtime",
            format!(
                "[ {} days, {} hours, {} minutes, {} seconds ]",
                uptime / 86400,
                uptime / 3600 % 24,
                uptime / 60 % 60,
                uptime % 60
            ),
        );
        for k in ["putTps", "getTransferredTps", "getFoundTps", "getMissTps"] {
            put(k, format!("{:.1}  ", 0.0));
        }
        put("getTotalTps", "0.0 0.0 0.0".to_owned());
        for k in ["send", "pull", "litePull", "ack", "query"] {
            put(&format!("{k}ThreadPoolQueueSize"), "0".to_owned());
            put(&format!("{k}ThreadPoolQueueCapacity"), "0".to_owned());
            put(&format!("{k}ThreadPoolQueueHeadWaitTimeMills"), "0".to_owned());
        }
        put("EndTransactionQueueSize", "0".to_owned());
        put("EndTransactionThreadPoolQueueCapacity", "0".to_owned());
        put("pageCacheLockTimeMills", "0".to_owned());
        put("earliestMessageTimeStamp", self.earliest_message_time().to_string());
        put("commitLogDiskRatio", format!("{disk_ratio}"));
        put(
            &format!("commitLogDiskRatio_{}", log.config().dir.display()),
            format!("{disk_ratio}"),
        );
        put(
            "commitLogMinOffset",
            if log.max_offset() == 0 {
                "-1".into()
            } else {
                log.min_offset().to_string()
            },
        );
        put("commitLogMaxOffset", log.max_offset().to_string());
        put(
            "dispatchBehindBytes",
            log.max_offset().saturating_sub(self.store.dispatched_offset()).to_string(),
        );
        if let Some(stall) = self.store.dispatch_stall() {
            put(
                "dispatchStuck",
                format!(
                    "at offset {} for {} s: {}",
                    stall.offset,
                    stall.since.elapsed().as_secs(),
                    stall.reason
                ),
            );
        }
        put(
            "remainHowManyDataToFlush",
            format!("{} B", log.max_offset().saturating_sub(log.flushed_offset())),
        );
        for k in ["msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning"] {
            put(k, "0".to_owned());
        }
        put("msgPutTotalTodayNow", puts.to_string());
        for k in ["msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning"] {
            put(k, "0".to_owned());
        }
        put("msgGetTotalTodayNow", gets.to_string());
        put("putMessageTimesTotal", puts.to_string());
        put("putMessageSizeTotal", put_bytes.to_string());
        put(
            "putMessageAverageSize",
            if puts == 0 {
                "0.0".into()
            } else {
                format!("{:.1}", put_bytes as f64 / puts as f64)
            },
        );
        put("putMessageFailedTimes", self.stats.put_failures.load(Ordering::Relaxed).to_string());
        for k in [
            "timerReadBehind",
            "timerOffsetBehind",
            "timerCongestNum",
            "timerEnqueueTps",
            "timerDequeueTps",
        ] {
            put(k, "0".to_owned());
        }
        put("consumerConnections", consumers.to_string());
        put("producerConnections", producers.to_string());
        for (k, v) in log.lock_snapshot().to_pairs() {
            put(&k, v);
        }
        t
    }

    /// Store time of the oldest message still stored, `-1` for an empty store.
    fn earliest_message_time(&self) -> i64 {
        let log = self.store.commit_log();
        if log.max_offset() == 0 {
            return -1;
        }
        log.read_record(log.min_offset())
            .ok()
            .flatten()
            .and_then(|b| petrel_protocol::MessageExt::decode(&b).ok())
            .map_or(-1, |(m, _)| m.store_timestamp)
    }

    /// `key=value` lines of every setting, and the topic table's data version.
    #[must_use]
    pub fn broker_config(&self) -> (String, petrel_protocol::model::DataVersion) {
        (self.config.to_properties(), self.topics.data_version())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::testing::{TestBroker, heartbeat_consumer};

    #[tokio::test]
    async fn statistics_follow_what_was_sent_and_committed() {
        let t = TestBroker::start(|_| {});
        t.send_n("StatsTopic", 1, 3).await;
        t.wait_dispatched();
        let admin = &t.broker.admin;
        let stats = admin.topic_stats("StatsTopic").await.unwrap();
        assert_eq!(stats.len(), 8, "8 queues from TBW102 and the producer's default of 8");
        assert_eq!((stats[1].min_offset, stats[1].max_offset), (0, 3));
        assert!(stats[1].last_update_ms > 0 && stats[0].last_update_ms == 0);
        assert!(matches!(admin.topic_stats("Nope").await, Err(BrokerError::TopicNotExist(_))));

        heartbeat_consumer(&t.broker, "G", "StatsTopic");
        t.broker.offsets.commit("G", "StatsTopic", 1, 2).unwrap();
        let progress = admin.consume_stats("G", Vec::new()).await.unwrap();
        let q1 = progress.iter().find(|p| p.queue_id == 1).unwrap();
        assert_eq!((q1.broker_offset, q1.consumer_offset), (3, 2));
        assert!(q1.last_timestamp_ms > 0, "the time of the last consumed message");

        let info = admin.runtime_info().await.unwrap();
        assert_eq!(info["msgPutTotalTodayNow"], "3");
        assert!(info["earliestMessageTimeStamp"].parse::<i64>().unwrap() > 0);
        assert!(info.contains_key("putMessageLockKind"), "{info:?}");
        let first = admin.view_message(0, crate::services::any_topic()).await.unwrap();
        let (m, _) = petrel_protocol::MessageExt::decode(&first).unwrap();
        assert_eq!(m.topic, "StatsTopic");
        assert!(
            admin.view_message(1, crate::services::any_topic()).await.is_err(),
            "no record starts at offset 1"
        );
        let only_other: crate::services::TopicCheck = std::sync::Arc::new(|topic: &str| {
            if topic == "Other" {
                Ok(())
            } else {
                Err(BrokerError::NoPermission(format!("not {topic}")))
            }
        });
        let e = admin.view_message(0, only_other).await.unwrap_err();
        assert!(
            matches!(&e, BrokerError::NoPermission(why) if why == "not StatsTopic"),
            "the record's own topic is checked: {e}"
        );
        t.stop().await;
    }

    #[tokio::test]
    async fn view_message_refuses_offsets_that_are_not_a_record_start() {
        let t = TestBroker::start(|_| {});
        let body = vec![b'v'; 4000];
        for _ in 0..300 {
            let req = crate::services::testing::send_request("ViewTopic", 0, "A", &body);
            t.broker.produce.send(req).await.unwrap();
        }
        let segment = 1_i64 << 20;
        assert!(t.broker.store.commit_log().max_offset() > segment as u64 + 8192, "the log rolled");
        let admin = &t.broker.admin;
        // Near the end of the first segment (in the filler, or in the last record), mid-record,
        // past the end, negative: every one an error answer, none a panic.
        for offset in [segment - 1, segment - 4, segment - 8, segment - 100, segment + 17, i64::MAX, -5] {
            let err = admin.view_message(offset, crate::services::any_topic()).await.unwrap_err();
            assert!(err.to_string().contains("can not find message"), "offset {offset}: {err}");
        }
        assert!(
            admin.view_message(segment, crate::services::any_topic()).await.is_ok(),
            "the second segment's first record"
        );
        t.stop().await;
    }
}
