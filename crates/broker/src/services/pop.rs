//! `PopService`: RocketMQ 5's POP consumption. The broker, not the client, hands out messages:
//! a pop takes the next messages of a queue (or of any queue) for a group and makes them
//! invisible to the group's other pops for a while; an ack ends a message, a change of
//! invisible time (a consumer's RECONSUME_LATER) moves when it comes back, and a message not
//! acked in time becomes visible again and is popped once more, with its reconsume count raised.
//! Any number of consumers of one group share one queue.
//!
//! Our own design: per (group, topic, queue) the next offset never popped and the popped
//! messages not yet acked (offset → pop time, when visible again, times popped before), in
//! memory. The group's committed offset of the queue is the lowest offset still in flight (or
//! the next one), so `consumerProgress` shows a pop group's lag, and a restart hands out again
//! everything not acked: at least once, as RocketMQ promises.
//!
//! Also here: which groups read which topics by POP (`mqadmin setConsumeMode`, kept in
//! `config/messageRequestMode.json`), and the broker-side balancing (QUERY_ASSIGNMENT) that
//! clients with `setClientRebalance(false)` ask for.
//!
//! Owns: pop state and request modes. Must never: hand one message to two pops while it is
//! invisible, keep more than `MAX_INFLIGHT_PER_QUEUE` messages in flight per group and queue, or
//! hold a pop past `MAX_POP_POLL`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use petrel_protocol::message::{RecordView, set_reconsume_times};
use petrel_protocol::model::{MessageQueue, MessageRequestMode, SetMessageRequestModeRequestBody};
use petrel_store::{GetStatus, MessageFilter, MessageStore};
use serde::{Deserialize, Serialize};

use super::BrokerError;
use super::groups::GroupService;
use super::offsets::OffsetService;
use super::topics::{RETRY_GROUP_TOPIC_PREFIX, TopicService};
use crate::long_poll::LongPoll;
use crate::persist::{Coalesced, Job, blocking, read_if_exists, write_atomically};
use crate::traffic::ReviveKind;

/// Messages one group may have popped and not acked per queue; past it the queue's new
/// messages wait for acks.
pub const MAX_INFLIGHT_PER_QUEUE: usize = 4096;
/// Messages one pop returns at most.
pub const MAX_POP_BATCH: usize = 32;
/// Longest hold of a pop that finds nothing (the client gives up at its poll time + 10 s).
pub const MAX_POP_POLL: Duration = Duration::from_secs(25);
/// Longest invisible time a pop or a change may ask for.
pub const MAX_INVISIBLE_TIME_MS: i64 = 12 * 3600 * 1000;
/// Request-mode entries (topic, group) the broker keeps.
pub const MAX_REQUEST_MODES: usize = 65_536;
/// How often a held pop looks again for messages that became visible.
const REVIVE_LOOK_INTERVAL: Duration = Duration::from_millis(200);

/// A popped message not yet acked.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    pop_time_ms: i64,
    visible_at_ms: i64,
    reconsume_times: i32,
}

#[derive(Default)]
struct QueuePop {
    /// The next offset never popped; `None` until the first pop.
    next: Option<i64>,
    inflight: BTreeMap<i64, Attempt>,
    committed: Option<i64>,
}

impl QueuePop {
    /// What the group has consumed of the queue: everything below the lowest offset in flight.
    fn consumed_to(&self) -> Option<i64> {
        self.inflight.keys().next().copied().or(self.next)
    }
}

/// (group, topic, queue id).
type QueueKey = (String, String, i32);

