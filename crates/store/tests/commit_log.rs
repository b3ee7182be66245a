//! Commit-log behaviour on real files: append and read back across segment rolls, restart,
//! SYNC_FLUSH visibility, and recovery from a torn tail and from a flipped bit.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::time::Duration;

use petrel_protocol::message::MessageExt;
use petrel_store::{CommitLog, CommitLogConfig, FlushMode, StoreError, WritePath};
use support::{body, record, tagged_record};

fn config(dir: &std::path::Path, mode: FlushMode) -> CommitLogConfig {
    CommitLogConfig {
        segment_size_bytes: 4096,
        flush_mode: mode,
        // keep the checkpoint where `open` put it, so recovery scans everything appended
        checkpoint_interval: Duration::from_secs(3600),
        async_flush_interval: Duration::from_millis(5),
        ..CommitLogConfig::new(dir)
    }
}

/// Appends `n` records of varying size to two queues; returns (offset, size) of each.
fn fill(log: &CommitLog, n: u64) -> Vec<(u64, u32)> {
    (0..n)
        .map(|i| {
            let body_len = 50 + (usize::try_from(i).expect("a small count") * 37) % 400;
            let mut r = record("T", (i % 2) as i32, &body(i, body_len));
            let a = log.append_durable(&mut r, "T", (i % 2) as i32).unwrap();
            assert_eq!(a.queue_offset, (i / 2) as i64, "queue offsets count per queue");
            (a.physical_offset, a.size_bytes)
        })
        .collect()
}

fn read_all(log: &CommitLog) -> Vec<MessageExt> {
    let mut out = Vec::new();
    let mut offset = 0;
    while let Some(bytes) = log.read_record(offset).unwrap() {
        let (msg, used) = MessageExt::decode_verified(&bytes).unwrap();
        assert_eq!(msg.commit_log_offset as u64, offset, "the stored physical offset is where it lies");
        offset = log.next_record_offset(offset, u32::try_from(used).expect("a record's size fits u32"));
        out.push(msg);
    }
    out
}

#[test]
fn appends_roll_segments_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(config(dir.path(), FlushMode::Async)).unwrap();
    let placed = fill(&log, 60);
    assert!(placed.last().unwrap().0 > 4096 * 3, "60 records span several 4 KiB segments");
    for (i, w) in placed.windows(2).enumerate() {
        assert!(w[1].0 >= w[0].0 + u64::from(w[0].1), "record {i} overlaps the next");
        assert_eq!(
            w[1].0 / 4096,
            (w[1].0 + u64::from(w[1].1) - 1) / 4096,
            "a record never straddles segments"
        );
    }
    std::thread::sleep(Duration::from_millis(20));
    let msgs = read_all(&log);
    assert_eq!(msgs.len(), 60);
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m.body.as_ref(), body(i as u64, m.body.len()).as_slice());
        assert_eq!(m.queue_offset, (i / 2) as i64);
        assert!(m.store_timestamp > 0);
    }
    let oversized = &mut record("T", 0, &vec![0u8; 5000]);
    assert!(matches!(
        log.append_durable(oversized, "T", 0),
        Err(StoreError::RecordTooLarge { .. })
    ));
    let mut garbage = vec![0u8; 100];
    assert!(matches!(log.append_durable(&mut garbage, "T", 0), Err(StoreError::BadRecord(_))));
    log.close().unwrap();

    // A clean restart scans nothing and continues the queue offsets.
    let log = CommitLog::open(config(dir.path(), FlushMode::Async)).unwrap();
    let r = log.recovery_report().clone();
    assert!(!r.unclean);
    assert_eq!(r.records_scanned, 0, "the checkpoint of a clean shutdown is the end");
    assert_eq!(r.truncated_bytes, 0);
    let a = log.append_durable(&mut record("T", 0, b"after restart"), "T", 0).unwrap();
    assert_eq!(a.queue_offset, 30);
    assert_eq!(a.physical_offset, r.end_offset);
}

