//! The page-cache budget on real files: with a budget the store's files stay resident under it
//! while 48 MiB are written (measured independently with `mincore` on a fresh mapping of each
//! file), cold data still reads back, a cold read brings back only its own pages, and without a
//! budget the same writes stay resident.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use petrel_protocol::message::MessageExt;
use petrel_store::{FlushMode, MessageStore, MessageStoreConfig};
use support::{body, record};

const BUDGET_BYTES: u64 = 8 << 20;
const WRITTEN_BYTES: usize = 48 << 20;

fn config(root: &std::path::Path, budget: Option<u64>) -> MessageStoreConfig {
    let mut c = MessageStoreConfig::new(root);
    c.commit_log.segment_size_bytes = 4 << 20;
    c.commit_log.flush_mode = FlushMode::Async;
    c.commit_log.async_flush_interval = Duration::from_millis(50);
    c.cq_entries_per_segment = 4096;
    c.page_cache_budget_bytes = budget;
    c
}

/// Resident bytes of one file, seen through a mapping of our own.
fn resident_in(path: &std::path::Path) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    let len = usize::try_from(f.metadata().unwrap().len()).expect("a mapped file fits usize");
    // SAFETY: a read-only map of a file the store does not truncate while we look.
    let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
    let mut vec = vec![0u8; len.div_ceil(4096)];
    // SAFETY: our mapping, a byte per page.
    assert_eq!(unsafe { libc::mincore(map.as_ptr() as *mut _, len, vec.as_mut_ptr()) }, 0);
    vec.iter().filter(|b| **b & 1 == 1).count() as u64 * 4096
}

/// Resident bytes of every file under `root`, seen through a mapping of our own.
fn resident_under(root: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            // Temporary files (a checkpoint being replaced) may be gone by now.
            if std::fs::metadata(&p).is_ok_and(|m| m.len() > 0) && std::fs::File::open(&p).is_ok() {
                total += resident_in(&p);
            }
        }
    }
    total
}

/// Writes 48 MiB in 4 KiB records, pausing now and then as a steady producer would; returns
/// the highest resident figure seen along the way.
fn write_all(store: &MessageStore, root: &std::path::Path) -> u64 {
    let mut peak = 0;
    let n = WRITTEN_BYTES / 4096;
    for i in 0..n {
        let queue_id = i32::try_from(i % 4).expect("below 4");
        store
            .append(&mut record("PC", queue_id, &body(i as u64, 3900)), "PC", queue_id)
            .unwrap();
        if i % 512 == 511 {
            std::thread::sleep(Duration::from_millis(60));
            peak = peak.max(resident_under(root));
        }
    }
    std::thread::sleep(Duration::from_millis(600));
    peak.max(resident_under(root))
}

#[test]
fn with_a_budget_the_store_files_stay_under_it_and_cold_data_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), Some(BUDGET_BYTES))).unwrap();
    let peak = write_all(&store, dir.path());
    let now = resident_under(dir.path());
    let stats = store.page_cache_stats();
    eprintln!(
        "budget {BUDGET_BYTES}: peak {peak}, now {now}, store's own figure {}, released {} in {} passes",
        stats.resident_bytes.load(Ordering::Relaxed),
        stats.released_bytes.load(Ordering::Relaxed),
        stats.releases.load(Ordering::Relaxed)
    );
    assert!(now <= BUDGET_BYTES, "{now} resident after the writes, budget {BUDGET_BYTES}");
    // Between two checks the writer adds what it writes in one interval on top of the line.
    assert!(peak <= BUDGET_BYTES + (4 << 20), "peak {peak}");
    assert!(stats.released_bytes.load(Ordering::Relaxed) > (WRITTEN_BYTES as u64) / 2);
    assert!(!store.page_cache_busy(), "everything is flushed: no flow control");
    // The oldest record, long released, reads back intact.
    let got = store.get_messages("PC", 0, 0, 1, None);
    assert_eq!(got.message_count, 1);
    let (m, _) = MessageExt::decode(&got.body).unwrap();
    assert_eq!(&m.body[..], &body(0, 3900)[..]);
    store.close().unwrap();
}