/// A pop, as the front end hands it over.
pub struct PopRequest {
    /// The consumer group popping.
    pub group: String,
    /// The topic popped from.
    pub topic: String,
    /// -1: any queue.
    pub queue_id: i32,
    /// Messages the client wants at most; clamped to 1..=[`MAX_POP_BATCH`].
    pub max_msgs: usize,
    /// How long the popped messages stay invisible to the group's other pops; must be 1 to
    /// [`MAX_INVISIBLE_TIME_MS`].
    pub invisible_time_ms: i64,
    /// How long to hold the pop when there is nothing yet, at most [`MAX_POP_POLL`]; `None`:
    /// not at all.
    pub poll: Option<Duration>,
    /// A new group starts at the queue's end (`initMode` 1) rather than its first message.
    pub init_at_end: bool,
    /// What the pop keeps (the subscription's tags or SQL92 selector); `None` for everything.
    pub filter: Option<Arc<dyn MessageFilter>>,
    /// An orderly pop (RocketMQ's `order=true`, a FIFO consumer group): a queue with a message
    /// in flight hands out nothing more until it is acked or comes back, and what comes back
    /// comes first, so each queue is consumed in order.
    pub orderly: bool,
}

/// What a pop found: stored records (revived ones with their reconsume count raised).
#[derive(Debug, Default)]
pub struct Popped {
    /// When the pop happened; an ack or a change of invisible time must name it.
    pub pop_time_ms: i64,
    /// The popped records, one after another as stored.
    pub body: Vec<u8>,
    /// How many records `body` holds.
    pub count: usize,
    /// How many of them were handed out again after their invisible time passed.
    pub revived: usize,
    /// Messages still waiting in the queues looked at.
    pub rest: i64,
}

