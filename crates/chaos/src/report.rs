//! A run's results: `result.json`, `report.md` and `timeline.svg` (faults as bands over the
//! send, error and delivery rates), and the machine-readable last line.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::checker::{Verdict, Window};
use crate::cli::{ChaosArgs, FaultKind, Mode};
use crate::error::{ChaosError, Result};

#[derive(Debug, Clone, serde::Serialize)]
pub struct FaultRecord {
    pub index: usize,
    pub kind: FaultKind,
    pub target: String,
    pub start_ms: u64,
    pub healed_ms: u64,
}

/// A process that exited although no fault killed it, and was restarted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExitRecord {
    pub process: String,
    pub status: String,
    pub restarted_ms: u64,
}

/// What the injector did, and what it found.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    pub faults: Vec<FaultRecord>,
    pub exits: Vec<ExitRecord>,
}

/// One second of the run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub acked: u64,
    pub errors: u64,
    pub consumed: u64,
}

/// Unavailability windows (gaps between acknowledgements over the threshold), summarised.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Unavailability {
    pub windows: usize,
    pub p50_ms: u64,
    pub p90_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
    /// The longest window that overlapped a fault of each kind (from its start to 10 s after it
    /// was healed).
    pub max_by_fault_kind_ms: BTreeMap<String, u64>,
}

/// Everything a run reports: its settings, the faults injected, the checker's verdict and the timeline.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The command line the run was started with.
    pub command: String,
    /// The cluster started; `None` with `--target`, when no cluster was started.
    pub mode: Option<Mode>,
    /// Whose brokers ran: `petrel`, or `rocketmq` (Apache RocketMQ's own processes).
    pub implementation: &'static str,
    /// The name servers of `--target`, when the run used an existing cluster.
    pub target: Option<String>,
    /// How the processes reached each other: `netns`, `proxy` or `loopback`.
    pub network: &'static str,
    /// The seed of the fault schedule, to replay it.
    pub seed: u64,
    /// Producers with unique keys.
    pub producers: usize,
    /// Producers that each send in order to a fixed queue.
    pub ordered_producers: usize,
    /// Consumer tasks of the consumer group.
    pub consumers: usize,
    /// The total send rate asked for, messages per second.
    pub rate: u32,
    /// Faults injected.
    pub injections: usize,
    /// Faults injected per kind name.
    pub injections_by_kind: BTreeMap<String, usize>,
    /// Fault kinds asked for that this cluster could not take, each as `kind: why`.
    pub faults_left_out: Vec<String>,
    /// What the checker found.
    pub verdict: Verdict,
    /// The unavailability windows, summarised.
    pub unavailability: Unavailability,
    /// Failed send attempts per kind of error (a broker code by name, timeout, ...).
    pub send_errors: BTreeMap<String, u64>,
    /// Every fault injected, in order.
    pub faults: Vec<FaultRecord>,
    /// Processes that exited by themselves (crashed) and were restarted.
    pub process_exits: Vec<ExitRecord>,
    /// Acknowledgements, errors and deliveries per second of the run.
    pub timeline: Vec<Sample>,
}

