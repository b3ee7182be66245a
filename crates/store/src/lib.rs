//! Petrel's storage engine.
//!
//! Owns: the commit log (segments, append, flush, checkpoint, recovery), the durability
//! watermark, and the consume queues built from the log. Must never: know
//! about sockets or clients; it stores pre-encoded records in RocketMQ's layout
//! (`petrel_protocol::message`) and hands them back.

mod allocator;
mod checkpoint;
mod commit_log;
mod consume_queue;
mod epoch_file;
mod error;
mod flusher;
mod index;
mod light_queue;
mod mapped_file;
mod message_store;
mod numbering;
mod page_cache;
pub mod power_loss;
mod queue;
mod recovery;
mod repeated;
mod replica;
mod stats;
mod wakeup;
mod watermark;
mod writer;

pub use checkpoint::{Changes, Checkpoint, append_delta};
pub use commit_log::{AppendResult, CommitLog, CommitLogConfig, FlushMode, RecoveryReport, RetentionGuard, Target, WritePath};
pub use consume_queue::{CQ_ENTRY_BYTES, ConsumeQueue, CqAppend, CqEntry, PendingSyncs};
pub use epoch_file::{EPOCH_FILE_NAME, EpochEntry, EpochFile, MAX_EPOCH_ENTRIES, consistent_point};
pub use error::{Result, StoreError};
pub use index::{INDEX_DIR, IndexConfig, MAX_WALK, key_hash};
pub use light_queue::{LIGHT_QUEUE_DIR, LightQueue, LightQueues};
pub use mapped_file::{MAX_DATA_RANGES, data_ranges};
pub use message_store::{
    Boundary, ColdLog, ColdTier, DispatchListener, DispatchStall, GetResult, GetStatus, MAX_QUERY_BYTES, MessageFilter, MessageStore,
    MessageStoreConfig, QueryResult,
};
pub use page_cache::{DEFAULT_BUDGET_CAP_BYTES, KEEP_INTERVAL, PageCacheStats, RELEASE_FRACTION, default_budget_bytes};
pub use petrel_kit::fs::create_dir_durably;
pub use recovery::TORN_TAIL_ZERO_RUN_BYTES;
pub use stats::{CommitLogStats, HistogramSnapshot, Log2Histogram};
pub use watermark::{Slot, WaitError, WaitFuture, Watermark};
