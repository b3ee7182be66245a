//! RocketMQ's records: a topic's configuration, a subscription, a consumer's registration, a
//! group's request mode, a queue's name, and the permission bits. The broker keeps them and
//! persists them in RocketMQ's own files (`topics.json`, `subscriptionGroup.json`,
//! `messageRequestMode.json`), which a slave copies from its master as they are; every front
//! end reads and answers them (the remoting bodies carry them as they are, the gRPC front end
//! maps its messages into them). The envelopes that carry them on the remoting wire, and the
//! answers built from them, are in [`crate::body`].
//!
//! Owns: these records' shapes and their Java key names (declared in the alphabetical order
//! fastjson writes bean keys). Must never: name a request or response; a record that only a
//! request carries belongs in `body`.

use indexmap::IndexMap;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;

use crate::error::BodyError;
use crate::fastjson::from_slice_lenient;

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

fn default_filter_type() -> String {
    "SINGLE_TAG".to_owned()
}

fn default_expression_type() -> String {
    EXPRESSION_TYPE_TAG.to_owned()
}

/// Declares an enum written as its Java name and read case-insensitively, as fastjson does.
macro_rules! java_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vmeta])* $variant),* }

        impl $name {
            /// The Java constant's name, as written in JSON bodies.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
            /// The value whose Java name is `s`, ignoring ASCII case as fastjson does; `None` if
            /// there is none.
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
    pub enum MessageModel {
        /// Every client of the group receives every message.
        Broadcasting = "BROADCASTING",
        /// The group's clients share the queues; each message goes to one of them.
        Clustering = "CLUSTERING",
    }
}

java_enum! {
    /// Pull (actively), push (passively) or POP consumers.
    pub enum ConsumeType {
        /// A pull consumer: the application asks for messages.
        ConsumeActively = "CONSUME_ACTIVELY",
        /// A push consumer: the client library pulls and hands messages to a listener.
        ConsumePassively = "CONSUME_PASSIVELY",
        /// A POP consumer: the broker chooses the queue and hides what it hands out until acked.
        ConsumePop = "CONSUME_POP",
    }
}

java_enum! {
    /// Where a consumer group without a committed offset starts.
    pub enum ConsumeFromWhere {
        /// At the end of each queue: only messages stored from now on.
        ConsumeFromLastOffset = "CONSUME_FROM_LAST_OFFSET",
        /// Deprecated in the Java client, which treats it as `CONSUME_FROM_LAST_OFFSET`.
        ConsumeFromLastOffsetAndFromMinWhenBootFirst = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        /// Deprecated in the Java client, which treats it as `CONSUME_FROM_LAST_OFFSET`.
        ConsumeFromMinOffset = "CONSUME_FROM_MIN_OFFSET",
        /// Deprecated in the Java client, which treats it as `CONSUME_FROM_LAST_OFFSET`.
        ConsumeFromMaxOffset = "CONSUME_FROM_MAX_OFFSET",
        /// At the oldest message each queue still holds.
        ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        /// At the first message stored at or after the consumer's start timestamp.
        ConsumeFromTimestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

/// A topic queue on a broker: the key of offset tables and lock sets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    /// The broker (replica group) holding the queue.
    pub broker_name: String,
    /// The queue's number within the topic on that broker.
    pub queue_id: i32,
    /// The topic the queue belongs to.
    pub topic: String,
}

/// How a consumer group reads a topic (`MessageRequestMode`): pulls of queues its clients
/// balance, or pops that the broker balances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MessageRequestMode {
    /// Each client pulls the queues the group's clients divide among themselves.
    #[default]
    #[serde(rename = "PULL")]
    Pull,
    /// Clients pop, and the broker decides which messages each one gets.
    #[serde(rename = "POP")]
    Pop,
}

/// SET_MESSAGE_REQUEST_MODE's body (`mqadmin setConsumeMode`), and an entry of
/// `messageRequestMode.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetMessageRequestModeRequestBody {
    /// The topic the mode applies to.
    pub topic: String,
    /// The consumer group the mode applies to.
    pub consumer_group: String,
    /// Pull or pop; pull when absent.
    #[serde(default)]
    pub mode: MessageRequestMode,
    /// In pop mode, how many other clients' queue shares each client also pops; 0 (or at least
    /// the group's size less one): every client pops every queue.
    #[serde(default)]
    pub pop_share_queue_num: i32,
}

