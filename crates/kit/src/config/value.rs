//! How one configuration value is read from a properties file's text and written back: a trait
//! per value type, so that a key table names only a type, a default and a check.
//!
//! Owns: the accepted spellings of the common types. Must never: accept a value by guessing
//! (`yes` is not a boolean; a negative number is not a size).

use std::net::IpAddr;
use std::path::PathBuf;

/// A configuration value type.
pub trait ConfigValue: Sized {
    /// What a valid value looks like, for the error message.
    const EXPECTED: &'static str;
    /// The value is a secret: rendered (in GET_BROKER_CONFIG's answer, errors and logs) as
    /// [`REDACTED`], never as itself.
    const SECRET: bool = false;
    /// Reads a value from the text a file or `--set` gives for it; `None` if it is not valid.
    fn parse(raw: &str) -> Option<Self>;
    /// Writes the value as the file would spell it (a secret as [`REDACTED`]).
    fn render(&self) -> String;
}

impl ConfigValue for String {
    const EXPECTED: &'static str = "a string";
    fn parse(raw: &str) -> Option<Self> {
        Some(raw.to_owned())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

impl ConfigValue for bool {
    const EXPECTED: &'static str = "true or false";
    fn parse(raw: &str) -> Option<Self> {
        match raw.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

macro_rules! number_value {
    ($($t:ty => $what:literal),* $(,)?) => {$(
        impl ConfigValue for $t {
            const EXPECTED: &'static str = $what;
            fn parse(raw: &str) -> Option<Self> {
                raw.parse().ok()
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
number_value!(
    u16 => "an integer from 0 to 65535",
    u64 => "a non-negative integer",
    usize => "a non-negative integer",
    i32 => "a 32-bit integer",
    i64 => "a 64-bit integer",
);

impl ConfigValue for PathBuf {
    const EXPECTED: &'static str = "a path";
    fn parse(raw: &str) -> Option<Self> {
        (!raw.is_empty()).then(|| PathBuf::from(raw))
    }
    fn render(&self) -> String {
        self.display().to_string()
    }
}

impl ConfigValue for IpAddr {
    const EXPECTED: &'static str = "an IP address";
    fn parse(raw: &str) -> Option<Self> {
        raw.parse().ok()
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

/// What a secret is shown as.
pub const REDACTED: &str = "******";

/// A password, a key or credentials: kept as given, shown only as [`REDACTED`] — by
/// GET_BROKER_CONFIG, by `Debug` (so in every log line that prints a configuration) and in the
/// error a bad value gets. [`Secret::expose`] is the one way to the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text` as a secret.
    #[must_use]
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, for the code that uses it (never for display).
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl ConfigValue for Secret {
    const EXPECTED: &'static str = "a secret";
    const SECRET: bool = true;
    fn parse(raw: &str) -> Option<Self> {
        Some(Secret(raw.to_owned()))
    }
    fn render(&self) -> String {
        REDACTED.to_owned()
    }
}

/// Optional values: an empty value means "not set".
impl<T: ConfigValue> ConfigValue for Option<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    const SECRET: bool = T::SECRET;
    fn parse(raw: &str) -> Option<Self> {
        if raw.is_empty() { Some(None) } else { T::parse(raw).map(Some) }
    }
    fn render(&self) -> String {
        self.as_ref().map(ConfigValue::render).unwrap_or_default()
    }
}

/// RocketMQ's `metricsExporterType`; Petrel serves Prometheus only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsExporter {
    /// No metrics are exported (`DISABLE`).
    Disable,
    /// Metrics are served for Prometheus to scrape (`PROM`).
    Prom,
}

impl ConfigValue for MetricsExporter {
    const EXPECTED: &'static str = "PROM or DISABLE (Petrel has no OTLP or LOG exporter)";
    fn parse(raw: &str) -> Option<Self> {
        match raw.to_ascii_uppercase().as_str() {
            "PROM" => Some(MetricsExporter::Prom),
            "DISABLE" => Some(MetricsExporter::Disable),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            MetricsExporter::Prom => "PROM",
            MetricsExporter::Disable => "DISABLE",
        }
        .to_owned()
    }
}

/// A number outside the range its key allows.
#[derive(Debug, thiserror::Error)]
pub enum OutOfRange<T: std::fmt::Display + std::fmt::Debug> {
    /// Outside `[lo, hi]`, the inclusive bounds it carries.
    #[error("must be between {0} and {1}")]
    Between(T, T),
    /// Below the smallest value allowed, which it carries.
    #[error("must be at least {0}")]
    AtLeast(T),
}

/// A check that a number lies in `[lo, hi]`.
pub fn within<T: PartialOrd + std::fmt::Display + std::fmt::Debug + Copy>(lo: T, hi: T) -> impl Fn(&T) -> Result<(), OutOfRange<T>> {
    move |v| {
        if *v < lo || *v > hi {
            Err(OutOfRange::Between(lo, hi))
        } else {
            Ok(())
        }
    }
}

/// A check that a number is at least `lo`.
pub fn at_least<T: PartialOrd + std::fmt::Display + std::fmt::Debug + Copy>(lo: T) -> impl Fn(&T) -> Result<(), OutOfRange<T>> {
    move |v| if *v < lo { Err(OutOfRange::AtLeast(lo)) } else { Ok(()) }
}

/// [`at_least`] for a key that may be unset.
pub fn at_least_if_set<T: PartialOrd + std::fmt::Display + std::fmt::Debug + Copy>(
    lo: T,
) -> impl Fn(&Option<T>) -> Result<(), OutOfRange<T>> {
    move |v| match v {
        Some(v) if *v < lo => Err(OutOfRange::AtLeast(lo)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_only_their_own_spellings() {
        assert_eq!(bool::parse("TRUE"), Some(true));
        assert_eq!(bool::parse("yes"), None);
        assert_eq!(u64::parse("-1"), None);
        assert_eq!(<Option<IpAddr>>::parse(""), Some(None));
        assert_eq!(<Option<IpAddr>>::parse("nope"), None);
        assert_eq!(MetricsExporter::parse("prom"), Some(MetricsExporter::Prom));
        assert_eq!(within(10u64, 95)(&96).unwrap_err().to_string(), "must be between 10 and 95");
        assert!(
            within(10u64, 95)(&95).is_ok() && within(10u64, 95)(&10).is_ok(),
            "the edges are inside"
        );
        assert!(at_least(1usize)(&1).is_ok());
    }

    #[test]
    fn a_secret_is_never_shown() {
        let s = <Option<Secret>>::parse(r#"{"username":"root","password":"hunter2"}"#).unwrap();
        assert_eq!(s.render(), REDACTED);
        assert!(!format!("{s:?}").contains("hunter2"));
        assert_eq!(s.as_ref().map(Secret::expose), Some(r#"{"username":"root","password":"hunter2"}"#));
        assert_eq!(<Option<Secret>>::parse("").unwrap().render(), "", "unset shows as unset");
        const { assert!(<Option<Secret>>::SECRET && !<Option<String>>::SECRET) };
    }
}
