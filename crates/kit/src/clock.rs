//! The wall clock as RocketMQ's records carry it: milliseconds since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; 0 for a clock set before it.
#[must_use]
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Microseconds since the Unix epoch; 0 for a clock set before it.
#[must_use]
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_reads_after_2020_in_both_units() {
        // 2020-01-01T00:00:00Z: a clock reading before it is a broken conversion, not the date.
        let ms = now_ms();
        assert!(ms > 1_577_836_800_000, "{ms}");
        let us = now_us();
        assert!(us / 1000 >= u64::try_from(ms).expect("positive"), "{us} µs before {ms} ms");
    }
}