/// The segment files' bytes, in order.
fn log_bytes(dir: &std::path::Path) -> Vec<u8> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .collect();
    names.sort();
    names.iter().flat_map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn both_write_paths_leave_the_same_bytes_and_survive_a_restart() {
    let mut images = Vec::new();
    for path in [WritePath::Syscall, WritePath::Mapping] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = || CommitLogConfig {
            write_path: path,
            ..config(dir.path(), FlushMode::Async)
        };
        let log = CommitLog::open(cfg()).unwrap();
        assert_eq!(log.config().writes_through_mapping(), path == WritePath::Mapping);
        // Crossing segments: the filler and the rolls go through the same path.
        let placed = fill(&log, 40);
        let before = read_all(&log);
        assert_eq!(before.len(), 40, "{path:?}: readers see every written record");
        log.close().unwrap();
        let reopened = CommitLog::open(cfg()).unwrap();
        assert_eq!(reopened.recovery_report().truncated_bytes, 0, "{path:?}");
        let after = read_all(&reopened);
        assert_eq!(after.len(), before.len(), "{path:?}: nothing lost across the restart");
        for (m, (offset, size)) in after.iter().zip(&placed) {
            assert_eq!(m.commit_log_offset as u64, *offset);
            assert!(*size as usize > m.body.len(), "the record holds its body and header");
        }
        reopened.close().unwrap();
        // Store timestamps differ between the runs: compare everything else.
        images.push(
            after
                .into_iter()
                .map(|m| (m.commit_log_offset, m.queue_offset, m.body))
                .collect::<Vec<_>>(),
        );
        assert!(log_bytes(dir.path()).len() >= 4096 * 3);
    }
    assert_eq!(images[0], images[1], "pwritev and the mapping write the same records");
}

#[test]
fn a_sparse_segment_from_elsewhere_is_allocated_on_open_and_takes_mapped_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || CommitLogConfig {
        write_path: WritePath::Mapping,
        ..config(dir.path(), FlushMode::Async)
    };
    // A segment of the right size with no blocks, as a copy tool or another broker leaves it.
    let first = dir.path().join(format!("{:020}", 0));
    std::fs::File::create(&first).unwrap().set_len(4096).unwrap();
    let blocks = |p: &std::path::Path| std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(p).unwrap());
    assert_eq!(blocks(&first), 0, "the file starts sparse");
    let log = CommitLog::open(cfg()).unwrap();
    assert!(blocks(&first) >= 8, "opening allocated the segment's blocks");
    let placed = fill(&log, 3);
    assert_eq!(placed[0].0, 0, "the empty segment is written from its start");
    assert_eq!(read_all(&log).len(), 3);
    log.close().unwrap();
    assert_eq!(
        read_all(&CommitLog::open(cfg()).unwrap()).len(),
        3,
        "and the records are in the file"
    );
}

#[test]
fn sync_flush_answers_only_durable_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(config(dir.path(), FlushMode::Sync)).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let log = &log;
            s.spawn(move || {
                for i in 0..25 {
                    let mut r = record("S", t, &body(i, 100));
                    let a = log.append_durable(&mut r, "S", t).unwrap();
                    assert!(
                        log.flushed_offset() >= a.physical_offset + u64::from(a.size_bytes),
                        "answered before durable"
                    );
                }
            });
        }
    });
    assert_eq!(log.readable_end(), log.flushed_offset());
    assert_eq!(read_all(&log).len(), 100);
}

/// Appends, then "crashes" (drop without close) and damages the log with `damage`; returns the
/// recovered log and the offsets written.
fn crash_and_damage(dir: &std::path::Path, damage: impl FnOnce(&std::path::Path, &[(u64, u32)])) -> (CommitLog, Vec<(u64, u32)>) {
    let log = CommitLog::open(config(dir, FlushMode::Sync)).unwrap();
    let placed = fill(&log, 40);
    drop(log);
    damage(dir, &placed);
    let log = CommitLog::open(config(dir, FlushMode::Sync)).unwrap();
    assert!(log.recovery_report().unclean, "no close, so the abort marker remained");
    (log, placed)
}

