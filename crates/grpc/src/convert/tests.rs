use std::collections::BTreeMap;

use petrel_protocol::properties::{decode_properties, keys};

use super::*;

fn peer() -> SocketAddr {
    "10.0.0.7:5000".parse().expect("an address")
}

fn message(sys: pb::SystemProperties) -> pb::Message {
    pb::Message {
        topic: Some(pb::Resource {
            resource_namespace: String::new(),
            name: "T".into(),
        }),
        user_properties: [("color".to_owned(), "red".to_owned())].into_iter().collect(),
        system_properties: Some(sys),
        body: bytes::Bytes::from_static(b"hello"),
    }
}

fn sys() -> pb::SystemProperties {
    pb::SystemProperties {
        message_id: "01ABCDEF".into(),
        tag: Some("TagA".into()),
        keys: vec!["k1".into(), "k2".into()],
        queue_id: 2,
        ..pb::SystemProperties::default()
    }
}

#[test]
fn a_sent_message_keeps_every_field_as_rocketmq_properties() {
    let mut s = sys();
    s.message_group = Some("order-7".into());
    s.delivery_timestamp = Some(timestamp(1_700_000_000_500));
    let (req, kind) = send_request(message(s), peer(), 1024).expect("valid");
    assert_eq!(kind, MessageType::Fifo, "a message group makes it FIFO");
    assert_eq!((req.topic.as_str(), req.queue_id, req.producer_group.as_str()), ("T", 2, "T"));
    let props = decode_properties(req.properties.as_deref().expect("properties"));
    assert_eq!(props.get(keys::TAGS).map(String::as_str), Some("TagA"));
    assert_eq!(props.get(keys::KEYS).map(String::as_str), Some("k1 k2"));
    assert_eq!(props.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).map(String::as_str), Some("01ABCDEF"));
    assert_eq!(props.get(keys::SHARDING_KEY).map(String::as_str), Some("order-7"));
    assert_eq!(props.get(keys::TIMER_DELIVER_MS).map(String::as_str), Some("1700000000500"));
    assert_eq!(props.get("color").map(String::as_str), Some("red"));
    assert_eq!(req.born_host, Some(peer()));
}

#[test]
fn a_transactional_message_is_a_half_message() {
    let mut s = sys();
    s.message_type = MessageType::Transaction as i32;
    let (req, kind) = send_request(message(s), peer(), 1024).expect("valid");
    assert_eq!(kind, MessageType::Transaction);
    assert_eq!(req.sys_flag, sys_flag::TRANSACTION_PREPARED_TYPE);
    let props = decode_properties(req.properties.as_deref().expect("properties"));
    assert_eq!(props.get(keys::TRANSACTION_PREPARED).map(String::as_str), Some("true"));
    assert_eq!(
        props.get(keys::PRODUCER_GROUP).map(String::as_str),
        Some("T"),
        "the check-back finds the producer by it"
    );
}

#[test]
fn each_bad_field_gets_its_own_code() {
    let refused = |m: pb::Message, max: usize| send_request(m, peer(), max).expect_err("refused").code;
    let mut empty = message(sys());
    empty.body = bytes::Bytes::new();
    assert_eq!(refused(empty, 1024), Code::MessageBodyEmpty);
    assert_eq!(refused(message(sys()), 4), Code::MessageBodyTooLarge, "5 bytes > maxMessageSize 4");
    assert!(
        send_request(message(sys()), peer(), 5).is_ok(),
        "a body of exactly maxMessageSize is taken"
    );
    let mut tag = sys();
    tag.tag = Some("a|b".into());
    assert_eq!(refused(message(tag), 1024), Code::IllegalMessageTag);
    let mut key = sys();
    key.keys = vec![" ".into()];
    assert_eq!(refused(message(key), 1024), Code::IllegalMessageKey);
    let mut id = sys();
    id.message_id = String::new();
    assert_eq!(refused(message(id), 1024), Code::IllegalMessageId);
    let mut group = sys();
    group.message_group = Some("g".repeat(MAX_MESSAGE_GROUP_BYTES + 1));
    assert_eq!(refused(message(group), 1024), Code::IllegalMessageGroup);
    let mut reserved = message(sys());
    reserved
        .user_properties
        .insert(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX.into(), "x".into());
    assert_eq!(refused(reserved, 1024), Code::IllegalMessagePropertyKey);
}

#[test]
fn a_stored_message_reads_back_with_its_handle_digest_and_attempt() {
    let (req, _) = send_request(message(sys()), peer(), 1024).expect("valid");
    let stored = MessageExt {
        topic: "T".into(),
        queue_id: 2,
        queue_offset: 9,
        commit_log_offset: 4096,
        reconsume_times: 1,
        body: req.body.clone(),
        properties: decode_properties(req.properties.as_deref().expect("properties")),
        ..MessageExt::default()
    };
    let delivery = Delivery {
        receipt_handle: Some("h".into()),
        invisible_ms: Some(30_000),
    };
    let m = message_of(&stored, &delivery);
    let sys = m.system_properties.expect("system properties");
    assert_eq!(sys.message_id, "01ABCDEF");
    assert_eq!(sys.tag.as_deref(), Some("TagA"));
    assert_eq!(sys.keys, ["k1", "k2"]);
    assert_eq!(sys.delivery_attempt, Some(2), "reconsumed once: the second delivery");
    assert_eq!((sys.queue_id, sys.queue_offset), (2, Some(9)));
    assert_eq!(sys.receipt_handle.as_deref(), Some("h"));
    assert_eq!(
        sys.body_encoding,
        Encoding::Identity as i32,
        "set explicitly: Python refuses an unspecified one"
    );
    let digest = sys.body_digest.expect("digest");
    assert_eq!(
        digest.checksum, "5D41402ABC4B2A76B9719D911017C592",
        "MD5 of 'hello', upper-case hex"
    );
    assert_eq!(m.user_properties.get("color").map(String::as_str), Some("red"));
    assert!(
        !m.user_properties.contains_key(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "system keys stay system fields"
    );
}

#[test]
fn a_topic_without_a_message_type_takes_every_kind_and_one_with_it_only_its_own() {
    let mut attributes = BTreeMap::new();
    assert_eq!(accepted_kinds(&attributes).len(), 4);
    attributes.insert("message.type".to_owned(), "FIFO".to_owned());
    assert_eq!(accepted_kinds(&attributes), [MessageType::Fifo]);
    attributes.insert("message.type".to_owned(), "MIXED".to_owned());
    assert_eq!(accepted_kinds(&attributes).len(), 4);
}

#[test]
fn times_and_durations_round_trip_in_milliseconds() {
    assert_eq!(timestamp_ms(&timestamp(1_700_000_000_123)), 1_700_000_000_123);
    assert_eq!(duration_ms(&duration(Duration::from_millis(2_500))), Some(2_500));
    assert_eq!(duration_ms(&prost_types::Duration { seconds: -1, nanos: 0 }), None);
}
