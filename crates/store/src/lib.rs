//! Petrel's storage engine.
//!
//! Owns: the commit log (segments, append, flush, checkpoint, recovery). Must never: know
//! about sockets or clients; it stores pre-encoded records in RocketMQ's layout
//! (`petrel_protocol::message`) and hands them back.

pub mod checkpoint;
pub mod commit_log;
pub mod error;
pub mod mapped_file;

pub use commit_log::{AppendResult, CommitLog, CommitLogConfig, FlushMode, RecoveryReport};
pub use error::{Result, StoreError};
