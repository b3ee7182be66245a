//! Which resources and actions each request code touches: one rule per code the broker serves,
//! written down here, so that a code with no rule is a test failure (`every_served_code_has_a_rule`)
//! and, at run time, a refusal rather than a free pass. Taken from RocketMQ 5.5.0
//! (`DefaultAuthorizationContextBuilder` and the `@RocketMQAction` / `@RocketMQResource`
//! annotations of its request headers), and stricter where RocketMQ leaves a code unchecked:
//!
//! - a retry topic (`%RETRY%G`) stands for the group *it names* (RocketMQ takes the request's
//!   producerGroup / consumerGroup field instead, so Sub on `Group:mine` wrote into
//!   `%RETRY%victim` and, past its retries, `%DLQ%victim`);
//! - codes RocketMQ maps to nothing (reply sends, group settings, POP's request mode and
//!   assignment, a client's config check, the broker's configuration and runtime, the slave
//!   sync reads, the epoch cache) get the group, topic or cluster they act on;
//! - VIEW_MESSAGE_BY_ID, END_TRANSACTION and CONSUMER_SEND_MSG_BACK name a commit-log offset: the
//!   gate checks what the header names, and the handler checks the topic of the record actually
//!   found there ([`super::Access::topic_check`]).
//!
//! [`Rule::SignatureOnly`] is a decision, not a default: each one says why.

use petrel_auth::{Action, Check, RETRY_PREFIX, Resource};
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, HeartbeatData, LockBatchRequestBody, QueryAssignmentRequestBody, SetMessageRequestModeRequestBody};
use petrel_protocol::codes::request_code as rc;

pub(crate) const PUB: &[Action] = &[Action::Pub];
pub(crate) const SUB: &[Action] = &[Action::Sub];
pub(crate) const GET: &[Action] = &[Action::Get];
const SUB_GET: &[Action] = &[Action::Sub, Action::Get];
const SUB_UPDATE: &[Action] = &[Action::Sub, Action::Update];
const PUB_SUB: &[Action] = &[Action::Pub, Action::Sub];
const CREATE: &[Action] = &[Action::Create];
const UPDATE: &[Action] = &[Action::Update];
const DELETE: &[Action] = &[Action::Delete];

/// Checks a request carries more of than this are refused: a heartbeat with thousands of
/// subscriptions is not a client's.
const MAX_CHECKS: usize = 4096;