/// A read far behind the tail (a query by key, a consumer that fell behind) must not undo the
/// budget: the device's read-ahead (often megabytes) would otherwise bring a whole small
/// segment back for one record.
#[test]
fn a_cold_read_brings_back_only_its_own_pages() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), Some(BUDGET_BYTES))).unwrap();
    write_all(&store, dir.path());
    let first_segment = dir.path().join("commitlog").join(format!("{:020}", 0));
    let before = resident_in(&first_segment);
    assert!(before < 1 << 20, "the oldest segment was released: {before} resident");
    for (i, queue_offset) in [(0, 0), (40, 10), (100, 25)] {
        let got = store.get_messages("PC", i % 4, queue_offset, 1, None);
        assert_eq!(got.message_count, 1);
        let (m, _) = MessageExt::decode(&got.body).unwrap();
        assert_eq!(&m.body[..], &body(i as u64, 3900)[..]);
    }
    let after = resident_in(&first_segment);
    eprintln!("oldest 4 MiB segment: {before} resident, {after} after reading three 3.9 KiB records");
    // Three records of under 4 KiB each span at most two pages.
    assert!(
        after <= before + 6 * 4096,
        "{after} resident after three cold reads (from {before})"
    );
    store.close().unwrap();
}

/// A cold tier's read cache holding half the budget (the most the broker lets it): the files
/// get the half left (the cache's blocks are this process's memory as much as mapped pages).
struct CachingTier;

impl petrel_store::ColdLog for CachingTier {
    fn read(&self, offset: u64, _len: usize) -> petrel_store::Result<bytes::Bytes> {
        Err(petrel_store::StoreError::ColdTier {
            offset,
            source: "nothing is below the log in this test".into(),
        })
    }

    fn min_offset(&self) -> Option<u64> {
        None
    }

    fn max_record_bytes(&self) -> u64 {
        1 << 20
    }

    fn cached_bytes(&self) -> u64 {
        BUDGET_BYTES / 2
    }
}

#[test]
fn a_cold_tiers_read_cache_comes_off_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), Some(BUDGET_BYTES));
    c.cold = Some(petrel_store::ColdTier {
        log: std::sync::Arc::new(CachingTier),
        guard: std::sync::Arc::new(|_| false),
    });
    let store = MessageStore::open(c).unwrap();
    let peak = write_all(&store, dir.path());
    let now = resident_under(dir.path());
    let files_budget = BUDGET_BYTES / 2;
    let stats = store.page_cache_stats();
    eprintln!("budget {BUDGET_BYTES}, {files_budget} left to the files: peak {peak}, now {now}");
    assert_eq!(stats.tier_cache_bytes.load(Ordering::Relaxed), BUDGET_BYTES / 2);
    assert_eq!(
        stats.budget_bytes.load(Ordering::Relaxed),
        BUDGET_BYTES,
        "the whole budget reported"
    );
    // Without the cache counted, the newest half of the whole budget (4 MiB) stays resident,
    // with the newest queue segments and the index on top.
    assert!(
        now <= files_budget,
        "{now} resident after the writes, {files_budget} left to the files"
    );
    // Between two checks the writer adds an interval's writes on top, as without a tier.
    assert!(peak <= BUDGET_BYTES + (4 << 20), "peak {peak}");
    store.close().unwrap();
}

#[test]
fn without_a_budget_what_is_written_stays_resident() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), None)).unwrap();
    let peak = write_all(&store, dir.path());
    assert!(
        peak > (WRITTEN_BYTES as u64) * 3 / 4,
        "only {peak} resident: the comparison shows nothing"
    );
    store.close().unwrap();
}

#[test]
fn the_default_budget_is_a_quarter_of_the_memory_and_at_most_the_cap() {
    let budget = petrel_store::default_budget_bytes();
    assert!(budget <= petrel_store::DEFAULT_BUDGET_CAP_BYTES, "{budget}");
    assert!(budget > 0);
}
