//! `GroupService`: who is connected — consumer groups (their clients and subscriptions) and
//! producer groups, fed by heartbeats, UNREGISTER_CLIENT, closed connections and expiry — and
//! which consumer groups exist at all (created by a client's heartbeat, kept in
//! `config/subscriptionGroup.json`).
//!
//! Owns: group membership, the known groups, and the "ids changed" notifications membership
//! changes trigger. Must never: keep a closed connection, block while notifying (a notification
//! that does not fit a client's queue is dropped; clients also rebalance every 20 s on their
//! own), create a group for a name RocketMQ would refuse, or hold more groups, subscriptions or
//! tags than its bounds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use parking_lot::RwLock;
use petrel_protocol::LanguageCode;
use petrel_protocol::body::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData};
use serde::{Deserialize, Serialize};

use super::{BrokerError, ClientHandle, validate_group_name};
use crate::persist::{Coalesced, Job, blocking, read_if_exists, write_atomically};

/// Topics one consumer group may subscribe to.
pub const MAX_SUBSCRIPTIONS_PER_GROUP: usize = 4096;
/// Tags one subscription expression may name (`A || B || ...`).
pub const MAX_SUBSCRIPTION_TAGS: usize = 1024;

#[derive(Clone)]
pub struct ClientChannel {
    pub handle: Arc<dyn ClientHandle>,
    pub client_id: String,
    pub language: LanguageCode,
    pub version: i32,
    pub last_update: Instant,
}

pub struct ConsumerGroupInfo {
    /// connection id -> channel
    pub channels: BTreeMap<u64, ClientChannel>,
    pub subscriptions: IndexMap<String, SubscriptionData>,
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupEntry {
    group_name: String,
    #[serde(default = "yes")]
    consume_enable: bool,
}

fn yes() -> bool {
    true
}

/// RocketMQ's `subscriptionGroup.json` layout (the fields Petrel uses).
#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupFile {
    #[serde(default)]
    subscription_group_table: BTreeMap<String, GroupEntry>,
}

pub struct GroupService {
    consumers: RwLock<HashMap<String, ConsumerGroupInfo>>,
    /// producer group -> connection id -> channel
    producers: RwLock<HashMap<String, BTreeMap<u64, ClientChannel>>>,
    known: RwLock<BTreeSet<String>>,
    path: PathBuf,
    persist: Arc<Coalesced>,
    max_groups: usize,
    auto_create: bool,
}

/// Tells each channel that `group`'s membership changed.
fn notify_ids_changed(group: &str, channels: &[Arc<dyn ClientHandle>]) {
    for c in channels {
        if !c.notify_consumer_ids_changed(group) {
            tracing::debug!(group, peer = %c.peer(), "consumer ids change notification dropped");
        }
    }
}

/// Refuses a subscription set the broker will not hold.
fn check_subscriptions(data: &ConsumerData) -> Result<(), BrokerError> {
    if data.subscription_data_set.len() > MAX_SUBSCRIPTIONS_PER_GROUP {
        return Err(BrokerError::SubscriptionParseFailed(format!(
            "group {} subscribes to {} topics; at most {MAX_SUBSCRIPTIONS_PER_GROUP}",
            data.group_name,
            data.subscription_data_set.len()
        )));
    }
    if let Some(s) = data.subscription_data_set.iter().find(|s| s.tags_set.len() > MAX_SUBSCRIPTION_TAGS) {
        return Err(BrokerError::SubscriptionParseFailed(format!(
            "the subscription of {} to {} names {} tags; at most {MAX_SUBSCRIPTION_TAGS}",
            data.group_name,
            s.topic,
            s.tags_set.len()
        )));
    }
    Ok(())
}

