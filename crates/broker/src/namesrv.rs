//! The name server: which brokers exist, in which clusters, at which addresses, and which
//! topics each master serves — fed by REGISTER_BROKER, read by GET_ROUTEINFO_BY_TOPIC and
//! GET_BROKER_CLUSTER_INFO.
//!
//! Owns: the route table and KV config, and the answer to every name-server request code. Must
//! never: answer with a shape the Go client cannot parse (`brokerAddrs` always present) or a
//! remark that differs from Java's where clients or operators read it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use petrel_protocol::body::{
    BrokerData, ClusterInfo, KvTable, QueueData, RegisterBrokerBody, TopicList, TopicRouteData, from_json, register_body_crc32, to_json,
};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{
    CommandHeader, DeleteTopicFromNamesrvRequestHeader, GetKvConfigRequestHeader, GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader, PutKvConfigRequestHeader, RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader,
};
use petrel_protocol::{ExtFields, RemotingCommand};

use crate::server::{answer, error};

/// RocketMQ drops a broker not heard from for this long (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`).
pub const BROKER_EXPIRY: Duration = Duration::from_secs(120);

/// The broker id of a master (`MixAll.MASTER_ID`).
pub const MASTER_ID: i64 = 0;

#[derive(Default)]
struct Routes {
    /// cluster -> broker names
    clusters: BTreeMap<String, BTreeSet<String>>,
    /// broker name -> its data (cluster, addresses by id)
    brokers: BTreeMap<String, BrokerData>,
    /// topic -> broker name -> queue data
    topics: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// broker address -> last registration
    live: HashMap<String, Instant>,
    /// namespace -> key -> value
    kv: BTreeMap<String, BTreeMap<String, String>>,
}

/// The name server's state; `handle` answers one request.
#[derive(Default)]
pub struct NameServer {
    routes: RwLock<Routes>,
}

/// The remark a Java name server gives for a topic it has no route for.
pub fn no_route_remark(topic: &str) -> String {
    format!(
        "No topic route info in name server for the topic: {topic}\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
    )
}

impl NameServer {
    pub fn new() -> NameServer {
        NameServer::default()
    }

    /// Answers `request`; `None` for a oneway request.
    pub fn handle(&self, request: &RemotingCommand) -> Option<RemotingCommand> {
        let response = match request.code {
            rc::REGISTER_BROKER => self.register_broker(request),
            rc::UNREGISTER_BROKER => self.unregister_broker(request),
            rc::GET_ROUTEINFO_BY_TOPIC => self.route(request),
            rc::GET_BROKER_CLUSTER_INFO => self.cluster_info(request),
            rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => self.topic_list(request, None),
            rc::GET_TOPICS_BY_CLUSTER => match GetTopicsByClusterRequestHeader::from_command(request) {
                Ok(h) => self.topic_list(request, Some(&h.cluster)),
                Err(e) => error(request, resp::SYSTEM_ERROR, e.to_string()),
            },
            rc::DELETE_TOPIC_IN_NAMESRV => self.delete_topic(request),
            rc::PUT_KV_CONFIG | rc::GET_KV_CONFIG | rc::DELETE_KV_CONFIG | rc::GET_KVLIST_BY_NAMESPACE => self.kv(request),
            code => error(
                request,
                resp::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            ),
        };
        (!request.is_oneway()).then_some(response)
    }

