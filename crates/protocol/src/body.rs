//! JSON bodies: route data, cluster info, heartbeats, registration, locks, admin tables.
//!
//! Owns: the body shapes and their Java key names (fields are declared in the alphabetical
//! order fastjson writes bean keys). Must never: emit `null` (omit instead) or a non-standard
//! form a Go client cannot read; the fastjson quirks are written only where Java writes them.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::error::BodyError;
use crate::fastjson::{from_slice_lenient, parse_lenient, write_compact};
pub use crate::model::{
    ConsumeFromWhere, ConsumeType, ConsumerData, DataVersion, EXPRESSION_TYPE_TAG, MessageModel, MessageQueue, MessageRequestMode, SUB_ALL,
    SetMessageRequestModeRequestBody, SubscriptionData, TopicConfig, TopicConfigSerializeWrapper, from_json, perm, to_json,
};

/// QUERY_ASSIGNMENT's body: a client of a group asks which queues of a topic it reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryAssignmentRequestBody {
    /// The topic whose queues are asked for.
    pub topic: String,
    /// The asking client's consumer group.
    pub consumer_group: String,
    /// The asking client's id.
    pub client_id: String,
    /// The client's allocation strategy (`AVG`…), which Java brokers use for pull mode.
    #[serde(default)]
    pub strategy_name: String,
    /// `BROADCASTING` or `CLUSTERING`; a broadcasting client is given every queue.
    #[serde(default)]
    pub message_model: Option<String>,
}

/// One queue a client is given, and how it reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueueAssignment {
    /// The queue given; queue id -1 in pop mode means any queue of the topic on that broker.
    pub message_queue: MessageQueue,
    /// Whether the client pulls or pops it.
    pub mode: MessageRequestMode,
    /// Extra key-value pairs of RocketMQ's body; absent unless a broker sends some.
    #[serde(default)]
    pub attachments: Option<BTreeMap<String, String>>,
}

/// QUERY_ASSIGNMENT's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryAssignmentResponseBody {
    /// The queues the client reads, each with its mode.
    pub message_queue_assignments: Vec<MessageQueueAssignment>,
}

/// Per-broker part of a route: its addresses by broker id (0 = master).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    /// Must always be present: the Go client slices its text without checking.
    #[serde(default)]
    pub broker_addrs: BTreeMap<i64, String>,
    /// The replica group's name, shared by its master and slaves.
    pub broker_name: String,
    /// The cluster the broker belongs to.
    #[serde(default)]
    pub cluster: String,
    /// Whether a slave may stand in for the master while it is down (RocketMQ 5's acting master).
    #[serde(default)]
    pub enable_acting_master: bool,
    /// The zone the broker runs in, for clients that prefer brokers in their own zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

/// Per-broker queue counts and permission of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    /// The broker these counts are for.
    pub broker_name: String,
    /// The topic's permission bits on that broker (see [`perm`]).
    pub perm: i32,
    /// How many queues consumers read.
    pub read_queue_nums: i32,
    /// RocketMQ's `TopicSysFlag` bits (unit topic, unit subscription).
    #[serde(default)]
    pub topic_sys_flag: i32,
    /// How many queues producers write.
    pub write_queue_nums: i32,
}

/// GET_ROUTEINFO_BY_TOPIC answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    /// The brokers serving the topic, with their addresses.
    pub broker_datas: Vec<BrokerData>,
    /// Filter-server addresses by broker address (RocketMQ's retired class filter).
    #[serde(default)]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// An ordered topic's queue counts per broker (`brokerName:queueNums;…`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// The topic's queue counts and permission on each broker.
    pub queue_datas: Vec<QueueData>,
}

fn to_value<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("body types serialize to JSON")
}

impl TopicRouteData {
    /// The body as a Java name server writes it: `brokerAddrs` keys quoted for clients that
    /// announce version ≥ 401 (V4_9_4), bare for older ones such as the Go client (317).
    pub fn to_json(&self, request_version: i32) -> String {
        let standard = request_version >= 401;
        write_compact(&to_value(self), &|k| !standard && k == "brokerAddrs")
    }

