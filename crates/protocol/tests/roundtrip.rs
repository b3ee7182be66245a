//! Property tests: encode → decode is the identity for commands, stored messages and batches,
//! and no byte string makes a decoder panic.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

use bytes::Bytes;
use petrel_protocol::batch::{BatchItem, decode_batch, encode_batch};
use petrel_protocol::fastjson::parse_lenient;
use petrel_protocol::message::{MessageExt, MessageVersion, decode_messages};
use petrel_protocol::properties::{Properties, decode_properties, encode_properties};
use petrel_protocol::{DEFAULT_MAX_FRAME_BYTES, ExtFields, LanguageCode, RemotingCommand, SerializeType, decode_frame};
use proptest::prelude::*;
use std::net::{IpAddr, SocketAddr};

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, including the property separators and JSON specials, in headers.
    prop::string::string_regex("(.|\u{1}|\u{2}|\"|\\\\|\n){0,24}").unwrap()
}

fn ext_fields(min: usize) -> impl Strategy<Value = ExtFields> {
    prop::collection::vec((text(), text()), min..8).prop_map(|kv| kv.into_iter().collect())
}

fn json_command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i32>(),
        0u8..14,
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        prop::option::of(text()),
        prop::option::of(ext_fields(0)),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(code, lang, version, opaque, flag, remark, ext, body)| RemotingCommand {
            code,
            language: LanguageCode::from_code(lang),
            version,
            opaque,
            flag,
            remark,
            ext_fields: ext,
            body: Bytes::from(body),
            serialize_type: SerializeType::Json,
        })
}

/// In a binary header an empty remark or map has the same bytes as none, so only the
/// distinguishable forms are generated.
fn binary_command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i16>(),
        any::<u8>(),
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        prop::option::of(text().prop_filter("non-empty", |s| !s.is_empty())),
        prop::option::of(ext_fields(1)),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(code, lang, version, opaque, flag, remark, ext, body)| RemotingCommand {
            code: code.into(),
            language: LanguageCode::from_code(lang),
            version: version.into(),
            opaque,
            flag,
            remark,
            ext_fields: ext,
            body: Bytes::from(body),
            serialize_type: SerializeType::RocketMq,
        })
}

fn prop_text() -> impl Strategy<Value = String> {
    prop::string::string_regex("[^\u{1}\u{2}]{0,16}").unwrap()
}

fn properties() -> impl Strategy<Value = Properties> {
    prop::collection::vec((prop_text().prop_filter("name", |s| !s.is_empty()), prop_text()), 0..6).prop_map(|kv| kv.into_iter().collect())
}

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
    ]
}

fn message() -> impl Strategy<Value = MessageExt> {
    (
        (
            prop::string::string_regex("[A-Za-z0-9_%|-]{1,200}").unwrap(),
            any::<i32>(),
            any::<i32>(),
            any::<i64>(),
            any::<i64>(),
            any::<i32>(),
        ),
        (any::<i64>(), socket_addr(), any::<i64>(), socket_addr(), any::<i32>(), any::<i64>()),
        (prop::collection::vec(any::<u8>(), 0..128), properties(), any::<bool>()),
    )
        .prop_map(
            |((topic, queue_id, flag, qo, clo, sys_flag), (bt, bh, st, sh, rt, pto), (body, properties, v2))| {
                let mut m = MessageExt {
                    topic,
                    queue_id,
                    flag,
                    queue_offset: qo,
                    commit_log_offset: clo,
                    sys_flag,
                    born_timestamp: bt,
                    born_host: bh,
                    store_timestamp: st,
                    store_host: sh,
                    reconsume_times: rt,
                    prepared_transaction_offset: pto,
                    body_crc: petrel_protocol::message::body_crc(&body),
                    body: Bytes::from(body),
                    properties,
                    version: if v2 { MessageVersion::V2 } else { MessageVersion::V1 },
                };
                m.sys_flag = m.effective_sys_flag();
                if m.topic.len() > 127 {
                    m.version = MessageVersion::V2;
                }
                m
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn json_commands_round_trip(cmd in json_command()) {
        let frame = cmd.to_frame().unwrap();
        let (back, used) = decode_frame(&frame, DEFAULT_MAX_FRAME_BYTES).unwrap().unwrap();
        prop_assert_eq!(used, frame.len());
        prop_assert_eq!(back, cmd);
    }

    #[test]
    fn binary_commands_round_trip(cmd in binary_command()) {
        let frame = cmd.to_frame().unwrap();
        let (back, used) = decode_frame(&frame, DEFAULT_MAX_FRAME_BYTES).unwrap().unwrap();
        prop_assert_eq!(used, frame.len());
        prop_assert_eq!(&back, &cmd);
        prop_assert_eq!(back.to_frame().unwrap(), frame);
    }

    #[test]
    fn messages_round_trip(msgs in prop::collection::vec(message(), 1..4)) {
        let mut body = bytes::BytesMut::new();
        for m in &msgs {
            m.encode(&mut body).unwrap();
        }
        let back = decode_messages(&body).unwrap();
        prop_assert_eq!(back, msgs);
    }

    #[test]
    fn batches_round_trip(items in prop::collection::vec((any::<i32>(), prop::collection::vec(any::<u8>(), 0..64), properties()), 0..5)) {
        let items: Vec<BatchItem> = items.into_iter().map(|(flag, body, properties)| BatchItem { flag, body: body.into(), properties }).collect();
        prop_assert_eq!(decode_batch(&encode_batch(&items).unwrap()).unwrap(), items);
    }

    #[test]
    fn properties_round_trip(p in properties()) {
        prop_assert_eq!(decode_properties(&encode_properties(&p).unwrap()), p);
    }

    #[test]
    fn decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_frame(&bytes, 1 << 16);
        let _ = decode_messages(&bytes);
        let _ = MessageExt::decode_verified(&bytes);
        let _ = decode_batch(&bytes);
        let _ = parse_lenient(&bytes);
    }

    /// Random edits of a valid frame and record: every outcome is a value or a typed error.
    #[test]
    fn mutated_valid_inputs_never_panic(cmd in binary_command(), msg in message(), edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let mut frame = cmd.to_frame().unwrap().to_vec();
        let mut record = msg.to_bytes().unwrap().to_vec();
        for (i, b) in &edits {
            let at = i.index(frame.len());
            frame[at] = *b;
            let at = i.index(record.len());
            record[at] = *b;
        }
        let _ = decode_frame(&frame, DEFAULT_MAX_FRAME_BYTES);
        let _ = MessageExt::decode_verified(&record);
    }
}
