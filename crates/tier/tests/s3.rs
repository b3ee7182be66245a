//! The tier against a real S3-compatible server: SeaweedFS (`weed server -s3`, Apache-2.0),
//! started here on loopback ports from the allocator. `scripts/tier-s3.sh` builds it and runs
//! this test with `PETREL_WEED` naming the binary; without it the test says so and passes.
//!
//! Uploads verified by ETag and size, each with its record beside it, ranges read back as written, a wrong key refused, a
//! corrupted object caught by its block CRC, a server stopped mid-read (retried until it comes
//! back, or failed in bounded time when it does not), the bandwidth bound, deletion.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload};
use petrel_tier::testing::{ACCESS_KEY, SECRET_KEY, SeaweedFs, weed_binary};
use petrel_tier::{Secret, Tier, TierConfig, TierError, TieredSegment};

const BUCKET: &str = "petrel-tier";

fn start(bin: &Path, dir: &Path) -> SeaweedFs {
    SeaweedFs::start(bin, dir, BUCKET)
}

fn config(weed: &SeaweedFs, prefix: &str) -> TierConfig {
    let mut c = TierConfig::new(weed.endpoint(), BUCKET);
    c.prefix = prefix.into();
    c.access_key = ACCESS_KEY.into();
    c.secret_key = Some(Secret::new(SECRET_KEY));
    c.part_bytes = 5 << 20;
    c.block_bytes = 1 << 20;
    c.request_timeout = Duration::from_secs(2);
    c.max_retries = 2;
    c.read_deadline = Duration::from_secs(10);
    c
}

