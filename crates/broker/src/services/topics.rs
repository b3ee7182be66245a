//! `TopicService`: the broker's topic table — system topics, creation by admin, by a send (from
//! `TBW102`) and by a consumer's heartbeat (`%RETRY%`), dead-letter topics, deletion — kept in
//! `config/topics.json`.
//!
//! Owns: topic configs, their data version, and the file. Must never: hold a topic whose name
//! fails RocketMQ's rules, hold more than `maxTopics`, change the table without bumping the
//! version (the name server uses it to notice changes), or write the file under the table's
//! lock or on the runtime (a background writer does, coalescing changes).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use petrel_protocol::model::{DataVersion, TopicConfig, TopicConfigSerializeWrapper, perm};

use super::{BrokerError, RouteAnnouncer, valid_name_byte};
use crate::persist::{Coalesced, Job, blocking, read_if_exists, write_atomically};

/// The template topic producers name when a topic is new.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// Prefix of a consumer group's retry topic, `%RETRY%<group>`.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = petrel_protocol::topics::RETRY_GROUP_TOPIC_PREFIX;
/// Prefix of a consumer group's dead-letter topic, `%DLQ%<group>`.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = petrel_protocol::topics::DLQ_GROUP_TOPIC_PREFIX;
/// Topic names are at most this long (`TopicValidator.TOPIC_MAX_LENGTH`)...
pub const TOPIC_MAX_LENGTH: usize = 127;
/// ...except retry and DLQ topics.
pub const RETRY_TOPIC_MAX_LENGTH: usize = 255;
/// Queues a topic may have at most (`updateTopic -r/-w`).
pub const MAX_QUEUES_PER_TOPIC: i32 = 1024;