/// A header field naming a resource.
enum Named {
    /// A topic; a retry topic stands for its group.
    Topic(&'static str),
    Group(&'static str),
}

type Custom = fn(&RemotingCommand) -> Result<Vec<Check>, String>;

/// What one request code is checked for.
enum Rule {
    /// A signature is enough (authentication still applies): the reason is the decision.
    #[allow(dead_code, reason = "no served code needs only a signature today; this is how one would say so")]
    SignatureOnly(&'static str),
    /// These actions on the resources these header fields name (a field absent names none).
    Fields(&'static [Action], &'static [Named]),
    /// These actions on the cluster.
    Cluster(&'static [Action]),
    /// Read from the request (a body, or a field whose meaning depends on another).
    Custom(Custom),
}

/// Every request code the broker serves, and its rule.
const RULES: &[(i32, Rule)] = &[
    (rc::SEND_MESSAGE, Rule::Custom(|r| Ok(send(r, "topic")))),
    (rc::SEND_MESSAGE_V2, Rule::Custom(|r| Ok(send(r, "b")))),
    (rc::SEND_BATCH_MESSAGE, Rule::Custom(|r| Ok(send(r, "b")))),
    (rc::SEND_REPLY_MESSAGE, Rule::Custom(|r| Ok(send(r, "topic")))),
    (rc::SEND_REPLY_MESSAGE_V2, Rule::Custom(|r| Ok(send(r, "b")))),
    // The record at the offset is checked by the handler too (RocketMQ checks only the group,
    // so a consumer could copy any topic's message into its retry topic and read it).
    (rc::CONSUMER_SEND_MSG_BACK, Rule::Fields(SUB, &[Named::Group("group")])),
    // Without a topic RocketMQ checks nothing; the handler checks the half message's topic.
    (rc::END_TRANSACTION, Rule::Fields(PUB, &[Named::Topic("topic")])),
    (rc::PULL_MESSAGE, Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB)))),
    (rc::LITE_PULL_MESSAGE, Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB)))),
    (rc::QUERY_CONSUMER_OFFSET, Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB_GET)))),
    (
        rc::UPDATE_CONSUMER_OFFSET,
        Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB_UPDATE))),
    ),
    (rc::GET_MAX_OFFSET, Rule::Fields(GET, &[Named::Topic("topic")])),
    (rc::GET_MIN_OFFSET, Rule::Fields(GET, &[Named::Topic("topic")])),
    (rc::GET_EARLIEST_MSG_STORETIME, Rule::Fields(GET, &[Named::Topic("topic")])),
    (rc::SEARCH_OFFSET_BY_TIMESTAMP, Rule::Fields(GET, &[Named::Topic("topic")])),
    (rc::HEART_BEAT, Rule::Custom(heartbeat)),
    (rc::UNREGISTER_CLIENT, Rule::Fields(PUB_SUB, &[Named::Group("consumerGroup")])),
    (
        rc::GET_CONSUMER_LIST_BY_GROUP,
        Rule::Fields(SUB_GET, &[Named::Group("consumerGroup")]),
    ),
    (
        rc::GET_CONSUMER_CONNECTION_LIST,
        Rule::Fields(GET, &[Named::Group("consumerGroup")]),
    ),
    (rc::CHECK_CLIENT_CONFIG, Rule::Custom(check_client_config)),
    (rc::LOCK_BATCH_MQ, Rule::Custom(queue_lock)),
    (rc::UNLOCK_BATCH_MQ, Rule::Custom(queue_lock)),
    (rc::UPDATE_AND_CREATE_TOPIC, Rule::Fields(CREATE, &[Named::Topic("topic")])),
    (rc::DELETE_TOPIC_IN_BROKER, Rule::Fields(DELETE, &[Named::Topic("topic")])),
    // Every topic's configuration: a cluster-wide read.
    (rc::GET_ALL_TOPIC_CONFIG, Rule::Cluster(GET)),
    (rc::GET_TOPIC_CONFIG, Rule::Fields(GET, &[Named::Topic("topic")])),
    (rc::GET_TOPIC_STATS_INFO, Rule::Fields(GET, &[Named::Topic("topic")])),
    (
        rc::GET_CONSUME_STATS,
        Rule::Fields(GET, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    ),
    (rc::GET_BROKER_RUNTIME_INFO, Rule::Cluster(GET)),
    // The broker's configuration (its secrets are masked in the answer as well).
    (rc::GET_BROKER_CONFIG, Rule::Cluster(GET)),
    // The handler checks the found record's topic too (RocketMQ checks nothing without `topic`).
    (rc::VIEW_MESSAGE_BY_ID, Rule::Fields(GET, &[Named::Topic("topic")])),
    (rc::QUERY_MESSAGE, Rule::Fields(SUB_GET, &[Named::Topic("topic")])),
    (
        rc::INVOKE_BROKER_TO_RESET_OFFSET,
        Rule::Fields(UPDATE, &[Named::Group("group"), Named::Topic("topic")]),
    ),
    // Can disable or reshape another group: Update on the group the body names.
    (rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, Rule::Custom(group_config)),
    (rc::DELETE_SUBSCRIPTIONGROUP, Rule::Fields(DELETE, &[Named::Group("groupName")])),
    (rc::GET_SUBSCRIPTIONGROUP_CONFIG, Rule::Fields(GET, &[Named::Group("group")])),
    // What a slave copies from its master (it signs with the inner credentials, a super user):
    // every group's offsets and settings, so cluster-wide reads.
    (rc::GET_ALL_CONSUMER_OFFSET, Rule::Cluster(GET)),
    (rc::GET_ALL_DELAY_OFFSET, Rule::Cluster(GET)),
    (rc::GET_TIMER_CHECK_POINT, Rule::Cluster(GET)),
    (rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, Rule::Cluster(GET)),
    (rc::GET_ALL_MESSAGE_REQUEST_MODE, Rule::Cluster(GET)),
    (
        rc::POP_MESSAGE,
        Rule::Fields(SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    ),
    (
        rc::ACK_MESSAGE,
        Rule::Fields(SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    ),
    (
        rc::CHANGE_MESSAGE_INVISIBLETIME,
        Rule::Fields(SUB, &[Named::Group("consumerGroup"), Named::Topic("topic")]),
    ),
    (rc::QUERY_ASSIGNMENT, Rule::Custom(assignment)),
    (rc::SET_MESSAGE_REQUEST_MODE, Rule::Custom(request_mode)),
    (rc::NOTIFY_BROKER_ROLE_CHANGED, Rule::Cluster(UPDATE)),
    (rc::GET_BROKER_EPOCH_CACHE, Rule::Cluster(GET)),
    (rc::AUTH_CREATE_USER, Rule::Cluster(UPDATE)),
    (rc::AUTH_UPDATE_USER, Rule::Cluster(UPDATE)),
    (rc::AUTH_DELETE_USER, Rule::Cluster(UPDATE)),
    (rc::AUTH_GET_USER, Rule::Cluster(GET)),
    (rc::AUTH_LIST_USER, Rule::Cluster(GET)),
    (rc::AUTH_CREATE_ACL, Rule::Cluster(UPDATE)),
    (rc::AUTH_UPDATE_ACL, Rule::Cluster(UPDATE)),
    (rc::AUTH_DELETE_ACL, Rule::Cluster(UPDATE)),
    (rc::AUTH_GET_ACL, Rule::Cluster(GET)),
    (rc::AUTH_LIST_ACL, Rule::Cluster(GET)),
];

/// The codes whose rule is a signature alone, with the written reason.
#[cfg(test)]
fn signature_only() -> Vec<(i32, &'static str)> {
    RULES
        .iter()
        .filter_map(|(code, rule)| match rule {
            Rule::SignatureOnly(why) => Some((*code, *why)),
            _ => None,
        })
        .collect()
}

/// Whether `code` has a rule.
#[cfg(test)]
fn has_rule(code: i32) -> bool {
    RULES.iter().any(|(c, _)| *c == code)
}

fn field<'a>(request: &'a RemotingCommand, name: &str) -> Option<&'a str> {
    request.ext(name).filter(|v| !v.trim().is_empty())
}

