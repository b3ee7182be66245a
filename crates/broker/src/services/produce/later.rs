//! Messages stored a second time, later: a consumer's send-back (CONSUMER_SEND_MSG_BACK) to its
//! group's retry topic or dead-letter queue, and a delayed message's move from the schedule
//! topic to its real queue. Both go through the same append and durability wait as a send.

use petrel_protocol::message::MessageExt;
use petrel_protocol::msgid::create_offset_msg_id;
use petrel_protocol::properties::keys;

use super::{Counted, Prepared, ProduceService};
use crate::services::BrokerError;
use crate::services::timer::{ROLLED_QUEUE, TIMER_TOPIC};
use crate::services::topics::RETRY_GROUP_TOPIC_PREFIX;
use crate::traffic::MessageKind;

/// CONSUMER_SEND_MSG_BACK, as any front end hands it over.
#[derive(Clone)]
pub struct SendBackRequest {
    /// The consumed message's commit-log offset.
    pub offset: i64,
    /// Whether the caller may read the topic of the record found at `offset`: an offset is any
    /// record's, and its copy in the group's retry topic would be the caller's to read.
    pub may_read: crate::services::TopicCheck,
    /// The consumer group sending the message back, whose retry topic or DLQ takes it.
    pub group: String,
    /// 0: the broker picks (3 + times already retried); negative: straight to the DLQ.
    pub delay_level: i32,
    /// The client's limit; `None`: the group's (RocketMQ's `retryMaxTimes`).
    pub max_reconsume_times: Option<i32>,
}

/// What became of a due delayed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Stored in its real topic and queue.
    Stored,
    /// Not deliverable (no real topic or queue recorded); passed over, and why.
    Skipped(String),
}

/// What a consumer group's settings say about its retries (`retryMaxTimes`, `retryQueueNums`).
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries before the DLQ when the request does not say.
    pub retry_max_times: i32,
    /// Queues of the retry topic when it is created.
    pub retry_queue_nums: i32,
}

impl ProduceService {
    /// Stores the message at `req.offset` again for `req.group`: in `%RETRY%<group>` at its
    /// delay level, or in `%DLQ%<group>` once it was retried `max_reconsume_times` times.
    ///
    /// # Errors
    /// This broker takes no writes now, no record starts at the offset, the retry or DLQ topic
    /// cannot be created, or the append fails.
    pub async fn send_back(&self, req: SendBackRequest, group: RetryPolicy) -> Result<(), BrokerError> {
        self.check_writable()?;
        let mut m = self.record_at(req.offset).await?;
        (req.may_read)(&m.topic)?;
        let retry_created = self.topics.ensure_retry(&req.group, group.retry_queue_nums)?;
        if !m.properties.contains_key(keys::RETRY_TOPIC) {
            m.properties.insert(keys::RETRY_TOPIC.to_owned(), m.topic.clone());
        }
        if m.properties.get(keys::ORIGIN_MESSAGE_ID).is_none_or(|id| id.trim().is_empty()) {
            let id = create_offset_msg_id(m.store_host, m.commit_log_offset);
            m.properties.insert(keys::ORIGIN_MESSAGE_ID.to_owned(), id);
        }
        m.properties.insert(keys::WAIT_STORE_MSG_OK.to_owned(), "false".to_owned());
        let max = req.max_reconsume_times.unwrap_or(group.retry_max_times);
        let mut dead_letter = None;
        let (topic, queue_id, created) = if m.reconsume_times >= max || req.delay_level < 0 {
            m.properties.shift_remove(keys::DELAY_TIME_LEVEL);
            let (dlq, created) = self.topics.ensure_dlq(&req.group)?;
            // Labelled with the topic the message was first sent to, as RocketMQ labels it.
            let origin = m.properties.get(keys::RETRY_TOPIC).unwrap_or(&m.topic).clone();
            dead_letter = Some((req.group.clone(), origin));
            (dlq.topic_name, 0, created)
        } else {
            let level = if req.delay_level == 0 {
                3 + m.reconsume_times
            } else {
                req.delay_level
            };
            m.properties.insert(keys::DELAY_TIME_LEVEL.to_owned(), level.to_string());
            let retry = format!("{RETRY_GROUP_TOPIC_PREFIX}{}", req.group);
            // Spread over the retry topic's queues (RocketMQ picks one at random).
            let queues = self.topics.get(&retry).map_or(1, |t| t.write_queue_nums.max(1));
            let queue_id = i32::try_from(req.offset.rem_euclid(i64::from(queues))).unwrap_or(0);
            (retry, queue_id, retry_created)
        };
        let again = MessageExt {
            topic,
            queue_id,
            reconsume_times: m.reconsume_times.saturating_add(1),
            ..self.stored_again(m)
        };
        let mut prepared = self.prepared(again, created)?;
        prepared.counted.dead_letter = dead_letter;
        self.commit(prepared).await.map(|_| ())
    }

