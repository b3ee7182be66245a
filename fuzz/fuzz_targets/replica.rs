//! The replica's scanner: a slave appends what its master streams, cut anywhere, and checks it
//! is whole records of a log before it counts anything. Any bytes in any chunks are appended or
//! refused with an error, never a panic; what is accepted is the prefix of what was sent and
//! survives a reopen; nothing is accepted past a refusal.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use petrel_store::{CommitLog, CommitLogConfig};

const SEGMENT: u64 = 64 << 10;

fn config(dir: &std::path::Path) -> CommitLogConfig {
    let mut c = CommitLogConfig::new(dir);
    c.segment_size_bytes = SEGMENT;
    c
}

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, stream)) = data.split_first() else { return };
    let dir = std::env::temp_dir().join(format!("petrel-fuzz-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let log = CommitLog::open(config(&dir)).expect("an empty log opens");
    // Up to four chunks, cut where the first byte says.
    let step = (usize::from(cuts) % 64 + 1) * 97;
    let mut offset = 0u64;
    for chunk in stream.chunks(step).take(4) {
        match log.append_replicated(offset, Bytes::copy_from_slice(chunk)) {
            Ok(end) => {
                assert_eq!(end, offset + chunk.len() as u64, "the end is the bytes appended");
                offset = end;
            }
            Err(_) => break,
        }
    }
    drop(log);
    let reopened = CommitLog::open(config(&dir)).expect("what was accepted reopens");
    assert!(reopened.max_offset() <= offset, "recovery never finds more than was appended");
    drop(reopened);
    let _ = std::fs::remove_dir_all(&dir);
});
