//! Recovery over any segment bytes: the commit log opens (cutting a torn tail) or refuses with
//! an error naming the damage, never a panic; what it kept is records that verify, and a second
//! recovery of what the first left finds the same end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_protocol::MessageExt;
use petrel_store::{CommitLog, CommitLogConfig};

const SEGMENT: u64 = 64 << 10;

fn config(dir: &std::path::Path) -> CommitLogConfig {
    let mut c = CommitLogConfig::new(dir);
    c.segment_size_bytes = SEGMENT;
    c
}

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("petrel-fuzz-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut segment = data[..data.len().min(SEGMENT as usize)].to_vec();
    segment.resize(SEGMENT as usize, 0);
    std::fs::write(dir.join(format!("{:020}", 0)), &segment).expect("segment");
    let Ok(log) = CommitLog::open(config(&dir)) else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let end = log.max_offset();
    let mut at = 0u64;
    // Bounded: each record read moves forward.
    while at < end {
        let record = log.read_record(at).expect("read").expect("a record where recovery kept one");
        let (_, used) = MessageExt::decode_verified(&record).expect("what recovery kept verifies");
        at = log.next_record_offset(at, used as u32);
    }
    drop(log);
    let again = CommitLog::open(config(&dir)).expect("a recovered log opens again");
    assert_eq!(again.max_offset(), end, "recovery is idempotent");
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
});
