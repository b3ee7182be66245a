//! GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), GET_TOPICS_BY_CLUSTER (224),
//! GET_SYSTEM_TOPIC_LIST_FROM_NS (304) and DELETE_TOPIC_IN_NAMESRV (216).

use super::Unit;
#[allow(unused_imports, reason = "each file's rules name what they need")]
use crate::access::{self, ROUTES_ARE_PUBLIC, Rule};
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{TopicList, to_json};
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, DeleteTopicFromNamesrvRequestHeader, GetTopicsByClusterRequestHeader};
use petrel_remoting::{answer, error};

use super::Origin;
use crate::state::NameServer;

fn list(ns: &NameServer, request: &RemotingCommand, cluster: Option<&str>) -> RemotingCommand {
    let r = ns.routes.read();
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

pub(super) fn all(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    list(ns, request, None)
}

pub(super) fn by_cluster(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    match GetTopicsByClusterRequestHeader::from_command(request) {
        Ok(h) => list(ns, request, Some(&h.cluster)),
        Err(e) => error(request, resp::SYSTEM_ERROR, e.to_string()),
    }
}

/// RocketMQ's system topics as a name server knows them: each cluster's name and each broker's
/// name (a broker makes a topic of each), with one broker's address to ask for the rest
/// (GET_SYSTEM_TOPIC_LIST_FROM_BROKER), as `mqadmin topicList` and the dashboard do.
pub(super) fn system(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    let r = ns.routes.read();
    let topic_list = r
        .clusters
        .iter()
        .flat_map(|(cluster, names)| std::iter::once(cluster.clone()).chain(names.iter().cloned()))
        .collect();
    let broker_addr = r.brokers.values().find_map(|b| b.broker_addrs.values().next().cloned());
    let body = TopicList { broker_addr, topic_list };
    answer(request, resp::SUCCESS).with_body(to_json(&body).into_bytes())
}

pub(super) fn delete(ns: &NameServer, request: &RemotingCommand, _origin: Origin) -> RemotingCommand {
    let h = match DeleteTopicFromNamesrvRequestHeader::from_command(request) {
        Ok(h) => h,
        Err(e) => return error(request, resp::SYSTEM_ERROR, e.to_string()),
    };
    let mut r = ns.routes.write();
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

/// This file's requests: each code with its access rule and its handler, registered by one
/// line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        rule: Rule::Open(ROUTES_ARE_PUBLIC),
        handle: all,
    },
    Unit {
        code: rc::GET_TOPICS_BY_CLUSTER,
        rule: Rule::Open(ROUTES_ARE_PUBLIC),
        handle: by_cluster,
    },
    Unit {
        code: rc::GET_SYSTEM_TOPIC_LIST_FROM_NS,
        rule: Rule::Open(ROUTES_ARE_PUBLIC),
        handle: system,
    },
    Unit {
        code: rc::DELETE_TOPIC_IN_NAMESRV,
        rule: Rule::Write(access::topic_clusters),
        handle: delete,
    },
];
