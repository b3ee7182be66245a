//! The name server's tables: clusters, brokers with their addresses by id, the topics each
//! master serves, when each broker was last heard from and over which connection, and the KV
//! config.
//!
//! Owns: the tables and every change to them. Must never: keep a broker whose connection closed
//! or who went silent past the expiry (RocketMQ drops both), or let the KV config grow past
//! its bounds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use petrel_protocol::body::{BrokerData, ClusterInfo, QueueData, TopicConfigSerializeWrapper, TopicRouteData};

/// RocketMQ drops a broker not heard from for this long (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`).
pub const BROKER_EXPIRY: Duration = Duration::from_secs(120);

/// The broker id of a master (`MixAll.MASTER_ID`).
pub const MASTER_ID: i64 = 0;

/// KV entries kept at most, over all namespaces.
pub const MAX_KV_ENTRIES: usize = 65_536;
/// Bytes of KV namespaces, keys and values kept at most.
pub const MAX_KV_BYTES: usize = 16 << 20;

/// A registered broker address.
pub(crate) struct Live {
    pub(crate) last_seen: Instant,
    /// The connection that registered it, when it came over TCP.
    pub(crate) connection: Option<u64>,
    pub(crate) cluster: String,
    pub(crate) broker_name: String,
    pub(crate) broker_id: i64,
    /// Where its slaves connect (RocketMQ's HA port), as it registered it.
    pub(crate) ha_server_addr: String,
}

#[derive(Default)]
pub(crate) struct Kv {
    pub(crate) tables: BTreeMap<String, BTreeMap<String, String>>,
    entries: usize,
    bytes: usize,
}

/// A KV put that would pass a bound; the text names it.
#[derive(Debug, thiserror::Error)]
#[error("the KV config is full ({0})")]
pub(crate) struct KvFull(String);

impl Kv {
    /// Puts `namespace/key = value`; `Err` names the bound it would break.
    pub(crate) fn put(&mut self, namespace: String, key: String, value: String) -> Result<(), KvFull> {
        let old = self.tables.get(&namespace).and_then(|t| t.get(&key));
        let old_bytes = old.map_or(0, |v| namespace.len() + key.len() + v.len());
        let new_bytes = namespace.len() + key.len() + value.len();
        let entries = self.entries + usize::from(old.is_none());
        let bytes = self.bytes - old_bytes + new_bytes;
        if entries > MAX_KV_ENTRIES {
            return Err(KvFull(format!("{MAX_KV_ENTRIES} entries")));
        }
        if bytes > MAX_KV_BYTES {
            return Err(KvFull(format!("{MAX_KV_BYTES} bytes")));
        }
        self.tables.entry(namespace).or_default().insert(key, value);
        (self.entries, self.bytes) = (entries, bytes);
        Ok(())
    }

    pub(crate) fn delete(&mut self, namespace: &str, key: &str) {
        let Some(table) = self.tables.get_mut(namespace) else { return };
        if let Some(v) = table.remove(key) {
            self.entries -= 1;
            self.bytes -= namespace.len() + key.len() + v.len();
        }
        if table.is_empty() {
            self.tables.remove(namespace);
        }
    }

    pub(crate) fn get(&self, namespace: &str, key: &str) -> Option<&String> {
        self.tables.get(namespace).and_then(|t| t.get(key))
    }
}

#[derive(Default)]
pub(crate) struct Routes {
    /// cluster -> broker names
    pub(crate) clusters: BTreeMap<String, BTreeSet<String>>,
    /// broker name -> its data (cluster, addresses by id)
    pub(crate) brokers: BTreeMap<String, BrokerData>,
    /// topic -> broker name -> queue data
    pub(crate) topics: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// broker address -> registration
    pub(crate) live: HashMap<String, Live>,
    pub(crate) kv: Kv,
}

