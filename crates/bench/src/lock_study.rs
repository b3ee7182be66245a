//! `petrel bench lock-study`: runs `petrel serve` once per put-message lock and flush mode, and
//! measures TPS, broker CPU, P99 and P99.99 send latency for each message size and producer
//! count; writes a Markdown table, an SVG plot, and the adaptive lock's k and mode over time.
//!
//! Owns: the study's matrix and its write-up. Must never: compare cells measured under
//! different settings, or leave a broker running.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::hist::fmt_us;
use crate::run::{BenchError, Kind, SendMode, Workload, run};

/// The options of `petrel bench lock-study`.
#[derive(Args, Debug, Clone)]
pub struct LockStudyArgs {
    /// The petrel binary to run as the broker (default: this one).
    #[arg(long)]
    pub petrel: Option<PathBuf>,
    /// Put-message locks to compare (the broker's `putMessageLock` values).
    #[arg(long, default_value = "abs,mutex,spin,backoff", value_delimiter = ',')]
    pub locks: Vec<String>,
    /// Message body sizes in bytes.
    #[arg(long, default_value = "2,1024", value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Producer counts.
    #[arg(long, default_value = "1,4,16,64", value_delimiter = ',')]
    pub producers: Vec<usize>,
    /// Flush modes (the broker's `flushDiskType` values).
    #[arg(long, default_value = "ASYNC_FLUSH,SYNC_FLUSH", value_delimiter = ',')]
    pub flush: Vec<String>,
    /// Rounds over the whole matrix (brokers restarted each round); cells report medians.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Seconds measured per cell.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Seconds of warm-up per cell.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Where lock-study.md, lock-study.svg, lock-study-abs-trace.svg and lock-study.json go.
    #[arg(short = 'o', long, default_value = "docs")]
    pub out: PathBuf,
    /// First loopback port: the i-th lock's broker takes four from this + 4i: its fast port
    /// (+ 4i, the broker's port − 2, RocketMQ's VIP channel), its name server (+ 4i + 1), its
    /// port (+ 4i + 2) and its HA port (+ 4i + 3, the port + 1).
    #[arg(long, default_value_t = 41876)]
    pub base_port: u16,
    /// Data directory for the brokers, one folder per lock (removed after each flush mode).
    #[arg(long, default_value = "/tmp/petrel-lock-study")]
    pub data: PathBuf,
    /// Measure nothing: write the table and plots again from this lock-study.json (give the
    /// rounds, duration and warm-up it was run with).
    #[arg(long)]
    pub render: Option<PathBuf>,
}

/// What lock-study.json holds.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    machine: crate::report::Machine,
    #[serde(default)]
    command: Option<String>,
    cells: Vec<Cell>,
    rounds: Vec<Cell>,
    abs_trace: Vec<AbsSample>,
}

/// One measurement (or the medians of a cell's rounds) of a lock under one flush mode, size and producer count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// The broker's `flushDiskType`.
    pub flush: String,
    /// The broker's `putMessageLock`.
    pub lock: String,
    /// Message body size.
    pub size_bytes: usize,
    /// Producer count.
    pub producers: usize,
    /// Messages sent per second.
    pub tps: f64,
    /// The broker's mean CPU use, 100 = one core; 0 when it could not be sampled.
    pub cpu_pct: f64,
    /// Send latency P99.
    pub p99_us: u64,
    /// Send latency P99.99.
    pub p9999_us: u64,
    /// Failed sends (summed over rounds in a median cell).
    pub errors: u64,
}

impl Cell {
    /// Whether this is a measurement of (flush, lock, size, producers).
    fn is(&self, flush: &str, lock: &str, size: usize, producers: usize) -> bool {
        self.flush == flush && self.lock == lock && self.size_bytes == size && self.producers == producers
    }
}

/// The adaptive lock's state, sampled from GET_BROKER_RUNTIME_INFO.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbsSample {
    /// Seconds since the study started.
    pub t_s: f64,
    /// The flush mode the broker ran with.
    pub flush: String,
    /// The adaptive lock's k (`putMessageLockK`).
    pub k: u64,
    /// The lock mode it was in (`putMessageLockMode`).
    pub mode: String,
    /// Mode switches so far (`putMessageLockSwitches`).
    pub switches: u64,
}

