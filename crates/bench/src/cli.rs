//! The `petrel bench` command line: `produce`, `consume`, `e2e` and `compare`.
//!
//! Owns: turning flags into workloads and printing results. Must never: start a run whose
//! options contradict each other (an error says which).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::compare::{Comparison, Side};
use crate::report::Report;
use crate::run::{BenchError, Kind, SendMode, Workload, run};

/// The subcommands of `petrel bench`.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Send messages and report send latency, TPS and errors.
    Produce(WorkloadArgs),
    /// Pull messages (new ones, or all with --from-beginning) and report consume rates.
    Consume(WorkloadArgs),
    /// Send and consume at once: send latency plus store→consume and born→consume latency.
    E2e(WorkloadArgs),
    /// The same workload against two name servers in alternation; medians and ratios.
    Compare(CompareArgs),
    /// Send and consume for a long time against a broker in a memory cgroup: rates, cgroup
    /// memory (anon + page cache), RSS and OOM kills every second; a table and SVG plots.
    Soak(crate::soak::SoakArgs),
    /// The seed's replication experiment: a master with 0–4 slaves, senders × receivers, the
    /// whole run's time against the number of replicas, and a fit of the seed's model.
    Replication(crate::replication::ReplicationArgs),
    /// Runs `petrel serve` with each put-message lock and writes docs/lock-study.md.
    LockStudy(crate::lock_study::LockStudyArgs),
    /// Idle RocketMQ clients (heartbeating) on one broker: memory per connection, and a
    /// producer's latency with and without them.
    Connections(crate::connections::ConnectionsArgs),
    /// Many queues on one broker (light message queues, 4 to a million): send and consume
    /// rates, RSS, mappings, fds, recovery after kill -9 with nothing acknowledged lost, and start-up.
    Queues(crate::queues::QueuesArgs),
    /// A process holding idle connections for `connections` (started by it).
    #[command(hide = true)]
    ConnectionsWorker(crate::connections::WorkerArgs),
}

/// `--mode`: how producers send.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    /// One send at a time per producer, each waiting for its answer.
    Sync,
    /// Up to --in-flight sends at once per producer.
    Async,
    /// Sends without an answer.
    Oneway,
    /// --batch messages per SEND_BATCH_MESSAGE, waiting for each answer.
    Batch,
}

/// The options of a produce, consume or e2e run.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Name server address(es), `host:port;host:port`.
    #[arg(short = 'n', long, default_value = "127.0.0.1:9876")]
    pub namesrv: String,
    /// Topic (created with --queues queues if missing).
    #[arg(short = 't', long, default_value = "PetrelBench")]
    pub topic: String,
    /// Queues of the topic when it is created.
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// Producers, each with its own connections.
    #[arg(short = 'p', long, default_value_t = 1)]
    pub producers: usize,
    /// Consumer connections (e2e and consume).
    #[arg(short = 'c', long, default_value_t = 1)]
    pub consumers: usize,
    /// Message body size in bytes (at least 8 for consume and e2e: the first 8 carry the birth time).
    #[arg(short = 's', long, default_value_t = 128)]
    pub size: usize,
    /// How producers send.
    #[arg(short = 'm', long, value_enum, default_value = "sync")]
    pub mode: ModeArg,
    /// Sends in flight per producer in async mode.
    #[arg(long, default_value_t = 64)]
    pub in_flight: usize,
    /// Messages per batch in batch mode.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Target messages per second for all producers (open loop; latency counts from the
    /// intended send time). Without it: as fast as possible.
    #[arg(short = 'r', long)]
    pub rate: Option<f64>,
    /// Seconds of warm-up, not measured.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Seconds measured.
    #[arg(short = 'd', long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many measured messages.
    #[arg(long)]
    pub count: Option<u64>,
    /// Sample this process's CPU and RSS (the broker under test).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Sample this memory cgroup every second too (the broker's: usage, anon, page cache, OOM kills).
    #[arg(long)]
    pub cgroup: Option<PathBuf>,
    /// Where the JSON, Markdown and SVG reports go.
    #[arg(short = 'o', long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Report name (default: workload, mode, size, producers).
    #[arg(short = 'l', long)]
    pub label: Option<String>,
    /// No live progress line.
    #[arg(long)]
    pub no_progress: bool,
    /// Request timeout, milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// consume: start at the beginning of each queue instead of its end (the backlog counts in
    /// the consume rate; latencies are of messages sent during the run).
    #[arg(long)]
    pub from_beginning: bool,
    /// Sign every request as this user, as RocketMQ's `AclClientRPCHook` does (a broker with
    /// `authenticationEnabled`); with --secret-key.
    #[arg(long, requires = "secret_key")]
    pub access_key: Option<String>,
    /// The secret key that signs the requests of --access-key.
    #[arg(long, requires = "access_key")]
    pub secret_key: Option<String>,
}

/// The options of `petrel bench compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Name server of side A.
    #[arg(long)]
    pub a: String,
    /// Name server of side B.
    #[arg(long)]
    pub b: String,
    /// Name of side A in the reports.
    #[arg(long, default_value = "A")]
    pub label_a: String,
    /// Name of side B in the reports.
    #[arg(long, default_value = "B")]
    pub label_b: String,
    /// Broker process of side A, for CPU and RSS.
    #[arg(long)]
    pub pid_a: Option<u32>,
    /// Broker process of side B.
    #[arg(long)]
    pub pid_b: Option<u32>,
    /// Rounds per side (at least 3).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// produce or e2e.
    #[arg(long, default_value = "produce")]
    pub workload: String,
    /// The workload each round runs; its --namesrv, --broker-pid and --label are set per side.
    #[command(flatten)]
    pub run: WorkloadArgs,
}