fn segment_path(dir: &std::path::Path, offset: u64) -> std::path::PathBuf {
    dir.join(format!("{:020}", offset - offset % 4096))
}

fn patch(dir: &std::path::Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(segment_path(dir, offset)).unwrap();
    f.write_all_at(bytes, offset % 4096).unwrap();
}

#[test]
fn torn_last_record_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (log, placed) = crash_and_damage(dir.path(), |dir, placed| {
        // the last record's second half never reached the disk
        let (off, size) = *placed.last().unwrap();
        patch(dir, off + u64::from(size) / 2, &vec![0u8; size as usize / 2]);
    });
    let r = log.recovery_report();
    let (last_off, _) = *placed.last().unwrap();
    assert_eq!(r.end_offset, last_off, "recovery ends where the torn record starts");
    assert_eq!(r.records_scanned, 39);
    assert!(r.truncated_bytes > 0 && r.stop_reason.is_some(), "{r:?}");
    let msgs = read_all(&log);
    assert_eq!(msgs.len(), 39);
    let next = log.append_durable(&mut record("T", 1, b"next"), "T", 1).unwrap();
    assert_eq!(next.physical_offset, last_off, "the next append reuses the cut space");
    assert_eq!(next.queue_offset, 19, "queue offsets resume after the last valid record");
}

/// A record whose last bytes (the end of its properties, or of its topic without them) never
/// reached the disk reads back with zeros there; BODYCRC covers only the body, so it checked, and
/// recovery took the record for whole with its properties or topic mangled.
#[test]
fn a_record_whose_last_bytes_never_reached_the_disk_is_cut() {
    for tag in [Some("TagA"), None] {
        let dir = tempfile::tempdir().unwrap();
        let log = CommitLog::open(config(dir.path(), FlushMode::Sync)).unwrap();
        for i in 0..3 {
            log.append_durable(&mut tagged_record("T", 0, &body(i, 40), tag), "T", 0).unwrap();
        }
        let last = log.append_durable(&mut tagged_record("T", 0, &body(3, 40), tag), "T", 0).unwrap();
        drop(log);
        // With properties the last 3 bytes are theirs; without, the topic's byte and the
        // properties' length (two zeros of their own).
        let end = last.physical_offset + u64::from(last.size_bytes);
        patch(dir.path(), end - 3, &[0, 0, 0]);
        let log = CommitLog::open(config(dir.path(), FlushMode::Sync)).unwrap();
        let r = log.recovery_report();
        assert_eq!(r.end_offset, last.physical_offset, "tag {tag:?}: {r:?}");
        assert_eq!(read_all(&log).len(), 3, "tag {tag:?}");
    }
}

/// A slave received part of a record and stopped; what arrived is a prefix of the record and the
/// segment's zeros stand in for the rest. Found by the `replica` fuzz target.
#[test]
fn a_slave_that_received_part_of_a_record_does_not_recover_it_as_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = tagged_record("T", 0, &body(0, 40), Some("TagA"));
    let mut second = tagged_record("T", 0, &body(1, 40), Some("TagA"));
    let log = CommitLog::open(config(dir.path(), FlushMode::Async)).unwrap();
    // The master's bytes: records placed at 0 and after it, as its log holds them.
    let scratch = tempfile::tempdir().unwrap();
    let master = CommitLog::open(config(scratch.path(), FlushMode::Sync)).unwrap();
    let a = master.append_durable(&mut first, "T", 0).unwrap();
    let b = master.append_durable(&mut second, "T", 0).unwrap();
    let stream = master.read_raw(0, 1 << 20).unwrap();
    let received = usize::try_from(b.physical_offset + u64::from(b.size_bytes) - 5).expect("a small log");
    assert_eq!(log.append_replicated(0, stream.slice(..received)).unwrap(), received as u64);
    drop(log);
    let log = CommitLog::open(config(dir.path(), FlushMode::Async)).unwrap();
    assert_eq!(
        log.max_offset(),
        a.physical_offset + u64::from(a.size_bytes),
        "{:?}",
        log.recovery_report()
    );
    assert_eq!(read_all(&log).len(), 1);
}

