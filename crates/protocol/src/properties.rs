//! The message properties string: `name 0x01 value 0x02` for every pair, and the well-known keys.
//!
//! Owns: that codec and the `MessageConst` key names. Must never: reorder pairs (order is kept so
//! a stored record re-encodes byte for byte).

use indexmap::IndexMap;

use crate::error::MessageError;

/// Ordered name → value map of message properties.
/// Message properties in order (foldhash: see [`crate::ExtFields`]).
pub type Properties = IndexMap<String, String, foldhash::fast::RandomState>;

/// Separates a property's name from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Terminates every pair, the last one included.
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// Separates the keys inside the `KEYS` property.
pub const KEY_SEPARATOR: char = ' ';
/// Properties longer than this do not fit the record's i16 length.
pub const MAX_PROPERTIES_BYTES: usize = i16::MAX as usize;

/// Well-known property names (RocketMQ `MessageConst`).
pub mod keys {
    /// The application's keys, space-separated: what QUERY_MESSAGE finds a message by.
    pub const KEYS: &str = "KEYS";
    /// The message's tag, which TAG subscriptions filter on.
    pub const TAGS: &str = "TAGS";
    /// `false`: the send's answer need not wait for a synchronous flush or replication.
    pub const WAIT_STORE_MSG_OK: &str = "WAIT";
    /// The delay level, a 1-based index into the broker's `messageDelayLevel` list.
    pub const DELAY_TIME_LEVEL: &str = "DELAY";
    /// On a message sent back for retry: the topic it was consumed from.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// The topic a delayed, timer or half message belongs to while it is parked in a system topic.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// The queue such a parked message belongs to.
    pub const REAL_QUEUE_ID: &str = "REAL_QID";
    /// `true` on a transactional half message.
    pub const TRANSACTION_PREPARED: &str = "TRAN_MSG";
    /// The producer group of a transactional message, asked to check it.
    pub const PRODUCER_GROUP: &str = "PGROUP";
    /// Set by clients on pulled messages: the queue's smallest offset at the pull.
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Set by clients on pulled messages: the queue's max offset at the pull.
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    /// Alibaba's legacy buyer id; unused by open-source RocketMQ.
    pub const BUYER_ID: &str = "BUYER_ID";
    /// On a message sent back for retry: the id of the message first consumed.
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// A legacy `MessageConst` flag; unused by open-source RocketMQ.
    pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
    /// A legacy `MessageConst` flag; unused by open-source RocketMQ.
    pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
    /// A legacy `MessageConst` flag; unused by open-source RocketMQ.
    pub const MQ2_FLAG: &str = "MQ2_FLAG";
    /// The reconsume count as a property, where a client resends a message to a retry topic itself.
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// The region of the broker that stored the message.
    pub const MSG_REGION: &str = "MSG_REGION";
    /// `true` or `false`: whether the storing broker had message tracing on.
    pub const TRACE_SWITCH: &str = "TRACE_ON";
    /// The producer-assigned unique id (UNIQ_KEY): what applications see as the message id.
    pub const UNIQ_CLIENT_MESSAGE_ID_KEYIDX: &str = "UNIQ_KEY";
    /// RocketMQ's `PROPERTY_EXTEND_UNIQ_INFO`; carried as given.
    pub const EXTEND_UNIQ_INFO: &str = "EXTEND_UNIQ_INFO";
    /// Redeliveries allowed before the dead-letter queue, as the consumer set it.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// Set by the Java client: when it began consuming the message, epoch milliseconds.
    pub const CONSUME_START_TIMESTAMP: &str = "CONSUME_START_TIME";
    /// In a stored inner batch: how many messages the record holds.
    pub const INNER_NUM: &str = "INNER_NUM";
    /// In a stored inner batch: the queue offset of its first message.
    pub const INNER_BASE: &str = "INNER_BASE";
    /// On a half message put back in its queue while awaiting a check: the original's queue offset.
    pub const TRANSACTION_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    /// How many times the producer has been asked to check a half message.
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// How long after sending a half message the producer is not asked to check it, in seconds.
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// RocketMQ's `PROPERTY_INSTANCE_ID`; carried as given.
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    /// Ties a reply to its request in request-reply messaging.
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    /// The client id a reply must be pushed to.
    pub const MESSAGE_REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    /// How long a request waits for its reply, in milliseconds.
    pub const MESSAGE_TTL: &str = "TTL";
    /// Set by the requesting client: when the reply arrived, epoch milliseconds.
    pub const REPLY_MESSAGE_ARRIVE_TIME: &str = "ARRIVE_TIME";
    /// When the broker pushed a reply to its requester, epoch milliseconds.
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    /// The cluster of the broker that stored the message.
    pub const CLUSTER: &str = "CLUSTER";
    /// The message's type for request-reply messaging (`reply` on a reply).
    pub const MESSAGE_TYPE: &str = "MSG_TYPE";
    /// The producer's transaction id.
    pub const TRANSACTION_ID: &str = "__transactionId__";
    /// RocketMQ's `DUP_INFO`; carried as given.
    pub const DUP_INFO: &str = "DUP_INFO";
    /// The key ordered messages are sharded by (RocketMQ 5 FIFO messages' message group).
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    /// Timer messages: deliver this many seconds after the broker receives it.
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// Timer messages: deliver this many milliseconds after the broker receives it.
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// Timer messages: deliver at this time, epoch milliseconds.
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// Set by the broker: when a timer message is due, epoch milliseconds.
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    /// Set by the broker: when a timer message entered the timer, epoch milliseconds.
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    /// Set by the broker: when a timer message left the timer, epoch milliseconds.
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    /// Set by the broker: how many times a far-off timer message was re-parked.
    pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
    /// Marks a message that cancels the timer message with this UNIQ_KEY.
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
    /// RocketMQ's `PROPERTY_TIMER_DELAY_LEVEL`; carried as given.
    pub const TIMER_DELAY_LEVEL: &str = "TIMER_DELAY_LEVEL";
    /// The handle of a popped message: what ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME take.
    pub const POP_CK: &str = "POP_CK";
    /// RocketMQ's `PROPERTY_POP_CK_OFFSET`, part of its POP bookkeeping; carried as given.
    pub const POP_CK_OFFSET: &str = "POP_CK_OFFSET";
    /// When the message was first popped, epoch milliseconds, kept across redeliveries.
    pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";
    /// A trace context, as RocketMQ's proxy passes it on; carried as given.
    pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
    /// The producer's address as a property, as RocketMQ's proxy sets it.
    pub const BORN_HOST: &str = "__BORNHOST";
    /// When the producer created the message, as a property, epoch milliseconds.
    pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
    /// On a dead-lettered message: the topic it was consumed from.
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    /// On a dead-lettered message: its original message id.
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    /// A CRC32 that RocketMQ brokers with `appendPropCRC` append to the properties; carried as given.
    pub const CRC32: &str = "__CRC32#";
    /// Set by a producer: the light message queues (`%LMQ%…`, comma-separated) a message is also
    /// dispatched to (see [`crate::lmq`]).
    pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
    /// Set by the broker at append: the message's offset in each queue of
    /// [`INNER_MULTI_DISPATCH`], in the same order, comma-separated.
    pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";
}

