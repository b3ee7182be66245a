//! Typed store errors. Every append failure says whether the data may be on disk.

use std::io;
use thiserror::Error;

/// Why a store operation failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory operated on.
        path: String,
        /// What the operating system reported.
        #[source]
        source: io::Error,
    },
    /// A new segment could not be allocated for lack of space; nothing was written.
    #[error("disk full: cannot allocate segment {path} ({size_bytes} bytes); free space and appends resume")]
    DiskFull {
        /// The segment that could not be created.
        path: String,
        /// The segment's size.
        size_bytes: u64,
    },
    /// A SYNC_FLUSH append was written but not made durable in time.
    #[error("flush did not reach offset {offset} within {timeout_ms} ms (the record is written but not yet durable)")]
    FlushTimeout {
        /// The log offset the flush had to reach: the end of the append.
        offset: u64,
        /// How long the caller waited.
        timeout_ms: u64,
    },
    /// A flush failed; the store takes no more appends until restarted.
    #[error("flush failed: {0}; the store refuses appends until restarted")]
    FlushFailed(String),
    /// The store takes no appends now (closed, closing, or after an earlier failure); the reason.
    #[error("store is not writable: {0}")]
    NotWritable(String),
    /// A record larger than a segment can hold (with the end-of-segment filler).
    #[error("record of {size_bytes} bytes does not fit a segment of {segment_bytes} bytes")]
    RecordTooLarge {
        /// The record's encoded size.
        size_bytes: usize,
        /// The configured segment size.
        segment_bytes: u64,
    },
    /// A non-blocking append would have had to wait; the reason. Nothing was written.
    #[error("the append would block ({0}); retry it off the async runtime")]
    WouldBlock(&'static str),
    /// A record that does not parse as RocketMQ's layout; what is wrong with it.
    #[error("malformed record: {0}")]
    BadRecord(String),
    /// Recovery found damage with valid records after it, and is not allowed to cut the log.
    #[error(
        "commit log damaged in {path} at offset {offset} ({reason}), with valid records after it (the next at {next_valid}): \
         refusing to start rather than discard them; restore the segment, or set truncateCorruptLog=true to cut the log at {offset}"
    )]
    Corrupt {
        /// The segment holding the damage.
        path: String,
        /// Log offset of the first bad record.
        offset: u64,
        /// Log offset of the next valid record after it.
        next_valid: u64,
        /// What is wrong at `offset`.
        reason: String,
    },
    /// Recovery found damage below the point flushed before the last stop, which readers may
    /// already have seen, and is not allowed to cut the log.
    #[error(
        "commit log damaged in {path} at offset {offset} ({reason}), below {durable_below}, which was flushed before the \
         last stop: refusing to start rather than discard what readers saw; restore the segment, or set \
         truncateCorruptLog=true to cut the log at {offset}"
    )]
    DurableDamaged {
        /// The segment holding the damage.
        path: String,
        /// Log offset of the first bad record.
        offset: u64,
        /// Log offset below which everything was flushed before the last stop.
        durable_below: u64,
        /// What is wrong at `offset`.
        reason: String,
    },
    /// An append to a queue whose consume queue cannot be written; other queues still work.
    #[error("queue {topic}:{queue_id} cannot take messages: its consume queue cannot be written ({reason}); other queues can")]
    QueueUnavailable {
        /// The queue's topic.
        topic: String,
        /// The queue within the topic.
        queue_id: i32,
        /// Why its consume queue cannot be written.
        reason: String,
    },
    /// An append refused because dispatch to the consume queues has stopped making progress.
    #[error(
        "store is not writable: dispatch is stuck at commit-log offset {offset} ({reason}) for {stuck_s} s; consumers see nothing \
         past it, so nothing more is taken"
    )]
    DispatchStuck {
        /// Commit-log offset the dispatcher cannot get past.
        offset: u64,
        /// Why it cannot.
        reason: String,
        /// How long it has been stuck, in seconds.
        stuck_s: u64,
    },
    /// An append would create a light message queue past `maxLmqConsumeQueueNum`; nothing was
    /// written.
    #[error(
        "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED] the broker holds {count} light message queues, its maxLmqConsumeQueueNum; \
         the message names {new} more"
    )]
    LmqQueuesExceeded {
        /// The light message queues this log holds now.
        count: usize,
        /// The queues the refused message would have created.
        new: usize,
    },
    /// The light queues' tails hold as many entries as they may while their LSM takes none (a
    /// full or failing disk): dispatch waits, and appends are refused, until it does.
    #[error(
        "the light message queues hold {entries} entries in memory that their store has not taken (at most {max}); \
         dispatch waits for it"
    )]
    LightTailsFull {
        /// Entries the tails hold.
        entries: usize,
        /// The bound (`TAIL_MAX_ENTRIES`).
        max: usize,
    },
    /// Replicated bytes that do not start where this log ends.
    #[error("replicated bytes at offset {got} do not continue this log, which ends at {expected}")]
    ReplicaGap {
        /// This log's end offset.
        expected: u64,
        /// The offset the replicated bytes start at.
        got: u64,
    },
    /// Files or offsets on disk, or asked for, that do not fit the store's layout.
    #[error("store layout problem in {path}: {reason}")]
    Layout {
        /// The file or directory concerned.
        path: String,
        /// What does not fit.
        reason: String,
    },
    /// A record below the local log could not be read from the cold tier (slow, stopped, or
    /// holding other bytes): the reader is told to try again later.
    #[error("cold tier, reading at offset {offset}: {source}")]
    ColdTier {
        /// Where the record starts.
        offset: u64,
        /// Why the tier could not give it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The cold tier no longer has the object that held a record (deleted from the bucket
    /// behind the broker's back, or by a lifecycle rule): the record is lost, and asking again
    /// will not bring it back. Readers skip it, as RocketMQ's skip a message whose bytes are
    /// gone, rather than being told "busy" forever.
    #[error("cold tier, reading at offset {offset}: the object that held it is gone from the bucket")]
    ColdLost {
        /// Where the record started.
        offset: u64,
    },
    /// A checkpoint delta block failed part-way and could not be cut off: the next checkpoint
    /// must be a whole new base.
    #[error("checkpoint delta {0} holds a torn block; a new base follows")]
    CheckpointTorn(String),
}

impl StoreError {
    pub(crate) fn io(path: impl AsRef<std::path::Path>, source: io::Error) -> StoreError {
        StoreError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

/// The store's result type.
pub type Result<T> = std::result::Result<T, StoreError>;
