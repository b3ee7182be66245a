//! `Queue`: one topic-queue's consume queue, wherever it lives: on its own mapped segments
//! (topic queues: large, read sequentially, mapped reads on the hot path) or as a key range in
//! the light queues' LSM (`%LMQ%` queues, which come by the million and are mostly idle).
//!
//! Owns: nothing of its own; it only routes. Must never: differ between the two in what a read,
//! an append or retention answers (both keep RocketMQ's consume-queue semantics).

use std::sync::Arc;

use crate::consume_queue::{ConsumeQueue, CqAppend, CqEntry};
use crate::error::Result;
use crate::light_queue::LightQueue;
use crate::mapped_file::MappedFile;

/// A consume queue on segments or in the LSM.
pub(crate) enum Queue {
    /// Boxed: a light queue's state is a third of a segment queue's, and a broker holds them by
    /// the million.
    Segments(Box<ConsumeQueue>),
    Light(LightQueue),
}

impl Queue {
    pub(crate) fn min_offset(&self) -> i64 {
        match self {
            Queue::Segments(q) => q.min_offset(),
            Queue::Light(q) => q.min_offset(),
        }
    }

    pub(crate) fn max_offset(&self) -> i64 {
        match self {
            Queue::Segments(q) => q.max_offset(),
            Queue::Light(q) => q.max_offset(),
        }
    }

    pub(crate) fn get(&self, queue_offset: i64) -> Option<CqEntry> {
        match self {
            Queue::Segments(q) => q.get(queue_offset),
            Queue::Light(q) => q.get(queue_offset),
        }
    }

    pub(crate) fn append(&self, queue_offset: i64, entry: CqEntry) -> Result<CqAppend> {
        match self {
            Queue::Segments(q) => q.append(queue_offset, entry),
            Queue::Light(q) => q.append(queue_offset, entry),
        }
    }

    pub(crate) fn delete_below(&self, log_min: u64) -> Result<()> {
        match self {
            Queue::Segments(q) => q.delete_below(log_min),
            Queue::Light(q) => q.delete_below(log_min),
        }
    }

    /// Makes a segment queue's entries durable; a light queue's go to the LSM with every other
    /// light queue's tail (see `LightQueues::settle`).
    pub(crate) fn flush(&self) -> Result<()> {
        match self {
            Queue::Segments(q) => q.flush(),
            Queue::Light(_) => Ok(()),
        }
    }

    /// The mapped segments (none for a light queue: the LSM's files are not mapped).
    pub(crate) fn segments(&self) -> Vec<Arc<MappedFile>> {
        match self {
            Queue::Segments(q) => q.segments_snapshot(),
            Queue::Light(_) => Vec::new(),
        }
    }

    pub(crate) fn is_light(&self) -> bool {
        matches!(self, Queue::Light(_))
    }

    /// Removes every key of a light queue; a segment queue's files are its directory's, which
    /// the store removes.
    pub(crate) fn remove_all(&self) -> Result<usize> {
        match self {
            Queue::Segments(_) => Ok(0),
            Queue::Light(q) => q.remove_all(),
        }
    }
}