/// Encodes properties; a name or value holding a separator byte is refused, since it would
/// silently split into other properties on the reader's side.
pub fn encode_properties(props: &Properties) -> Result<String, MessageError> {
    let mut out = String::with_capacity(props.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
    for (name, value) in props {
        for s in [name, value] {
            if s.contains([NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR]) {
                return Err(MessageError::PropertySeparator(s.clone()));
            }
        }
        out.push_str(name);
        out.push(NAME_VALUE_SEPARATOR);
        out.push_str(value);
        out.push(PROPERTY_SEPARATOR);
    }
    Ok(out)
}

/// Decodes a properties string. Segments without exactly one name separator or with an empty
/// name are dropped (as the Go client does: a second 0x01 could not be written back, and Java
/// would fold it into the value); empty values are kept so nothing a producer sent is lost
/// between broker and consumer. A final pair without its 0x02 is accepted.
pub fn decode_properties(s: &str) -> Properties {
    let mut props = Properties::default();
    for (name, value) in pairs(s) {
        props.insert(name.to_owned(), value.to_owned());
    }
    props
}

/// The `(name, value)` pairs of an encoded property string, in order, skipping the segments
/// that [`decode_properties`] skips.
fn pairs(s: &str) -> impl Iterator<Item = (&str, &str)> {
    s.split(PROPERTY_SEPARATOR).filter_map(|segment| {
        segment
            .split_once(NAME_VALUE_SEPARATOR)
            .filter(|(name, value)| !name.is_empty() && !value.contains(NAME_VALUE_SEPARATOR))
    })
}

/// One property of an encoded property string, without decoding the rest: the value
/// [`decode_properties`] would give `name` (the last one, if repeated).
#[must_use]
pub fn property<'a>(s: &'a str, name: &str) -> Option<&'a str> {
    pairs(s).filter(|(n, _)| *n == name).last().map(|(_, v)| v)
}

/// Java's `String.hashCode()` over UTF-16 code units: the consume-queue tag hash of `TAGS`.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// The consume-queue tag code of a message: the hash of its `TAGS`, 0 when it has none.
pub fn tags_code(tags: Option<&str>) -> i64 {
    tags.filter(|t| !t.is_empty()).map_or(0, |t| java_string_hash(t).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `property` must read what `decode_properties` would, on well-formed and odd input.
    #[test]
    fn single_property_lookup_agrees_with_full_decoding() {
        let inputs = [
            "TAGS\u{1}A\u{2}KEYS\u{1}k1 k2\u{2}",
            "TAGS\u{1}first\u{2}TAGS\u{1}second\u{2}",
            "\u{1}noname\u{2}TAGS\u{1}a\u{1}b\u{2}KEYS\u{1}x",
            "TAGS\u{1}\u{2}",
            "",
            "garbage",
        ];
        for s in inputs {
            let decoded = decode_properties(s);
            for name in ["TAGS", "KEYS", "", "missing"] {
                assert_eq!(property(s, name), decoded.get(name).map(String::as_str), "{s:?} {name:?}");
            }
        }
    }

    #[test]
    fn java_hash_matches_known_values() {
        // "TagA".hashCode() from the reference's heartbeat example.
        assert_eq!(java_string_hash("TagA"), 2598919);
        assert_eq!(java_string_hash(""), 0);
        // non-BMP characters hash as two UTF-16 units, as in Java
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn properties_round_trip_and_tolerate_oddities() {
        let raw = "color\u{1}red\u{2}KEYS\u{1}key-1\u{2}WAIT\u{1}true\u{2}";
        let props = decode_properties(raw);
        assert_eq!(props.get("KEYS").map(String::as_str), Some("key-1"));
        assert_eq!(encode_properties(&props).unwrap(), raw);
        let odd = decode_properties("a\u{1}1\u{2}junk\u{2}\u{1}noname\u{2}two\u{1}x\u{1}y\u{2}empty\u{1}\u{2}last\u{1}x");
        assert_eq!(odd.len(), 3);
        assert_eq!(odd["empty"], "");
        assert_eq!(odd["last"], "x");
    }

    #[test]
    fn separators_refused() {
        let mut p = Properties::default();
        p.insert("k".into(), "bad\u{2}value".into());
        assert!(encode_properties(&p).is_err());
    }
}