impl GroupService {
    /// Loads the known groups; groups with committed offsets are known too.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn open(root: &std::path::Path, max_groups: usize, auto_create: bool, with_offsets: &[String]) -> std::io::Result<GroupService> {
        let path = root.join("config").join("subscriptionGroup.json");
        let file: GroupFile = match read_if_exists(&path)? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?,
            None => GroupFile::default(),
        };
        let mut known: BTreeSet<String> = file.subscription_group_table.into_keys().collect();
        known.extend(with_offsets.iter().cloned());
        Ok(GroupService {
            consumers: RwLock::new(HashMap::new()),
            producers: RwLock::new(HashMap::new()),
            known: RwLock::new(known),
            path,
            persist: Coalesced::new("subscriptionGroup.json"),
            max_groups,
            auto_create,
        })
    }

    /// The background writer and its job.
    pub fn persister(self: &Arc<Self>) -> (Arc<Coalesced>, Job) {
        let me = Arc::downgrade(self);
        let job = move || match me.upgrade() {
            Some(groups) => groups.write_file().map_err(|e| e.to_string()),
            None => Ok(()),
        };
        (self.persist.clone(), blocking(Arc::new(job)))
    }

    /// Writes the known groups now (shutdown, and the background writer).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write_file(&self) -> std::io::Result<()> {
        write_atomically(&self.path, &self.to_json())
    }

    /// The known groups as `config/subscriptionGroup.json` holds them
    /// (GET_ALL_SUBSCRIPTIONGROUP_CONFIG's answer).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        let file = GroupFile {
            subscription_group_table: self
                .known
                .read()
                .iter()
                .map(|g| {
                    let entry = GroupEntry {
                        group_name: g.clone(),
                        consume_enable: true,
                    };
                    (g.clone(), entry)
                })
                .collect(),
        };
        serde_json::to_vec(&file).unwrap_or_default()
    }

    /// A slave learns its master's groups (up to `maxGroups`); returns how many were new.
    ///
    /// # Errors
    /// The master's table does not parse.
    pub fn merge_from_master(&self, json: &[u8]) -> Result<usize, String> {
        let master: GroupFile = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        let mut known = self.known.write();
        let before = known.len();
        for group in master.subscription_group_table.into_keys() {
            if known.len() >= self.max_groups {
                break;
            }
            known.insert(group);
        }
        let added = known.len() - before;
        drop(known);
        if added > 0 {
            self.persist.request();
        }
        Ok(added)
    }

    /// Whether the consumer group exists (a client registered it, now or before a restart).
    #[must_use]
    pub fn is_known(&self, group: &str) -> bool {
        self.known.read().contains(group)
    }

    /// Checks that `group` exists, for requests that need it to (offset commits).
    ///
    /// # Errors
    /// `GroupNotExist`.
    pub fn require_known(&self, group: &str) -> Result<(), BrokerError> {
        if self.is_known(group) {
            Ok(())
        } else {
            Err(BrokerError::GroupNotExist(format!(
                "subscription group [{group}] does not exist; a consumer of the group must send a heartbeat first"
            )))
        }
    }

    /// Makes `group` known (its first heartbeat).
    fn learn(&self, group: &str) -> Result<(), BrokerError> {
        if self.is_known(group) {
            return Ok(());
        }
        if !self.auto_create {
            return Err(BrokerError::GroupNotExist(format!(
                "subscription group [{group}] does not exist and autoCreateSubscriptionGroup is false"
            )));
        }
        let mut known = self.known.write();
        if known.len() >= self.max_groups && !known.contains(group) {
            return Err(BrokerError::LimitReached(format!(
                "the broker holds {} consumer groups, its maxGroups; group [{group}] is not created",
                self.max_groups
            )));
        }
        if known.insert(group.to_owned()) {
            drop(known);
            self.persist.request();
            tracing::info!(group, "consumer group created by a heartbeat");
        }
        Ok(())
    }

    /// Registers a consumer's heartbeat; notifies the group's members when the membership or
    /// subscription set changed (not for broadcasting groups). Returns whether it changed.
    ///
    /// # Errors
    /// A bad group name, an unknown group that may not be created, a bound.
    pub fn register_consumer(&self, channel: ClientChannel, data: &ConsumerData) -> Result<bool, BrokerError> {
        validate_group_name(&data.group_name)?;
        check_subscriptions(data)?;
        self.learn(&data.group_name)?;
        let group = data.group_name.clone();
        let (changed, notify) = {
            let mut consumers = self.consumers.write();
            if !consumers.contains_key(&group) && consumers.len() >= self.max_groups {
                return Err(BrokerError::LimitReached(format!(
                    "{} consumer groups are online, the broker's maxGroups",
                    self.max_groups
                )));
            }
            let info = consumers.entry(group.clone()).or_insert_with(|| ConsumerGroupInfo {
                channels: BTreeMap::new(),
                subscriptions: IndexMap::new(),
                consume_type: data.consume_type,
                message_model: data.message_model,
                consume_from_where: data.consume_from_where,
            });
            let changed = update_group(info, channel, data);
            let notify = if changed && info.message_model != MessageModel::Broadcasting {
                info.channels.values().map(|c| c.handle.clone()).collect()
            } else {
                Vec::new()
            };
            (changed, notify)
        };
        notify_ids_changed(&group, &notify);
        Ok(changed)
    }

    /// Registers a producer's heartbeat.
    ///
    /// # Errors
    /// A bad group name, or the bound on producer groups.
    pub fn register_producer(&self, group: &str, channel: ClientChannel) -> Result<(), BrokerError> {
        validate_group_name(group)?;
        let mut producers = self.producers.write();
        if !producers.contains_key(group) && producers.len() >= self.max_groups {
            return Err(BrokerError::LimitReached(format!(
                "{} producer groups are online, the broker's maxGroups",
                self.max_groups
            )));
        }
        producers.entry(group.to_owned()).or_default().insert(channel.handle.id(), channel);
        Ok(())
    }

    /// UNREGISTER_CLIENT for one group.
    pub fn unregister(&self, client_id: &str, producer_group: Option<&str>, consumer_group: Option<&str>) {
        if let Some(g) = producer_group {
            let mut producers = self.producers.write();
            if let Some(chs) = producers.get_mut(g) {
                chs.retain(|_, c| c.client_id != client_id);
                if chs.is_empty() {
                    producers.remove(g);
                }
            }
        }
        if let Some(g) = consumer_group {
            self.remove_consumers(|group, c| group == g && c.client_id == client_id);
        }
    }

    /// Drops everything registered through connection `id` (it closed).
    pub fn connection_closed(&self, id: u64) {
        self.producers.write().retain(|_, chs| {
            chs.remove(&id);
            !chs.is_empty()
        });
        self.remove_consumers(|_, c| c.handle.id() == id);
    }

    /// Drops channels not heard from within `timeout`.
    pub fn expire(&self, timeout: Duration) {
        let now = Instant::now();
        self.producers.write().retain(|_, chs| {
            chs.retain(|_, c| now.duration_since(c.last_update) < timeout);
            !chs.is_empty()
        });
        self.remove_consumers(|_, c| now.duration_since(c.last_update) >= timeout);
    }

    fn remove_consumers(&self, mut doomed: impl FnMut(&str, &ClientChannel) -> bool) {
        let mut notify: Vec<(String, Vec<Arc<dyn ClientHandle>>)> = Vec::new();
        {
            let mut consumers = self.consumers.write();
            consumers.retain(|group, info| {
                let before = info.channels.len();
                info.channels.retain(|_, c| !doomed(group, c));
                if info.channels.len() != before && info.message_model != MessageModel::Broadcasting {
                    notify.push((group.clone(), info.channels.values().map(|c| c.handle.clone()).collect()));
                }
                !info.channels.is_empty()
            });
        }
        for (group, chs) in notify {
            notify_ids_changed(&group, &chs);
        }
    }

    /// The connections of a producer group's live producers.
    #[must_use]
    pub fn producer_handles(&self, group: &str) -> Vec<Arc<dyn ClientHandle>> {
        self.producers
            .read()
            .get(group)
            .map(|chs| chs.values().map(|c| c.handle.clone()).collect())
            .unwrap_or_default()
    }

    /// Client ids of a group's live consumers, sorted.
    #[must_use]
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        let consumers = self.consumers.read();
        let mut ids: Vec<String> = consumers
            .get(group)
            .map(|i| i.channels.values().map(|c| c.client_id.clone()).collect())
            .unwrap_or_default();
        ids.sort();
        ids.dedup();
        ids
    }

    #[must_use]
    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.consumers.read().get(group).and_then(|i| i.subscriptions.get(topic).cloned())
    }

    #[must_use]
    pub fn has_subscriptions(&self, group: &str) -> bool {
        self.consumers.read().get(group).is_some_and(|i| !i.subscriptions.is_empty())
    }

    /// Runs `f` on a group's info, if the group has live consumers.
    pub fn with_group<R>(&self, group: &str, f: impl FnOnce(&ConsumerGroupInfo) -> R) -> Option<R> {
        self.consumers.read().get(group).map(f)
    }

    /// Live (consumer, producer) channels.
    #[must_use]
    pub fn connection_count(&self) -> (usize, usize) {
        let c = self.consumers.read().values().map(|i| i.channels.len()).sum();
        let p = self.producers.read().values().map(BTreeMap::len).sum();
        (c, p)
    }

    /// Known consumer groups.
    #[must_use]
    pub fn known_count(&self) -> usize {
        self.known.read().len()
    }
}

