//! `petrel bench connections`: many idle RocketMQ clients on one broker — what each costs the
//! broker in memory, and what they do to a producer's tail latency.
//!
//! Idle clients live in worker processes (`petrel bench connections-worker`, one per
//! `--per-process` connections: a process can hold only as many sockets as its open-file limit),
//! each connection sending a HEART_BEAT as a producer when it connects and every
//! `--heartbeat-s`, as the official clients do (spread over the interval, as clients started at
//! different moments spread them). For each connection count the broker's
//! anonymous resident memory is read from /proc before and after, and the producer workload runs
//! with the connections open; a run without them comes first, as the baseline.
//!
//! Owns: the worker processes and the table. Must never: leave a worker behind (they are killed
//! when their count is done, and they exit when their stdin closes).

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use petrel_client::{Client, Connection};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use serde::Serialize;

use crate::cli::WorkloadArgs;
use crate::hist::fmt_us;
use crate::run::{BenchError, Kind, run};

/// How long all workers together may take to connect and send their first heartbeats.
const CONNECT_DEADLINE: Duration = Duration::from_secs(300);
/// Connects under way at once in one worker (the listen backlog is finite).
const CONNECTS_AT_ONCE: usize = 256;

/// The options of `petrel bench connections`.
#[derive(Args, Debug, Clone)]
pub struct ConnectionsArgs {
    /// Idle connection counts to measure, comma-separated.
    #[arg(long, default_value = "1000,10000")]
    pub connections: String,
    /// Idle connections per worker process (each process's open-file limit bounds it).
    #[arg(long, default_value_t = 9000)]
    pub per_process: usize,
    /// Seconds between an idle client's heartbeats (the official clients: 30).
    #[arg(long, default_value_t = 30)]
    pub heartbeat_s: u64,
    /// Seconds to wait after the connections are up before reading the broker's memory.
    #[arg(long, default_value_t = 3.0)]
    pub settle_s: f64,
    /// The producer workload run beside the idle connections (`--broker-pid` is required).
    #[command(flatten)]
    pub run: WorkloadArgs,
}

/// The options of a `connections-worker` process, set by `connections`.
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// The broker's address.
    #[arg(long)]
    pub broker: String,
    /// Idle connections to open and hold.
    #[arg(long)]
    pub count: usize,
    /// Seconds between each connection's heartbeats.
    #[arg(long, default_value_t = 30)]
    pub heartbeat_s: u64,
    /// Distinguishes this worker's client ids.
    #[arg(long, default_value_t = 0)]
    pub id: usize,
}

#[derive(Debug, Serialize)]
struct Row {
    connections: usize,
    broker_anon_rss_delta_bytes: i64,
    bytes_per_connection: f64,
    tps: f64,
    p50_us: u64,
    p99_us: u64,
    p9999_us: u64,
    max_us: u64,
    errors: u64,
}