/// A segment-like file of `bytes` pseudo-random bytes.
fn segment_file(dir: &Path, name: &str, bytes: usize, seed: u64) -> (PathBuf, Vec<u8>) {
    let mut state = seed | 1;
    let data: Vec<u8> = (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    let path = dir.join(name);
    std::fs::File::create(&path).and_then(|mut f| f.write_all(&data)).expect("written");
    (path, data)
}

/// The record the tier wrote beside the object at `key`: the segment as its manifest describes it.
fn record_beside(client: &object_store::aws::AmazonS3, runtime: &tokio::runtime::Runtime, key: &Key) -> TieredSegment {
    let record_key = Key::from(format!("{key}.json"));
    let record = runtime
        .block_on(async { client.get(&record_key).await?.bytes().await })
        .expect("the record");
    serde_json::from_slice(&record).expect("a segment's description")
}

#[test]
fn segments_go_to_seaweedfs_verified_and_come_back_by_range() {
    let Some(bin) = weed_binary() else { return };
    let local = tempfile::tempdir().expect("a directory");
    let weed = start(&bin, local.path());
    let tier = Tier::open(config(&weed, "t1/broker-a"), &local.path().join("tier")).expect("opened");

    // 12 MiB + 3 bytes: three parts (5, 5, 2 MiB + 3), thirteen blocks, the last short.
    let (path, data) = segment_file(local.path(), "00000000000012582912", (12 << 20) + 3, 7);
    let uploaded = tier.upload(12 << 20, &path).expect("uploaded");
    assert_eq!((uploaded.bytes, uploaded.block_crcs.len()), (data.len() as u64, 13));
    assert!(uploaded.e_tag.trim_matches('"').ends_with("-3"), "{}", uploaded.e_tag);
    assert!(tier.holds(12 << 20) && !tier.holds(0));
    // Beside the object, its record: the segment as the manifest describes it, so that the
    // bucket alone says what each object holds.
    let client = weed.client(BUCKET);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let key = Key::from(format!("t1/broker-a/commitlog/{:020}", 12u64 << 20));
    assert_eq!(record_beside(&client, &runtime, &key), uploaded);
    // The local file is the tier's copy, byte for byte; rewritten after the upload, it is not.
    assert!(tier.holds_same(12 << 20, &path).expect("checked"));
    let rewritten = local.path().join("rewritten");
    let mut other = data.clone();
    other[(7 << 20) + 1] ^= 1;
    std::fs::write(&rewritten, &other).expect("written");
    assert!(!tier.holds_same(12 << 20, &rewritten).expect("checked"));
    assert!(!tier.holds_same(0, &path).expect("checked"), "a segment the tier does not hold");
    for (pos, len) in [(0, 10), ((1 << 20) - 5, 10), (3 << 20, 2 << 20), (data.len() - 3, 3), (17, 0)] {
        let got = tier.read(12 << 20, pos as u64, len).expect("read");
        assert_eq!(&got[..], &data[pos..pos + len], "bytes {pos}..{}", pos + len);
    }
    assert!(tier.read(12 << 20, data.len() as u64 - 1, 2).is_err(), "past the end");
    assert!(matches!(tier.read(0, 0, 1), Err(TierError::NotTiered(0))));

    // The manifest survives a reopen: the tier still knows what the object store holds. The
    // uploads above had their bodies signed (the default over plain HTTP); reopened with
    // `UNSIGNED-PAYLOAD`, the tier uploads and reads as well.
    drop(tier);
    let mut unsigned = config(&weed, "t1/broker-a");
    assert!(unsigned.sign_payload, "signed by default over http://");
    unsigned.sign_payload = false;
    let tier = Tier::open(unsigned, &local.path().join("tier")).expect("reopened");
    assert_eq!(tier.segments().len(), 1);
    assert_eq!(
        &tier.read(12 << 20, 5 << 20, 100).expect("read")[..],
        &data[5 << 20..(5 << 20) + 100]
    );
    let (unsigned_path, unsigned_data) = segment_file(local.path(), "00000000000025165824", (5 << 20) + 9, 11);
    tier.upload(24 << 20, &unsigned_path).expect("uploaded with an unsigned body");
    assert_eq!(&tier.read(24 << 20, 5 << 20, 9).expect("read")[..], &unsigned_data[5 << 20..]);
    tier.delete(24 << 20).expect("deleted");
    assert_eq!(tier.segments().len(), 1);

    // Read ahead: a reader going through the segment in order (100 KiB at a time, as a
    // consumer's pulls do) finds blocks 2 onwards fetched ahead of it, and every block is
    // fetched once — a read wanting a block being read ahead waits for it. A lone read (a view
    // by id) fetches its block alone; the next block read after it starts the read-ahead.
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    let sequential = Tier::open(config(&weed, "t1/broker-a"), &local.path().join("tier")).expect("reopened");
    let mut pos = 0;
    while pos < data.len() {
        let n = (100 << 10).min(data.len() - pos);
        let got = sequential.read(12 << 20, pos as u64, n).expect("read");
        assert!(got[..] == data[pos..pos + n], "bytes {pos}..{}", pos + n);
        pos += n;
    }
    assert_eq!(sequential.stats().fetched_bytes.load(relaxed), data.len() as u64, "each block once");
    assert_eq!(sequential.stats().read_ahead_blocks.load(relaxed), 11, "blocks 2 to 12");
    drop(sequential);
    let lone = Tier::open(config(&weed, "t1/broker-a"), &local.path().join("tier")).expect("reopened");
    lone.read(12 << 20, 6 << 20, 10).expect("read");
    assert_eq!(lone.stats().fetched_bytes.load(relaxed), 1 << 20);
    assert_eq!(lone.stats().read_ahead_blocks.load(relaxed), 0);
    lone.read(12 << 20, 7 << 20, 10).expect("read");
    assert_eq!(lone.stats().read_ahead_blocks.load(relaxed), 2, "blocks 8 and 9");
    drop(lone);

    // The prefix changed in the settings since (`tieredStoreFilePath`): what was uploaded is
    // still read where the manifest says it went.
    let moved = Tier::open(config(&weed, "t1/moved"), &local.path().join("tier")).expect("reopened");
    assert_eq!(
        &moved.read(12 << 20, 4 << 20, 50).expect("read")[..],
        &data[4 << 20..(4 << 20) + 50]
    );
    drop(moved);

    // A wrong secret is refused, and nothing is recorded.
    let mut wrong = config(&weed, "t1/broker-b");
    wrong.secret_key = Some(Secret::new("not-the-secret"));
    let refused = Tier::open(wrong, &local.path().join("tier-b")).expect("opened");
    assert!(refused.upload(0, &path).is_err());
    assert!(refused.segments().is_empty());

    // A corrupted object: the bytes of block 2 replaced behind the tier's back are caught by
    // its CRC (block 2 was not read, so not cached).
    let mut bad = data.clone();
    bad[(2 << 20) + 10] ^= 0xff;
    runtime.block_on(client.put(&key, PutPayload::from(bad))).expect("overwritten");
    let caught = tier.read(12 << 20, 2 << 20, 64);
    assert!(matches!(caught, Err(TierError::Checksum(_))), "{caught:?}");
    assert_eq!(tier.stats().checksum_failures.load(std::sync::atomic::Ordering::Relaxed), 1);

    // Disowned (its copy is stale): no longer held, and so after a reopen, without a request
    // to the store; uploaded again, the new objects replace the old under the same keys.
    tier.disown(12 << 20).expect("disowned");
    assert!(!tier.holds(12 << 20));
    drop(tier);
    let tier = Tier::open(config(&weed, "t1/broker-a"), &local.path().join("tier")).expect("reopened");
    assert!(!tier.holds(12 << 20), "the manifest kept it disowned");
    tier.upload(12 << 20, &path).expect("uploaded again");
    assert!(tier.holds_same(12 << 20, &path).expect("checked"));
    assert_eq!(&tier.read(12 << 20, 2 << 20, 64).expect("read")[..], &data[2 << 20..(2 << 20) + 64]);

    // Its object deleted behind the tier's back (a lifecycle rule, an operator): a read of a
    // block not cached says so, as an error that asking again will not mend.
    runtime.block_on(client.delete(&key)).expect("deleted behind the tier's back");
    let gone = tier.read(12 << 20, 9 << 20, 64).expect_err("the object is gone");
    assert!(gone.is_gone(), "{gone:?}");

    // Deleted: gone from the manifest and from the bucket, its record with it.
    tier.delete(12 << 20).expect("deleted");
    assert!(!tier.holds(12 << 20));
    for gone in [key.clone(), Key::from(format!("{key}.json"))] {
        assert!(
            matches!(runtime.block_on(client.head(&gone)), Err(object_store::Error::NotFound { .. })),
            "{gone} is still there"
        );
    }
}

#[test]
fn a_stopped_object_store_is_retried_until_it_returns_and_fails_in_bounded_time_when_it_does_not() {
    let Some(bin) = weed_binary() else { return };
    let local = tempfile::tempdir().expect("a directory");
    let weed = start(&bin, local.path());
    let (path, data) = segment_file(local.path(), "seg", 3 << 20, 11);
    let tier = Tier::open(config(&weed, "t2"), &local.path().join("tier")).expect("opened");
    tier.upload(0, &path).expect("uploaded");

    // Stopped for 3 s mid-read: the request times out (2 s), is retried, and is answered once
    // the server runs again.
    weed.signal("-STOP");
    let resumer = std::thread::spawn({
        let pid = weed.pid().to_string();
        move || {
            std::thread::sleep(Duration::from_secs(3));
            Command::new("kill").args(["-CONT", &pid]).status().expect("kill ran");
        }
    });
    let got = tier.read(0, 1 << 20, 1000).expect("read after the server came back");
    assert_eq!(&got[..], &data[1 << 20..(1 << 20) + 1000]);
    resumer.join().expect("joined");

    // Stopped for good: the read fails after its retries, in bounded time, and so does an
    // upload, which records nothing.
    weed.signal("-STOP");
    let started = Instant::now();
    let failed = tier.read(0, 2 << 20, 10).expect_err("the server is stopped");
    assert!(!failed.is_gone(), "a stopped server may come back: {failed:?}");
    let (other, _) = segment_file(local.path(), "seg2", 1 << 20, 13);
    assert!(tier.upload(3 << 20, &other).is_err());
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
    assert!(!tier.holds(3 << 20));
    weed.signal("-CONT");
    // And once it is back, the same upload goes through.
    tier.upload(3 << 20, &other).expect("uploaded once the server is back");
}

#[test]
fn uploads_keep_to_the_bandwidth_bound() {
    let Some(bin) = weed_binary() else { return };
    let local = tempfile::tempdir().expect("a directory");
    let weed = start(&bin, local.path());
    let (path, _) = segment_file(local.path(), "seg", 15 << 20, 17);
    let mut c = config(&weed, "t3");
    c.upload_bytes_per_second = 20 << 20;
    let tier = Tier::open(c, &local.path().join("tier")).expect("opened");
    let started = Instant::now();
    tier.upload(0, &path).expect("uploaded");
    // Three parts of 5 MiB at 20 MiB/s: the third waits for the first two's 0.5 s.
    assert!(started.elapsed() >= Duration::from_millis(500), "{:?}", started.elapsed());
}