/// Topics clients may not send to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`, and the timer
/// topic: a message sent there directly would skip its wait).
pub const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "rmq_sys_wheel_timer",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// Why a topic name is refused.
///
/// # Errors
/// The remark RocketMQ gives.
pub fn validate_topic_name(topic: &str) -> Result<(), BrokerError> {
    if topic.trim().is_empty() {
        return Err(BrokerError::InvalidParameter("The specified topic is blank.".into()));
    }
    let max = if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX) {
        RETRY_TOPIC_MAX_LENGTH
    } else {
        TOPIC_MAX_LENGTH
    };
    if topic.len() > max {
        return Err(BrokerError::InvalidParameter(format!(
            "The specified topic is longer than topic max length {max}."
        )));
    }
    if !topic.bytes().all(valid_name_byte) {
        return Err(BrokerError::InvalidParameter(format!(
            "The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )));
    }
    Ok(())
}

/// Topics the broker owns, which admin commands may not change.
#[must_use]
pub fn is_system_topic(topic: &str, cluster: &str, broker: &str) -> bool {
    topic == AUTO_CREATE_TOPIC_KEY_TOPIC
        || topic == cluster
        || topic == broker
        || NOT_ALLOWED_SEND_TOPICS.contains(&topic)
        || topic.starts_with("rmq_sys_")
        || topic.starts_with("RMQ_SYS_")
        || topic == format!("{cluster}_REPLY_TOPIC")
}

/// How `TopicService` was set up.
pub struct TopicSettings {
    /// `brokerClusterName`: also a system topic of that name.
    pub cluster: String,
    /// `brokerName`: also a system topic of that name.
    pub broker: String,
    /// `defaultTopicQueueNums`: the queues of the template topic `TBW102`.
    pub default_queue_nums: i32,
    /// `autoCreateTopicEnable`: a send to an unknown topic creates it from its template.
    pub auto_create: bool,
    /// `maxTopics`: the most topics the table may hold.
    pub max_topics: usize,
    /// `msgTraceTopicName` when `traceTopicEnable` is on: the message-trace topic, made at start
    /// (one queue) and counted among the system topics.
    pub trace_topic: Option<String>,
    /// `enableLmq` and `enableMultiDispatch`: every `%LMQ%` name is a topic of one queue, read
    /// and written, never stored in the table.
    pub lmq: bool,
}

/// The topic table (`config/topics.json`): each topic's queues and permissions, created and
/// changed by sends, heartbeats, admin commands and a slave's sync.
pub struct TopicService {
    path: PathBuf,
    table: RwLock<TopicConfigSerializeWrapper>,
    settings: TopicSettings,
    persist: Arc<Coalesced>,
    announcer: OnceLock<Arc<dyn RouteAnnouncer>>,
}

impl TopicService {
    /// Loads `config/topics.json` under `root` and adds the system topics a RocketMQ broker has.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn open(root: &std::path::Path, settings: TopicSettings) -> std::io::Result<TopicService> {
        let path = root.join("config").join("topics.json");
        let mut table: TopicConfigSerializeWrapper = match read_if_exists(&path)? {
            Some(bytes) => petrel_protocol::model::from_json(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?,
            None => TopicConfigSerializeWrapper::default(),
        };
        let (cluster, broker) = (&settings.cluster, &settings.broker);
        let tbw102_perm = if settings.auto_create {
            perm::READ | perm::WRITE | perm::INHERIT
        } else {
            perm::READ | perm::WRITE
        };
        let system = [
            TopicConfig::new(AUTO_CREATE_TOPIC_KEY_TOPIC, settings.default_queue_nums, tbw102_perm),
            TopicConfig::new("SELF_TEST_TOPIC", 1, perm::READ | perm::WRITE),
            TopicConfig::new(cluster, 16, perm::READ | perm::WRITE | perm::INHERIT),
            TopicConfig::new(broker, 1, perm::READ | perm::WRITE | perm::INHERIT),
            TopicConfig::new("OFFSET_MOVED_EVENT", 1, perm::READ | perm::WRITE),
            TopicConfig::new(&format!("{cluster}_REPLY_TOPIC"), 1, perm::READ | perm::WRITE),
        ]
        .into_iter()
        .chain(
            settings
                .trace_topic
                .as_deref()
                .map(|t| TopicConfig::new(t, 1, perm::READ | perm::WRITE)),
        );
        // TBW102 follows the current autoCreateTopicEnable, whatever the file says.
        for t in system {
            if t.topic_name == AUTO_CREATE_TOPIC_KEY_TOPIC || !table.topic_config_table.contains_key(&t.topic_name) {
                table.topic_config_table.insert(t.topic_name.clone(), t);
            }
        }
        if table.data_version.timestamp == 0 {
            table.data_version.timestamp = crate::now_ms();
        }
        Ok(TopicService {
            path,
            table: RwLock::new(table),
            settings,
            persist: Coalesced::new("topics.json"),
            announcer: OnceLock::new(),
        })
    }

    /// Who tells the name servers about changes (set once, when the broker is assembled).
    pub fn set_announcer(&self, announcer: Arc<dyn RouteAnnouncer>) {
        let _ = self.announcer.set(announcer);
    }

    /// The background writer and its job, for the broker to run.
    pub fn persister(self: &Arc<Self>) -> (Arc<Coalesced>, Job) {
        let me = Arc::downgrade(self);
        let job = move || match me.upgrade() {
            Some(topics) => topics.write_file().map_err(BrokerError::io("writing the topic table")),
            None => Ok(()),
        };
        (self.persist.clone(), blocking(Arc::new(job)))
    }

    /// Writes the table now, on the calling thread (shutdown, and the background writer).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write_file(&self) -> std::io::Result<()> {
        let snapshot = self.table.read().clone();
        write_atomically(&self.path, petrel_protocol::model::to_json(&snapshot).as_bytes())
    }

    /// A topic's config, if it exists.
    #[must_use]
    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        if let Some(lmq) = self.light_queue(topic) {
            return Some(lmq);
        }
        self.table.read().topic_config_table.get(topic).cloned()
    }

    /// The config a light message queue answers with: one queue, read and written (RocketMQ's
    /// LMQ topic manager makes the same, and keeps it nowhere either).
    fn light_queue(&self, topic: &str) -> Option<TopicConfig> {
        (self.settings.lmq && petrel_protocol::lmq::is_lmq(topic)).then(|| TopicConfig::new(topic, 1, perm::READ | perm::WRITE))
    }

    /// `f` of a topic's config, if it exists, without copying it (a send's check reads a field
    /// or two; a copy clones the name and the attribute map).
    pub fn with<R>(&self, topic: &str, f: impl FnOnce(&TopicConfig) -> R) -> Option<R> {
        if let Some(lmq) = self.light_queue(topic) {
            return Some(f(&lmq));
        }
        self.table.read().topic_config_table.get(topic).map(f)
    }

    /// The name of every topic in the table.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.table.read().topic_config_table.keys().cloned().collect()
    }

    /// How many topics the table holds.
    #[must_use]
    pub fn count(&self) -> usize {
        self.table.read().topic_config_table.len()
    }

    /// A copy of the whole table with its data version (registration, GET_ALL_TOPIC_CONFIG).
    #[must_use]
    pub fn snapshot(&self) -> TopicConfigSerializeWrapper {
        self.table.read().clone()
    }

    /// The table's data version, bumped at each change so that name servers and slaves see it.
    #[must_use]
    pub fn data_version(&self) -> DataVersion {
        self.table.read().data_version
    }

    /// Whether `topic` is one the broker owns, given this broker's cluster and broker names.
    #[must_use]
    pub fn is_system_topic(&self, topic: &str) -> bool {
        is_system_topic(topic, &self.settings.cluster, &self.settings.broker) || self.settings.trace_topic.as_deref() == Some(topic)
    }

    /// Inserts (or with `replace`, replaces) a topic under the cap; returns its config and
    /// whether the table changed. The file is written later: see [`TopicService::settle`].
    fn insert(&self, config: TopicConfig, replace: bool) -> Result<(TopicConfig, bool), BrokerError> {
        validate_topic_name(&config.topic_name)?;
        let mut t = self.table.write();
        if let Some(existing) = t.topic_config_table.get(&config.topic_name)
            && (!replace || *existing == config)
        {
            return Ok((existing.clone(), false));
        }
        if !t.topic_config_table.contains_key(&config.topic_name) && t.topic_config_table.len() >= self.settings.max_topics {
            return Err(BrokerError::LimitReached(format!(
                "the broker holds {} topics, its maxTopics; topic[{}] is not created",
                self.settings.max_topics, config.topic_name
            )));
        }
        t.topic_config_table.insert(config.topic_name.clone(), config.clone());
        bump(&mut t.data_version);
        drop(t);
        self.persist.request();
        Ok((config, true))
    }

    /// A slave takes its master's table whole when the master's version differs (RocketMQ's
    /// slaves do the same); returns whether anything changed. Written to disk later.
    pub fn replace_from_master(&self, master: TopicConfigSerializeWrapper) -> bool {
        let mut t = self.table.write();
        if t.data_version == master.data_version && t.topic_config_table == master.topic_config_table {
            return false;
        }
        let (before, after) = (t.topic_config_table.len(), master.topic_config_table.len());
        *t = master;
        drop(t);
        tracing::info!(before, after, "topic table taken from the master");
        self.persist.request();
        true
    }

    /// Resolves once every change so far is on disk and the name servers know it.
    ///
    /// # Errors
    /// The file could not be written.
    pub async fn settle(&self) -> Result<(), BrokerError> {
        let generation = self.persist.request();
        self.persist.wait(generation).await.map_err(|source| BrokerError::Persist {
            what: "saving the topics",
            source,
        })?;
        if let Some(a) = self.announcer.get() {
            a.announce().await;
        }
        Ok(())
    }

    /// Admin: creates or replaces a topic (not a system topic), answering once it is saved and
    /// announced.
    ///
    /// # Errors
    /// A bad name, a system topic, queue numbers outside 1..=1024, the cap, or a failed write.
    pub async fn create_or_update(&self, config: TopicConfig) -> Result<(), BrokerError> {
        validate_topic_name(&config.topic_name)?;
        if self.is_system_topic(&config.topic_name) {
            return Err(BrokerError::InvalidParameter(format!(
                "The topic[{}] is conflict with system topic.",
                config.topic_name
            )));
        }
        let queues_ok = |n: i32| (1..=MAX_QUEUES_PER_TOPIC).contains(&n);
        if !queues_ok(config.read_queue_nums) || !queues_ok(config.write_queue_nums) {
            return Err(BrokerError::InvalidParameter(format!(
                "queue numbers must be between 1 and {MAX_QUEUES_PER_TOPIC}"
            )));
        }
        self.insert(config, true)?;
        self.settle().await
    }

    /// Admin: deletes a topic (not a system topic); returns whether it existed.
    ///
    /// # Errors
    /// A blank name, a system topic, or a failed write.
    pub async fn delete(&self, topic: &str) -> Result<bool, BrokerError> {
        if topic.trim().is_empty() {
            return Err(BrokerError::InvalidParameter("The specified topic is blank.".into()));
        }
        if self.is_system_topic(topic) {
            return Err(BrokerError::InvalidParameter(format!("The topic[{topic}] is a system topic.")));
        }
        let existed = {
            let mut t = self.table.write();
            let existed = t.topic_config_table.shift_remove(topic).is_some();
            if existed {
                bump(&mut t.data_version);
            }
            existed
        };
        self.settle().await?;
        Ok(existed)
    }

    /// The topic a send goes to, created from its template (`TBW102` unless the producer named
    /// another) when it does not exist and auto-creation is on; returns whether it was created.
    ///
    /// # Errors
    /// `TopicNotExist` when it cannot be created, or the cap.
    pub fn for_send(&self, topic: &str, default_topic: &str, default_queue_nums: i32) -> Result<(TopicConfig, bool), BrokerError> {
        if let Some(c) = self.get(topic) {
            return Ok((c, false));
        }
        let config = if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            TopicConfig::new(topic, 1, perm::READ | perm::WRITE)
        } else {
            let template_name = if default_topic.is_empty() {
                AUTO_CREATE_TOPIC_KEY_TOPIC
            } else {
                default_topic
            };
            let template = self.get(template_name).filter(|t| t.perm & perm::INHERIT != 0);
            let Some(template) = template.filter(|_| self.settings.auto_create) else {
                return Err(BrokerError::topic_not_exist(topic));
            };
            let queues = default_queue_nums.clamp(1, template.write_queue_nums.max(1));
            let mut c = TopicConfig::new(topic, queues, template.perm & !perm::INHERIT);
            c.topic_filter_type = template.topic_filter_type.clone();
            c
        };
        let (c, created) = self.insert(config, false)?;
        if created {
            tracing::info!(topic, queues = c.write_queue_nums, "topic created by a send");
        }
        Ok((c, created))
    }

    /// A topic that may be read, for a pull or a pop (`action` names it in the refusal).
    ///
    /// # Errors
    /// `TopicNotExist`, or `NoPermission` with RocketMQ's remark.
    pub fn readable(&self, topic: &str, action: &str) -> Result<TopicConfig, BrokerError> {
        let config = self.get(topic).ok_or_else(|| BrokerError::topic_not_exist(topic))?;
        if config.perm & perm::READ == 0 {
            return Err(BrokerError::NoPermission(format!(
                "the topic[{topic}] {action} message is forbidden"
            )));
        }
        Ok(config)
    }

    /// The group's retry topic, created if needed with `queue_nums` queues (the group's
    /// `retryQueueNums`); returns whether it was created.
    ///
    /// # Errors
    /// A bad name, or the cap.
    pub fn ensure_retry(&self, group: &str, queue_nums: i32) -> Result<bool, BrokerError> {
        let retry = format!("{RETRY_GROUP_TOPIC_PREFIX}{group}");
        if self.get(&retry).is_some() {
            return Ok(false);
        }
        let config = TopicConfig::new(&retry, queue_nums.max(1), perm::READ | perm::WRITE);
        Ok(self.insert(config, false)?.1)
    }

    /// The group's dead-letter topic, created if needed.
    ///
    /// # Errors
    /// A bad name, or the cap.
    pub fn ensure_dlq(&self, group: &str) -> Result<(TopicConfig, bool), BrokerError> {
        let dlq = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
        if let Some(c) = self.get(&dlq) {
            return Ok((c, false));
        }
        self.insert(TopicConfig::new(&dlq, 1, perm::READ | perm::WRITE), false)
    }
}