/// One registration, as the tables take it.
pub(crate) struct Registration<'a> {
    pub(crate) cluster: &'a str,
    pub(crate) broker_name: &'a str,
    pub(crate) broker_addr: &'a str,
    pub(crate) broker_id: i64,
    pub(crate) ha_server_addr: &'a str,
    pub(crate) enable_acting_master: Option<bool>,
    pub(crate) topics: Option<TopicConfigSerializeWrapper>,
    pub(crate) connection: Option<u64>,
}

impl Routes {
    pub(crate) fn register(&mut self, r: Registration<'_>) {
        self.clusters
            .entry(r.cluster.to_owned())
            .or_default()
            .insert(r.broker_name.to_owned());
        let data = self.brokers.entry(r.broker_name.to_owned()).or_insert_with(|| BrokerData {
            broker_name: r.broker_name.to_owned(),
            cluster: r.cluster.to_owned(),
            ..BrokerData::default()
        });
        r.cluster.clone_into(&mut data.cluster);
        // An address moving to another id (a slave promoted, say) leaves its old slot.
        data.broker_addrs.retain(|id, addr| *id == r.broker_id || addr != r.broker_addr);
        data.broker_addrs.insert(r.broker_id, r.broker_addr.to_owned());
        if let Some(v) = r.enable_acting_master {
            data.enable_acting_master = v;
        }
        self.live.insert(
            r.broker_addr.to_owned(),
            Live {
                last_seen: Instant::now(),
                connection: r.connection,
                cluster: r.cluster.to_owned(),
                broker_name: r.broker_name.to_owned(),
                broker_id: r.broker_id,
                ha_server_addr: r.ha_server_addr.to_owned(),
            },
        );
        if r.broker_id == MASTER_ID
            && let Some(wrapper) = r.topics
        {
            for (topic, tc) in wrapper.topic_config_table {
                self.topics.entry(topic).or_default().insert(
                    r.broker_name.to_owned(),
                    QueueData {
                        broker_name: r.broker_name.to_owned(),
                        perm: tc.perm,
                        read_queue_nums: tc.read_queue_nums,
                        topic_sys_flag: tc.topic_sys_flag,
                        write_queue_nums: tc.write_queue_nums,
                    },
                );
            }
        }
    }

    /// What a slave of `broker_name` is told when it registers: its master's address and the
    /// master's HA address, as RocketMQ's name server answers (`None` for a master, or while
    /// the set has no master).
    pub(crate) fn master_of(&self, broker_name: &str, broker_id: i64) -> Option<(String, String)> {
        if broker_id == MASTER_ID {
            return None;
        }
        let master = self.brokers.get(broker_name)?.broker_addrs.get(&MASTER_ID)?;
        let live = self.live.get(master)?;
        Some((master.clone(), live.ha_server_addr.clone()))
    }

    /// Removes one broker address; a broker name left without addresses leaves its cluster and
    /// every topic route.
    pub(crate) fn unregister(&mut self, cluster: &str, broker_name: &str, broker_addr: &str, broker_id: i64) {
        self.live.remove(broker_addr);
        let now_empty = self.brokers.get_mut(broker_name).is_some_and(|d| {
            d.broker_addrs.retain(|id, addr| !(*id == broker_id && addr == broker_addr));
            d.broker_addrs.is_empty()
        });
        if now_empty {
            self.brokers.remove(broker_name);
            if let Some(names) = self.clusters.get_mut(cluster) {
                names.remove(broker_name);
            }
            self.clusters.retain(|_, names| !names.is_empty());
            for queues in self.topics.values_mut() {
                queues.remove(broker_name);
            }
            self.topics.retain(|_, queues| !queues.is_empty());
        }
    }