    fn register_broker(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match RegisterBrokerRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        if let Some(crc) = h.body_crc32.filter(|c| *c != 0)
            && crc != register_body_crc32(&request.body)
        {
            return error(request, resp::SYSTEM_ERROR, "crc32 not match");
        }
        if h.compressed == Some(true) {
            return error(
                request,
                resp::SYSTEM_ERROR,
                "compressed REGISTER_BROKER bodies are not supported; set compressedRegister=false",
            );
        }
        let body: Option<RegisterBrokerBody> = if request.body.is_empty() {
            None
        } else {
            match from_json(&request.body) {
                Ok(b) => Some(b),
                Err(e) => return error(request, resp::SYSTEM_ERROR, format!("bad REGISTER_BROKER body: {e}")),
            }
        };
        let mut r = self.routes.write();
        r.clusters.entry(h.cluster_name.clone()).or_default().insert(h.broker_name.clone());
        let data = r.brokers.entry(h.broker_name.clone()).or_insert_with(|| BrokerData {
            broker_name: h.broker_name.clone(),
            cluster: h.cluster_name.clone(),
            ..BrokerData::default()
        });
        data.cluster = h.cluster_name.clone();
        // An address moving to another id (a slave promoted, say) leaves its old slot.
        data.broker_addrs.retain(|id, addr| *id == h.broker_id || *addr != h.broker_addr);
        data.broker_addrs.insert(h.broker_id, h.broker_addr.clone());
        if let Some(v) = h.enable_acting_master {
            data.enable_acting_master = v;
        }
        r.live.insert(h.broker_addr.clone(), Instant::now());
        if h.broker_id == MASTER_ID
            && let Some(body) = body
        {
            for (topic, tc) in body.topic_config_serialize_wrapper.topic_config_table {
                r.topics.entry(topic).or_default().insert(
                    h.broker_name.clone(),
                    QueueData {
                        broker_name: h.broker_name.clone(),
                        perm: tc.perm,
                        read_queue_nums: tc.read_queue_nums,
                        topic_sys_flag: tc.topic_sys_flag,
                        write_queue_nums: tc.write_queue_nums,
                    },
                );
            }
        }
        // A lone master: no HA server and no master address to report, so an empty header.
        answer(request, resp::SUCCESS).with_ext_fields(ExtFields::new())
    }

    fn unregister_broker(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match UnregisterBrokerRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        let mut r = self.routes.write();
        r.live.remove(&h.broker_addr);
        let now_empty = r.brokers.get_mut(&h.broker_name).is_some_and(|d| {
            d.broker_addrs.retain(|id, addr| !(*id == h.broker_id && *addr == h.broker_addr));
            d.broker_addrs.is_empty()
        });
        if now_empty {
            r.brokers.remove(&h.broker_name);
            if let Some(names) = r.clusters.get_mut(&h.cluster_name) {
                names.remove(&h.broker_name);
            }
            r.clusters.retain(|_, names| !names.is_empty());
            for queues in r.topics.values_mut() {
                queues.remove(&h.broker_name);
            }
            r.topics.retain(|_, queues| !queues.is_empty());
        }
        answer(request, resp::SUCCESS)
    }

    /// Drops brokers silent for longer than `expiry`; returns their addresses.
    pub fn expire_brokers(&self, expiry: Duration) -> Vec<String> {
        let mut r = self.routes.write();
        let dead: Vec<String> = r
            .live
            .iter()
            .filter(|(_, t)| t.elapsed() > expiry)
            .map(|(a, _)| a.clone())
            .collect();
        for addr in &dead {
            r.live.remove(addr);
            for data in r.brokers.values_mut() {
                data.broker_addrs.retain(|_, a| a != addr);
            }
        }
        let gone: Vec<String> = r
            .brokers
            .iter()
            .filter(|(_, d)| d.broker_addrs.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        for name in &gone {
            r.brokers.remove(name);
            for names in r.clusters.values_mut() {
                names.remove(name);
            }
            for queues in r.topics.values_mut() {
                queues.remove(name);
            }
        }
        r.clusters.retain(|_, n| !n.is_empty());
        r.topics.retain(|_, q| !q.is_empty());
        dead
    }

    /// The route of `topic`, as GET_ROUTEINFO_BY_TOPIC returns it.
    pub fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        let r = self.routes.read();
        let queues = r.topics.get(topic)?;
        let broker_datas: Vec<BrokerData> = queues.keys().filter_map(|name| r.brokers.get(name).cloned()).collect();
        if broker_datas.is_empty() {
            return None;
        }
        let order_topic_conf = r.kv.get("ORDER_TOPIC_CONFIG").and_then(|ns| ns.get(topic)).cloned();
        Some(TopicRouteData {
            broker_datas,
            filter_server_table: BTreeMap::new(),
            order_topic_conf,
            queue_datas: queues.values().cloned().collect(),
        })
    }

