//! The workload: producers sending synchronously with unique keys (retrying a failed send as
//! RocketMQ's client does), ordered producers each on a fixed queue (retrying the same message
//! until it is acknowledged, so their acknowledged sequence has no gap), and a consumer group
//! pulling and committing offsets. Every send attempt and every delivery is recorded for the
//! checker.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use petrel_client::client::QueueAddr;
use petrel_client::{Client, ClientError, PullResult};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader};
use petrel_protocol::properties::{Properties, keys};
use tokio::sync::watch;

pub const TOPIC: &str = "ChaosTopic";
pub const ORDERED_TOPIC: &str = "ChaosOrdered";
pub const QUEUES: i32 = 8;
const PRODUCER_GROUP: &str = "chaos-producer";
pub const CONSUMER_GROUP: &str = "chaos-consumer";
/// Attempts per unique-key message, as the Java client's `retryTimesWhenSendFailed = 2`.
const SEND_ATTEMPTS: u32 = 3;
/// Messages per pull.
const PULL_BATCH: i32 = 32;
/// How often a consumer commits its offsets (RocketMQ's client: 5 s).
const COMMIT_INTERVAL: Duration = Duration::from_secs(1);
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A message's identity: its producer and that producer's sequence number (the key
/// `c<producer>-<seq>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgId {
    pub producer: u32,
    pub seq: u64,
}

impl MsgId {
    pub fn key(self) -> String {
        format!("c{}-{}", self.producer, self.seq)
    }

    pub fn parse(key: &str) -> Option<MsgId> {
        let (p, s) = key.strip_prefix('c')?.split_once('-')?;
        Some(MsgId {
            producer: p.parse().ok()?,
            seq: s.parse().ok()?,
        })
    }
}

/// One message's send history.
#[derive(Debug, Clone)]
pub struct Sent {
    pub id: MsgId,
    pub attempts: u32,
    /// When SEND_OK came, milliseconds since the run started.
    pub acked_ms: Option<u64>,
    /// The queue whose broker answered SEND_OK.
    pub acked_queue: Option<(&'static str, i32)>,
}

/// One message handed to the consumer group.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: MsgId,
    pub topic: &'static str,
    pub queue: i32,
    pub offset: i64,
}

/// Counters the timeline samples once a second.
#[derive(Default)]
pub struct Live {
    pub acked: AtomicU64,
    pub send_errors: AtomicU64,
    pub consumed: AtomicU64,
    pub errors_by_kind: Mutex<BTreeMap<String, u64>>,
}

impl Live {
    fn error(&self, e: &ClientError) {
        self.send_errors.fetch_add(1, Ordering::Relaxed);
        *self.errors_by_kind.lock().entry(error_kind(e)).or_default() += 1;
    }
}

/// A send error's kind for the report: the broker's code by name, else what went wrong.
pub fn error_kind(e: &ClientError) -> String {
    match e {
        ClientError::Broker { code, .. } => {
            format!("{} ({code})", petrel_protocol::response_code_name(*code).unwrap_or("?"))
        }
        ClientError::Timeout { .. } => "timeout".into(),
        ClientError::Connect { .. } | ClientError::Closed(_) => "connection refused or closed".into(),
        ClientError::NoRoute(_) => "no route".into(),
        _ => "other".into(),
    }
}

pub struct Ctx {
    pub client: Client,
    pub started: Instant,
    pub live: Live,
    pub body_bytes: usize,
    /// Time between two sends of one producer.
    pub period: Duration,
}

impl Ctx {
    pub fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn body(&self, id: MsgId) -> Bytes {
        let mut body = format!("{} ", id.key()).into_bytes();
        body.resize(self.body_bytes.max(body.len()), b'x');
        Bytes::from(body)
    }

