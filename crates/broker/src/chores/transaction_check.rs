//! Asks producers about undecided half messages. Every `transactionCheckInterval`, while this
//! broker is the master: the op records stored since the last pass are read back into the
//! decided roots (after a restart, every op still remembered), then the half queue is read from
//! where the last pass stopped. A half message whose root is decided is passed; one younger than
//! `transactionTimeOut` (or its own immunity time) ends the pass; one checked
//! `transactionCheckMax` times is given up; any other is stored again with its check count + 1
//! and a producer of its group is asked about that copy.
//!
//! Owns: when a producer is asked. Must never: move the half position past a message that was
//! neither decided, given up nor stored again (a crash then checks it again, never loses it), or
//! read more than [`MAX_PER_PASS`] records of either queue in one pass.

use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::message::MessageExt;
use petrel_protocol::msgid::create_offset_msg_id;
use petrel_protocol::properties::keys;

use super::cursor::{self, Read};
use crate::broker::Broker;
use crate::services::transactions::{CheckPositions, HALF_TOPIC, OP_TOPIC, TransactionService};
use crate::services::{BrokerError, TransactionCheck};

/// Records read at once from either queue.
const BATCH: usize = 64;
/// The most records of either queue one pass reads.
pub const MAX_PER_PASS: usize = 64 * 1024;

/// Reads the decisions still remembered back from the op queue, before any END_TRANSACTION is
/// served (blocking, at start-up): an answer repeated across a restart must find its
/// transaction decided.
pub fn load_decisions(broker: &Broker) {
    let mut at = broker.transactions.positions();
    read_decisions(broker, &mut at);
    tracing::debug!(decided = broker.transactions.decided_count(), "transaction decisions read back");
}

/// Runs until the task is dropped.
pub async fn run(broker: Arc<Broker>) {
    let every = Duration::from_millis(broker.transactions.settings().check_interval_ms);
    super::every_while_master(broker, every, |broker| async move {
        // The op queue is read off the runtime: the whole read is store work.
        let reader = broker.clone();
        let Ok(mut at) = tokio::task::spawn_blocking(move || {
            let mut at = reader.transactions.positions();
            read_decisions(&reader, &mut at);
            at
        })
        .await
        else {
            tracing::warn!("reading the transaction decisions failed; the pass waits for the next");
            return;
        };
        if let Err(e) = check_half_messages(&broker, &mut at).await {
            tracing::warn!(error = %e, "transaction check pass stopped; it goes on at the next");
        }
        let transactions = broker.transactions.clone();
        super::write_off_runtime("the transaction check positions", move || transactions.save_positions(at)).await;
    })
    .await;
}

/// What a read of `topic`'s queue 0 from `offset` found; `None` at the end. Moves `offset`
/// forward when retention removed what it pointed at (once: the next read starts at the
/// queue's first record).
fn records_or_move(read: Read, offset: &mut i64) -> Result<Option<Vec<(i64, MessageExt)>>, ()> {
    match read {
        Read::Records(records) => Ok(Some(records)),
        Read::TooSmall { next } => {
            *offset = next;
            Err(())
        }
        Read::End | Read::PastEnd { .. } | Read::Unreadable => Ok(None),
    }
}

/// [`records_or_move`] over blocking reads (the op queue, read off the runtime as a whole).
fn read_batch_blocking(broker: &Broker, topic: &str, offset: &mut i64) -> Option<Vec<(i64, MessageExt)>> {
    // Two reads at most: after a move the offset is the queue's first record.
    for _ in 0..2 {
        if let Ok(found) = records_or_move(cursor::read_blocking(&broker.store, topic, 0, *offset, BATCH), offset) {
            return found;
        }
    }
    None
}

/// [`records_or_move`] over reads off the runtime (the half queue, read by the async pass).
async fn read_batch(broker: &Broker, topic: &'static str, offset: &mut i64) -> Option<Vec<(i64, MessageExt)>> {
    // Two reads at most: after a move the offset is the queue's first record.
    for _ in 0..2 {
        if let Ok(found) = records_or_move(cursor::read(broker, topic, 0, *offset, BATCH).await, offset) {
            return found;
        }
    }
    None
}

