//! Reads below the local log through a cold log (here an in-memory copy of each segment that
//! retention deletes, standing in for the object store; the real tier is tested against
//! SeaweedFS in tests/tier_binary.rs): a record is read back whole, a tier that cannot answer is
//! an error the caller answers "retry later" (never "not found"), a query by key stops at the
//! first such error instead of waiting once per candidate, a bare offset whose bytes claim a
//! record larger than the tier's bound fetches nothing more, and records whose object is gone
//! from the bucket are skipped by a consumer instead of answering "busy" forever.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use petrel_protocol::message::MessageExt;
use petrel_store::{ColdLog, ColdTier, FlushMode, MessageStore, MessageStoreConfig, StoreError};

const SEGMENT_BYTES: u64 = 256 << 10;
const MAX_RECORD_BYTES: u64 = 16 << 10;

/// Every segment retention deleted, whole; reads count the bytes they ask for.
#[derive(Default)]
struct MemoryTier {
    segments: Mutex<BTreeMap<u64, Vec<u8>>>,
    failing: AtomicBool,
    /// Segments whose objects are gone from the bucket.
    lost: Mutex<Vec<u64>>,
    reads: AtomicU64,
    bytes_asked: AtomicU64,
}

impl ColdLog for MemoryTier {
    fn read(&self, offset: u64, len: usize) -> petrel_store::Result<Bytes> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes_asked.fetch_add(len as u64, Ordering::Relaxed);
        if self.failing.load(Ordering::Relaxed) {
            return Err(StoreError::ColdTier {
                offset,
                source: "the object store is stopped".into(),
            });
        }
        let start = offset - offset % SEGMENT_BYTES;
        if self.lost.lock().contains(&start) {
            return Err(StoreError::ColdLost { offset });
        }
        let segments = self.segments.lock();
        let segment = segments.get(&start).expect("a read below the log is of a segment the tier holds");
        let at = usize::try_from(offset - start).unwrap();
        Ok(Bytes::copy_from_slice(&segment[at..segment.len().min(at + len)]))
    }

    fn min_offset(&self) -> Option<u64> {
        self.segments.lock().keys().next().copied()
    }

    fn max_record_bytes(&self) -> u64 {
        MAX_RECORD_BYTES
    }

    fn cached_bytes(&self) -> u64 {
        0
    }
}

fn keyed(n: usize, body: Vec<u8>) -> Vec<u8> {
    let mut properties = petrel_protocol::Properties::default();
    properties.insert("KEYS".into(), format!("key-{n}"));
    MessageExt {
        properties,
        topic: "Cold".into(),
        born_timestamp: 1_795_350_392_878,
        born_host: "127.0.0.1:50000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        body: Bytes::from(body),
        ..MessageExt::default()
    }
    .to_bytes()
    .unwrap()
    .to_vec()
}

/// A store whose first segments went to `tier`; returns it with each record's offset.
fn store_with_cold_segments(root: &std::path::Path, tier: &Arc<MemoryTier>) -> (MessageStore, Vec<u64>) {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = SEGMENT_BYTES;
    c.commit_log.flush_mode = FlushMode::Async;
    c.commit_log.async_flush_interval = Duration::from_millis(10);
    c.commit_log.file_reserved_time = Duration::ZERO;
    let (copy_to, dir) = (tier.clone(), root.join("commitlog"));
    c.cold = Some(ColdTier {
        log: tier.clone(),
        guard: Arc::new(move |start| {
            let bytes = std::fs::read(dir.join(format!("{start:020}"))).unwrap();
            copy_to.segments.lock().insert(start, bytes);
            true
        }),
    });
    let store = MessageStore::open(c).unwrap();
    // The first body carries what a record's head looks like, claiming 100,000 bytes: a view
    // by an id pointing there must not fetch them.
    let mut fake = 100_000_i32.to_be_bytes().to_vec();
    fake.extend_from_slice(&petrel_protocol::message::MAGIC_CODE_V2.to_be_bytes());
    let offsets: Vec<u64> = (0..300)
        .map(|n| {
            let mut body = if n == 0 { fake.clone() } else { Vec::new() };
            body.resize(2000, b'a' + u8::try_from(n % 26).unwrap());
            store.append(&mut keyed(n, body), "Cold", 0).unwrap().physical_offset
        })
        .collect();
    for _ in 0..1000 {
        support::wait_dispatched(&store);
        if store.commit_log().flushed_offset() >= store.commit_log().max_offset() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(store.run_retention().unwrap() >= 1, "the first segment went to the tier");
    assert!(store.commit_log().min_offset() > offsets[0]);
    (store, offsets)
}

#[test]
fn a_record_below_the_log_is_read_whole_from_the_tier_and_a_failing_tier_is_an_error_not_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let tier = Arc::new(MemoryTier::default());
    let (store, offsets) = store_with_cold_segments(dir.path(), &tier);
    let record = store.read_record(offsets[1]).unwrap().expect("found in the tier");
    let (m, _) = MessageExt::decode(&record).unwrap();
    assert_eq!(m.properties.get("KEYS").map(String::as_str), Some("key-1"));
    assert_eq!(m.body.len(), 2000);

    tier.failing.store(true, Ordering::Relaxed);
    assert!(matches!(store.read_record(offsets[1]), Err(StoreError::ColdTier { .. })));
    // Above the tier nothing changes.
    let local = *offsets.last().unwrap();
    assert!(store.read_record(local).unwrap().is_some());
}

