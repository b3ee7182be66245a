//! `petrel bench replication`: the seed study's experiment. For each number of slaves (0–4) it
//! starts a master and its slaves (`petrel serve` processes on this machine), waits until every
//! slave is in sync, and for each cell of senders × receivers sends a fixed number of messages
//! and measures the whole run — first message sent to last message received — with the send
//! latency percentiles. It writes a table, an SVG of time against replicas (one line per cell)
//! and a fit of the seed's model.
//!
//! The seed's model: one replica costs `T_send + T_recv + T_rep`; n replicas cost
//! `T_send + n·T_recv + T_rep` when the replicas' work dominates the communication, and
//! `n·(T_send + T_recv)` when not. The fit here is `T(n) = T(0) + c₁·[n ≥ 1] + c₂·(n − 1)`,
//! least squares over n ≥ 1: c₁ is the first replica's cost (`T_send + T_recv + T_rep`), c₂ each
//! further replica's (`T_recv` in the first regime, `T_send + T_recv` in the second).
//!
//! Owns: the broker set's processes and the matrix. Must never: measure a cell before the
//! slaves are in sync, or leave a process behind (they are killed on drop).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::report::{draw_legend, labelled_line};
use crate::run::{BenchError, Kind, SendMode, Workload, run};

/// The options of `petrel bench replication`.
#[derive(Args, Debug, Clone)]
pub struct ReplicationArgs {
    /// Slaves per run, comma-separated.
    #[arg(long, default_value = "0,1,2,3,4", value_delimiter = ',')]
    pub replicas: Vec<usize>,
    /// Cells, `SENDERSxRECEIVERS`, comma-separated.
    #[arg(long, default_value = "1x1,10x10,100x100", value_delimiter = ',')]
    pub cells: Vec<String>,
    /// Messages per cell.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// `SYNC_MASTER` (a send waits for every slave: `allAckInSyncStateSet`) or `ASYNC_MASTER`.
    #[arg(long, default_value = "SYNC_MASTER")]
    pub role: String,
    /// The brokers' `flushDiskType`: `ASYNC_FLUSH` or `SYNC_FLUSH`.
    #[arg(long, default_value = "ASYNC_FLUSH")]
    pub flush: String,
    /// Body size, bytes (at least 8: they carry the birth time).
    #[arg(short = 's', long, default_value_t = 128)]
    pub size: usize,
    /// Queues of each cell's topic (raised to the receiver count, so each receiver has one).
    #[arg(long, default_value_t = 4)]
    pub queues: i32,
    /// The `petrel` binary to run (default: this one).
    #[arg(long)]
    pub petrel: Option<PathBuf>,
    /// First of the ports the broker set uses (4 per process).
    #[arg(long, default_value_t = 41000)]
    pub base_port: u16,
    /// Where the processes keep their data (removed before each run).
    #[arg(long, default_value = "bench-results/replication-data")]
    pub data: PathBuf,
    /// Where the reports go: each cell's, and `replication.{json,md,svg}`.
    #[arg(short = 'o', long, default_value = "bench-results/replication")]
    pub out: PathBuf,
    /// Measure the cells against a running cluster at this name server instead of starting
    /// one (Apache RocketMQ, say); `--replicas` then names its one slave count for the table.
    #[arg(long)]
    pub external: Option<String>,
    /// Name of the broker in the report (`petrel`, `rocketmq`).
    #[arg(long, default_value = "petrel")]
    pub label: String,
    /// With `--external`: the master's process id, then its slaves', comma-separated, for the
    /// CPU each uses per message (the processes this tool starts are measured without it).
    #[arg(long, value_delimiter = ',')]
    pub pids: Vec<u32>,
    /// A setting for every broker this tool starts, `key=value` (as `petrel serve --set`);
    /// repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

/// One measured cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// Slaves of the master.
    pub replicas: usize,
    /// Producers.
    pub senders: usize,
    /// Consumers.
    pub receivers: usize,
    /// Messages sent.
    pub messages: u64,
    /// First sent to last received.
    pub run_s: f64,
    /// Messages over `run_s`.
    pub msgs_per_s: f64,
    /// Send latency P50.
    pub send_p50_us: u64,
    /// Send latency P99.
    pub send_p99_us: u64,
    /// Send latency P99.99.
    pub send_p9999_us: u64,
    /// Messages received.
    pub consumed: u64,
    /// Failed requests.
    pub errors: u64,
    /// The master's CPU time per message sent, µs (user and system, from /proc).
    #[serde(default)]
    pub master_cpu_us: Option<f64>,
    /// Every slave's CPU time together per message sent, µs; `None` without slaves.
    #[serde(default)]
    pub slaves_cpu_us: Option<f64>,
}

