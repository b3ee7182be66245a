//! `petrel bench queues`: what many queues cost one broker. The queues are light message queues
//! (`%LMQ%…`: one stored message filed in each queue its `INNER_MULTI_DISPATCH` names), as MQTT's
//! per-device queues use them; a count of 4 is the baseline, a plain topic of 4 queues.
//!
//! For each queue count the bench starts a fresh broker from `--broker-cmd` (so one run measures
//! `petrel serve` and Apache RocketMQ alike), then:
//! 1. **fill**: files one message in each of the N queues, `--fan-out` queues per message;
//! 2. **measure**: `--duration` s of synchronous sends, each to one queue drawn at random from the
//!    first `--active` queues, while `--consumers` tasks pull those queues round the ring;
//! 3. **cost**: the broker's RSS (and its anonymous part), `/proc/PID/maps` lines and open fds;
//! 4. **kill -9**: a restart timed until the broker answers again, then every active queue's max
//!    offset checked against the sends it acknowledged (one lost message fails the row);
//! 5. **clean restart**: SIGTERM, then a start timed the same way.
//!
//! Owns: the broker processes of the run and the table. Must never: report a row whose broker
//! lost an acknowledged message without saying so, or leave a broker running (each is killed when
//! its row is done, and on drop).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use petrel_client::client::QueueAddr;
use petrel_client::{Client, ClientError};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::properties::{Properties, keys};
use serde::Serialize;

use crate::hist::{Percentiles, fmt_us, new_histogram, record};
use crate::procstat::ProcSampler;
use crate::run::BenchError;

/// Messages a consumer asks for per pull.
const PULL_BATCH: i32 = 32;
/// How often a starting broker is asked whether it answers yet.
const START_POLL: Duration = Duration::from_millis(50);
/// Queue counts at or below this run as a plain topic (the baseline), not as light queues.
const PLAIN_TOPIC_QUEUES: usize = 4;

/// The options of `petrel bench queues`.
#[derive(Args, Debug, Clone)]
pub struct QueuesArgs {
    /// Queue counts, comma-separated; 4 is the baseline (a plain topic of 4 queues).
    #[arg(long, default_value = "4,1000,10000,100000")]
    pub counts: String,
    /// The broker's command, run with `sh -c` for each count (and for its restarts); it must `exec`
    /// the broker, so that kill -9 reaches it. `{data}` becomes the count's data directory,
    /// `{max_queues}` a light-queue limit above the count.
    /// Default: `petrel serve` (this binary, or --petrel) with light queues on, on --namesrv and --broker.
    #[arg(long)]
    pub broker_cmd: Option<String>,
    /// The petrel binary for the default --broker-cmd.
    #[arg(long)]
    pub petrel: Option<PathBuf>,
    /// Where each count's data directory goes (removed after its row).
    #[arg(long, default_value = "/tmp/petrel-bench-queues")]
    pub data: PathBuf,
    /// The name server (the default broker command runs one in the broker's process).
    #[arg(short, long, default_value = "127.0.0.1:42876")]
    pub namesrv: String,
    /// The broker's address.
    #[arg(long, default_value = "127.0.0.1:42877")]
    pub broker: String,
    /// The parent topic: the light queues' messages are stored in it, and the baseline uses it.
    #[arg(short, long, default_value = "QueuesBench")]
    pub topic: String,
    /// Queues that get sends while measuring (the first ones of each count).
    #[arg(long, default_value_t = 10_000)]
    pub active: usize,
    /// Light queues named by each message of the fill.
    #[arg(long, default_value_t = 64)]
    pub fan_out: usize,
    /// Producers (synchronous sends), each with its own connection.
    #[arg(short, long, default_value_t = 16)]
    pub producers: usize,
    /// Consumers, each pulling its share of the active queues in turn.
    #[arg(short, long, default_value_t = 4)]
    pub consumers: usize,
    /// Message body size in bytes.
    #[arg(short, long, default_value_t = 1024)]
    pub size: usize,
    /// Seconds of sends before measuring.
    #[arg(long, default_value_t = 3)]
    pub warmup: u64,
    /// Seconds measured.
    #[arg(short, long, default_value_t = 20)]
    pub duration: u64,
    /// How long a start or a recovery may take before the row fails, seconds.
    #[arg(long, default_value_t = 600)]
    pub start_timeout_s: u64,
    /// Request timeout, milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Where queues.md and queues.json go.
    #[arg(short, long, default_value = "bench-results/queues")]
    pub out: PathBuf,
    /// A label for the broker in the table (e.g. `petrel`, `rocketmq-file`).
    #[arg(short, long, default_value = "petrel")]
    pub label: String,
}

