//! `GroupService`: who is connected — consumer groups (their clients and subscriptions) and
//! producer groups, fed by heartbeats, UNREGISTER_CLIENT, closed connections and expiry — and
//! which consumer groups exist at all, with their settings (created by a client's heartbeat with
//! RocketMQ's defaults or by `mqadmin updateSubGroup`, kept in `config/subscriptionGroup.json`).
//!
//! Owns: group membership, the known groups, and the "ids changed" notifications membership
//! changes trigger. Must never: keep a closed connection, block while notifying (a notification
//! that does not fit a client's queue is dropped; clients also rebalance every 20 s on their
//! own), create a group for a name RocketMQ would refuse, or hold more groups, subscriptions or
//! tags than its bounds.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use parking_lot::RwLock;
use petrel_protocol::LanguageCode;
use petrel_protocol::model::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData};
use serde::{Deserialize, Serialize};

use super::{BrokerError, ClientHandle, validate_group_name};
use crate::persist::{Coalesced, Job, blocking, read_if_exists, write_atomically};

/// Topics one consumer group may subscribe to.
pub const MAX_SUBSCRIPTIONS_PER_GROUP: usize = 4096;
/// Tags one subscription expression may name (`A || B || ...`).
pub const MAX_SUBSCRIPTION_TAGS: usize = 1024;

/// One client connection of a group, as its last heartbeat described it.
#[derive(Clone)]
pub struct ClientChannel {
    /// The connection, to notify the client and to tell connections apart.
    pub handle: Arc<dyn ClientHandle>,
    /// The client's id (`clientID` of its heartbeat).
    pub client_id: String,
    /// The client library's language.
    pub language: LanguageCode,
    /// The client library's RocketMQ version code.
    pub version: i32,
    /// When the last heartbeat arrived; channels silent for too long expire.
    pub last_update: Instant,
}

/// A consumer group's live members and what they subscribe to, from their latest heartbeats.
pub struct ConsumerGroupInfo {
    /// connection id -> channel
    pub channels: BTreeMap<u64, ClientChannel>,
    /// topic -> the group's subscription to it
    pub subscriptions: IndexMap<String, SubscriptionData>,
    /// Pull, push or POP consumption, as the latest heartbeat said.
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting, as the latest heartbeat said.
    pub message_model: MessageModel,
    /// Where a queue with no committed offset starts, as the latest heartbeat said.
    pub consume_from_where: ConsumeFromWhere,
}

/// A consumer group's settings (RocketMQ's `SubscriptionGroupConfig`): created with RocketMQ's
/// defaults by a client's first heartbeat, or set by `mqadmin updateSubGroup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupConfig {
    /// The consumer group the settings belong to.
    pub group_name: String,
    /// `false`: the group's pulls get NO_PERMISSION.
    #[serde(default = "yes")]
    pub consume_enable: bool,
    /// RocketMQ's `consumeFromMinEnable`; kept and shown, not acted on.
    #[serde(default = "yes")]
    pub consume_from_min_enable: bool,
    /// `false`: pulls of the group's broadcasting consumers get NO_PERMISSION.
    #[serde(default = "yes")]
    pub consume_broadcast_enable: bool,
    /// Whether the group consumes orderly (`consumeMessageOrderly`); kept and shown, not acted on.
    #[serde(default)]
    pub consume_message_orderly: bool,
    /// Queues of `%RETRY%<group>` when the broker creates it.
    #[serde(default = "one")]
    pub retry_queue_nums: i32,
    /// Retries before the dead-letter queue, for sends back that do not say (newer clients do).
    #[serde(default = "default_retry_max_times")]
    pub retry_max_times: i32,
    /// The broker id the group reads from, 0 for the master (`brokerId`); kept and shown, not
    /// acted on.
    #[serde(default)]
    pub broker_id: i64,
    /// The broker id to send a lagging group's pulls to (`whichBrokerWhenConsumeSlowly`); kept and
    /// shown, not acted on.
    #[serde(default = "one_i64")]
    pub which_broker_when_consume_slowly: i64,
    /// `false`: membership changes are not pushed to the group's clients (they rebalance on
    /// their own every 20 s).
    #[serde(default = "yes")]
    pub notify_consumer_ids_changed_enable: bool,
    /// RocketMQ's `groupSysFlag` bits; kept and shown, not acted on.
    #[serde(default)]
    pub group_sys_flag: i32,
    /// Minutes a consumer may spend on one message (`consumeTimeoutMinute`); kept and shown, not
    /// acted on.
    #[serde(default = "default_consume_timeout_minute")]
    pub consume_timeout_minute: i32,
    /// The fields Petrel keeps and shows without acting on them (`groupRetryPolicy`,
    /// `subscriptionDataSet`, `attributes`, and any a later RocketMQ adds).
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// Retry topics' queues at most (`retryQueueNums`).
pub const MAX_RETRY_QUEUE_NUMS: i32 = 64;

