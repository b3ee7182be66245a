//! The results of one run: JSON (with the machine's facts), a Markdown table, and an SVG with
//! TPS over time and the latency-by-percentile curve.
//!
//! Owns: report shapes and rendering. Must never: print a figure without the unit and the
//! machine it was measured on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::hist::{Percentiles, fmt_us};

/// Where a figure was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs available to this process.
    pub cores: usize,
    /// The CPU's model name from `/proc/cpuinfo`, or `unknown`.
    pub cpu_model: String,
    /// The kernel release, or `unknown`.
    pub kernel: String,
    /// The commit checked out in the current directory (12 hex digits), or `unknown`.
    pub git_revision: String,
}

impl Machine {
    /// The machine this process runs on; a fact that cannot be read is `unknown`.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(|_| "unknown".into(), |s| s.trim().to_owned());
        let git_revision = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or_else(|| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            kernel,
            git_revision,
        }
    }
}

/// One second of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since measuring began, at the end of this second.
    pub t_s: f64,
    /// Messages sent per second during this second.
    pub tps: f64,
    /// P99 latency during this second: of sends, or of born → consume in a consume-only run.
    pub p99_us: u64,
    /// The broker's CPU use, 100 = one core, when a broker process is sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_cpu_pct: Option<f64>,
    /// The broker's RSS in MiB, when a broker process is sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_rss_mb: Option<f64>,
    /// Messages consumed in this second (e2e and consume runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_per_s: Option<f64>,
    /// The broker's memory cgroup, when the run was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::cgroup::CgroupSample>,
}

/// Broker resource use over the measured part of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokerUsage {
    /// The broker's process.
    pub pid: u32,
    /// Mean of the per-second CPU samples, 100 = one core.
    pub cpu_pct_mean: f64,
    /// Highest RSS sampled, MiB.
    pub rss_mb_max: f64,
}

/// The results of one run, with the settings and machine they came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The run's name.
    pub label: String,
    /// `produce`, `consume` or `e2e`.
    pub workload: String,
    /// The options of the run, as given.
    pub settings: BTreeMap<String, String>,
    /// Where the run was measured.
    pub machine: Machine,
    /// When the run started, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// Length of the measured part, seconds.
    pub measured_s: f64,
    /// Measured messages: sent, or consumed in a consume run.
    pub messages: u64,
    /// `messages` per second measured.
    pub tps: f64,
    /// Body bytes of `messages` per second measured, in MB (10^6 bytes).
    pub mb_per_s: f64,
    /// Send latency, from the intended send time in open-loop runs.
    pub send_us: Percentiles,
    /// Pulls that found messages, request to answer (consume and e2e runs; a backlog read
    /// from the beginning included).
    #[serde(default)]
    pub pull_us: Percentiles,
    /// Latency from the broker's store timestamp to consumption (millisecond resolution at the store end).
    pub store_to_consume_us: Percentiles,
    /// Latency from the birth time in the body to consumption.
    pub born_to_consume_us: Percentiles,
    /// Measured messages consumed (those born after measuring began).
    pub consumed: u64,
    /// Failed requests, warm-up included, by kind (a response code by name, client timeout, ...).
    pub errors: BTreeMap<String, u64>,
    /// One point per measured second.
    pub timeline: Vec<Point>,
    /// (percentile, µs) of send latency.
    pub send_curve: Vec<(f64, u64)>,
    /// (percentile, µs) of born → consume latency.
    pub e2e_curve: Vec<(f64, u64)>,
    /// Seconds from the start of the measurement to the last measured message consumed: the
    /// whole run's time, first sent to last received (e2e).
    #[serde(default)]
    pub drained_s: Option<f64>,
    /// The broker's resource use, when its process was sampled.
    pub broker: Option<BrokerUsage>,
}

fn row(name: &str, p: &Percentiles) -> String {
    if p.count == 0 {
        return format!("| {name} | – | – | – | – | – | – | 0 |\n");
    }
    format!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} |\n",
        fmt_us(p.p50),
        fmt_us(p.p90),
        fmt_us(p.p99),
        fmt_us(p.p999),
        fmt_us(p.p9999),
        fmt_us(p.max),
        p.count
    )
}

impl Report {
    /// Failed requests of every kind.
    pub fn total_errors(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The report as Markdown: headline figures, latency table, errors, broker use, settings and machine.
    pub fn to_markdown(&self) -> String {
        let mut s = format!("### {} — {}\n\n", self.label, self.workload);
        s.push_str(&format!(
            "{:.0} msg/s, {:.2} MB/s, {} messages in {:.1} s; consumed {}; errors {}\n\n",
            self.tps,
            self.mb_per_s,
            self.messages,
            self.measured_s,
            self.consumed,
            self.total_errors()
        ));
        s.push_str("| latency | P50 | P90 | P99 | P99.9 | P99.99 | max | samples |\n|---|---|---|---|---|---|---|---|\n");
        s.push_str(&row("send", &self.send_us));
        s.push_str(&row("pull (found messages)", &self.pull_us));
        s.push_str(&row("store → consume", &self.store_to_consume_us));
        s.push_str(&row("born → consume", &self.born_to_consume_us));
        if !self.errors.is_empty() {
            s.push_str("\n| error | count |\n|---|---|\n");
            for (k, v) in &self.errors {
                s.push_str(&format!("| {k} | {v} |\n"));
            }
        }
        if let Some(b) = &self.broker {
            s.push_str(&format!(
                "\nbroker pid {}: CPU {:.0}% (mean), RSS {:.0} MB (max)\n",
                b.pid, b.cpu_pct_mean, b.rss_mb_max
            ));
        }
        let settings: Vec<String> = self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!(
            "\nsettings: {}\n\nmachine: {} cores, {}, Linux {}, petrel {}\n",
            settings.join(" "),
            self.machine.cores,
            self.machine.cpu_model,
            self.machine.kernel,
            self.machine.git_revision
        ));
        s
    }