impl WorkloadArgs {
    /// The workload of a `kind` run with these options.
    ///
    /// # Errors
    /// [`BenchError::Invalid`] when the options contradict each other or are out of range.
    pub fn workload(&self, kind: Kind) -> Result<Workload, BenchError> {
        if self.size < 8 && kind != Kind::Produce {
            return Err(BenchError::Invalid(
                "--size must be at least 8 bytes to consume (they carry the birth time)".into(),
            ));
        }
        if self.rate.is_some_and(|r| r <= 0.0) {
            return Err(BenchError::Invalid("--rate must be positive".into()));
        }
        if self.duration <= 0.0 || self.warmup < 0.0 {
            return Err(BenchError::Invalid("--duration must be positive and --warmup not negative".into()));
        }
        let mode = match self.mode {
            ModeArg::Sync => SendMode::Sync,
            ModeArg::Async => SendMode::Async {
                in_flight: self.in_flight.max(1),
            },
            ModeArg::Oneway => SendMode::Oneway,
            ModeArg::Batch => SendMode::Batch { size: self.batch.max(1) },
        };
        let label = self.label.clone().unwrap_or_else(|| {
            format!(
                "{}-{}-{}B-{}p",
                kind.name(),
                format!("{:?}", self.mode).to_lowercase(),
                self.size,
                self.producers
            )
        });
        Ok(Workload {
            kind,
            namesrv: self.namesrv.clone(),
            topic: self.topic.clone(),
            queues: self.queues.max(1),
            producers: self.producers,
            consumers: self.consumers.max(1),
            message_bytes: self.size,
            mode,
            rate: self.rate,
            warmup: Duration::from_secs_f64(self.warmup),
            duration: Duration::from_secs_f64(self.duration),
            count: self.count,
            broker_pid: self.broker_pid,
            cgroup: self.cgroup.clone(),
            label,
            progress: !self.no_progress,
            timeout: Duration::from_millis(self.timeout_ms.max(1)),
            from_beginning: self.from_beginning,
            credentials: self
                .access_key
                .clone()
                .zip(self.secret_key.clone())
                .map(|(access_key, secret_key)| petrel_client::Credentials { access_key, secret_key }),
        })
    }
}

fn print_report(report: &Report, out: &std::path::Path) -> Result<(), BenchError> {
    println!("{}", report.to_markdown());
    let files = report.write(out)?;
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    println!("reports: {}", names.join(", "));
    Ok(())
}

/// Runs a bench subcommand; the report is printed and written under `--out`.
pub async fn execute(command: BenchCommand) -> Result<(), BenchError> {
    match command {
        BenchCommand::Produce(a) => print_report(&run(a.workload(Kind::Produce)?).await?, &a.out),
        BenchCommand::Consume(a) => print_report(&run(a.workload(Kind::Consume)?).await?, &a.out),
        BenchCommand::E2e(a) => print_report(&run(a.workload(Kind::E2e)?).await?, &a.out),
        BenchCommand::Compare(c) => compare(c).await,
        BenchCommand::Soak(a) => crate::soak::soak(a).await,
        BenchCommand::LockStudy(a) => crate::lock_study::lock_study(a).await,
        BenchCommand::Replication(a) => crate::replication::replication(a).await,
        BenchCommand::Connections(a) => crate::connections::connections(a).await,
        BenchCommand::Queues(a) => crate::queues::queues(a).await,
        BenchCommand::ConnectionsWorker(a) => crate::connections::worker(a).await,
    }
}

async fn compare(c: CompareArgs) -> Result<(), BenchError> {
    if c.rounds < 3 {
        return Err(BenchError::Invalid("--rounds must be at least 3".into()));
    }
    let kind = match c.workload.as_str() {
        "produce" => Kind::Produce,
        "e2e" => Kind::E2e,
        other => return Err(BenchError::Invalid(format!("--workload {other}: expected produce or e2e"))),
    };
    let mut runs_a = Vec::new();
    let mut runs_b = Vec::new();
    for round in 1..=c.rounds {
        for (side, ns, pid, label) in [("a", &c.a, c.pid_a, &c.label_a), ("b", &c.b, c.pid_b, &c.label_b)] {
            let mut args = c.run.clone();
            args.namesrv = ns.clone();
            args.broker_pid = pid;
            args.label = Some(format!("{label}-round{round}"));
            let report = run(args.workload(kind)?).await?;
            eprintln!(
                "round {round} {label}: {:.0} msg/s, P99 {}, errors {}",
                report.tps,
                crate::hist::fmt_us(report.send_us.p99),
                report.total_errors()
            );
            report.write(&c.run.out)?;
            if side == "a" { runs_a.push(report) } else { runs_b.push(report) }
        }
    }
    let cmp = Comparison {
        a: Side::of(&c.label_a, &c.a, &runs_a),
        b: Side::of(&c.label_b, &c.b, &runs_b),
    };
    let md = cmp.to_markdown();
    println!("{md}");
    std::fs::create_dir_all(&c.run.out)?;
    let base = c.run.out.join(format!("compare-{}-vs-{}", c.label_a, c.label_b));
    std::fs::write(base.with_extension("md"), &md)?;
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(&cmp).expect("comparisons serialize"),
    )?;
    println!("reports: {}.md, {}.json", base.display(), base.display());
    Ok(())
}
