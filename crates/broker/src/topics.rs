//! The broker's topic table: system topics, auto-creation from TBW102, admin changes, and the
//! `config/topics.json` file that keeps them across restarts.
//!
//! Owns: topic configs and their data version. Must never: hand out a config for a name that
//! fails RocketMQ's topic-name rules, or change the table without bumping the version (the name
//! server uses it to notice changes).

use std::path::PathBuf;

use parking_lot::RwLock;
use petrel_protocol::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper, perm};

use crate::broker::now_ms;
use crate::persist::{read_if_exists, write_atomically};

/// The template topic producers name when a topic is new.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Topic names are at most this long (`TopicValidator.TOPIC_MAX_LENGTH`)...
pub const TOPIC_MAX_LENGTH: usize = 127;
/// ...except retry and DLQ topics.
pub const RETRY_TOPIC_MAX_LENGTH: usize = 255;

/// Topics clients may not send to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`).
pub const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// Why a topic name is refused.
pub fn validate_topic_name(topic: &str) -> Result<(), String> {
    if topic.trim().is_empty() {
        return Err("The specified topic is blank.".into());
    }
    let max = if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX) {
        RETRY_TOPIC_MAX_LENGTH
    } else {
        TOPIC_MAX_LENGTH
    };
    if topic.len() > max {
        return Err(format!("The specified topic is longer than topic max length {max}."));
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'%' || b == b'|' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    Ok(())
}

/// Topics the broker owns, which admin commands may not change.
pub fn is_system_topic(topic: &str, cluster: &str, broker: &str) -> bool {
    topic == AUTO_CREATE_TOPIC_KEY_TOPIC
        || topic == cluster
        || topic == broker
        || NOT_ALLOWED_SEND_TOPICS.contains(&topic)
        || topic.starts_with("rmq_sys_")
        || topic.starts_with("RMQ_SYS_")
        || topic == format!("{cluster}_REPLY_TOPIC")
}

pub struct TopicManager {
    path: PathBuf,
    table: RwLock<TopicConfigSerializeWrapper>,
}

impl TopicManager {
    /// Loads `config/topics.json` under `root` and adds the system topics a RocketMQ broker has.
    pub fn open(
        root: &std::path::Path,
        cluster: &str,
        broker: &str,
        default_queue_nums: i32,
        auto_create: bool,
    ) -> std::io::Result<TopicManager> {
        let path = root.join("config").join("topics.json");
        let mut table: TopicConfigSerializeWrapper = match read_if_exists(&path)? {
            Some(bytes) => petrel_protocol::body::from_json(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?,
            None => TopicConfigSerializeWrapper::default(),
        };
        let mut system = vec![
            TopicConfig::new(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                default_queue_nums,
                if auto_create {
                    perm::READ | perm::WRITE | perm::INHERIT
                } else {
                    perm::READ | perm::WRITE
                },
            ),
            TopicConfig::new("SELF_TEST_TOPIC", 1, perm::READ | perm::WRITE),
            TopicConfig::new(cluster, 16, perm::READ | perm::WRITE | perm::INHERIT),
            TopicConfig::new(broker, 1, perm::READ | perm::WRITE | perm::INHERIT),
            TopicConfig::new("OFFSET_MOVED_EVENT", 1, perm::READ | perm::WRITE),
            TopicConfig::new(&format!("{cluster}_REPLY_TOPIC"), 1, perm::READ | perm::WRITE),
        ];
        // TBW102 follows the current autoCreateTopicEnable, whatever the file says.
        for t in system.drain(..) {
            if t.topic_name == AUTO_CREATE_TOPIC_KEY_TOPIC || !table.topic_config_table.contains_key(&t.topic_name) {
                table.topic_config_table.insert(t.topic_name.clone(), t);
            }
        }
        if table.data_version.timestamp == 0 {
            table.data_version.timestamp = now_ms();
        }
        Ok(TopicManager {
            path,
            table: RwLock::new(table),
        })
    }

    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.table.read().topic_config_table.get(topic).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.table.read().topic_config_table.keys().cloned().collect()
    }

    pub fn snapshot(&self) -> TopicConfigSerializeWrapper {
        self.table.read().clone()
    }

    pub fn data_version(&self) -> DataVersion {
        self.table.read().data_version
    }

    /// Inserts or replaces a topic and saves the table.
    pub fn put(&self, config: TopicConfig) -> std::io::Result<()> {
        let mut t = self.table.write();
        t.topic_config_table.insert(config.topic_name.clone(), config);
        bump(&mut t.data_version);
        self.save(&t)
    }

    /// Creates `topic` unless it exists; returns the config and whether it was created.
    pub fn get_or_create(&self, topic: &str, make: impl FnOnce() -> TopicConfig) -> std::io::Result<(TopicConfig, bool)> {
        if let Some(c) = self.get(topic) {
            return Ok((c, false));
        }
        let mut t = self.table.write();
        if let Some(c) = t.topic_config_table.get(topic) {
            return Ok((c.clone(), false));
        }
        let config = make();
        t.topic_config_table.insert(topic.to_owned(), config.clone());
        bump(&mut t.data_version);
        self.save(&t)?;
        Ok((config, true))
    }

    pub fn delete(&self, topic: &str) -> std::io::Result<bool> {
        let mut t = self.table.write();
        let existed = t.topic_config_table.shift_remove(topic).is_some();
        if existed {
            bump(&mut t.data_version);
            self.save(&t)?;
        }
        Ok(existed)
    }

    fn save(&self, t: &TopicConfigSerializeWrapper) -> std::io::Result<()> {
        write_atomically(&self.path, petrel_protocol::body::to_json(t).as_bytes())
    }
}

fn bump(v: &mut DataVersion) {
    v.counter += 1;
    v.timestamp = now_ms();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_rocketmq_rules() {
        assert!(validate_topic_name("Topic_A-1%|x").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("has space").is_err());
        assert!(validate_topic_name(&"t".repeat(128)).is_err());
        assert!(validate_topic_name(&format!("%RETRY%{}", "g".repeat(200))).is_ok());
    }

    #[test]
    fn topics_survive_reopen_and_versions_move() {
        let dir = tempfile::tempdir().unwrap();
        let m = TopicManager::open(dir.path(), "C", "b", 8, true).unwrap();
        let v0 = m.data_version().counter;
        let (_, created) = m.get_or_create("T1", || TopicConfig::new("T1", 4, 6)).unwrap();
        assert!(created);
        assert!(m.data_version().counter > v0);
        drop(m);
        let m = TopicManager::open(dir.path(), "C", "b", 8, false).unwrap();
        assert_eq!(m.get("T1").unwrap().read_queue_nums, 4);
        assert_eq!(
            m.get("TBW102").unwrap().perm & perm::INHERIT,
            0,
            "TBW102 follows autoCreateTopicEnable"
        );
    }
}
