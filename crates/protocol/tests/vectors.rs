//! Golden tests over every capture in `tests/vectors`: real traffic between the official Java
//! and Go clients, mqadmin, and Apache RocketMQ 5.5.0.
//!
//! Every frame of every pcap must decode; its header, body and stored messages must equal what
//! the `.txt` beside the pcap says; binary headers must re-encode byte for byte, JSON headers to
//! an equal value; and every typed header and body we know must read the real bytes and write
//! them back unchanged.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::collections::HashMap;

use petrel_protocol::body::{
    ClusterInfo, ConsumerListBody, HeartbeatData, KvTable, RegisterBrokerBody, TopicRouteData, register_body_crc32, to_json,
};
use petrel_protocol::codes::{request_code as rc, response_code};
use petrel_protocol::header::*;
use petrel_protocol::message::{MessageExt, decode_messages};
use petrel_protocol::properties::decode_properties;
use petrel_protocol::{CommandHeader, DEFAULT_MAX_FRAME_BYTES, LanguageCode, RemotingCommand, SerializeType, decode_frame};
use serde_json::Value;
use support::vectors::{Captured, Expected, load_captured, load_expected, vector_names};

/// The header as the `.txt` prints it: the JSON keys a decoder sees.
fn header_value(cmd: &RemotingCommand) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("code".into(), cmd.code.into());
    m.insert("flag".into(), cmd.flag.into());
    m.insert("language".into(), cmd.language.name().into());
    m.insert("opaque".into(), cmd.opaque.into());
    m.insert("version".into(), cmd.version.into());
    if let Some(r) = &cmd.remark {
        m.insert("remark".into(), r.clone().into());
    }
    if let Some(ext) = &cmd.ext_fields {
        m.insert("extFields".into(), serde_json::to_value(ext).unwrap());
    }
    Value::Object(m)
}

/// Drops what every reader ignores: Java's `serializeTypeCurrentRPC`, and the `.txt`'s explicit
/// `"remark": null` for an absent binary remark.
fn without_ignored(mut v: Value) -> Value {
    let m = v.as_object_mut().unwrap();
    m.remove("serializeTypeCurrentRPC");
    if m.get("remark") == Some(&Value::Null) {
        m.remove("remark");
    }
    v
}

/// A typed header must read the real fields and write each of them back unchanged.
fn check_typed<H: CommandHeader + std::fmt::Debug>(cmd: &RemotingCommand, what: &str) -> H {
    let h = H::from_command(cmd).unwrap_or_else(|e| panic!("{what}: {e}"));
    let original = cmd.ext_fields.clone().unwrap_or_default();
    let written = h.to_ext();
    for key in H::KEYS {
        assert_eq!(original.get(*key), written.get(*key), "{what}: key {key} did not survive {h:?}");
    }
    h
}

fn check_stored(exp: &Expected, cap: &Captured, what: &str) -> usize {
    if exp.stored_messages.is_empty() {
        return 0;
    }
    let msgs = decode_messages(&cap.command.body).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(msgs.len(), exp.stored_messages.len(), "{what}: stored message count");
    let mut at = 0;
    for ((msg, fields), props) in msgs.iter().zip(&exp.stored_messages).zip(&exp.stored_properties) {
        let f = |k: &str| fields.get(k).unwrap_or_else(|| panic!("{what}: .txt lacks {k}")).as_str();
        assert_eq!(msg.topic, f("topic"), "{what}");
        assert_eq!(msg.queue_id.to_string(), f("queueId"), "{what}");
        assert_eq!(msg.queue_offset.to_string(), f("queueOffset"), "{what}");
        assert_eq!(msg.commit_log_offset.to_string(), f("commitLogOffset"), "{what}");
        assert_eq!(msg.sys_flag.to_string(), f("sysFlag"), "{what}");
        assert_eq!(msg.flag.to_string(), f("flag"), "{what}");
        assert_eq!(msg.body_crc.to_string(), f("bodyCRC"), "{what}");
        assert_eq!(msg.born_timestamp.to_string(), f("bornTimestamp"), "{what}");
        assert_eq!(msg.born_host.to_string(), f("bornHost"), "{what}");
        assert_eq!(msg.store_timestamp.to_string(), f("storeTimestamp"), "{what}");
        assert_eq!(msg.store_host.to_string(), f("storeHost"), "{what}");
        assert_eq!(msg.reconsume_times.to_string(), f("reconsumeTimes"), "{what}");
        assert_eq!(
            msg.prepared_transaction_offset.to_string(),
            f("preparedTransactionOffset"),
            "{what}"
        );
        assert_eq!(msg.body.as_ref(), f("body").as_bytes(), "{what}");
        let got: Vec<(String, String)> = msg.properties.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(&got, props, "{what}: properties (in stored order)");
        // the record re-encodes byte for byte and its CRC is right
        let (_, used) = MessageExt::decode_verified(&cap.command.body[at..]).unwrap();
        assert_eq!(
            msg.to_bytes().unwrap().as_ref(),
            &cap.command.body[at..at + used],
            "{what}: record re-encode"
        );
        at += used;
    }
    msgs.len()
}

