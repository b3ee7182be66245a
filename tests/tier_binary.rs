//! The cold tier through `petrel serve`, against a real S3-compatible server (SeaweedFS, from
//! `PETREL_WEED`; `scripts/tier-s3.sh` builds it and runs this; without it the test says so
//! and passes): every sealed segment is uploaded and holds exactly the log's bytes, a local
//! segment is deleted only once the tier holds it, a kill -9 while an upload hangs loses
//! nothing and uploads that segment after the restart, a stopped server is answered
//! `SYSTEM_BUSY`, a gRPC receive reads from the bucket, and a slave behind its master's disk
//! catches up from the bucket.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Petrel, pull, pull_bodies, send_v2};
use object_store::ObjectStoreExt;
use object_store::path::Path as Key;
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_tier::testing::{ACCESS_KEY, SECRET_KEY, SeaweedFs, weed_binary};

const BUCKET: &str = "petrel-tier";
const SEGMENT_BYTES: u64 = 1 << 20;

fn send(p: &Petrel, from: usize, count: usize) {
    let mut c = p.broker();
    for i in from..from + count {
        let body = format!("tier-body-{i:06}-{}", "x".repeat(980));
        let r = c.call(send_v2("TierTopic", 0, "T", i, body.as_bytes()));
        assert_eq!(r.code, resp::SUCCESS, "send {i}: {:?}", r.remark);
    }
}

/// The start offsets the broker's manifest records.
fn tiered(p: &Petrel) -> BTreeSet<u64> {
    let text = std::fs::read_to_string(p.data_dir().join("tier/tier.manifest")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["start_offset"].as_u64())
        .collect()
}

