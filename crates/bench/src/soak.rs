//! `petrel bench soak`: send and consume for a long time against a broker that runs in a memory
//! cgroup, and show what its memory and its throughput do — the experiment in which a JVM broker's
//! page cache grew past its pod's limit until the OOM killer ended it.
//!
//! Every second it records send and consume rates, the cgroup's usage (what the limit is enforced
//! against), its anonymous memory and page cache, the broker's RSS and the OOM kills so far. The
//! verdict: no OOM kill, peak usage under the limit, and a steady rate — the coefficient of
//! variation of the 10-second mean rates after the settling time.
//!
//! Owns: the soak's statistics and its report (JSON, a Markdown row, an SVG of rate and memory
//! over time with the limit and the budget drawn). Must never: judge a run on a sampled peak
//! alone — the kernel's own high-water mark is read too, since a spike can fall between samples.

use std::path::{Path, PathBuf};

use clap::Args;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::cgroup::CgroupMemory;
use crate::cli::WorkloadArgs;
use crate::report::{Point, Report, draw_legend, labelled_line};
use crate::run::{BenchError, Kind, run};

/// The options of `petrel bench soak`.
#[derive(Args, Debug, Clone)]
pub struct SoakArgs {
    /// The page-cache budget the broker was given, in bytes (drawn as a line; not enforced here).
    #[arg(long)]
    pub budget_bytes: Option<u64>,
    /// Seconds at the start left out of the rate statistics (warm-up, a JVM's JIT).
    #[arg(long, default_value_t = 60.0)]
    pub settle_s: f64,
    /// Length of the windows whose mean rates the coefficient of variation compares, seconds.
    #[arg(long, default_value_t = 10)]
    pub window_s: usize,
    /// The workload: give --cgroup (required), --broker-pid, --size and --duration.
    #[command(flatten)]
    pub run: WorkloadArgs,
}

/// What a soak showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakSummary {
    /// The run's name.
    pub label: String,
    /// Message body size; 0 when the report does not say.
    pub size_bytes: usize,
    /// Length of the measured part, seconds.
    pub measured_s: f64,
    /// The cgroup's hard memory limit, if one is set.
    pub limit_bytes: Option<u64>,
    /// The page-cache budget the broker was given (`--budget-bytes`).
    pub budget_bytes: Option<u64>,
    /// Means over the time after `settle_s`.
    pub send_tps_mean: f64,
    /// Mean consume rate over the time after `settle_s`.
    pub consume_tps_mean: f64,
    /// Length of the windows `send_tps_cv` compares, seconds.
    pub window_s: usize,
    /// Standard deviation over mean of the windows' mean send rates, after `settle_s`.
    pub send_tps_cv: f64,
    /// The lowest of those windows' mean send rates.
    pub send_tps_window_min: f64,
    /// The larger of the sampled maximum and the kernel's high-water mark.
    pub cgroup_max_bytes: u64,
    /// The highest anonymous memory sampled in the cgroup.
    pub anon_max_bytes: u64,
    /// The highest page cache sampled in the cgroup.
    pub cache_max_bytes: u64,
    /// The broker's highest RSS sampled, MiB; 0 without `--broker-pid`.
    pub rss_max_mb: f64,
    /// The cgroup's OOM-kill count, highest sampled (the kernel counts from the cgroup's creation).
    pub oom_kills: u64,
    /// Failed requests.
    pub errors: u64,
    /// The broker process still ran when the soak ended (`None`: no `--broker-pid`).
    pub broker_alive: Option<bool>,
}

/// Mean rate of each whole window of `window` consecutive one-second rates.
pub fn window_means(rates: &[f64], window: usize) -> Vec<f64> {
    assert!(window > 0, "a window holds at least one second");
    rates.chunks_exact(window).map(|w| w.iter().sum::<f64>() / window as f64).collect()
}

/// Coefficient of variation (population standard deviation over mean); 0 for fewer than two values.
pub fn coefficient_of_variation(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return f64::INFINITY;
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    variance.sqrt() / mean
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// A process that still runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])))
        .is_some_and(|dead| !dead)
}

impl SoakSummary {
    /// Summarises `report`; `limit_bytes` and `peak_bytes` come from the cgroup at the end of the run.
    pub fn of(
        report: &Report,
        args: &SoakArgs,
        limit_bytes: Option<u64>,
        peak_bytes: Option<u64>,
        broker_alive: Option<bool>,
    ) -> SoakSummary {
        let settled: Vec<&Point> = report.timeline.iter().filter(|p| p.t_s > args.settle_s).collect();
        let send: Vec<f64> = settled.iter().map(|p| p.tps).collect();
        let windows = window_means(&send, args.window_s.max(1));
        let cg = report.timeline.iter().filter_map(|p| p.cgroup);
        let max_of = |f: fn(&crate::cgroup::CgroupSample) -> u64| cg.clone().map(|s| f(&s)).max().unwrap_or(0);
        SoakSummary {
            label: report.label.clone(),
            size_bytes: report.settings.get("size_bytes").and_then(|s| s.parse().ok()).unwrap_or(0),
            measured_s: report.measured_s,
            limit_bytes,
            budget_bytes: args.budget_bytes,
            send_tps_mean: mean(send.iter().copied()),
            consume_tps_mean: mean(settled.iter().filter_map(|p| p.consumed_per_s)),
            window_s: args.window_s.max(1),
            send_tps_cv: coefficient_of_variation(&windows),
            send_tps_window_min: windows.iter().copied().fold(f64::INFINITY, f64::min).min(f64::MAX),
            cgroup_max_bytes: max_of(|s| s.usage_bytes).max(peak_bytes.unwrap_or(0)),
            anon_max_bytes: max_of(|s| s.anon_bytes),
            cache_max_bytes: max_of(|s| s.cache_bytes),
            rss_max_mb: report.timeline.iter().filter_map(|p| p.broker_rss_mb).fold(0.0, f64::max),
            oom_kills: cg.map(|s| s.oom_kills).max().unwrap_or(0),
            errors: report.total_errors(),
            broker_alive,
        }
    }

