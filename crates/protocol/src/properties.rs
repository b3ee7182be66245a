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
    pub const KEYS: &str = "KEYS";
    pub const TAGS: &str = "TAGS";
    pub const WAIT_STORE_MSG_OK: &str = "WAIT";
    pub const DELAY_TIME_LEVEL: &str = "DELAY";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QUEUE_ID: &str = "REAL_QID";
    pub const TRANSACTION_PREPARED: &str = "TRAN_MSG";
    pub const PRODUCER_GROUP: &str = "PGROUP";
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    pub const BUYER_ID: &str = "BUYER_ID";
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
    pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
    pub const MQ2_FLAG: &str = "MQ2_FLAG";
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    pub const MSG_REGION: &str = "MSG_REGION";
    pub const TRACE_SWITCH: &str = "TRACE_ON";
    pub const UNIQ_CLIENT_MESSAGE_ID_KEYIDX: &str = "UNIQ_KEY";
    pub const EXTEND_UNIQ_INFO: &str = "EXTEND_UNIQ_INFO";
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    pub const CONSUME_START_TIMESTAMP: &str = "CONSUME_START_TIME";
    pub const INNER_NUM: &str = "INNER_NUM";
    pub const INNER_BASE: &str = "INNER_BASE";
    pub const TRANSACTION_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    pub const MESSAGE_REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    pub const MESSAGE_TTL: &str = "TTL";
    pub const REPLY_MESSAGE_ARRIVE_TIME: &str = "ARRIVE_TIME";
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    pub const CLUSTER: &str = "CLUSTER";
    pub const MESSAGE_TYPE: &str = "MSG_TYPE";
    pub const TRANSACTION_ID: &str = "__transactionId__";
    pub const DUP_INFO: &str = "DUP_INFO";
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
    pub const TIMER_DELAY_LEVEL: &str = "TIMER_DELAY_LEVEL";
    pub const POP_CK: &str = "POP_CK";
    pub const POP_CK_OFFSET: &str = "POP_CK_OFFSET";
    pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";
    pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
    pub const BORN_HOST: &str = "__BORNHOST";
    pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    pub const CRC32: &str = "__CRC32#";
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