/// A timeline line: its label, colour and value per sample.
type Series = (&'static str, RGBColor, fn(&Sample) -> u64);

/// How long after a fault is healed an unavailability window is still put down to it.
const AFTERMATH_MS: u64 = 10_000;

/// The `p`th percentile of `values` (0 for none), by HdrHistogram as `petrel bench` reports its
/// latencies (three significant digits: a window's length to within 0.1%).
fn percentile(values: &[u64], p: f64) -> u64 {
    let Ok(mut histogram) = hdrhistogram::Histogram::<u64>::new(3) else {
        return 0;
    };
    for v in values {
        // Auto-resizing: a record fails only past u64's range, which a window's length is not.
        let _ = histogram.record(*v);
    }
    if histogram.is_empty() {
        0
    } else {
        histogram.value_at_quantile(p / 100.0)
    }
}

fn unavailability(windows: &[Window], faults: &[FaultRecord]) -> Unavailability {
    let mut lens: Vec<u64> = windows.iter().map(Window::len_ms).collect();
    lens.sort_unstable();
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for f in faults {
        let worst = windows
            .iter()
            .filter(|w| w.end_ms >= f.start_ms && w.start_ms <= f.healed_ms + AFTERMATH_MS)
            .map(Window::len_ms)
            .max()
            .unwrap_or(0);
        let entry = by_kind.entry(f.kind.name().to_owned()).or_default();
        *entry = (*entry).max(worst);
    }
    Unavailability {
        windows: lens.len(),
        p50_ms: percentile(&lens, 50.0),
        p90_ms: percentile(&lens, 90.0),
        p99_ms: percentile(&lens, 99.0),
        max_ms: lens.last().copied().unwrap_or(0),
        max_by_fault_kind_ms: by_kind,
    }
}

impl Report {
    /// Assembles the report from the run's settings, what the injector did and what the checker found.
    #[allow(clippy::too_many_arguments, reason = "one call site assembling the run's parts")]
    pub fn new(
        args: &ChaosArgs,
        command: String,
        seed: u64,
        network: crate::cli::Network,
        faults_left_out: Vec<String>,
        schedule: Schedule,
        verdict: Verdict,
        timeline: Vec<Sample>,
        send_errors: BTreeMap<String, u64>,
    ) -> Report {
        let Schedule { faults, exits } = schedule;
        let mut injections_by_kind = BTreeMap::new();
        for f in &faults {
            *injections_by_kind.entry(f.kind.name().to_owned()).or_default() += 1;
        }
        Report {
            command,
            mode: args.target.is_none().then_some(args.mode),
            implementation: if args.rocketmq_lib.is_some() { "rocketmq" } else { "petrel" },
            target: args.target.clone(),
            network: match network {
                crate::cli::Network::Netns => "netns",
                crate::cli::Network::Proxy => "proxy",
                crate::cli::Network::Auto | crate::cli::Network::Loopback => "loopback",
            },
            seed,
            producers: args.producers,
            ordered_producers: args.ordered,
            consumers: args.consumers,
            rate: args.rate,
            injections: faults.len(),
            injections_by_kind,
            faults_left_out,
            unavailability: unavailability(&verdict.unavailable, &faults),
            verdict,
            send_errors,
            faults,
            process_exits: exits,
            timeline,
        }
    }

    /// The last line a run prints.
    pub fn summary_line(&self) -> String {
        let v = &self.verdict;
        format!(
            "chaos: injections={} acked={} lost={} consumed_then_lost={} duplicated={} reordered={} max_unavailable_ms={}",
            self.injections,
            v.acked,
            v.lost,
            v.consumed_lost,
            v.duplicated,
            v.reordered + v.reordered_in_log,
            v.max_unavailable_ms
        )
    }

    /// Writes `result.json`, `report.md` and `timeline.svg` into `dir`, creating it.
    ///
    /// # Errors
    /// A file cannot be written or the report cannot be serialized.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        let json = serde_json::to_vec_pretty(self).map_err(|e| ChaosError::Report(e.to_string()))?;
        std::fs::write(dir.join("result.json"), json)?;
        std::fs::write(dir.join("report.md"), self.to_markdown())?;
        self.write_svg(&dir.join("timeline.svg"))
            .map_err(|e| ChaosError::Report(e.to_string()))
    }

    /// The report as Markdown: the verdict's table, the unavailability, errors and faults.
    pub fn to_markdown(&self) -> String {
        let v = &self.verdict;
        let u = &self.unavailability;
        let what = match (&self.mode, &self.target) {
            (Some(m), _) => format!("{}, {m:?} mode, {} network", self.implementation, self.network).to_lowercase(),
            (None, Some(t)) => format!("target {t}"),
            (None, None) => String::new(),
        };
        let mut md = format!("# Chaos run: {what}\n\n`{}` (seed {})\n\n", self.command, self.seed);
        md += &format!(
            "{} producers with unique keys, {} ordered producers, {} consumers, {} msg/s in all.\n\n",
            self.producers, self.ordered_producers, self.consumers, self.rate
        );
        md += "| | |\n|---|---|\n";
        let kinds: Vec<String> = self.injections_by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let rows = [
            ("verdict", if v.passed() { "PASS".to_owned() } else { "FAIL".to_owned() }),
            ("injections", format!("{} ({})", self.injections, kinds.join(", "))),
            ("sent", v.sent.to_string()),
            ("acknowledged", v.acked.to_string()),
            ("acknowledged and lost", format!("**{}**", v.lost)),
            ("… missing from the queues at the end", v.lost_from_log.to_string()),
            (
                "… in queues no broker served at the end (fate unknown)",
                v.lost_unreadable.to_string(),
            ),
            ("… in the queues, never delivered", v.undelivered.to_string()),
            (
                "consumed, then missing from the queues (acknowledged or not)",
                format!("**{}**", v.consumed_lost),
            ),
            ("not acknowledged, not delivered (allowed)", v.unacked_lost.to_string()),
            ("not acknowledged, delivered (allowed)", v.unacked_delivered.to_string()),
            (
                "duplicated deliveries",
                format!(
                    "{} ({} producer retry, {} consumer redelivery)",
                    v.duplicated, v.duplicated_by_producer_retry, v.duplicated_by_redelivery
                ),
            ),
            ("stored twice without a retry", v.stored_twice_without_retry.to_string()),
            (
                "reordered (delivered / in the log)",
                format!("**{} / {}**", v.reordered, v.reordered_in_log),
            ),
            ("longest time without an acknowledgement", format!("{} ms", v.max_unavailable_ms)),
            ("processes that exited by themselves", self.process_exits.len().to_string()),
        ];
        for (k, val) in rows {
            md += &format!("| {k} | {val} |\n");
        }
        md += &format!(
            "\nUnavailability windows (≥ {} ms without an acknowledgement): {}; p50 {} ms, p90 {} ms, p99 {} ms, max {} ms.\n",
            crate::checker::UNAVAILABLE_THRESHOLD_MS,
            u.windows,
            u.p50_ms,
            u.p90_ms,
            u.p99_ms,
            u.max_ms
        );
        for (k, ms) in &u.max_by_fault_kind_ms {
            md += &format!("- longest around a {k}: {ms} ms\n");
        }
        md += &self.markdown_lists();
        md
    }

    fn markdown_lists(&self) -> String {
        let v = &self.verdict;
        let mut md = String::new();
        if !self.faults_left_out.is_empty() {
            md += &format!("\nLeft out: {}.\n", self.faults_left_out.join("; "));
        }
        if !v.lost_examples.is_empty() {
            md += &format!("\nLost (first {}): {}\n", v.lost_examples.len(), v.lost_examples.join(", "));
        }
        if !v.consumed_lost_examples.is_empty() {
            md += &format!(
                "\nConsumed, then lost (first {}): {}\n",
                v.consumed_lost_examples.len(),
                v.consumed_lost_examples.join(", ")
            );
        }
        if !v.reorder_examples.is_empty() {
            md += &format!("\nReordered: {}\n", v.reorder_examples.join("; "));
        }
        for e in &self.process_exits {
            md += &format!(
                "\n{} exited by itself ({}); restarted at {:.1} s\n",
                e.process,
                e.status,
                e.restarted_ms as f64 / 1e3
            );
        }
        if !self.send_errors.is_empty() {
            md += "\n| send error | count |\n|---|---|\n";
            for (k, n) in &self.send_errors {
                md += &format!("| {k} | {n} |\n");
            }
        }
        md += "\n| # | fault | process | start (s) | held (ms) |\n|---|---|---|---|---|\n";
        for f in &self.faults {
            md += &format!(
                "| {} | {} | {} | {:.1} | {} |\n",
                f.index + 1,
                f.kind.name(),
                f.target,
                f.start_ms as f64 / 1e3,
                f.healed_ms - f.start_ms
            );
        }
        md
    }

    fn write_svg(&self, path: &Path) -> std::result::Result<(), DrawingAreaErrorKind<std::io::Error>> {
        let root = SVGBackend::new(path, (1400, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let t_max = self.timeline.last().map_or(1.0, |s| s.t_s).max(1.0);
        let y_max = self
            .timeline
            .iter()
            .map(|s| s.acked.max(s.errors).max(s.consumed))
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} — faults as bands", self.summary_line()), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
        chart.configure_mesh().x_desc("seconds").y_desc("per second").draw()?;
        for f in &self.faults {
            let color = match f.kind {
                FaultKind::Kill => RED.mix(0.15),
                FaultKind::Pause => BLUE.mix(0.15),
                FaultKind::Partition => MAGENTA.mix(0.15),
                FaultKind::DiskFull => RGBColor(230, 150, 0).mix(0.2),
            };
            let band = [(f.start_ms as f64 / 1e3, 0.0), (f.healed_ms as f64 / 1e3, y_max)];
            chart.draw_series(std::iter::once(Rectangle::new(band, color.filled())))?;
        }
        let series: [Series; 3] = [
            ("acknowledged", GREEN, |s| s.acked),
            ("send errors", RED, |s| s.errors),
            ("consumed", BLACK, |s| s.consumed),
        ];
        for (label, color, value) in series {
            chart
                .draw_series(LineSeries::new(self.timeline.iter().map(|s| (s.t_s, value(s) as f64)), color))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentiles_of_window_lengths_are_nearest_ranks_to_three_digits() {
        let lengths: Vec<u64> = (1..=100).collect();
        assert_eq!(super::percentile(&lengths, 50.0), 50);
        assert_eq!(super::percentile(&lengths, 90.0), 90);
        assert_eq!(super::percentile(&lengths, 99.0), 99);
        assert_eq!(super::percentile(&[], 99.0), 0, "no window");
        let long = super::percentile(&[123_456], 50.0);
        assert!(long.abs_diff(123_456) <= 124, "{long} within 0.1%");
    }
}
