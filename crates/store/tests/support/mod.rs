//! Records for store tests: real RocketMQ records built with petrel-protocol.
#![allow(dead_code, clippy::unwrap_used, reason = "test code: a failure is the test failing")]

use bytes::Bytes;
use petrel_protocol::message::MessageExt;

pub fn record(topic: &str, queue_id: i32, body: &[u8]) -> Vec<u8> {
    tagged_record(topic, queue_id, body, None)
}

/// A record carrying `TAGS` when `tag` is given.
pub fn tagged_record(topic: &str, queue_id: i32, body: &[u8], tag: Option<&str>) -> Vec<u8> {
    let mut properties = petrel_protocol::Properties::default();
    if let Some(t) = tag {
        properties.insert("TAGS".into(), t.into());
    }
    MessageExt {
        properties,
        topic: topic.to_owned(),
        queue_id,
        born_timestamp: 1_795_350_392_878,
        born_host: "127.0.0.1:50000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        body: Bytes::copy_from_slice(body),
        ..MessageExt::default()
    }
    .to_bytes()
    .unwrap()
    .to_vec()
}

/// A deterministic body of `len` bytes for record number `n`.
pub fn body(n: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (n.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

/// Waits until the dispatcher has filed everything readable.
pub fn wait_dispatched(store: &petrel_store::MessageStore) {
    for _ in 0..10_000 {
        if store.dispatched_offset() >= store.commit_log().readable_end() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("dispatcher did not catch up");
}

/// A record for `orders` / 1 whose `INNER_MULTI_DISPATCH` names the light queues `lmq`.
pub fn lmq_record(n: u64, lmq: &[String]) -> bytes::BytesMut {
    use petrel_protocol::properties::keys;
    let mut properties = petrel_protocol::Properties::default();
    properties.insert(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX.into(), format!("U{n}"));
    if !lmq.is_empty() {
        properties.insert(keys::INNER_MULTI_DISPATCH.into(), lmq.join(","));
    }
    let bytes = MessageExt {
        properties,
        topic: "orders".into(),
        queue_id: 1,
        born_host: "127.0.0.1:50000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        body: Bytes::from(body(n, 64 + usize::try_from(n % 7).unwrap())),
        ..MessageExt::default()
    }
    .to_bytes()
    .unwrap();
    bytes::BytesMut::from(&bytes[..])
}

pub fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Appends [`lmq_record`] and waits until it is durable; returns the log's end after it.
pub fn append_lmq(store: &petrel_store::MessageStore, n: u64, lmq: &[String]) -> Result<u64, petrel_store::StoreError> {
    let mut r = lmq_record(n, lmq);
    let appended = store.append_to(&mut r, petrel_store::Target::with_lmq("orders", 1, lmq))?;
    let end = appended[0].end_offset();
    store.commit_log().wait_durable(end)?;
    Ok(end)
}
