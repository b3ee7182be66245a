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
    const EXPECTED: &'static str;
    fn parse_value(raw: &str) -> Option<Self>;
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
    fn read(key: &'static str, raw: Option<&str>) -> Result<Self, HeaderError>;
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
        producer_group: String = "producerGroup",
        topic: String = "topic",
        default_topic: String = "defaultTopic",
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// Negative: the broker picks a writable queue.
        queue_id: i32 = "queueId",
        sys_flag: i32 = "sysFlag",
        born_timestamp: i64 = "bornTimestamp",
        flag: i32 = "flag",
        properties: Option<String> = "properties",
        reconsume_times: Option<i32> = "reconsumeTimes",
        unit_mode: Option<bool> = "unitMode",
        batch: Option<bool> = "batch",
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325): the same
    /// fields under the one-letter keys `a`..`n`.
    pub struct SendMessageRequestHeaderV2 {
        a: String = "a",
        b: String = "b",
        c: String = "c",
        d: i32 = "d",
        e: i32 = "e",
        f: i32 = "f",
        g: i64 = "g",
        h: i32 = "h",
        i: Option<String> = "i",
        j: Option<i32> = "j",
        k: Option<bool> = "k",
        l: Option<i32> = "l",
        m: Option<bool> = "m",
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

    pub fn is_batch(&self) -> bool {
        self.batch.unwrap_or(false)
    }
}

command_header! {
    /// Response to the send family. `MSG_REGION` must be present: the Java client reads it unchecked.
    pub struct SendMessageResponseHeader {
        msg_id: String = "msgId",
        queue_id: i32 = "queueId",
        queue_offset: i64 = "queueOffset",
        transaction_id: Option<String> = "transactionId",
        batch_uniq_id: Option<String> = "batchUniqId",
        recall_handle: Option<String> = "recallHandle",
        msg_region: Option<String> = "MSG_REGION",
        trace_on: Option<String> = "TRACE_ON",
    }
}

command_header! {
    /// PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361).
    pub struct PullMessageRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        queue_offset: i64 = "queueOffset",
        max_msg_nums: i32 = "maxMsgNums",
        sys_flag: i32 = "sysFlag",
        commit_offset: i64 = "commitOffset",
        suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        subscription: Option<String> = "subscription",
        sub_version: i64 = "subVersion",
        expression_type: Option<String> = "expressionType",
        max_msg_bytes: Option<i32> = "maxMsgBytes",
        request_source: Option<i32> = "requestSource",
        /// (sic) RocketMQ's spelling.
        proxy_forward_client_id: Option<String> = "proxyFrowardClientId",
        bname: Option<String> = "bname",
    }
}

/// PullSysFlag bits.
pub mod pull_sys_flag {
    pub const COMMIT_OFFSET: i32 = 0x1;
    pub const SUSPEND: i32 = 0x2;
    pub const SUBSCRIPTION: i32 = 0x4;
    pub const CLASS_FILTER: i32 = 0x8;
    pub const LITE_PULL_MESSAGE: i32 = 0x10;
}

command_header! {
    /// Response to PULL_MESSAGE: the four offsets are unboxed by the Java client and must be present.
    pub struct PullMessageResponseHeader {
        suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        next_begin_offset: i64 = "nextBeginOffset",
        min_offset: i64 = "minOffset",
        max_offset: i64 = "maxOffset",
        offset_delta: Option<i64> = "offsetDelta",
        topic_sys_flag: Option<i32> = "topicSysFlag",
        group_sys_flag: Option<i32> = "groupSysFlag",
        forbidden_type: Option<i32> = "forbiddenType",
    }
}

command_header! {
    /// QUERY_CONSUMER_OFFSET (14). An absent `setZeroIfNotFound` behaves as `true`.
    pub struct QueryConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// The `offset` answer of QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET and
    /// SEARCH_OFFSET_BY_TIMESTAMP.
    pub struct OffsetResponseHeader {
        offset: i64 = "offset",
    }
}