/// As above, with a whole stored record inside the body of the record that arrived in part: it is
/// the body of a torn record, not a record after damage, and the slave must open. Found by the
/// `replica` fuzz target.
#[test]
fn a_slave_holding_part_of_a_record_whose_body_is_a_record_opens() {
    let dir = tempfile::tempdir().unwrap();
    let inner = tagged_record("Inner", 0, &body(9, 60), Some("TagB"));
    let mut carrier_body = body(8, 100);
    carrier_body.extend_from_slice(&inner);
    carrier_body.extend_from_slice(&body(7, 300));
    let mut first = tagged_record("T", 0, &body(0, 40), Some("TagA"));
    let mut carrier = tagged_record("T", 0, &carrier_body, Some("TagA"));
    let scratch = tempfile::tempdir().unwrap();
    let master = CommitLog::open(config(scratch.path(), FlushMode::Sync)).unwrap();
    let a = master.append_durable(&mut first, "T", 0).unwrap();
    let b = master.append_durable(&mut carrier, "T", 0).unwrap();
    let stream = master.read_raw(0, 1 << 20).unwrap();
    // Received: the first record, and the carrier up to 150 bytes past the inner record.
    let inner_at = stream.windows(inner.len()).position(|w| w == &inner[..]).unwrap();
    let received = inner_at + inner.len() + 150;
    assert!(
        (received as u64) < b.physical_offset + u64::from(b.size_bytes),
        "the carrier is cut"
    );
    let log = CommitLog::open(config(dir.path(), FlushMode::Async)).unwrap();
    assert_eq!(log.append_replicated(0, stream.slice(..received)).unwrap(), received as u64);
    drop(log);
    let log = CommitLog::open(config(dir.path(), FlushMode::Async)).expect("a torn record is no damage");
    assert_eq!(
        log.max_offset(),
        a.physical_offset + u64::from(a.size_bytes),
        "{:?}",
        log.recovery_report()
    );
}

/// Flips one bit in the body of record `victim`.
fn flip_bit(dir: &std::path::Path, placed: &[(u64, u32)], victim: usize) {
    use std::os::unix::fs::FileExt;
    let (off, size) = placed[victim];
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(segment_path(dir, off))
        .unwrap();
    let at = off % 4096 + u64::from(size) - 40; // inside the body
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
}

/// The other side of the rule above: a record whose size field was damaged to run past the last
/// byte written still has whole records after it that run up to that byte, so it is damage, not
/// a torn record carrying them in its body.
#[test]
fn a_size_damaged_past_the_written_end_before_valid_records_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(config(dir.path(), FlushMode::Sync)).unwrap();
    let placed = fill(&log, 40);
    drop(log); // crash
    let last_segment = placed.last().unwrap().0 / 4096;
    let victim = placed.iter().position(|(off, _)| off / 4096 == last_segment).unwrap();
    assert!(victim + 1 < placed.len(), "valid records follow the victim in its segment");
    let (off, _) = placed[victim];
    let reaching_the_segment_end = i32::try_from(4096 - off % 4096 - 8).expect("within a 4 KiB segment");
    patch(dir.path(), off, &reaching_the_segment_end.to_be_bytes());
    match CommitLog::open(config(dir.path(), FlushMode::Sync))
        .err()
        .expect("damage, not a torn record")
    {
        StoreError::Corrupt { offset, next_valid, .. } => {
            assert_eq!((offset, next_valid), (off, placed[victim + 1].0));
        }
        other => panic!("expected Corrupt, got {other}"),
    }
}

