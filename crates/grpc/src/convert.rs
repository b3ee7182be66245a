//! Messages between their gRPC form and the broker's: a sent `Message` becomes the service's
//! `SendRequest` (its system properties spelled as RocketMQ's message properties), and a stored
//! record becomes the `Message` a consumer receives.
//!
//! Owns: which property carries which system field, and the checks RocketMQ 5 makes of a sent
//! message's fields. Must never: drop a user property, or pass a property a client may not set.

use std::net::SocketAddr;
use std::time::Duration;

use petrel_kit::clock::now_ms;

use petrel_broker::services::produce::SendRequest;
use petrel_protocol::message::{MessageExt, sys_flag};
use petrel_protocol::properties::{KEY_SEPARATOR, Properties, encode_properties, keys};

use crate::pb::{self, Code, Encoding, MessageType};
use crate::status::Refusal;

/// Longest message group (RocketMQ 5's `maxMessageGroupSize`).
pub const MAX_MESSAGE_GROUP_BYTES: usize = 64;
/// Most bytes a message's properties, user and system together, may take
/// (RocketMQ 5's `maxUserPropertySize`-like bound: the stored record holds them in an i16).
pub const MAX_PROPERTIES_BYTES: usize = petrel_protocol::properties::MAX_PROPERTIES_BYTES;

/// Property names a client may not set as user properties: the broker's own.
const SYSTEM_KEYS: &[&str] = &[
    keys::KEYS,
    keys::TAGS,
    keys::WAIT_STORE_MSG_OK,
    keys::DELAY_TIME_LEVEL,
    keys::RETRY_TOPIC,
    keys::REAL_TOPIC,
    keys::REAL_QUEUE_ID,
    keys::TRANSACTION_PREPARED,
    keys::PRODUCER_GROUP,
    keys::MIN_OFFSET,
    keys::MAX_OFFSET,
    keys::ORIGIN_MESSAGE_ID,
    keys::TRANSFER_FLAG,
    keys::CORRECTION_FLAG,
    keys::RECONSUME_TIME,
    keys::MSG_REGION,
    keys::TRACE_SWITCH,
    keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    keys::EXTEND_UNIQ_INFO,
    keys::MAX_RECONSUME_TIMES,
    keys::CONSUME_START_TIMESTAMP,
    keys::INNER_NUM,
    keys::INNER_BASE,
    keys::TRANSACTION_PREPARED_QUEUE_OFFSET,
    keys::TRANSACTION_CHECK_TIMES,
    keys::CHECK_IMMUNITY_TIME_IN_SECONDS,
    keys::CLUSTER,
    keys::MESSAGE_TYPE,
    keys::TRANSACTION_ID,
    keys::DUP_INFO,
    keys::SHARDING_KEY,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_DELAY_MS,
    keys::TIMER_DELIVER_MS,
    keys::TIMER_OUT_MS,
    keys::TIMER_ENQUEUE_MS,
    keys::TIMER_DEQUEUE_MS,
    keys::TIMER_ROLL_TIMES,
    keys::TIMER_DEL_UNIQKEY,
    keys::TIMER_DELAY_LEVEL,
    keys::POP_CK,
    keys::POP_CK_OFFSET,
    keys::FIRST_POP_TIME,
    keys::TRACE_CONTEXT,
    keys::BORN_HOST,
    keys::BORN_TIMESTAMP,
    keys::DLQ_ORIGIN_TOPIC,
    keys::DLQ_ORIGIN_MESSAGE_ID,
    keys::CRC32,
];

fn is_system_key(name: &str) -> bool {
    SYSTEM_KEYS.contains(&name)
}

/// A resource's name in the broker: `namespace%name` inside a namespace, as RocketMQ spells it.
#[must_use]
pub fn resource_name(r: Option<&pb::Resource>) -> String {
    match r {
        Some(r) if !r.resource_namespace.is_empty() => format!("{}%{}", r.resource_namespace, r.name),
        Some(r) => r.name.clone(),
        None => String::new(),
    }
}

/// Epoch milliseconds of a protobuf timestamp (negative ones read as 0).
#[must_use]
pub fn timestamp_ms(t: &prost_types::Timestamp) -> i64 {
    t.seconds.saturating_mul(1000).saturating_add(i64::from(t.nanos / 1_000_000)).max(0)
}

/// A protobuf timestamp of epoch milliseconds.
#[must_use]
pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        #[expect(clippy::cast_possible_truncation, reason = "rem_euclid(1000) * 1e6 < 1e9 fits an i32")]
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// Milliseconds of a protobuf duration, saturating; `None` for a negative one.
#[must_use]
pub fn duration_ms(d: &prost_types::Duration) -> Option<i64> {
    let ms = d.seconds.saturating_mul(1000).saturating_add(i64::from(d.nanos / 1_000_000));
    (ms >= 0).then_some(ms)
}