pub type QueryConsumerOffsetResponseHeader = OffsetResponseHeader;
pub type GetMaxOffsetResponseHeader = OffsetResponseHeader;
pub type GetMinOffsetResponseHeader = OffsetResponseHeader;
pub type SearchOffsetResponseHeader = OffsetResponseHeader;

command_header! {
    /// UPDATE_CONSUMER_OFFSET (15). Go sends `-1` for a queue it has no offset for.
    pub struct UpdateConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        commit_offset: i64 = "commitOffset",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_MAX_OFFSET (30).
    pub struct GetMaxOffsetRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
        committed: Option<bool> = "committed",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_MIN_OFFSET (31).
    pub struct GetMinOffsetRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29). `boundaryType` is `LOWER` (default) or `UPPER`, any case.
    pub struct SearchOffsetRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
        timestamp: i64 = "timestamp",
        boundary_type: Option<String> = "boundaryType",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_EARLIEST_MSG_STORETIME (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// Answer of GET_EARLIEST_MSG_STORETIME: `-1` for an empty or unknown queue.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        timestamp: i64 = "timestamp",
    }
}

command_header! {
    /// Answer of HEART_BEAT.
    pub struct HeartbeatResponseHeader {
        is_support_heart_beat_v2: Option<bool> = "IS_SUPPORT_HEART_BEAT_V2",
        is_sub_change: Option<bool> = "IS_SUB_CHANGE",
    }
}

