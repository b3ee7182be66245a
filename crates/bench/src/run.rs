//! One benchmark run: producers (sync, async with bounded in-flight, oneway, batch; open loop at
//! a target rate or as fast as possible), consumers (pull with long polling), a once-a-second
//! reporter (progress line, timeline, broker CPU and RSS), and the final report.
//!
//! Owns: the workload's tasks and their statistics. Must never: hide a stall — in open-loop
//! mode latency counts from the intended send time (coordinated omission), and every failed
//! request is counted by its response code.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use petrel_client::client::QueueAddr;
use petrel_client::{Client, ClientError, Connection};
use petrel_protocol::batch::BatchItem;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::properties::Properties;
use tokio::sync::Semaphore;

use crate::cgroup::CgroupMemory;
use crate::hist::{Percentiles, new_histogram, percentile_curve, record};
use crate::procstat::ProcSampler;
use crate::report::{BrokerUsage, Machine, Point, Report};

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only send, measuring send latency.
    Produce,
    /// Only pull.
    Consume,
    /// Send and pull at once, measuring latency from birth and from store to consumption too.
    E2e,
}

impl Kind {
    /// The subcommand's name, used in labels and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Produce => "produce",
            Kind::Consume => "consume",
            Kind::E2e => "e2e",
        }
    }
}

/// How producers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// One send at a time per producer, each waiting for its answer.
    Sync,
    /// At most this many sends in flight per producer.
    Async {
        /// Sends in flight per producer.
        in_flight: usize,
    },
    /// Sends marked oneway: no answer, so latency is only the time to queue the request.
    Oneway,
    /// This many messages per SEND_BATCH_MESSAGE.
    Batch {
        /// Messages per batch.
        size: usize,
    },
}

impl std::fmt::Display for SendMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendMode::Sync => write!(f, "sync"),
            SendMode::Async { in_flight } => write!(f, "async(in-flight {in_flight})"),
            SendMode::Oneway => write!(f, "oneway"),
            SendMode::Batch { size } => write!(f, "batch({size})"),
        }
    }
}

/// Everything a run needs to know: what to do, against which cluster, how hard and how long.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Produce, consume, or both.
    pub kind: Kind,
    /// Name server address(es), `host:port;host:port`.
    pub namesrv: String,
    /// The topic sent to and pulled from.
    pub topic: String,
    /// Queues the topic is created with when it does not exist.
    pub queues: i32,
    /// Producer tasks, each with its own connections.
    pub producers: usize,
    /// Consumer connections.
    pub consumers: usize,
    /// Body size of each message.
    pub message_bytes: usize,
    /// How producers send.
    pub mode: SendMode,
    /// Messages per second for all producers together (open loop); `None`: as fast as possible.
    pub rate: Option<f64>,
    /// Time run before measuring starts, not counted.
    pub warmup: Duration,
    /// Time measured.
    pub duration: Duration,
    /// Stop after this many measured messages (before `duration` if it comes first).
    pub count: Option<u64>,
    /// The broker's process, sampled every second for CPU and RSS.
    pub broker_pid: Option<u32>,
    /// The broker's memory cgroup, sampled every second beside its process.
    pub cgroup: Option<PathBuf>,
    /// The run's name, in the progress line and the report's file names.
    pub label: String,
    /// Whether to show a live progress line.
    pub progress: bool,
    /// How long a send waits for its answer (a long-polling pull gets 2 seconds more).
    pub timeout: Duration,
    /// Consume from the start of each queue instead of from its end.
    pub from_beginning: bool,
    /// Sign every request (a broker with `authenticationEnabled`).
    pub credentials: Option<petrel_client::Credentials>,
}