/// The broker's anonymous resident memory (`RssAnon`), bytes.
fn anon_rss_bytes(pid: u32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: i64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn heartbeat_request(client_id: &str) -> RemotingCommand {
    let body = format!(
        r#"{{"clientID":"{client_id}","consumerDataSet":[],"heartbeatFingerprint":0,"producerDataSet":[{{"groupName":"bench_idle"}}],"withoutSub":false}}"#
    );
    RemotingCommand::request(rc::HEART_BEAT, 0).with_body(body.into_bytes())
}

async fn heartbeat(conn: &Connection, client_id: &str) -> Result<(), BenchError> {
    let answer = conn.call(heartbeat_request(client_id), Duration::from_secs(30)).await?;
    if answer.code != resp::SUCCESS {
        return Err(BenchError::Invalid(format!("heartbeat refused: {:?}", answer.remark)));
    }
    Ok(())
}

/// The worker process: connects, heartbeats, says `ready`, and keeps heartbeating until its
/// stdin closes.
pub async fn worker(args: WorkerArgs) -> Result<(), BenchError> {
    let gate = Arc::new(tokio::sync::Semaphore::new(CONNECTS_AT_ONCE));
    let mut joins = Vec::with_capacity(args.count);
    for i in 0..args.count {
        let (gate, broker, id) = (gate.clone(), args.broker.clone(), format!("idle-{}-{i}", args.id));
        joins.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.map_err(|e| BenchError::Invalid(e.to_string()))?;
            let conn = Connection::connect(&broker).await?;
            heartbeat(&conn, &id).await?;
            Ok::<_, BenchError>((conn, id))
        }));
    }
    let mut conns = Vec::with_capacity(args.count);
    for j in joins {
        conns.push(j.await.map_err(|e| BenchError::Invalid(e.to_string()))??);
    }
    println!("ready {}", conns.len());
    std::io::stdout().flush()?;
    let stdin_closed = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
    });
    tokio::pin!(stdin_closed);
    // Independent clients started at different moments heartbeat at different moments: one
    // client's heartbeat per slot, each client once per interval, rather than all at once.
    let interval = Duration::from_secs(args.heartbeat_s.max(1));
    let slot = interval / u32::try_from(conns.len().max(1)).unwrap_or(u32::MAX);
    let mut tick = tokio::time::interval(slot.max(Duration::from_micros(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    for (conn, id) in conns.iter().cycle() {
        tokio::select! {
            _ = &mut stdin_closed => return Ok(()),
            _ = tick.tick() => {
                // A heartbeat that fails is counted by the broker's expiry, not here.
                let _ = conn.call(heartbeat_request(id), Duration::from_secs(30)).await;
            }
        }
    }
    Ok(())
}

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts workers holding `n` connections; returns once every one reported ready.
fn spawn_workers(broker: &str, n: usize, per_process: usize, heartbeat_s: u64) -> Result<Workers, BenchError> {
    let exe = std::env::current_exe()?;
    let mut workers = Workers(Vec::new());
    let mut left = n;
    while left > 0 {
        let count = left.min(per_process.max(1));
        let child = Command::new(&exe)
            .args(["bench", "connections-worker", "--broker", broker])
            .args(["--count", &count.to_string(), "--heartbeat-s", &heartbeat_s.to_string()])
            .args(["--id", &workers.0.len().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        workers.0.push(child);
        left -= count;
    }
    let deadline = Instant::now() + CONNECT_DEADLINE;
    for child in &mut workers.0 {
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| BenchError::Invalid("worker without stdout".into()))?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        if !line.starts_with("ready") || Instant::now() > deadline {
            return Err(BenchError::Invalid(format!(
                "a connections worker did not get ready (said {line:?}); is the open-file limit high enough?"
            )));
        }
    }
    Ok(workers)
}

/// Runs the whole measurement and prints the table.
pub async fn connections(args: ConnectionsArgs) -> Result<(), BenchError> {
    let pid = args
        .run
        .broker_pid
        .ok_or_else(|| BenchError::Invalid("--broker-pid is required: the broker's memory is what is measured".into()))?;
    let counts: Vec<usize> = args
        .connections
        .split(',')
        .map(|c| c.trim().parse().map_err(|_| BenchError::Invalid(format!("--connections: {c:?}"))))
        .collect::<Result<_, _>>()?;
    let client = Client::new(&args.run.namesrv);
    let broker = client
        .ensure_topic(&args.run.topic, args.run.queues)
        .await?
        .first()
        .map(|q| q.broker_addr.clone())
        .ok_or_else(|| BenchError::Invalid("the topic has no broker".into()))?;
    let mut rows = Vec::new();
    for n in std::iter::once(0).chain(counts) {
        let before = anon_rss_bytes(pid).ok_or_else(|| BenchError::Invalid(format!("cannot read /proc/{pid}/status")))?;
        let workers = if n > 0 {
            Some(spawn_workers(&broker, n, args.per_process, args.heartbeat_s)?)
        } else {
            None
        };
        tokio::time::sleep(Duration::from_secs_f64(args.settle_s)).await;
        let after = anon_rss_bytes(pid).unwrap_or(before);
        let mut w = args.run.clone();
        w.label = Some(format!("connections-{n}"));
        let report = run(w.workload(Kind::Produce)?).await?;
        report.write(&args.run.out)?;
        drop(workers);
        let delta = after - before;
        rows.push(Row {
            connections: n,
            broker_anon_rss_delta_bytes: delta,
            bytes_per_connection: if n > 0 { delta as f64 / n as f64 } else { 0.0 },
            tps: report.tps,
            p50_us: report.send_us.p50,
            p99_us: report.send_us.p99,
            p9999_us: report.send_us.p9999,
            max_us: report.send_us.max,
            errors: report.total_errors(),
        });
        eprintln!(
            "{n} idle connections: {:.1} KiB each; producer P99.99 {}",
            delta as f64 / n.max(1) as f64 / 1024.0,
            fmt_us(report.send_us.p9999)
        );
        // Let the broker see the closed connections go before the next count.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    print_table(&rows, &args.run.out)
}

fn print_table(rows: &[Row], out: &std::path::Path) -> Result<(), BenchError> {
    let base = rows.first().map_or(0, |r| r.p9999_us);
    let mut md = String::from(
        "| idle connections | broker RssAnon delta | per connection | producer msg/s | P50 | P99 | P99.99 | max | P99.99 vs none | errors |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {:.1} MiB | {:.2} KiB | {:.0} | {} | {} | {} | {} | {:.2} | {} |\n",
            r.connections,
            r.broker_anon_rss_delta_bytes as f64 / (1 << 20) as f64,
            r.bytes_per_connection / 1024.0,
            r.tps,
            fmt_us(r.p50_us),
            fmt_us(r.p99_us),
            fmt_us(r.p9999_us),
            fmt_us(r.max_us),
            if base > 0 { r.p9999_us as f64 / base as f64 } else { 0.0 },
            r.errors
        ));
    }
    println!("{md}");
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("connections.md"), &md)?;
    std::fs::write(
        out.join("connections.json"),
        serde_json::to_string_pretty(rows).map_err(|e| BenchError::Invalid(e.to_string()))?,
    )?;
    Ok(())
}
