//! JSON bodies: route data, cluster info, heartbeats, registration, locks, admin tables.
//!
//! Owns: the body shapes and their Java key names (fields are declared in the alphabetical
//! order fastjson writes bean keys). Must never: emit `null` (omit instead) or a non-standard
//! form a Go client cannot read; the fastjson quirks are written only where Java writes them.

use indexmap::IndexMap;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;

use crate::error::BodyError;
use crate::fastjson::{from_slice_lenient, parse_lenient, write_compact};

/// Declares an enum written as its Java name and read case-insensitively, as fastjson does.
macro_rules! java_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),* }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
            pub fn parse(s: &str) -> Option<$name> {
                $(if s.eq_ignore_ascii_case($text) { return Some($name::$variant); })*
                None
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::parse(&s).ok_or_else(|| de::Error::custom(format!("unknown {} {:?}", stringify!($name), s)))
            }
        }
    };
}

java_enum! {
    /// How a consumer group receives messages.
    pub enum MessageModel { Broadcasting = "BROADCASTING", Clustering = "CLUSTERING" }
}

java_enum! {
    /// Pull (actively), push (passively) or POP consumers.
    pub enum ConsumeType { ConsumeActively = "CONSUME_ACTIVELY", ConsumePassively = "CONSUME_PASSIVELY", ConsumePop = "CONSUME_POP" }
}

java_enum! {
    /// Where a consumer group without a committed offset starts.
    pub enum ConsumeFromWhere {
        ConsumeFromLastOffset = "CONSUME_FROM_LAST_OFFSET",
        ConsumeFromLastOffsetAndFromMinWhenBootFirst = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        ConsumeFromMinOffset = "CONSUME_FROM_MIN_OFFSET",
        ConsumeFromMaxOffset = "CONSUME_FROM_MAX_OFFSET",
        ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        ConsumeFromTimestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

/// A set of i32 that also accepts its numbers written as strings (Go's `codeSet`).
fn lenient_i32_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
    struct Item(i32);
    impl<'de> Deserialize<'de> for Item {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Item;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an integer or a string holding one")
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Item, E> {
                    i32::try_from(v).map(Item).map_err(E::custom)
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Item, E> {
                    i32::try_from(v).map(Item).map_err(E::custom)
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Item, E> {
                    v.trim().parse().map(Item).map_err(E::custom)
                }
            }
            d.deserialize_any(V)
        }
    }
    Ok(Option::<Vec<Item>>::deserialize(d)?
        .unwrap_or_default()
        .into_iter()
        .map(|i| i.0)
        .collect())
}

/// A topic queue on a broker: the key of offset tables and lock sets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    pub broker_name: String,
    pub queue_id: i32,
    pub topic: String,
}

/// How a consumer group reads a topic (`MessageRequestMode`): pulls of queues its clients
/// balance, or pops that the broker balances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MessageRequestMode {
    #[default]
    #[serde(rename = "PULL")]
    Pull,
    #[serde(rename = "POP")]
    Pop,
}

/// SET_MESSAGE_REQUEST_MODE's body (`mqadmin setConsumeMode`), and an entry of
/// `messageRequestMode.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetMessageRequestModeRequestBody {
    pub topic: String,
    pub consumer_group: String,
    #[serde(default)]
    pub mode: MessageRequestMode,
    #[serde(default)]
    pub pop_share_queue_num: i32,
}

/// QUERY_ASSIGNMENT's body: a client of a group asks which queues of a topic it reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryAssignmentRequestBody {
    pub topic: String,
    pub consumer_group: String,
    pub client_id: String,
    #[serde(default)]
    pub strategy_name: String,
    #[serde(default)]
    pub message_model: Option<String>,
}

/// One queue a client is given, and how it reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueueAssignment {
    pub message_queue: MessageQueue,
    pub mode: MessageRequestMode,
    #[serde(default)]
    pub attachments: Option<BTreeMap<String, String>>,
}

/// QUERY_ASSIGNMENT's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryAssignmentResponseBody {
    pub message_queue_assignments: Vec<MessageQueueAssignment>,
}

