//! `petrel bench compare`: the same workload against two name servers in alternation (A B A B
//! …), then medians and B/A ratios — the form every performance claim here takes.
//!
//! Owns: alternation and the summary. Must never: compare runs made under different settings.

use serde::{Deserialize, Serialize};

use crate::hist::fmt_us;
use crate::report::Report;

/// Medians of one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The side's name in the table (`--label-a`, `--label-b`).
    pub label: String,
    /// The side's name server address(es).
    pub namesrv: String,
    /// Median messages per second.
    pub tps: f64,
    /// Median of the rounds' send P50.
    pub p50_us: u64,
    /// Median of the rounds' send P99.
    pub p99_us: u64,
    /// Median of the rounds' send P99.99.
    pub p9999_us: u64,
    /// Failed requests over all rounds (a sum, not a median).
    pub errors: u64,
    /// Median of the rounds' mean broker CPU, 100 = one core; `None` when no broker was sampled.
    pub broker_cpu_pct: Option<f64>,
    /// Median of the rounds' highest broker RSS, MiB; `None` when no broker was sampled.
    pub broker_rss_mb: Option<f64>,
    /// Messages per second of each round, in order.
    pub rounds: Vec<f64>,
}

/// The two sides of a comparison; ratios are B / A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The baseline.
    pub a: Side,
    /// The side compared with the baseline.
    pub b: Side,
}

/// The median of `v` (the mean of the middle two for an even count); 0 for none.
pub fn median_f64(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|x, y| x.total_cmp(y));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The median of `v`, rounded to the nearest integer; 0 for none.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the median of u64 values is within u64's range; `as` saturates where f64 rounding lands past u64::MAX"
)]
pub fn median_u64(v: Vec<u64>) -> u64 {
    median_f64(v.into_iter().map(|x| x as f64).collect()).round() as u64
}

impl Side {
    /// The medians of one side's `runs`.
    pub fn of(label: &str, namesrv: &str, runs: &[Report]) -> Side {
        let cpu: Vec<f64> = runs.iter().filter_map(|r| r.broker.as_ref().map(|b| b.cpu_pct_mean)).collect();
        let rss: Vec<f64> = runs.iter().filter_map(|r| r.broker.as_ref().map(|b| b.rss_mb_max)).collect();
        Side {
            label: label.to_owned(),
            namesrv: namesrv.to_owned(),
            tps: median_f64(runs.iter().map(|r| r.tps).collect()),
            p50_us: median_u64(runs.iter().map(|r| r.send_us.p50).collect()),
            p99_us: median_u64(runs.iter().map(|r| r.send_us.p99).collect()),
            p9999_us: median_u64(runs.iter().map(|r| r.send_us.p9999).collect()),
            errors: runs.iter().map(Report::total_errors).sum(),
            broker_cpu_pct: (!cpu.is_empty()).then(|| median_f64(cpu)),
            broker_rss_mb: (!rss.is_empty()).then(|| median_f64(rss)),
            rounds: runs.iter().map(|r| r.tps).collect(),
        }
    }
}

fn ratio(b: f64, a: f64) -> String {
    if a == 0.0 { "–".into() } else { format!("{:.2}×", b / a) }
}

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or_else(|| "–".into(), |x| format!("{x:.0}{unit}"))
}

impl Comparison {
    /// The comparison as a Markdown table: A, B and B / A for each figure.
    pub fn to_markdown(&self) -> String {
        let (a, b) = (&self.a, &self.b);
        let mut s = format!(
            "| medians of {} rounds | {} | {} | {b} / {a} |\n|---|---|---|---|\n",
            a.rounds.len(),
            a.label,
            b.label,
            a = a.label,
            b = b.label
        );
        s.push_str(&format!("| msg/s | {:.0} | {:.0} | {} |\n", a.tps, b.tps, ratio(b.tps, a.tps)));
        for (name, x, y) in [
            ("send P50", a.p50_us, b.p50_us),
            ("send P99", a.p99_us, b.p99_us),
            ("send P99.99", a.p9999_us, b.p9999_us),
        ] {
            s.push_str(&format!(
                "| {name} | {} | {} | {} |\n",
                fmt_us(x),
                fmt_us(y),
                ratio(y as f64, x as f64)
            ));
        }
        s.push_str(&format!(
            "| broker CPU | {} | {} | {} |\n",
            opt(a.broker_cpu_pct, "%"),
            opt(b.broker_cpu_pct, "%"),
            a.broker_cpu_pct.zip(b.broker_cpu_pct).map_or("–".into(), |(x, y)| ratio(y, x))
        ));
        s.push_str(&format!(
            "| broker RSS | {} | {} | {} |\n",
            opt(a.broker_rss_mb, " MB"),
            opt(b.broker_rss_mb, " MB"),
            a.broker_rss_mb.zip(b.broker_rss_mb).map_or("–".into(), |(x, y)| ratio(y, x))
        ));
        s.push_str(&format!("| errors | {} | {} | |\n", a.errors, b.errors));
        let rounds = |v: &[f64]| v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(", ");
        s.push_str(&format!(
            "\nmsg/s by round — {}: {}; {}: {}\n",
            a.label,
            rounds(&a.rounds),
            b.label,
            rounds(&b.rounds)
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median_f64(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_f64(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median_u64(vec![10, 30, 20]), 20);
        assert_eq!(median_f64(Vec::new()), 0.0);
    }

    #[test]
    fn the_table_gives_ratios_of_b_to_a() {
        let side = |label: &str, tps: f64, p99: u64| Side {
            label: label.into(),
            namesrv: "x".into(),
            tps,
            p50_us: 100,
            p99_us: p99,
            p9999_us: 4 * p99,
            errors: 0,
            broker_cpu_pct: Some(50.0),
            broker_rss_mb: None,
            rounds: vec![tps, tps, tps],
        };
        let md = Comparison {
            a: side("rocketmq", 10_000.0, 2_000),
            b: side("petrel", 30_000.0, 500),
        }
        .to_markdown();
        assert!(md.contains("| msg/s | 10000 | 30000 | 3.00× |"), "{md}");
        assert!(md.contains("| send P99 | 2.00 ms | 500 µs | 0.25× |"), "{md}");
        assert!(md.contains("| broker RSS | – | – | – |"), "{md}");
    }
}