impl GroupConfig {
    /// RocketMQ's defaults for a group.
    #[must_use]
    pub fn new(group: &str) -> GroupConfig {
        GroupConfig {
            group_name: group.to_owned(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            consume_message_orderly: false,
            retry_queue_nums: 1,
            retry_max_times: default_retry_max_times(),
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            group_sys_flag: 0,
            consume_timeout_minute: default_consume_timeout_minute(),
            other: serde_json::Map::new(),
        }
    }

    /// Checks the settings: the name, the retry queues and the retry count.
    ///
    /// # Errors
    /// `InvalidParameter` naming the setting.
    pub fn validate(&self) -> Result<(), BrokerError> {
        validate_group_name(&self.group_name)?;
        if !(1..=MAX_RETRY_QUEUE_NUMS).contains(&self.retry_queue_nums) {
            return Err(BrokerError::InvalidParameter(format!(
                "retryQueueNums {} of group [{}] is outside 1..={MAX_RETRY_QUEUE_NUMS}",
                self.retry_queue_nums, self.group_name
            )));
        }
        if self.retry_max_times < -1 {
            return Err(BrokerError::InvalidParameter(format!(
                "retryMaxTimes {} of group [{}] is below -1",
                self.retry_max_times, self.group_name
            )));
        }
        Ok(())
    }
}

fn yes() -> bool {
    true
}

fn one() -> i32 {
    1
}

fn one_i64() -> i64 {
    1
}

fn default_retry_max_times() -> i32 {
    16
}

fn default_consume_timeout_minute() -> i32 {
    15
}

/// RocketMQ's `subscriptionGroup.json` layout.
#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupFile {
    #[serde(default)]
    subscription_group_table: BTreeMap<String, GroupConfig>,
}