/// A protobuf duration of `d`.
#[must_use]
pub fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// What kind a message's fields make it (RocketMQ's `TopicMessageType.parseFromMessageProperty`).
#[must_use]
pub fn kind_of(sys: &pb::SystemProperties) -> MessageType {
    if sys.orphaned_transaction_recovery_duration.is_some() || sys.message_type == MessageType::Transaction as i32 {
        MessageType::Transaction
    } else if sys.message_group.is_some() {
        MessageType::Fifo
    } else if sys.delivery_timestamp.is_some() {
        MessageType::Delay
    } else {
        MessageType::Normal
    }
}

/// Which kinds a topic takes, from its `message.type` attribute; a topic without one takes any
/// (it was made by a remoting client or tool that predates the attribute).
#[must_use]
pub fn accepted_kinds(attributes: &std::collections::BTreeMap<String, String>) -> Vec<MessageType> {
    match attributes.get("message.type").map(|t| t.to_ascii_uppercase()) {
        Some(t) if t == "NORMAL" => vec![MessageType::Normal],
        Some(t) if t == "FIFO" => vec![MessageType::Fifo],
        Some(t) if t == "DELAY" => vec![MessageType::Delay],
        Some(t) if t == "TRANSACTION" => vec![MessageType::Transaction],
        _ => vec![MessageType::Normal, MessageType::Fifo, MessageType::Delay, MessageType::Transaction],
    }
}

/// The broker's send of one gRPC message, with the message's kind; the checks RocketMQ 5 makes
/// of a message's fields come first.
///
/// # Errors
/// The RocketMQ code of the first check that fails.
pub fn send_request(m: pb::Message, peer: SocketAddr, max_body_bytes: usize) -> Result<(SendRequest, MessageType), Refusal> {
    let topic = resource_name(m.topic.as_ref());
    if topic.is_empty() {
        return Err(Refusal::new(Code::IllegalTopic, "topic name is empty"));
    }
    if m.body.is_empty() {
        return Err(Refusal::new(Code::MessageBodyEmpty, "message body is empty"));
    }
    if m.body.len() > max_body_bytes {
        return Err(Refusal::new(
            Code::MessageBodyTooLarge,
            format!(
                "message body of {} bytes is larger than maxMessageSize {max_body_bytes}",
                m.body.len()
            ),
        ));
    }
    let sys = m.system_properties.unwrap_or_default();
    let kind = kind_of(&sys);
    let mut props = Properties::default();
    for (k, v) in m.user_properties {
        if is_system_key(&k) || k.is_empty() {
            return Err(Refusal::new(
                Code::IllegalMessagePropertyKey,
                format!("property key [{k}] is reserved or empty"),
            ));
        }
        props.insert(k, v);
    }
    put_system(&mut props, &topic, &sys, kind)?;
    let properties = encode_properties(&props).map_err(|e| Refusal::new(Code::MessagePropertiesTooLarge, e.to_string()))?;
    if properties.len() > MAX_PROPERTIES_BYTES {
        return Err(Refusal::new(
            Code::MessagePropertiesTooLarge,
            format!("properties take {} bytes, more than {MAX_PROPERTIES_BYTES}", properties.len()),
        ));
    }
    let transactional = kind == MessageType::Transaction;
    Ok((
        SendRequest {
            // A gRPC producer has no group; RocketMQ's proxy registers it under each topic it
            // publishes, and a transaction's check-back finds it there.
            producer_group: topic.clone(),
            default_topic: String::new(),
            default_topic_queue_nums: 0,
            queue_id: sys.queue_id,
            sys_flag: if transactional { sys_flag::TRANSACTION_PREPARED_TYPE } else { 0 },
            born_timestamp: sys.born_timestamp.as_ref().map_or_else(now_ms, timestamp_ms),
            flag: 0,
            properties: Some(properties),
            reconsume_times: 0,
            max_reconsume_times: None,
            batch: false,
            body: m.body,
            born_host: Some(peer),
            topic,
        },
        kind,
    ))
}