/// One queue count's results.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueuesRow {
    /// The broker's label.
    pub broker: String,
    /// Queues.
    pub queues: usize,
    /// Seconds from the first start until the broker took a topic.
    pub first_start_s: f64,
    /// Seconds to send the fill: one message in every queue.
    pub fill_s: f64,
    /// Seconds after the fill until its last queue could be read (the broker's filing).
    pub fill_readable_s: f64,
    /// Sends acknowledged per second while measuring.
    pub send_tps: f64,
    /// Send latency while measuring.
    pub send_us: Percentiles,
    /// Failed sends, warm-up and fill included.
    pub send_errors: u64,
    /// Messages pulled per second while measuring.
    pub consume_tps: f64,
    /// Pulls answered, warm-up included (most find nothing new when the queues are many).
    pub pulls: u64,
    /// Failed pulls (an error answer or none), warm-up included.
    pub pull_errors: u64,
    /// Broker CPU per acknowledged send while measuring, µs.
    pub cpu_us_per_msg: f64,
    /// Broker resident memory after measuring, MiB.
    pub rss_mb: f64,
    /// The anonymous part of it (heap, stacks), MiB.
    pub anon_mb: f64,
    /// Lines of `/proc/PID/maps`: the broker's mappings.
    pub maps: usize,
    /// Open file descriptors of the broker.
    pub fds: usize,
    /// Seconds from a restart after kill -9 until the broker answered for a queue again.
    pub recovery_s: f64,
    /// Queues checked after the kill -9.
    pub checked_queues: usize,
    /// Acknowledged messages missing from them.
    pub lost: u64,
    /// Seconds from a restart after a clean stop until the broker answered.
    pub clean_start_s: f64,
    /// Why the row stopped early, if it did.
    pub failure: Option<String>,
}

/// A broker process of the run; killed on drop.
struct Broker {
    child: Child,
}

impl Broker {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&mut self, signal: nix::sys::signal::Signal) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
    }
}

/// The light queue `i` of a run.
fn lmq_name(i: usize) -> String {
    format!("{}qb{i}", petrel_protocol::lmq::LMQ_PREFIX)
}

fn broker_command(a: &QueuesArgs) -> Result<String, BenchError> {
    if let Some(cmd) = &a.broker_cmd {
        return Ok(cmd.clone());
    }
    let exe = match &a.petrel {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let port = a
        .broker
        .rsplit_once(':')
        .map(|(_, p)| p.to_owned())
        .ok_or_else(|| BenchError::Invalid(format!("--broker {} has no port", a.broker)))?;
    Ok(format!(
        "exec {} serve --store-dir {{data}} --namesrv-listen {} --listen-port {port} --broker-ip 127.0.0.1 \
         --set haListenPort=0 --set fastListenPort=0 \
         --set enableLmq=true --set enableMultiDispatch=true --set maxLmqConsumeQueueNum={{max_queues}}",
        exe.display(),
        a.namesrv
    ))
}

fn spawn(cmd: &str, data: &Path, max_queues: usize, log: &Path) -> Result<Broker, BenchError> {
    let line = cmd
        .replace("{data}", &data.display().to_string())
        .replace("{max_queues}", &max_queues.to_string());
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    let child = Command::new("sh")
        .args(["-c", &line])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    Ok(Broker { child })
}

/// Waits until the broker answers GET_MAX_OFFSET for `topic` queue `queue_id` (its recovery done);
/// returns the seconds since `since`.
async fn wait_answering(a: &QueuesArgs, broker: &mut Broker, topic: &str, queue_id: i32, since: Instant) -> Result<f64, BenchError> {
    let deadline = since + Duration::from_secs(a.start_timeout_s);
    loop {
        if let Ok(Some(status)) = broker.child.try_wait() {
            return Err(BenchError::Invalid(format!("the broker exited while starting: {status}")));
        }
        let client = Client::new(&a.namesrv);
        if client.max_offset(&a.broker, topic, queue_id).await.is_ok() {
            return Ok(since.elapsed().as_secs_f64());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Invalid(format!(
                "the broker did not answer within {} s",
                a.start_timeout_s
            )));
        }
        tokio::time::sleep(START_POLL).await;
    }
}