/// What [`PopService::backlog`] counts.
#[derive(Debug, Default, Clone, Copy)]
pub struct PopBacklog {
    /// (group, topic, queue) entries with pop state.
    pub queues: usize,
    /// Messages whose invisible time passed and that no pop took again yet.
    pub visible_again: usize,
    /// When the earliest of those became visible, ms since the epoch.
    pub earliest_visible_ms: Option<i64>,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModeFile {
    #[serde(default)]
    message_request_mode_map: BTreeMap<String, SetMessageRequestModeRequestBody>,
}

/// POP consumption: hands out messages per group and queue and takes their acks; keeps the
/// request modes and answers broker-side balancing.
pub struct PopService {
    store: Arc<MessageStore>,
    topics: Arc<TopicService>,
    groups: Arc<GroupService>,
    offsets: Arc<OffsetService>,
    long_poll: Arc<LongPoll>,
    queues: Mutex<HashMap<QueueKey, Arc<Mutex<QueuePop>>>>,
    modes: RwLock<BTreeMap<String, SetMessageRequestModeRequestBody>>,
    path: PathBuf,
    persist: Arc<Coalesced>,
    rotation: AtomicUsize,
    /// Where pops, acks and revivals are counted for the metrics.
    stats: Arc<crate::BrokerStats>,
    /// Where a look that may read the cold tier runs (see [`PopService::may_read_cold`]).
    pool: Option<Arc<crate::store_pool::StorePool>>,
}

fn mode_key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl PopService {
    /// Loads the request modes.
    ///
    /// # Errors
    /// `messageRequestMode.json` exists but does not parse.
    pub fn open(
        root: &std::path::Path,
        store: Arc<MessageStore>,
        topics: Arc<TopicService>,
        groups: Arc<GroupService>,
        offsets: Arc<OffsetService>,
        long_poll: Arc<LongPoll>,
    ) -> std::io::Result<PopService> {
        let path = root.join("config").join("messageRequestMode.json");
        let file: ModeFile = match read_if_exists(&path)? {
            Some(bytes) => petrel_protocol::model::from_json(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?,
            None => ModeFile::default(),
        };
        Ok(PopService {
            store,
            topics,
            groups,
            offsets,
            long_poll,
            queues: Mutex::new(HashMap::new()),
            modes: RwLock::new(file.message_request_mode_map),
            path,
            persist: Coalesced::new("messageRequestMode.json"),
            rotation: AtomicUsize::new(0),
            stats: Arc::default(),
            pool: None,
        })
    }

    /// The same service running its looks that may read the cold tier on `pool`.
    #[must_use]
    pub fn with_pool(mut self, pool: Arc<crate::store_pool::StorePool>) -> PopService {
        self.pool = Some(pool);
        self
    }

    /// The same service counting into `stats` (the broker's).
    #[must_use]
    pub fn with_stats(mut self, stats: Arc<crate::BrokerStats>) -> PopService {
        self.stats = stats;
        self
    }

    /// The background writer of the request modes, and its job.
    pub fn persister(self: &Arc<Self>) -> (Arc<Coalesced>, Job) {
        let me = Arc::downgrade(self);
        let job = move || match me.upgrade() {
            Some(pop) => write_atomically(&pop.path, &pop.modes_json()).map_err(BrokerError::io("writing the message request modes")),
            None => Ok(()),
        };
        (self.persist.clone(), blocking(Arc::new(job)))
    }

    /// The request modes as `messageRequestMode.json` holds them (GET_ALL_MESSAGE_REQUEST_MODE).
    #[must_use]
    pub fn modes_json(&self) -> Vec<u8> {
        let file = ModeFile {
            message_request_mode_map: self.modes.read().clone(),
        };
        serde_json::to_vec(&file).unwrap_or_default()
    }

    /// SET_MESSAGE_REQUEST_MODE: how `group` reads `topic` from now on.
    ///
    /// # Errors
    /// An unknown topic, a retry topic (always pulled), or the bound.
    pub fn set_mode(&self, body: SetMessageRequestModeRequestBody) -> Result<(), BrokerError> {
        if self.topics.get(&body.topic).is_none() {
            return Err(BrokerError::topic_not_exist(&body.topic));
        }
        if body.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(BrokerError::InvalidParameter("retry topic is not allowed to set mode".into()));
        }
        super::validate_group_name(&body.consumer_group)?;
        let key = mode_key(&body.topic, &body.consumer_group);
        let mut modes = self.modes.write();
        if !modes.contains_key(&key) && modes.len() >= MAX_REQUEST_MODES {
            return Err(BrokerError::LimitReached(format!(
                "{MAX_REQUEST_MODES} topic and group request modes are set already"
            )));
        }
        tracing::info!(topic = %body.topic, group = %body.consumer_group, mode = ?body.mode, "message request mode set");
        modes.insert(key, body);
        drop(modes);
        self.persist.request();
        Ok(())
    }

    /// A slave takes its master's request modes (up to `MAX_REQUEST_MODES`).
    ///
    /// # Errors
    /// The master's table does not parse.
    pub fn replace_modes_from_master(&self, json: &[u8]) -> Result<(), BrokerError> {
        let master: ModeFile =
            petrel_protocol::model::from_json(json).map_err(BrokerError::corrupt("the master's message request modes"))?;
        let table: BTreeMap<String, SetMessageRequestModeRequestBody> =
            master.message_request_mode_map.into_iter().take(MAX_REQUEST_MODES).collect();
        let mut modes = self.modes.write();
        if *modes != table {
            *modes = table;
            drop(modes);
            self.persist.request();
        }
        Ok(())
    }

    /// How `group` reads `topic`: as set, else pull (retry topics are always pulled).
    #[must_use]
    pub fn mode(&self, topic: &str, group: &str) -> (MessageRequestMode, i32) {
        if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return (MessageRequestMode::Pull, 0);
        }
        self.modes
            .read()
            .get(&mode_key(topic, group))
            .map_or((MessageRequestMode::Pull, 0), |m| (m.mode, m.pop_share_queue_num))
    }

