//! Administration: topic create/delete, topic and consume statistics, runtime info and config
//! (what `mqadmin` and dashboards read), and VIEW_MESSAGE_BY_ID.
//!
//! Owns: these answers. Must never: let an admin call change a system topic, or answer a
//! topic change before the name server has it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use indexmap::IndexMap;
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, ConsumeStats, KvTable, MessageQueue, OffsetWrapper, TopicConfig, TopicOffset, TopicStatsTable};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{
    CommandHeader, CreateTopicRequestHeader, DeleteTopicRequestHeader, GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader,
    ViewMessageRequestHeader,
};

use crate::broker::{Broker, answer, error};
use crate::server::Reply;
use crate::topics::{is_system_topic, validate_topic_name};

/// The version string mqadmin shows; Petrel speaks the 5.5.0 protocol.
pub const BROKER_VERSION_DESC: &str = "V5_5_0";

impl Broker {
    pub(crate) fn update_and_create_topic(self: &Arc<Self>, request: RemotingCommand) -> Reply {
        let h = match CreateTopicRequestHeader::from_command(&request) {
            Ok(h) => h,
            Err(e) => return Reply::Now(error(&request, resp::SYSTEM_ERROR, e.to_string())),
        };
        if let Err(m) = validate_topic_name(&h.topic) {
            return Reply::Now(error(&request, resp::INVALID_PARAMETER, m));
        }
        if is_system_topic(&h.topic, &self.config.broker_cluster_name, &self.config.broker_name) {
            return Reply::Now(error(
                &request,
                resp::INVALID_PARAMETER,
                format!("The topic[{}] is conflict with system topic.", h.topic),
            ));
        }
        if h.read_queue_nums <= 0 || h.write_queue_nums <= 0 || h.read_queue_nums > 1024 || h.write_queue_nums > 1024 {
            return Reply::Now(error(&request, resp::INVALID_PARAMETER, "queue numbers must be between 1 and 1024"));
        }
        let mut config = TopicConfig::new(&h.topic, h.read_queue_nums, h.perm);
        config.write_queue_nums = h.write_queue_nums;
        config.topic_filter_type = h.topic_filter_type.clone();
        config.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
        config.order = h.order;
        for attr in h.attributes.as_deref().unwrap_or("").split(',').filter(|a| !a.is_empty()) {
            if let Some((k, v)) = attr.strip_prefix('+').and_then(|a| a.split_once('=')) {
                config.attributes.insert(k.to_owned(), v.to_owned());
            }
        }
        if let Err(e) = self.topics.put(config) {
            return Reply::Now(error(&request, resp::SYSTEM_ERROR, format!("cannot save topic: {e}")));
        }
        tracing::info!(topic = %h.topic, read = h.read_queue_nums, write = h.write_queue_nums, perm = h.perm, "topic created or updated");
        self.answer_after_registration(request)
    }

    pub(crate) fn delete_topic(self: &Arc<Self>, request: RemotingCommand) -> Reply {
        let h = match DeleteTopicRequestHeader::from_command(&request) {
            Ok(h) => h,
            Err(e) => return Reply::Now(error(&request, resp::SYSTEM_ERROR, e.to_string())),
        };
        if h.topic.trim().is_empty() {
            return Reply::Now(error(&request, resp::INVALID_PARAMETER, "The specified topic is blank."));
        }
        if is_system_topic(&h.topic, &self.config.broker_cluster_name, &self.config.broker_name) {
            return Reply::Now(error(
                &request,
                resp::INVALID_PARAMETER,
                format!("The topic[{}] is a system topic.", h.topic),
            ));
        }
        if let Err(e) = self.topics.delete(&h.topic) {
            return Reply::Now(error(&request, resp::SYSTEM_ERROR, format!("cannot save topics: {e}")));
        }
        self.offsets.remove_topic(&h.topic);
        self.answer_after_registration(request)
    }

    fn answer_after_registration(self: &Arc<Self>, request: RemotingCommand) -> Reply {
        let broker = self.clone();
        Reply::Later(Box::pin(async move {
            broker.register_all().await;
            Some(answer(&request, resp::SUCCESS))
        }))
    }