    /// Parses the body in either key form, and fastjson's dialect.
    pub fn from_json(body: &[u8]) -> Result<TopicRouteData, BodyError> {
        from_slice_lenient(body)
    }
}

/// GET_BROKER_CLUSTER_INFO answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Every broker by broker name.
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// The broker names of each cluster, by cluster name.
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

impl ClusterInfo {
    /// fastjson's default form, bare integer keys in `brokerAddrs`, which Java writes to everyone.
    pub fn to_json(&self) -> String {
        write_compact(&to_value(self), &|k| k == "brokerAddrs")
    }

    /// Parses the body, bare integer keys included.
    pub fn from_json(body: &[u8]) -> Result<ClusterInfo, BodyError> {
        from_slice_lenient(body)
    }
}

/// A producer group as announced in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    /// The producer group.
    pub group_name: String,
}

/// HEART_BEAT body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatData {
    /// The sending client's id (the Java client's `ip@instanceName`).
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// The consumer groups the client belongs to.
    #[serde(default)]
    pub consumer_data_set: Vec<ConsumerData>,
    /// A hash of the consumer data, which a RocketMQ 5 broker compares to see whether it changed.
    #[serde(default)]
    pub heartbeat_fingerprint: i64,
    /// The producer groups the client belongs to.
    #[serde(default)]
    pub producer_data_set: Vec<ProducerData>,
    /// The subscriptions are left out: unchanged since the heartbeat with this fingerprint.
    #[serde(default)]
    pub without_sub: bool,
}

/// GET_CONSUMER_LIST_BY_GROUP answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerListBody {
    /// The client ids of the group's live consumers.
    pub consumer_id_list: Vec<String>,
}

/// LOCK_BATCH_MQ and UNLOCK_BATCH_MQ request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    /// The client taking or releasing the locks.
    pub client_id: String,
    /// The consumer group the locks are held for.
    pub consumer_group: String,
    /// The queues to lock or unlock.
    #[serde(default)]
    pub mq_set: Vec<MessageQueue>,
    /// Lock on the receiving broker alone; otherwise a Java broker in strict lock mode also
    /// asks the other replicas of its group.
    #[serde(default)]
    pub only_this_broker: bool,
}

/// UNLOCK_BATCH_MQ's body, the same shape as LOCK_BATCH_MQ's.
pub type UnlockBatchRequestBody = LockBatchRequestBody;

/// LOCK_BATCH_MQ answer: the queues now locked by the requesting client.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LockBatchResponseBody {
    /// The queues locked by the client, newly or already.
    #[serde(rename = "lockOKMQSet", default)]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

/// QUERY_TOPIC_CONSUME_BY_WHO's answer: the groups that consume a topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupList {
    /// The group names.
    pub group_list: Vec<String>,
}

/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GET_TOPICS_BY_CLUSTER answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    /// A broker to ask for more (RocketMQ sets it in the system-topic list); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    /// The topic names.
    pub topic_list: Vec<String>,
}

/// A string table (GET_BROKER_RUNTIME_INFO, KV lists). Order is kept as given.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvTable {
    /// The entries, in the order given.
    pub table: IndexMap<String, String>,
}

/// REGISTER_BROKER body (uncompressed form).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    /// Addresses of the broker's filter servers (RocketMQ's retired class filter).
    #[serde(default)]
    pub filter_server_list: Vec<String>,
    /// The broker's topics and their version.
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

/// `crc32(body) & 0x7FFFFFFF`: the `bodyCrc32` of REGISTER_BROKER.
pub fn register_body_crc32(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// Offsets of one queue in GET_TOPIC_STATS_INFO.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicOffset {
    /// Store time of the queue's newest message, epoch milliseconds; 0 if none.
    pub last_update_timestamp: i64,
    /// The offset the next message will get.
    pub max_offset: i64,
    /// The offset of the oldest message still held.
    pub min_offset: i64,
}