    /// QUERY_ASSIGNMENT: the queues of `topic` on this broker that client `client_id` of `group`
    /// reads, and how; `None` for an unknown topic (the client keeps what it has).
    #[must_use]
    pub fn assignment(
        &self,
        topic: &str,
        group: &str,
        client_id: &str,
        broadcasting: bool,
        broker_name: &str,
    ) -> Option<(Vec<MessageQueue>, MessageRequestMode)> {
        let config = self.topics.get(topic)?;
        let all: Vec<MessageQueue> = (0..config.read_queue_nums)
            .map(|queue_id| MessageQueue {
                broker_name: broker_name.to_owned(),
                queue_id,
                topic: topic.to_owned(),
            })
            .collect();
        let (mode, share) = self.mode(topic, group);
        if broadcasting {
            return Some((all, mode));
        }
        let mut cids = self.groups.consumer_ids(group);
        if !cids.iter().any(|c| c == client_id) {
            cids.push(client_id.to_owned());
            cids.sort();
        }
        let queues = match mode {
            MessageRequestMode::Pull => allocate_averagely(&all, &cids, client_id),
            MessageRequestMode::Pop => allocate_for_pop(&all, &cids, client_id, share),
        };
        Some((queues, mode))
    }

    fn state(&self, group: &str, topic: &str, queue_id: i32) -> Arc<Mutex<QueuePop>> {
        self.queues
            .lock()
            .entry((group.to_owned(), topic.to_owned(), queue_id))
            .or_default()
            .clone()
    }

    fn existing_state(&self, group: &str, topic: &str, queue_id: i32) -> Option<Arc<Mutex<QueuePop>>> {
        self.queues.lock().get(&(group.to_owned(), topic.to_owned(), queue_id)).cloned()
    }

