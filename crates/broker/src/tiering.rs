//! The cold tier's offload: a thread of its own that uploads every sealed commit-log segment to
//! the object store, oldest first, and the retention guard that keeps a local segment until the
//! tier holds it.
//!
//! Owns: when a segment is uploaded, and the offload thread's priority (`tieredOffloadNice`:
//! its MD5s and copies take only the CPU the append path leaves, so a saturated broker's sends
//! are not slowed by uploads, which catch up once the sends ease). Must never: run on the append
//! path or on the async runtime (uploads block); let retention delete a segment the tier does
//! not hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use petrel_store::{ColdLog, ColdTier, MessageStore, StoreError};
use petrel_tier::{Tier, TierConfig};

use crate::config::BrokerConfig;
use crate::error::BrokerError;

/// How often the offload looks for newly sealed segments.
const SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// How long a shutdown waits for an upload under way.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How long the offload waits after a failed upload before trying again.
const RETRY_PAUSE: Duration = Duration::from_secs(5);

/// The tier and the thread that fills it.
#[derive(Debug)]
pub struct Tiering {
    /// The object store's side: its manifest, uploads and reads.
    pub tier: Arc<Tier>,
    /// `tieredStoreFileReservedTime`, ms.
    reserved_ms: u64,
    /// `tieredOffloadNice`: the offload thread's nice value, 0 to 19.
    offload_nice: i32,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Tiering {
    /// The tier `config` names (none when `objectStoreEndpoint` or `objectStoreBucket` is
    /// unset), with the store's view of it (reads below the log and the retention guard), which
    /// the store must have from its opening on.
    ///
    /// # Errors
    /// Settings the tier cannot use (in controller mode, a prefix shared by the replicas); its
    /// manifest unreadable.
    pub fn open(config: &BrokerConfig, store: &petrel_store::MessageStoreConfig) -> Result<Option<(Tiering, ColdTier)>, BrokerError> {
        if config.object_store_endpoint.is_empty() && config.object_store_bucket.is_empty() {
            return Ok(None);
        }
        if config.enable_controller_mode && config.tiered_store_file_path.is_empty() {
            // Ids are given at runtime there: the default prefix would be every replica's.
            return Err(BrokerError::InvalidParameter(
                "a cold tier in controller mode needs tieredStoreFilePath, a prefix of this replica's own".into(),
            ));
        }
        let mut tier_config = tier_config(config);
        if let Some(budget) = store.page_cache_budget_bytes {
            // Its blocks count in the page-cache budget: at most half of it, so that the
            // store's files keep the other half (and never less than one block).
            let half = usize::try_from(budget / 2).unwrap_or(usize::MAX).max(tier_config.block_bytes);
            if tier_config.read_cache_bytes > half {
                tracing::info!(
                    tiered_read_cache_bytes = half,
                    page_cache_budget_bytes = budget,
                    "the tier's read cache kept to half the page-cache budget"
                );
                tier_config.read_cache_bytes = half;
            }
        }
        // Read-ahead within what the cache holds beside the block being read.
        let cache_blocks = tier_config.read_cache_bytes / tier_config.block_bytes;
        tier_config.read_ahead_blocks = tier_config.read_ahead_blocks.min(cache_blocks.saturating_sub(1));
        let tier = Arc::new(Tier::open(tier_config, &config.store_path_root_dir.join("tier"))?);
        // The store's own settings (a caller may have changed them from the broker's): where
        // its segments are and how long they are.
        let (guard, dir) = (tier.clone(), store.root.join("commitlog"));
        let cold = ColdTier {
            log: Arc::new(TierReads {
                tier: tier.clone(),
                segment_bytes: store.commit_log.segment_size_bytes,
                max_record_bytes: max_record_bytes(config.max_message_size_bytes),
            }),
            guard: Arc::new(move |start| may_delete(&guard, start, &dir.join(format!("{start:020}")))),
        };
        let reserved_ms = config.tiered_store_file_reserved_time_hours.saturating_mul(3_600_000);
        tracing::info!(endpoint = %config.object_store_endpoint, bucket = %config.object_store_bucket, prefix = %tier.config().prefix, "cold tier on");
        let offload_nice = i32::try_from(config.tiered_offload_nice).expect("the table keeps it within 0 to 19");
        assert!((0..=19).contains(&offload_nice), "tieredOffloadNice out of range: {offload_nice}");
        let tiering = Tiering {
            tier,
            reserved_ms,
            offload_nice,
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
        };
        Ok(Some((tiering, cold)))
    }

    /// Starts the offload thread over `store`.
    ///
    /// # Errors
    /// The thread not started.
    pub fn start(&self, store: &Arc<MessageStore>) -> Result<(), BrokerError> {
        let (tier, store, stop, reserved_ms) = (self.tier.clone(), store.clone(), self.stop.clone(), self.reserved_ms);
        let nice = self.offload_nice;
        let thread = std::thread::Builder::new()
            .name("tier-offload".into())
            .spawn(move || {
                lower_priority(nice);
                offload_loop(&tier, &store, &stop, reserved_ms);
            })
            .map_err(BrokerError::io("starting the tier's offload thread"))?;
        *self.thread.lock() = Some(thread);
        Ok(())
    }

    /// Stops the offload and waits for it, [`STOP_WAIT`] at most: an upload hanging on a slow
    /// object store is abandoned (its segment is not in the manifest, so it stays on disk and
    /// is uploaded again after the restart).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.lock().take() else {
            return;
        };
        thread.thread().unpark();
        let deadline = std::time::Instant::now() + STOP_WAIT;
        while !thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            tracing::warn!("an upload to the cold tier was still running at shutdown; it starts again after the restart");
        }
    }
}