fn bump(v: &mut DataVersion) {
    v.counter += 1;
    v.timestamp = crate::now_ms();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(auto_create: bool, max_topics: usize) -> TopicSettings {
        TopicSettings {
            trace_topic: None,
            cluster: "C".into(),
            broker: "b".into(),
            default_queue_nums: 8,
            auto_create,
            max_topics,
            lmq: false,
        }
    }

    fn service(dir: &std::path::Path, auto_create: bool, max_topics: usize) -> Arc<TopicService> {
        let s = Arc::new(TopicService::open(dir, settings(auto_create, max_topics)).unwrap());
        let (persist, job) = s.persister();
        tokio::spawn(persist.run(job));
        s
    }

    #[test]
    fn topic_names_follow_rocketmq_rules() {
        assert!(validate_topic_name("Topic_A-1%|x").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("has space").is_err());
        assert!(validate_topic_name(&"t".repeat(128)).is_err());
        assert!(validate_topic_name(&format!("%RETRY%{}", "g".repeat(200))).is_ok());
    }

    #[tokio::test]
    async fn topics_survive_reopen_and_versions_move() {
        let dir = tempfile::tempdir().unwrap();
        let m = service(dir.path(), true, 100);
        let v0 = m.data_version().counter;
        let (c, created) = m.for_send("T1", "TBW102", 4).unwrap();
        assert!(created);
        assert_eq!(c.write_queue_nums, 4);
        assert!(m.data_version().counter > v0);
        m.settle().await.unwrap();
        let m = TopicService::open(dir.path(), settings(false, 100)).unwrap();
        assert_eq!(m.get("T1").unwrap().read_queue_nums, 4);
        assert_eq!(
            m.get("TBW102").unwrap().perm & perm::INHERIT,
            0,
            "TBW102 follows autoCreateTopicEnable"
        );
        assert!(matches!(m.for_send("T2", "TBW102", 4), Err(BrokerError::TopicNotExist(_))));
    }

    #[tokio::test]
    async fn admin_changes_are_checked_and_the_cap_holds_at_its_edge() {
        let dir = tempfile::tempdir().unwrap();
        let m = service(dir.path(), true, 8);
        assert_eq!(m.count(), 6, "the system topics");
        let conflict = m.create_or_update(TopicConfig::new("TBW102", 4, 6)).await;
        assert!(matches!(conflict, Err(BrokerError::InvalidParameter(r)) if r.contains("system topic")));
        let too_many_queues = m.create_or_update(TopicConfig::new("Q", 1025, 6)).await;
        assert!(matches!(too_many_queues, Err(BrokerError::InvalidParameter(_))));
        m.create_or_update(TopicConfig::new("A", 4, 6)).await.unwrap();
        assert!(m.ensure_retry("g", 1).unwrap(), "the 8th topic fits");
        assert!(!m.ensure_retry("g", 1).unwrap(), "already there");
        let full = m.for_send("B", "TBW102", 4);
        assert!(matches!(full, Err(BrokerError::LimitReached(r)) if r.contains("maxTopics")));
        m.create_or_update(TopicConfig::new("A", 2, 6)).await.unwrap();
        assert_eq!(
            m.get("A").unwrap().write_queue_nums,
            2,
            "updating an existing topic is not creating one"
        );
        assert!(m.delete("A").await.unwrap());
        assert!(m.for_send("B", "TBW102", 4).unwrap().1, "room again after a delete");
        assert!(matches!(m.delete("TBW102").await, Err(BrokerError::InvalidParameter(_))));
    }
}
