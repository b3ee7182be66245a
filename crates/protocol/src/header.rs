//! Typed request and response headers, converted to and from a command's `extFields`.
//!
//! Owns: the key names and value types of each header (Java field name → decimal/boolean
//! string). Must never: apply broker semantics; a missing required key or an unparsable value is
//! a typed error here and the caller decides the response code.

use crate::codes::request_code;
use crate::command::{ExtFields, RemotingCommand};
use crate::error::HeaderError;

/// A header that lives in `extFields`.
pub trait CommandHeader: Sized {
    /// The `extFields` keys of this header, in the order they are written.
    const KEYS: &'static [&'static str];

    /// Appends this header's non-null fields to `ext`.
    fn write_ext(&self, ext: &mut ExtFields);

    /// Builds the header; unknown keys are ignored, as Java does.
    fn from_ext(ext: &ExtFields) -> Result<Self, HeaderError>;

    /// This header's non-null fields as a new `extFields` map.
    fn to_ext(&self) -> ExtFields {
        let mut ext = ExtFields::default();
        self.write_ext(&mut ext);
        ext
    }

    /// Reads the header of `cmd`; a command without `extFields` reads as an empty map.
    fn from_command(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        match &cmd.ext_fields {
            Some(ext) => Self::from_ext(ext),
            None => Self::from_ext(&ExtFields::default()),
        }
    }
}

/// One scalar as Java's `toString()` writes it and its parser reads it.
pub trait HeaderScalar: Sized {
    /// What a valid value looks like, for [`HeaderError::Invalid`].
    const EXPECTED: &'static str;
    /// Parses the text of a field; `None` if it is not a value of this type.
    fn parse_value(raw: &str) -> Option<Self>;
    /// The text Java writes for this value.
    fn format_value(&self) -> String;
}

impl HeaderScalar for String {
    const EXPECTED: &'static str = "a string";
    fn parse_value(raw: &str) -> Option<Self> {
        Some(raw.to_owned())
    }
    fn format_value(&self) -> String {
        self.clone()
    }
}