fn check(resource: Resource, actions: &'static [Action]) -> Check {
    Check { resource, actions }
}

fn is_retry(topic: &str) -> bool {
    topic.starts_with(RETRY_PREFIX)
}

/// A send: Pub on the topic, or, for a retry topic, Sub on the group the topic names (never the
/// group a field claims).
fn send(request: &RemotingCommand, topic_field: &str) -> Vec<Check> {
    let topic = field(request, topic_field).unwrap_or_default();
    if is_retry(topic) {
        return vec![check(Resource::group(topic), SUB)];
    }
    vec![check(Resource::topic(topic), PUB)]
}

/// A read of a queue by a group: the topic (a retry topic: the group it names) and the group.
fn read(request: &RemotingCommand, group_field: &str, actions: &'static [Action]) -> Vec<Check> {
    let mut out = Vec::with_capacity(2);
    if let Some(topic) = field(request, "topic") {
        // `Resource::topic` turns `%RETRY%G` into `Group:G`.
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
        for sub in &consumer.subscription_data_set {
            out.push(check(Resource::topic(&sub.topic), SUB));
        }
    }
    Ok(out)
}

fn queue_lock(request: &RemotingCommand) -> Result<Vec<Check>, String> {
    let data: LockBatchRequestBody = body::from_json(&request.body).map_err(|e| format!("bad lock request body: {e}"))?;
    let mut out = vec![check(Resource::group(&data.consumer_group), SUB)];
    for mq in &data.mq_set {
        out.push(check(Resource::topic(&mq.topic), SUB));
    }
    Ok(out)
}

fn check_client_config(request: &RemotingCommand) -> Result<Vec<Check>, String> {
    let data: serde_json::Value = body::from_json(&request.body).map_err(|e| format!("bad CHECK_CLIENT_CONFIG body: {e}"))?;
    let mut out = vec![check(Resource::group(data["group"].as_str().unwrap_or_default()), SUB)];
    if let Some(topic) = data["subscriptionData"]["topic"].as_str() {
        out.push(check(Resource::topic(topic), SUB));
    }
    Ok(out)
}

