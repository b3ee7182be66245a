//! `OffsetService`: what each consumer group has committed per queue (persisted to
//! `config/consumerOffset.json`, RocketMQ's `topic@group` layout), where each group last pulled
//! to (memory only, for consume statistics), and the queue offset lookups consumers start from
//! (min, max, earliest store time, offset by time).
//!
//! Owns: the offset tables and their file. Must never: let a negative commit (the Go client
//! sends `-1` for queues it never read) overwrite a real offset, keep offsets for a group no
//! client registered, or read the commit log on the runtime (time lookups go to the store pool).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use petrel_store::{Boundary, MessageStore};
use serde::{Deserialize, Serialize};

use super::BrokerError;
use super::groups::GroupService;
use crate::persist::{read_if_exists, write_atomically};
use crate::store_pool::StorePool;

#[derive(Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetFile {
    /// "topic@group" -> queue id -> offset
    offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

/// The committed offsets file, as it is on disk.
pub struct OffsetTable {
    path: PathBuf,
    committed: RwLock<OffsetFile>,
    dirty: AtomicBool,
}

impl OffsetTable {
    /// Loads `config/consumerOffset.json`.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn open(root: &std::path::Path) -> std::io::Result<OffsetTable> {
        let path = root.join("config").join("consumerOffset.json");
        let committed = match read_if_exists(&path)? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?,
            None => OffsetFile::default(),
        };
        Ok(OffsetTable {
            path,
            committed: RwLock::new(committed),
            dirty: AtomicBool::new(false),
        })
    }

    /// Groups that have committed offsets.
    #[must_use]
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .committed
            .read()
            .offset_table
            .keys()
            .filter_map(|k| k.rsplit_once('@').map(|(_, g)| g.to_owned()))
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }

    /// Groups that have committed offsets of `topic`, sorted.
    #[must_use]
    pub fn groups_of(&self, topic: &str) -> Vec<String> {
        let mut groups: Vec<String> = self
            .committed
            .read()
            .offset_table
            .keys()
            .filter_map(|k| k.rsplit_once('@').filter(|(t, _)| *t == topic).map(|(_, g)| g.to_owned()))
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }

    /// Lowers every committed offset above its queue's max offset to that max; returns how many
    /// were lowered. After an unclean shutdown the store may have lost records that consumers
    /// had already read and committed (under ASYNC_FLUSH, what the OS had not written), and
    /// hands their queue offsets to new records: an offset left above the recovered max would
    /// skip those new messages.
    pub fn clamp_to_queue_max(&self, max_offset: impl Fn(&str, i32) -> i64) -> usize {
        let mut clamped = 0;
        for (k, queues) in &mut self.committed.write().offset_table {
            let Some((topic, group)) = k.split_once('@') else { continue };
            for (queue_id, offset) in queues.iter_mut() {
                let max = max_offset(topic, *queue_id);
                if *offset > max {
                    tracing::warn!(
                        topic,
                        group,
                        queue_id,
                        committed = *offset,
                        max,
                        "committed offset past the recovered queue: lowered to its max"
                    );
                    *offset = max;
                    clamped += 1;
                }
            }
        }
        if clamped > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        clamped
    }

    /// The table as `config/consumerOffset.json` holds it (GET_ALL_CONSUMER_OFFSET's answer).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        // Copied under the lock, written out after: commits wait for a copy, not for JSON.
        let snapshot = self.committed.read().clone();
        serde_json::to_vec(&snapshot).unwrap_or_default()
    }

    /// A slave takes its master's committed offsets, entry by entry over its own (RocketMQ's
    /// slaves do the same); returns how many queue offsets changed.
    ///
    /// # Errors
    /// The master's table does not parse.
    pub fn merge_from_master(&self, json: &[u8]) -> Result<usize, BrokerError> {
        let master: OffsetFile = serde_json::from_slice(json).map_err(|source| BrokerError::Json {
            what: "the master's consumer offsets",
            source,
        })?;
        let mut changed = 0;
        let mut table = self.committed.write();
        for (k, queues) in master.offset_table {
            let mine = table.offset_table.entry(k).or_default();
            for (queue_id, offset) in queues {
                if mine.insert(queue_id, offset) != Some(offset) {
                    changed += 1;
                }
            }
        }
        drop(table);
        if changed > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(changed)
    }

    /// Writes the file if anything changed since the last write (off the runtime: the offset
    /// chore runs it on the blocking pool).
    ///
    /// # Errors
    /// The file cannot be written (it stays dirty, so the next call tries again).
    pub fn persist(&self) -> std::io::Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let snapshot = serde_json::to_vec(&*self.committed.read()).map_err(std::io::Error::other)?;
        write_atomically(&self.path, &snapshot).inspect_err(|_| self.dirty.store(true, Ordering::Release))
    }
}