    pub(crate) fn get_all_topic_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let table = self.topics.snapshot();
        let mut r = answer(request, resp::SUCCESS).with_body(body::to_json(&table));
        r.put_ext("totalTopicNum", table.topic_config_table.len().to_string());
        r
    }

    /// GET_TOPIC_CONFIG (351): one topic's config (Java's TopicConfigAndQueueMapping without a
    /// mapping is the plain TopicConfig).
    pub(crate) fn get_topic_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match GetTopicStatsInfoRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        match self.topics.get(&h.topic) {
            Some(c) => answer(request, resp::SUCCESS).with_body(body::to_json(&c)),
            None => error(
                request,
                resp::TOPIC_NOT_EXIST,
                format!("No topic in this broker. topic: {}", h.topic),
            ),
        }
    }

    fn mq(&self, topic: &str, queue_id: i32) -> MessageQueue {
        MessageQueue {
            broker_name: self.config.broker_name.clone(),
            queue_id,
            topic: topic.to_owned(),
        }
    }

    pub(crate) fn get_topic_stats_info(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match GetTopicStatsInfoRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        let Some(topic) = self.topics.get(&h.topic) else {
            return error(request, resp::TOPIC_NOT_EXIST, format!("topic[{}] not exist", h.topic));
        };
        let queues = topic.write_queue_nums.max(topic.read_queue_nums);
        let table = TopicStatsTable {
            offset_table: (0..queues)
                .map(|q| {
                    let (min, max) = self.store.queue_offsets(&h.topic, q);
                    let last = self.store.latest_store_time(&h.topic, q);
                    (
                        self.mq(&h.topic, q),
                        TopicOffset {
                            last_update_timestamp: last,
                            max_offset: max,
                            min_offset: min,
                        },
                    )
                })
                .collect(),
            topic_put_tps: 0.0,
        };
        answer(request, resp::SUCCESS).with_body(table.to_json())
    }

    pub(crate) fn get_consume_stats(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match GetConsumeStatsRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        let group = &h.consumer_group;
        let topics: Vec<String> = if let Some(list) = h.topic_list.as_deref().filter(|l| !l.is_empty()) {
            list.split(';').filter(|t| !t.is_empty()).map(str::to_owned).collect()
        } else if let Some(t) = h.topic.as_deref().filter(|t| !t.trim().is_empty()) {
            vec![t.to_owned()]
        } else {
            let mut t = self.offsets.topics_of_group(group);
            if self.clients.has_subscriptions(group) {
                t.retain(|topic| self.clients.subscription(group, topic).is_some());
            }
            t
        };
        let mut stats = ConsumeStats::default();
        for topic in topics {
            let Some(config) = self.topics.get(&topic) else { continue };
            for q in 0..config.read_queue_nums {
                let (_, max) = self.store.queue_offsets(&topic, q);
                let consumer_offset = self.offsets.query(group, &topic, q).unwrap_or(0);
                let pull_offset = self.offsets.pulled(group, &topic, q).unwrap_or(0).max(consumer_offset);
                let last_timestamp = self.store.store_time_at(&topic, q, consumer_offset - 1).unwrap_or(0);
                stats.offset_table.push((
                    self.mq(&topic, q),
                    OffsetWrapper {
                        broker_offset: max,
                        consumer_offset,
                        last_timestamp,
                        pull_offset,
                    },
                ));
            }
        }
        answer(request, resp::SUCCESS).with_body(stats.to_json())
    }

    pub(crate) fn get_broker_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let mut r = answer(request, resp::SUCCESS).with_body(self.config.to_properties());
        r.put_ext("version", body::to_json(&self.topics.data_version()));
        r
    }

    pub(crate) fn view_message_by_id(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match ViewMessageRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        let record = u64::try_from(h.offset)
            .ok()
            .and_then(|o| self.store.commit_log().read_record(o).ok().flatten());
        match record {
            Some(bytes) => answer(request, resp::SUCCESS).with_body(bytes),
            None => error(
                request,
                resp::SYSTEM_ERROR,
                format!("can not find message by the offset, {}", h.offset),
            ),
        }
    }

    /// GET_BROKER_RUNTIME_INFO: the keys mqadmin reads, plus the put-message lock's statistics.
    pub(crate) fn get_broker_runtime_info(&self, request: &RemotingCommand) -> RemotingCommand {
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
        let (consumers, producers) = self.clients.connection_count();
        put("brokerVersionDesc", BROKER_VERSION_DESC.to_owned());
        put("brokerVersion", "505".to_owned());
        put("brokerActive", "true".to_owned());
        put("bootTimestamp", self.boot_timestamp_ms.to_string());
        put("startAcceptSendRequestTimeStamp", "0".to_owned());
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
        put("putTps", format!("{:.1}  ", 0.0));
        put("getTransferredTps", format!("{:.1}  ", 0.0));
        put("getFoundTps", format!("{:.1}  ", 0.0));
        put("getMissTps", format!("{:.1}  ", 0.0));
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
        put(
            "remainHowManyDataToFlush",
            format!("{} B", log.max_offset().saturating_sub(log.flushed_offset())),
        );
        put("msgPutTotalYesterdayMorning", "0".to_owned());
        put("msgPutTotalTodayMorning", "0".to_owned());
        put("msgPutTotalTodayNow", puts.to_string());
        put("msgGetTotalYesterdayMorning", "0".to_owned());
        put("msgGetTotalTodayMorning", "0".to_owned());
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
        answer(request, resp::SUCCESS).with_body(body::to_json(&KvTable { table: t }))
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
}