    fn route(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match GetRouteInfoRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        match self.topic_route(&h.topic) {
            Some(route) => {
                // Standard JSON for clients from V4_9_4 on or when asked; fastjson's bare
                // integer keys otherwise (what the Go client gets from Java).
                let version = if h.accept_standard_json_only == Some(true) {
                    i32::MAX
                } else {
                    request.version
                };
                answer(request, resp::SUCCESS).with_body(route.to_json(version).into_bytes())
            }
            None => error(request, resp::TOPIC_NOT_EXIST, no_route_remark(&h.topic)),
        }
    }

    /// The cluster table, as GET_BROKER_CLUSTER_INFO returns it.
    pub fn cluster(&self) -> ClusterInfo {
        let r = self.routes.read();
        ClusterInfo {
            broker_addr_table: r.brokers.clone(),
            cluster_addr_table: r.clusters.iter().map(|(c, n)| (c.clone(), n.iter().cloned().collect())).collect(),
        }
    }

    fn cluster_info(&self, request: &RemotingCommand) -> RemotingCommand {
        answer(request, resp::SUCCESS).with_body(self.cluster().to_json().into_bytes())
    }

    fn topic_list(&self, request: &RemotingCommand, cluster: Option<&str>) -> RemotingCommand {
        let r = self.routes.read();
        let topic_list = r
            .topics
            .iter()
            .filter(|(_, queues)| cluster.is_none_or(|c| r.clusters.get(c).is_some_and(|names| queues.keys().any(|b| names.contains(b)))))
            .map(|(t, _)| t.clone())
            .collect();
        let body = TopicList {
            broker_addr: None,
            topic_list,
        };
        answer(request, resp::SUCCESS).with_body(to_json(&body).into_bytes())
    }

    fn delete_topic(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = match DeleteTopicFromNamesrvRequestHeader::from_command(request) {
            Ok(h) => h,
            Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
        };
        let mut r = self.routes.write();
        match &h.cluster_name {
            Some(cluster) => {
                let names = r.clusters.get(cluster).cloned().unwrap_or_default();
                if let Some(queues) = r.topics.get_mut(&h.topic) {
                    queues.retain(|b, _| !names.contains(b));
                }
                r.topics.retain(|_, q| !q.is_empty());
            }
            None => {
                r.topics.remove(&h.topic);
            }
        }
        answer(request, resp::SUCCESS)
    }

    fn kv(&self, request: &RemotingCommand) -> RemotingCommand {
        let mut r = self.routes.write();
        match request.code {
            rc::PUT_KV_CONFIG => match PutKvConfigRequestHeader::from_command(request) {
                Ok(h) => {
                    r.kv.entry(h.namespace).or_default().insert(h.key, h.value);
                    answer(request, resp::SUCCESS)
                }
                Err(e) => error(request, resp::SYSTEM_ERROR, e.to_string()),
            },
            rc::GET_KV_CONFIG => match GetKvConfigRequestHeader::from_command(request) {
                Ok(h) => match r.kv.get(&h.namespace).and_then(|ns| ns.get(&h.key)) {
                    Some(v) => {
                        let mut a = answer(request, resp::SUCCESS);
                        a.put_ext("value", v.clone());
                        a
                    }
                    None => error(
                        request,
                        resp::QUERY_NOT_FOUND,
                        format!("No config item, Namespace: {} Key: {}", h.namespace, h.key),
                    ),
                },
                Err(e) => error(request, resp::SYSTEM_ERROR, e.to_string()),
            },
            rc::DELETE_KV_CONFIG => match GetKvConfigRequestHeader::from_command(request) {
                Ok(h) => {
                    if let Some(ns) = r.kv.get_mut(&h.namespace) {
                        ns.remove(&h.key);
                    }
                    answer(request, resp::SUCCESS)
                }
                Err(e) => error(request, resp::SYSTEM_ERROR, e.to_string()),
            },
            _ => match request.ext("namespace").and_then(|ns| r.kv.get(ns)) {
                Some(table) => {
                    let body = KvTable {
                        table: table.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    };
                    answer(request, resp::SUCCESS).with_body(to_json(&body).into_bytes())
                }
                None => error(request, resp::QUERY_NOT_FOUND, "No config item"),
            },
        }
    }
}