    /// POP_MESSAGE: up to `max_msgs` messages, held up to the poll time when there are none.
    ///
    /// # Errors
    /// An unknown topic or group, no read permission, a bad queue id or invisible time.
    pub async fn pop(self: &Arc<Self>, req: PopRequest) -> Result<Popped, BrokerError> {
        let topic = self.topics.readable(&req.topic, "peeking")?;
        if req.queue_id >= topic.read_queue_nums || req.queue_id < -1 {
            return Err(BrokerError::InvalidParameter(format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                req.queue_id, req.topic, topic.read_queue_nums
            )));
        }
        if !(1..=MAX_INVISIBLE_TIME_MS).contains(&req.invisible_time_ms) {
            return Err(BrokerError::InvalidParameter(format!(
                "invisibleTime {} ms is outside 1..={MAX_INVISIBLE_TIME_MS}",
                req.invisible_time_ms
            )));
        }
        self.groups.require_known(&req.group)?;
        self.groups.check_consume(&req.group)?;
        let queues: Vec<i32> = if req.queue_id >= 0 {
            vec![req.queue_id]
        } else {
            // Start at a different queue each time, so that no queue waits behind the others.
            let n = usize::try_from(topic.read_queue_nums.max(1)).unwrap_or(1);
            let start = self.rotation.fetch_add(1, Ordering::Relaxed) % n;
            (0..n).map(|i| i32::try_from((start + i) % n).unwrap_or(0)).collect()
        };
        let deadline = tokio::time::Instant::now() + req.poll.unwrap_or_default().min(MAX_POP_POLL);
        let (req, queues) = (Arc::new(req), Arc::new(queues));
        loop {
            let started = std::time::Instant::now();
            let popped = match &self.pool {
                // A read from the cold tier may wait up to its deadline: not on a runtime worker.
                Some(pool) if self.may_read_cold(&req, &queues) => {
                    let (me, req, queues) = (self.clone(), req.clone(), queues.clone());
                    pool.run(move || me.pop_once(&req, &queues))?.await?
                }
                _ => self.pop_once(&req, &queues),
            };
            let traffic = &self.stats.traffic;
            traffic
                .pop_scan
                .record(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
            if popped.count > 0 {
                // A message handed out again is a retry, as RocketMQ reads it from the retry topic.
                let retry_topic = req.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX);
                let (count, revived) = (popped.count as u64, popped.revived as u64);
                let bytes_each = popped.body.len() as u64 / count;
                traffic.read(
                    &req.topic,
                    &req.group,
                    Some(retry_topic),
                    count - revived,
                    (count - revived) * bytes_each,
                );
                traffic.read(&req.topic, &req.group, Some(true), revived, revived * bytes_each);
                traffic.revived(&req.group, &req.topic, revived);
                traffic.revive_log(&req.group, &req.topic, ReviveKind::Checkpoint, count);
            }
            if popped.count > 0 || tokio::time::Instant::now() >= deadline {
                return Ok(popped);
            }
            let place = self.long_poll.enter()?;
            let wait = deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .min(REVIVE_LOOK_INTERVAL);
            self.long_poll.wait(&place, &req.topic, -1, wait, || false).await;
        }
    }

    /// Whether one look may read the cold tier: a queue's lowest offset it would read (the
    /// oldest in flight, the next new one, or where a first pop may start) is no longer on disk.
    fn may_read_cold(&self, req: &PopRequest, queues: &[i32]) -> bool {
        // Without a tier (most brokers) nothing is looked up on the POP path.
        self.store.has_cold_tier()
            && queues.iter().any(|&queue_id| {
                let lowest = match self.existing_state(&req.group, &req.topic, queue_id) {
                    Some(state) => {
                        let st = state.lock();
                        st.inflight.keys().next().copied().into_iter().chain(st.next).min()
                    }
                    None => Some(self.store.queue_offsets(&req.topic, queue_id).0),
                };
                lowest.is_some_and(|offset| self.store.is_cold(&req.topic, queue_id, offset))
            })
    }

    /// One look at each queue: messages visible again first, then new ones.
    fn pop_once(&self, req: &PopRequest, queues: &[i32]) -> Popped {
        let now = crate::now_ms();
        let mut out = Popped {
            pop_time_ms: now,
            ..Popped::default()
        };
        let max = req.max_msgs.clamp(1, MAX_POP_BATCH);
        for &queue_id in queues {
            let state = self.state(&req.group, &req.topic, queue_id);
            let mut st = state.lock();
            self.start_if_new(&mut st, req, queue_id);
            if req.orderly && st.inflight.values().any(|a| a.visible_at_ms > now) {
                // Its batch in flight holds the queue: the next message waits behind it.
                continue;
            }
            if out.count < max {
                self.pop_visible_again(&mut st, req, queue_id, max, &mut out);
            }
            if out.count < max {
                self.pop_new(&mut st, req, queue_id, max, &mut out);
            }
            let (_, end) = self.store.queue_offsets(&req.topic, queue_id);
            out.rest += (end - st.next.unwrap_or(end)).max(0);
            self.commit(&req.group, &req.topic, queue_id, &mut st);
        }
        out
    }

    /// A group's first pop of a queue starts at its committed offset, else at the queue's
    /// first message or its end.
    fn start_if_new(&self, st: &mut QueuePop, req: &PopRequest, queue_id: i32) {
        if st.next.is_some() {
            return;
        }
        let (min, max) = self.store.queue_offsets(&req.topic, queue_id);
        let start = match self.offsets.query(&req.group, &req.topic, queue_id) {
            Some(committed) => committed.clamp(min, max),
            None if req.init_at_end => max,
            None => min,
        };
        st.next = Some(start);
        st.committed = self.offsets.query(&req.group, &req.topic, queue_id);
    }

    /// Messages whose invisible time passed without an ack: popped again, one more reconsume.
    fn pop_visible_again(&self, st: &mut QueuePop, req: &PopRequest, queue_id: i32, max: usize, out: &mut Popped) {
        let now = out.pop_time_ms;
        let due: Vec<i64> = st
            .inflight
            .iter()
            // Popped again at a later millisecond than before, so that the old handle is stale.
            .filter(|(_, a)| a.visible_at_ms <= now && a.pop_time_ms < now)
            .map(|(offset, _)| *offset)
            .take(max - out.count)
            .collect();
        for offset in due {
            let got = self.store.get_messages(&req.topic, queue_id, offset, 1, None);
            if got.status == GetStatus::ColdUnavailable {
                // In the cold tier, which did not answer now: kept, handed out on a later pop.
                break;
            }
            if got.status != GetStatus::Found || got.message_count != 1 {
                // Gone with retention (or the queue was deleted): nothing to hand out again.
                st.inflight.remove(&offset);
                continue;
            }
            let attempt = st.inflight.get_mut(&offset).expect("collected from the map just now");
            attempt.reconsume_times = attempt.reconsume_times.saturating_add(1);
            attempt.pop_time_ms = now;
            attempt.visible_at_ms = now.saturating_add(req.invisible_time_ms);
            let mut record = got.body;
            let patched = set_reconsume_times(&mut record, attempt.reconsume_times);
            assert!(patched, "a record the store returned holds its fixed fields");
            out.body.extend_from_slice(&record);
            out.count += 1;
            out.revived += 1;
        }
    }

    /// New messages from the queue's next offset, up to the batch and the in-flight bound.
    fn pop_new(&self, st: &mut QueuePop, req: &PopRequest, queue_id: i32, max: usize, out: &mut Popped) {
        let room = (max - out.count).min(MAX_INFLIGHT_PER_QUEUE.saturating_sub(st.inflight.len()));
        let Some(next) = st.next.filter(|_| room > 0) else {
            return;
        };
        let got = self.store.get_messages(&req.topic, queue_id, next, room, req.filter.as_deref());
        match got.status {
            GetStatus::Found => {
                let mut pos = 0;
                while pos < got.body.len() {
                    let Ok(record) = RecordView::parse(&got.body[pos..]) else {
                        break;
                    };
                    let attempt = Attempt {
                        pop_time_ms: out.pop_time_ms,
                        visible_at_ms: out.pop_time_ms.saturating_add(req.invisible_time_ms),
                        reconsume_times: record.reconsume_times,
                    };
                    st.inflight.insert(record.queue_offset, attempt);
                    pos += record.size_bytes;
                }
                out.body.extend_from_slice(&got.body);
                out.count += got.message_count;
                st.next = Some(got.next_begin_offset);
            }
            GetStatus::NoMatchedMessage | GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly => {
                st.next = Some(got.next_begin_offset);
            }
            _ => {}
        }
    }

    /// Commits what the group consumed of the queue, when it moved.
    fn commit(&self, group: &str, topic: &str, queue_id: i32, st: &mut QueuePop) {
        let Some(consumed) = st.consumed_to() else {
            return;
        };
        if st.committed == Some(consumed) {
            return;
        }
        if self.offsets.commit(group, topic, queue_id, consumed).is_ok() {
            st.committed = Some(consumed);
        }
    }

    /// ACK_MESSAGE: the message popped at `pop_time_ms` is consumed. False when no such pop is
    /// in flight (acked already, or popped again since by another consumer).
    pub fn ack(&self, group: &str, topic: &str, queue_id: i32, offset: i64, pop_time_ms: i64) -> bool {
        let Some(state) = self.existing_state(group, topic, queue_id) else {
            return false;
        };
        let mut st = state.lock();
        let current = st.inflight.get(&offset).is_some_and(|a| a.pop_time_ms == pop_time_ms);
        if current {
            st.inflight.remove(&offset);
            self.commit(group, topic, queue_id, &mut st);
            self.stats.traffic.revive_log(group, topic, ReviveKind::Ack, 1);
        }
        current
    }

    /// CHANGE_MESSAGE_INVISIBLETIME: the popped message becomes visible again `invisible_time_ms`
    /// from now; returns its new pop time (its new handle).
    ///
    /// # Errors
    /// No such pop in flight, or a bad invisible time.
    pub fn change_invisible_time(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        pop_time_ms: i64,
        invisible_time_ms: i64,
    ) -> Result<i64, BrokerError> {
        if !(0..=MAX_INVISIBLE_TIME_MS).contains(&invisible_time_ms) {
            return Err(BrokerError::InvalidParameter(format!(
                "invisibleTime {invisible_time_ms} ms is outside 0..={MAX_INVISIBLE_TIME_MS}"
            )));
        }
        let state = self.existing_state(group, topic, queue_id);
        let mut st = state.as_ref().map(|s| s.lock());
        let attempt = st
            .as_mut()
            .and_then(|st| st.inflight.get_mut(&offset))
            .filter(|a| a.pop_time_ms == pop_time_ms)
            .ok_or_else(|| {
                BrokerError::InvalidParameter(format!(
                    "no message of {topic} queue {queue_id} at offset {offset} popped at {pop_time_ms} is in flight for {group}"
                ))
            })?;
        // The new handle differs from the old one even within one millisecond.
        let now = crate::now_ms().max(attempt.pop_time_ms + 1);
        attempt.pop_time_ms = now;
        attempt.visible_at_ms = now.saturating_add(invisible_time_ms);
        Ok(now)
    }

    /// Messages popped and not acked, over all groups and queues (a gauge).
    #[must_use]
    pub fn inflight(&self) -> usize {
        let queues: Vec<Arc<Mutex<QueuePop>>> = self.queues.lock().values().cloned().collect();
        queues.iter().map(|q| q.lock().inflight.len()).sum()
    }

    /// POP state held for the metrics: queues with pop state, messages whose invisible time
    /// passed and that no pop took again yet, and the earliest time one of those became visible.
    #[must_use]
    pub fn backlog(&self, now_ms: i64) -> PopBacklog {
        let queues: Vec<Arc<Mutex<QueuePop>>> = self.queues.lock().values().cloned().collect();
        let mut backlog = PopBacklog {
            queues: queues.len(),
            ..PopBacklog::default()
        };
        for q in &queues {
            for a in q.lock().inflight.values().filter(|a| a.visible_at_ms <= now_ms) {
                backlog.visible_again += 1;
                backlog.earliest_visible_ms = Some(backlog.earliest_visible_ms.map_or(a.visible_at_ms, |e| e.min(a.visible_at_ms)));
            }
        }
        backlog
    }

    /// Forgets the pop state of a deleted topic.
    pub fn remove_topic(&self, topic: &str) {
        self.queues.lock().retain(|(_, t, _), _| t != topic);
        self.modes.write().retain(|_, m| m.topic != topic);
        self.persist.request();
    }
}

