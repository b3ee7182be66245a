//! Typed store errors. Every append failure says whether the data may be on disk.

use std::io;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("i/o error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("disk full: cannot allocate segment {path} ({size_bytes} bytes); free space and appends resume")]
    DiskFull { path: String, size_bytes: u64 },
    #[error("flush did not reach offset {offset} within {timeout_ms} ms (the record is written but not yet durable)")]
    FlushTimeout { offset: u64, timeout_ms: u64 },
    #[error("flush failed: {0}; the store refuses appends until restarted")]
    FlushFailed(String),
    #[error("store is not writable: {0}")]
    NotWritable(String),
    #[error("record of {size_bytes} bytes does not fit a segment of {segment_bytes} bytes")]
    RecordTooLarge { size_bytes: usize, segment_bytes: u64 },
    #[error("the append would block ({0}); retry it off the async runtime")]
    WouldBlock(&'static str),
    #[error("malformed record: {0}")]
    BadRecord(String),
    #[error(
        "commit log damaged in {path} at offset {offset} ({reason}), with valid records after it (the next at {next_valid}): \
         refusing to start rather than discard them; restore the segment, or set truncateCorruptLog=true to cut the log at {offset}"
    )]
    Corrupt {
        path: String,
        offset: u64,
        next_valid: u64,
        reason: String,
    },
    #[error(
        "commit log damaged in {path} at offset {offset} ({reason}), below {durable_below}, which was flushed before the \
         last stop: refusing to start rather than discard what readers saw; restore the segment, or set \
         truncateCorruptLog=true to cut the log at {offset}"
    )]
    DurableDamaged {
        path: String,
        offset: u64,
        durable_below: u64,
        reason: String,
    },
    #[error("queue {topic}:{queue_id} cannot take messages: its consume queue cannot be written ({reason}); other queues can")]
    QueueUnavailable { topic: String, queue_id: i32, reason: String },
    #[error(
        "store is not writable: dispatch is stuck at commit-log offset {offset} ({reason}) for {stuck_s} s; consumers see nothing \
         past it, so nothing more is taken"
    )]
    DispatchStuck { offset: u64, reason: String, stuck_s: u64 },
    #[error("replicated bytes at offset {got} do not continue this log, which ends at {expected}")]
    ReplicaGap { expected: u64, got: u64 },
    #[error("store layout problem in {path}: {reason}")]
    Layout { path: String, reason: String },
}

impl StoreError {
    pub(crate) fn io(path: impl AsRef<std::path::Path>, source: io::Error) -> StoreError {
        StoreError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;