    /// The Markdown table header the rows of [`SoakSummary::to_row`] go under.
    pub const TABLE_HEADER: &'static str = "| run | body | minutes | send msg/s | CV of 10 s means | slowest 10 s | consume msg/s | cgroup max | anon max | page cache max | broker RSS max | limit | OOM kills | send errors | broker alive at end |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|";

    /// One row under [`Self::TABLE_HEADER`].
    pub fn to_row(&self) -> String {
        let mib = |b: u64| format!("{} MiB", b >> 20);
        format!(
            "| {} | {} B | {:.0} | {:.0} | {:.1}% | {:.0} | {:.0} | {} | {} | {} | {:.0} MiB | {} | {} | {} | {} |",
            self.label,
            self.size_bytes,
            self.measured_s / 60.0,
            self.send_tps_mean,
            self.send_tps_cv * 100.0,
            self.send_tps_window_min,
            self.consume_tps_mean,
            mib(self.cgroup_max_bytes),
            mib(self.anon_max_bytes),
            mib(self.cache_max_bytes),
            self.rss_max_mb,
            self.limit_bytes.map_or_else(|| "none".into(), mib),
            self.oom_kills,
            self.errors,
            self.broker_alive.map_or("?", |a| if a { "yes" } else { "**no**" }),
        )
    }
}

/// Rates over time above, memory over time below, with the limit and the budget as lines.
fn plot(report: &Report, summary: &SoakSummary, path: &Path) -> Result<(), crate::run::BenchError> {
    let root = SVGBackend::new(path, (1000, 720)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(340);
    let t = &report.timeline;
    let t_max = t.last().map_or(1.0, |p| p.t_s).max(1.0);
    let rate_max = t.iter().map(|p| p.tps.max(p.consumed_per_s.unwrap_or(0.0))).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&top)
        .caption(format!("{}: msg/s over time", summary.label), ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max, 0.0..rate_max)?;
    chart.configure_mesh().x_desc("seconds").y_desc("msg/s").draw()?;
    labelled_line(&mut chart, t.iter().map(|p| (p.t_s, p.tps)), "sent", BLUE)?;
    labelled_line(
        &mut chart,
        t.iter().filter_map(|p| Some((p.t_s, p.consumed_per_s?))),
        "consumed",
        GREEN,
    )?;
    draw_legend(&mut chart)?;

    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let lines = [summary.limit_bytes, summary.budget_bytes].into_iter().flatten().map(mib);
    let mem_max = t
        .iter()
        .filter_map(|p| p.cgroup.map(|c| mib(c.usage_bytes)))
        .chain(t.iter().filter_map(|p| p.broker_rss_mb))
        .chain(lines)
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&bottom)
        .caption(format!("{}: memory over time", summary.label), ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max, 0.0..mem_max)?;
    chart.configure_mesh().x_desc("seconds").y_desc("MiB").draw()?;
    let series: [(&str, RGBColor, CgroupField); 3] = [
        ("cgroup usage", BLACK, |c| c.usage_bytes),
        ("page cache", BLUE, |c| c.cache_bytes),
        ("anon", MAGENTA, |c| c.anon_bytes),
    ];
    for (name, color, f) in series {
        labelled_line(&mut chart, t.iter().filter_map(|p| Some((p.t_s, mib(f(&p.cgroup?))))), name, color)?;
    }
    labelled_line(
        &mut chart,
        t.iter().filter_map(|p| Some((p.t_s, p.broker_rss_mb?))),
        "broker RSS",
        GREEN,
    )?;
    for (name, bytes, color) in [
        ("limit", summary.limit_bytes, RED),
        ("page-cache budget", summary.budget_bytes, CYAN),
    ] {
        if let Some(b) = bytes {
            labelled_line(&mut chart, [(0.0, mib(b)), (t_max, mib(b))], name, color)?;
        }
    }
    draw_legend(&mut chart)?;
    root.present()?;
    Ok(())
}

/// One figure of a cgroup sample, for a plotted line.
type CgroupField = fn(&crate::cgroup::CgroupSample) -> u64;