/// What the producers and consumers share.
struct Shared {
    /// Sends acknowledged per active queue (light queues), or per topic queue (baseline).
    acked: Vec<AtomicU32>,
    measuring: AtomicBool,
    stop: AtomicBool,
    sent: AtomicU64,
    errors: AtomicU64,
    pulled: AtomicU64,
    pull_errors: AtomicU64,
    pulls: AtomicU64,
    latency: Mutex<Histogram<u64>>,
}

fn send_properties(lmq: Option<&str>) -> Properties {
    let mut p = Properties::default();
    if let Some(names) = lmq {
        p.insert(keys::INNER_MULTI_DISPATCH.to_owned(), names.to_owned());
    }
    p
}

/// Files one message in each of `queues` light queues, `fan_out` per message, over `producers`
/// connections; returns the seconds it took.
async fn fill(a: &QueuesArgs, queues: usize, addr: &QueueAddr, shared: &Arc<Shared>) -> Result<f64, BenchError> {
    let started = Instant::now();
    let chunks: Vec<(usize, usize)> = (0..queues)
        .step_by(a.fan_out.max(1))
        .map(|from| (from, (from + a.fan_out.max(1)).min(queues)))
        .collect();
    let next = Arc::new(AtomicU64::new(0));
    let chunks = Arc::new(chunks);
    let mut tasks = Vec::new();
    for _ in 0..a.producers.max(1) {
        let (next, chunks, shared, addr, a) = (next.clone(), chunks.clone(), shared.clone(), addr.clone(), a.clone());
        tasks.push(tokio::spawn(async move {
            let conn = petrel_client::Connection::connect(&addr.broker_addr).await?;
            let body = Bytes::from(vec![b'f'; a.size]);
            loop {
                let i = usize::try_from(next.fetch_add(1, Ordering::Relaxed)).unwrap_or(usize::MAX);
                let Some(&(from, to)) = chunks.get(i) else {
                    return Ok::<(), BenchError>(());
                };
                let names: Vec<String> = (from..to).map(lmq_name).collect();
                let props = send_properties(Some(&names.join(",")));
                let request = Client::send_request("petrel_bench_queues", &addr, &a.topic, body.clone(), &props, now_ms());
                let answer = conn.call(request, Duration::from_millis(a.timeout_ms)).await?;
                if let Err(e) = Client::send_result(&conn.addr, &answer) {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(BenchError::Invalid(format!("the fill was refused at queue {from}: {e}")));
                }
                for q in from..to.min(shared.acked.len()) {
                    shared.acked[q].fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| BenchError::Invalid(e.to_string()))??;
    }
    Ok(started.elapsed().as_secs_f64())
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(i64::MAX)
}

/// A small xorshift generator: the queue each send goes to (no need for a crate's randomness).
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n.max(1) as u64).expect("below n, which is a usize")
    }
}

/// One producer of the measured phase: sends until told to stop, each to a random active queue.
async fn produce(a: QueuesArgs, addrs: Vec<QueueAddr>, lmq: bool, shared: Arc<Shared>, seed: u64) -> Result<(), BenchError> {
    let first = addrs.first().ok_or_else(|| BenchError::Invalid("the topic has no queue".into()))?;
    let conn = petrel_client::Connection::connect(&first.broker_addr).await?;
    let body = Bytes::from(vec![b'm'; a.size]);
    let mut draw = Draw(seed | 1);
    let timeout = Duration::from_millis(a.timeout_ms);
    while !shared.stop.load(Ordering::Relaxed) {
        let target = draw.below(shared.acked.len());
        let (addr, props) = if lmq {
            (&addrs[target % addrs.len()], send_properties(Some(&lmq_name(target))))
        } else {
            (&addrs[target], send_properties(None))
        };
        let started = Instant::now();
        let request = Client::send_request("petrel_bench_queues", addr, &a.topic, body.clone(), &props, now_ms());
        let ok = match conn.call(request, timeout).await {
            Ok(answer) => Client::send_result(&conn.addr, &answer).is_ok(),
            Err(ClientError::Timeout { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        if !ok {
            shared.errors.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        shared.acked[target].fetch_add(1, Ordering::Relaxed);
        if shared.measuring.load(Ordering::Relaxed) {
            shared.sent.fetch_add(1, Ordering::Relaxed);
            let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            record(&mut shared.latency.lock(), us);
        }
    }
    Ok(())
}

/// One consumer: pulls its share of the queues (every `stride`-th from `first`) in turn.
async fn consume(
    a: QueuesArgs,
    topic_queues: Vec<QueueAddr>,
    lmq: bool,
    shared: Arc<Shared>,
    first: usize,
    stride: usize,
) -> Result<(), BenchError> {
    let conn = petrel_client::Connection::connect(&a.broker).await?;
    let mine: Vec<usize> = (first..shared.acked.len()).step_by(stride.max(1)).collect();
    let mut offsets = vec![0i64; mine.len()];
    let timeout = Duration::from_millis(a.timeout_ms);
    while !shared.stop.load(Ordering::Relaxed) {
        for (slot, &q) in mine.iter().enumerate() {
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
            let (topic, queue_id) = if lmq {
                (lmq_name(q), petrel_protocol::lmq::LMQ_QUEUE_ID)
            } else {
                (a.topic.clone(), topic_queues[q].queue_id)
            };
            let request = Client::pull_request("petrel_bench_queues", &topic, queue_id, offsets[slot], PULL_BATCH, 0);
            let Ok(answer) = conn.call(request, timeout).await else {
                shared.pull_errors.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let result = match Client::pull_result(&conn.addr, &answer) {
                Ok(result) => result,
                Err(e) => {
                    if shared.pull_errors.fetch_add(1, Ordering::Relaxed) == 0 {
                        eprintln!("a pull of {topic} failed: {e}");
                    }
                    continue;
                }
            };
            if result.code == resp::SUCCESS && shared.measuring.load(Ordering::Relaxed) {
                shared.pulled.fetch_add(result.messages.len() as u64, Ordering::Relaxed);
            }
            offsets[slot] = result.next_begin_offset.max(offsets[slot]);
            shared.pulls.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// The broker's `/proc` figures: RSS and its anonymous part (MiB), mappings, open fds.
fn process_cost(pid: u32) -> (f64, f64, usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_or(0, |m| m.lines().count());
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
    (kib("VmRSS:") / 1024.0, kib("RssAnon:") / 1024.0, maps, fds)
}

/// Runs the producers and consumers for the warm-up and the measured seconds; fills in the
/// row's rates, latency, CPU and memory.
async fn measure(
    a: &QueuesArgs,
    broker: &Broker,
    addrs: &[QueueAddr],
    lmq: bool,
    shared: &Arc<Shared>,
    row: &mut QueuesRow,
) -> Result<(), BenchError> {
    let mut tasks = Vec::new();
    for p in 0..a.producers.max(1) {
        let seed = 0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(p as u64 + 1);
        tasks.push(tokio::spawn(produce(a.clone(), addrs.to_vec(), lmq, shared.clone(), seed)));
    }
    for c in 0..a.consumers {
        tasks.push(tokio::spawn(consume(
            a.clone(),
            addrs.to_vec(),
            lmq,
            shared.clone(),
            c,
            a.consumers,
        )));
    }
    tokio::time::sleep(Duration::from_secs(a.warmup)).await;
    let mut cpu = ProcSampler::new(broker.pid());
    shared.measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(a.duration)).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    let cpu_pct = cpu.sample().map_or(0.0, |(pct, _)| pct);
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.map_err(|e| BenchError::Invalid(e.to_string()))??;
    }
    let sent = shared.sent.load(Ordering::Relaxed);
    row.send_tps = sent as f64 / secs;
    row.consume_tps = shared.pulled.load(Ordering::Relaxed) as f64 / secs;
    row.send_us = Percentiles::of(&shared.latency.lock());
    row.send_errors = shared.errors.load(Ordering::Relaxed);
    row.pull_errors = shared.pull_errors.load(Ordering::Relaxed);
    row.pulls = shared.pulls.load(Ordering::Relaxed);
    row.cpu_us_per_msg = if sent > 0 {
        cpu_pct / 100.0 * secs * 1e6 / sent as f64
    } else {
        0.0
    };
    (row.rss_mb, row.anon_mb, row.maps, row.fds) = process_cost(broker.pid());
    Ok(())
}

/// Seconds from `since` until the light queue `name` holds a message: how long the broker
/// takes to file the fill's last message in its queues.
async fn readable_after(a: &QueuesArgs, name: &str, since: Instant) -> Result<f64, BenchError> {
    let client = Client::new(&a.namesrv);
    let deadline = since + Duration::from_secs(a.start_timeout_s);
    while client
        .max_offset(&a.broker, name, petrel_protocol::lmq::LMQ_QUEUE_ID)
        .await
        .unwrap_or(0)
        < 1
    {
        if Instant::now() > deadline {
            return Err(BenchError::Invalid(format!("{name} held nothing after {} s", a.start_timeout_s)));
        }
        tokio::time::sleep(START_POLL).await;
    }
    Ok(since.elapsed().as_secs_f64())
}

/// Every active queue's max offset against the sends it acknowledged; returns (queues, lost).
async fn check_acknowledged(a: &QueuesArgs, addrs: &[QueueAddr], lmq: bool, shared: &Shared) -> Result<(usize, u64), BenchError> {
    let client = Client::new(&a.namesrv);
    let mut lost = 0;
    for (q, acked) in shared.acked.iter().enumerate() {
        let (topic, queue_id) = if lmq {
            (lmq_name(q), petrel_protocol::lmq::LMQ_QUEUE_ID)
        } else {
            (a.topic.clone(), addrs[q].queue_id)
        };
        let max = client.max_offset(&a.broker, &topic, queue_id).await?;
        let expected = i64::from(acked.load(Ordering::Relaxed));
        lost += u64::try_from(expected - max).unwrap_or(0);
    }
    Ok((shared.acked.len(), lost))
}

/// One queue count, start to clean restart.
async fn row(a: &QueuesArgs, cmd: &str, queues: usize) -> Result<QueuesRow, BenchError> {
    let mut row = QueuesRow {
        broker: a.label.clone(),
        queues,
        ..QueuesRow::default()
    };
    let lmq = queues > PLAIN_TOPIC_QUEUES;
    let data = a.data.join(format!("{}-{queues}", a.label));
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data)?;
    let log = data.with_extension("log");
    let _ = std::fs::remove_file(&log);
    let max_queues = queues + 2 * a.fan_out + 16;
    let started = Instant::now();
    let mut broker = spawn(cmd, &data, max_queues, &log)?;
    let client = Client::new(&a.namesrv);
    let addrs = loop {
        match client
            .ensure_topic(&a.topic, i32::try_from(PLAIN_TOPIC_QUEUES).expect("4 fits"))
            .await
        {
            Ok(addrs) => break addrs,
            Err(_) if started.elapsed() < Duration::from_secs(a.start_timeout_s) => tokio::time::sleep(START_POLL).await,
            Err(e) => return Err(e.into()),
        }
    };
    row.first_start_s = started.elapsed().as_secs_f64();
    let tracked = if lmq { queues.min(a.active) } else { addrs.len() };
    let shared = Arc::new(Shared {
        acked: (0..tracked).map(|_| AtomicU32::new(0)).collect(),
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        sent: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        pulled: AtomicU64::new(0),
        pull_errors: AtomicU64::new(0),
        pulls: AtomicU64::new(0),
        latency: Mutex::new(new_histogram()),
    });
    let first = addrs.first().ok_or_else(|| BenchError::Invalid("the topic has no queue".into()))?;
    if lmq {
        row.fill_s = fill(a, queues, first, &shared).await?;
        row.fill_readable_s = readable_after(a, &lmq_name(queues - 1), Instant::now()).await?;
    }
    measure(a, &broker, &addrs, lmq, &shared, &mut row).await?;
    let (probe_topic, probe_queue) = if lmq {
        (lmq_name(0), 0)
    } else {
        (a.topic.clone(), addrs[0].queue_id)
    };
    broker.signal(nix::sys::signal::Signal::SIGKILL);
    let restarted = Instant::now();
    let mut broker = spawn(cmd, &data, max_queues, &log)?;
    row.recovery_s = wait_answering(a, &mut broker, &probe_topic, probe_queue, restarted).await?;
    (row.checked_queues, row.lost) = check_acknowledged(a, &addrs, lmq, &shared).await?;
    broker.signal(nix::sys::signal::Signal::SIGTERM);
    let restarted = Instant::now();
    let mut broker = spawn(cmd, &data, max_queues, &log)?;
    row.clean_start_s = wait_answering(a, &mut broker, &probe_topic, probe_queue, restarted).await?;
    broker.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = std::fs::remove_dir_all(&data);
    Ok(row)
}

/// The table of `rows`.
pub fn markdown(rows: &[QueuesRow]) -> String {
    let mut md = String::from(
        "| broker | queues | fill sent / readable | send msg/s | send P99 / P99.99 | errors | consume msg/s | CPU per send | RSS (anon) | maps | fds | recovery after kill -9 | lost / queues checked | clean start |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        if let Some(f) = &r.failure {
            md.push_str(&format!("| {} | {} | failed: {f} |||||||||||||\n", r.broker, r.queues));
            continue;
        }
        md.push_str(&format!(
            "| {} | {} | {:.1} s / {:.1} s | {:.0} | {} / {} | {} | {:.0} | {:.1} µs | {:.0} MiB ({:.0}) | {} | {} | {:.2} s | {} / {} | {:.2} s |\n",
            r.broker,
            r.queues,
            r.fill_s,
            r.fill_readable_s,
            r.send_tps,
            fmt_us(r.send_us.p99),
            fmt_us(r.send_us.p9999),
            r.send_errors,
            r.consume_tps,
            r.cpu_us_per_msg,
            r.rss_mb,
            r.anon_mb,
            r.maps,
            r.fds,
            r.recovery_s,
            r.lost,
            r.checked_queues,
            r.clean_start_s
        ));
    }
    md
}

/// `petrel bench queues`.
pub async fn queues(a: QueuesArgs) -> Result<(), BenchError> {
    let counts: Vec<usize> = a
        .counts
        .split(',')
        .map(|c| {
            c.trim()
                .parse()
                .map_err(|_| BenchError::Invalid(format!("--counts: {c} is not a count")))
        })
        .collect::<Result<_, _>>()?;
    if counts.is_empty() || a.producers == 0 || a.fan_out == 0 || a.active == 0 {
        return Err(BenchError::Invalid(
            "--counts, --producers, --fan-out and --active need at least one".into(),
        ));
    }
    let cmd = broker_command(&a)?;
    std::fs::create_dir_all(&a.out)?;
    let mut rows = Vec::new();
    for queues in counts {
        eprintln!("{}: {queues} queues", a.label);
        let r = row(&a, &cmd, queues).await.unwrap_or_else(|e| QueuesRow {
            broker: a.label.clone(),
            queues,
            failure: Some(e.to_string()),
            ..QueuesRow::default()
        });
        rows.push(r);
        std::fs::write(
            a.out.join(format!("queues-{}.json", a.label)),
            serde_json::to_vec_pretty(&rows).unwrap_or_default(),
        )?;
        std::fs::write(a.out.join(format!("queues-{}.md", a.label)), markdown(&rows))?;
    }
    println!("{}", markdown(&rows));
    if rows.iter().any(|r| r.lost > 0) {
        return Err(BenchError::Invalid("acknowledged messages were lost (see the table)".into()));
    }
    Ok(())
}
