//! Which resources and actions each request code touches, as RocketMQ 5.5.0 maps them
//! (`DefaultAuthorizationContextBuilder` and the `@RocketMQAction` / `@RocketMQResource`
//! annotations of its request headers). A retry topic stands for its group. A code RocketMQ maps
//! to nothing is checked for nothing (only its signature), with one exception: LITE_PULL_MESSAGE,
//! which RocketMQ leaves unmapped, is checked like PULL_MESSAGE, since it reads the same messages.

use petrel_auth::{Action, Check, RETRY_PREFIX, Resource};
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, HeartbeatData, LockBatchRequestBody};
use petrel_protocol::codes::request_code as rc;

const PUB: &[Action] = &[Action::Pub];
const SUB: &[Action] = &[Action::Sub];
const GET: &[Action] = &[Action::Get];
const SUB_GET: &[Action] = &[Action::Sub, Action::Get];
const SUB_UPDATE: &[Action] = &[Action::Sub, Action::Update];
const CREATE: &[Action] = &[Action::Create];
const UPDATE: &[Action] = &[Action::Update];
const DELETE: &[Action] = &[Action::Delete];

/// Checks a request carries more of than this are refused: a heartbeat with thousands of
/// subscriptions is not a client's.
const MAX_CHECKS: usize = 4096;