command_header! {
    /// UNREGISTER_CLIENT (35). Note the capital `ID` of `clientID`.
    pub struct UnregisterClientRequestHeader {
        client_id: String = "clientID",
        producer_group: Option<String> = "producerGroup",
        consumer_group: Option<String> = "consumerGroup",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38).
    pub struct GetConsumerListByGroupRequestHeader {
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker to client, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// CONSUMER_SEND_MSG_BACK (36). `offset` is the message's commit-log offset.
    pub struct ConsumerSendMsgBackRequestHeader {
        offset: i64 = "offset",
        group: String = "group",
        delay_level: i32 = "delayLevel",
        origin_msg_id: Option<String> = "originMsgId",
        origin_topic: Option<String> = "originTopic",
        unit_mode: Option<bool> = "unitMode",
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// END_TRANSACTION (37). `commitOrRollback`: 0 unknown, 8 commit, 12 rollback.
    pub struct EndTransactionRequestHeader {
        topic: Option<String> = "topic",
        producer_group: String = "producerGroup",
        tran_state_table_offset: i64 = "tranStateTableOffset",
        commit_log_offset: i64 = "commitLogOffset",
        commit_or_rollback: i32 = "commitOrRollback",
        from_transaction_check: Option<bool> = "fromTransactionCheck",
        msg_id: String = "msgId",
        transaction_id: Option<String> = "transactionId",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// CHECK_TRANSACTION_STATE (39), broker to producer, oneway.
    pub struct CheckTransactionStateRequestHeader {
        topic: Option<String> = "topic",
        tran_state_table_offset: i64 = "tranStateTableOffset",
        commit_log_offset: i64 = "commitLogOffset",
        msg_id: Option<String> = "msgId",
        transaction_id: Option<String> = "transactionId",
        offset_msg_id: Option<String> = "offsetMsgId",
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105).
    pub struct GetRouteInfoRequestHeader {
        topic: String = "topic",
        accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

command_header! {
    /// REGISTER_BROKER (103). `bodyCrc32` = `crc32(body) & 0x7FFFFFFF`; 0 disables the check.
    pub struct RegisterBrokerRequestHeader {
        broker_name: String = "brokerName",
        broker_addr: String = "brokerAddr",
        cluster_name: String = "clusterName",
        ha_server_addr: String = "haServerAddr",
        broker_id: i64 = "brokerId",
        heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMillis",
        enable_acting_master: Option<bool> = "enableActingMaster",
        compressed: Option<bool> = "compressed",
        body_crc32: Option<i32> = "bodyCrc32",
    }
}

command_header! {
    /// Answer of REGISTER_BROKER; both null for a lone master.
    pub struct RegisterBrokerResponseHeader {
        ha_server_addr: Option<String> = "haServerAddr",
        master_addr: Option<String> = "masterAddr",
    }
}

command_header! {
    /// UNREGISTER_BROKER (104).
    pub struct UnregisterBrokerRequestHeader {
        broker_name: String = "brokerName",
        broker_addr: String = "brokerAddr",
        cluster_name: String = "clusterName",
        broker_id: i64 = "brokerId",
    }
}

command_header! {
    /// UPDATE_AND_CREATE_TOPIC (17). `attributes`: `"+key=value,-key2"`, empty when none.
    pub struct CreateTopicRequestHeader {
        topic: String = "topic",
        default_topic: String = "defaultTopic",
        read_queue_nums: i32 = "readQueueNums",
        write_queue_nums: i32 = "writeQueueNums",
        perm: i32 = "perm",
        topic_filter_type: String = "topicFilterType",
        topic_sys_flag: Option<i32> = "topicSysFlag",
        order: bool = "order",
        attributes: Option<String> = "attributes",
        force: Option<bool> = "force",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_BROKER (215).
    pub struct DeleteTopicRequestHeader {
        topic: String = "topic",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        topic: String = "topic",
        cluster_name: Option<String> = "clusterName",
    }
}

command_header! {
    /// GET_TOPICS_BY_CLUSTER (224).
    pub struct GetTopicsByClusterRequestHeader {
        cluster: String = "cluster",
    }
}

command_header! {
    /// GET_TOPIC_STATS_INFO (202).
    pub struct GetTopicStatsInfoRequestHeader {
        topic: String = "topic",
    }
}

command_header! {
    /// GET_CONSUME_STATS (208). `topicList` is `;`-separated.
    pub struct GetConsumeStatsRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: Option<String> = "topic",
        topic_list: Option<String> = "topicList",
    }
}

command_header! {
    /// GET_CONSUMER_CONNECTION_LIST (203).
    pub struct GetConsumerConnectionListRequestHeader {
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// GET_ALL_TOPIC_CONFIG (21) paging fields (all optional; absent = everything).
    pub struct GetAllTopicConfigRequestHeader {
        topic_seq: Option<i32> = "topicSeq",
        data_version: Option<String> = "dataVersion",
        max_topic_num: Option<i32> = "maxTopicNum",
    }
}

command_header! {
    /// QUERY_MESSAGE (12). `_UNIQUE_KEY_QUERY` = "true" when `key` is a UNIQ_KEY.
    pub struct QueryMessageRequestHeader {
        topic: String = "topic",
        key: String = "key",
        max_num: i32 = "maxNum",
        begin_timestamp: i64 = "beginTimestamp",
        end_timestamp: i64 = "endTimestamp",
        unique_key_query: Option<bool> = "_UNIQUE_KEY_QUERY",
    }
}

command_header! {
    /// Answer of QUERY_MESSAGE, present on SUCCESS and QUERY_NOT_FOUND alike.
    pub struct QueryMessageResponseHeader {
        index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222): `mqadmin resetOffsetByTime`. A `queueId` of -1 (or none)
    /// means every queue; `offset` (not -1) names the offset instead of the time; a `timestamp`
    /// below 0 means the end of each queue.
    pub struct ResetOffsetRequestHeader {
        topic: String = "topic",
        group: String = "group",
        queue_id: Option<i32> = "queueId",
        offset: Option<i64> = "offset",
        timestamp: i64 = "timestamp",
        is_force: bool = "isForce",
    }
}

command_header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply message handed by the broker to the client
    /// that sent the request (its `REPLY_TO_CLIENT`), with the replying send's fields and where
    /// it was born and stored; the body is the reply's.
    pub struct ReplyMessageRequestHeader {
        producer_group: String = "producerGroup",
        topic: String = "topic",
        default_topic: String = "defaultTopic",
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        queue_id: i32 = "queueId",
        sys_flag: i32 = "sysFlag",
        born_timestamp: i64 = "bornTimestamp",
        flag: i32 = "flag",
        properties: Option<String> = "properties",
        reconsume_times: Option<i32> = "reconsumeTimes",
        unit_mode: Option<bool> = "unitMode",
        born_host: String = "bornHost",
        store_host: String = "storeHost",
        store_timestamp: i64 = "storeTimestamp",
    }
}

command_header! {
    /// POP_MESSAGE (200050): up to `maxMsgNums` messages of `topic` for `consumerGroup` (a
    /// `queueId` of -1: from any queue), invisible to the group's other pops for
    /// `invisibleTime` ms unless acknowledged; held up to `pollTime` ms when there are none.
    /// `initMode` 0 starts a new group at the queue's first message, 1 at its end.
    pub struct PopMessageRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        max_msg_nums: i32 = "maxMsgNums",
        invisible_time: i64 = "invisibleTime",
        poll_time: i64 = "pollTime",
        born_time: i64 = "bornTime",
        init_mode: i32 = "initMode",
        exp_type: Option<String> = "expType",
        exp: Option<String> = "exp",
        order: Option<bool> = "order",
        attempt_id: Option<String> = "attemptId",
    }
}

command_header! {
    /// The answer to POP_MESSAGE: when the messages were popped and for how long they are
    /// invisible (the client builds each message's `POP_CK` handle from these).
    pub struct PopMessageResponseHeader {
        pop_time: i64 = "popTime",
        invisible_time: i64 = "invisibleTime",
        revive_qid: i32 = "reviveQid",
        rest_num: i64 = "restNum",
        start_offset_info: Option<String> = "startOffsetInfo",
        msg_offset_info: Option<String> = "msgOffsetInfo",
        order_count_info: Option<String> = "orderCountInfo",
    }
}

command_header! {
    /// ACK_MESSAGE (200051): the message at `offset` of the queue was consumed; `extraInfo` is
    /// its `POP_CK` handle.
    pub struct AckMessageRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        extra_info: String = "extraInfo",
        offset: i64 = "offset",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053): the popped message at `offset` becomes visible
    /// again `invisibleTime` ms from now (a consumer's RECONSUME_LATER).
    pub struct ChangeInvisibleTimeRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        extra_info: String = "extraInfo",
        offset: i64 = "offset",
        invisible_time: i64 = "invisibleTime",
    }
}

command_header! {
    /// The answer to CHANGE_MESSAGE_INVISIBLETIME: the message's new pop time (its new handle).
    pub struct ChangeInvisibleTimeResponseHeader {
        pop_time: i64 = "popTime",
        invisible_time: i64 = "invisibleTime",
        revive_qid: i32 = "reviveQid",
    }
}

command_header! {
    /// DELETE_SUBSCRIPTIONGROUP (207): `mqadmin deleteSubGroup`; `cleanOffset` also drops the
    /// group's committed offsets.
    pub struct DeleteSubscriptionGroupRequestHeader {
        group_name: String = "groupName",
        clean_offset: Option<bool> = "cleanOffset",
    }
}

command_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG (352): one group's settings.
    pub struct GetSubscriptionGroupConfigRequestHeader {
        group: String = "group",
    }
}

command_header! {
    /// VIEW_MESSAGE_BY_ID (33): `offset` is a commit-log offset.
    pub struct ViewMessageRequestHeader {
        offset: i64 = "offset",
        topic: Option<String> = "topic",
    }
}

command_header! {
    /// PUT_KV_CONFIG (100).
    pub struct PutKvConfigRequestHeader {
        namespace: String = "namespace",
        key: String = "key",
        value: String = "value",
    }
}

command_header! {
    /// GET_KV_CONFIG (101) and DELETE_KV_CONFIG (102).
    pub struct GetKvConfigRequestHeader {
        namespace: String = "namespace",
        key: String = "key",
    }
}

command_header! {
    /// Answer of GET_KV_CONFIG.
    pub struct GetKvConfigResponseHeader {
        value: Option<String> = "value",
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
        group: Option<String> = "group",
        controller_leader_id: Option<String> = "controllerLeaderId",
        controller_leader_address: Option<String> = "controllerLeaderAddress",
        is_leader: bool = "isLeader",
        peers: Option<String> = "peers",
    }
}

command_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012) request; also its response, with `nextBrokerId`.
    pub struct GetNextBrokerIdHeader {
        cluster_name: String = "clusterName",
        broker_name: String = "brokerName",
        next_broker_id: Option<i64> = "nextBrokerId",
    }
}