/// The fit of one cell's times against the number of replicas.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fit {
    /// The cell's producers.
    pub senders: usize,
    /// The cell's consumers.
    pub receivers: usize,
    /// The time with no slave.
    pub t0_s: f64,
    /// The first replica's cost.
    pub first_s: f64,
    /// Each further replica's cost.
    pub further_s: f64,
}

/// Least-squares fit of `T(n) = T(0) + c₁ + c₂·(n − 1)` over the points with n ≥ 1; `None`
/// without a point at 0 replicas and one above.
#[must_use]
pub fn fit(points: &[(usize, f64)]) -> Option<(f64, f64, f64)> {
    let t0 = points.iter().find(|(n, _)| *n == 0)?.1;
    let rest: Vec<(f64, f64)> = points.iter().filter(|(n, _)| *n >= 1).map(|(n, t)| ((*n - 1) as f64, *t)).collect();
    if rest.is_empty() {
        return None;
    }
    let k = rest.len() as f64;
    let (mx, my) = (rest.iter().map(|p| p.0).sum::<f64>() / k, rest.iter().map(|p| p.1).sum::<f64>() / k);
    let sxx: f64 = rest.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = if sxx > 0.0 {
        rest.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx
    } else {
        0.0
    };
    let intercept = my - slope * mx;
    Some((t0, intercept - t0, slope))
}