fn group_config(request: &RemotingCommand) -> Result<Vec<Check>, String> {
    let data: serde_json::Value = body::from_json(&request.body).map_err(|e| format!("bad SubscriptionGroupConfig body: {e}"))?;
    Ok(vec![check(Resource::group(data["groupName"].as_str().unwrap_or_default()), UPDATE)])
}

fn assignment(request: &RemotingCommand) -> Result<Vec<Check>, String> {
    let data: QueryAssignmentRequestBody = body::from_json(&request.body).map_err(|e| format!("bad QUERY_ASSIGNMENT body: {e}"))?;
    Ok(vec![
        check(Resource::group(&data.consumer_group), SUB),
        check(Resource::topic(&data.topic), SUB),
    ])
}

fn request_mode(request: &RemotingCommand) -> Result<Vec<Check>, String> {
    let data: SetMessageRequestModeRequestBody =
        body::from_json(&request.body).map_err(|e| format!("bad SET_MESSAGE_REQUEST_MODE body: {e}"))?;
    Ok(vec![
        check(Resource::group(&data.consumer_group), UPDATE),
        check(Resource::topic(&data.topic), UPDATE),
    ])
}

/// The checks `request` needs.
///
/// # Errors
/// A code with no rule (refused, never let through), a body that cannot be read to find its
/// resources, or one naming more than [`MAX_CHECKS`].
pub(crate) fn checks_for(request: &RemotingCommand, cluster: &str) -> Result<Vec<Check>, String> {
    let Some((_, rule)) = RULES.iter().find(|(c, _)| *c == request.code) else {
        return Err(format!("request code {} has no access rule", request.code));
    };
    let out = match rule {
        Rule::SignatureOnly(_) => Vec::new(),
        Rule::Cluster(actions) => vec![check(Resource::cluster(cluster), actions)],
        Rule::Fields(actions, named) => named
            .iter()
            .filter_map(|n| match n {
                Named::Topic(f) => field(request, f).map(|t| check(Resource::topic(t), actions)),
                Named::Group(f) => field(request, f).map(|g| check(Resource::group(g), actions)),
            })
            .collect(),
        Rule::Custom(f) => f(request)?,
    };
    if out.len() > MAX_CHECKS {
        return Err(format!("the request names {} resources, more than {MAX_CHECKS}", out.len()));
    }
    Ok(out)
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

    /// The structural guard: a code the broker answers without a rule here fails this test, so
    /// a new request cannot ship unchecked by accident; one that needs only a signature must say
    /// so (and why) in the table.
    #[test]
    fn every_served_code_has_a_rule() {
        let missing: Vec<i32> = crate::front::served_codes().into_iter().filter(|c| !has_rule(*c)).collect();
        assert!(missing.is_empty(), "request codes served with no access rule: {missing:?}");
        let unserved: Vec<i32> = RULES
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| !crate::front::served_codes().contains(c))
            .collect();
        assert!(unserved.is_empty(), "rules for codes the broker does not serve: {unserved:?}");
        for (code, why) in signature_only() {
            assert!(why.len() > 20, "code {code}: a signature-only rule says why");
        }
        // A code with no rule is refused, not let through.
        assert!(checks_for(&req(99_999, &[]), "c").unwrap_err().contains("no access rule"));
    }

    #[test]
    fn sends_pulls_and_admin_map_as_rocketmq_maps_them() {
        let k = |r: RemotingCommand| keys(&checks_for(&r, "DefaultCluster").unwrap());
        assert_eq!(
            k(req(rc::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "orders")])),
            ["Topic:orders [\"Pub\"]"]
        );
        assert_eq!(
            k(req(rc::PULL_MESSAGE, &[("consumerGroup", "cg"), ("topic", "orders")])),
            ["Topic:orders [\"Sub\"]", "Group:cg [\"Sub\"]"]
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
    }

    /// The holes RocketMQ leaves, closed: each of these needed only a signature.
    #[test]
    fn codes_rocketmq_leaves_unchecked_name_what_they_act_on() {
        let k = |r: RemotingCommand| keys(&checks_for(&r, "DefaultCluster").unwrap());
        let cluster_get = ["Cluster:DefaultCluster [\"Get\"]"];
        for code in [
            rc::GET_BROKER_CONFIG,
            rc::GET_BROKER_RUNTIME_INFO,
            rc::GET_ALL_TOPIC_CONFIG,
            rc::GET_ALL_CONSUMER_OFFSET,
            rc::GET_ALL_DELAY_OFFSET,
            rc::GET_TIMER_CHECK_POINT,
            rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            rc::GET_ALL_MESSAGE_REQUEST_MODE,
            rc::GET_BROKER_EPOCH_CACHE,
        ] {
            assert_eq!(k(req(code, &[])), cluster_get, "code {code}");
        }
        assert_eq!(
            k(req(rc::SEND_REPLY_MESSAGE_V2, &[("a", "pg"), ("b", "DefaultCluster_REPLY_TOPIC")])),
            ["Topic:DefaultCluster_REPLY_TOPIC [\"Pub\"]"]
        );
        let mut group = req(rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, &[]);
        group.body = bytes::Bytes::from_static(br#"{"groupName":"victim","consumeEnable":false}"#);
        assert_eq!(k(group), ["Group:victim [\"Update\"]"]);
        let mut mode = req(rc::SET_MESSAGE_REQUEST_MODE, &[]);
        mode.body = bytes::Bytes::from_static(br#"{"topic":"t","consumerGroup":"g","mode":"POP","popShareQueueNum":0}"#);
        assert_eq!(k(mode), ["Group:g [\"Update\"]", "Topic:t [\"Update\"]"]);
        let mut assign = req(rc::QUERY_ASSIGNMENT, &[]);
        assign.body = bytes::Bytes::from_static(br#"{"topic":"t","consumerGroup":"g","clientId":"c","strategyName":"AVG"}"#);
        assert_eq!(k(assign), ["Group:g [\"Sub\"]", "Topic:t [\"Sub\"]"]);
        let mut client = req(rc::CHECK_CLIENT_CONFIG, &[]);
        client.body = bytes::Bytes::from_static(br#"{"clientId":"c","group":"g","subscriptionData":{"topic":"t","subString":"*"}}"#);
        assert_eq!(k(client), ["Group:g [\"Sub\"]", "Topic:t [\"Sub\"]"]);
        let mut bad = req(rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, &[]);
        bad.body = bytes::Bytes::from_static(b"not json");
        assert!(checks_for(&bad, "c").is_err(), "a body that cannot be read is refused");
    }

    /// A retry topic is its group's, whatever group the request's fields claim.
    #[test]
    fn a_retry_topic_is_checked_as_the_group_it_names() {
        let k = |r: RemotingCommand| keys(&checks_for(&r, "DefaultCluster").unwrap());
        assert_eq!(
            k(req(rc::SEND_MESSAGE_V2, &[("a", "mine"), ("b", "%RETRY%victim")])),
            ["Group:victim [\"Sub\"]"]
        );
        assert_eq!(
            k(req(rc::SEND_MESSAGE, &[("producerGroup", "mine"), ("topic", "%RETRY%victim")])),
            ["Group:victim [\"Sub\"]"]
        );
        assert_eq!(
            k(req(rc::PULL_MESSAGE, &[("consumerGroup", "mine"), ("topic", "%RETRY%victim")])),
            ["Group:victim [\"Sub\"]", "Group:mine [\"Sub\"]"]
        );
        assert_eq!(
            k(req(
                rc::UPDATE_CONSUMER_OFFSET,
                &[("consumerGroup", "mine"), ("topic", "%RETRY%victim")]
            )),
            ["Group:victim [\"Sub\", \"Update\"]", "Group:mine [\"Sub\", \"Update\"]"]
        );
    }

    #[test]
    fn a_heartbeat_names_each_group_and_subscribed_topic() {
        let mut r = req(rc::HEART_BEAT, &[]);
        r.body = bytes::Bytes::from_static(
            br#"{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"orders"},{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"%RETRY%cg"}],"unitMode":false}],"producerDataSet":[]}"#,
        );
        assert_eq!(
            keys(&checks_for(&r, "c").unwrap()),
            ["Group:cg [\"Sub\"]", "Topic:orders [\"Sub\"]", "Group:cg [\"Sub\"]"]
        );
        r.body = bytes::Bytes::from_static(b"not json");
        assert!(checks_for(&r, "c").is_err());
    }
}
