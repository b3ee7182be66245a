//! Consumer offsets: what each group has committed per queue (persisted to
//! `config/consumerOffset.json`, RocketMQ's `topic@group` layout) and where each group last
//! pulled to (memory only, for GET_CONSUME_STATS).
//!
//! Owns: the offset tables and their file. Must never: let a negative commit (the Go client
//! sends `-1` for queues it never read) overwrite a real offset.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::persist::{read_if_exists, write_atomically};

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetFile {
    /// "topic@group" -> queue id -> offset
    offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

pub struct OffsetManager {
    path: PathBuf,
    committed: RwLock<OffsetFile>,
    pulled: RwLock<HashMap<String, BTreeMap<i32, i64>>>,
    dirty: std::sync::atomic::AtomicBool,
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl OffsetManager {
    pub fn open(root: &std::path::Path) -> std::io::Result<OffsetManager> {
        let path = root.join("config").join("consumerOffset.json");
        let committed = match read_if_exists(&path)? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?,
            None => OffsetFile::default(),
        };
        Ok(OffsetManager {
            path,
            committed: RwLock::new(committed),
            pulled: RwLock::new(HashMap::new()),
            dirty: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        if offset < 0 {
            return;
        }
        self.committed
            .write()
            .offset_table
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, offset);
        self.dirty.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.committed
            .read()
            .offset_table
            .get(&key(topic, group))
            .and_then(|q| q.get(&queue_id).copied())
    }

    pub fn record_pull(&self, group: &str, topic: &str, queue_id: i32, next_offset: i64) {
        self.pulled
            .write()
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, next_offset);
    }

    pub fn pulled(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.pulled.read().get(&key(topic, group)).and_then(|q| q.get(&queue_id).copied())
    }

    /// Topics `group` has committed offsets for.
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        let suffix = format!("@{group}");
        self.committed
            .read()
            .offset_table
            .keys()
            .filter_map(|k| k.strip_suffix(&suffix).map(str::to_owned))
            .collect()
    }

    pub fn remove_topic(&self, topic: &str) {
        let prefix = format!("{topic}@");
        self.committed.write().offset_table.retain(|k, _| !k.starts_with(&prefix));
        self.pulled.write().retain(|k, _| !k.starts_with(&prefix));
        self.dirty.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Writes the file if anything changed since the last write.
    pub fn persist(&self) -> std::io::Result<()> {
        if !self.dirty.swap(false, std::sync::atomic::Ordering::AcqRel) {
            return Ok(());
        }
        let text = serde_json::to_vec(&*self.committed.read()).expect("offsets serialize");
        write_atomically(&self.path, &text).inspect_err(|_| self.dirty.store(true, std::sync::atomic::Ordering::Release))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_persist_and_negative_commits_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let m = OffsetManager::open(dir.path()).unwrap();
        m.commit("G", "T", 1, 7);
        m.commit("G", "T", 1, -1);
        assert_eq!(m.query("G", "T", 1), Some(7));
        m.persist().unwrap();
        let m = OffsetManager::open(dir.path()).unwrap();
        assert_eq!(m.query("G", "T", 1), Some(7));
        assert_eq!(m.query("G", "T", 2), None);
        assert_eq!(m.topics_of_group("G"), vec!["T".to_owned()]);
    }
}