fn local_segments(p: &Petrel) -> BTreeSet<u64> {
    std::fs::read_dir(p.data_dir().join("commitlog"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str().and_then(|n| n.parse::<u64>().ok()))
        .collect()
}

fn wait_for(what: &str, patience: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !done() {
        assert!(Instant::now() < deadline, "waited {patience:?} for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The message numbers whose bodies the tier's objects hold, read straight from the bucket.
fn bodies_in_bucket(weed: &SeaweedFs, starts: &BTreeSet<u64>) -> Vec<usize> {
    let client = weed.client(BUCKET);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut seen = Vec::new();
    for start in starts {
        let key = Key::from(format!("it/commitlog/{start:020}"));
        let bytes = runtime.block_on(async { client.get(&key).await.unwrap().bytes().await.unwrap() });
        assert_eq!(bytes.len() as u64, SEGMENT_BYTES, "{key}");
        let text = String::from_utf8_lossy(&bytes);
        seen.extend(
            text.match_indices("tier-body-")
                .map(|(at, _)| text[at + 10..at + 16].parse::<usize>().unwrap()),
        );
    }
    seen
}

/// The nice value of `pid`'s thread named `name` (`/proc/PID/task/TID/stat`, field 19).
fn thread_nice(pid: u32, name: &str) -> Option<i64> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let task = task.ok()?.path();
        if std::fs::read_to_string(task.join("comm")).ok()?.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.join("stat")).ok()?;
        // The fields after the command's closing parenthesis start at field 3 (the state).
        let after = &stat[stat.rfind(')')? + 1..];
        return after.split_whitespace().nth(19 - 3)?.parse().ok();
    }
    None
}

fn args(weed: &SeaweedFs) -> Vec<String> {
    [
        format!("mappedFileSizeCommitLog={SEGMENT_BYTES}"),
        format!("objectStoreEndpoint={}", weed.endpoint()),
        format!("objectStoreBucket={BUCKET}"),
        format!("objectStoreAccessKey={ACCESS_KEY}"),
        format!("objectStoreSecretKey={SECRET_KEY}"),
        "tieredStoreFilePath=it".into(),
        "fileReservedTime=0".into(),
        // One block: a re-read of an early message goes to the bucket again.
        "tieredReadCacheBytes=1048576".into(),
    ]
    .into_iter()
    .flat_map(|kv| ["--set".to_owned(), kv])
    .collect()
}

#[test]
fn sealed_segments_reach_the_tier_whole_and_leave_the_disk_only_after_through_a_kill_9() {
    let Some(bin) = weed_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let weed = SeaweedFs::start(&bin, dir.path(), BUCKET);
    let args = args(&weed);
    let mut p = Petrel::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!p.log().contains(SECRET_KEY), "the secret key is never logged");

    // About 4.4 MiB of records: four sealed segments, a fifth being written.
    send(&p, 0, 3800);
    wait_for("four sealed segments in the tier", Duration::from_secs(60), || {
        tiered(&p).len() >= 4
    });
    // The offload yields to the append path: its thread runs at tieredOffloadNice (19).
    assert_eq!(thread_nice(p.pid(), "tier-offload"), Some(19), "the offload thread's nice value");
    assert_eq!(
        thread_nice(p.pid(), "commitlog-write"),
        Some(0),
        "the append path's own priority is kept"
    );
    let before = tiered(&p);
    let k = before.len() as u64;
    assert_eq!(
        before,
        (0..k).map(|i| i * SEGMENT_BYTES).collect(),
        "the oldest segments, none skipped"
    );
    // What the bucket holds is the log: every message of the sealed segments, in order, once;
    // the last ones sent are in the segment being written, which is not uploaded.
    let seen = bodies_in_bucket(&weed, &before);
    let sealed_before = seen.len();
    assert!(seen.len() > 3000 && seen.len() < 3800, "{} bodies", seen.len());
    assert_eq!(seen, (0..seen.len()).collect::<Vec<_>>());
    // fileReservedTime=0: retention deletes what the tier holds (every 10 s), never the rest.
    wait_for("the tiered segments deleted locally", Duration::from_secs(40), || {
        local_segments(&p).is_disjoint(&before)
    });
    assert!(local_segments(&p).contains(&(k * SEGMENT_BYTES)), "the segment being written stays");

    // Read-through: a consumer from offset 0 gets every message, the ones that left the disk
    // from the bucket, the rest from the disk, as if all were local.
    let mut c = p.broker();
    let bodies = pull_bodies(&mut c, "TierTopic", 0, 0, 3800, Duration::from_secs(60));
    assert_eq!(bodies.len(), 3800);
    for (i, body) in bodies.iter().enumerate() {
        assert!(
            body.starts_with(&format!("tier-body-{i:06}-")),
            "message {i}: {}",
            &body[..20.min(body.len())]
        );
    }
    // The object store stopped: a pull of a cold message is answered SYSTEM_BUSY (the client
    // backs off and pulls again) within the read deadline, not held; once it runs, it is served.
    weed.signal("-STOP");
    let asked = Instant::now();
    let r = c.call(pull("BodyReaders", "TierTopic", 0, 0, 0));
    assert_eq!(r.code, resp::SYSTEM_BUSY, "{:?}", r.remark);
    assert!(asked.elapsed() < Duration::from_secs(20), "{:?}", asked.elapsed());
    // So is a view of it by its id (mqadmin queryMsgById): the record exists, so the answer
    // is "retry later", never "can not find message".
    let mut view = RemotingCommand::request(rc::VIEW_MESSAGE_BY_ID, 0);
    view.put_ext("offset", "0");
    let r = c.call(view);
    assert_eq!(r.code, resp::SYSTEM_BUSY, "{:?}", r.remark);
    weed.signal("-CONT");
    let mut view = RemotingCommand::request(rc::VIEW_MESSAGE_BY_ID, 0);
    view.put_ext("offset", "0");
    let r = c.call(view);
    assert_eq!(r.code, resp::SUCCESS, "{:?}", r.remark);
    assert!(String::from_utf8_lossy(&r.body).contains("tier-body-000000-"));
    let again = pull_bodies(&mut c, "TierTopic", 0, 0, 10, Duration::from_secs(30));
    assert!(again[0].starts_with("tier-body-000000-"));

    // The object store hangs; the segment being written is sealed meanwhile, its upload hangs
    // too, and the broker is killed. Its local file stays (the tier does not hold it); after
    // the restart, with the store back, it is uploaded.
    weed.signal("-STOP");
    send(&p, 3800, 1100);
    let interrupted = format!("uploading a segment to the tier start_offset={}", k * SEGMENT_BYTES);
    wait_for("the upload of the sealed segment to start", Duration::from_secs(30), || {
        p.log().contains(&interrupted)
    });
    std::thread::sleep(Duration::from_secs(1));
    assert!(!tiered(&p).contains(&(k * SEGMENT_BYTES)));
    let done = format!("segment uploaded to the tier start_offset={}", k * SEGMENT_BYTES);
    assert!(!p.log().contains(&done), "killed with the upload in flight, not after it");
    p.kill();
    assert!(local_segments(&p).contains(&(k * SEGMENT_BYTES)), "kept: not in the tier");
    weed.signal("-CONT");
    p.spawn();
    wait_for(
        "the interrupted segment in the tier after the restart",
        Duration::from_secs(60),
        || tiered(&p).contains(&(k * SEGMENT_BYTES)),
    );
    let after = tiered(&p);
    // Across the kill, only the interrupted segment was sent twice.
    let log = p.log();
    for start in &after {
        let starts = log
            .matches(&format!("uploading a segment to the tier start_offset={start} "))
            .count();
        let expected = if *start == k * SEGMENT_BYTES { 2 } else { 1 };
        assert_eq!(starts, expected, "uploads of segment {start}");
    }
    let manifest = std::fs::read_to_string(p.data_dir().join("tier/tier.manifest")).unwrap();
    assert_eq!(manifest.lines().count(), after.len(), "each segment recorded once:\n{manifest}");
    let seen = bodies_in_bucket(&weed, &after);
    assert_eq!(seen, (0..seen.len()).collect::<Vec<_>>(), "the whole log, in order, once");
    assert!(seen.len() > sealed_before, "{} bodies, {sealed_before} before", seen.len());
    // A clean stop with a tier: the offload thread ends and the tier's runtime goes quietly.
    assert!(p.terminate().success(), "{}", p.log());
    // Nothing between the tier and the disk is missing.
    let local = local_segments(&p);
    let end = *local.last().unwrap();
    for start in (0..end).step_by(usize::try_from(SEGMENT_BYTES).unwrap()) {
        assert!(
            tiered(&p).contains(&start) || local.contains(&start),
            "segment {start} is neither in the tier nor on disk"
        );
    }
}