impl Workload {
    /// The settings a report records beside its figures, by name.
    pub fn settings(&self) -> BTreeMap<String, String> {
        let mut s = BTreeMap::new();
        s.insert("namesrv".into(), self.namesrv.clone());
        s.insert("topic".into(), self.topic.clone());
        s.insert("queues".into(), self.queues.to_string());
        s.insert("producers".into(), self.producers.to_string());
        s.insert("consumers".into(), self.consumers.to_string());
        s.insert("size_bytes".into(), self.message_bytes.to_string());
        s.insert("mode".into(), self.mode.to_string());
        s.insert("rate".into(), self.rate.map_or_else(|| "max".into(), |r| format!("{r}")));
        s.insert("warmup_s".into(), format!("{}", self.warmup.as_secs_f64()));
        s.insert("duration_s".into(), format!("{}", self.duration.as_secs_f64()));
        if let Some(c) = self.count {
            s.insert("count".into(), c.to_string());
        }
        if let Some(cg) = &self.cgroup {
            s.insert("cgroup".into(), cg.display().to_string());
        }
        s
    }
}

/// Why a bench command failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A call to the broker or name server failed where the run cannot go on without it.
    #[error("{0}")]
    Client(#[from] ClientError),
    /// A report, file or process could not be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The options contradict each other or are out of range; says which.
    #[error("{0}")]
    Invalid(String),
    /// A chart could not be drawn or written.
    #[error("plot: {0}")]
    Plot(#[from] plotters::drawing::DrawingAreaErrorKind<std::io::Error>),
}

/// A producer's or consumer's numbers; the reporter drains `interval` once a second.
struct TaskStats {
    total: Histogram<u64>,
    interval: Histogram<u64>,
    messages: u64,
    interval_messages: u64,
    bytes: u64,
    errors: BTreeMap<String, u64>,
}

impl TaskStats {
    fn new() -> TaskStats {
        TaskStats {
            total: new_histogram(),
            interval: new_histogram(),
            messages: 0,
            interval_messages: 0,
            bytes: 0,
            errors: BTreeMap::new(),
        }
    }

    fn ok(&mut self, latency_us: u64, messages: u64, bytes: u64) {
        record(&mut self.total, latency_us);
        record(&mut self.interval, latency_us);
        self.messages += messages;
        self.interval_messages += messages;
        self.bytes += bytes;
    }
}

struct ConsumerStats {
    /// Pulls that found messages, request to answer: what one read costs the broker (from the
    /// disk, the page cache, or a cold tier), backlog included.
    pull: Histogram<u64>,
    store: Histogram<u64>,
    born: Histogram<u64>,
    interval_born: Histogram<u64>,
    consumed: u64,
    /// When the last measured message was consumed, µs since the epoch.
    last_consumed_us: u64,
}

/// What every task shares.
struct Shared {
    stop_producers: AtomicBool,
    stop_consumers: AtomicBool,
    producers_done: AtomicBool,
    /// Microseconds since the epoch when measuring began (messages born before are warm-up).
    measure_start_us: AtomicU64,
    /// Measured messages still to send under `--count` (unbounded without it).
    budget: AtomicI64,
}

use petrel_kit::clock::now_us;

/// Key under which a failed request is counted.
pub fn error_key(e: &ClientError) -> String {
    match e {
        ClientError::Broker { code, .. } => format!("{} ({code})", petrel_protocol::response_code_name(*code).unwrap_or("UNKNOWN")),
        ClientError::Timeout { .. } => "client timeout".into(),
        ClientError::Closed(_) | ClientError::Connect { .. } => "connection lost".into(),
        _ => "client error".into(),
    }
}

/// The message body: 8 bytes of birth time (µs since the epoch), then filler; bodies shorter
/// than 8 bytes (produce-only runs) are filler alone.
fn body(size: usize, born_us: u64) -> Bytes {
    let mut b = BytesMut::with_capacity(size.max(8));
    b.put_u64(born_us);
    b.resize(size.max(8), b'p');
    b.truncate(size);
    if size < 8 {
        b.iter_mut().for_each(|x| *x = b'p');
    }
    b.freeze()
}

/// Waits until `at`: sleeps while more than a millisecond away (the timer's granularity), then
/// yields, so open-loop sends leave close to their intended time.
async fn wait_until(at: Instant) {
    let now = Instant::now();
    if at > now + Duration::from_millis(1) {
        tokio::time::sleep_until((at - Duration::from_millis(1)).into()).await;
    }
    while Instant::now() < at {
        tokio::task::yield_now().await;
    }
}

struct ProducerCtx {
    shared: Arc<Shared>,
    stats: Arc<Mutex<TaskStats>>,
    conns: BTreeMap<String, Arc<Connection>>,
    queues: Vec<QueueAddr>,
    w: Workload,
    index: usize,
}

async fn produce(ctx: ProducerCtx) {
    let ProducerCtx {
        shared,
        stats,
        conns,
        queues,
        w,
        index,
    } = ctx;
    let group = format!("petrel_bench_{}", std::process::id());
    let per_message = match w.mode {
        SendMode::Batch { size } => size.max(1) as u64,
        _ => 1,
    };
    let interval = w
        .rate
        .map(|r| Duration::from_secs_f64(w.producers as f64 * per_message as f64 / r.max(0.001)));
    // The drain at the end takes every permit at once, and `acquire_many` counts in u32.
    let permits = match w.mode {
        SendMode::Async { in_flight } => u32::try_from(in_flight.max(1)).unwrap_or(u32::MAX),
        _ => 1,
    };
    let in_flight = Arc::new(Semaphore::new(permits as usize));
    let mut next = Instant::now();
    let mut i = index;
    while !shared.stop_producers.load(Ordering::Relaxed) {
        let intended = match interval {
            Some(iv) => {
                next += iv;
                wait_until(next - iv).await;
                next - iv
            }
            None => Instant::now(),
        };
        // The consumers use the same rule (birth time vs. the start of measuring), so both
        // sides count the same messages.
        let born_us = now_us();
        let start_us = shared.measure_start_us.load(Ordering::Relaxed);
        let measuring = start_us != 0 && born_us >= start_us;
        if measuring && shared.budget.fetch_sub(per_message as i64, Ordering::Relaxed) <= 0 {
            break;
        }
        let q = &queues[i % queues.len()];
        i += 1;
        let conn = conns[&q.broker_addr].clone();
        let born_ms = (born_us / 1000) as i64;
        let request = match w.mode {
            SendMode::Batch { size } => {
                let items: Vec<BatchItem> = (0..size.max(1))
                    .map(|_| BatchItem {
                        flag: 0,
                        body: body(w.message_bytes, born_us),
                        properties: Properties::default(),
                    })
                    .collect();
                match Client::batch_request(&group, q, &w.topic, &items, born_ms) {
                    Ok(r) => r,
                    Err(e) => {
                        *stats.lock().errors.entry(error_key(&e)).or_default() += 1;
                        continue;
                    }
                }
            }
            _ => Client::send_request(&group, q, &w.topic, body(w.message_bytes, born_us), &Properties::default(), born_ms),
        };
        let bytes = per_message * w.message_bytes as u64;
        let timeout = w.timeout;
        let stats_for = stats.clone();
        let finish = move |result: Result<(), ClientError>| {
            let latency = u64::try_from(intended.elapsed().as_micros()).unwrap_or(u64::MAX);
            let mut s = stats_for.lock();
            match result {
                Ok(()) if measuring => s.ok(latency, per_message, bytes),
                Ok(()) => {}
                Err(e) => *s.errors.entry(error_key(&e)).or_default() += 1,
            }
        };
        match w.mode {
            SendMode::Oneway => finish(conn.oneway(request).await),
            SendMode::Sync | SendMode::Batch { .. } => {
                let r = conn.call(request, timeout).await;
                finish(r.and_then(|a| Client::send_result(&conn.addr, &a).map(|_| ())));
            }
            SendMode::Async { .. } => {
                let permit = in_flight.clone().acquire_owned().await.expect("semaphore stays open");
                tokio::spawn(async move {
                    let r = conn.call(request, timeout).await;
                    finish(r.and_then(|a| Client::send_result(&conn.addr, &a).map(|_| ())));
                    drop(permit);
                });
            }
        }
    }
    // Let async sends in flight finish.
    if let SendMode::Async { .. } = w.mode {
        let _ = in_flight.acquire_many(permits).await;
    }
}

async fn consume_queue(
    shared: Arc<Shared>,
    stats: Arc<Mutex<ConsumerStats>>,
    conn: Arc<Connection>,
    w: Workload,
    q: QueueAddr,
    start: i64,
) {
    let group = format!("petrel_bench_consumer_{}", std::process::id());
    let mut offset = start;
    let mut idle_since: Option<Instant> = None;
    while !shared.stop_consumers.load(Ordering::Relaxed) {
        // After the producers stop, keep draining until the queue is quiet for a while.
        if shared.producers_done.load(Ordering::Relaxed) && idle_since.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            break;
        }
        let request = Client::pull_request(&group, &w.topic, q.queue_id, offset, 32, 1000);
        let asked_us = now_us();
        let answer = match conn.call(request, w.timeout + Duration::from_secs(2)).await {
            Ok(a) => a,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(result) = Client::pull_result(&conn.addr, &answer) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        offset = result.next_begin_offset;
        if result.code != resp::SUCCESS {
            idle_since.get_or_insert_with(Instant::now);
            continue;
        }
        idle_since = None;
        let now = now_us();
        let start_us = shared.measure_start_us.load(Ordering::Relaxed);
        let mut s = stats.lock();
        if start_us != 0 && !result.messages.is_empty() {
            record(&mut s.pull, now.saturating_sub(asked_us));
        }
        for m in &result.messages {
            let born = m.body.get(..8).map_or(0, |b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
            if start_us == 0 {
                continue; // warm-up
            }
            if born < start_us {
                // Sent before the run: warm-up traffic, or (from the beginning) the backlog,
                // which counts in the rate but not in the latencies.
                if w.from_beginning {
                    s.consumed += 1;
                    s.last_consumed_us = now;
                }
                continue;
            }
            record(&mut s.born, now.saturating_sub(born));
            record(&mut s.interval_born, now.saturating_sub(born));
            record(&mut s.store, now.saturating_sub(m.store_timestamp as u64 * 1000));
            s.consumed += 1;
            s.last_consumed_us = now;
        }
    }
}

fn merge(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from).expect("histograms share bounds");
}

/// Runs the workload and returns its report.
#[expect(
    clippy::too_many_lines,
    reason = "the workload's phases in order: setup, tasks, reporter, drain, report"
)]
pub async fn run(w: Workload) -> Result<Report, BenchError> {
    if w.producers == 0 && w.kind != Kind::Consume {
        return Err(BenchError::Invalid("at least one producer".into()));
    }
    let client = Client::new(&w.namesrv).with_credentials(w.credentials.clone());
    let queues = client.ensure_topic(&w.topic, w.queues).await?;
    let shared = Arc::new(Shared {
        stop_producers: AtomicBool::new(false),
        stop_consumers: AtomicBool::new(false),
        producers_done: AtomicBool::new(false),
        measure_start_us: AtomicU64::new(0),
        budget: AtomicI64::new(w.count.map_or(i64::MAX, |c| c as i64)),
    });

    // Consumers first, positioned at each queue's end (or start), so they see every new message.
    let mut consumer_stats = Vec::new();
    let mut consumer_tasks = Vec::new();
    if w.kind != Kind::Produce {
        let mut conns = Vec::new();
        for _ in 0..w.consumers.max(1) {
            let mut by_addr = BTreeMap::new();
            for q in &queues {
                if !by_addr.contains_key(&q.broker_addr) {
                    by_addr.insert(q.broker_addr.clone(), client.dedicated(&q.broker_addr).await?);
                }
            }
            conns.push(by_addr);
            consumer_stats.push(Arc::new(Mutex::new(ConsumerStats {
                pull: new_histogram(),
                store: new_histogram(),
                born: new_histogram(),
                interval_born: new_histogram(),
                consumed: 0,
                last_consumed_us: 0,
            })));
        }
        for (k, q) in queues.iter().enumerate() {
            let j = k % conns.len();
            let start = if w.from_beginning {
                0
            } else {
                client.max_offset(&q.broker_addr, &w.topic, q.queue_id).await?
            };
            consumer_tasks.push(tokio::spawn(consume_queue(
                shared.clone(),
                consumer_stats[j].clone(),
                conns[j][&q.broker_addr].clone(),
                w.clone(),
                q.clone(),
                start,
            )));
        }
    }

    let mut producer_stats = Vec::new();
    let mut producer_tasks = Vec::new();
    if w.kind != Kind::Consume {
        for index in 0..w.producers {
            let mut conns = BTreeMap::new();
            for q in &queues {
                if !conns.contains_key(&q.broker_addr) {
                    conns.insert(q.broker_addr.clone(), client.dedicated(&q.broker_addr).await?);
                }
            }
            let stats = Arc::new(Mutex::new(TaskStats::new()));
            producer_stats.push(stats.clone());
            producer_tasks.push(tokio::spawn(produce(ProducerCtx {
                shared: shared.clone(),
                stats,
                conns,
                queues: queues.clone(),
                w: w.clone(),
                index,
            })));
        }
    }

    let bar = if w.progress {
        let b = indicatif::ProgressBar::new_spinner();
        b.enable_steady_tick(Duration::from_millis(200));
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let started_unix_ms = (now_us() / 1000) as i64;
    let boot = Instant::now();
    let mut sampler = w.broker_pid.map(ProcSampler::new);
    let cgroup = w.cgroup.as_deref().map(CgroupMemory::open).transpose()?;
    let mut consumed_before = 0;
    let mut timeline = Vec::new();
    let mut measure_start: Option<Instant> = None;
    let mut last_tick = Instant::now();
    let mut cpu_samples = Vec::new();
    let mut rss_max: f64 = 0.0;
    if w.warmup.is_zero() {
        shared.measure_start_us.store(now_us(), Ordering::Relaxed);
        measure_start = Some(Instant::now());
    }
    loop {
        // A tick a second, and one at each phase boundary; ticks count from the last one, so a
        // boundary never falls a moment after a tick (an interval of a few ms would make a
        // nonsense TPS and CPU sample), and a 2 s run measures 2 s, not 2 s rounded up to the tick.
        let boundary = match measure_start {
            None => boot + w.warmup,
            Some(start) => start + w.duration,
        };
        let next_tick = (last_tick + Duration::from_secs(1)).min(boundary);
        tokio::select! {
            _ = tokio::time::sleep_until(next_tick.into()) => {}
            _ = tokio::time::sleep(Duration::from_millis(50)), if producer_tasks.iter().all(|t| t.is_finished()) && w.kind != Kind::Consume => {}
        }
        let dt = last_tick.elapsed().as_secs_f64().max(1e-3);
        last_tick = Instant::now();
        let mut measuring_began_now = false;
        if measure_start.is_none() && boot.elapsed() >= w.warmup {
            shared.measure_start_us.store(now_us(), Ordering::Relaxed);
            measure_start = Some(last_tick);
            measuring_began_now = true;
        }
        // Drain the interval numbers.
        let mut interval = new_histogram();
        let mut msgs = 0;
        let mut errors = 0;
        for s in &producer_stats {
            let mut s = s.lock();
            merge(&mut interval, &s.interval);
            s.interval.reset();
            msgs += s.interval_messages;
            s.interval_messages = 0;
            errors += s.errors.values().sum::<u64>();
        }
        let mut consumed = 0;
        for s in &consumer_stats {
            let mut s = s.lock();
            if producer_stats.is_empty() {
                merge(&mut interval, &s.interval_born);
            }
            s.interval_born.reset();
            consumed += s.consumed;
        }
        let tps = msgs as f64 / dt;
        let consumed_per_s = (w.kind != Kind::Produce).then(|| consumed.saturating_sub(consumed_before) as f64 / dt);
        consumed_before = consumed;
        let p99 = if interval.is_empty() { 0 } else { interval.value_at_quantile(0.99) };
        let usage = sampler.as_mut().and_then(|s| s.sample());
        if let Some(start) = measure_start.filter(|_| !measuring_began_now) {
            if let Some((cpu, rss)) = usage {
                cpu_samples.push(cpu);
                rss_max = rss_max.max(rss);
            }
            timeline.push(Point {
                t_s: start.elapsed().as_secs_f64(),
                tps,
                p99_us: p99,
                broker_cpu_pct: usage.map(|u| u.0),
                broker_rss_mb: usage.map(|u| u.1),
                consumed_per_s,
                cgroup: cgroup.as_ref().and_then(CgroupMemory::sample),
            });
        }
        let phase = if measure_start.is_some() { "run" } else { "warm-up" };
        let usage_text = usage.map_or(String::new(), |(c, r)| format!(", broker {c:.0}% CPU {r:.0} MB"));
        bar.set_message(format!(
            "{} {phase} {:.0}s: {tps:.0} msg/s, P99 {}, consumed {consumed}, errors {errors}{usage_text}",
            w.label,
            boot.elapsed().as_secs_f64(),
            crate::hist::fmt_us(p99)
        ));
        let measured = measure_start.map_or(Duration::ZERO, |s| s.elapsed());
        let producers_finished = !producer_tasks.is_empty() && producer_tasks.iter().all(|t| t.is_finished());
        if measured >= w.duration || producers_finished {
            break;
        }
        if w.kind == Kind::Consume && w.count.is_some_and(|c| consumed >= c) {
            break;
        }
    }
    let measured_s = measure_start.map_or(0.0, |s| s.elapsed().as_secs_f64());
    shared.stop_producers.store(true, Ordering::Relaxed);
    for t in producer_tasks {
        let _ = t.await;
    }
    shared.producers_done.store(true, Ordering::Relaxed);
    if w.kind == Kind::E2e {
        // Consumers drain what was sent and stop once their queues stay quiet; bounded.
        let drain = async {
            for t in consumer_tasks.iter_mut() {
                let _ = t.await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(30), drain).await;
    }
    shared.stop_consumers.store(true, Ordering::Relaxed);
    for t in consumer_tasks {
        if !t.is_finished() {
            let _ = t.await;
        }
    }
    bar.finish_and_clear();

    let mut send = new_histogram();
    let mut messages = 0;
    let mut bytes = 0;
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for s in &producer_stats {
        let s = s.lock();
        merge(&mut send, &s.total);
        messages += s.messages;
        bytes += s.bytes;
        for (k, v) in &s.errors {
            *errors.entry(k.clone()).or_default() += v;
        }
    }
    let mut pull = new_histogram();
    let mut store = new_histogram();
    let mut born = new_histogram();
    let mut consumed = 0;
    let mut last_consumed_us = 0;
    for s in &consumer_stats {
        let s = s.lock();
        merge(&mut pull, &s.pull);
        merge(&mut store, &s.store);
        merge(&mut born, &s.born);
        consumed += s.consumed;
        last_consumed_us = last_consumed_us.max(s.last_consumed_us);
    }
    let measure_start_us = shared.measure_start_us.load(Ordering::Relaxed);
    let drained_s =
        (w.kind == Kind::E2e && last_consumed_us > measure_start_us).then(|| (last_consumed_us - measure_start_us) as f64 / 1e6);
    let counted = if w.kind == Kind::Consume { consumed } else { messages };
    let secs = measured_s.max(1e-3);
    Ok(Report {
        label: w.label.clone(),
        workload: w.kind.name().into(),
        settings: w.settings(),
        machine: Machine::detect(),
        started_unix_ms,
        measured_s,
        messages: counted,
        tps: counted as f64 / secs,
        mb_per_s: if w.kind == Kind::Consume {
            consumed as f64 * w.message_bytes as f64 / secs / 1e6
        } else {
            bytes as f64 / secs / 1e6
        },
        send_us: Percentiles::of(&send),
        pull_us: Percentiles::of(&pull),
        store_to_consume_us: Percentiles::of(&store),
        born_to_consume_us: Percentiles::of(&born),
        consumed,
        errors,
        timeline,
        send_curve: percentile_curve(&send),
        e2e_curve: percentile_curve(&born),
        drained_s,
        broker: w.broker_pid.filter(|_| !cpu_samples.is_empty()).map(|pid| BrokerUsage {
            pid,
            cpu_pct_mean: cpu_samples.iter().sum::<f64>() / cpu_samples.len() as f64,
            rss_mb_max: rss_max,
        }),
    })
}