impl Drop for Tiering {
    /// A broker dropped without its shutdown (a failed open) still ends its offload thread.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.lock().as_ref() {
            thread.thread().unpark();
        }
    }
}

/// Sets the calling thread's nice value to `nice` (Linux keeps one per thread; raising it needs
/// no privilege). The thread's reads, MD5s and copies then run only where the append path's
/// threads leave CPU. A failure is logged and the offload runs at the broker's priority.
fn lower_priority(nice: i32) {
    if nice == 0 {
        return;
    }
    let tid = rustix::thread::gettid();
    match rustix::process::setpriority_process(Some(tid), nice) {
        Ok(()) => tracing::debug!(nice, "the tier's offload thread yields to the append path"),
        Err(e) => tracing::warn!(nice, error = %e, "lowering the tier's offload thread's priority failed; it runs at the broker's"),
    }
}

fn tier_config(config: &BrokerConfig) -> TierConfig {
    let mut c = TierConfig::new(&config.object_store_endpoint, &config.object_store_bucket);
    c.region.clone_from(&config.object_store_region);
    if let Some(sign) = config.object_store_sign_payload {
        c.sign_payload = sign;
    }
    c.access_key.clone_from(&config.object_store_access_key);
    c.secret_key.clone_from(&config.object_store_secret_key);
    c.prefix = if config.tiered_store_file_path.is_empty() {
        format!("petrel/{}/{}/{}", config.broker_cluster_name, config.broker_name, config.broker_id)
    } else {
        config.tiered_store_file_path.trim_matches('/').to_owned()
    };
    c.upload_bytes_per_second = config.tiered_upload_bytes_per_second;
    c.read_cache_bytes = usize::try_from(config.tiered_read_cache_bytes).unwrap_or(usize::MAX);
    c.read_ahead_blocks = usize::try_from(config.tiered_read_ahead_blocks).unwrap_or(usize::MAX);
    c
}

/// Whether retention may delete the local segment at `path`: only if the tier holds the very
/// same bytes. A tiered copy that differs (the segment was rewritten after its upload, as a
/// replica's cut log is) is dropped from the tier, and the offload uploads the segment again.
fn may_delete(tier: &Tier, start: u64, path: &std::path::Path) -> bool {
    match tier.holds_same(start, path) {
        Ok(true) => true,
        Ok(false) => {
            if tier.holds(start) {
                tracing::warn!(
                    start_offset = start,
                    "the tier's copy of a segment differs from the local file; uploading it again"
                );
                if let Err(e) = tier.disown(start) {
                    tracing::warn!(start_offset = start, error = %e, "dropping the tier's stale copy failed");
                }
            }
            false
        }
        Err(e) => {
            tracing::warn!(start_offset = start, error = %e, "checking a segment against the tier failed; kept");
            false
        }
    }
}

