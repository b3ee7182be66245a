//! Who is connected: consumer groups (their channels and subscriptions) and producer groups,
//! fed by HEART_BEAT, UNREGISTER_CLIENT, connection close and expiry.
//!
//! Owns: group membership and the NOTIFY_CONSUMER_IDS_CHANGED pushes it triggers. Must never:
//! keep a closed connection (its outbound queue would never drain), or block while notifying —
//! a notification that does not fit a client's queue is dropped, as the client also rebalances
//! every 20 s on its own.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use parking_lot::RwLock;
use petrel_protocol::body::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData};
use petrel_protocol::{LanguageCode, RemotingCommand, request_code};

use crate::server::Connection;

#[derive(Clone)]
pub struct ClientChannel {
    pub conn: Arc<Connection>,
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

#[derive(Default)]
pub struct ClientManager {
    consumers: RwLock<HashMap<String, ConsumerGroupInfo>>,
    /// producer group -> connection id -> channel
    producers: RwLock<HashMap<String, BTreeMap<u64, ClientChannel>>>,
}

static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);

/// Sends NOTIFY_CONSUMER_IDS_CHANGED for `group` to each channel (oneway).
fn notify_ids_changed(group: &str, channels: &[Arc<Connection>]) {
    for conn in channels {
        let mut cmd = RemotingCommand::request(
            request_code::NOTIFY_CONSUMER_IDS_CHANGED,
            NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed),
        );
        cmd.put_ext("consumerGroup", group);
        cmd.mark_oneway();
        if !conn.push(cmd) {
            tracing::debug!(group, peer = %conn.peer, "consumer ids change notification dropped");
        }
    }
}

impl ClientManager {
    /// Registers a consumer's heartbeat; notifies the group's members when the membership or
    /// subscription set changed (not for broadcasting groups). Returns whether it changed.
    pub fn register_consumer(&self, channel: ClientChannel, data: &ConsumerData) -> bool {
        let group = data.group_name.clone();
        let (changed, notify) = {
            let mut consumers = self.consumers.write();
            let info = consumers.entry(group.clone()).or_insert_with(|| ConsumerGroupInfo {
                channels: BTreeMap::new(),
                subscriptions: IndexMap::new(),
                consume_type: data.consume_type,
                message_model: data.message_model,
                consume_from_where: data.consume_from_where,
            });
            info.consume_type = data.consume_type;
            info.message_model = data.message_model;
            info.consume_from_where = data.consume_from_where;
            let new_channel = match info.channels.get_mut(&channel.conn.id) {
                Some(existing) => {
                    let client_changed = existing.client_id != channel.client_id;
                    *existing = channel.clone();
                    client_changed
                }
                None => {
                    info.channels.insert(channel.conn.id, channel.clone());
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
            sub_changed |= info.subscriptions.len() != before;
            let changed = new_channel || sub_changed;
            let notify: Vec<Arc<Connection>> = if changed && info.message_model != MessageModel::Broadcasting {
                info.channels.values().map(|c| c.conn.clone()).collect()
            } else {
                Vec::new()
            };
            (changed, notify)
        };
        notify_ids_changed(&group, &notify);
        changed
    }

    pub fn register_producer(&self, group: &str, channel: ClientChannel) {
        self.producers
            .write()
            .entry(group.to_owned())
            .or_default()
            .insert(channel.conn.id, channel);
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

    /// Drops everything registered through `conn` (it closed).
    pub fn connection_closed(&self, conn: &Connection) {
        self.producers.write().retain(|_, chs| {
            chs.remove(&conn.id);
            !chs.is_empty()
        });
        self.remove_consumers(|_, c| c.conn.id == conn.id);
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
        let mut notify: Vec<(String, Vec<Arc<Connection>>)> = Vec::new();
        {
            let mut consumers = self.consumers.write();
            consumers.retain(|group, info| {
                let before = info.channels.len();
                info.channels.retain(|_, c| !doomed(group, c));
                if info.channels.len() != before && info.message_model != MessageModel::Broadcasting {
                    notify.push((group.clone(), info.channels.values().map(|c| c.conn.clone()).collect()));
                }
                !info.channels.is_empty()
            });
        }
        for (group, chs) in notify {
            notify_ids_changed(&group, &chs);
        }
    }

    /// Client ids of a group's live consumers, sorted.
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

    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.consumers.read().get(group).and_then(|i| i.subscriptions.get(topic).cloned())
    }

    pub fn has_subscriptions(&self, group: &str) -> bool {
        self.consumers.read().get(group).is_some_and(|i| !i.subscriptions.is_empty())
    }

    /// Runs `f` on a group's info, if the group has live consumers.
    pub fn with_group<R>(&self, group: &str, f: impl FnOnce(&ConsumerGroupInfo) -> R) -> Option<R> {
        self.consumers.read().get(group).map(f)
    }

    pub fn connection_count(&self) -> (usize, usize) {
        let c = self.consumers.read().values().map(|i| i.channels.len()).sum();
        let p = self.producers.read().values().map(BTreeMap::len).sum();
        (c, p)
    }
}