/// Applies a heartbeat to a group; returns whether membership or subscriptions changed.
fn update_group(info: &mut ConsumerGroupInfo, channel: ClientChannel, data: &ConsumerData) -> bool {
    info.consume_type = data.consume_type;
    info.message_model = data.message_model;
    info.consume_from_where = data.consume_from_where;
    let new_channel = match info.channels.get_mut(&channel.handle.id()) {
        Some(existing) => {
            let client_changed = existing.client_id != channel.client_id;
            *existing = channel;
            client_changed
        }
        None => {
            info.channels.insert(channel.handle.id(), channel);
            true
        }
    };
    let mut sub_changed = false;
    for sub in &data.subscription_data_set {
        match info.subscriptions.get_mut(&sub.topic) {
            Some(old) if old.sub_string == sub.sub_string && old.expression_type == sub.expression_type => {
                if sub.sub_version > old.sub_version {
                    old.sub_version = sub.sub_version;
                }
            }
            _ => {
                info.subscriptions.insert(sub.topic.clone(), sub.clone());
                sub_changed = true;
            }
        }
    }
    let before = info.subscriptions.len();
    info.subscriptions
        .retain(|t, _| data.subscription_data_set.iter().any(|s| &s.topic == t));
    new_channel || sub_changed || info.subscriptions.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::testing::{FakeClient, consumer_data};

    fn channel(client: &Arc<FakeClient>, id: &str) -> ClientChannel {
        ClientChannel {
            handle: client.clone(),
            client_id: id.into(),
            language: LanguageCode::Java,
            version: 513,
            last_update: Instant::now(),
        }
    }

    #[test]
    fn membership_changes_notify_members_and_closed_connections_leave() {
        let dir = tempfile::tempdir().unwrap();
        let groups = GroupService::open(dir.path(), 16, true, &[]).unwrap();
        let (a, b) = (FakeClient::new(1), FakeClient::new(2));
        assert!(groups.register_consumer(channel(&a, "A"), &consumer_data("G", "T", "*")).unwrap());
        assert!(
            !groups.register_consumer(channel(&a, "A"), &consumer_data("G", "T", "*")).unwrap(),
            "a repeat changes nothing"
        );
        assert!(groups.register_consumer(channel(&b, "B"), &consumer_data("G", "T", "*")).unwrap());
        assert_eq!(groups.consumer_ids("G"), ["A", "B"]);
        assert_eq!(a.notifications(), 2, "told of itself joining, then of B");
        groups.connection_closed(2);
        assert_eq!(groups.consumer_ids("G"), ["A"]);
        assert_eq!(a.notifications(), 3, "told of B leaving");
        assert!(groups.is_known("G"), "the group outlives its members");
        assert_eq!(groups.subscription("G", "T").unwrap().sub_string, "*");
    }

    #[test]
    fn groups_are_validated_bounded_and_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let groups = GroupService::open(dir.path(), 2, true, &["FromOffsets".into()]).unwrap();
        let c = FakeClient::new(1);
        assert!(groups.is_known("FromOffsets"));
        let bad = groups.register_consumer(channel(&c, "A"), &consumer_data("bad group", "T", "*"));
        assert!(matches!(bad, Err(BrokerError::InvalidParameter(_))));
        groups.register_consumer(channel(&c, "A"), &consumer_data("G1", "T", "*")).unwrap();
        let full = groups.register_consumer(channel(&c, "A"), &consumer_data("G2", "T", "*"));
        assert!(matches!(full, Err(BrokerError::LimitReached(r)) if r.contains("maxGroups")));
        assert!(groups.require_known("G2").is_err());
        groups.write_file().unwrap();
        let reopened = GroupService::open(dir.path(), 2, false, &[]).unwrap();
        assert!(reopened.is_known("G1") && reopened.is_known("FromOffsets"));
        let refused = reopened.register_consumer(channel(&c, "A"), &consumer_data("G3", "T", "*"));
        assert!(
            matches!(refused, Err(BrokerError::GroupNotExist(_))),
            "autoCreateSubscriptionGroup=false"
        );
    }

    #[test]
    fn subscriptions_with_too_many_tags_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let groups = GroupService::open(dir.path(), 16, true, &[]).unwrap();
        let tags: Vec<String> = (0..=MAX_SUBSCRIPTION_TAGS).map(|i| format!("t{i}")).collect();
        let data = consumer_data("G", "T", &tags.join(" || "));
        let refused = groups.register_consumer(channel(&FakeClient::new(1), "A"), &data);
        assert!(matches!(refused, Err(BrokerError::SubscriptionParseFailed(_))));
        assert!(!groups.is_known("G"), "nothing was created");
    }
}