/// Progress of one queue in GET_CONSUME_STATS.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetWrapper {
    /// The queue's max offset: where the next message will be stored.
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
    /// Store time of the last consumed message, epoch milliseconds; 0 if none.
    #[serde(default)]
    pub last_timestamp: i64,
    /// Where the group's pulls have reached: the offset after the last one pulled.
    #[serde(default)]
    pub pull_offset: i64,
}

/// Writes `{"offsetTable":{MQ:V,...},"<tps_key>":tps}` with MessageQueue objects as keys,
/// exactly as fastjson writes `Map<MessageQueue, V>`; bean keys in fastjson's sorted order.
fn write_mq_table<V: Serialize>(tps_key: &str, tps: f64, table: &[(MessageQueue, V)]) -> String {
    let table_part = mq_table_part(table);
    let tps_part = format!("\"{tps_key}\":{}", java_double(tps));
    if tps_key < "offsetTable" {
        format!("{{{tps_part},{table_part}}}")
    } else {
        format!("{{{table_part},{tps_part}}}")
    }
}

/// `"offsetTable":{MQ:V,...}`.
fn mq_table_part<V: Serialize>(table: &[(MessageQueue, V)]) -> String {
    let mut entries = String::new();
    for (i, (mq, v)) in table.iter().enumerate() {
        if i > 0 {
            entries.push(',');
        }
        entries.push_str(&to_json(mq));
        entries.push(':');
        entries.push_str(&to_json(v));
    }
    format!("\"offsetTable\":{{{entries}}}")
}

/// INVOKE_BROKER_TO_RESET_OFFSET's answer: the offset each queue was reset to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResetOffsetBody {
    /// Each queue and its new offset.
    pub offset_table: Vec<(MessageQueue, i64)>,
}

impl ResetOffsetBody {
    /// fastjson's form, with the queues as object keys.
    pub fn to_json(&self) -> String {
        format!("{{{}}}", mq_table_part(&self.offset_table))
    }

    /// # Errors
    /// Not the shape above.
    pub fn from_json(body: &[u8]) -> Result<ResetOffsetBody, BodyError> {
        let (offset_table, _) = read_mq_table(body, "offsetTable")?;
        Ok(ResetOffsetBody { offset_table })
    }
}

/// Java prints whole doubles with a trailing `.0`; JSON has no NaN or infinity, so those are 0.0.
fn java_double(v: f64) -> String {
    if !v.is_finite() {
        "0.0".to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn read_mq_table<V: serde::de::DeserializeOwned>(body: &[u8], tps_key: &str) -> Result<(Vec<(MessageQueue, V)>, f64), BodyError> {
    let v = parse_lenient(body)?;
    let shape = |m: &str| BodyError::Shape(m.to_owned());
    let table = v
        .get("offsetTable")
        .and_then(|t| t.as_object())
        .ok_or_else(|| shape("missing offsetTable"))?;
    let mut out = Vec::with_capacity(table.len());
    for (k, val) in table {
        let mq: MessageQueue = serde_json::from_str(k).map_err(|e| BodyError::Shape(format!("offsetTable key {k:?}: {e}")))?;
        let val: V = serde_json::from_value(val.clone()).map_err(|e| BodyError::Shape(e.to_string()))?;
        out.push((mq, val));
    }
    let tps = v.get(tps_key).and_then(|t| t.as_f64()).unwrap_or(0.0);
    Ok((out, tps))
}

/// GET_TOPIC_STATS_INFO answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicStatsTable {
    /// Each queue of the topic and its offsets.
    pub offset_table: Vec<(MessageQueue, TopicOffset)>,
    /// Messages put per second.
    pub topic_put_tps: f64,
}

impl TopicStatsTable {
    /// fastjson's form, with the queues as object keys.
    pub fn to_json(&self) -> String {
        write_mq_table("topicPutTps", self.topic_put_tps, &self.offset_table)
    }

    /// Parses fastjson's form.
    pub fn from_json(body: &[u8]) -> Result<TopicStatsTable, BodyError> {
        let (offset_table, topic_put_tps) = read_mq_table(body, "topicPutTps")?;
        Ok(TopicStatsTable {
            offset_table,
            topic_put_tps,
        })
    }
}

/// GET_CONSUME_STATS answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumeStats {
    /// Each queue the group reads and its progress.
    pub offset_table: Vec<(MessageQueue, OffsetWrapper)>,
    /// Messages consumed per second.
    pub consume_tps: f64,
}