/// Reads below the local log from the tier: a record lies whole in one segment.
struct TierReads {
    tier: Arc<Tier>,
    segment_bytes: u64,
    /// See [`max_record_bytes`].
    max_record_bytes: u64,
}

/// The largest record a message of at most `max_message_size_bytes` makes: its body, a topic
/// and properties at the bounds the record's encoder keeps, and the fixed fields (under 4 KiB
/// with both addresses in IPv6).
fn max_record_bytes(max_message_size_bytes: usize) -> u64 {
    const FIXED_FIELDS_BYTES_MAX: usize = 4096;
    let topic_bytes_max = usize::try_from(i16::MAX).expect("fits");
    let others = topic_bytes_max + petrel_protocol::properties::MAX_PROPERTIES_BYTES + FIXED_FIELDS_BYTES_MAX;
    u64::try_from(max_message_size_bytes.saturating_add(others)).unwrap_or(u64::MAX)
}

impl ColdLog for TierReads {
    fn read(&self, offset: u64, len: usize) -> petrel_store::Result<bytes::Bytes> {
        let start = offset - offset % self.segment_bytes;
        self.tier.read(start, offset - start, len).map_err(|e| {
            if e.is_gone() {
                tracing::error!(offset, error = %e, "a tiered segment's object is gone from the bucket: its records are lost");
                return StoreError::ColdLost { offset };
            }
            StoreError::ColdTier {
                offset,
                source: Box::new(e),
            }
        })
    }

    fn min_offset(&self) -> Option<u64> {
        self.tier.min_offset()
    }

    fn max_record_bytes(&self) -> u64 {
        self.max_record_bytes
    }

    fn cached_bytes(&self) -> u64 {
        self.tier.cached_bytes()
    }
}

/// Uploads each sealed segment (not the one being written, and durable locally) that the tier
/// does not hold yet, oldest first; pauses after a failure. Then applies the tier's retention.
fn offload_loop(tier: &Tier, store: &MessageStore, stop: &AtomicBool, reserved_ms: u64) {
    let log = store.commit_log();
    let segment_bytes = log.config().segment_size_bytes;
    while !stop.load(Ordering::Acquire) {
        expire(tier, store, reserved_ms);
        let segments = log.segments_snapshot();
        let sealed = segments.len().saturating_sub(1);
        let mut pause = SCAN_INTERVAL;
        for segment in segments.iter().take(sealed) {
            let start = segment.start_offset();
            if stop.load(Ordering::Acquire) {
                return;
            }
            if tier.holds(start) || start + segment_bytes > log.flushed_offset() {
                continue;
            }
            if let Err(e) = tier.upload(start, segment.path()) {
                tracing::warn!(start_offset = start, error = %e, "uploading a segment to the cold tier failed; retrying later");
                pause = RETRY_PAUSE;
                break;
            }
        }
        std::thread::park_timeout(pause);
    }
}

/// Deletes from the tier, oldest first, the segments no longer on local disk whose last write is
/// older than `tieredStoreFileReservedTime`; the store then drops their queue entries.
fn expire(tier: &Tier, store: &MessageStore, reserved_ms: u64) {
    let local_min = store.commit_log().min_offset();
    let now_ms = u64::try_from(petrel_kit::clock::now_ms()).unwrap_or(0);
    let mut deleted = 0;
    for segment in tier.segments() {
        if segment.start_offset >= local_min || now_ms.saturating_sub(segment.written_ms) < reserved_ms {
            break;
        }
        if let Err(e) = tier.delete(segment.start_offset) {
            tracing::warn!(start_offset = segment.start_offset, error = %e, "deleting an expired segment from the cold tier failed");
            break;
        }
        deleted += 1;
    }
    if deleted > 0
        && let Err(e) = store.run_retention()
    {
        tracing::warn!(error = %e, "retention after the cold tier's failed");
    }
}
