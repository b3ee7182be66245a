//! The Prometheus endpoint: `GET /metrics` in the text exposition format (version 0.0.4), when
//! `metricsExporterType=PROM` (RocketMQ's key; port `metricsPromExporterPort`, 5557).
//!
//! Owns: naming and rendering the broker's counters, the put-message lock's statistics and the
//! process's CPU and memory, and a minimal HTTP/1.1 responder for scrapes. Must never: take a
//! lock the append path takes, or keep a scraper's connection open (one answer, then close).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::broker::Broker;

/// Longest request head read from a scraper.
const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;
/// A scraper that sends nothing for this long is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes served at once; more wait in the listen backlog.
const MAX_CONCURRENT_SCRAPES: usize = 16;

/// Appends one metric with its HELP and TYPE lines.
fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// The whole scrape.
pub fn render(broker: &Broker) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let s = &broker.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    metric(
        &mut out,
        "petrel_messages_put_total",
        "counter",
        "Messages stored.",
        &[("", load(&s.put_messages))],
    );
    metric(
        &mut out,
        "petrel_message_bytes_put_total",
        "counter",
        "Bytes of messages stored.",
        &[("", load(&s.put_bytes))],
    );
    metric(
        &mut out,
        "petrel_put_failures_total",
        "counter",
        "Sends refused or failed.",
        &[("", load(&s.put_failures))],
    );
    metric(
        &mut out,
        "petrel_messages_got_total",
        "counter",
        "Messages returned to pulls.",
        &[("", load(&s.got_messages))],
    );

    let log = broker.store.commit_log();
    let max = log.max_offset() as f64;
    metric(
        &mut out,
        "petrel_commitlog_max_offset_bytes",
        "gauge",
        "End of the commit log.",
        &[("", max)],
    );
    metric(
        &mut out,
        "petrel_commitlog_min_offset_bytes",
        "gauge",
        "Start of the commit log's oldest segment.",
        &[("", log.min_offset() as f64)],
    );
    metric(
        &mut out,
        "petrel_commitlog_unflushed_bytes",
        "gauge",
        "Appended but not yet on disk.",
        &[("", max - log.flushed_offset() as f64)],
    );
    metric(
        &mut out,
        "petrel_dispatch_behind_bytes",
        "gauge",
        "Appended but not yet in the consume queues.",
        &[("", max - broker.store.dispatched_offset() as f64)],
    );
    metric(
        &mut out,
        "petrel_disk_used_ratio",
        "gauge",
        "Used fraction of the commit log's disk.",
        &[("", log.disk_used_ratio().unwrap_or(0.0))],
    );
    let (consumers, producers) = broker.clients.connection_count();
    metric(
        &mut out,
        "petrel_client_connections",
        "gauge",
        "Connected clients by role.",
        &[("{role=\"consumer\"}", consumers as f64), ("{role=\"producer\"}", producers as f64)],
    );
    metric(
        &mut out,
        "petrel_uptime_seconds",
        "gauge",
        "Seconds since the broker started.",
        &[("", broker.boot.elapsed().as_secs_f64())],
    );

    let lock = log.lock_snapshot();
    let c = &lock.counters;
    let kind = format!("{{kind=\"{}\"}}", lock.kind.name());
    let with_kind = |v: f64| [(kind.as_str(), v)];
    metric(
        &mut out,
        "petrel_put_lock_acquisitions_total",
        "counter",
        "Put-message lock acquisitions.",
        &with_kind(c.acquisitions as f64),
    );
    metric(
        &mut out,
        "petrel_put_lock_contended_total",
        "counter",
        "Acquisitions that found the lock held.",
        &with_kind(c.contended as f64),
    );
    metric(
        &mut out,
        "petrel_put_lock_spins_total",
        "counter",
        "Busy-wait iterations of contended acquisitions.",
        &with_kind(c.spins as f64),
    );
    metric(
        &mut out,
        "petrel_put_lock_retreats_total",
        "counter",
        "Spin rounds that ended in a yield.",
        &with_kind(c.retreats as f64),
    );
    metric(
        &mut out,
        "petrel_put_lock_switches_total",
        "counter",
        "Adaptive lock switches between spinning and the mutex.",
        &with_kind(lock.switches as f64),
    );
    if let Some(k) = lock.k {
        metric(
            &mut out,
            "petrel_put_lock_spin_budget",
            "gauge",
            "Spins per round before a yield (k).",
            &with_kind(f64::from(k)),
        );
    }
    if let Some(mode) = lock.mode {
        let mutex = matches!(mode, petrel_lock::Mode::Mutex);
        metric(
            &mut out,
            "petrel_put_lock_mutex_mode",
            "gauge",
            "1 while the adaptive lock blocks, 0 while it spins.",
            &with_kind(if mutex { 1.0 } else { 0.0 }),
        );
    }
    // The lock keeps log2 buckets: bucket b holds waits in [2^(b-1), 2^b) ns, bucket 0 no wait.
    let _ = writeln!(out, "# HELP petrel_put_lock_wait_seconds Time waited for the put-message lock.");
    let _ = writeln!(out, "# TYPE petrel_put_lock_wait_seconds histogram");
    let mut cumulative = 0u64;
    for (b, n) in c.wait_histogram.iter().enumerate() {
        cumulative += n;
        let le_s = if b == 0 { 0.0 } else { (1u64 << b) as f64 / 1e9 };
        let _ = writeln!(
            out,
            "petrel_put_lock_wait_seconds_bucket{{kind=\"{}\",le=\"{le_s:e}\"}} {cumulative}",
            lock.kind.name()
        );
    }
    let _ = writeln!(
        out,
        "petrel_put_lock_wait_seconds_bucket{{kind=\"{}\",le=\"+Inf\"}} {}",
        lock.kind.name(),
        c.acquisitions
    );
    let _ = writeln!(out, "petrel_put_lock_wait_seconds_sum{kind} {}", c.wait_ns_total as f64 / 1e9);
    let _ = writeln!(out, "petrel_put_lock_wait_seconds_count{kind} {}", c.acquisitions);

    if let Some((cpu_s, rss_bytes)) = process_usage() {
        metric(
            &mut out,
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time.",
            &[("", cpu_s)],
        );
        metric(
            &mut out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident set size.",
            &[("", rss_bytes)],
        );
    }
    out
}