command_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013) request: `registerCheckCode` is `address;uuid`.
    pub struct ApplyBrokerIdRequestHeader {
        cluster_name: String = "clusterName",
        broker_name: String = "brokerName",
        applied_broker_id: i64 = "appliedBrokerId",
        register_check_code: String = "registerCheckCode",
    }
}

command_header! {
    /// CONTROLLER_REGISTER_BROKER (1003) request.
    pub struct RegisterBrokerToControllerRequestHeader {
        cluster_name: String = "clusterName",
        broker_name: String = "brokerName",
        broker_id: Option<i64> = "brokerId",
        broker_address: String = "brokerAddress",
        invoke_time: Option<i64> = "invokeTime",
    }
}

command_header! {
    /// The master of a broker set as the controller answers it: CONTROLLER_REGISTER_BROKER
    /// (1003), CONTROLLER_GET_REPLICA_INFO (1004) and CONTROLLER_ELECT_MASTER (1002) responses,
    /// and NOTIFY_BROKER_ROLE_CHANGED (1008) requests (each uses the keys it has).
    pub struct MasterInfoHeader {
        cluster_name: Option<String> = "clusterName",
        broker_name: Option<String> = "brokerName",
        master_broker_id: Option<i64> = "masterBrokerId",
        master_address: Option<String> = "masterAddress",
        master_epoch: Option<i32> = "masterEpoch",
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004) request.
    pub struct GetReplicaInfoRequestHeader {
        broker_name: String = "brokerName",
    }
}