    /// Unregisters the addresses `doomed` picks; returns them.
    fn unregister_where(&mut self, doomed: impl Fn(&Live) -> bool) -> Vec<String> {
        let gone: Vec<(String, String, String, i64)> = self
            .live
            .iter()
            .filter(|(_, l)| doomed(l))
            .map(|(addr, l)| (addr.clone(), l.cluster.clone(), l.broker_name.clone(), l.broker_id))
            .collect();
        for (addr, cluster, name, id) in &gone {
            self.unregister(cluster, name, addr, *id);
        }
        gone.into_iter().map(|(addr, ..)| addr).collect()
    }
}

/// The name server's state; `handle` answers one request.
#[derive(Default)]
pub struct NameServer {
    pub(crate) routes: RwLock<Routes>,
    /// Access control on writes arriving over connections; unset: none.
    pub(crate) access: std::sync::OnceLock<crate::access::NamesrvAccess>,
}

/// The remark a Java name server gives for a topic it has no route for.
#[must_use]
pub fn no_route_remark(topic: &str) -> String {
    format!(
        "No topic route info in name server for the topic: {topic}\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
    )
}

impl NameServer {
    /// A name server with no routes and no access control.
    #[must_use]
    pub fn new() -> NameServer {
        NameServer::default()
    }

    /// Turns on access control for requests arriving over connections (once; later calls are
    /// ignored).
    pub fn set_access(&self, access: crate::access::NamesrvAccess) {
        let _ = self.access.set(access);
    }

    /// Drops brokers silent for longer than `expiry`; returns their addresses.
    pub fn expire_brokers(&self, expiry: Duration) -> Vec<String> {
        self.routes.write().unregister_where(|l| l.last_seen.elapsed() > expiry)
    }

    /// Drops the brokers that registered over connection `id` (it closed): RocketMQ's name
    /// server does the same when a broker's channel goes away.
    pub fn connection_closed(&self, id: u64) -> Vec<String> {
        let mut routes = self.routes.write();
        if !routes.live.values().any(|l| l.connection == Some(id)) {
            return Vec::new();
        }
        routes.unregister_where(|l| l.connection == Some(id))
    }

    /// The route of `topic`, as GET_ROUTEINFO_BY_TOPIC returns it.
    #[must_use]
    pub fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        let r = self.routes.read();
        let queues = r.topics.get(topic)?;
        let broker_datas: Vec<BrokerData> = queues.keys().filter_map(|name| r.brokers.get(name).cloned()).collect();
        if broker_datas.is_empty() {
            return None;
        }
        let order_topic_conf = r.kv.get("ORDER_TOPIC_CONFIG", topic).cloned();
        Some(TopicRouteData {
            broker_datas,
            filter_server_table: BTreeMap::new(),
            order_topic_conf,
            queue_datas: queues.values().cloned().collect(),
        })
    }

    /// The cluster table, as GET_BROKER_CLUSTER_INFO returns it.
    #[must_use]
    pub fn cluster(&self) -> ClusterInfo {
        let r = self.routes.read();
        ClusterInfo {
            broker_addr_table: r.brokers.clone(),
            cluster_addr_table: r.clusters.iter().map(|(c, n)| (c.clone(), n.iter().cloned().collect())).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_is_bounded_in_entries_and_bytes_and_deletes_give_room_back() {
        let mut kv = Kv::default();
        for i in 0..MAX_KV_ENTRIES {
            kv.put("ns".into(), i.to_string(), "v".into()).unwrap();
        }
        let full = kv.put("ns".into(), "one more".into(), "v".into()).unwrap_err();
        assert!(full.to_string().contains("entries"), "{full}");
        kv.put("ns".into(), "0".into(), "replaced".into()).unwrap();
        kv.delete("ns", "1");
        kv.put("ns".into(), "one more".into(), "v".into()).unwrap();
        let huge = kv.put("ns".into(), "2".into(), "x".repeat(MAX_KV_BYTES)).unwrap_err();
        assert!(huge.to_string().contains("bytes"), "{huge}");
        assert_eq!(kv.get("ns", "2").map(String::as_str), Some("v"), "a refused put changes nothing");
    }
}