fn check_body(exp: &Expected, cap: &Captured, what: &str) {
    let body = &cap.command.body;
    if let Some(hex) = &exp.body_hex {
        let ours: String = body.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(&ours, hex, "{what}: body bytes");
    }
    if let Some((text, cut)) = &exp.body_text {
        let ours = std::str::from_utf8(body).unwrap();
        if *cut {
            assert!(ours.starts_with(text.as_str()), "{what}: body text prefix");
        } else {
            assert_eq!(ours, text, "{what}: body text");
        }
    }
}

/// Typed headers and bodies for the codes we know, on real bytes.
fn check_semantics(cap: &Captured, request: Option<&RemotingCommand>, what: &str) -> usize {
    let cmd = &cap.command;
    let mut typed = 0;
    if !cmd.is_response() {
        typed += 1;
        match cmd.code {
            rc::SEND_MESSAGE | rc::SEND_MESSAGE_V2 => {
                let h = SendMessageRequestHeader::from_send_command(cmd).unwrap();
                if cmd.code == rc::SEND_MESSAGE {
                    check_typed::<SendMessageRequestHeader>(cmd, what);
                } else {
                    check_typed::<SendMessageRequestHeaderV2>(cmd, what);
                }
                let props = decode_properties(h.properties.as_deref().unwrap());
                assert!(props.contains_key("UNIQ_KEY") && props.contains_key("TAGS"), "{what}: {props:?}");
                assert!(!h.is_batch());
            }
            rc::PULL_MESSAGE => {
                let h = check_typed::<PullMessageRequestHeader>(cmd, what);
                assert!(h.sys_flag & pull_sys_flag::SUSPEND != 0);
            }
            rc::QUERY_CONSUMER_OFFSET => drop(check_typed::<QueryConsumerOffsetRequestHeader>(cmd, what)),
            rc::UPDATE_CONSUMER_OFFSET => drop(check_typed::<UpdateConsumerOffsetRequestHeader>(cmd, what)),
            rc::UNREGISTER_CLIENT => drop(check_typed::<UnregisterClientRequestHeader>(cmd, what)),
            rc::GET_CONSUMER_LIST_BY_GROUP => drop(check_typed::<GetConsumerListByGroupRequestHeader>(cmd, what)),
            rc::NOTIFY_CONSUMER_IDS_CHANGED => drop(check_typed::<NotifyConsumerIdsChangedRequestHeader>(cmd, what)),
            rc::GET_ROUTEINFO_BY_TOPIC => drop(check_typed::<GetRouteInfoRequestHeader>(cmd, what)),
            rc::UPDATE_AND_CREATE_TOPIC => {
                let h = check_typed::<CreateTopicRequestHeader>(cmd, what);
                assert_eq!((h.read_queue_nums, h.write_queue_nums, h.perm), (4, 4, 6));
            }
            rc::REGISTER_BROKER => {
                let h = check_typed::<RegisterBrokerRequestHeader>(cmd, what);
                assert_eq!(h.body_crc32, Some(register_body_crc32(&cmd.body)), "{what}: bodyCrc32");
                let body: RegisterBrokerBody = petrel_protocol::body::from_json(&cmd.body).unwrap();
                assert!(!body.topic_config_serialize_wrapper.topic_config_table.is_empty());
                assert_eq!(to_json(&body).as_bytes(), cmd.body.as_ref(), "{what}: register body re-encode");
            }
            rc::HEART_BEAT => {
                let hb: HeartbeatData = petrel_protocol::body::from_json(&cmd.body).unwrap();
                if cmd.language == LanguageCode::Java {
                    assert_eq!(to_json(&hb).as_bytes(), cmd.body.as_ref(), "{what}: heartbeat re-encode");
                } else {
                    let again: HeartbeatData = petrel_protocol::body::from_json(to_json(&hb).as_bytes()).unwrap();
                    assert_eq!(again, hb);
                }
            }
            _ => typed -= 1,
        }
        return typed;
    }
    let Some(req) = request else { return 0 };
    typed += 1;
    match (req.code, cmd.code) {
        (rc::SEND_MESSAGE | rc::SEND_MESSAGE_V2, response_code::SUCCESS) => {
            let h = check_typed::<SendMessageResponseHeader>(cmd, what);
            assert_eq!(h.msg_region.as_deref(), Some("DefaultRegion"));
            let (addr, _) = petrel_protocol::msgid::decode_offset_msg_id(&h.msg_id).unwrap();
            assert_eq!(addr.port(), 10911);
        }
        (rc::PULL_MESSAGE, _) => drop(check_typed::<PullMessageResponseHeader>(cmd, what)),
        (rc::QUERY_CONSUMER_OFFSET, response_code::SUCCESS) => drop(check_typed::<QueryConsumerOffsetResponseHeader>(cmd, what)),
        (rc::HEART_BEAT, _) => {
            let h = check_typed::<HeartbeatResponseHeader>(cmd, what);
            assert_eq!(h.is_support_heart_beat_v2, Some(true));
        }
        (rc::GET_ROUTEINFO_BY_TOPIC, response_code::SUCCESS) => {
            let route = TopicRouteData::from_json(&cmd.body).unwrap();
            assert_eq!(route.to_json(req.version).as_bytes(), cmd.body.as_ref(), "{what}: route re-encode");
        }
        (rc::GET_BROKER_CLUSTER_INFO, _) => {
            let info = ClusterInfo::from_json(&cmd.body).unwrap();
            assert_eq!(info.to_json().as_bytes(), cmd.body.as_ref(), "{what}: cluster info re-encode");
        }
        (rc::GET_CONSUMER_LIST_BY_GROUP, _) => {
            let list: ConsumerListBody = petrel_protocol::body::from_json(&cmd.body).unwrap();
            assert_eq!(list.consumer_id_list.len(), 1);
            assert_eq!(to_json(&list).as_bytes(), cmd.body.as_ref());
        }
        (rc::GET_BROKER_RUNTIME_INFO, _) => {
            let kv: KvTable = petrel_protocol::body::from_json(&cmd.body).unwrap();
            assert_eq!(kv.table.len(), 59, "{what}: runtime info keys");
            assert_eq!(to_json(&kv).as_bytes(), cmd.body.as_ref());
        }
        _ => typed -= 1,
    }
    typed
}