/// Runs the soak; prints the summary row and writes `<label>.{json,md,svg}` (the ordinary report)
/// and `<label>-soak.{json,md,svg}` under `--out`.
pub async fn soak(args: SoakArgs) -> Result<(), BenchError> {
    let Some(dir) = args.run.cgroup.clone() else {
        return Err(BenchError::Invalid("soak needs --cgroup (the broker's memory cgroup)".into()));
    };
    if args.window_s == 0 || args.settle_s < 0.0 {
        return Err(BenchError::Invalid(
            "--window-s must be positive and --settle-s not negative".into(),
        ));
    }
    let cgroup = CgroupMemory::open(&dir)?;
    let mut w = args.run.workload(Kind::E2e)?;
    // The timeline starts at once: the memory of the warm-up counts; the rates settle first.
    w.warmup = std::time::Duration::ZERO;
    let report = run(w).await?;
    let summary = SoakSummary::of(
        &report,
        &args,
        cgroup.limit_bytes(),
        cgroup.peak_bytes(),
        args.run.broker_pid.map(alive),
    );
    report.write(&args.run.out)?;
    let base: PathBuf = args.run.out.join(format!("{}-soak", report.label.replace(['/', ' '], "_")));
    let md = format!("{}\n{}\n", SoakSummary::TABLE_HEADER, summary.to_row());
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(&summary).expect("summaries serialize"),
    )?;
    std::fs::write(base.with_extension("md"), &md)?;
    plot(&report, &summary, &base.with_extension("svg")).map_err(|e| std::io::Error::other(e.to_string()))?;
    println!("{md}");
    println!("reports: {}.{{json,md,svg}}", base.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::CgroupSample;

    #[test]
    fn windows_and_their_variation() {
        assert_eq!(
            window_means(&[1.0, 3.0, 5.0, 7.0, 9.0], 2),
            vec![2.0, 6.0],
            "a partial window is dropped"
        );
        assert_eq!(coefficient_of_variation(&[5.0]), 0.0);
        assert!((coefficient_of_variation(&[90.0, 110.0]) - 0.1).abs() < 1e-12);
        assert!(coefficient_of_variation(&[0.0, 0.0]).is_infinite(), "a stopped run is not steady");
    }

    #[test]
    fn our_own_process_is_alive_and_a_missing_one_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX));
    }

    fn point(t_s: f64, tps: f64, usage_mib: u64, oom_kills: u64) -> Point {
        Point {
            t_s,
            tps,
            p99_us: 1,
            broker_cpu_pct: None,
            broker_rss_mb: Some(usage_mib as f64 / 2.0),
            consumed_per_s: Some(tps - 1.0),
            cgroup: Some(CgroupSample {
                usage_bytes: usage_mib << 20,
                anon_bytes: 1 << 20,
                cache_bytes: (usage_mib - 1) << 20,
                oom_kills,
            }),
        }
    }

    #[test]
    fn the_summary_leaves_out_the_settling_time_and_takes_the_kernels_peak() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            soak: SoakArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let mut report = crate::report::tests::sample();
        report.settings.insert("size_bytes".into(), "1024".into());
        // 5 s of a slow start, then 20 s alternating 100 and 120 msg/s.
        report.timeline = (1u32..=25)
            .map(|s| {
                point(
                    f64::from(s),
                    if s <= 5 {
                        10.0
                    } else if s % 2 == 0 {
                        100.0
                    } else {
                        120.0
                    },
                    50 + u64::from(s),
                    u64::from(s == 25),
                )
            })
            .collect();
        let mut args = <Cli as clap::Parser>::parse_from(["soak", "--cgroup", "/cg", "--budget-bytes", "67108864", "--settle-s", "5"]).soak;
        assert_eq!((args.window_s, args.run.cgroup.as_deref()), (10, Some(Path::new("/cg"))));
        let s = SoakSummary::of(&report, &args, Some(512 << 20), Some(80 << 20), Some(true));
        assert!((s.send_tps_mean - 110.0).abs() < 1e-9, "{}", s.send_tps_mean);
        assert!((s.consume_tps_mean - 109.0).abs() < 1e-9);
        assert_eq!(s.send_tps_cv, 0.0, "both windows average 110");
        assert_eq!(s.send_tps_window_min, 110.0);
        assert_eq!(
            s.cgroup_max_bytes,
            80 << 20,
            "the kernel's high-water mark beats the samples' 75 MiB"
        );
        assert_eq!(s.cache_max_bytes, 74 << 20);
        assert_eq!(s.oom_kills, 1);
        assert!(
            s.to_row().contains("| 80 MiB |") && s.to_row().contains("| 512 MiB | 1 |"),
            "{}",
            s.to_row()
        );
        args.settle_s = 0.0;
        let unsettled = SoakSummary::of(&report, &args, None, None, None);
        assert!(unsettled.send_tps_cv > 0.3, "the slow start counts: {}", unsettled.send_tps_cv);
        assert!(unsettled.to_row().contains("| none |") && unsettled.to_row().ends_with("| ? |"));
        plot(&report, &s, &dir.path().join("soak.svg")).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("soak.svg")).unwrap();
        assert!(svg.contains("memory over time") && svg.contains("page-cache budget"));
    }
}