impl ConsumeStats {
    /// fastjson's form, with the queues as object keys.
    pub fn to_json(&self) -> String {
        write_mq_table("consumeTps", self.consume_tps, &self.offset_table)
    }

    /// Parses fastjson's form.
    pub fn from_json(body: &[u8]) -> Result<ConsumeStats, BodyError> {
        let (offset_table, consume_tps) = read_mq_table(body, "consumeTps")?;
        Ok(ConsumeStats { offset_table, consume_tps })
    }
}

/// One client connection in GET_CONSUMER_CONNECTION_LIST.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// The client's address, `host:port`.
    pub client_addr: String,
    /// The client's id.
    pub client_id: String,
    /// The client's language (`JAVA`, `GO`…).
    pub language: String,
    /// The RocketMQ version code the client announces.
    pub version: i32,
}

/// GET_CONSUMER_RUNNING_INFO's answer as a broker builds it for a client that cannot send its
/// own (a gRPC client): its properties, subscriptions and, when asked, its thread stacks. The
/// queue tables stay empty: a gRPC consumer holds no queues (the broker assigns on each receive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerRunningInfo {
    /// `PROP_CONSUME_TYPE`, `PROP_CLIENT_VERSION`, `PROP_CONSUMEORDERLY`… (strings, as Java's
    /// `Properties`).
    pub properties: IndexMap<String, String>,
    /// What the consumer subscribes to.
    pub subscription_set: Vec<SubscriptionData>,
    /// Queue → its processing state (none for a gRPC consumer).
    pub mq_table: IndexMap<String, serde_json::Value>,
    /// Topic → consume rates and times (none for a gRPC consumer).
    pub status_table: IndexMap<String, serde_json::Value>,
    /// The client's thread stacks, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jstack: Option<String>,
}

/// The keys of [`ConsumerRunningInfo::properties`] RocketMQ's admin tools read.
pub mod running_info_keys {
    /// `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull, simple).
    pub const CONSUME_TYPE: &str = "PROP_CONSUME_TYPE";
    /// The client's version, as `V5_2_0`.
    pub const CLIENT_VERSION: &str = "PROP_CLIENT_VERSION";
    /// Whether the consumer consumes in order.
    pub const CONSUME_ORDERLY: &str = "PROP_CONSUMEORDERLY";
    /// When the consumer started (ms since the epoch).
    pub const START_TIMESTAMP: &str = "PROP_CONSUMER_START_TIMESTAMP";
}

/// How a consumer's direct consumption ended (RocketMQ's `CMResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsumeResult {
    /// Consumed.
    #[serde(rename = "CR_SUCCESS")]
    Success,
    /// The listener asked for it later.
    #[serde(rename = "CR_LATER")]
    Later,
    /// A transactional listener rolled back.
    #[serde(rename = "CR_ROLLBACK")]
    Rollback,
    /// A transactional listener committed.
    #[serde(rename = "CR_COMMIT")]
    Commit,
    /// The listener threw.
    #[serde(rename = "CR_THROW_EXCEPTION")]
    ThrowException,
    /// The listener returned nothing (or the message did not decode).
    #[serde(rename = "CR_RETURN_NULL")]
    ReturnNull,
}

/// CONSUME_MESSAGE_DIRECTLY's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeMessageDirectlyResult {
    /// Whether the consumer is an orderly one.
    pub order: bool,
    /// Whether its offsets commit on their own.
    pub auto_commit: bool,
    /// How it went.
    pub consume_result: ConsumeResult,
    /// Who answered, or why it failed.
    pub remark: String,
    /// How long the consumption took, in ms (RocketMQ's spelling).
    pub spent_time_mills: i64,
}