#[test]
fn a_flipped_bit_before_valid_records_refuses_to_start_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(config(dir.path(), FlushMode::Sync)).unwrap();
    let placed = fill(&log, 40);
    drop(log); // crash
    let victim = 25;
    flip_bit(dir.path(), &placed, victim);
    let before = log_bytes(dir.path());
    let err = CommitLog::open(config(dir.path(), FlushMode::Sync))
        .err()
        .expect("damage in the middle is not a torn tail");
    match &err {
        StoreError::Corrupt {
            path, offset, next_valid, ..
        } => {
            assert_eq!(*offset, placed[victim].0, "names the damaged record");
            assert_eq!(*next_valid, placed[victim + 1].0, "and the valid one after it");
            assert!(
                path.ends_with(&format!("{:020}", placed[victim].0 - placed[victim].0 % 4096)),
                "{path}"
            );
        }
        other => panic!("expected Corrupt, got {other}"),
    }
    assert!(err.to_string().contains("truncateCorruptLog"), "says how to go on: {err}");
    assert_eq!(log_bytes(dir.path()), before, "refusing deletes and zeroes nothing");

    // The operator's choice: cut there.
    let mut c = config(dir.path(), FlushMode::Sync);
    c.truncate_corruption = true;
    let log = CommitLog::open(c).unwrap();
    let r = log.recovery_report();
    assert_eq!(r.end_offset, placed[victim].0);
    assert!(r.stop_reason.as_deref().unwrap().contains("CRC"), "{r:?}");
    assert_eq!(read_all(&log).len(), victim);
}

#[test]
fn a_torn_tail_with_a_later_page_on_disk_is_still_cut() {
    // Write-back reaches the disk in any order: past the last sync, a later page may be there
    // while an earlier one is not (zeros). That is a torn tail, not damage.
    let dir = tempfile::tempdir().unwrap();
    let zeroed = std::cell::Cell::new(0);
    let (log, placed) = crash_and_damage(dir.path(), |dir, placed| {
        // the last segment with a record starting past its second sector: that sector is lost
        let seg = placed
            .iter()
            .filter(|(o, _)| o % 4096 >= 1024)
            .map(|(o, _)| o - o % 4096)
            .next_back()
            .unwrap();
        patch(dir, seg + 512, &[0u8; 512]);
        zeroed.set(seg + 512);
    });
    let r = log.recovery_report();
    assert!(r.end_offset <= zeroed.get(), "cut at or before the lost sector: {r:?}");
    assert!(r.end_offset > zeroed.get() - 1024, "but not far before it: {r:?}");
    assert!(r.truncated_bytes > 0);
    assert!(read_all(&log).len() < placed.len());
}

#[test]
fn the_cut_removes_later_segments_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let (log, placed) = crash_and_damage(dir.path(), |dir, placed| {
        // the record that opens the second segment is torn, and everything after it zeroed
        let second = placed.iter().find(|(o, _)| *o >= 4096).unwrap().0;
        for (o, s) in placed.iter().filter(|(o, _)| *o >= second) {
            patch(dir, *o, &vec![0u8; *s as usize]);
        }
        patch(dir, second, &[0xAB; 16]);
    });
    assert_eq!(log.recovery_report().end_offset, 4096);
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str().and_then(|n| n.parse::<u64>().ok()))
        .filter(|o| *o > 4096)
        .collect();
    for o in kept {
        let path = segment_path(dir.path(), o);
        assert!(
            std::fs::read(&path).unwrap().iter().all(|b| *b == 0),
            "{o}: prepared afresh, holds nothing"
        );
    }
    assert!(placed.len() > read_all(&log).len());
}