/// What a code's header names, for the codes mapped by annotation alone.
enum Named {
    Topic(&'static str),
    Group(&'static str),
}

/// Codes mapped by their header's annotation: actions and the fields naming resources.
const ANNOTATED: &[(i32, &[Action], &[Named])] = &[
    (rc::GET_MAX_OFFSET, GET, &[Named::Topic("topic")]),
    (rc::GET_MIN_OFFSET, GET, &[Named::Topic("topic")]),
    (rc::GET_EARLIEST_MSG_STORETIME, GET, &[Named::Topic("topic")]),
    (rc::SEARCH_OFFSET_BY_TIMESTAMP, GET, &[Named::Topic("topic")]),
    (rc::VIEW_MESSAGE_BY_ID, GET, &[Named::Topic("topic")]),
    (rc::GET_TOPIC_CONFIG, GET, &[Named::Topic("topic")]),
    (rc::GET_TOPIC_STATS_INFO, GET, &[Named::Topic("topic")]),
    (rc::UPDATE_AND_CREATE_TOPIC, CREATE, &[Named::Topic("topic")]),
    (rc::DELETE_TOPIC_IN_BROKER, DELETE, &[Named::Topic("topic")]),
    (rc::GET_CONSUMER_CONNECTION_LIST, GET, &[Named::Group("consumerGroup")]),
    (rc::GET_CONSUME_STATS, GET, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    (
        rc::INVOKE_BROKER_TO_RESET_OFFSET,
        UPDATE,
        &[Named::Group("group"), Named::Topic("topic")],
    ),
    (rc::DELETE_SUBSCRIPTIONGROUP, DELETE, &[Named::Group("groupName")]),
    (rc::GET_SUBSCRIPTIONGROUP_CONFIG, GET, &[Named::Group("group")]),
    (rc::POP_MESSAGE, SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    (rc::ACK_MESSAGE, SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    (
        rc::CHANGE_MESSAGE_INVISIBLETIME,
        SUB,
        &[Named::Group("consumerGroup"), Named::Topic("topic")],
    ),
    (rc::UNREGISTER_CLIENT, &[Action::Pub, Action::Sub], &[Named::Group("consumerGroup")]),
];

/// Codes whose resource is the cluster itself (the user and ACL admin requests, a controller's
/// role change), with their actions.
const CLUSTER: &[(i32, &[Action])] = &[
    (rc::AUTH_CREATE_USER, UPDATE),
    (rc::AUTH_UPDATE_USER, UPDATE),
    (rc::AUTH_DELETE_USER, UPDATE),
    (rc::AUTH_GET_USER, GET),
    (rc::AUTH_LIST_USER, GET),
    (rc::AUTH_CREATE_ACL, UPDATE),
    (rc::AUTH_UPDATE_ACL, UPDATE),
    (rc::AUTH_DELETE_ACL, UPDATE),
    (rc::AUTH_GET_ACL, GET),
    (rc::AUTH_LIST_ACL, GET),
    (rc::NOTIFY_BROKER_ROLE_CHANGED, UPDATE),
];

fn field<'a>(request: &'a RemotingCommand, name: &str) -> Option<&'a str> {
    request.ext(name).filter(|v| !v.trim().is_empty())
}

fn check(resource: Resource, actions: &'static [Action]) -> Check {
    Check { resource, actions }
}

fn is_retry(topic: &str) -> bool {
    topic.starts_with(RETRY_PREFIX)
}

/// A send: Pub on the topic, or Sub on the group for a retry topic.
fn send(request: &RemotingCommand, topic_field: &str, group_field: &str) -> Vec<Check> {
    let topic = field(request, topic_field).unwrap_or_default();
    if is_retry(topic) {
        let group = field(request, group_field).unwrap_or(topic);
        return vec![check(Resource::group(group), SUB)];
    }
    vec![check(Resource::topic(topic), PUB)]
}

/// Sub-like access to a topic (unless it is a retry topic) and to a group.
fn topic_and_group(request: &RemotingCommand, group_field: &str, actions: &'static [Action]) -> Vec<Check> {
    let mut out = Vec::with_capacity(2);
    if let Some(topic) = field(request, "topic").filter(|t| !is_retry(t)) {
        out.push(check(Resource::topic(topic), actions));
    }
    out.push(check(Resource::group(field(request, group_field).unwrap_or_default()), actions));
    out
}

fn heartbeat(request: &RemotingCommand) -> Result<Vec<Check>, String> {
    let data: HeartbeatData = body::from_json(&request.body).map_err(|e| format!("bad heartbeat body: {e}"))?;
    let mut out = Vec::new();
    for consumer in &data.consumer_data_set {
        out.push(check(Resource::group(&consumer.group_name), SUB));
        for sub in consumer.subscription_data_set.iter().filter(|s| !is_retry(&s.topic)) {
            out.push(check(Resource::topic(&sub.topic), SUB));
        }
    }
    Ok(out)
}

fn queue_lock(request: &RemotingCommand) -> Result<Vec<Check>, String> {
    let data: LockBatchRequestBody = body::from_json(&request.body).map_err(|e| format!("bad lock request body: {e}"))?;
    let mut out = vec![check(Resource::group(&data.consumer_group), SUB)];
    for mq in data.mq_set.iter().filter(|q| !is_retry(&q.topic)) {
        out.push(check(Resource::topic(&mq.topic), SUB));
    }
    Ok(out)
}

/// The checks `request` needs.
///
/// # Errors
/// A body that cannot be read to find its resources, or one naming more than [`MAX_CHECKS`].
pub(crate) fn checks_for(request: &RemotingCommand, cluster: &str) -> Result<Vec<Check>, String> {
    let out = match request.code {
        rc::SEND_MESSAGE => send(request, "topic", "producerGroup"),
        rc::SEND_MESSAGE_V2 | rc::SEND_BATCH_MESSAGE => send(request, "b", "a"),
        rc::END_TRANSACTION => field(request, "topic")
            .map(|t| vec![check(Resource::topic(t), PUB)])
            .unwrap_or_default(),
        rc::CONSUMER_SEND_MSG_BACK => vec![check(Resource::group(field(request, "group").unwrap_or_default()), SUB)],
        rc::PULL_MESSAGE | rc::LITE_PULL_MESSAGE => topic_and_group(request, "consumerGroup", SUB),
        rc::QUERY_MESSAGE => vec![check(Resource::topic(field(request, "topic").unwrap_or_default()), SUB_GET)],
        rc::HEART_BEAT => heartbeat(request)?,
        rc::GET_CONSUMER_LIST_BY_GROUP => vec![check(Resource::group(field(request, "consumerGroup").unwrap_or_default()), SUB_GET)],
        rc::QUERY_CONSUMER_OFFSET => topic_and_group(request, "consumerGroup", SUB_GET),
        rc::UPDATE_CONSUMER_OFFSET => topic_and_group(request, "consumerGroup", SUB_UPDATE),
        rc::LOCK_BATCH_MQ | rc::UNLOCK_BATCH_MQ => queue_lock(request)?,
        code => by_table(request, code, cluster),
    };
    if out.len() > MAX_CHECKS {
        return Err(format!("the request names {} resources, more than {MAX_CHECKS}", out.len()));
    }
    Ok(out)
}

fn by_table(request: &RemotingCommand, code: i32, cluster: &str) -> Vec<Check> {
    if let Some((_, actions)) = CLUSTER.iter().find(|(c, _)| *c == code) {
        return vec![check(Resource::cluster(cluster), actions)];
    }
    let Some((_, actions, named)) = ANNOTATED.iter().find(|(c, _, _)| *c == code) else {
        return Vec::new();
    };
    named
        .iter()
        .filter_map(|n| match n {
            Named::Topic(f) => field(request, f).map(|t| check(Resource::topic(t), actions)),
            Named::Group(f) => field(request, f).map(|g| check(Resource::group(g), actions)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use petrel_protocol::ExtFields;

    fn req(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
        let ext: ExtFields = fields.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        RemotingCommand::request(code, 1).with_ext_fields(ext)
    }

    fn keys(checks: &[Check]) -> Vec<String> {
        checks
            .iter()
            .map(|c| format!("{} {:?}", c.resource, c.actions.iter().map(|a| a.name()).collect::<Vec<_>>()))
            .collect()
    }

    #[test]
    fn sends_pulls_and_admin_map_as_rocketmq_maps_them() {
        let k = |r: RemotingCommand| keys(&checks_for(&r, "DefaultCluster").unwrap());
        assert_eq!(
            k(req(rc::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "orders")])),
            ["Topic:orders [\"Pub\"]"]
        );
        assert_eq!(
            k(req(rc::SEND_MESSAGE_V2, &[("a", "cg"), ("b", "%RETRY%cg")])),
            ["Group:cg [\"Sub\"]"]
        );
        assert_eq!(
            k(req(rc::PULL_MESSAGE, &[("consumerGroup", "cg"), ("topic", "orders")])),
            ["Topic:orders [\"Sub\"]", "Group:cg [\"Sub\"]"]
        );
        assert_eq!(
            k(req(rc::PULL_MESSAGE, &[("consumerGroup", "cg"), ("topic", "%RETRY%cg")])),
            ["Group:cg [\"Sub\"]"]
        );
        assert_eq!(
            k(req(rc::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "cg"), ("topic", "t")])),
            ["Topic:t [\"Sub\", \"Update\"]", "Group:cg [\"Sub\", \"Update\"]"]
        );
        assert_eq!(k(req(rc::UPDATE_AND_CREATE_TOPIC, &[("topic", "t")])), ["Topic:t [\"Create\"]"]);
        assert_eq!(
            k(req(rc::AUTH_CREATE_USER, &[("username", "u")])),
            ["Cluster:DefaultCluster [\"Update\"]"]
        );
        assert_eq!(k(req(rc::AUTH_LIST_ACL, &[])), ["Cluster:DefaultCluster [\"Get\"]"]);
        // Codes RocketMQ maps to nothing need only a signature.
        assert!(k(req(rc::GET_BROKER_CONFIG, &[])).is_empty());
        assert!(k(req(rc::GET_ALL_TOPIC_CONFIG, &[])).is_empty());
    }

    #[test]
    fn a_heartbeat_names_each_group_and_subscribed_topic() {
        let mut r = req(rc::HEART_BEAT, &[]);
        r.body = bytes::Bytes::from_static(
            br#"{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"orders"},{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"%RETRY%cg"}],"unitMode":false}],"producerDataSet":[]}"#,
        );
        assert_eq!(
            keys(&checks_for(&r, "c").unwrap()),
            ["Group:cg [\"Sub\"]", "Topic:orders [\"Sub\"]"]
        );
        r.body = bytes::Bytes::from_static(b"not json");
        assert!(checks_for(&r, "c").is_err());
    }
}
