//! The second phase of a transactional send and the check chore's stores: END_TRANSACTION's
//! commit (the half message stored again in its real queue) or rollback, the op record that makes
//! either durable, a half message stored again for its next check, and one given up.

use petrel_protocol::message::{MessageExt, sys_flag};
use petrel_protocol::msgid::decode_offset_msg_id;
use petrel_protocol::properties::keys;

use super::ProduceService;
use crate::services::BrokerError;
use crate::services::transactions::{CHECK_MAX_TOPIC, HALF_TOPIC, OP_TAG, OP_TOPIC, TransactionService};

/// END_TRANSACTION, as any front end hands it over.
#[derive(Clone)]
pub struct EndTransaction {
    /// The producer group answering; must be the half message's own.
    pub producer_group: String,
    /// Whether the caller may publish to the half message's real topic (the request names the
    /// half message by offset, whatever topic it claims).
    pub may_publish: crate::services::TopicCheck,
    /// The half message's queue offset in the half topic.
    pub tran_state_table_offset: i64,
    /// The half message's commit-log offset.
    pub commit_log_offset: i64,
    /// `Some(true)` commit, `Some(false)` rollback, `None` unknown (nothing to do yet).
    pub commit: Option<bool>,
}

/// What END_TRANSACTION did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The half message was stored again in its real queue, and the op record written.
    Committed,
    /// The op record was written; the half message is never delivered.
    RolledBack,
    /// Another answer for the same half message came first; nothing stored.
    AlreadyDecided,
    /// "Unknown": the broker will ask again.
    Undecided,
}

impl ProduceService {
    /// Commits or rolls back the half message at `req.commit_log_offset`.
    ///
    /// # Errors
    /// This broker takes no writes now; no half message there, or one of another group or queue
    /// offset (RocketMQ's `SYSTEM_ERROR` remarks); the commit could not be stored.
    pub async fn end_transaction(&self, req: EndTransaction) -> Result<Ended, BrokerError> {
        let Some(commit) = req.commit else {
            return Ok(Ended::Undecided);
        };
        self.check_writable()?;
        // A half message the cold tier holds but cannot give now is retried by the producer,
        // not reported missing: its decision would otherwise be dropped.
        let half = match self.record_at(req.commit_log_offset).await {
            Err(e) if e.is_retryable() => return Err(e),
            found => found.ok(),
        };
        let half = half
            .filter(|m| m.topic == HALF_TOPIC)
            .ok_or_else(|| BrokerError::Internal("Find prepared transaction message failed".into()))?;
        if half.properties.get(keys::PRODUCER_GROUP) != Some(&req.producer_group) {
            return Err(BrokerError::Internal("The producer group wrong".into()));
        }
        (req.may_publish)(half.properties.get(keys::REAL_TOPIC).map_or("", String::as_str))?;
        if half.queue_offset != req.tran_state_table_offset {
            return Err(BrokerError::Internal("The transaction state table offset wrong".into()));
        }
        let root = TransactionService::root_of(&half.properties, half.queue_offset);
        let (real_topic, born_ms) = (
            half.properties.get(keys::REAL_TOPIC).cloned().unwrap_or_default(),
            half.born_timestamp,
        );
        if !self.transactions.decide(root, crate::now_ms()) {
            return Ok(Ended::AlreadyDecided);
        }
        if commit && let Err(e) = self.store_committed(half, req.commit_log_offset).await {
            self.transactions.undecide(root);
            return Err(e);
        }
        self.store_op(root).await?;
        self.stats.traffic.transaction_ended(&real_topic, commit, born_ms, crate::now_ms());
        Ok(if commit { Ended::Committed } else { Ended::RolledBack })
    }

    /// The half message in its real topic and queue, as a committed transaction's message.
    async fn store_committed(&self, half: MessageExt, commit_log_offset: i64) -> Result<(), BrokerError> {
        let Some(topic) = half.properties.get(keys::REAL_TOPIC).cloned() else {
            return Err(BrokerError::Internal("the half message has no REAL_TOPIC".into()));
        };
        let queue_id = half
            .properties
            .get(keys::REAL_QUEUE_ID)
            .and_then(|q| q.parse::<i32>().ok())
            .ok_or_else(|| BrokerError::Internal("the half message has no REAL_QID".into()))?;
        let mut m = MessageExt {
            topic,
            queue_id,
            prepared_transaction_offset: commit_log_offset,
            ..self.stored_again(half)
        };
        m.sys_flag = (m.sys_flag & !sys_flag::TRANSACTION_TYPE_MASK) | sys_flag::TRANSACTION_COMMIT_TYPE;
        for key in [
            keys::TRANSACTION_PREPARED,
            keys::REAL_TOPIC,
            keys::REAL_QUEUE_ID,
            keys::TRANSACTION_CHECK_TIMES,
            keys::TRANSACTION_PREPARED_QUEUE_OFFSET,
        ] {
            m.properties.shift_remove(key);
        }
        self.commit(self.prepared(m, false)?).await.map(|_| ())
    }

    /// The op record that makes the decision on `root` durable.
    async fn store_op(&self, root: i64) -> Result<(), BrokerError> {
        let mut op = MessageExt {
            topic: OP_TOPIC.to_owned(),
            born_timestamp: crate::now_ms(),
            born_host: self.settings.store_host,
            store_host: self.settings.store_host,
            body: root.to_string().into_bytes().into(),
            ..MessageExt::default()
        };
        op.properties.insert(keys::TAGS.to_owned(), OP_TAG.to_owned());
        self.commit(self.prepared_in_place(op)?).await.map(|_| ())
    }

    /// Stores `half` again at the end of the half queue with its check count, naming its root;
    /// returns the copy as stored (its offsets filled in).
    ///
    /// # Errors
    /// This broker takes no writes now, or the append fails.
    pub async fn renew_half(&self, half: MessageExt, root: i64, checks: u32) -> Result<MessageExt, BrokerError> {
        self.check_writable()?;
        let mut copy = MessageExt {
            topic: HALF_TOPIC.to_owned(),
            reconsume_times: half.reconsume_times,
            ..self.stored_again(half)
        };
        copy.properties.insert(keys::TRANSACTION_CHECK_TIMES.to_owned(), checks.to_string());
        copy.properties
            .insert(keys::TRANSACTION_PREPARED_QUEUE_OFFSET.to_owned(), root.to_string());
        let stored = self.commit(self.prepared_in_place(copy)?).await?;
        let (_, offset) = decode_offset_msg_id(&stored.msg_id)
            .map_err(|e| BrokerError::Internal(format!("the stored copy's id {}: {e}", stored.msg_id)))?;
        self.record_at(offset).await
    }

    /// Gives up a half message checked `transactionCheckMax` times: it is kept in
    /// `TRANS_CHECK_MAX_TIME_TOPIC` for an operator, and never delivered.
    ///
    /// # Errors
    /// This broker takes no writes now, or the append fails.
    pub async fn give_up_half(&self, half: MessageExt) -> Result<(), BrokerError> {
        self.check_writable()?;
        let real_topic = half.properties.get(keys::REAL_TOPIC).cloned().unwrap_or_default();
        let kept = MessageExt {
            topic: CHECK_MAX_TOPIC.to_owned(),
            ..self.stored_again(half)
        };
        self.commit(self.prepared_in_place(kept)?).await?;
        self.stats.traffic.half_discarded(&real_topic);
        Ok(())
    }
}