/// Committed offsets, where each group last pulled to, pending admin resets, and the queue offset
/// lookups consumers start from.
pub struct OffsetService {
    table: Arc<OffsetTable>,
    pulled: RwLock<HashMap<String, BTreeMap<i32, i64>>>,
    /// Offsets an admin reset (INVOKE_BROKER_TO_RESET_OFFSET) that the group's next pull of the
    /// queue is told (PULL_OFFSET_MOVED) and that its clients' commits do not overwrite until
    /// then, RocketMQ's server-side reset. Keyed like the committed table, so bounded like it.
    resets: parking_lot::Mutex<HashMap<String, BTreeMap<i32, i64>>>,
    groups: Arc<GroupService>,
    store: Arc<MessageStore>,
    pool: Arc<StorePool>,
}

impl OffsetService {
    /// A service over the loaded committed offsets, with nothing pulled or reset yet.
    #[must_use]
    pub fn new(table: Arc<OffsetTable>, groups: Arc<GroupService>, store: Arc<MessageStore>, pool: Arc<StorePool>) -> OffsetService {
        OffsetService {
            table,
            pulled: RwLock::new(HashMap::new()),
            resets: parking_lot::Mutex::new(HashMap::new()),
            groups,
            store,
            pool,
        }
    }

    /// The committed offsets table, shared with its background writer and a slave's sync.
    #[must_use]
    pub fn table(&self) -> &Arc<OffsetTable> {
        &self.table
    }

