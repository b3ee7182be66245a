//! Petrel's storage engine.
//!
//! Owns: the commit log (segments, append, flush, checkpoint, recovery) and the consume queues
//! built from it. Must never: know
//! about sockets or clients; it stores pre-encoded records in RocketMQ's layout
//! (`petrel_protocol::message`) and hands them back.

pub mod checkpoint;
pub mod commit_log;
pub mod consume_queue;
pub mod error;
pub mod mapped_file;
pub mod message_store;

pub use commit_log::{AppendResult, CommitLog, CommitLogConfig, FlushMode, RecoveryReport};
pub use consume_queue::{CQ_ENTRY_BYTES, ConsumeQueue, CqEntry};
pub use error::{Result, StoreError};
pub use message_store::{Boundary, DispatchListener, GetResult, GetStatus, MessageStore, MessageStoreConfig};
