//! Which resources and actions a request touches: the rule kinds each request unit declares in
//! its own file (`front/handlers/<area>/<verb>.rs`, beside its handler; a unit cannot be
//! declared without one), and the helpers those rules use. A code with no unit has no rule and
//! is refused at run time, never let through. Taken from RocketMQ 5.5.0
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

pub(crate) const PUB: &[Action] = &[Action::Pub];
pub(crate) const SUB: &[Action] = &[Action::Sub];
pub(crate) const GET: &[Action] = &[Action::Get];
pub(crate) const SUB_GET: &[Action] = &[Action::Sub, Action::Get];
pub(crate) const SUB_UPDATE: &[Action] = &[Action::Sub, Action::Update];
pub(crate) const PUB_SUB: &[Action] = &[Action::Pub, Action::Sub];
pub(crate) const CREATE: &[Action] = &[Action::Create];
pub(crate) const UPDATE: &[Action] = &[Action::Update];
pub(crate) const DELETE: &[Action] = &[Action::Delete];

/// Checks a request carries more of than this are refused: a heartbeat with thousands of
/// subscriptions is not a client's.
const MAX_CHECKS: usize = 4096;

/// A header field naming a resource.
pub(crate) enum Named {
    /// A topic; a retry topic stands for its group.
    Topic(&'static str),
    Group(&'static str),
}

/// Why the resources a request touches cannot be told.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// No unit serves the code, so nothing says what it touches: refused.
    #[error("request code {0} has no access rule")]
    NoRule(i32),
    /// The body the rule reads the resources from does not parse.
    #[error("bad {what} body: {source}")]
    Unreadable {
        /// Which body it was (a request code's name or the body's type).
        what: &'static str,
        /// Why it did not parse.
        #[source]
        source: petrel_protocol::BodyError,
    },
    /// The request names more than 4096 resources (no real client's does); carries how many.
    #[error("the request names {0} resources, more than {MAX_CHECKS}")]
    TooMany(usize),
}

type Custom = fn(&RemotingCommand) -> Result<Vec<Check>, CheckError>;

fn unreadable(what: &'static str) -> impl FnOnce(petrel_protocol::BodyError) -> CheckError {
    move |source| CheckError::Unreadable { what, source }
}

/// What one request code is checked for.
pub(crate) enum Rule {
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

/// The codes whose rule is a signature alone, with the written reason.
#[cfg(test)]
fn signature_only() -> Vec<(i32, &'static str)> {
    crate::front::units()
        .iter()
        .filter_map(|unit| match unit.rule {
            Rule::SignatureOnly(why) => Some((unit.code, why)),
            _ => None,
        })
        .collect()
}

/// The names the request units' rules use, for their files' one `use`.
pub(crate) mod rules {
    pub(crate) use super::{
        CREATE, DELETE, GET, Named, PUB, PUB_SUB, Rule, SUB, SUB_GET, SUB_UPDATE, UPDATE, assignment, check_client_config, group_config,
        heartbeat, queue_lock, read, request_mode, send,
    };
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
pub(crate) fn send(request: &RemotingCommand, topic_field: &str) -> Vec<Check> {
    let topic = field(request, topic_field).unwrap_or_default();
    if is_retry(topic) {
        return vec![check(Resource::group(topic), SUB)];
    }
    vec![check(Resource::topic(topic), PUB)]
}

/// A read of a queue by a group: the topic (a retry topic: the group it names) and the group.
pub(crate) fn read(request: &RemotingCommand, group_field: &str, actions: &'static [Action]) -> Vec<Check> {
    let mut out = Vec::with_capacity(2);
    if let Some(topic) = field(request, "topic") {
        // `Resource::topic` turns `%RETRY%G` into `Group:G`.
        out.push(check(Resource::topic(topic), actions));
    }
    out.push(check(Resource::group(field(request, group_field).unwrap_or_default()), actions));
    out
}

pub(crate) fn heartbeat(request: &RemotingCommand) -> Result<Vec<Check>, CheckError> {
    let data: HeartbeatData = body::from_json(&request.body).map_err(unreadable("heartbeat"))?;
    let mut out = Vec::new();
    for consumer in &data.consumer_data_set {
        out.push(check(Resource::group(&consumer.group_name), SUB));
        for sub in &consumer.subscription_data_set {
            out.push(check(Resource::topic(&sub.topic), SUB));
        }
    }
    Ok(out)
}

pub(crate) fn queue_lock(request: &RemotingCommand) -> Result<Vec<Check>, CheckError> {
    let data: LockBatchRequestBody = body::from_json(&request.body).map_err(unreadable("lock request"))?;
    let mut out = vec![check(Resource::group(&data.consumer_group), SUB)];
    for mq in &data.mq_set {
        out.push(check(Resource::topic(&mq.topic), SUB));
    }
    Ok(out)
}

pub(crate) fn check_client_config(request: &RemotingCommand) -> Result<Vec<Check>, CheckError> {
    let data: serde_json::Value = body::from_json(&request.body).map_err(unreadable("CHECK_CLIENT_CONFIG"))?;
    let mut out = vec![check(Resource::group(data["group"].as_str().unwrap_or_default()), SUB)];
    if let Some(topic) = data["subscriptionData"]["topic"].as_str() {
        out.push(check(Resource::topic(topic), SUB));
    }
    Ok(out)
}

pub(crate) fn group_config(request: &RemotingCommand) -> Result<Vec<Check>, CheckError> {
    let data: serde_json::Value = body::from_json(&request.body).map_err(unreadable("SubscriptionGroupConfig"))?;
    Ok(vec![check(Resource::group(data["groupName"].as_str().unwrap_or_default()), UPDATE)])
}

pub(crate) fn assignment(request: &RemotingCommand) -> Result<Vec<Check>, CheckError> {
    let data: QueryAssignmentRequestBody = body::from_json(&request.body).map_err(unreadable("QUERY_ASSIGNMENT"))?;
    Ok(vec![
        check(Resource::group(&data.consumer_group), SUB),
        check(Resource::topic(&data.topic), SUB),
    ])
}

pub(crate) fn request_mode(request: &RemotingCommand) -> Result<Vec<Check>, CheckError> {
    let data: SetMessageRequestModeRequestBody = body::from_json(&request.body).map_err(unreadable("SET_MESSAGE_REQUEST_MODE"))?;
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
pub(crate) fn checks_for(request: &RemotingCommand, cluster: &str) -> Result<Vec<Check>, CheckError> {
    let Some(unit) = crate::front::unit_for(request.code) else {
        return Err(CheckError::NoRule(request.code));
    };
    let rule = &unit.rule;
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
        return Err(CheckError::TooMany(out.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use petrel_protocol::ExtFields;
    use petrel_protocol::codes::request_code as rc;

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
    fn every_unit_declares_a_rule_and_a_code_without_one_is_refused() {
        // The dispatcher builds (no code declared twice) and every served code has its unit's rule.
        let served = crate::front::served_codes();
        assert_eq!(served.len(), crate::front::units().len());
        for code in &served {
            let unit = crate::front::unit_for(*code).expect("a served code has its unit");
            assert_eq!(unit.code, *code);
        }
        for (code, why) in signature_only() {
            assert!(why.len() > 20, "code {code}: a signature-only rule says why");
        }
        // A code with no unit has no rule: refused, not let through.
        assert!(matches!(checks_for(&req(99_999, &[]), "c"), Err(CheckError::NoRule(99_999))));
        let bad_body = req(rc::HEART_BEAT, &[]).with_body(b"{not json".to_vec());
        assert!(matches!(
            checks_for(&bad_body, "c"),
            Err(CheckError::Unreadable { what: "heartbeat", .. })
        ));
    }

    /// A `Rule::Fields` names fields of its unit's own typed header, so renaming a header field
    /// cannot leave a rule checking a key no request carries.
    #[test]
    fn field_rules_name_keys_of_their_units_header() {
        let mut checked = 0;
        for unit in crate::front::units() {
            if let Rule::Fields(_, named) = &unit.rule {
                let keys = unit.handle.header_keys();
                for n in *named {
                    let (Named::Topic(f) | Named::Group(f)) = n;
                    assert!(
                        keys.contains(f),
                        "code {}: the rule names {f:?}, not a key of its header {keys:?}",
                        unit.code
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 20, "the field rules were found ({checked})");
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

    /// JSON bodies that the access map reads (a heartbeat, a lock batch), for the property
    /// below to cut and corrupt.
    const BODY_SEEDS: [&str; 2] = [
        r#"{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"orders"}],"unitMode":false}],"producerDataSet":[{"groupName":"pg"}]}"#,
        r#"{"consumerGroup":"cg","clientId":"c1","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"orders"}]}"#,
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        /// What the fuzz target `access` checks, in every run of the tests: any request under any
        /// code the broker serves, with its header's keys holding any values and any body, gets
        /// its rule's checks (no more than the bound) or a refusal, never a panic.
        #[test]
        fn any_request_under_any_served_code_gets_checks_or_a_refusal(
            unit_index in 0usize..4096,
            fields in proptest::collection::vec((0usize..64, "(%RETRY%|%DLQ%|%LMQ%|rmq_sys_)?[a-zA-Z0-9%_|;,-]{0,24}"), 0..8),
            body in petrel_protocol::proptest_support::bodies(&BODY_SEEDS),
        ) {
            let units = crate::front::units();
            let unit = &units[unit_index % units.len()];
            let keys = unit.handle.header_keys();
            let mut ext = ExtFields::default();
            for (key, value) in fields {
                // Mostly the header's own keys; now and then one the header does not have.
                let key = keys.get(key).copied().unwrap_or("topic");
                ext.insert(key.to_owned(), value);
            }
            let request = RemotingCommand::request(unit.code, 1).with_ext_fields(ext).with_body(body);
            if let Ok(checks) = checks_for(&request, "DefaultCluster") {
                proptest::prop_assert!(checks.len() <= MAX_CHECKS, "code {}: {} checks", unit.code, checks.len());
            }
        }
    }
}