/// RocketMQ's `AllocateMessageQueueAveragely`: `client_id`'s share of `all` (sorted) among
/// `cids` (sorted).
#[must_use]
pub fn allocate_averagely(all: &[MessageQueue], cids: &[String], client_id: &str) -> Vec<MessageQueue> {
    let Some(index) = cids.iter().position(|c| c == client_id) else {
        return Vec::new();
    };
    let (n, c) = (all.len(), cids.len());
    if n == 0 {
        return Vec::new();
    }
    let rem = n % c;
    let average = if n <= c {
        1
    } else if rem > 0 && index < rem {
        n / c + 1
    } else {
        n / c
    };
    let start = if rem > 0 && index < rem {
        index * average
    } else {
        index * average + rem
    };
    let range = average.min(n.saturating_sub(start));
    (0..range).map(|i| all[(start + i) % n].clone()).collect()
}

/// RocketMQ's POP balancing: with no sharing number (or one at least the group's size less
/// one) every client pops every queue (queue id -1: the broker picks); else a client pops its
/// own share and the shares of the `share` clients after it.
#[must_use]
pub fn allocate_for_pop(all: &[MessageQueue], cids: &[String], client_id: &str, share: i32) -> Vec<MessageQueue> {
    let share = usize::try_from(share).unwrap_or(0);
    if share == 0 || share + 1 >= cids.len() {
        return all
            .first()
            .map(|q| MessageQueue { queue_id: -1, ..q.clone() })
            .into_iter()
            .collect();
    }
    let Some(index) = cids.iter().position(|c| c == client_id) else {
        return Vec::new();
    };
    let mut queues = allocate_averagely(all, cids, client_id);
    for i in 1..=share {
        queues.extend(allocate_averagely(all, cids, &cids[(index + i) % cids.len()]));
    }
    queues.sort();
    queues.dedup();
    queues
}

#[cfg(test)]
mod tests;