/// Consumer and producer group membership, and the known consumer groups with their settings.
pub struct GroupService {
    consumers: RwLock<HashMap<String, ConsumerGroupInfo>>,
    /// producer group -> connection id -> channel
    producers: RwLock<HashMap<String, BTreeMap<u64, ClientChannel>>>,
    /// Every group that exists, with its settings.
    known: RwLock<BTreeMap<String, GroupConfig>>,
    path: PathBuf,
    persist: Arc<Coalesced>,
    max_groups: usize,
    auto_create: bool,
    /// Groups each client's heartbeats created (`maxGroupsCreatedPerClient`).
    created: crate::quota::Allowance,
    /// Light message queues are on: every `%LMQ%` group exists with RocketMQ's defaults, and
    /// none is stored (there may be one per device).
    lmq: bool,
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
        let mut known = file.subscription_group_table;
        for group in with_offsets {
            known.entry(group.clone()).or_insert_with(|| GroupConfig::new(group));
        }
        Ok(GroupService {
            consumers: RwLock::new(HashMap::new()),
            producers: RwLock::new(HashMap::new()),
            known: RwLock::new(known),
            path,
            persist: Coalesced::new("subscriptionGroup.json"),
            max_groups,
            auto_create,
            created: crate::quota::Allowance::new("consumer groups", usize::MAX),
            lmq: false,
        })
    }

    /// Makes every `%LMQ%` group exist, unstored (`enableLmq`).
    #[must_use]
    pub fn with_lmq(mut self, lmq: bool) -> GroupService {
        self.lmq = lmq;
        self
    }

    fn is_light(&self, group: &str) -> bool {
        self.lmq && petrel_protocol::lmq::is_lmq(group)
    }

    /// Bounds the groups one client's heartbeats may create.
    #[must_use]
    pub fn with_created_per_client(mut self, per_client: usize) -> GroupService {
        self.created = crate::quota::Allowance::new("consumer groups", per_client);
        self
    }

    /// The background writer and its job.
    pub fn persister(self: &Arc<Self>) -> (Arc<Coalesced>, Job) {
        let me = Arc::downgrade(self);
        let job = move || match me.upgrade() {
            Some(groups) => groups.write_file().map_err(BrokerError::io("writing the subscription groups")),
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
            subscription_group_table: self.known.read().clone(),
        };
        serde_json::to_vec(&file).unwrap_or_default()
    }

    /// A slave takes its master's groups and their settings (new ones up to `maxGroups`);
    /// returns how many were new or changed.
    ///
    /// # Errors
    /// The master's table does not parse.
    pub fn merge_from_master(&self, json: &[u8]) -> Result<usize, BrokerError> {
        let master: GroupFile =
            petrel_protocol::model::from_json(json).map_err(BrokerError::corrupt("the master's subscription groups"))?;
        let mut known = self.known.write();
        let mut changed = 0;
        for (group, config) in master.subscription_group_table {
            if known.get(&group) == Some(&config) || (!known.contains_key(&group) && known.len() >= self.max_groups) {
                continue;
            }
            known.insert(group, config);
            changed += 1;
        }
        drop(known);
        if changed > 0 {
            self.persist.request();
        }
        Ok(changed)
    }

    /// A group's settings, RocketMQ's defaults for a group that does not exist.
    #[must_use]
    pub fn config(&self, group: &str) -> GroupConfig {
        self.known.read().get(group).cloned().unwrap_or_else(|| GroupConfig::new(group))
    }

    /// A group's settings, if the group exists (GET_SUBSCRIPTIONGROUP_CONFIG).
    #[must_use]
    pub fn find_config(&self, group: &str) -> Option<GroupConfig> {
        if self.is_light(group) {
            return Some(GroupConfig::new(group));
        }
        self.known.read().get(group).cloned()
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: creates the group or replaces its settings; returns
    /// whether it was created.
    ///
    /// # Errors
    /// A bad name or setting, or `maxGroups`.
    pub fn upsert_config(&self, config: GroupConfig) -> Result<bool, BrokerError> {
        config.validate()?;
        let mut known = self.known.write();
        let created = !known.contains_key(&config.group_name);
        if created && known.len() >= self.max_groups {
            return Err(BrokerError::LimitReached(format!(
                "the broker holds {} consumer groups, its maxGroups; group [{}] is not created",
                self.max_groups, config.group_name
            )));
        }
        tracing::info!(group = %config.group_name, created, "consumer group settings updated");
        known.insert(config.group_name.clone(), config);
        drop(known);
        self.persist.request();
        Ok(created)
    }

    /// DELETE_SUBSCRIPTIONGROUP: forgets the group's settings; returns whether it existed. Its
    /// live consumers stay registered (their next heartbeat creates it again, as on RocketMQ).
    pub fn delete(&self, group: &str) -> bool {
        let existed = self.known.write().remove(group).is_some();
        if existed {
            self.persist.request();
            tracing::info!(group, "consumer group deleted");
        }
        existed
    }

    /// Refuses a pull the group's settings forbid: consumption turned off, or a broadcasting
    /// consumer of a group that may not broadcast (RocketMQ's NO_PERMISSION remarks).
    ///
    /// # Errors
    /// `NoPermission`.
    pub fn check_consume(&self, group: &str) -> Result<(), BrokerError> {
        let (enabled, broadcast) = match self.known.read().get(group) {
            Some(c) => (c.consume_enable, c.consume_broadcast_enable),
            None => return Ok(()),
        };
        if !enabled {
            return Err(BrokerError::NoPermission(format!("subscription group no permission, {group}")));
        }
        if !broadcast && self.with_group(group, |i| i.message_model == MessageModel::Broadcasting) == Some(true) {
            return Err(BrokerError::NoPermission(format!(
                "the consumer group[{group}] can not consume by broadcast way"
            )));
        }
        Ok(())
    }

    /// Whether the consumer group exists (a client registered it, now or before a restart).
    #[must_use]
    pub fn is_known(&self, group: &str) -> bool {
        self.is_light(group) || self.known.read().contains_key(group)
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

    /// Makes `group` known (its first heartbeat, from `client`).
    fn learn(&self, group: &str, client: std::net::IpAddr) -> Result<(), BrokerError> {
        if self.is_known(group) {
            return Ok(());
        }
        if !self.auto_create {
            return Err(BrokerError::GroupNotExist(format!(
                "subscription group [{group}] does not exist and autoCreateSubscriptionGroup is false"
            )));
        }
        let mut known = self.known.write();
        if known.contains_key(group) {
            return Ok(());
        }
        if known.len() >= self.max_groups {
            return Err(BrokerError::LimitReached(format!(
                "the broker holds {} consumer groups, its maxGroups; group [{group}] is not created",
                self.max_groups
            )));
        }
        self.created.spend(Some(client))?;
        known.insert(group.to_owned(), GroupConfig::new(group));
        drop(known);
        self.persist.request();
        tracing::info!(group, "consumer group created by a heartbeat");
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
        self.learn(&data.group_name, channel.handle.peer().ip())?;
        let group = data.group_name.clone();
        let notifies = self.notifies(&group);
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
            let notify = if changed && info.message_model != MessageModel::Broadcasting && notifies {
                info.channels.values().map(|c| c.handle.clone()).collect()
            } else {
                Vec::new()
            };
            (changed, notify)
        };
        notify_ids_changed(&group, &notify);
        Ok(changed)
    }

    /// Whether the group's clients are told of membership changes (`notifyConsumerIdsChangedEnable`).
    fn notifies(&self, group: &str) -> bool {
        self.known.read().get(group).is_none_or(|c| c.notify_consumer_ids_changed_enable)
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
            if self.notifies(&group) {
                notify_ids_changed(&group, &chs);
            }
        }
    }

    /// A live producer's connection by its client id (the `REPLY_TO_CLIENT` of a request).
    #[must_use]
    pub fn producer_by_client_id(&self, client_id: &str) -> Option<Arc<dyn ClientHandle>> {
        let producers = self.producers.read();
        producers
            .values()
            .flat_map(BTreeMap::values)
            .find(|c| c.client_id == client_id)
            .map(|c| c.handle.clone())
    }

    /// A live consumer of `group` by its client id: what an admin's question for it goes to.
    #[must_use]
    pub fn consumer_by_client_id(&self, group: &str, client_id: &str) -> Option<Arc<dyn ClientHandle>> {
        let consumers = self.consumers.read();
        let info = consumers.get(group)?;
        info.channels.values().find(|c| c.client_id == client_id).map(|c| c.handle.clone())
    }

    /// The connections of a producer group's live producers.
    #[must_use]
    pub fn producer_channels(&self, group: &str) -> Vec<ClientChannel> {
        self.producers
            .read()
            .get(group)
            .map(|chs| chs.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The handles of a producer group's clients, to ask one of them something.
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

    /// The group's live subscription to `topic`, if one of its consumers subscribes to it.
    #[must_use]
    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.consumers.read().get(group).and_then(|i| i.subscriptions.get(topic).cloned())
    }

    /// Whether the group has live consumers subscribing to anything.
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

    /// Live channels counted as RocketMQ's connection metrics group them: producers by
    /// (language, version, protocol), consumers by (group, language, version, consume type,
    /// protocol).
    #[must_use]
    pub fn census(&self) -> Census {
        let mut census = Census::default();
        for channels in self.producers.read().values() {
            for c in channels.values() {
                *census.producers.entry((c.language, c.version, c.handle.protocol())).or_default() += 1;
            }
        }
        for (group, info) in self.consumers.read().iter() {
            for c in info.channels.values() {
                let key = (group.clone(), c.language, c.version, info.consume_type, c.handle.protocol());
                *census.consumers.entry(key).or_default() += 1;
            }
        }
        census
    }

    /// Groups with live consumers, each with the topics it subscribes to.
    #[must_use]
    pub fn subscribed(&self) -> Vec<(String, Vec<String>)> {
        self.consumers
            .read()
            .iter()
            .map(|(group, info)| (group.clone(), info.subscriptions.keys().cloned().collect()))
            .collect()
    }
}