struct Node {
    child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `index`-th process (0 = the master): name server, broker and HA ports from `base`.
fn start_node(a: &ReplicationArgs, exe: &Path, index: usize) -> Result<Node, BenchError> {
    // The node's highest port is `base + 2`, so that must fit in u16 too.
    let base = u16::try_from(4 * index)
        .ok()
        .and_then(|offset| a.base_port.checked_add(offset))
        .filter(|b| b.checked_add(2).is_some())
        .ok_or_else(|| BenchError::Invalid(format!("the ports of node {index} do not fit above --base-port {}", a.base_port)))?;
    let (ns_port, port, ha_port) = (a.base_port, base + 1, base + 2);
    let dir = a.data.join(format!("node{index}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let role = if index == 0 { a.role.clone() } else { "SLAVE".into() };
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .args(["--store-dir", &dir.join("data").display().to_string()])
        .args(["--listen-port", &port.to_string(), "--broker-ip", "127.0.0.1"])
        .args(["--set", &format!("brokerRole={role}"), "--set", &format!("brokerId={index}")])
        .args([
            "--set",
            &format!("haListenPort={ha_port}"),
            "--set",
            &format!("flushDiskType={}", a.flush),
        ])
        .args(["--set", "allAckInSyncStateSet=true"]);
    for setting in &a.settings {
        cmd.args(["--set", setting]);
    }
    if index == 0 {
        cmd.args(["--namesrv-listen", &format!("127.0.0.1:{ns_port}")]);
    } else {
        cmd.args(["--namesrv-addr", &format!("127.0.0.1:{ns_port}")]);
    }
    let log = std::fs::File::create(dir.join("petrel.log"))?;
    let child = cmd.stdout(Stdio::from(log.try_clone()?)).stderr(Stdio::from(log)).spawn()?;
    let node = Node { child };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(BenchError::Invalid(format!("node {index} did not start; see {}", dir.display())));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(node)
}

/// Waits until the master counts `replicas` slaves in sync (its runtime info says) and a send
/// is acknowledged.
async fn wait_in_sync(namesrv: &str, topic: &str, queues: i32, replicas: usize) -> Result<(), BenchError> {
    let client = petrel_client::Client::new(namesrv);
    let deadline = Instant::now() + Duration::from_secs(60);
    let qs = client.ensure_topic(topic, queues).await?;
    let q = qs.first().ok_or_else(|| BenchError::Invalid("the topic has no queue".into()))?;
    loop {
        let req = petrel_client::Client::send_request(
            "petrel_bench_replication",
            q,
            topic,
            bytes::Bytes::from_static(b"probe-probe"),
            &petrel_protocol::properties::Properties::default(),
            0,
        );
        let answer = client.call(&q.broker_addr, req).await?;
        let connected = client
            .runtime_info(&q.broker_addr)
            .await
            .ok()
            .and_then(|i| i.table.get("haInSyncSlaves").and_then(|v| v.parse::<usize>().ok()))
            .unwrap_or(0);
        if answer.code == 0 && connected >= replicas {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Invalid(format!(
                "{connected} of {replicas} slaves connected after 60 s (last answer {})",
                answer.code
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `"10x20"` → (10, 20).
fn parse_cell(cell: &str) -> Result<(usize, usize), BenchError> {
    let bad = || BenchError::Invalid(format!("--cells {cell:?}: expected SENDERSxRECEIVERS"));
    let (s, r) = cell.split_once('x').ok_or_else(bad)?;
    let (s, r) = (s.parse().map_err(|_| bad())?, r.parse().map_err(|_| bad())?);
    if s == 0 || r == 0 {
        return Err(bad());
    }
    Ok((s, r))
}

/// CPU seconds of each process in `pids` (the master first), read now.
fn cpu_of(pids: &[u32]) -> Vec<Option<f64>> {
    pids.iter().map(|p| crate::procstat::cpu_s(*p)).collect()
}

/// (master, slaves together) CPU µs per message between two readings of [`cpu_of`].
fn cpu_per_message(before: &[Option<f64>], after: &[Option<f64>], messages: u64) -> (Option<f64>, Option<f64>) {
    let used = |i: usize| Some(after.get(i).copied()?? - before.get(i).copied()??);
    let per = |s: f64| s * 1e6 / messages.max(1) as f64;
    let master = used(0).map(per);
    let slaves = (before.len() > 1)
        .then(|| (1..before.len()).map(used).sum::<Option<f64>>().map(per))
        .flatten();
    (master, slaves)
}

async fn measure(
    a: &ReplicationArgs,
    namesrv: &str,
    (replicas, pids): (usize, &[u32]),
    senders: usize,
    receivers: usize,
) -> Result<Cell, BenchError> {
    let topic = format!("Repl{senders}x{receivers}");
    let cpu_before = cpu_of(pids);
    let report = run(Workload {
        kind: Kind::E2e,
        namesrv: namesrv.to_owned(),
        topic,
        // Every receiver gets a queue of its own.
        queues: a.queues.max(i32::try_from(receivers).unwrap_or(i32::MAX)),
        producers: senders,
        consumers: receivers,
        message_bytes: a.size.max(8),
        mode: SendMode::Sync,
        rate: None,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(3600),
        count: Some(a.messages),
        broker_pid: None,
        cgroup: None,
        label: format!("replication-{replicas}r-{senders}x{receivers}"),
        progress: false,
        timeout: Duration::from_secs(10),
        from_beginning: false,
        credentials: None,
    })
    .await?;
    let cpu_after = cpu_of(pids);
    report.write(&a.out)?;
    let run_s = report.drained_s.unwrap_or(report.measured_s);
    let (master_cpu_us, slaves_cpu_us) = cpu_per_message(&cpu_before, &cpu_after, report.messages);
    Ok(Cell {
        replicas,
        senders,
        receivers,
        messages: report.messages,
        run_s,
        msgs_per_s: report.messages as f64 / run_s.max(1e-6),
        send_p50_us: report.send_us.p50,
        send_p99_us: report.send_us.p99,
        send_p9999_us: report.send_us.p9999,
        consumed: report.consumed,
        errors: report.total_errors(),
        master_cpu_us,
        slaves_cpu_us,
    })
}

/// Runs the matrix and writes `replication.{json,md,svg}` under `--out`.
///
/// # Errors
/// A bad option, a process that does not start, slaves that do not get in sync, a failed run.
pub async fn replication(a: ReplicationArgs) -> Result<(), BenchError> {
    if a.role != "SYNC_MASTER" && a.role != "ASYNC_MASTER" {
        return Err(BenchError::Invalid("--role: SYNC_MASTER or ASYNC_MASTER".into()));
    }
    let cells: Vec<(usize, usize)> = a.cells.iter().map(|c| parse_cell(c)).collect::<Result<_, _>>()?;
    let exe = match &a.petrel {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    std::fs::create_dir_all(&a.out)?;
    let mut results = Vec::new();
    if let Some(namesrv) = &a.external {
        let [replicas] = a.replicas[..] else {
            return Err(BenchError::Invalid("--external: give one --replicas value, the cluster's".into()));
        };
        wait_in_sync(namesrv, "ReplProbe", a.queues, 0).await?;
        for &(senders, receivers) in &cells {
            results.push(measure(&a, namesrv, (replicas, &a.pids), senders, receivers).await?);
        }
        return write_results(&a, &results);
    }
    let namesrv = format!("127.0.0.1:{}", a.base_port);
    for &replicas in &a.replicas {
        let mut nodes = vec![start_node(&a, &exe, 0)?];
        for i in 1..=replicas {
            nodes.push(start_node(&a, &exe, i)?);
        }
        wait_in_sync(&namesrv, "ReplProbe", a.queues, replicas).await?;
        let pids: Vec<u32> = nodes.iter().map(|n| n.child.id()).collect();
        for &(senders, receivers) in &cells {
            let cell = measure(&a, &namesrv, (replicas, &pids), senders, receivers).await?;
            eprintln!(
                "{replicas} slaves, {senders}x{receivers}: {:.2} s, send P99 {} µs, errors {}",
                cell.run_s, cell.send_p99_us, cell.errors
            );
            results.push(cell);
        }
        drop(nodes);
    }
    write_results(&a, &results)
}

/// The distinct cells measured, in the order first measured.
fn cells_of(results: &[Cell]) -> Vec<(usize, usize)> {
    let mut cells: Vec<(usize, usize)> = Vec::new();
    for c in results {
        if !cells.contains(&(c.senders, c.receivers)) {
            cells.push((c.senders, c.receivers));
        }
    }
    cells
}

fn fits(results: &[Cell]) -> Vec<Fit> {
    cells_of(results)
        .into_iter()
        .filter_map(|(s, r)| {
            let points: Vec<(usize, f64)> = results
                .iter()
                .filter(|c| c.senders == s && c.receivers == r)
                .map(|c| (c.replicas, c.run_s))
                .collect();
            let (t0_s, first_s, further_s) = fit(&points)?;
            Some(Fit {
                senders: s,
                receivers: r,
                t0_s,
                first_s,
                further_s,
            })
        })
        .collect()
}

fn markdown(a: &ReplicationArgs, results: &[Cell], fits: &[Fit]) -> String {
    let mut md = format!(
        "{}: {} messages of {} B per cell, {}, {}; time = first sent to last received.\n\n",
        a.label, a.messages, a.size, a.role, a.flush
    );
    md.push_str("| senders × receivers | slaves | time | vs 0 slaves | msg/s | send P50 | send P99 | send P99.99 | errors | master CPU/msg | slaves' CPU/msg |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for c in results {
        let base = results
            .iter()
            .find(|b| b.replicas == 0 && b.senders == c.senders && b.receivers == c.receivers)
            .map_or(String::from("–"), |b| format!("{:.2}×", c.run_s / b.run_s));
        md.push_str(&format!(
            "| {}×{} | {} | {:.2} s | {base} | {:.0} | {} | {} | {} | {} | {} | {} |\n",
            c.senders,
            c.receivers,
            c.replicas,
            c.run_s,
            c.msgs_per_s,
            crate::hist::fmt_us(c.send_p50_us),
            crate::hist::fmt_us(c.send_p99_us),
            crate::hist::fmt_us(c.send_p9999_us),
            c.errors,
            c.master_cpu_us.map_or("–".into(), |us| format!("{us:.1} µs")),
            c.slaves_cpu_us.map_or("–".into(), |us| format!("{us:.1} µs")),
        ));
    }
    md.push_str("\nFit T(n) = T(0) + c₁·[n ≥ 1] + c₂·(n − 1):\n\n| senders × receivers | T(0) | c₁ (first replica) | c₂ (each further) |\n|---|---:|---:|---:|\n");
    for f in fits {
        md.push_str(&format!(
            "| {}×{} | {:.3} s | {:+.3} s | {:+.3} s |\n",
            f.senders, f.receivers, f.t0_s, f.first_s, f.further_s
        ));
    }
    md
}

fn write_results(a: &ReplicationArgs, results: &[Cell]) -> Result<(), BenchError> {
    let fits = fits(results);
    let md = markdown(a, results, &fits);
    println!("{md}");
    let base = a.out.join(format!("replication-{}-{}", a.label, a.role.to_lowercase()));
    std::fs::write(base.with_extension("md"), &md)?;
    let json = serde_json::json!({ "role": a.role, "flush": a.flush, "size_bytes": a.size, "cells": results, "fits": fits });
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(&json).expect("serializes"),
    )?;
    plot(results, &base.with_extension("svg")).map_err(|e| BenchError::Invalid(format!("plot: {e}")))?;
    println!("reports: {}.{{md,json,svg}}", base.display());
    Ok(())
}

fn plot(results: &[Cell], path: &Path) -> Result<(), crate::run::BenchError> {
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let n_max = results.iter().map(|c| c.replicas).max().unwrap_or(1).max(1) as f64;
    let t_max = results.iter().map(|c| c.run_s).fold(0.0, f64::max).max(0.001) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("whole-run time against slaves", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..n_max, 0.0..t_max)?;
    chart.configure_mesh().x_desc("slaves").y_desc("seconds").draw()?;
    let colors = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (s, r)) in cells_of(results).iter().enumerate() {
        let points = results
            .iter()
            .filter(|c| c.senders == *s && c.receivers == *r)
            .map(|c| (c.replicas as f64, c.run_s));
        labelled_line(&mut chart, points, &format!("{s}×{r}"), colors[i % colors.len()])?;
    }
    draw_legend(&mut chart)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_separates_the_first_replica_from_the_further_ones() {
        // T(0) = 1, the first replica +0.5, each further one +0.1.
        let points = [(0, 1.0), (1, 1.5), (2, 1.6), (3, 1.7), (4, 1.8)];
        let (t0, first, further) = fit(&points).unwrap();
        assert!((t0 - 1.0).abs() < 1e-9 && (first - 0.5).abs() < 1e-9 && (further - 0.1).abs() < 1e-9);
        assert!(fit(&[(1, 1.0)]).is_none(), "no baseline");
        assert!(parse_cell("10x0").is_err() && parse_cell("3x4").unwrap() == (3, 4));
    }

    #[test]
    fn cpu_per_message_splits_the_master_from_its_slaves() {
        let (master, slaves) = cpu_per_message(&[Some(1.0), Some(2.0), Some(3.0)], &[Some(1.5), Some(2.25), Some(3.5)], 1000);
        assert!((master.unwrap() - 500.0).abs() < 1e-6, "{master:?}");
        assert!((slaves.unwrap() - 750.0).abs() < 1e-6, "{slaves:?}");
        let (master, slaves) = cpu_per_message(&[Some(1.0)], &[Some(3.0)], 4);
        assert!(
            (master.unwrap() - 500_000.0).abs() < 1e-6 && slaves.is_none(),
            "no slave: nothing to add"
        );
        let (_, slaves) = cpu_per_message(&[Some(1.0), Some(2.0)], &[Some(1.5), None], 10);
        assert!(slaves.is_none(), "a slave that is gone makes the sum unknown");
    }
}