    /// Writes `<dir>/<label>.json`, `.md` and `.svg`; returns their paths.
    pub fn write(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let base = dir.join(sanitize(&self.label));
        let json = base.with_extension("json");
        let md = base.with_extension("md");
        let svg = base.with_extension("svg");
        std::fs::write(&json, serde_json::to_string_pretty(self).expect("reports serialize"))?;
        std::fs::write(&md, self.to_markdown())?;
        self.plot(&svg).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(vec![json, md, svg])
    }

    /// Two panels: TPS over time, and latency by percentile (x: number of nines).
    pub fn plot(&self, path: &Path) -> Result<(), crate::run::BenchError> {
        let root = SVGBackend::new(path, (1000, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let (left, right) = root.split_horizontally(500);
        let t_max = self.timeline.last().map_or(1.0, |p| p.t_s).max(1.0);
        let tps_max = self.timeline.iter().map(|p| p.tps).fold(1.0, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(&left)
            .caption(format!("{}: msg/s over time", self.label), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max, 0.0..tps_max)?;
        chart.configure_mesh().x_desc("seconds").y_desc("msg/s").draw()?;
        chart.draw_series(LineSeries::new(self.timeline.iter().map(|p| (p.t_s, p.tps)), &BLUE))?;

        let nines = |pct: f64| -(1.0 - pct / 100.0).max(1e-6).log10();
        let curves = [(&self.send_curve, "send", RED), (&self.e2e_curve, "born → consume", GREEN)];
        let y_max = curves.iter().flat_map(|(c, _, _)| c.iter().map(|p| p.1)).max().unwrap_or(1).max(1) as f64 / 1e3 * 1.1;
        let mut chart = ChartBuilder::on(&right)
            .caption(format!("{}: latency by percentile", self.label), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..5.0, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("ms")
            .x_label_formatter(&|x| format!("{:.3}%", 100.0 * (1.0 - 10f64.powf(-x))))
            .draw()?;
        for (curve, name, color) in curves {
            if curve.is_empty() {
                continue;
            }
            labelled_line(&mut chart, curve.iter().map(|(p, us)| (nines(*p), *us as f64 / 1e3)), name, color)?;
        }
        draw_legend(&mut chart)?;
        root.present()?;
        Ok(())
    }
}

type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;
type PlotResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// A line with a legend entry.
pub(crate) fn labelled_line(
    chart: &mut Chart<'_, '_>,
    points: impl IntoIterator<Item = (f64, f64)>,
    label: &str,
    color: RGBColor,
) -> PlotResult {
    chart
        .draw_series(LineSeries::new(points, color))?
        .label(label.to_owned())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    Ok(())
}

pub(crate) fn draw_legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> PlotResult {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
}

fn sanitize(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hist::{new_histogram, percentile_curve, record};

    pub(crate) fn sample() -> Report {
        let mut h = new_histogram();
        for v in [100u64, 200, 300, 400, 10_000] {
            record(&mut h, v);
        }
        Report {
            label: "petrel run/1".into(),
            workload: "produce".into(),
            settings: BTreeMap::from([("size".into(), "128".into())]),
            machine: Machine {
                cores: 2,
                cpu_model: "Test CPU".into(),
                kernel: "6.1".into(),
                git_revision: "abc".into(),
            },
            started_unix_ms: 0,
            measured_s: 2.0,
            messages: 5,
            tps: 2.5,
            mb_per_s: 0.0,
            send_us: Percentiles::of(&h),
            pull_us: Percentiles::default(),
            store_to_consume_us: Percentiles::default(),
            born_to_consume_us: Percentiles::default(),
            consumed: 0,
            errors: BTreeMap::from([("TOPIC_NOT_EXIST (17)".into(), 3)]),
            timeline: vec![
                Point {
                    t_s: 1.0,
                    tps: 2.0,
                    p99_us: 400,
                    broker_cpu_pct: None,
                    broker_rss_mb: None,
                    consumed_per_s: None,
                    cgroup: None,
                },
                Point {
                    t_s: 2.0,
                    tps: 3.0,
                    p99_us: 10_000,
                    broker_cpu_pct: Some(50.0),
                    broker_rss_mb: Some(12.0),
                    consumed_per_s: Some(3.0),
                    cgroup: None,
                },
            ],
            send_curve: percentile_curve(&h),
            e2e_curve: Vec::new(),
            drained_s: None,
            broker: None,
        }
    }

    #[test]
    fn markdown_has_the_percentile_row_errors_and_machine() {
        let md = sample().to_markdown();
        assert!(
            md.contains("| send | 300 µs | 10.01 ms | 10.01 ms | 10.01 ms | 10.01 ms | 10.01 ms | 5 |"),
            "{md}"
        );
        assert!(md.contains("| TOPIC_NOT_EXIST (17) | 3 |"), "{md}");
        assert!(md.contains("2 cores, Test CPU, Linux 6.1, petrel abc"), "{md}");
        assert!(md.contains("| store → consume | – |"), "{md}");
    }

    #[test]
    fn the_three_files_are_written_and_the_json_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let r = sample();
        let files = r.write(dir.path()).unwrap();
        assert_eq!(files.len(), 3);
        assert!(files[0].ends_with("petrel_run_1.json"));
        let back: Report = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
        assert_eq!(back, r);
        let svg = std::fs::read_to_string(&files[2]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("latency by percentile"));
    }
}