/// The system fields as RocketMQ's properties.
fn put_system(props: &mut Properties, topic: &str, sys: &pb::SystemProperties, kind: MessageType) -> Result<(), Refusal> {
    if let Some(tag) = &sys.tag {
        if tag.trim().is_empty() || tag.contains('|') {
            return Err(Refusal::new(Code::IllegalMessageTag, format!("tag [{tag}] is blank or holds '|'")));
        }
        props.insert(keys::TAGS.into(), tag.clone());
    }
    if sys.keys.iter().any(|k| k.trim().is_empty()) {
        return Err(Refusal::new(Code::IllegalMessageKey, "a message key is blank"));
    }
    if !sys.keys.is_empty() {
        props.insert(keys::KEYS.into(), sys.keys.join(&KEY_SEPARATOR.to_string()));
    }
    if sys.message_id.is_empty() {
        return Err(Refusal::new(Code::IllegalMessageId, "message id is empty"));
    }
    props.insert(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX.into(), sys.message_id.clone());
    if let Some(group) = &sys.message_group {
        if group.is_empty() || group.len() > MAX_MESSAGE_GROUP_BYTES {
            return Err(Refusal::new(
                Code::IllegalMessageGroup,
                format!("message group [{group}] is empty or longer than {MAX_MESSAGE_GROUP_BYTES} bytes"),
            ));
        }
        props.insert(keys::SHARDING_KEY.into(), group.clone());
    }
    if let Some(at) = &sys.delivery_timestamp {
        props.insert(keys::TIMER_DELIVER_MS.into(), timestamp_ms(at).to_string());
    }
    if kind == MessageType::Transaction {
        props.insert(keys::TRANSACTION_PREPARED.into(), "true".into());
        // The producer group a check-back looks for: gRPC producers are registered under each
        // topic they publish.
        props.insert(keys::PRODUCER_GROUP.into(), topic.to_owned());
        if let Some(d) = sys.orphaned_transaction_recovery_duration.as_ref().and_then(duration_ms) {
            props.insert(keys::CHECK_IMMUNITY_TIME_IN_SECONDS.into(), (d / 1000).to_string());
        }
    }
    if let Some(trace) = &sys.trace_context {
        props.insert(keys::TRACE_CONTEXT.into(), trace.clone());
    }
    props.insert(keys::WAIT_STORE_MSG_OK.into(), "true".into());
    Ok(())
}

/// How a consumer receives a stored message: its fields, with the handle it acks by.
pub struct Delivery {
    /// The handle the consumer acks or changes the message by.
    pub receipt_handle: Option<String>,
    /// How long it stays invisible, milliseconds.
    pub invisible_ms: Option<i64>,
}

/// A stored message as a gRPC `Message`.
#[must_use]
pub fn message_of(m: &MessageExt, delivery: &Delivery) -> pb::Message {
    let p = &m.properties;
    let get = |k: &str| p.get(k).cloned();
    let delivery_ms = get(keys::TIMER_DELIVER_MS).and_then(|v| v.parse::<i64>().ok());
    let message_type = if p.contains_key(keys::TRANSACTION_PREPARED) {
        MessageType::Transaction
    } else if p.contains_key(keys::SHARDING_KEY) {
        MessageType::Fifo
    } else if delivery_ms.is_some() || p.contains_key(keys::DELAY_TIME_LEVEL) {
        MessageType::Delay
    } else {
        MessageType::Normal
    };
    let compressed = m.sys_flag & sys_flag::COMPRESSED_FLAG != 0;
    let sys = pb::SystemProperties {
        tag: get(keys::TAGS),
        keys: m.keys().map(str::to_owned).collect(),
        message_id: m.uniq_key().map_or_else(|| m.offset_msg_id(), str::to_owned),
        // MD5 in upper-case hex, as RocketMQ's proxy writes it: every SDK compares it so.
        body_digest: Some(pb::Digest {
            r#type: pb::DigestType::Md5 as i32,
            checksum: md5_hex(&m.body),
        }),
        body_encoding: if compressed { Encoding::Gzip } else { Encoding::Identity } as i32,
        message_type: message_type as i32,
        born_timestamp: Some(timestamp(m.born_timestamp)),
        born_host: m.born_host.ip().to_string(),
        store_timestamp: Some(timestamp(m.store_timestamp)),
        store_host: m.store_host.to_string(),
        delivery_timestamp: delivery_ms.map(timestamp),
        receipt_handle: delivery.receipt_handle.clone(),
        queue_id: m.queue_id,
        queue_offset: Some(m.queue_offset),
        invisible_duration: delivery
            .invisible_ms
            .map(|ms| duration(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))),
        delivery_attempt: Some(m.reconsume_times.saturating_add(1)),
        message_group: get(keys::SHARDING_KEY),
        trace_context: get(keys::TRACE_CONTEXT),
        orphaned_transaction_recovery_duration: None,
        dead_letter_queue: None,
        lite_topic: None,
        priority: None,
    };
    pb::Message {
        topic: Some(pb::Resource {
            resource_namespace: String::new(),
            name: get(keys::REAL_TOPIC).unwrap_or_else(|| m.topic.clone()),
        }),
        user_properties: p
            .iter()
            .filter(|(k, _)| !is_system_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        system_properties: Some(sys),
        body: m.body.clone(),
    }
}

/// The upper-case hex MD5 of `body`.
#[must_use]
pub fn md5_hex(body: &[u8]) -> String {
    use md5::Digest as _;
    let digest = md5::Md5::digest(body);
    digest.iter().fold(String::with_capacity(32), |mut s, b| {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02X}");
        s
    })
}

#[cfg(test)]
mod tests;