/// Reads the op records from `at.op_offset` into the decided roots, forgets decisions older than
/// the service's memory, and moves `at.op_offset` past the ops that are all older than that.
fn read_decisions(broker: &Broker, at: &mut CheckPositions) {
    let transactions = &broker.transactions;
    let horizon_ms = crate::now_ms() - transactions.memory_ms();
    let mut next = at.op_offset;
    let mut read = 0;
    let mut all_old_so_far = true;
    while read < MAX_PER_PASS {
        let Some(batch) = read_batch_blocking(broker, OP_TOPIC, &mut next) else {
            break;
        };
        for (offset, op) in batch {
            read += 1;
            next = offset + 1;
            let root = std::str::from_utf8(&op.body).ok().and_then(|b| b.trim().parse::<i64>().ok());
            let recent = op.store_timestamp >= horizon_ms;
            if let (Some(root), true) = (root, recent) {
                transactions.decide(root, op.store_timestamp);
            }
            all_old_so_far &= !recent;
            if all_old_so_far {
                at.op_offset = offset + 1;
            }
        }
    }
    transactions.forget_before(horizon_ms);
}

/// Walks the half queue from `at.half_offset` (see the module comment).
async fn check_half_messages(broker: &Broker, at: &mut CheckPositions) -> Result<(), BrokerError> {
    let transactions = &broker.transactions;
    let settings = transactions.settings().clone();
    let mut read = 0;
    while read < MAX_PER_PASS {
        let Some(batch) = read_batch(broker, HALF_TOPIC, &mut at.half_offset).await else {
            return Ok(());
        };
        for (offset, half) in batch {
            read += 1;
            let root = TransactionService::root_of(&half.properties, offset);
            if transactions.is_decided(root) {
                at.half_offset = offset + 1;
                continue;
            }
            let immunity_ms = half
                .properties
                .get(keys::CHECK_IMMUNITY_TIME_IN_SECONDS)
                .and_then(|s| s.parse::<i64>().ok())
                .map_or(i64::try_from(settings.timeout_ms).unwrap_or(i64::MAX), |s| s.saturating_mul(1000));
            if crate::now_ms() - half.store_timestamp < immunity_ms {
                return Ok(()); // this one and those after it are not due yet
            }
            let checks: u32 = half
                .properties
                .get(keys::TRANSACTION_CHECK_TIMES)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            if checks >= settings.check_max {
                tracing::warn!(root, checks, "half message given up after transactionCheckMax checks");
                broker.produce.give_up_half(half).await?;
            } else {
                let group = half.properties.get(keys::PRODUCER_GROUP).cloned().unwrap_or_default();
                let copy = broker.produce.renew_half(half, root, checks + 1).await?;
                ask_producer(broker, &group, copy);
            }
            at.half_offset = offset + 1;
        }
    }
    Ok(())
}

/// Sends CHECK_TRANSACTION_STATE about `copy` to one live producer of `group`.
fn ask_producer(broker: &Broker, group: &str, copy: MessageExt) {
    let producers = broker.groups.producer_handles(group);
    if producers.is_empty() {
        tracing::debug!(group, "no producer of the group online to check a transaction; asked again later");
        return;
    }
    let pick = usize::try_from(copy.queue_offset).unwrap_or(0) % producers.len();
    let mut shown = copy.clone();
    // The producer sees the message as it sent it: its real topic and queue.
    if let Some(topic) = copy.properties.get(keys::REAL_TOPIC) {
        shown.topic.clone_from(topic);
    }
    if let Some(queue_id) = copy.properties.get(keys::REAL_QUEUE_ID).and_then(|q| q.parse().ok()) {
        shown.queue_id = queue_id;
    }
    let mut record = bytes::BytesMut::new();
    if shown.encode(&mut record).is_err() {
        return;
    }
    let check = TransactionCheck {
        tran_state_table_offset: copy.queue_offset,
        commit_log_offset: copy.commit_log_offset,
        msg_id: copy.properties.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).cloned(),
        offset_msg_id: create_offset_msg_id(copy.store_host, copy.commit_log_offset),
        record: record.to_vec(),
    };
    if !producers[pick].check_transaction_state(&check) {
        tracing::debug!(group, "a producer could not be asked about a transaction; asked again later");
    }
}