#[test]
fn batches_land_together_with_consecutive_queue_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(config(dir.path(), FlushMode::Sync)).unwrap();
    log.append_durable(&mut record("B", 0, b"single"), "B", 0).unwrap();
    let parts: Vec<Vec<u8>> = (0..5).map(|i| record("B", 0, &body(i, 300))).collect();
    for _ in 0..3 {
        // three batches of 5 x ~400 B: the third cannot fit the rest of the first 4 KiB segment
        let mut batch = parts.concat();
        let results = log.append_batch(&mut batch, "B", 0).unwrap();
        assert_eq!(results.len(), 5);
        log.wait_durable(results[4].end_offset()).unwrap();
        for w in results.windows(2) {
            assert_eq!(w[1].queue_offset, w[0].queue_offset + 1);
            assert_eq!(
                w[1].physical_offset,
                w[0].physical_offset + u64::from(w[0].size_bytes),
                "contiguous"
            );
        }
        let first = results[0].physical_offset;
        let last = results[4].physical_offset + u64::from(results[4].size_bytes) - 1;
        assert_eq!(first / 4096, last / 4096, "a batch never straddles segments");
        assert!(
            log.flushed_offset() > last,
            "SYNC_FLUSH: the whole batch is durable once waited for"
        );
    }
    let msgs = read_all(&log);
    assert_eq!(msgs.len(), 16);
    assert_eq!(msgs.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
    // a malformed batch is refused whole
    let mut bad = parts.concat();
    let cut = bad.len() - 10;
    assert!(matches!(log.append_batch(&mut bad[..cut], "B", 0), Err(StoreError::BadRecord(_))));
    assert_eq!(read_all(&log).len(), 16);
}

#[test]
fn recovery_scans_only_what_follows_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), FlushMode::Sync);
    c.checkpoint_interval = Duration::from_millis(5);
    let log = CommitLog::open(c.clone()).unwrap();
    fill(&log, 50);
    std::thread::sleep(Duration::from_millis(60)); // several checkpoints pass
    for i in 0..5 {
        log.append_durable(&mut record("late", 0, &body(i, 100)), "late", 0).unwrap();
    }
    drop(log); // crash
    let log = CommitLog::open(c).unwrap();
    let r = log.recovery_report();
    assert!(r.unclean);
    assert!(
        r.records_scanned <= 5,
        "scanned {} records: the 50 before the checkpoint must not be re-read",
        r.records_scanned
    );
    assert!(r.scanned_from > 0);
    assert_eq!(read_all(&log).len(), 55);
}

/// The base written when a recovery opens the log holds the queues it found past the old one:
/// a second crash right after then scans nothing and numbers on from there.
#[test]
fn the_base_a_recovery_writes_holds_what_it_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), FlushMode::Sync);
    let log = CommitLog::open(c.clone()).unwrap();
    fill(&log, 20);
    drop(log); // crash: the base on disk is the one the first open wrote, before any record
    let log = CommitLog::open(c.clone()).unwrap();
    assert_eq!(log.recovery_report().records_scanned, 20, "everything follows the old base");
    drop(log); // crash again, before any checkpoint of this run
    let log = CommitLog::open(c).unwrap();
    let r = log.recovery_report();
    assert!(r.unclean);
    assert_eq!(r.records_scanned, 0, "the second open's base was at the end");
    for queue_id in 0..2 {
        let a = log
            .append_durable(&mut record("T", queue_id, &body(99, 60)), "T", queue_id)
            .unwrap();
        assert_eq!(a.queue_offset, 10, "queue {queue_id} numbers on after its 10 records");
    }
    assert_eq!(read_all(&log).len(), 22);
}

/// A segment larger than its end filler's i32 size field can record is refused at open, with
/// the directory named, rather than written with a wrapped filler at its first roll.
#[test]
fn a_segment_past_what_its_filler_can_record_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), FlushMode::Async);
    cfg.segment_size_bytes = (1 << 31) + 4096;
    match CommitLog::open(cfg) {
        Err(StoreError::Layout { reason, .. }) => assert!(reason.contains("segment size"), "{reason}"),
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("a segment over 2 GiB opened"),
    }
}
