//! Logging a background chore that fails again and again (a checkpoint on a full disk, every
//! second) without flooding the log: the first failure at WARN, then a reminder once a minute
//! with the count, and one line when it works again.

use std::time::{Duration, Instant};

/// How often a failure that goes on is logged again.
const REMINDER_INTERVAL: Duration = Duration::from_secs(60);

pub(crate) struct Repeated {
    what: &'static str,
    since: Option<Instant>,
    last_logged: Option<Instant>,
    failures: u64,
}

impl Repeated {
    pub(crate) fn new(what: &'static str) -> Repeated {
        Repeated {
            what,
            since: None,
            last_logged: None,
            failures: 0,
        }
    }

    pub(crate) fn failed(&mut self, error: &dyn std::fmt::Display) {
        self.failures += 1;
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if self.last_logged.is_none_or(|t| now.duration_since(t) >= REMINDER_INTERVAL) {
            self.last_logged = Some(now);
            let failing_s = now.duration_since(since).as_secs();
            tracing::warn!(%error, failures = self.failures, failing_s, "{}", self.what);
        }
    }

    pub(crate) fn succeeded(&mut self) {
        if let Some(since) = self.since.take() {
            tracing::info!(
                failures = self.failures,
                failing_s = since.elapsed().as_secs(),
                "{}: works again",
                self.what
            );
        }
        self.last_logged = None;
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_first_failure_then_once_a_minute_and_forgets_after_a_success() {
        let mut r = Repeated::new("chore failed");
        r.failed(&"disk full");
        let first = r.last_logged;
        assert!(first.is_some());
        r.failed(&"disk full");
        assert_eq!(r.last_logged, first, "not logged again within the minute");
        assert_eq!(r.failures, 2);
        r.succeeded();
        assert_eq!((r.since, r.last_logged, r.failures), (None, None, 0));
        r.failed(&"disk full");
        assert_ne!(r.last_logged, None, "a new run of failures is logged at once");
    }
}