    /// Stores a due delayed or timer message (read from the schedule or timer topic) in its real
    /// topic and queue. A timer message keeps `TIMER_OUT_MS` (so it is not held again) and gains
    /// RocketMQ's `TIMER_ENQUEUE_MS` and `TIMER_DEQUEUE_MS`, and loses `REAL_TOPIC` / `REAL_QID`.
    ///
    /// # Errors
    /// This broker takes no writes now, or the append fails: the message stays due.
    pub async fn deliver_scheduled(&self, mut m: MessageExt) -> Result<Delivered, BrokerError> {
        self.check_writable()?;
        let Some(topic) = m.properties.get(keys::REAL_TOPIC).cloned() else {
            return Ok(Delivered::Skipped("no REAL_TOPIC property".into()));
        };
        let Some(queue_id) = m.properties.get(keys::REAL_QUEUE_ID).and_then(|q| q.parse::<i32>().ok()) else {
            return Ok(Delivered::Skipped("no REAL_QID property".into()));
        };
        let timer = m.properties.contains_key(keys::TIMER_OUT_MS);
        if timer {
            m.properties
                .insert(keys::TIMER_ENQUEUE_MS.to_owned(), m.store_timestamp.to_string());
            m.properties.insert(keys::TIMER_DEQUEUE_MS.to_owned(), crate::now_ms().to_string());
            m.properties.shift_remove(keys::REAL_TOPIC);
            m.properties.shift_remove(keys::REAL_QUEUE_ID);
        }
        let mut now = MessageExt {
            topic,
            queue_id,
            reconsume_times: m.reconsume_times,
            ..self.stored_again(m)
        };
        now.properties.shift_remove(keys::DELAY_TIME_LEVEL);
        let real_topic = now.topic.clone();
        let mut prepared = self.prepared(now, false)?;
        if !timer {
            // RocketMQ counts a delay level's delivery as a message in, of the delay kind.
            prepared.counted.kind = Some(MessageKind::Delay);
        }
        self.commit(prepared).await?;
        if timer {
            self.stats.traffic.timer_dequeued(&real_topic);
        }
        Ok(Delivered::Stored)
    }

    /// Stores a timer message again at the end of the timer topic's rolled queue, due at the
    /// same time, `TIMER_ROLL_TIMES` + 1.
    ///
    /// # Errors
    /// This broker takes no writes now, or the append fails: the old copy stays pending.
    pub async fn roll_timer(&self, m: MessageExt) -> Result<(), BrokerError> {
        self.check_writable()?;
        let mut again = MessageExt {
            topic: TIMER_TOPIC.to_owned(),
            queue_id: ROLLED_QUEUE,
            reconsume_times: m.reconsume_times,
            ..self.stored_again(m)
        };
        let rolls = again
            .properties
            .get(keys::TIMER_ROLL_TIMES)
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        again.properties.insert(keys::TIMER_ROLL_TIMES.to_owned(), (rolls + 1).to_string());
        self.commit(self.prepared_in_place(again)?).await.map(|_| ())
    }

    /// `m` encoded for [`ProduceService::commit`] exactly where it says (a system topic).
    pub(super) fn prepared_in_place(&self, m: MessageExt) -> Result<Prepared, BrokerError> {
        let mut records = bytes::BytesMut::with_capacity(m.body.len() + 256);
        self.encode(&m, &mut records)?;
        Ok(Prepared {
            topic: m.topic,
            queue_id: m.queue_id,
            answer_queue_id: m.queue_id,
            records,
            count: 1,
            uniq_key: None,
            topic_created: false,
            counted: Counted::default(),
            lmq: Vec::new(),
        })
    }

    /// The fields a message keeps when it is stored again by this broker.
    pub(super) fn stored_again(&self, m: MessageExt) -> MessageExt {
        MessageExt {
            flag: m.flag,
            sys_flag: m.sys_flag,
            born_timestamp: m.born_timestamp,
            born_host: m.born_host,
            store_host: self.settings.store_host,
            body: m.body,
            properties: m.properties,
            ..MessageExt::default()
        }
    }

    /// `m` encoded for [`ProduceService::commit`], routed as a send would be (delay levels).
    pub(super) fn prepared(&self, m: MessageExt, topic_created: bool) -> Result<Prepared, BrokerError> {
        let answer_queue_id = m.queue_id;
        let super::Routed {
            records,
            stored_at: (topic, queue_id),
            route,
            lmq,
        } = self.encode_routed(m)?;
        Ok(Prepared {
            topic,
            queue_id,
            answer_queue_id,
            records,
            count: 1,
            uniq_key: None,
            topic_created,
            counted: Counted {
                route,
                ..Counted::default()
            },
            lmq,
        })
    }

    /// The message whose record starts at commit-log `offset`.
    pub(super) async fn record_at(&self, offset: i64) -> Result<MessageExt, BrokerError> {
        let record = crate::services::record_at(&self.store, &self.pool, offset)
            .await?
            .ok_or_else(|| BrokerError::Internal(format!("look message by offset failed, {offset}")))?;
        let (m, _) = MessageExt::decode(&record).map_err(|source| BrokerError::Record {
            what: format!("look message by offset failed, {offset}"),
            source,
        })?;
        Ok(m)
    }
}