#[test]
fn the_tiers_retention_deletes_from_the_bucket_and_consumers_are_moved_past_what_it_deleted() {
    let Some(bin) = weed_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let weed = SeaweedFs::start(&bin, dir.path(), BUCKET);
    // tieredStoreFileReservedTime=0: a segment leaves the bucket as soon as it left the disk.
    let mut args = args(&weed);
    args.extend(["--set".to_owned(), "tieredStoreFileReservedTime=0".to_owned()]);
    // And uploads at the broker's own priority.
    args.extend(["--set".to_owned(), "tieredOffloadNice=0".to_owned()]);
    let p = Petrel::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    send(&p, 0, 3800);
    assert_eq!(thread_nice(p.pid(), "tier-offload"), Some(0), "tieredOffloadNice=0");
    wait_for(
        "three segments through the tier and gone from both",
        Duration::from_secs(90),
        || {
            let local = local_segments(&p);
            local.first().is_some_and(|first| *first >= 3 * SEGMENT_BYTES) && tiered(&p).iter().all(|s| local.contains(s))
        },
    );
    // Nothing of theirs is left in the bucket.
    let client = weed.client(BUCKET);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for start in [0, SEGMENT_BYTES, 2 * SEGMENT_BYTES] {
        let key = Key::from(format!("it/commitlog/{start:020}"));
        let head = runtime.block_on(client.head(&key));
        assert!(matches!(head, Err(object_store::Error::NotFound { .. })), "{key}: {head:?}");
    }
    // A consumer at offset 0 is told where the queue now begins, and reads on from there. (The
    // next sealed segment may leave disk and bucket meanwhile: the consumer follows the move.)
    let mut c = p.broker();
    let (mut offset, mut moved) = (0_i64, false);
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        assert!(Instant::now() < deadline, "no message read after offset {offset}");
        let r = c.call(pull("BodyReaders", "TierTopic", 0, offset, 0));
        let next: i64 = r.ext("nextBeginOffset").and_then(|v| v.parse().ok()).unwrap_or(offset);
        if r.code == resp::PULL_OFFSET_MOVED {
            (offset, moved) = (next, true);
            continue;
        }
        if r.code == resp::SUCCESS && moved {
            let msgs = petrel_protocol::message::decode_messages(&r.body).unwrap();
            break String::from_utf8(msgs[0].body.to_vec()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(offset > 0, "moved past the deleted segments");
    assert!(first.starts_with(&format!("tier-body-{offset:06}-")), "{offset}: {}", &first[..20]);
}

/// The issue's acceptance run, with RocketMQ's own Java client (rocketmq-client 5.5.0): a
/// producer sends more than four times what the disk keeps (`fileReservedTime=0`: only segments
/// the tier does not hold yet stay local), then a consumer of a new group reads the topic from
/// its first offset — most of it from the bucket — and gets every message once, body intact; so
/// does a POP consumer of another new group; and the first message is found by its offset id,
/// its key and its unique id.
#[test]
fn the_java_client_reads_back_from_the_first_offset_four_times_what_the_disk_keeps() {
    let Some(bin) = weed_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let weed = SeaweedFs::start(&bin, dir.path(), BUCKET);
    let args = args(&weed);
    let p = Petrel::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let ns = format!("127.0.0.1:{}", p.ns_port);
    let count = "6000";
    common::java_client(&["tier-produce", &ns, "TierJava", count]);
    // About 7.5 MiB: seven sealed segments and the one being written. The sealed ones leave the
    // disk once the tier holds them, one upload after another: the wait is for the last of them
    // (the log more than four times what the disk keeps), not for a count that one upload still
    // in flight already meets.
    wait_for(
        "six segments in the tier, only theirs gone from the disk, the log over four times the disk",
        Duration::from_secs(90),
        || {
            let (local, tiered) = (local_segments(&p), tiered(&p));
            tiered.len() >= 6 && local.is_disjoint(&tiered) && local.len() + tiered.len() > 4 * local.len()
        },
    );
    let (local, tiered) = (local_segments(&p), tiered(&p));
    let all = local.len() + tiered.len();
    assert!(all > 4 * local.len(), "{all} segments of log, {} on disk", local.len());
    let out = common::java_client(&["tier-consume", &ns, "TierJava", count]);
    assert!(
        out.contains(&format!(
            "tier-consume: {count} messages read back from the first offset and {count} popped"
        )),
        "{out}"
    );
}

/// RocketMQ 5's gRPC receive (`ReceiveMessage`, as every 5.x SDK's SimpleConsumer sends it) of a
/// new group reads the topic from its first offset, most of it from the bucket, every message
/// once and intact, and its acks are taken.
#[test]
fn a_grpc_receive_reads_what_left_the_disk_from_the_bucket() {
    use petrel_grpc::pb::{self, receive_message_response::Content};
    let Some(bin) = weed_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let weed = SeaweedFs::start(&bin, dir.path(), BUCKET);
    let grpc_port = common::free_port();
    let mut args = args(&weed);
    args.extend(["--set".to_owned(), format!("grpcServerPort={grpc_port}")]);
    let p = Petrel::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    send(&p, 0, 3800);
    wait_for("three segments in the tier and gone from the disk", Duration::from_secs(60), || {
        let (local, tiered) = (local_segments(&p), tiered(&p));
        tiered.len() >= 3 && local.is_disjoint(&tiered)
    });
    let mut group = RemotingCommand::request(rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0);
    group.body = br#"{"groupName":"TierGrpc"}"#.to_vec().into();
    assert_eq!(p.broker().call(group).code, resp::SUCCESS);
    let resource = |name: &str| {
        Some(pb::Resource {
            resource_namespace: String::new(),
            name: name.into(),
        })
    };
    fn request<T>(body: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(body);
        r.metadata_mut().insert("x-mq-client-id", "tier-grpc".parse().unwrap());
        r
    }
    let receive = pb::ReceiveMessageRequest {
        group: resource("TierGrpc"),
        message_queue: Some(pb::MessageQueue {
            topic: resource("TierTopic"),
            ..pb::MessageQueue::default()
        }),
        filter_expression: Some(pb::FilterExpression {
            r#type: pb::FilterType::Tag as i32,
            expression: "*".into(),
        }),
        batch_size: 32,
        invisible_duration: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
        auto_renew: false,
        long_polling_timeout: Some(prost_types::Duration { seconds: 1, nanos: 0 }),
        attempt_id: None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let seen = runtime.block_on(async {
        let mut c = pb::messaging_service_client::MessagingServiceClient::connect(format!("http://127.0.0.1:{grpc_port}"))
            .await
            .unwrap()
            .max_decoding_message_size(16 << 20);
        let mut seen = BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while seen.len() < 3800 {
            assert!(Instant::now() < deadline, "received {} of 3800", seen.len());
            let mut stream = c.receive_message(request(receive.clone())).await.unwrap().into_inner();
            let mut entries = Vec::new();
            while let Some(item) = stream.message().await.unwrap() {
                let Some(Content::Message(m)) = item.content else { continue };
                let body = String::from_utf8(m.body.to_vec()).unwrap();
                let i: usize = body[10..16].parse().unwrap();
                assert_eq!(body, format!("tier-body-{i:06}-{}", "x".repeat(980)), "message {i} intact");
                assert!(seen.insert(i), "message {i} received twice");
                let sys = m.system_properties.unwrap();
                entries.push(pb::AckMessageEntry {
                    message_id: sys.message_id,
                    receipt_handle: sys.receipt_handle.unwrap(),
                    lite_topic: None,
                });
            }
            if entries.is_empty() {
                continue;
            }
            let ack = pb::AckMessageRequest {
                group: resource("TierGrpc"),
                topic: resource("TierTopic"),
                entries,
            };
            let acked = c.ack_message(request(ack)).await.unwrap().into_inner();
            assert_eq!(acked.status.map(|s| s.code), Some(pb::Code::Ok as i32), "acked");
        }
        seen
    });
    assert_eq!(seen, (0..3800).collect::<BTreeSet<_>>());
}

/// A slave that was down while its master's disk let go of what the tier holds catches up from
/// the bucket when it comes back, rather than being told to start over from an empty store:
/// the master reads the bytes the disk no longer has from the tier and sends them as the disk's.
/// A consumer of the slave then reads every message from the first offset.
#[test]
fn a_slave_behind_the_masters_disk_catches_up_from_the_bucket() {
    let Some(bin) = weed_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let weed = SeaweedFs::start(&bin, dir.path(), BUCKET);
    let args = args(&weed);
    let master = Petrel::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let ns = format!("127.0.0.1:{}", master.ns_port);
    let segment = format!("mappedFileSizeCommitLog={SEGMENT_BYTES}");
    let slave_args = [
        "--namesrv-addr",
        &ns,
        "--set",
        &segment,
        "--set",
        "brokerRole=SLAVE",
        "--set",
        "brokerId=1",
    ];
    let mut slave = Petrel::start(&slave_args);
    send(&master, 0, 200);
    let mut c = slave.broker();
    assert_eq!(pull_bodies(&mut c, "TierTopic", 0, 0, 200, Duration::from_secs(30)).len(), 200);
    slave.kill();

    // Meanwhile about 4 MiB more: the first segments go to the tier and leave the master's
    // disk, past where the slave stopped.
    send(&master, 200, 3600);
    wait_for("the first segments gone from the master's disk", Duration::from_secs(60), || {
        let local = local_segments(&master);
        tiered(&master).len() >= 3 && !local.contains(&0) && !local.contains(&SEGMENT_BYTES)
    });
    // It comes back while the object store hangs: the catch-up waits (the connection stays,
    // the tier is tried again) and goes on once the store answers.
    weed.signal("-STOP");
    slave.spawn();
    wait_for("a failed read from the tier", Duration::from_secs(30), || {
        master.log().contains("catch-up from the cold tier failed; retried")
    });
    weed.signal("-CONT");
    let mut c = slave.broker();
    let bodies = pull_bodies(&mut c, "TierTopic", 0, 0, 3800, Duration::from_secs(90));
    for (i, body) in bodies.iter().enumerate() {
        assert!(
            body.starts_with(&format!("tier-body-{i:06}-")),
            "message {i}: {}",
            &body[..20.min(body.len())]
        );
    }
    assert!(master.log().contains("catches up from the cold tier"), "{}", master.log());
    assert!(!master.log().contains("give the slave an empty store"), "{}", master.log());
    assert_eq!(
        master.log().matches("slave connected").count(),
        2,
        "one connection each time: {}",
        master.log()
    );
}
