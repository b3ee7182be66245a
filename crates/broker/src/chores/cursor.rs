//! The one reader of a system queue for the chores — the delay levels of
//! `SCHEDULE_TOPIC_XXXX`, the timer queues, the transaction half and op queues: a batch of
//! records from an offset, each with its queue offset, read on tokio's blocking pool so that no
//! chore reads the store on the async runtime, and one answer for each way a read can end.
//!
//! Owns: reading a system queue. Must never: read on a runtime worker, retry without a bound,
//! or hide a record that does not decode (the reader waits on it, and says so).

use std::sync::Arc;

use petrel_protocol::message::{MessageExt, decode_messages};
use petrel_store::{GetStatus, MessageStore};

use crate::broker::Broker;

/// How one read of a system queue ended.
#[derive(Debug)]
pub(crate) enum Read {
    /// Records from the offset read, each with the queue offset it sits at (at least one).
    Records(Vec<(i64, MessageExt)>),
    /// Nothing to read now: the queue's end, or the store or its pool cannot serve the read
    /// (the chore tries again at its next tick).
    End,
    /// Retention removed what the offset pointed at: the queue now begins at `next`.
    TooSmall { next: i64 },
    /// The offset is past the queue's end (this broker's log is shorter than the offset it
    /// was given: a new master): the queue ends at `next`.
    PastEnd { next: i64 },
    /// A record that does not decode: the reader waits on it.
    Unreadable,
}

/// Reads up to `max` records of `topic`'s queue `queue_id` from `from`, here (blocking: for
/// start-up, before the runtime serves anything, or from the blocking pool).
pub(crate) fn read_blocking(store: &MessageStore, topic: &str, queue_id: i32, from: i64, max: usize) -> Read {
    let got = store.get_messages(topic, queue_id, from, max, None);
    match got.status {
        GetStatus::Found => {}
        GetStatus::OffsetTooSmall => {
            return Read::TooSmall {
                next: got.next_begin_offset,
            };
        }
        GetStatus::OffsetOverflowBadly => {
            return Read::PastEnd {
                next: got.next_begin_offset,
            };
        }
        _ => return Read::End,
    }
    let Ok(messages) = decode_messages(&got.body) else {
        return Read::Unreadable;
    };
    if messages.is_empty() {
        return Read::End;
    }
    debug_assert!(messages.len() <= max, "the store returns at most what was asked");
    Read::Records((from..).zip(messages).collect())
}

/// [`read_blocking`] off the runtime.
pub(crate) async fn read(broker: &Broker, topic: &'static str, queue_id: i32, from: i64, max: usize) -> Read {
    let store: Arc<MessageStore> = broker.store.clone();
    off_runtime(move || read_blocking(&store, topic, queue_id, from, max))
        .await
        .unwrap_or(Read::End)
}

/// One record at each `(queue, offset)` of `at` (a timer's due list), read in one job:
/// `Read::Records` holds that one record.
pub(crate) async fn read_each(broker: &Broker, topic: &'static str, at: Vec<(i32, i64)>) -> Vec<Read> {
    let store: Arc<MessageStore> = broker.store.clone();
    let count = at.len();
    let read = move || at.iter().map(|&(q, o)| read_blocking(&store, topic, q, o, 1)).collect::<Vec<_>>();
    off_runtime(read).await.unwrap_or_else(|| (0..count).map(|_| Read::End).collect())
}

/// Runs `read` on tokio's blocking pool, as the chores' writes run (`super::write_off_runtime`):
/// a chore reads one batch at a time, and its read must not be refused at the store pool's bound
/// as a client's is (delayed and timer messages still come due under load).
async fn off_runtime<R: Send + 'static>(read: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    tokio::task::spawn_blocking(read)
        .await
        .inspect_err(|e| tracing::warn!(error = %e, "a system queue read failed"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::testing::TestBroker;

    #[tokio::test]
    async fn reads_end_move_and_find_records_off_the_runtime() {
        let b = TestBroker::start(|_| {});
        b.send_n("cursor-topic", 0, 3).await;
        b.wait_dispatched();
        let Read::Records(records) = read(&b.broker, "cursor-topic", 0, 1, 8).await else {
            panic!("records from offset 1")
        };
        let offsets: Vec<i64> = records
            .iter()
            .map(|(o, m)| {
                assert_eq!(*o, m.queue_offset, "each record with its own queue offset");
                *o
            })
            .collect();
        assert_eq!(offsets, [1, 2]);
        assert!(matches!(read(&b.broker, "cursor-topic", 0, 3, 8).await, Read::End), "the end");
        assert!(
            matches!(read(&b.broker, "cursor-topic", 0, 50, 8).await, Read::PastEnd { next: 3 }),
            "past the end: the queue ends at 3"
        );
        assert!(
            matches!(read(&b.broker, "no-such-topic", 0, 0, 8).await, Read::End),
            "an empty queue"
        );
        assert!(matches!(read_blocking(&b.broker.store, "cursor-topic", 0, 0, 1), Read::Records(r) if r.len() == 1));
        b.stop().await;
    }
}