    /// Commits `offset` for a group's queue; negative offsets are ignored, and so are commits
    /// to a queue whose reset its consumers have not been told yet.
    ///
    /// # Errors
    /// The group is not known (no client of it ever registered).
    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) -> Result<(), BrokerError> {
        self.groups.require_known(group)?;
        if offset < 0
            || self
                .resets
                .lock()
                .get(&key(topic, group))
                .is_some_and(|q| q.contains_key(&queue_id))
        {
            return Ok(());
        }
        self.store_offset(group, topic, queue_id, offset);
        Ok(())
    }

    /// Resets a group's queue to `offset`: committed now, and told to the next pull.
    ///
    /// # Errors
    /// The group is not known.
    pub fn reset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) -> Result<(), BrokerError> {
        self.groups.require_known(group)?;
        assert!(offset >= 0, "a reset offset is a queue offset");
        self.resets.lock().entry(key(topic, group)).or_default().insert(queue_id, offset);
        self.store_offset(group, topic, queue_id, offset);
        Ok(())
    }

    /// The offset a queue was reset to, once: the pull that asks is answered with it.
    #[must_use]
    pub fn take_reset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let mut resets = self.resets.lock();
        let k = key(topic, group);
        let queues = resets.get_mut(&k)?;
        let offset = queues.remove(&queue_id);
        if queues.is_empty() {
            resets.remove(&k);
        }
        offset
    }

    fn store_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        self.table
            .committed
            .write()
            .offset_table
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, offset);
        self.table.dirty.store(true, Ordering::Release);
    }

    /// The offset `group` committed for the queue, if any.
    #[must_use]
    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.table
            .committed
            .read()
            .offset_table
            .get(&key(topic, group))
            .and_then(|q| q.get(&queue_id).copied())
    }

    /// Where a known group's last pull of the queue ended (unknown groups are not recorded: the
    /// table stays bounded by the groups' bound).
    pub fn record_pull(&self, group: &str, topic: &str, queue_id: i32, next_offset: i64) {
        if !self.groups.is_known(group) {
            return;
        }
        self.pulled
            .write()
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, next_offset);
    }

    /// Where `group`'s last pull of the queue ended, if one was recorded since the start.
    #[must_use]
    pub fn pulled(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.pulled.read().get(&key(topic, group)).and_then(|q| q.get(&queue_id).copied())
    }

    /// Topics `group` has committed offsets for.
    #[must_use]
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        let suffix = format!("@{group}");
        self.table
            .committed
            .read()
            .offset_table
            .keys()
            .filter_map(|k| k.strip_suffix(&suffix).map(str::to_owned))
            .collect()
    }

    /// Drops every offset `group` committed (DELETE_SUBSCRIPTIONGROUP with `cleanOffset`).
    pub fn remove_group(&self, group: &str) {
        let suffix = format!("@{group}");
        self.table.committed.write().offset_table.retain(|k, _| !k.ends_with(&suffix));
        self.pulled.write().retain(|k, _| !k.ends_with(&suffix));
        self.resets.lock().retain(|k, _| !k.ends_with(&suffix));
        self.table.dirty.store(true, Ordering::Release);
    }

    /// Drops every group's offsets, pulls and pending resets of `topic` (the topic was deleted).
    pub fn remove_topic(&self, topic: &str) {
        let prefix = format!("{topic}@");
        self.table.committed.write().offset_table.retain(|k, _| !k.starts_with(&prefix));
        self.pulled.write().retain(|k, _| !k.starts_with(&prefix));
        self.resets.lock().retain(|k, _| !k.starts_with(&prefix));
        self.table.dirty.store(true, Ordering::Release);
    }

    /// Drops every group's offsets, pulls and pending resets of each of `topics` in one pass
    /// (light message queues removed by their cleanup; topic names hold no `@`).
    pub fn remove_topics(&self, topics: &std::collections::HashSet<String>) {
        let gone = |k: &String| k.split_once('@').is_some_and(|(t, _)| topics.contains(t));
        self.table.committed.write().offset_table.retain(|k, _| !gone(k));
        self.pulled.write().retain(|k, _| !gone(k));
        self.resets.lock().retain(|k, _| !gone(k));
        self.table.dirty.store(true, Ordering::Release);
    }

    /// The queue's (min, max) offsets; (0, 0) for a queue that has nothing.
    #[must_use]
    pub fn queue_bounds(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        self.store.queue_offsets(topic, queue_id)
    }

    /// Store time of the queue's oldest message, `-1` if it has none (reads the log: pool).
    ///
    /// # Errors
    /// The store pool is full or shut down.
    pub async fn earliest_store_time(&self, topic: &str, queue_id: i32) -> Result<i64, BrokerError> {
        let (store, topic) = (self.store.clone(), topic.to_owned());
        self.pool.run(move || store.earliest_store_time(&topic, queue_id))?.await
    }

    /// The queue offset at a time (reads the log: pool).
    ///
    /// # Errors
    /// The store pool is full or shut down.
    pub async fn search_by_time(&self, topic: &str, queue_id: i32, timestamp_ms: i64, boundary: Boundary) -> Result<i64, BrokerError> {
        let (store, topic) = (self.store.clone(), topic.to_owned());
        self.pool
            .run(move || store.offset_by_time(&topic, queue_id, timestamp_ms, boundary))?
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::testing::{TestBroker, heartbeat_consumer};

    #[tokio::test]
    async fn offsets_persist_negative_commits_are_ignored_and_unknown_groups_refused() {
        let t = TestBroker::start(|_| {});
        let offsets = &t.broker.offsets;
        assert!(matches!(offsets.commit("G", "T", 1, 7), Err(BrokerError::GroupNotExist(_))));
        heartbeat_consumer(&t.broker, "G", "T");
        offsets.commit("G", "T", 1, 7).unwrap();
        offsets.commit("G", "T", 1, -1).unwrap();
        assert_eq!(offsets.query("G", "T", 1), Some(7));
        offsets.record_pull("G", "T", 1, 9);
        offsets.record_pull("Unknown", "T", 1, 9);
        assert_eq!((offsets.pulled("G", "T", 1), offsets.pulled("Unknown", "T", 1)), (Some(9), None));
        offsets.table().persist().unwrap();
        let reopened = OffsetTable::open(t.dir.path()).unwrap();
        assert_eq!(reopened.groups(), ["G"]);
        assert_eq!(offsets.topics_of_group("G"), ["T"]);
        t.stop().await;
    }

    #[tokio::test]
    async fn removed_topics_lose_every_group_s_offsets_and_others_keep_theirs() {
        let t = TestBroker::start(|_| {});
        let offsets = &t.broker.offsets;
        for (group, topic) in [("G", "Gone"), ("H", "Gone"), ("G", "Kept"), ("H", "Gone2")] {
            heartbeat_consumer(&t.broker, group, topic);
            offsets.commit(group, topic, 0, 3).unwrap();
            offsets.record_pull(group, topic, 0, 4);
        }
        offsets.remove_topics(&["Gone".to_owned()].into_iter().collect());
        assert_eq!((offsets.query("G", "Gone", 0), offsets.query("H", "Gone", 0)), (None, None));
        assert_eq!((offsets.pulled("G", "Gone", 0), offsets.pulled("H", "Gone", 0)), (None, None));
        assert_eq!((offsets.query("G", "Kept", 0), offsets.pulled("G", "Kept", 0)), (Some(3), Some(4)));
        // Keys are `topic@group`: a topic whose name begins with the removed one's stays.
        assert_eq!(offsets.query("H", "Gone2", 0), Some(3));
        offsets.table().persist().unwrap();
        let reopened = OffsetTable::open(t.dir.path()).unwrap();
        let mut kept: Vec<String> = reopened.committed.read().offset_table.keys().cloned().collect();
        kept.sort();
        assert_eq!(kept, ["Gone2@H", "Kept@G"], "the removal is persisted");
        t.stop().await;
    }

    #[tokio::test]
    async fn after_an_unclean_shutdown_offsets_past_the_recovered_queue_are_lowered() {
        let t = TestBroker::start(|_| {});
        heartbeat_consumer(&t.broker, "G", "Lost");
        t.send_n("Lost", 0, 4).await;
        t.wait_dispatched();
        // What a consumer committed for records an OS crash then lost: 9, past the 4 that remain.
        t.broker.offsets.commit("G", "Lost", 0, 9).unwrap();
        t.broker.offsets.commit("G", "Lost", 1, 0).unwrap();
        let config = (*t.broker.config).clone();
        let dir = t.dir.path().to_owned();
        t.broker.shutdown().await.unwrap();
        // The process died: the store's abort marker is still there.
        std::fs::write(dir.join("commitlog").join("abort"), b"1").unwrap();
        let broker = crate::Broker::open(config, crate::NameServers::Embedded(Arc::new(petrel_namesrv::NameServer::new()))).unwrap();
        assert_eq!(broker.offsets.query("G", "Lost", 0), Some(4), "lowered to the queue's max");
        assert_eq!(broker.offsets.query("G", "Lost", 1), Some(0), "offsets within the queue stay");
        assert_eq!(
            OffsetTable::open(&dir).unwrap().committed.read().offset_table["Lost@G"][&0],
            4,
            "and persisted"
        );
        // The next message takes queue offset 4, which the consumer reads next instead of skipping.
        let next = broker
            .produce
            .send(crate::services::testing::send_request("Lost", 0, "A", b"new"))
            .await
            .unwrap();
        assert_eq!(next.queue_offset, 4);
        broker.shutdown().await.unwrap();
        drop(t);
    }

    #[tokio::test]
    async fn time_lookups_run_on_the_pool() {
        let t = TestBroker::start(|_| {});
        t.send_n("TimeTopic", 0, 5).await;
        t.wait_dispatched();
        let offsets = &t.broker.offsets;
        assert_eq!(offsets.queue_bounds("TimeTopic", 0), (0, 5));
        let earliest = offsets.earliest_store_time("TimeTopic", 0).await.unwrap();
        assert!(earliest > 0);
        assert_eq!(offsets.search_by_time("TimeTopic", 0, 0, Boundary::Lower).await.unwrap(), 0);
        assert_eq!(offsets.search_by_time("TimeTopic", 0, i64::MAX, Boundary::Lower).await.unwrap(), 5);
        assert_eq!(offsets.earliest_store_time("Nope", 0).await.unwrap(), -1);
        t.stop().await;
    }
}