/// GET_PRODUCER_CONNECTION_LIST answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerConnection {
    /// The group's connected producers.
    pub connection_set: Vec<Connection>,
}

/// GET_CONSUMER_CONNECTION_LIST answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerConnection {
    /// The group's connected clients.
    pub connection_set: Vec<Connection>,
    /// Where the group starts on a queue it has no committed offset for.
    pub consume_from_where: ConsumeFromWhere,
    /// Pull, push or POP.
    pub consume_type: ConsumeType,
    /// Broadcasting or clustering.
    pub message_model: MessageModel,
    /// The group's subscriptions, by topic.
    pub subscription_table: IndexMap<String, SubscriptionData>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_data_matches_java_in_both_key_forms() {
        let route = TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: BTreeMap::from([(0, "127.0.0.1:10911".to_owned())]),
                broker_name: "broker-a".into(),
                cluster: "DefaultCluster".into(),
                enable_acting_master: false,
                zone_name: None,
            }],
            filter_server_table: BTreeMap::new(),
            order_topic_conf: None,
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                perm: 6,
                read_queue_nums: 4,
                topic_sys_flag: 0,
                write_queue_nums: 4,
            }],
        };
        let quoted = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
        assert_eq!(route.to_json(513), quoted);
        assert_eq!(route.to_json(317), quoted.replace(r#"{"0":"#, "{0:"));
        assert_eq!(TopicRouteData::from_json(route.to_json(317).as_bytes()).unwrap(), route);
    }

    #[test]
    fn heartbeat_accepts_go_dialect() {
        let go = br#"{"clientID":"192.0.2.2@g","producerDataSet":[],"consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"Clustering","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"TagA || TagB","tagsSet":["TagA","TagB"],"codeSet":["2598919","2598920"],"subVersion":1795350424409110915,"expressionType":"TAG"}],"unitMode":false}]}"#;
        let hb: HeartbeatData = from_json(go).unwrap();
        let sub = &hb.consumer_data_set[0].subscription_data_set[0];
        assert_eq!(hb.consumer_data_set[0].message_model, MessageModel::Clustering);
        assert_eq!(sub.code_set, vec![2598919, 2598920]);
        assert_eq!(sub.sub_version, 1795350424409110915);
        assert_eq!(SubscriptionData::from_tag_expression("T", "TagA || TagB", sub.sub_version), *sub);
    }

    #[test]
    fn mq_keyed_tables_use_object_keys() {
        let mq = MessageQueue {
            broker_name: "broker-a".into(),
            queue_id: 0,
            topic: "TopicTest".into(),
        };
        let stats = TopicStatsTable {
            offset_table: vec![(
                mq.clone(),
                TopicOffset {
                    last_update_timestamp: 1732270000000,
                    max_offset: 10,
                    min_offset: 0,
                },
            )],
            topic_put_tps: 0.0,
        };
        let json = stats.to_json();
        assert_eq!(
            json,
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"lastUpdateTimestamp":1732270000000,"maxOffset":10,"minOffset":0}},"topicPutTps":0.0}"#
        );
        assert_eq!(TopicStatsTable::from_json(json.as_bytes()).unwrap(), stats);
        let cs = ConsumeStats {
            offset_table: vec![(
                mq,
                OffsetWrapper {
                    broker_offset: 10,
                    consumer_offset: 10,
                    last_timestamp: 1732270000000,
                    pull_offset: 10,
                },
            )],
            consume_tps: 1.5,
        };
        let json = cs.to_json();
        assert!(json.starts_with(r#"{"consumeTps":1.5,"offsetTable":{{"brokerName""#), "{json}");
        assert_eq!(ConsumeStats::from_json(json.as_bytes()).unwrap(), cs);
    }
}

/// RocketMQ's `SyncStateSet` body: the broker ids whose acks count in a broker set, and the
/// set's epoch (controller requests 1001–1004).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStateSetBody {
    /// The ids of the brokers in sync with the master.
    pub sync_state_set: Vec<i64>,
    /// Bumped each time the set changes.
    pub sync_state_set_epoch: i32,
}