/// CPU seconds and resident bytes of this process, from /proc (Linux only).
fn process_usage() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which may hold spaces, start after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name; rss is 24 (21).
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let rss_pages: f64 = fields.get(21)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let (hz, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    Some((ticks / hz.max(1) as f64, rss_pages * page.max(1) as f64))
}

/// Serves scrapes until the task is dropped.
pub async fn serve(listener: TcpListener, broker: Arc<Broker>) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_SCRAPES));
    loop {
        let (stream, _) = listener.accept().await?;
        let permit = slots.clone().acquire_owned().await.expect("semaphore stays open");
        let broker = broker.clone();
        tokio::spawn(async move {
            if let Err(e) = answer_scrape(stream, &broker).await {
                tracing::debug!(error = %e, "metrics scrape failed");
            }
            drop(permit);
        });
    }
}

async fn answer_scrape(mut stream: TcpStream, broker: &Broker) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = match tokio::time::timeout(READ_TIMEOUT, stream.read(&mut buf)).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        };
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST_HEAD_BYTES {
            return respond(&mut stream, "431 Request Header Fields Too Large", "request head too large\n").await;
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(path)) if path == "/metrics" || path.starts_with("/metrics?") => {
            // A few atomics, one statvfs and one /proc read: short enough for a worker.
            let body = render(broker);
            respond(&mut stream, "200 OK", &body).await
        }
        (Some("GET"), Some(_)) => respond(&mut stream, "404 Not Found", "only /metrics is served here\n").await,
        _ => respond(&mut stream, "405 Method Not Allowed", "GET /metrics\n").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample line is `name{labels} value` with a number for the value, and every metric
    /// has its TYPE before its samples.
    #[test]
    fn a_fresh_broker_renders_valid_exposition_text() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::BrokerConfig {
            store_path_root_dir: dir.path().to_owned(),
            broker_ip1: Some("127.0.0.1".parse().unwrap()),
            ..crate::BrokerConfig::default()
        };
        let broker = Broker::open(config, crate::NameServers::External(vec![])).unwrap();
        broker.stats.put_messages.fetch_add(7, Ordering::Relaxed);
        let text = render(&broker);
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split_whitespace().next().unwrap().to_owned());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
            assert!(typed.contains(family), "{name} has no TYPE line before it");
        }
        let value = |series: &str| -> f64 {
            let line = text.lines().find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series));
            line.unwrap_or_else(|| panic!("no {series} in {text}"))
                .rsplit_once(' ')
                .unwrap()
                .1
                .parse()
                .unwrap()
        };
        assert_eq!(value("petrel_messages_put_total"), 7.0);
        let acquisitions = value("petrel_put_lock_acquisitions_total{kind=\"abs\"}");
        assert_eq!(value("petrel_put_lock_wait_seconds_bucket{kind=\"abs\",le=\"+Inf\"}"), acquisitions);
        assert_eq!(value("petrel_put_lock_wait_seconds_count{kind=\"abs\"}"), acquisitions);
        assert_eq!(value("petrel_put_lock_mutex_mode{kind=\"abs\"}"), 0.0);
        assert_eq!(value("petrel_put_lock_spin_budget{kind=\"abs\"}"), 1000.0);
        assert!(value("process_resident_memory_bytes") > 1e6);
        broker.store.shutdown().unwrap();
    }
}