/// Per-broker part of a route: its addresses by broker id (0 = master).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    /// Must always be present: the Go client slices its text without checking.
    #[serde(default)]
    pub broker_addrs: BTreeMap<i64, String>,
    pub broker_name: String,
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub enable_acting_master: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

/// Per-broker queue counts and permission of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    pub broker_name: String,
    pub perm: i32,
    pub read_queue_nums: i32,
    #[serde(default)]
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
}

/// Topic permission bits.
pub mod perm {
    pub const PRIORITY: i32 = 8;
    pub const READ: i32 = 4;
    pub const WRITE: i32 = 2;
    pub const INHERIT: i32 = 1;
}

/// GET_ROUTEINFO_BY_TOPIC answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    pub broker_datas: Vec<BrokerData>,
    #[serde(default)]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
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

    pub fn from_json(body: &[u8]) -> Result<TopicRouteData, BodyError> {
        from_slice_lenient(body)
    }
}

/// GET_BROKER_CLUSTER_INFO answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

impl ClusterInfo {
    /// fastjson's default form, bare integer keys in `brokerAddrs`, which Java writes to everyone.
    pub fn to_json(&self) -> String {
        write_compact(&to_value(self), &|k| k == "brokerAddrs")
    }

    pub fn from_json(body: &[u8]) -> Result<ClusterInfo, BodyError> {
        from_slice_lenient(body)
    }
}

/// One subscription of a consumer group to a topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    #[serde(default)]
    pub class_filter_mode: bool,
    /// Java `String.hashCode()` of each tag; Go writes these as strings.
    #[serde(default, deserialize_with = "lenient_i32_vec")]
    pub code_set: Vec<i32>,
    #[serde(default = "default_expression_type")]
    pub expression_type: String,
    #[serde(default)]
    pub sub_string: String,
    /// Java sends milliseconds, Go nanoseconds.
    #[serde(default)]
    pub sub_version: i64,
    #[serde(default)]
    pub tags_set: Vec<String>,
    pub topic: String,
}

fn default_expression_type() -> String {
    "TAG".to_owned()
}

/// Expression type of plain tag subscriptions.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// Subscription string meaning every tag.
pub const SUB_ALL: &str = "*";

impl SubscriptionData {
    /// Builds a TAG subscription from `"A || B"` the way the clients do: tags trimmed, empty or
    /// `*` meaning all.
    pub fn from_tag_expression(topic: &str, expression: &str, sub_version: i64) -> SubscriptionData {
        let expression = expression.trim();
        let (sub_string, tags_set) = if expression.is_empty() || expression == SUB_ALL {
            (SUB_ALL.to_owned(), Vec::new())
        } else {
            let tags: Vec<String> = expression
                .split("||")
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
            (expression.to_owned(), tags)
        };
        SubscriptionData {
            class_filter_mode: false,
            code_set: tags_set.iter().map(|t| crate::properties::java_string_hash(t)).collect(),
            expression_type: EXPRESSION_TYPE_TAG.to_owned(),
            sub_string,
            sub_version,
            tags_set,
            topic: topic.to_owned(),
        }
    }

    pub fn is_all(&self) -> bool {
        self.sub_string.is_empty() || self.sub_string == SUB_ALL
    }
}

/// A consumer group as announced in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    pub consume_from_where: ConsumeFromWhere,
    pub consume_type: ConsumeType,
    pub group_name: String,
    pub message_model: MessageModel,
    #[serde(default)]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(default)]
    pub unit_mode: bool,
}

/// A producer group as announced in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    pub group_name: String,
}

/// HEART_BEAT body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatData {
    #[serde(rename = "clientID")]
    pub client_id: String,
    #[serde(default)]
    pub consumer_data_set: Vec<ConsumerData>,
    #[serde(default)]
    pub heartbeat_fingerprint: i64,
    #[serde(default)]
    pub producer_data_set: Vec<ProducerData>,
    #[serde(default)]
    pub without_sub: bool,
}

/// GET_CONSUMER_LIST_BY_GROUP answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerListBody {
    pub consumer_id_list: Vec<String>,
}