macro_rules! integer_scalar {
    ($($t:ty => $what:literal),*) => {$(
        impl HeaderScalar for $t {
            const EXPECTED: &'static str = $what;
            fn parse_value(raw: &str) -> Option<Self> {
                raw.trim().parse().ok()
            }
            fn format_value(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
integer_scalar!(i32 => "a 32-bit integer", i64 => "a 64-bit integer");

impl HeaderScalar for bool {
    const EXPECTED: &'static str = "true or false";
    fn parse_value(raw: &str) -> Option<Self> {
        if raw.eq_ignore_ascii_case("true") {
            Some(true)
        } else if raw.eq_ignore_ascii_case("false") {
            Some(false)
        } else {
            None
        }
    }
    fn format_value(&self) -> String {
        self.to_string()
    }
}

/// A header field: a scalar is required, an `Option` of one is not.
pub trait HeaderField: Sized {
    /// Reads the field `key` from its text, `None` when absent (an error for a required field).
    fn read(key: &'static str, raw: Option<&str>) -> Result<Self, HeaderError>;
    /// The field's text; `None` leaves the key out.
    fn write(&self) -> Option<String>;
}

fn parse_scalar<T: HeaderScalar>(key: &'static str, raw: &str) -> Result<T, HeaderError> {
    T::parse_value(raw).ok_or_else(|| HeaderError::Invalid {
        key,
        value: raw.to_owned(),
        expected: T::EXPECTED,
    })
}

impl<T: HeaderScalar> HeaderField for T {
    fn read(key: &'static str, raw: Option<&str>) -> Result<Self, HeaderError> {
        parse_scalar(key, raw.ok_or(HeaderError::Missing(key))?)
    }
    fn write(&self) -> Option<String> {
        Some(self.format_value())
    }
}

impl<T: HeaderScalar> HeaderField for Option<T> {
    fn read(key: &'static str, raw: Option<&str>) -> Result<Self, HeaderError> {
        raw.map(|r| parse_scalar(key, r)).transpose()
    }
    fn write(&self) -> Option<String> {
        self.as_ref().map(HeaderScalar::format_value)
    }
}

/// Declares a header struct whose fields map to `extFields` keys, in wire order.
macro_rules! command_header {
    ($(#[$meta:meta])* pub struct $name:ident { $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $key:literal ),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl CommandHeader for $name {
            const KEYS: &'static [&'static str] = &[$($key),*];

            fn write_ext(&self, ext: &mut ExtFields) {
                $( if let Some(v) = HeaderField::write(&self.$field) { ext.insert($key.to_owned(), v); } )*
            }
            #[allow(unused_variables)]
            fn from_ext(ext: &ExtFields) -> Result<Self, HeaderError> {
                Ok($name { $( $field: HeaderField::read($key, ext.get($key).map(String::as_str))?, )* })
            }
        }
    };
}

command_header! {
    /// SEND_MESSAGE (10) and SEND_REPLY_MESSAGE (324): long key names (the Go client's form).
    pub struct SendMessageRequestHeader {
        /// The sending producer's group.
        producer_group: String = "producerGroup",
        /// The topic to store the message in.
        topic: String = "topic",
        /// The topic whose settings a topic created by this send copies (`TBW102`).
        default_topic: String = "defaultTopic",
        /// How many queues a topic created by this send gets.
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// Negative: the broker picks a writable queue.
        queue_id: i32 = "queueId",
        /// The message's sysFlag bits (see [`crate::message::sys_flag`]).
        sys_flag: i32 = "sysFlag",
        /// When the producer created the message, epoch milliseconds.
        born_timestamp: i64 = "bornTimestamp",
        /// The application's flag, stored as given.
        flag: i32 = "flag",
        /// The message's encoded properties (`name\u{1}value\u{2}`…).
        properties: Option<String> = "properties",
        /// How many times the message was consumed before (a resend to a retry topic).
        reconsume_times: Option<i32> = "reconsumeTimes",
        /// RocketMQ's unit (cell deployment) mode; open-source clients send false.
        unit_mode: Option<bool> = "unitMode",
        /// The body is a SEND_BATCH_MESSAGE batch (see [`crate::batch`]).
        batch: Option<bool> = "batch",
        /// Redeliveries allowed before the message goes to the dead-letter queue.
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325): the same
    /// fields under the one-letter keys `a`..`n`.
    pub struct SendMessageRequestHeaderV2 {
        /// `producerGroup`: see [`SendMessageRequestHeader::producer_group`].
        a: String = "a",
        /// `topic`: see [`SendMessageRequestHeader::topic`].
        b: String = "b",
        /// `defaultTopic`: see [`SendMessageRequestHeader::default_topic`].
        c: String = "c",
        /// `defaultTopicQueueNums`: see [`SendMessageRequestHeader::default_topic_queue_nums`].
        d: i32 = "d",
        /// `queueId`: see [`SendMessageRequestHeader::queue_id`].
        e: i32 = "e",
        /// `sysFlag`: see [`SendMessageRequestHeader::sys_flag`].
        f: i32 = "f",
        /// `bornTimestamp`: see [`SendMessageRequestHeader::born_timestamp`].
        g: i64 = "g",
        /// `flag`: see [`SendMessageRequestHeader::flag`].
        h: i32 = "h",
        /// `properties`: see [`SendMessageRequestHeader::properties`].
        i: Option<String> = "i",
        /// `reconsumeTimes`: see [`SendMessageRequestHeader::reconsume_times`].
        j: Option<i32> = "j",
        /// `unitMode`: see [`SendMessageRequestHeader::unit_mode`].
        k: Option<bool> = "k",
        /// `maxReconsumeTimes`: see [`SendMessageRequestHeader::max_reconsume_times`].
        l: Option<i32> = "l",
        /// `batch`: see [`SendMessageRequestHeader::batch`].
        m: Option<bool> = "m",
        /// `bname`: see [`SendMessageRequestHeader::bname`].
        n: Option<String> = "n",
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v: SendMessageRequestHeaderV2) -> Self {
        SendMessageRequestHeader {
            producer_group: v.a,
            topic: v.b,
            default_topic: v.c,
            default_topic_queue_nums: v.d,
            queue_id: v.e,
            sys_flag: v.f,
            born_timestamp: v.g,
            flag: v.h,
            properties: v.i,
            reconsume_times: v.j,
            unit_mode: v.k,
            max_reconsume_times: v.l,
            batch: v.m,
            bname: v.n,
        }
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(h: SendMessageRequestHeader) -> Self {
        SendMessageRequestHeaderV2 {
            a: h.producer_group,
            b: h.topic,
            c: h.default_topic,
            d: h.default_topic_queue_nums,
            e: h.queue_id,
            f: h.sys_flag,
            g: h.born_timestamp,
            h: h.flag,
            i: h.properties,
            j: h.reconsume_times,
            k: h.unit_mode,
            l: h.max_reconsume_times,
            m: h.batch,
            n: h.bname,
        }
    }
}

impl SendMessageRequestHeader {
    /// Reads a send header in whichever key form the request code uses (310/320/325: short keys).
    pub fn from_send_command(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        match cmd.code {
            request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE | request_code::SEND_REPLY_MESSAGE_V2 => {
                SendMessageRequestHeaderV2::from_command(cmd).map(Into::into)
            }
            _ => SendMessageRequestHeader::from_command(cmd),
        }
    }

    /// Whether the body is a batch; an absent `batch` is false.
    pub fn is_batch(&self) -> bool {
        self.batch.unwrap_or(false)
    }
}

command_header! {
    /// Response to the send family. `MSG_REGION` must be present: the Java client reads it unchecked.
    pub struct SendMessageResponseHeader {
        /// The stored message's offset id (store host and commit-log offset); a batch's ids, comma-separated.
        msg_id: String = "msgId",
        /// The queue the message was stored in.
        queue_id: i32 = "queueId",
        /// The message's offset in that queue (the first message's, for a batch).
        queue_offset: i64 = "queueOffset",
        /// The transaction's id, for a transactional (half) message.
        transaction_id: Option<String> = "transactionId",
        /// The UNIQ_KEY of a batch as a whole.
        batch_uniq_id: Option<String> = "batchUniqId",
        /// The handle RECALL_MESSAGE takes to withdraw a delayed message.
        recall_handle: Option<String> = "recallHandle",
        /// The region the broker serves (`MSG_REGION`).
        msg_region: Option<String> = "MSG_REGION",
        /// `true` or `false`: whether the broker has message tracing on (`TRACE_ON`).
        trace_on: Option<String> = "TRACE_ON",
    }
}

command_header! {
    /// PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361).
    pub struct PullMessageRequestHeader {
        /// The pulling consumer group.
        consumer_group: String = "consumerGroup",
        /// The queue's topic.
        topic: String = "topic",
        /// The queue.
        queue_id: i32 = "queueId",
        /// The first offset wanted.
        queue_offset: i64 = "queueOffset",
        /// The most messages to return.
        max_msg_nums: i32 = "maxMsgNums",
        /// [`pull_sys_flag`] bits.
        sys_flag: i32 = "sysFlag",
        /// The group's offset to commit along with the pull (with `COMMIT_OFFSET`).
        commit_offset: i64 = "commitOffset",
        /// How long the broker may hold the pull while there is nothing to return, in milliseconds (with `SUSPEND`).
        suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        /// The subscription expression to filter with (with `SUBSCRIPTION`; else the heartbeat's).
        subscription: Option<String> = "subscription",
        /// The subscription's version, as in the heartbeat.
        sub_version: i64 = "subVersion",
        /// How `subscription` is read: `TAG` or `SQL92`.
        expression_type: Option<String> = "expressionType",
        /// The most message bytes to return.
        max_msg_bytes: Option<i32> = "maxMsgBytes",
        /// Who sent the pull, as RocketMQ's proxy marks it (`RequestSource`).
        request_source: Option<i32> = "requestSource",
        /// (sic) RocketMQ's spelling.
        proxy_forward_client_id: Option<String> = "proxyFrowardClientId",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

/// PullSysFlag bits.
pub mod pull_sys_flag {
    /// `commitOffset` carries an offset to commit.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may hold the pull until messages arrive.
    pub const SUSPEND: i32 = 0x2;
    /// `subscription` carries the expression to filter with.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// The subscription filters with an uploaded class (RocketMQ's retired class filter).
    pub const CLASS_FILTER: i32 = 0x8;
    /// The pull comes from a lite pull consumer.
    pub const LITE_PULL_MESSAGE: i32 = 0x10;
}

command_header! {
    /// Response to PULL_MESSAGE: the four offsets are unboxed by the Java client and must be present.
    pub struct PullMessageResponseHeader {
        /// The broker id (0: the master) the client should pull this queue from next.
        suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        /// Where the next pull should start.
        next_begin_offset: i64 = "nextBeginOffset",
        /// The offset of the queue's oldest message.
        min_offset: i64 = "minOffset",
        /// The offset the queue's next message will get.
        max_offset: i64 = "maxOffset",
        /// RocketMQ 5's static-topic offset shift; absent otherwise.
        offset_delta: Option<i64> = "offsetDelta",
        /// The topic's `TopicSysFlag` bits.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// The consumer group's sysFlag bits.
        group_sys_flag: Option<i32> = "groupSysFlag",
        /// RocketMQ's `ForbiddenType`: why the pull was refused, when it was.
        forbidden_type: Option<i32> = "forbiddenType",
    }
}

command_header! {
    /// QUERY_CONSUMER_OFFSET (14). An absent `setZeroIfNotFound` behaves as `true`.
    pub struct QueryConsumerOffsetRequestHeader {
        /// The consumer group.
        consumer_group: String = "consumerGroup",
        /// The queue's topic.
        topic: String = "topic",
        /// The queue.
        queue_id: i32 = "queueId",
        /// Answer 0, not QUERY_NOT_FOUND, for a queue the group has no offset for.
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// The `offset` answer of QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET and
    /// SEARCH_OFFSET_BY_TIMESTAMP.
    pub struct OffsetResponseHeader {
        /// The offset asked for.
        offset: i64 = "offset",
    }
}

/// QUERY_CONSUMER_OFFSET's answer: the group's committed offset.
pub type QueryConsumerOffsetResponseHeader = OffsetResponseHeader;
/// GET_MAX_OFFSET's answer: the offset the queue's next message will get.
pub type GetMaxOffsetResponseHeader = OffsetResponseHeader;
/// GET_MIN_OFFSET's answer: the offset of the queue's oldest message.
pub type GetMinOffsetResponseHeader = OffsetResponseHeader;
/// SEARCH_OFFSET_BY_TIMESTAMP's answer: the offset found for the time.
pub type SearchOffsetResponseHeader = OffsetResponseHeader;

command_header! {
    /// UPDATE_CONSUMER_OFFSET (15). Go sends `-1` for a queue it has no offset for.
    pub struct UpdateConsumerOffsetRequestHeader {
        /// The consumer group.
        consumer_group: String = "consumerGroup",
        /// The queue's topic.
        topic: String = "topic",
        /// The queue.
        queue_id: i32 = "queueId",
        /// The offset to commit: the next message the group will consume.
        commit_offset: i64 = "commitOffset",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_MAX_OFFSET (30).
    pub struct GetMaxOffsetRequestHeader {
        /// The queue's topic.
        topic: String = "topic",
        /// The queue.
        queue_id: i32 = "queueId",
        /// RocketMQ 5: count only committed messages (Java's default, true).
        committed: Option<bool> = "committed",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_MIN_OFFSET (31).
    pub struct GetMinOffsetRequestHeader {
        /// The queue's topic.
        topic: String = "topic",
        /// The queue.
        queue_id: i32 = "queueId",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29). `boundaryType` is `LOWER` (default) or `UPPER`, any case.
    pub struct SearchOffsetRequestHeader {
        /// The queue's topic.
        topic: String = "topic",
        /// The queue.
        queue_id: i32 = "queueId",
        /// The store time sought, epoch milliseconds.
        timestamp: i64 = "timestamp",
        /// Which offset when several messages share the time: `LOWER` (the first) or `UPPER` (the last).
        boundary_type: Option<String> = "boundaryType",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_EARLIEST_MSG_STORETIME (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        /// The queue's topic.
        topic: String = "topic",
        /// The queue.
        queue_id: i32 = "queueId",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// Answer of GET_EARLIEST_MSG_STORETIME: `-1` for an empty or unknown queue.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// Store time of the queue's oldest message, epoch milliseconds.
        timestamp: i64 = "timestamp",
    }
}

command_header! {
    /// Answer of HEART_BEAT.
    pub struct HeartbeatResponseHeader {
        /// The broker accepts heartbeats that leave out unchanged subscriptions.
        is_support_heart_beat_v2: Option<bool> = "IS_SUPPORT_HEART_BEAT_V2",
        /// The broker wants the subscriptions in full with the next heartbeat.
        is_sub_change: Option<bool> = "IS_SUB_CHANGE",
    }
}

command_header! {
    /// UNREGISTER_CLIENT (35). Note the capital `ID` of `clientID`.
    pub struct UnregisterClientRequestHeader {
        /// The leaving client's id.
        client_id: String = "clientID",
        /// The producer group it leaves, if any.
        producer_group: Option<String> = "producerGroup",
        /// The consumer group it leaves, if any.
        consumer_group: Option<String> = "consumerGroup",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38).
    pub struct GetConsumerListByGroupRequestHeader {
        /// The group whose consumers are asked for.
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker to client, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        /// The group whose members changed.
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// CONSUMER_SEND_MSG_BACK (36). `offset` is the message's commit-log offset.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// The message's commit-log offset.
        offset: i64 = "offset",
        /// The consumer group sending it back.
        group: String = "group",
        /// The delay level to redeliver at: 0 lets the broker pick by reconsume times, -1 sends it to the dead-letter queue.
        delay_level: i32 = "delayLevel",
        /// The message's id as the consumer saw it.
        origin_msg_id: Option<String> = "originMsgId",
        /// The topic it was consumed from.
        origin_topic: Option<String> = "originTopic",
        /// RocketMQ's unit (cell deployment) mode; open-source clients send false.
        unit_mode: Option<bool> = "unitMode",
        /// Redeliveries allowed before the dead-letter queue; absent: the group's setting.
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// END_TRANSACTION (37). `commitOrRollback`: 0 unknown, 8 commit, 12 rollback.
    pub struct EndTransactionRequestHeader {
        /// The half message's topic.
        topic: Option<String> = "topic",
        /// The producer group that sent it.
        producer_group: String = "producerGroup",
        /// The half message's offset in its queue.
        tran_state_table_offset: i64 = "tranStateTableOffset",
        /// The half message's commit-log offset.
        commit_log_offset: i64 = "commitLogOffset",
        /// The outcome, as a sysFlag transaction type: 0 unknown, 8 commit, 12 rollback.
        commit_or_rollback: i32 = "commitOrRollback",
        /// Whether this answers a CHECK_TRANSACTION_STATE.
        from_transaction_check: Option<bool> = "fromTransactionCheck",
        /// The half message's id (its UNIQ_KEY).
        msg_id: String = "msgId",
        /// The transaction's id.
        transaction_id: Option<String> = "transactionId",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// CHECK_TRANSACTION_STATE (39), broker to producer, oneway.
    pub struct CheckTransactionStateRequestHeader {
        /// The half message's topic.
        topic: Option<String> = "topic",
        /// The half message's offset in its queue.
        tran_state_table_offset: i64 = "tranStateTableOffset",
        /// The half message's commit-log offset.
        commit_log_offset: i64 = "commitLogOffset",
        /// The half message's id (its UNIQ_KEY).
        msg_id: Option<String> = "msgId",
        /// The transaction's id.
        transaction_id: Option<String> = "transactionId",
        /// The half message's offset id.
        offset_msg_id: Option<String> = "offsetMsgId",
        /// The broker name the client addressed (RocketMQ 5's static topics).
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105).
    pub struct GetRouteInfoRequestHeader {
        /// The topic whose route is asked for.
        topic: String = "topic",
        /// The client reads only standard JSON: quote the `brokerAddrs` keys whatever its version.
        accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

command_header! {
    /// REGISTER_BROKER (103). `bodyCrc32` = `crc32(body) & 0x7FFFFFFF`; 0 disables the check.
    pub struct RegisterBrokerRequestHeader {
        /// The broker's replica group.
        broker_name: String = "brokerName",
        /// The address clients reach the broker at, `host:port`.
        broker_addr: String = "brokerAddr",
        /// The broker's cluster.
        cluster_name: String = "clusterName",
        /// The address slaves replicate from, `host:port`.
        ha_server_addr: String = "haServerAddr",
        /// 0 for a master, else a slave's id.
        broker_id: i64 = "brokerId",
        /// How long the name server keeps the broker without a new registration, in milliseconds.
        heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMillis",
        /// Whether a slave may stand in for the master while it is down.
        enable_acting_master: Option<bool> = "enableActingMaster",
        /// The body is in its compressed form.
        compressed: Option<bool> = "compressed",
        /// `crc32(body) & 0x7FFFFFFF`; 0 disables the check.
        body_crc32: Option<i32> = "bodyCrc32",
    }
}

command_header! {
    /// Answer of REGISTER_BROKER; both null for a lone master.
    pub struct RegisterBrokerResponseHeader {
        /// For a slave: the master's replication address.
        ha_server_addr: Option<String> = "haServerAddr",
        /// For a slave: the master's address.
        master_addr: Option<String> = "masterAddr",
    }
}

command_header! {
    /// EXCHANGE_BROKER_HA_INFO (906), request and answer alike. A slave that asks without
    /// `masterHaAddress` is answered by a master with where its HA server listens; a request that
    /// carries it tells a slave its master's.
    pub struct ExchangeHaInfoHeader {
        /// The master's HA server, `host:port`, as it registers it (`haServerAddr`).
        master_ha_address: Option<String> = "masterHaAddress",
        /// The master's commit-log offset known durable.
        master_flush_offset: Option<i64> = "masterFlushOffset",
        /// The master's remoting address, `host:port`.
        master_address: Option<String> = "masterAddress",
    }
}

command_header! {
    /// UNREGISTER_BROKER (104).
    pub struct UnregisterBrokerRequestHeader {
        /// The broker's replica group.
        broker_name: String = "brokerName",
        /// The broker's address, `host:port`.
        broker_addr: String = "brokerAddr",
        /// The broker's cluster.
        cluster_name: String = "clusterName",
        /// 0 for a master, else a slave's id.
        broker_id: i64 = "brokerId",
    }
}

command_header! {
    /// UPDATE_AND_CREATE_TOPIC (17). `attributes`: `"+key=value,-key2"`, empty when none.
    pub struct CreateTopicRequestHeader {
        /// The topic to create or update.
        topic: String = "topic",
        /// Ignored by brokers; clients send `TBW102`.
        default_topic: String = "defaultTopic",
        /// How many queues consumers read.
        read_queue_nums: i32 = "readQueueNums",
        /// How many queues producers write.
        write_queue_nums: i32 = "writeQueueNums",
        /// Permission bits (see [`crate::body::perm`]).
        perm: i32 = "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        topic_filter_type: String = "topicFilterType",
        /// RocketMQ's `TopicSysFlag` bits.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// Whether the topic is ordered.
        order: bool = "order",
        /// Attribute changes, `+key=value` to set and `-key` to remove, comma-separated.
        attributes: Option<String> = "attributes",
        /// UPDATE_AND_CREATE_STATIC_TOPIC only: replace the broker's queue mapping even where it conflicts.
        force: Option<bool> = "force",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_BROKER (215).
    pub struct DeleteTopicRequestHeader {
        /// The topic to delete.
        topic: String = "topic",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        /// The topic to delete.
        topic: String = "topic",
        /// Only from this cluster's brokers; absent: from every broker.
        cluster_name: Option<String> = "clusterName",
    }
}

command_header! {
    /// GET_TOPICS_BY_CLUSTER (224).
    pub struct GetTopicsByClusterRequestHeader {
        /// The cluster whose topics are asked for.
        cluster: String = "cluster",
    }
}

command_header! {
    /// QUERY_TOPIC_CONSUME_BY_WHO (300).
    pub struct QueryTopicConsumeByWhoRequestHeader {
        /// The topic whose consumer groups are asked for.
        topic: String = "topic",
    }
}

command_header! {
    /// GET_TOPIC_STATS_INFO (202).
    pub struct GetTopicStatsInfoRequestHeader {
        /// The topic whose queues are asked for.
        topic: String = "topic",
    }
}

command_header! {
    /// GET_CONSUME_STATS (208). `topicList` is `;`-separated.
    pub struct GetConsumeStatsRequestHeader {
        /// The group whose progress is asked for.
        consumer_group: String = "consumerGroup",
        /// Only this topic; absent: every topic the group reads.
        topic: Option<String> = "topic",
        /// Only these topics, `;`-separated.
        topic_list: Option<String> = "topicList",
    }
}

command_header! {
    /// GET_PRODUCER_CONNECTION_LIST (204).
    pub struct GetProducerConnectionListRequestHeader {
        /// The producer group whose clients are asked for.
        producer_group: String = "producerGroup",
    }
}

command_header! {
    /// GET_CONSUMER_CONNECTION_LIST (203).
    pub struct GetConsumerConnectionListRequestHeader {
        /// The group whose clients are asked for.
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// GET_CONSUMER_RUNNING_INFO (307): an admin asks one consumer of a group for its state
    /// (and its threads' stacks); the broker forwards it to the client.
    pub struct GetConsumerRunningInfoRequestHeader {
        /// The consumer's group.
        consumer_group: String = "consumerGroup",
        /// The consumer's client id.
        client_id: String = "clientId",
        /// Whether the answer carries the client's thread stacks.
        jstack_enable: Option<bool> = "jstackEnable",
    }
}

command_header! {
    /// CONSUME_MESSAGE_DIRECTLY (309): an admin has one consumer consume one stored message now;
    /// the broker adds its name, the flags and the stored record, and forwards it to the client.
    pub struct ConsumeMessageDirectlyResultRequestHeader {
        /// The consumer's group.
        consumer_group: String = "consumerGroup",
        /// The consumer's client id.
        client_id: Option<String> = "clientId",
        /// The message's offset message id (store host and commit-log offset).
        msg_id: Option<String> = "msgId",
        /// The broker holding the message (the broker sets its own).
        broker_name: Option<String> = "brokerName",
        /// The message's topic.
        topic: Option<String> = "topic",
        /// The topic's system flag (the broker sets it).
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// The group's system flag (the broker sets it).
        group_sys_flag: Option<i32> = "groupSysFlag",
    }
}

command_header! {
    /// GET_ALL_TOPIC_CONFIG (21) paging fields (all optional; absent = everything).
    pub struct GetAllTopicConfigRequestHeader {
        /// Where the page starts, counted in topics.
        topic_seq: Option<i32> = "topicSeq",
        /// The topic table's version, as JSON, that earlier pages came from.
        data_version: Option<String> = "dataVersion",
        /// The most topics in one page.
        max_topic_num: Option<i32> = "maxTopicNum",
    }
}

command_header! {
    /// QUERY_MESSAGE (12). `_UNIQUE_KEY_QUERY` = "true" when `key` is a UNIQ_KEY.
    pub struct QueryMessageRequestHeader {
        /// The topic searched.
        topic: String = "topic",
        /// The message key (or UNIQ_KEY) sought.
        key: String = "key",
        /// The most messages to return.
        max_num: i32 = "maxNum",
        /// Start of the store-time range, epoch milliseconds.
        begin_timestamp: i64 = "beginTimestamp",
        /// End of the store-time range, epoch milliseconds.
        end_timestamp: i64 = "endTimestamp",
        /// `key` is a UNIQ_KEY rather than a message key.
        unique_key_query: Option<bool> = "_UNIQUE_KEY_QUERY",
    }
}

command_header! {
    /// Answer of QUERY_MESSAGE, present on SUCCESS and QUERY_NOT_FOUND alike.
    pub struct QueryMessageResponseHeader {
        /// Store time of the newest message the index holds, epoch milliseconds.
        index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        /// Commit-log offset of the newest message the index holds.
        index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222): `mqadmin resetOffsetByTime`. A `queueId` of -1 (or none)
    /// means every queue; `offset` (not -1) names the offset instead of the time; a `timestamp`
    /// below 0 means the end of each queue.
    pub struct ResetOffsetRequestHeader {
        /// The topic whose offsets are reset.
        topic: String = "topic",
        /// The consumer group whose offsets are reset.
        group: String = "group",
        /// Only this queue; -1 or absent: every queue.
        queue_id: Option<i32> = "queueId",
        /// The offset to reset to, instead of by time; -1: by time.
        offset: Option<i64> = "offset",
        /// The store time to reset to, epoch milliseconds; below 0: the end of each queue.
        timestamp: i64 = "timestamp",
        /// Also move offsets forward; without it a Java broker only moves them back.
        is_force: bool = "isForce",
    }
}

command_header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply message handed by the broker to the client
    /// that sent the request (its `REPLY_TO_CLIENT`), with the replying send's fields and where
    /// it was born and stored; the body is the reply's.
    pub struct ReplyMessageRequestHeader {
        /// The replying producer's group.
        producer_group: String = "producerGroup",
        /// The reply topic.
        topic: String = "topic",
        /// The topic whose settings a topic created by this send copies (`TBW102`).
        default_topic: String = "defaultTopic",
        /// How many queues a topic created by this send gets.
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// The queue the reply was stored in.
        queue_id: i32 = "queueId",
        /// The message's sysFlag bits (see [`crate::message::sys_flag`]).
        sys_flag: i32 = "sysFlag",
        /// When the producer created the message, epoch milliseconds.
        born_timestamp: i64 = "bornTimestamp",
        /// The application's flag, stored as given.
        flag: i32 = "flag",
        /// The message's encoded properties (`name\u{1}value\u{2}`…).
        properties: Option<String> = "properties",
        /// How many times the message was consumed before (a resend to a retry topic).
        reconsume_times: Option<i32> = "reconsumeTimes",
        /// RocketMQ's unit (cell deployment) mode; open-source clients send false.
        unit_mode: Option<bool> = "unitMode",
        /// Where the reply was sent from, `host:port`.
        born_host: String = "bornHost",
        /// The broker that stored it, `host:port`.
        store_host: String = "storeHost",
        /// When it was stored, epoch milliseconds.
        store_timestamp: i64 = "storeTimestamp",
    }
}

command_header! {
    /// POP_MESSAGE (200050): up to `maxMsgNums` messages of `topic` for `consumerGroup` (a
    /// `queueId` of -1: from any queue), invisible to the group's other pops for
    /// `invisibleTime` ms unless acknowledged; held up to `pollTime` ms when there are none.
    /// `initMode` 0 starts a new group at the queue's first message, 1 at its end.
    pub struct PopMessageRequestHeader {
        /// The popping consumer group.
        consumer_group: String = "consumerGroup",
        /// The topic popped.
        topic: String = "topic",
        /// The queue; -1: any queue of the topic on this broker.
        queue_id: i32 = "queueId",
        /// The most messages to return.
        max_msg_nums: i32 = "maxMsgNums",
        /// How long the messages stay hidden from other pops unless acknowledged, in milliseconds.
        invisible_time: i64 = "invisibleTime",
        /// How long the broker may hold the pop while there are none, in milliseconds.
        poll_time: i64 = "pollTime",
        /// When the client sent the pop, epoch milliseconds.
        born_time: i64 = "bornTime",
        /// Where a group without an offset starts: 0 the queue's first message, 1 its end.
        init_mode: i32 = "initMode",
        /// How `exp` is read: `TAG` or `SQL92`.
        exp_type: Option<String> = "expType",
        /// The filter expression; absent: every message.
        exp: Option<String> = "exp",
        /// Pop in order: a queue's later messages wait until the popped ones are acknowledged.
        order: Option<bool> = "order",
        /// The client's id for this attempt, so a retried ordered pop gets the same messages.
        attempt_id: Option<String> = "attemptId",
    }
}

command_header! {
    /// The answer to POP_MESSAGE: when the messages were popped and for how long they are
    /// invisible (the client builds each message's `POP_CK` handle from these).
    pub struct PopMessageResponseHeader {
        /// When the messages were popped, epoch milliseconds.
        pop_time: i64 = "popTime",
        /// How long they stay invisible, in milliseconds.
        invisible_time: i64 = "invisibleTime",
        /// The revive queue that holds their checkpoints.
        revive_qid: i32 = "reviveQid",
        /// Messages left in the queues popped.
        rest_num: i64 = "restNum",
        /// Per queue, the first offset popped (RocketMQ's encoded form).
        start_offset_info: Option<String> = "startOffsetInfo",
        /// Per queue, the offsets popped (RocketMQ's encoded form).
        msg_offset_info: Option<String> = "msgOffsetInfo",
        /// For ordered pops, how many times each message was consumed (RocketMQ's encoded form).
        order_count_info: Option<String> = "orderCountInfo",
    }
}

command_header! {
    /// ACK_MESSAGE (200051): the message at `offset` of the queue was consumed; `extraInfo` is
    /// its `POP_CK` handle.
    pub struct AckMessageRequestHeader {
        /// The consumer group that popped the message.
        consumer_group: String = "consumerGroup",
        /// The message's topic.
        topic: String = "topic",
        /// The message's queue.
        queue_id: i32 = "queueId",
        /// The message's `POP_CK` handle.
        extra_info: String = "extraInfo",
        /// The message's offset in its queue.
        offset: i64 = "offset",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053): the popped message at `offset` becomes visible
    /// again `invisibleTime` ms from now (a consumer's RECONSUME_LATER).
    pub struct ChangeInvisibleTimeRequestHeader {
        /// The consumer group that popped the message.
        consumer_group: String = "consumerGroup",
        /// The message's topic.
        topic: String = "topic",
        /// The message's queue.
        queue_id: i32 = "queueId",
        /// The message's `POP_CK` handle.
        extra_info: String = "extraInfo",
        /// The message's offset in its queue.
        offset: i64 = "offset",
        /// How long from now the message stays invisible, in milliseconds.
        invisible_time: i64 = "invisibleTime",
    }
}

command_header! {
    /// The answer to CHANGE_MESSAGE_INVISIBLETIME: the message's new pop time (its new handle).
    pub struct ChangeInvisibleTimeResponseHeader {
        /// The message's new pop time, epoch milliseconds.
        pop_time: i64 = "popTime",
        /// How long it stays invisible from then, in milliseconds.
        invisible_time: i64 = "invisibleTime",
        /// The revive queue that holds its checkpoint.
        revive_qid: i32 = "reviveQid",
    }
}

command_header! {
    /// DELETE_SUBSCRIPTIONGROUP (207): `mqadmin deleteSubGroup`; `cleanOffset` also drops the
    /// group's committed offsets.
    pub struct DeleteSubscriptionGroupRequestHeader {
        /// The consumer group to delete.
        group_name: String = "groupName",
        /// Also drop the group's committed offsets.
        clean_offset: Option<bool> = "cleanOffset",
    }
}

command_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG (352): one group's settings.
    pub struct GetSubscriptionGroupConfigRequestHeader {
        /// The consumer group asked for.
        group: String = "group",
    }
}

command_header! {
    /// VIEW_MESSAGE_BY_ID (33): `offset` is a commit-log offset.
    pub struct ViewMessageRequestHeader {
        /// The message's commit-log offset.
        offset: i64 = "offset",
        /// The message's topic, when the caller knows it.
        topic: Option<String> = "topic",
    }
}

command_header! {
    /// PUT_KV_CONFIG (100).
    pub struct PutKvConfigRequestHeader {
        /// The namespace the key is in.
        namespace: String = "namespace",
        /// The key.
        key: String = "key",
        /// The value to store.
        value: String = "value",
    }
}

command_header! {
    /// GET_KV_CONFIG (101) and DELETE_KV_CONFIG (102).
    pub struct GetKvConfigRequestHeader {
        /// The namespace the key is in.
        namespace: String = "namespace",
        /// The key.
        key: String = "key",
    }
}

command_header! {
    /// Answer of GET_KV_CONFIG.
    pub struct GetKvConfigResponseHeader {
        /// The value; absent when the key is unknown.
        value: Option<String> = "value",
    }
}

command_header! {
    /// AUTH_CREATE_USER (3001), AUTH_UPDATE_USER (3002), AUTH_DELETE_USER (3003) and AUTH_GET_USER
    /// (3004): the user acted on (RocketMQ's `CreateUserRequestHeader` and its three twins).
    pub struct UserRequestHeader {
        /// The user's name; blank names nobody.
        username: Option<String> = "username",
    }
}

command_header! {
    /// AUTH_LIST_USER (3005).
    pub struct ListUsersRequestHeader {
        /// A substring of the names to list; absent lists every user.
        filter: Option<String> = "filter",
    }
}

command_header! {
    /// AUTH_CREATE_ACL (3006), AUTH_UPDATE_ACL (3007), AUTH_DELETE_ACL (3008) and AUTH_GET_ACL
    /// (3009): the subject whose policies are acted on; a delete may narrow it to one policy type
    /// and resource.
    pub struct AclRequestHeader {
        /// The subject, `User:name`.
        subject: Option<String> = "subject",
        /// AUTH_DELETE_ACL only: `Custom` or `Default`; absent deletes from both.
        policy_type: Option<String> = "policyType",
        /// AUTH_DELETE_ACL only: the resource whose entries go; absent deletes the whole policy.
        resource: Option<String> = "resource",
    }
}

command_header! {
    /// AUTH_LIST_ACL (3010).
    pub struct ListAclsRequestHeader {
        /// A substring of the subjects to list.
        subject_filter: Option<String> = "subjectFilter",
        /// A substring of the resources to list.
        resource_filter: Option<String> = "resourceFilter",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_and_invalid_fields_are_typed() {
        let mut ext = ExtFields::default();
        ext.insert("topic".into(), "T".into());
        assert_eq!(GetMaxOffsetRequestHeader::from_ext(&ext), Err(HeaderError::Missing("queueId")));
        ext.insert("queueId".into(), "x1".into());
        assert!(matches!(
            GetMaxOffsetRequestHeader::from_ext(&ext),
            Err(HeaderError::Invalid { key: "queueId", .. })
        ));
        ext.insert("queueId".into(), "3".into());
        ext.insert("committed".into(), "TRUE".into());
        ext.insert("unknown".into(), "ignored".into());
        let h = GetMaxOffsetRequestHeader::from_ext(&ext).unwrap();
        assert_eq!(h.queue_id, 3);
        assert_eq!(h.committed, Some(true));
        assert_eq!(h.to_ext().keys().collect::<Vec<_>>(), ["topic", "queueId", "committed"]);
    }

    #[test]
    fn v1_v2_send_headers_agree() {
        let v2 = SendMessageRequestHeaderV2 {
            a: "PG".into(),
            b: "T".into(),
            c: "TBW102".into(),
            d: 4,
            e: 1,
            g: 1795350392878,
            i: Some("TAGS\u{1}A\u{2}".into()),
            j: Some(0),
            k: Some(false),
            m: Some(false),
            n: Some("broker-a".into()),
            ..Default::default()
        };
        let v1: SendMessageRequestHeader = v2.clone().into();
        assert_eq!(v1.bname.as_deref(), Some("broker-a"));
        assert_eq!(SendMessageRequestHeaderV2::from(v1.clone()), v2);
        let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2, 1);
        cmd.ext_fields = Some(v2.to_ext());
        assert_eq!(SendMessageRequestHeader::from_send_command(&cmd).unwrap(), v1);
        cmd.code = request_code::SEND_MESSAGE;
        cmd.ext_fields = Some(v1.to_ext());
        assert_eq!(SendMessageRequestHeader::from_send_command(&cmd).unwrap(), v1);
    }
}

command_header! {
    /// CONTROLLER_GET_METADATA_INFO (1005) response: who leads the controller group.
    pub struct ControllerMetadataResponseHeader {
        /// The controllers' Raft group name.
        group: Option<String> = "group",
        /// The leading controller's id, when there is a leader.
        controller_leader_id: Option<String> = "controllerLeaderId",
        /// The leading controller's address, when there is a leader.
        controller_leader_address: Option<String> = "controllerLeaderAddress",
        /// Whether the answering controller leads.
        is_leader: bool = "isLeader",
        /// Every controller, `id:address;` each.
        peers: Option<String> = "peers",
    }
}

command_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012) request; also its response, with `nextBrokerId`.
    pub struct GetNextBrokerIdHeader {
        /// The broker set's cluster.
        cluster_name: String = "clusterName",
        /// The broker set.
        broker_name: String = "brokerName",
        /// In the response: the id a new broker of the set should apply for.
        next_broker_id: Option<i64> = "nextBrokerId",
    }
}

command_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013) request: `registerCheckCode` is `address;uuid`.
    pub struct ApplyBrokerIdRequestHeader {
        /// The broker set's cluster.
        cluster_name: String = "clusterName",
        /// The broker set.
        broker_name: String = "brokerName",
        /// The id the broker asks for.
        applied_broker_id: i64 = "appliedBrokerId",
        /// `address;uuid`: who asks, so a repeated apply by the same broker succeeds.
        register_check_code: String = "registerCheckCode",
    }
}

command_header! {
    /// CONTROLLER_REGISTER_BROKER (1003) request.
    pub struct RegisterBrokerToControllerRequestHeader {
        /// The broker set's cluster.
        cluster_name: String = "clusterName",
        /// The broker set.
        broker_name: String = "brokerName",
        /// The broker's id in the set.
        broker_id: Option<i64> = "brokerId",
        /// The broker's address, `host:port`.
        broker_address: String = "brokerAddress",
        /// When the request was sent, epoch milliseconds.
        invoke_time: Option<i64> = "invokeTime",
    }
}

command_header! {
    /// The master of a broker set as the controller answers it: CONTROLLER_REGISTER_BROKER
    /// (1003), CONTROLLER_GET_REPLICA_INFO (1004) and CONTROLLER_ELECT_MASTER (1002) responses,
    /// and NOTIFY_BROKER_ROLE_CHANGED (1008) requests (each uses the keys it has).
    pub struct MasterInfoHeader {
        /// The broker set's cluster.
        cluster_name: Option<String> = "clusterName",
        /// The broker set.
        broker_name: Option<String> = "brokerName",
        /// The master's broker id; absent when the set has none.
        master_broker_id: Option<i64> = "masterBrokerId",
        /// The master's address, `host:port`.
        master_address: Option<String> = "masterAddress",
        /// The master's epoch, raised at each election.
        master_epoch: Option<i32> = "masterEpoch",
        /// The SyncStateSet's epoch, raised at each change of the set.
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004) request.
    pub struct GetReplicaInfoRequestHeader {
        /// The broker set asked about.
        broker_name: String = "brokerName",
    }
}

command_header! {
    /// CONTROLLER_ELECT_MASTER (1002) request; `brokerId` -1 when an admin asks.
    pub struct ElectMasterRequestHeader {
        /// The broker set's cluster.
        cluster_name: Option<String> = "clusterName",
        /// The broker set.
        broker_name: String = "brokerName",
        /// The broker asking to be master; -1 when an admin asks.
        broker_id: Option<i64> = "brokerId",
        /// Elect the broker named by `brokerId` itself (an admin's choice), not the best candidate.
        designate_elect: Option<bool> = "designateElect",
        /// When the request was sent, epoch milliseconds.
        invoke_time: Option<i64> = "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001) request; the new set is the body.
    pub struct AlterSyncStateSetRequestHeader {
        /// The broker set.
        broker_name: String = "brokerName",
        /// The master asking for the change.
        master_broker_id: i64 = "masterBrokerId",
        /// The master's epoch; a stale one is refused.
        master_epoch: i32 = "masterEpoch",
        /// When the request was sent, epoch milliseconds.
        invoke_time: Option<i64> = "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001) response.
    pub struct AlterSyncStateSetResponseHeader {
        /// The SyncStateSet's epoch after the change.
        new_sync_state_set_epoch: i32 = "newSyncStateSetEpoch",
    }
}

command_header! {
    /// BROKER_HEARTBEAT (904) to a controller: what election needs of a live broker.
    pub struct BrokerHeartbeatRequestHeader {
        /// The broker's cluster.
        cluster_name: String = "clusterName",
        /// The broker's address, `host:port`.
        broker_addr: String = "brokerAddr",
        /// The broker's set.
        broker_name: String = "brokerName",
        /// The broker's id in the set.
        broker_id: Option<i64> = "brokerId",
        /// The latest master epoch the broker's log holds.
        epoch: Option<i32> = "epoch",
        /// The end of the broker's commit log.
        max_offset: Option<i64> = "maxOffset",
        /// The broker's confirmed offset: what its set's in-sync replicas all hold.
        confirm_offset: Option<i64> = "confirmOffset",
        /// How long the controller waits for the next heartbeat before taking the broker for dead, in milliseconds.
        heartbeat_timeout_mills: Option<i64> = "heartbeatTimeoutMills",
        /// Among candidates equal in epoch and offset, the lower value is elected first.
        election_priority: Option<i32> = "electionPriority",
    }
}

command_header! {
    /// CLEAN_BROKER_DATA (1011) to a controller: `brokerControllerIdsToClean` is `1;2`, or absent
    /// for the whole set.
    pub struct CleanControllerBrokerDataRequestHeader {
        /// The broker set's cluster.
        cluster_name: Option<String> = "clusterName",
        /// The broker set.
        broker_name: String = "brokerName",
        /// The broker ids to forget, `;`-separated (`1;2`); absent: the whole set.
        broker_controller_ids_to_clean: Option<String> = "brokerControllerIdsToClean",
        /// Also forget brokers that are still alive.
        is_clean_living_broker: Option<bool> = "isCleanLivingBroker",
        /// When the request was sent, epoch milliseconds.
        invoke_time: Option<i64> = "invokeTime",
    }
}