/// Topic permission bits.
pub mod perm {
    /// The topic is a priority topic (`PERM_PRIORITY`).
    pub const PRIORITY: i32 = 8;
    /// Consumers may read the topic.
    pub const READ: i32 = 4;
    /// Producers may write the topic.
    pub const WRITE: i32 = 2;
    /// Topics auto-created from this one inherit its settings (set on `TBW102`).
    pub const INHERIT: i32 = 1;
}

/// One subscription of a consumer group to a topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    /// Whether messages are filtered by an uploaded Java class (a retired RocketMQ feature).
    #[serde(default)]
    pub class_filter_mode: bool,
    /// Java `String.hashCode()` of each tag; Go writes these as strings.
    #[serde(default, deserialize_with = "lenient_i32_vec")]
    pub code_set: Vec<i32>,
    /// How `sub_string` is read: `TAG` (the default) or `SQL92`.
    #[serde(default = "default_expression_type")]
    pub expression_type: String,
    /// The expression: tags joined by `||`, `*` for every message, or an SQL92 filter.
    #[serde(default)]
    pub sub_string: String,
    /// Java sends milliseconds, Go nanoseconds.
    #[serde(default)]
    pub sub_version: i64,
    /// The tags of a TAG expression, trimmed; empty when it takes every tag.
    #[serde(default)]
    pub tags_set: Vec<String>,
    /// The subscribed topic.
    pub topic: String,
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

    /// Whether the subscription takes every message (`*` or an empty expression).
    pub fn is_all(&self) -> bool {
        self.sub_string.is_empty() || self.sub_string == SUB_ALL
    }
}

/// A consumer group as announced in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    /// Where the group starts on a queue it has no committed offset for.
    pub consume_from_where: ConsumeFromWhere,
    /// Pull, push or POP.
    pub consume_type: ConsumeType,
    /// The consumer group.
    pub group_name: String,
    /// Broadcasting or clustering.
    pub message_model: MessageModel,
    /// The group's subscriptions, one per topic.
    #[serde(default)]
    pub subscription_data_set: Vec<SubscriptionData>,
    /// RocketMQ's unit (cell deployment) mode; open-source clients send false.
    #[serde(default)]
    pub unit_mode: bool,
}

/// A topic's configuration as brokers store and register it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    /// RocketMQ 5's topic attributes (`message.type`…), by name.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Whether the topic is ordered.
    #[serde(default)]
    pub order: bool,
    /// Permission bits (see [`perm`]).
    pub perm: i32,
    /// How many queues consumers read.
    pub read_queue_nums: i32,
    /// `SINGLE_TAG` (the default) or `MULTI_TAG`.
    #[serde(default = "default_filter_type")]
    pub topic_filter_type: String,
    /// The topic's name.
    pub topic_name: String,
    /// RocketMQ's `TopicSysFlag` bits (unit topic, unit subscription).
    #[serde(default)]
    pub topic_sys_flag: i32,
    /// How many queues producers write.
    pub write_queue_nums: i32,
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
    /// Bumped on every change of the table.
    pub counter: i64,
    /// The store's state-machine version at the last change (DLedger brokers); 0 otherwise.
    #[serde(default)]
    pub state_version: i64,
    /// When the table last changed, epoch milliseconds.
    pub timestamp: i64,
}

/// A broker's topic table with its versions (REGISTER_BROKER, GET_ALL_TOPIC_CONFIG).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    /// The version of `topic_config_table`.
    pub data_version: DataVersion,
    /// The version of the static-topic mappings, from brokers that have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping_data_version: Option<DataVersion>,
    /// Every topic's configuration, by topic name.
    pub topic_config_table: IndexMap<String, TopicConfig>,
    /// RocketMQ's static-topic queue mappings in detail, kept as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_detail_map: Option<serde_json::Map<String, serde_json::Value>>,
    /// RocketMQ's static-topic queue mapping summaries, kept as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_info_map: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Serializes a record (or a body) as compact standard JSON.
#[must_use]
pub fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("body types serialize to JSON")
}

/// Parses a record (or a body), accepting fastjson's dialect.
///
/// # Errors
/// The bytes are not JSON in fastjson's dialect, or not of `T`'s shape.
pub fn from_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    from_slice_lenient(bytes)
}