/// LOCK_BATCH_MQ and UNLOCK_BATCH_MQ request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    pub client_id: String,
    pub consumer_group: String,
    #[serde(default)]
    pub mq_set: Vec<MessageQueue>,
    #[serde(default)]
    pub only_this_broker: bool,
}

pub type UnlockBatchRequestBody = LockBatchRequestBody;

/// LOCK_BATCH_MQ answer: the queues now locked by the requesting client.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet", default)]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GET_TOPICS_BY_CLUSTER answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    pub topic_list: Vec<String>,
}

/// A string table (GET_BROKER_RUNTIME_INFO, KV lists). Order is kept as given.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvTable {
    pub table: IndexMap<String, String>,
}

/// A topic's configuration as brokers store and register it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub order: bool,
    pub perm: i32,
    pub read_queue_nums: i32,
    #[serde(default = "default_filter_type")]
    pub topic_filter_type: String,
    pub topic_name: String,
    #[serde(default)]
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
}

fn default_filter_type() -> String {
    "SINGLE_TAG".to_owned()
}

impl TopicConfig {
    /// A plain topic: RocketMQ's `new TopicConfig(name)` has 16 read and 16 write queues, perm RW.
    pub fn new(topic_name: &str, queue_nums: i32, perm: i32) -> TopicConfig {
        TopicConfig {
            attributes: BTreeMap::new(),
            order: false,
            perm,
            read_queue_nums: queue_nums,
            topic_filter_type: default_filter_type(),
            topic_name: topic_name.to_owned(),
            topic_sys_flag: 0,
            write_queue_nums: queue_nums,
        }
    }
}

/// Version stamp of a broker's topic table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    pub counter: i64,
    #[serde(default)]
    pub state_version: i64,
    pub timestamp: i64,
}

/// A broker's topic table with its versions (REGISTER_BROKER, GET_ALL_TOPIC_CONFIG).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    pub data_version: DataVersion,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping_data_version: Option<DataVersion>,
    pub topic_config_table: IndexMap<String, TopicConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_detail_map: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_info_map: Option<serde_json::Map<String, serde_json::Value>>,
}

/// REGISTER_BROKER body (uncompressed form).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    #[serde(default)]
    pub filter_server_list: Vec<String>,
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
    pub last_update_timestamp: i64,
    pub max_offset: i64,
    pub min_offset: i64,
}

/// Progress of one queue in GET_CONSUME_STATS.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetWrapper {
    pub broker_offset: i64,
    pub consumer_offset: i64,
    #[serde(default)]
    pub last_timestamp: i64,
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
    pub offset_table: Vec<(MessageQueue, i64)>,
}

impl ResetOffsetBody {
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
    pub offset_table: Vec<(MessageQueue, TopicOffset)>,
    pub topic_put_tps: f64,
}

impl TopicStatsTable {
    pub fn to_json(&self) -> String {
        write_mq_table("topicPutTps", self.topic_put_tps, &self.offset_table)
    }

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
    pub offset_table: Vec<(MessageQueue, OffsetWrapper)>,
    pub consume_tps: f64,
}

impl ConsumeStats {
    pub fn to_json(&self) -> String {
        write_mq_table("consumeTps", self.consume_tps, &self.offset_table)
    }

    pub fn from_json(body: &[u8]) -> Result<ConsumeStats, BodyError> {
        let (offset_table, consume_tps) = read_mq_table(body, "consumeTps")?;
        Ok(ConsumeStats { offset_table, consume_tps })
    }
}

/// One client connection in GET_CONSUMER_CONNECTION_LIST.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    pub client_addr: String,
    pub client_id: String,
    pub language: String,
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerConnection {
    pub connection_set: Vec<Connection>,
    pub consume_from_where: ConsumeFromWhere,
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    pub subscription_table: IndexMap<String, SubscriptionData>,
}

/// Serializes a body type as compact standard JSON.
pub fn to_json<T: Serialize>(body: &T) -> String {
    serde_json::to_string(body).expect("body types serialize to JSON")
}

/// Parses a body type, accepting fastjson's dialect.
pub fn from_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, BodyError> {
    from_slice_lenient(body)
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
    pub sync_state_set: Vec<i64>,
    pub sync_state_set_epoch: i32,
}