command_header! {
    /// CONTROLLER_ELECT_MASTER (1002) request; `brokerId` -1 when an admin asks.
    pub struct ElectMasterRequestHeader {
        cluster_name: Option<String> = "clusterName",
        broker_name: String = "brokerName",
        broker_id: Option<i64> = "brokerId",
        designate_elect: Option<bool> = "designateElect",
        invoke_time: Option<i64> = "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001) request; the new set is the body.
    pub struct AlterSyncStateSetRequestHeader {
        broker_name: String = "brokerName",
        master_broker_id: i64 = "masterBrokerId",
        master_epoch: i32 = "masterEpoch",
        invoke_time: Option<i64> = "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001) response.
    pub struct AlterSyncStateSetResponseHeader {
        new_sync_state_set_epoch: i32 = "newSyncStateSetEpoch",
    }
}

command_header! {
    /// BROKER_HEARTBEAT (904) to a controller: what election needs of a live broker.
    pub struct BrokerHeartbeatRequestHeader {
        cluster_name: String = "clusterName",
        broker_addr: String = "brokerAddr",
        broker_name: String = "brokerName",
        broker_id: Option<i64> = "brokerId",
        epoch: Option<i32> = "epoch",
        max_offset: Option<i64> = "maxOffset",
        confirm_offset: Option<i64> = "confirmOffset",
        heartbeat_timeout_mills: Option<i64> = "heartbeatTimeoutMills",
        election_priority: Option<i32> = "electionPriority",
    }
}

command_header! {
    /// CLEAN_BROKER_DATA (1011) to a controller: `brokerControllerIdsToClean` is `1;2`, or absent
    /// for the whole set.
    pub struct CleanControllerBrokerDataRequestHeader {
        cluster_name: Option<String> = "clusterName",
        broker_name: String = "brokerName",
        broker_controller_ids_to_clean: Option<String> = "brokerControllerIdsToClean",
        is_clean_living_broker: Option<bool> = "isCleanLivingBroker",
        invoke_time: Option<i64> = "invokeTime",
    }
}