/// What [`GroupService::census`] counts.
#[derive(Debug, Default)]
pub struct Census {
    /// (language, version code, protocol) -> producer channels.
    pub producers: HashMap<(LanguageCode, i32, &'static str), usize>,
    /// (group, language, version code, consume type, protocol) -> consumer channels.
    pub consumers: HashMap<(String, LanguageCode, i32, ConsumeType, &'static str), usize>,
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
        groups.register_producer("PG", channel(&b, "B")).unwrap();
        assert_eq!(
            groups.producer_by_client_id("B").map(|h| h.id()),
            Some(2),
            "a requester is found by its client id"
        );
        assert!(groups.producer_by_client_id("A").is_none(), "A is a consumer only");
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
    fn group_settings_are_set_kept_copied_and_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let groups = GroupService::open(dir.path(), 4, false, &[]).unwrap();
        let mut config = GroupConfig::new("Admin");
        config.retry_max_times = 3;
        config.retry_queue_nums = 2;
        config.consume_broadcast_enable = false;
        config.other.insert("attributes".into(), serde_json::json!({"k": "v"}));
        assert!(groups.upsert_config(config.clone()).unwrap(), "created");
        assert!(!groups.upsert_config(config.clone()).unwrap(), "then updated");
        assert_eq!(groups.config("Admin"), config);
        assert_eq!(groups.config("Nobody").retry_max_times, 16, "RocketMQ's defaults");
        assert!(groups.find_config("Nobody").is_none());
        // An admin-created group takes heartbeats with autoCreateSubscriptionGroup=false.
        let c = FakeClient::new(1);
        groups
            .register_consumer(channel(&c, "A"), &consumer_data("Admin", "T", "*"))
            .unwrap();
        assert!(groups.check_consume("Admin").is_ok(), "clustering is allowed");
        let mut broadcast = consumer_data("Admin", "T", "*");
        broadcast.message_model = MessageModel::Broadcasting;
        groups.register_consumer(channel(&c, "A"), &broadcast).unwrap();
        let refused = groups.check_consume("Admin");
        assert!(matches!(refused, Err(BrokerError::NoPermission(r)) if r.contains("can not consume by broadcast way")));
        config.consume_enable = false;
        groups.upsert_config(config.clone()).unwrap();
        let off = groups.check_consume("Admin");
        assert!(matches!(off, Err(BrokerError::NoPermission(r)) if r.contains("subscription group no permission")));
        // Bad settings and the bound.
        let mut bad = GroupConfig::new("Bad");
        bad.retry_queue_nums = 0;
        assert!(matches!(groups.upsert_config(bad), Err(BrokerError::InvalidParameter(_))));
        assert!(matches!(
            groups.upsert_config(GroupConfig::new("bad name")),
            Err(BrokerError::InvalidParameter(_))
        ));
        for g in ["G2", "G3", "G4"] {
            groups.upsert_config(GroupConfig::new(g)).unwrap();
        }
        assert!(matches!(
            groups.upsert_config(GroupConfig::new("G5")),
            Err(BrokerError::LimitReached(_))
        ));
        // Persisted with the fields Petrel does not use, and copied by a slave.
        groups.write_file().unwrap();
        let reopened = GroupService::open(dir.path(), 4, false, &[]).unwrap();
        assert_eq!(reopened.config("Admin"), config);
        let slave_dir = tempfile::tempdir().unwrap();
        let slave = GroupService::open(slave_dir.path(), 16, true, &[]).unwrap();
        assert_eq!(slave.merge_from_master(&groups.to_json()).unwrap(), 4);
        assert_eq!(slave.config("Admin"), config);
        assert_eq!(slave.merge_from_master(&groups.to_json()).unwrap(), 0, "nothing new");
        assert!(groups.delete("Admin") && !groups.delete("Admin"));
        assert!(!groups.is_known("Admin"));
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
