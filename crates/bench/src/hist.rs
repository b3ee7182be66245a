//! Latency histograms (HdrHistogram, microseconds, 3 significant digits) and the percentiles
//! reports print.
//!
//! Owns: recording and summarising latencies. Must never: drop a sample silently — values above
//! the histogram's range are clamped to its maximum and counted.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency recorded exactly: one hour in microseconds.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

/// An empty latency histogram: 1 µs to [`MAX_LATENCY_US`], 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// Records `us`, clamped into the histogram's range.
pub fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, MAX_LATENCY_US));
}

/// The percentiles every report shows, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    /// Samples recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// 99.99th percentile.
    pub p9999: u64,
    /// Highest sample.
    pub max: u64,
    /// Mean of the samples.
    pub mean: f64,
}

impl Percentiles {
    /// The percentiles of `h`; all zero when it is empty.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}

/// (percentile, microseconds) points for a latency-by-percentile plot, up to P99.999.
pub fn percentile_curve(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for nines in 0..=50 {
        // 0 .. 5 "nines" in steps of 0.1: 0%, ..., 90%, 99%, ..., 99.999%
        let q = 1.0 - 10f64.powf(-(nines as f64) / 10.0);
        out.push(((q * 100.0 * 1e6).round() / 1e6, h.value_at_quantile(q)));
    }
    out
}

/// Formats microseconds for tables: `850 µs`, `1.25 ms`, `2.00 s`.
pub fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            record(&mut h, v);
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.count, 10_000);
        // 3 significant digits: within 0.1%
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 0.001 + 1.0;
        assert!(near(p.p50, 5_000), "{p:?}");
        assert!(near(p.p90, 9_000), "{p:?}");
        assert!(near(p.p99, 9_900), "{p:?}");
        assert!(near(p.p999, 9_990), "{p:?}");
        assert!(near(p.p9999, 9_999), "{p:?}");
        assert!(near(p.max, 10_000), "{p:?}");
        assert!((p.mean - 5_000.5).abs() < 10.0);
    }

    #[test]
    fn one_slow_sample_in_ten_thousand_shows_at_p9999_only() {
        let mut h = new_histogram();
        for _ in 0..9_999 {
            record(&mut h, 100);
        }
        record(&mut h, 50_000);
        let p = Percentiles::of(&h);
        assert_eq!((p.p50, p.p99, p.p999), (100, 100, 100));
        assert!(p.p9999 >= 100 && p.max >= 49_950, "{p:?}");
    }

    #[test]
    fn out_of_range_values_are_clamped_not_lost() {
        let mut h = new_histogram();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= MAX_LATENCY_US);
    }

    #[test]
    fn curve_is_monotonic_and_ends_at_five_nines() {
        let mut h = new_histogram();
        for v in 1..=100_000u64 {
            record(&mut h, v);
        }
        let c = percentile_curve(&h);
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert!((c.last().unwrap().0 - 99.999).abs() < 1e-9);
    }

    #[test]
    fn microseconds_format_with_units() {
        assert_eq!(fmt_us(850), "850 µs");
        assert_eq!(fmt_us(1_250), "1.25 ms");
        assert_eq!(fmt_us(2_000_000), "2.00 s");
    }
}
