//! QueryRoute and QueryAssignment: the queues of a topic on this broker, and which of them a
//! consumer receives from. The broker serves its own queues only, as RocketMQ's proxy does in
//! local mode; clients reach other brokers of a cluster through those brokers' own endpoints.

use petrel_protocol::model::{TopicConfig, perm};
use tonic::Request;

use crate::access;
use crate::convert::{accepted_kinds, resource_name};
use crate::front::GrpcFront;
use crate::pb::{self, Code, Permission};
use crate::status::{Refusal, ok};

/// The queue a consumer receives from when the broker picks the queue.
pub const ANY_QUEUE: i32 = -1;

/// QueryRoute: one entry per queue of the topic.
pub(crate) fn query_route(front: &GrpcFront, r: Request<pb::QueryRouteRequest>) -> pb::QueryRouteResponse {
    let caller = front.caller(&r);
    let req = r.into_inner();
    let topic = resource_name(req.topic.as_ref());
    let allowed = caller.and_then(|c| front.authorize(&c, &[access::topic(&topic, access::PUB_OR_SUB)]));
    match allowed.and_then(|()| route_of(front, &topic, req.endpoints)) {
        Ok(queues) => pb::QueryRouteResponse {
            status: Some(ok()),
            message_queues: queues,
        },
        Err(e) => pb::QueryRouteResponse {
            status: Some(e.status()),
            message_queues: Vec::new(),
        },
    }
}

/// The topic's queues, each naming this broker at `endpoints` (where the client reached it).
fn route_of(front: &GrpcFront, topic: &str, endpoints: Option<pb::Endpoints>) -> Result<Vec<pb::MessageQueue>, Refusal> {
    let config = topic_config(front, topic)?;
    let broker = broker_of(front, endpoints);
    let n = config.read_queue_nums.max(config.write_queue_nums);
    let kinds: Vec<i32> = accepted_kinds(&config.attributes).into_iter().map(|k| k as i32).collect();
    Ok((0..n)
        .map(|id| pb::MessageQueue {
            topic: Some(pb::Resource {
                resource_namespace: String::new(),
                name: topic.to_owned(),
            }),
            id,
            permission: permission(&config, id) as i32,
            broker: Some(broker.clone()),
            accept_message_types: kinds.clone(),
        })
        .collect())
}

/// The topic's configuration, or TOPIC_NOT_FOUND.
pub(crate) fn topic_config(front: &GrpcFront, topic: &str) -> Result<TopicConfig, Refusal> {
    front.broker.topics.get(topic).ok_or_else(|| no_such_topic(topic))
}

/// The refusal for a topic the broker does not have (or an empty name).
pub(crate) fn no_such_topic(topic: &str) -> Refusal {
    if topic.is_empty() {
        return Refusal::new(Code::IllegalTopic, "topic name is empty");
    }
    Refusal::new(Code::TopicNotFound, format!("topic [{topic}] does not exist"))
}

fn permission(config: &TopicConfig, id: i32) -> Permission {
    let read = id < config.read_queue_nums && config.perm & perm::READ != 0;
    let write = id < config.write_queue_nums && config.perm & perm::WRITE != 0;
    match (read, write) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

/// This broker as a route names it: its name, id 0 (only a master serves gRPC clients'
/// writes and pops), and the endpoints the client used, else this front end's address.
fn broker_of(front: &GrpcFront, endpoints: Option<pb::Endpoints>) -> pb::Broker {
    let endpoints = endpoints.filter(|e| !e.addresses.is_empty()).unwrap_or_else(|| {
        let ip = front.broker.store_host.ip();
        pb::Endpoints {
            scheme: if ip.is_ipv4() {
                pb::AddressScheme::IPv4
            } else {
                pb::AddressScheme::IPv6
            } as i32,
            addresses: vec![pb::Address {
                host: ip.to_string(),
                port: i32::from(front.port),
            }],
        }
    });
    pb::Broker {
        name: front.broker.config.broker_name.clone(),
        id: 0,
        endpoints: Some(endpoints),
    }
}

/// QueryAssignment: where a consumer of the group receives from. A group that consumes in
/// order gets each readable queue (so it receives queue by queue, in order); any other gets
/// one entry that lets the broker pick the queue on each receive.
pub(crate) fn query_assignment(front: &GrpcFront, r: Request<pb::QueryAssignmentRequest>) -> pb::QueryAssignmentResponse {
    let caller = front.caller(&r);
    let req = r.into_inner();
    let topic = resource_name(req.topic.as_ref());
    let group = resource_name(req.group.as_ref());
    let allowed = caller.and_then(|c| front.authorize(&c, &[access::topic(&topic, access::SUB), access::group(&group, access::SUB)]));
    let assigned = allowed.and_then(|()| route_of(front, &topic, req.endpoints)).and_then(|queues| {
        if group.is_empty() {
            return Err(Refusal::new(Code::IllegalConsumerGroup, "consumer group is empty"));
        }
        let orderly = front.broker.groups.config(&group).consume_message_orderly;
        let readable = queues
            .into_iter()
            .filter(|q| matches!(Permission::try_from(q.permission), Ok(Permission::Read | Permission::ReadWrite)));
        Ok(if orderly {
            readable.collect::<Vec<_>>()
        } else {
            readable.take(1).map(|q| pb::MessageQueue { id: ANY_QUEUE, ..q }).collect()
        })
    });
    match assigned {
        Ok(queues) => pb::QueryAssignmentResponse {
            status: Some(ok()),
            assignments: queues.into_iter().map(|q| pb::Assignment { message_queue: Some(q) }).collect(),
        },
        Err(e) => pb::QueryAssignmentResponse {
            status: Some(e.status()),
            assignments: Vec::new(),
        },
    }
}