#[derive(Default)]
struct Tally {
    frames: usize,
    binary_exact: usize,
    json_equal: usize,
    stored: usize,
    typed: usize,
}

fn check_vector(name: &str, tally: &mut Tally) {
    let expected = load_expected(name);
    let captured = load_captured(name);
    assert_eq!(captured.len(), expected.len(), "{name}: frame count pcap vs .txt");

    let mut exp_by_flow: HashMap<(u16, u16), Vec<&Expected>> = HashMap::new();
    for e in &expected {
        exp_by_flow.entry((e.src_port, e.dst_port)).or_default().push(e);
    }
    let mut seen: HashMap<(u16, u16), usize> = HashMap::new();
    let mut requests: HashMap<((u16, u16), i32), RemotingCommand> = HashMap::new();
    for cap in &captured {
        let flow = (cap.src_port, cap.dst_port);
        let idx = seen.entry(flow).or_default();
        let exp = exp_by_flow
            .get(&flow)
            .and_then(|v| v.get(*idx))
            .unwrap_or_else(|| panic!("{name}: pcap frame on {flow:?} not in .txt"));
        *idx += 1;
        let cmd = &cap.command;
        let what = format!("{name} {}->{} opaque {} code {}", cap.src_port, cap.dst_port, cmd.opaque, cmd.code);

        // sizes and kind
        assert_eq!(cap.bytes.len(), exp.frame_bytes, "{what}: frame size");
        let header_len = u32::from_be_bytes(cap.bytes[4..8].try_into().unwrap()) as usize & 0xFF_FFFF;
        assert_eq!(header_len, exp.header_bytes, "{what}: header size");
        assert_eq!(cmd.body.len(), exp.body_bytes, "{what}: body size");
        let st = match cmd.serialize_type {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        };
        assert_eq!(st, exp.serialize_type, "{what}");
        assert_eq!(cmd.is_response(), exp.is_response, "{what}");
        assert_eq!(cmd.code, exp.code, "{what}");

        // header values; a binary header cannot tell an empty extFields from none (both are
        // length 0), and the .txt prints {} for it
        let mut ours = header_value(cmd);
        if cmd.serialize_type == SerializeType::RocketMq && cmd.ext_fields.is_none() {
            ours.as_object_mut()
                .unwrap()
                .insert("extFields".into(), Value::Object(Default::default()));
        }
        assert_eq!(ours, without_ignored(exp.header.clone()), "{what}: header");
        check_body(exp, cap, &what);
        tally.stored += check_stored(exp, cap, &what);

        // re-encoding
        let again = cmd.to_frame().unwrap();
        match cmd.serialize_type {
            SerializeType::RocketMq => {
                assert_eq!(again.as_ref(), cap.bytes.as_slice(), "{what}: binary frame re-encode");
                tally.binary_exact += 1;
            }
            SerializeType::Json => {
                let original: Value = serde_json::from_slice(&cap.bytes[8..8 + header_len]).unwrap();
                let ours_len = u32::from_be_bytes(again[4..8].try_into().unwrap()) as usize & 0xFF_FFFF;
                let ours: Value = serde_json::from_slice(&again[8..8 + ours_len]).unwrap();
                assert_eq!(ours, without_ignored(original), "{what}: JSON header re-encode");
                assert_eq!(&again[8 + ours_len..], cmd.body.as_ref(), "{what}: body after re-encode");
                tally.json_equal += 1;
            }
        }
        let (back, used) = decode_frame(&again, DEFAULT_MAX_FRAME_BYTES).unwrap().unwrap();
        assert_eq!(used, again.len());
        assert_eq!(&back, cmd, "{what}: decode(encode(x)) == x");

        // typed headers and bodies
        let request = if cmd.is_response() {
            requests.get(&((cap.dst_port, cap.src_port), cmd.opaque))
        } else {
            requests.insert((flow, cmd.opaque), cmd.clone());
            None
        };
        tally.typed += check_semantics(cap, request, &what);
        tally.frames += 1;
    }
}

#[test]
fn every_vector_decodes_to_its_txt_and_re_encodes() {
    let names = vector_names();
    assert_eq!(names.len(), 6, "expected the six captures of tests/vectors: {names:?}");
    let mut tally = Tally::default();
    for name in &names {
        let before = tally.frames;
        check_vector(name, &mut tally);
        eprintln!("{name}: {} frames", tally.frames - before);
    }
    eprintln!(
        "golden: {} frames ({} binary byte-exact, {} JSON equal), {} stored messages, {} typed header/body checks",
        tally.frames, tally.binary_exact, tally.json_equal, tally.stored, tally.typed
    );
    assert_eq!(tally.frames, 210, "frames across all captures");
    assert!(tally.binary_exact > 0 && tally.stored == 6);
}