    async fn send(&self, topic: &str, q: &QueueAddr, id: MsgId) -> Result<(), ClientError> {
        let mut props = Properties::default();
        props.insert(keys::KEYS.into(), id.key());
        let born_ms = i64::try_from(self.elapsed_ms()).unwrap_or(0);
        let req = Client::send_request(PRODUCER_GROUP, q, topic, self.body(id), &props, born_ms);
        let answer = self.client.call(&q.broker_addr, req).await?;
        Client::send_result(&q.broker_addr, &answer).map(|_| ())
    }
}

impl Ctx {
    /// One attempt at `sent` on `q`: true when acknowledged (then `acked_ms` is set); a failure
    /// is counted and followed by a short pause.
    async fn attempt(&self, topic: &'static str, q: &QueueAddr, sent: &mut Sent) -> bool {
        sent.attempts += 1;
        match self.send(topic, q, sent.id).await {
            Ok(()) => {
                sent.acked_ms = Some(self.elapsed_ms());
                sent.acked_queue = Some((topic, q.queue_id));
                self.live.acked.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                self.live.error(&e);
                tokio::time::sleep(RETRY_PAUSE).await;
                false
            }
        }
    }

    /// Ticks once per period; a late tick delays the next rather than bursting.
    fn pacer(&self) -> tokio::time::Interval {
        let mut ticker = tokio::time::interval(self.period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker
    }
}

impl Sent {
    fn new(producer: u32, seq: u64) -> Sent {
        Sent {
            id: MsgId { producer, seq },
            attempts: 0,
            acked_ms: None,
            acked_queue: None,
        }
    }
}

/// A unique-key producer: one message per period, each tried up to `SEND_ATTEMPTS` times on
/// queues in turn (the route re-read after a failure).
pub async fn produce(ctx: Arc<Ctx>, producer: u32, stop: watch::Receiver<bool>) -> Vec<Sent> {
    let mut log = Vec::new();
    let mut queues: Vec<QueueAddr> = Vec::new();
    let mut next_queue = producer as usize;
    let mut pacer = ctx.pacer();
    for seq in 0.. {
        pacer.tick().await;
        if *stop.borrow() {
            break;
        }
        let mut sent = Sent::new(producer, seq);
        while sent.attempts < SEND_ATTEMPTS && !*stop.borrow() {
            if queues.is_empty() {
                queues = ctx.client.write_queues(TOPIC).await.unwrap_or_default();
                if queues.is_empty() {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            }
            let q = queues[next_queue % queues.len()].clone();
            next_queue += 1;
            if ctx.attempt(TOPIC, &q, &mut sent).await {
                break;
            }
            queues.clear();
        }
        if sent.attempts > 0 {
            log.push(sent);
        }
    }
    log
}

/// An ordered producer: queue `queue` of the ordered topic only, each message retried until it
/// is acknowledged (or the run stops), so what it had acknowledged is a gap-free prefix.
pub async fn produce_ordered(ctx: Arc<Ctx>, producer: u32, queue: i32, stop: watch::Receiver<bool>) -> Vec<Sent> {
    let mut log = Vec::new();
    let mut pacer = ctx.pacer();
    let mut target: Option<QueueAddr> = None;
    for seq in 0.. {
        pacer.tick().await;
        if *stop.borrow() {
            break;
        }
        let mut sent = Sent::new(producer, seq);
        while sent.acked_ms.is_none() && !*stop.borrow() {
            let Some(q) = target.clone() else {
                target = ctx
                    .client
                    .write_queues(ORDERED_TOPIC)
                    .await
                    .ok()
                    .and_then(|qs| qs.into_iter().find(|q| q.queue_id == queue));
                if target.is_none() {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                continue;
            };
            if !ctx.attempt(ORDERED_TOPIC, &q, &mut sent).await {
                target = None;
            }
        }
        let acked = sent.acked_ms.is_some();
        if sent.attempts > 0 {
            log.push(sent);
        }
        if !acked {
            break;
        }
    }
    log
}

/// The master currently serving each queue of `topic`.
async fn masters(client: &Client, topic: &str) -> HashMap<i32, QueueAddr> {
    client
        .write_queues(topic)
        .await
        .map(|qs| qs.into_iter().map(|q| (q.queue_id, q)).collect())
        .unwrap_or_default()
}

/// A queue a consumer owns: where it reads next (None until its committed offset is known).
struct Owned {
    topic: &'static str,
    queue: i32,
    offset: Option<i64>,
    committed: i64,
}

pub type DrainTargets = HashMap<(&'static str, i32), i64>;

/// The end of the run for consumers: each queue's end, and when to give up reaching it.
#[derive(Clone)]
pub struct Drain {
    pub targets: DrainTargets,
    pub deadline: Instant,
}

/// A consumer of the group owning `queues`: pulls from each queue's master, commits its offsets
/// every second, and once `drain` names each queue's end, stops when it has reached them all.
pub async fn consume(ctx: Arc<Ctx>, queues: Vec<(&'static str, i32)>, drain: watch::Receiver<Option<Drain>>) -> Vec<Delivery> {
    let mut owned: Vec<Owned> = queues
        .into_iter()
        .map(|(topic, queue)| Owned {
            topic,
            queue,
            offset: None,
            committed: -1,
        })
        .collect();
    let mut routes: HashMap<&'static str, HashMap<i32, QueueAddr>> = HashMap::new();
    let mut log = Vec::new();
    let mut last_commit = Instant::now();
    loop {
        let mut progressed = false;
        for o in &mut owned {
            if !routes.get(o.topic).is_some_and(|r| r.contains_key(&o.queue)) {
                routes.insert(o.topic, masters(&ctx.client, o.topic).await);
            }
            let Some(q) = routes.get(o.topic).and_then(|r| r.get(&o.queue)).cloned() else {
                continue;
            };
            match pull_once(&ctx, &q, o, &mut log).await {
                Ok(n) => progressed |= n > 0,
                Err(_) => {
                    routes.remove(o.topic);
                }
            }
        }
        if last_commit.elapsed() >= COMMIT_INTERVAL {
            commit(&ctx, &routes, &mut owned).await;
            last_commit = Instant::now();
        }
        if let Some(d) = drain.borrow().as_ref()
            && (Instant::now() > d.deadline
                || owned.iter().all(|o| {
                    o.offset
                        .is_some_and(|off| d.targets.get(&(o.topic, o.queue)).is_some_and(|end| off >= *end))
                }))
        {
            break;
        }
        if !progressed {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    commit(&ctx, &routes, &mut owned).await;
    log
}

/// One pull of `o` from `q`'s master: the number of messages delivered.
async fn pull_once(ctx: &Ctx, q: &QueueAddr, o: &mut Owned, log: &mut Vec<Delivery>) -> Result<usize, ClientError> {
    let offset = match o.offset {
        Some(offset) => offset,
        None => {
            let offset = committed_offset(&ctx.client, q, o.topic).await?;
            o.offset = Some(offset);
            offset
        }
    };
    let req = Client::pull_request(CONSUMER_GROUP, o.topic, o.queue, offset, PULL_BATCH, 0);
    let answer = ctx.client.call(&q.broker_addr, req).await?;
    let PullResult {
        code,
        next_begin_offset,
        messages,
        ..
    } = Client::pull_result(&q.broker_addr, &answer)?;
    if code == resp::PULL_OFFSET_MOVED {
        // As RocketMQ's client does: take the broker's offset. A cut tail a consumer had read
        // shows up here, and the checker then finds what was skipped.
        tracing::warn!(topic = o.topic, queue = o.queue, offset, next_begin_offset, "offset moved");
    }
    o.offset = Some(next_begin_offset);
    let n = messages.len();
    for m in messages {
        let Some(id) = m.properties.get(keys::KEYS).and_then(|k| MsgId::parse(k)) else {
            continue;
        };
        log.push(Delivery {
            id,
            topic: o.topic,
            queue: o.queue,
            offset: m.queue_offset,
        });
    }
    ctx.live.consumed.fetch_add(n as u64, Ordering::Relaxed);
    Ok(n)
}

async fn committed_offset(client: &Client, q: &QueueAddr, topic: &str) -> Result<i64, ClientError> {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: CONSUMER_GROUP.into(),
        topic: topic.into(),
        queue_id: q.queue_id,
        set_zero_if_not_found: Some(true),
        bname: Some(q.broker_name.clone()),
    };
    let answer = client
        .call(
            &q.broker_addr,
            RemotingCommand::request(rc::QUERY_CONSUMER_OFFSET, 0).with_ext_fields(header.to_ext()),
        )
        .await?;
    match answer.code {
        resp::SUCCESS => Ok(answer.ext("offset").and_then(|v| v.parse().ok()).unwrap_or(0)),
        resp::QUERY_NOT_FOUND => Ok(0),
        code => Err(ClientError::Broker {
            addr: q.broker_addr.clone(),
            code,
            remark: answer.remark.clone().unwrap_or_default(),
        }),
    }
}

/// Commits every offset that moved since the last commit (a failure is retried next time).
async fn commit(ctx: &Ctx, routes: &HashMap<&'static str, HashMap<i32, QueueAddr>>, owned: &mut [Owned]) {
    for o in owned.iter_mut() {
        let (Some(offset), Some(q)) = (o.offset, routes.get(o.topic).and_then(|r| r.get(&o.queue))) else {
            continue;
        };
        if offset == o.committed {
            continue;
        }
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: CONSUMER_GROUP.into(),
            topic: o.topic.into(),
            queue_id: o.queue,
            commit_offset: offset,
            bname: Some(q.broker_name.clone()),
        };
        let req = RemotingCommand::request(rc::UPDATE_CONSUMER_OFFSET, 0).with_ext_fields(header.to_ext());
        if ctx.client.call(&q.broker_addr, req).await.is_ok_and(|a| a.code == resp::SUCCESS) {
            o.committed = offset;
        }
    }
}

/// Every message stored in `queue` of `topic`, in queue order, read from its master with a
/// group that commits nothing: what the log holds, beside what the group was given.
pub async fn read_queue(client: &Client, topic: &'static str, queue: i32) -> Result<Vec<Delivery>, ClientError> {
    let routes = masters(client, topic).await;
    let q = routes
        .get(&queue)
        .ok_or_else(|| ClientError::NoRoute(format!("{topic} queue {queue}")))?;
    let max = client.max_offset(&q.broker_addr, topic, queue).await?;
    let mut offset = 0;
    let mut out = Vec::new();
    while offset < max {
        let req = Client::pull_request("chaos-audit", topic, queue, offset, PULL_BATCH, 0);
        let answer = client.call(&q.broker_addr, req).await?;
        let r = Client::pull_result(&q.broker_addr, &answer)?;
        if r.next_begin_offset <= offset && r.messages.is_empty() {
            break;
        }
        offset = r.next_begin_offset;
        out.extend(r.messages.into_iter().filter_map(|m| {
            Some(Delivery {
                id: MsgId::parse(m.properties.get(keys::KEYS)?)?,
                topic,
                queue,
                offset: m.queue_offset,
            })
        }));
    }
    Ok(out)
}

/// Each queue's end on its master now, retried until `deadline`; a queue with no answer by then
/// is left out (its consumer stops at the deadline, and the checker counts what it lacks).
pub async fn queue_ends(client: &Client, deadline: Instant) -> DrainTargets {
    let mut out = DrainTargets::new();
    for topic in [TOPIC, ORDERED_TOPIC] {
        for queue in 0..QUEUES {
            while Instant::now() < deadline {
                let routes = masters(client, topic).await;
                let end = match routes.get(&queue) {
                    Some(q) => client.max_offset(&q.broker_addr, topic, queue).await,
                    None => Err(ClientError::NoRoute(topic.into())),
                };
                if let Ok(end) = end {
                    out.insert((topic, queue), end);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    out
}