#[test]
fn a_query_by_key_stops_at_the_first_tier_error() {
    let dir = tempfile::tempdir().unwrap();
    let tier = Arc::new(MemoryTier::default());
    let (store, _) = store_with_cold_segments(dir.path(), &tier);
    let found = store.query_by_key("Cold", "key-2", false, 32, 0, i64::MAX).unwrap();
    assert_eq!(found.count, 1);

    tier.failing.store(true, Ordering::Relaxed);
    let before = tier.reads.load(Ordering::Relaxed);
    let refused = store.query_by_key("Cold", "key-2", false, 32, 0, i64::MAX);
    assert!(matches!(refused, Err(StoreError::ColdTier { .. })), "{refused:?}");
    assert_eq!(tier.reads.load(Ordering::Relaxed) - before, 1, "one read, not one per candidate");
    // A key whose record is local is still found with the tier down.
    let local = store.query_by_key("Cold", "key-299", false, 32, 0, i64::MAX).unwrap();
    assert_eq!(local.count, 1);
}

#[test]
fn a_bare_offset_claiming_a_record_past_the_bound_fetches_only_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let tier = Arc::new(MemoryTier::default());
    let (store, offsets) = store_with_cold_segments(dir.path(), &tier);
    let record = tier.segments.lock()[&0][..2200].to_vec();
    let head = 100_000_i32.to_be_bytes();
    let at = record.windows(4).position(|w| w == head).expect("the fake head in the first body");
    let before = tier.bytes_asked.load(Ordering::Relaxed);
    assert_eq!(store.read_record(offsets[0] + at as u64).unwrap(), None);
    assert_eq!(tier.bytes_asked.load(Ordering::Relaxed) - before, 8, "only the head was read");
}

#[test]
fn records_whose_object_is_gone_are_skipped_not_retried_forever() {
    let dir = tempfile::tempdir().unwrap();
    let tier = Arc::new(MemoryTier::default());
    let (store, offsets) = store_with_cold_segments(dir.path(), &tier);
    tier.lost.lock().push(0);
    assert_eq!(store.read_record(offsets[1]).unwrap(), None, "no record starts there any more");
    assert_eq!(store.query_by_key("Cold", "key-1", false, 32, 0, i64::MAX).unwrap().count, 0);
    // A consumer from the first offset pulls on, past the lost segment, to the next one's first
    // record, as RocketMQ's pull goes past a message whose bytes are gone.
    let first_kept = offsets.iter().position(|o| *o >= SEGMENT_BYTES).unwrap();
    let mut offset = 0;
    let found = (0..100)
        .find_map(|_| {
            let got = store.get_messages("Cold", 0, offset, 32, None);
            assert_ne!(got.status, petrel_store::GetStatus::ColdUnavailable, "lost is not busy");
            assert!(got.next_begin_offset > offset, "moves on from {offset}");
            offset = got.next_begin_offset;
            (got.message_count > 0).then_some(got)
        })
        .expect("the records after the lost segment");
    let (m, _) = MessageExt::decode(&found.body).unwrap();
    assert_eq!(
        m.properties.get("KEYS").map(String::as_str),
        Some(format!("key-{first_kept}").as_str())
    );
}