struct Broker {
    child: Child,
    namesrv: String,
    broker_addr: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// Loopback ports each lock's broker takes: fast port, name server, broker port, HA port.
const PORTS_PER_BROKER: usize = 4;

/// The `index`-th broker of a block: its own ports and data directory.
fn start_broker(a: &LockStudyArgs, exe: &Path, index: usize, lock: &str, flush: &str) -> Result<Broker, BenchError> {
    let data = a.data.join(lock);
    let _ = std::fs::remove_dir_all(&data);
    // Four ports from `first`: fast port, name server, broker port, HA port (the broker's
    // defaults put the fast port 2 below its port and the HA port 1 above).
    let first = u16::try_from(PORTS_PER_BROKER * index)
        .ok()
        .and_then(|offset| a.base_port.checked_add(offset))
        .filter(|p| *p < u16::MAX - 3)
        .ok_or_else(|| BenchError::Invalid(format!("the ports of lock #{index} do not fit above --base-port {}", a.base_port)))?;
    let (ns_port, port) = (first + 1, first + 2);
    let ns = format!("127.0.0.1:{ns_port}");
    let child = Command::new(exe)
        .arg("serve")
        .args(["--store-dir", &data.display().to_string()])
        .args([
            "--namesrv-listen",
            &ns,
            "--listen-port",
            &port.to_string(),
            "--broker-ip",
            "127.0.0.1",
        ])
        .args([
            "--set",
            &format!("putMessageLock={lock}"),
            "--set",
            &format!("flushDiskType={flush}"),
            // One gRPC port (8081 by default) cannot serve four brokers; the study needs none.
            "--set",
            "grpcServerPort=0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let broker = Broker {
        child,
        namesrv: ns,
        broker_addr: format!("127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&broker.broker_addr).is_err() {
        if Instant::now() > deadline {
            return Err(BenchError::Invalid(format!("{} did not start", exe.display())));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(broker)
}

async fn abs_sample(client: &petrel_client::Client, addr: &str, flush: &str, t_s: f64) -> Option<AbsSample> {
    let info = client.runtime_info(addr).await.ok()?;
    let get = |k: &str| info.table.get(k).cloned();
    Some(AbsSample {
        t_s,
        flush: flush.to_owned(),
        k: get("putMessageLockK")?.parse().ok()?,
        mode: get("putMessageLockMode").unwrap_or_default(),
        switches: get("putMessageLockSwitches").and_then(|s| s.parse().ok()).unwrap_or(0),
    })
}

/// Runs the study (or, with `--render`, only rewrites its write-up) and writes it under `--out`.
#[expect(clippy::too_many_lines, reason = "one study: its runs in sequence, each a few lines")]
pub async fn lock_study(a: LockStudyArgs) -> Result<(), BenchError> {
    let exe = match &a.petrel {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    if let Some(path) = &a.render {
        let saved: Saved =
            serde_json::from_slice(&std::fs::read(path)?).map_err(|e| BenchError::Invalid(format!("{}: {e}", path.display())))?;
        let command = saved.command.clone().unwrap_or_else(|| {
            format!(
                "petrel bench lock-study --rounds {} --duration {} --warmup {} --out {}",
                a.rounds,
                a.duration,
                a.warmup,
                a.out.display()
            )
        });
        return write_study(&a, &saved.cells, &saved.rounds, &saved.abs_trace, &command, &saved.machine);
    }
    let mut cells = Vec::new();
    let mut trace = Vec::new();
    let study_start = Instant::now();
    let mut raw = Vec::new();
    for round in 1..=a.rounds.max(1) {
        for flush in &a.flush {
            // All locks' brokers run side by side, and each cell runs every lock back to back,
            // so a slow spell of the shared disk or CPU falls on all of them alike rather than
            // on whichever lock's block it hits.
            let brokers = a
                .locks
                .iter()
                .enumerate()
                .map(|(i, lock)| start_broker(&a, &exe, i, lock, flush))
                .collect::<Result<Vec<_>, _>>()?;
            let mut cell_index = 0;
            for &size in &a.sizes {
                for &producers in &a.producers {
                    cell_index += 1;
                    // The first lock of a cell meets the previous cell's write-back: rotate it.
                    for i in 0..a.locks.len() {
                        let which = (i + round + cell_index) % a.locks.len();
                        let (lock, broker) = (&a.locks[which], &brokers[which]);
                        let w = Workload {
                            kind: Kind::Produce,
                            namesrv: broker.namesrv.clone(),
                            topic: format!("LockStudy{size}"),
                            queues: 8,
                            producers,
                            consumers: 1,
                            message_bytes: size,
                            mode: SendMode::Sync,
                            rate: None,
                            warmup: Duration::from_secs_f64(a.warmup),
                            duration: Duration::from_secs_f64(a.duration),
                            count: None,
                            broker_pid: Some(broker.child.id()),
                            cgroup: None,
                            label: format!("{flush}-{lock}-{size}B-{producers}p"),
                            progress: false,
                            timeout: Duration::from_secs(10),
                            from_beginning: false,
                            credentials: None,
                        };
                        let client = petrel_client::Client::new(&broker.namesrv);
                        let handle = tokio::spawn(run(w));
                        while !handle.is_finished() {
                            // Every broker is asked, so the sampling costs each lock the same;
                            // only the adaptive lock has a k and a mode to record.
                            let sample = abs_sample(&client, &broker.broker_addr, flush, study_start.elapsed().as_secs_f64()).await;
                            if lock == "abs"
                                && let Some(s) = sample
                            {
                                trace.push(s);
                            }
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                        let report = handle.await.map_err(|e| BenchError::Invalid(e.to_string()))??;
                        let cell = Cell {
                            flush: flush.clone(),
                            lock: lock.clone(),
                            size_bytes: size,
                            producers,
                            tps: report.tps,
                            cpu_pct: report.broker.as_ref().map_or(0.0, |b| b.cpu_pct_mean),
                            p99_us: report.send_us.p99,
                            p9999_us: report.send_us.p9999,
                            errors: report.total_errors(),
                        };
                        eprintln!(
                            "round {round} {flush} {lock:>7} {size:>5} B {producers:>3} producers: {:>8.0} msg/s, CPU {:>4.0}%, P99 {}, P99.99 {}",
                            cell.tps,
                            cell.cpu_pct,
                            fmt_us(cell.p99_us),
                            fmt_us(cell.p9999_us)
                        );
                        raw.push(cell);
                    }
                }
            }
            drop(brokers);
            let _ = std::fs::remove_dir_all(&a.data);
        }
    }
    cells.extend(medians(&raw));
    let _ = std::fs::remove_dir_all(&a.data);
    let machine = crate::report::Machine::detect();
    write_study(&a, &cells, &raw, &trace, &command, &machine)
}

fn write_study(
    a: &LockStudyArgs,
    cells: &[Cell],
    raw: &[Cell],
    trace: &[AbsSample],
    command: &str,
    machine: &crate::report::Machine,
) -> Result<(), BenchError> {
    std::fs::create_dir_all(&a.out)?;
    let saved = Saved {
        machine: machine.clone(),
        command: Some(command.to_owned()),
        cells: cells.to_vec(),
        rounds: raw.to_vec(),
        abs_trace: trace.to_vec(),
    };
    std::fs::write(
        a.out.join("lock-study.json"),
        serde_json::to_string_pretty(&saved).expect("study serializes"),
    )?;
    plot_tps(cells, a, &a.out.join("lock-study.svg")).map_err(|e| BenchError::Invalid(e.to_string()))?;
    plot_trace(trace, &a.out.join("lock-study-abs-trace.svg")).map_err(|e| BenchError::Invalid(e.to_string()))?;
    let md = markdown(cells, raw, trace, a, command, machine);
    std::fs::write(a.out.join("lock-study.md"), &md)?;
    println!("{md}");
    Ok(())
}

/// One cell per (flush, lock, size, producers): the medians of its rounds.
pub fn medians(raw: &[Cell]) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::new();
    for c in raw {
        if find(&out, &c.flush, &c.lock, c.size_bytes, c.producers).is_some() {
            continue;
        }
        let same: Vec<&Cell> = raw.iter().filter(|x| x.is(&c.flush, &c.lock, c.size_bytes, c.producers)).collect();
        let m = |f: &dyn Fn(&Cell) -> f64| crate::compare::median_f64(same.iter().map(|x| f(x)).collect());
        out.push(Cell {
            tps: m(&|x| x.tps),
            cpu_pct: m(&|x| x.cpu_pct),
            p99_us: crate::compare::median_u64(same.iter().map(|x| x.p99_us).collect()),
            p9999_us: crate::compare::median_u64(same.iter().map(|x| x.p9999_us).collect()),
            errors: same.iter().map(|x| x.errors).sum(),
            ..c.clone()
        });
    }
    out
}

/// The cell for (flush, lock, size, producers).
fn find<'a>(cells: &'a [Cell], flush: &str, lock: &str, size: usize, producers: usize) -> Option<&'a Cell> {
    cells.iter().find(|c| c.is(flush, lock, size, producers))
}

/// ABS's TPS over `other`'s, round by round (the two ran back to back in each round).
fn paired_ratios(raw: &[Cell], flush: &str, other: &str, size: usize, producers: usize) -> Vec<f64> {
    let rounds = |lock: &str| {
        raw.iter()
            .filter(|x| x.is(flush, lock, size, producers))
            .map(|x| x.tps)
            .collect::<Vec<f64>>()
    };
    rounds("abs").iter().zip(rounds(other)).map(|(a, o)| a / o.max(1e-9)).collect()
}

/// Whether a gap is more than round-to-round noise: it is only when ABS was behind in every
/// round, measured side by side.
fn gap_verdict(ratios: &[f64]) -> String {
    let list = ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", ");
    let ahead = ratios.iter().filter(|&&r| r >= 1.0).count();
    if ahead == 0 {
        format!("behind in every round (round ratios {list})")
    } else {
        format!(
            "ahead in {ahead} of {} rounds (round ratios {list}), so the gap is within the noise",
            ratios.len()
        )
    }
}

/// One row per (size, producers): each lock's TPS and CPU, then ABS against the best fixed lock
/// (TPS) and against the mutex (CPU, and CPU per message, since more messages cost more CPU).
/// `raw` holds every round, to tell a gap from noise.
#[expect(clippy::too_many_lines, reason = "one report: a table row per figure")]
pub fn markdown(
    cells: &[Cell],
    raw: &[Cell],
    trace: &[AbsSample],
    a: &LockStudyArgs,
    command: &str,
    machine: &crate::report::Machine,
) -> String {
    let mut s = String::from("# Put-message lock study\n\n");
    let _ = writeln!(
        s,
        "Each cell: `petrel serve` with the named `putMessageLock`, {} s of sync sends after {} s of warm-up, \
         8 queues; TPS, the broker's mean CPU (100% = one core), and P99 / P99.99 send latency; medians of {} \
         rounds over the whole matrix. Each round starts one broker per lock side by side, and runs every \
         cell on all of them back to back, the first lock rotating from cell to cell; every broker's runtime \
         information is polled twice a second while it is measured. All rounds are in lock-study.json.\n",
        a.duration,
        a.warmup,
        a.rounds.max(1)
    );
    let _ = writeln!(s, "Command: `{command}`\n");
    let _ = writeln!(
        s,
        "Machine: {} cores, {}, Linux {}, petrel {}. The load generator runs on the same cores.\n",
        machine.cores, machine.cpu_model, machine.kernel, machine.git_revision
    );
    let fixed: Vec<&String> = a.locks.iter().filter(|l| l.as_str() != "abs").collect();
    let mut misses = Vec::new();
    for flush in &a.flush {
        let _ = writeln!(s, "## {flush}\n");
        let mut header = String::from("| size | producers |");
        let mut rule = String::from("|---|---|");
        for l in &a.locks {
            let _ = write!(header, " {l} msg/s (CPU) | {l} P99 / P99.99 |");
            rule.push_str("---|---|");
        }
        header.push_str(" ABS / best fixed (median of round ratios) | ABS CPU / mutex CPU | ABS CPU per msg / mutex |");
        rule.push_str("---|---|---|");
        let _ = writeln!(s, "{header}\n{rule}");
        for &size in &a.sizes {
            for &producers in &a.producers {
                let mut row = format!("| {size} B | {producers} |");
                for l in &a.locks {
                    match find(cells, flush, l, size, producers) {
                        Some(c) => {
                            let _ = write!(
                                row,
                                " {:.0} ({:.0}%) | {} / {} |",
                                c.tps,
                                c.cpu_pct,
                                fmt_us(c.p99_us),
                                fmt_us(c.p9999_us)
                            );
                        }
                        None => row.push_str(" – | – |"),
                    }
                }
                let abs = find(cells, flush, "abs", size, producers);
                let best = fixed
                    .iter()
                    .filter_map(|l| find(cells, flush, l, size, producers))
                    .max_by(|x, y| x.tps.total_cmp(&y.tps));
                let mutex = find(cells, flush, "mutex", size, producers);
                match (abs, best) {
                    (Some(abs), Some(best)) => {
                        // The median of the side-by-side round ratios: steadier than a ratio
                        // of two medians taken from different moments.
                        let ratios = paired_ratios(raw, flush, &best.lock, size, producers);
                        let r = if ratios.is_empty() {
                            abs.tps / best.tps.max(1e-9)
                        } else {
                            crate::compare::median_f64(ratios.clone())
                        };
                        let _ = write!(row, " {r:.2}× (best: {}) |", best.lock);
                        if r < 0.95 {
                            let verdict = gap_verdict(&ratios);
                            misses.push(format!(
                                "{flush} {size} B {producers} producers: {r:.2}× of {}; {verdict}",
                                best.lock
                            ));
                        }
                    }
                    _ => row.push_str(" – |"),
                }
                match (abs, mutex) {
                    (Some(abs), Some(m)) if m.cpu_pct > 0.0 && abs.tps > 0.0 && m.tps > 0.0 => {
                        let per_msg = (abs.cpu_pct / abs.tps) / (m.cpu_pct / m.tps);
                        let _ = write!(row, " {:.2}× | {per_msg:.2}× |", abs.cpu_pct / m.cpu_pct);
                    }
                    _ => row.push_str(" – | – |"),
                }
                let _ = writeln!(s, "{row}");
            }
        }
        s.push('\n');
    }
    let _ = writeln!(s, "![TPS by producers](lock-study.svg)\n");
    let _ = writeln!(s, "## The adaptive lock over time\n");
    let switches = trace.iter().map(|t| t.switches).max().unwrap_or(0);
    let ks: Vec<u64> = trace.iter().map(|t| t.k).collect();
    let _ = writeln!(
        s,
        "{} samples of k and mode (every 0.5 s while the ABS broker ran): k from {} to {}, {} switches between spinning and the mutex.\n",
        trace.len(),
        ks.iter().min().unwrap_or(&0),
        ks.iter().max().unwrap_or(&0),
        switches
    );
    let _ = writeln!(s, "![ABS k and mode over time](lock-study-abs-trace.svg)\n");
    let _ = writeln!(s, "## Cells where ABS is more than 5% below the best fixed lock\n");
    if misses.is_empty() {
        let _ = writeln!(s, "None.");
    } else {
        for m in misses {
            let _ = writeln!(s, "- {m}");
        }
    }
    s
}

fn plot_tps(cells: &[Cell], a: &LockStudyArgs, path: &Path) -> Result<(), crate::run::BenchError> {
    let panels: Vec<(String, usize)> = a.flush.iter().flat_map(|f| a.sizes.iter().map(move |s| (f.clone(), *s))).collect();
    let columns =
        u32::try_from(panels.len().max(1)).map_err(|_| BenchError::Invalid(format!("{} panels do not fit one plot", panels.len())))?;
    let root = SVGBackend::new(path, (520 * columns, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    let colors = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    let x_max = a.producers.iter().copied().max().unwrap_or(1) as f64;
    for ((flush, size), area) in panels.iter().zip(areas.iter()) {
        let y_max = cells
            .iter()
            .filter(|c| &c.flush == flush && c.size_bytes == *size)
            .map(|c| c.tps)
            .fold(1.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{flush}, {size} B"), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max * 1.05, 0.0..y_max)?;
        chart.configure_mesh().x_desc("producers").y_desc("msg/s").draw()?;
        for (i, lock) in a.locks.iter().enumerate() {
            let color = colors[i % colors.len()];
            let points: Vec<(f64, f64)> = a
                .producers
                .iter()
                .filter_map(|p| find(cells, flush, lock, *size, *p).map(|c| (*p as f64, c.tps)))
                .collect();
            crate::report::labelled_line(&mut chart, points, lock, color)?;
        }
        crate::report::draw_legend(&mut chart)?;
    }
    root.present()?;
    Ok(())
}

fn plot_trace(trace: &[AbsSample], path: &Path) -> Result<(), crate::run::BenchError> {
    let root = SVGBackend::new(path, (1000, 360)).into_drawing_area();
    root.fill(&WHITE)?;
    let t_max = trace.last().map_or(1.0, |t| t.t_s).max(1.0);
    let k_max = trace.iter().map(|t| t.k).max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("ABS: spin budget k (line) and mutex mode (dots at the top)", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, 0.0..k_max)?;
    chart.configure_mesh().x_desc("seconds into the study").y_desc("k").draw()?;
    chart.draw_series(LineSeries::new(trace.iter().map(|t| (t.t_s, t.k as f64)), &BLUE))?;
    chart.draw_series(
        trace
            .iter()
            .filter(|t| t.mode == "mutex")
            .map(|t| Circle::new((t.t_s, k_max * 0.97), 2, RED.filled())),
    )?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> LockStudyArgs {
        LockStudyArgs {
            petrel: None,
            rounds: 1,
            locks: vec!["abs".into(), "mutex".into(), "spin".into()],
            sizes: vec![2],
            producers: vec![1, 4],
            flush: vec!["ASYNC_FLUSH".into()],
            duration: 5.0,
            warmup: 1.0,
            out: PathBuf::from("docs"),
            base_port: 1,
            data: PathBuf::from("/tmp/x"),
            render: None,
        }
    }

    fn cell(lock: &str, producers: usize, tps: f64, cpu: f64) -> Cell {
        Cell {
            flush: "ASYNC_FLUSH".into(),
            lock: lock.into(),
            size_bytes: 2,
            producers,
            tps,
            cpu_pct: cpu,
            p99_us: 100,
            p9999_us: 1000,
            errors: 0,
        }
    }

    #[test]
    fn rounds_collapse_to_their_medians() {
        let raw = vec![
            cell("abs", 1, 100.0, 10.0),
            cell("abs", 1, 300.0, 30.0),
            cell("abs", 1, 200.0, 20.0),
            cell("mutex", 1, 5.0, 1.0),
        ];
        let m = medians(&raw);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].tps, m[0].cpu_pct), (200.0, 20.0));
        assert_eq!(m[1].tps, 5.0);
    }

    #[test]
    fn abs_is_compared_with_the_best_fixed_lock_and_misses_are_listed() {
        let cells = vec![
            cell("abs", 1, 980.0, 50.0),
            cell("mutex", 1, 1000.0, 100.0),
            cell("spin", 1, 900.0, 120.0),
            cell("abs", 4, 800.0, 90.0),
            cell("mutex", 4, 700.0, 90.0),
            cell("spin", 4, 1000.0, 200.0),
        ];
        let machine = crate::report::Machine {
            cores: 2,
            cpu_model: "cpu".into(),
            kernel: "k".into(),
            git_revision: "r".into(),
        };
        let mut raw = cells.clone();
        raw.push(cell("abs", 4, 900.0, 90.0));
        raw.push(cell("spin", 4, 1000.0, 200.0));
        let md = markdown(&cells, &raw, &[], &args(), "petrel bench lock-study", &machine);
        assert!(md.contains("| 2 B | 1 | 980 (50%) |"), "{md}");
        // CPU per message: (50 / 980) / (100 / 1000)
        assert!(md.contains("0.98× (best: mutex) | 0.50× | 0.51× |"), "{md}");
        assert!(md.contains("0.85× (best: spin) | 1.00× | 0.88× |"), "{md}");
        assert!(
            md.contains("- ASYNC_FLUSH 2 B 4 producers: 0.85× of spin; behind in every round (round ratios 0.80, 0.90)"),
            "{md}"
        );
        assert!(!md.contains("1 producers: 0.98"), "a 2% gap is within 5%: {md}");
    }

    #[test]
    fn a_gap_is_established_only_when_abs_is_behind_in_every_round() {
        assert!(gap_verdict(&[0.9, 0.95]).starts_with("behind in every round"));
        assert!(gap_verdict(&[0.9, 1.05]).starts_with("ahead in 1 of 2 rounds"));
    }
}
