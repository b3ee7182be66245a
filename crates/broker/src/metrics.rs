//! The broker's Prometheus metrics in the text exposition format (version 0.0.4), served by the
//! `petrel` binary's scrape endpoint when `metricsExporterType=PROM` (RocketMQ's key; port
//! `metricsPromExporterPort`, 5557).
//!
//! Owns: naming and rendering the broker's counters, the put-message lock's statistics and the
//! process's CPU and memory. Must never: take a lock the append path takes.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use petrel_remoting::ServerStats;
use petrel_store::HistogramSnapshot;

use crate::broker::Broker;
use crate::services::timer::TIMER_TOPIC;

/// Appends one metric with its HELP and TYPE lines.
/// One unlabelled sample per family, all of one kind.
fn metrics_of_kind(out: &mut String, kind: &str, families: &[(&str, &str, f64)]) {
    for (name, help, v) in families {
        metric(out, name, kind, help, &[("", *v)]);
    }
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// Appends a log2-bucketed histogram, its bounds scaled by `scale` (1e-9 turns ns into seconds).
fn histogram(out: &mut String, name: &str, help: &str, h: &HistogramSnapshot, scale: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    let mut cumulative = 0u64;
    let last = h.buckets.iter().rposition(|n| *n > 0).unwrap_or(0);
    for (b, n) in h.buckets.iter().enumerate().take(last + 1) {
        cumulative += n;
        let le = HistogramSnapshot::upper_bound(b) as f64 * scale;
        let _ = writeln!(out, "{name}_bucket{{le=\"{le:e}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", h.sum as f64 * scale);
    let _ = writeln!(out, "{name}_count {}", h.count);
}

/// What a scrape reads besides the broker: the servers' connection counters.
pub struct Sources {
    pub broker: Arc<Broker>,
    pub servers: Vec<(&'static str, Arc<ServerStats>)>,
}

/// The whole scrape.
pub fn render(sources: &Sources) -> String {
    let broker = &sources.broker;
    let mut out = String::with_capacity(16 * 1024);
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
    let stall = broker.store.dispatch_stall();
    metric(
        &mut out,
        "petrel_dispatch_stuck_seconds",
        "gauge",
        "How long the dispatcher has been stuck at a record it cannot read (0: it is not); while it is, consumers see nothing past it and sends are refused.",
        &[("", stall.as_ref().map_or(0.0, |s| s.since.elapsed().as_secs_f64()))],
    );
    metric(
        &mut out,
        "petrel_dispatch_stuck_offset_bytes",
        "gauge",
        "The commit-log offset of the record the dispatcher is stuck at (-1: it is not stuck).",
        &[("", stall.as_ref().map_or(-1.0, |s| s.offset as f64))],
    );
    let pending = broker.schedule.pending(&broker.store);
    let labels: Vec<String> = (1..=pending.len()).map(|level| format!("{{level=\"{level}\"}}")).collect();
    let samples: Vec<(&str, f64)> = labels.iter().map(String::as_str).zip(pending.iter().map(|&n| n as f64)).collect();
    metric(
        &mut out,
        "petrel_delayed_messages_pending",
        "gauge",
        "Delayed messages (DELAY levels, retries) not yet moved to their queues, per level.",
        &samples,
    );
    let timer_pending = broker.timer.pending(|q| broker.store.queue_offsets(TIMER_TOPIC, q).1);
    metric(
        &mut out,
        "petrel_timer_messages_pending",
        "gauge",
        "Timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) stored and not yet delivered.",
        &[("", timer_pending as f64)],
    );
    metric(
        &mut out,
        "petrel_pop_messages_inflight",
        "gauge",
        "Messages popped (POP consumption) and not yet acked, over all groups and queues.",
        &[("", broker.pop.inflight() as f64)],
    );
    metric(
        &mut out,
        "petrel_disk_used_ratio",
        "gauge",
        "Used fraction of the commit log's disk.",
        &[("", log.disk_used_ratio().unwrap_or(0.0))],
    );
    let (consumers, producers) = broker.groups.connection_count();
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
        &[("", broker.admin.uptime().as_secs_f64())],
    );
    render_pipeline(&mut out, broker);
    render_bounds(&mut out, sources);

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

/// The send path's stages: the append's critical section, the flush, the wait for it, and
/// how many records each flush carried.
fn render_pipeline(out: &mut String, broker: &Broker) {
    let log = broker.store.commit_log().stats();
    let s = &broker.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    histogram(
        out,
        "petrel_send_seconds",
        "A send from its arrival to its answer.",
        &s.send_ns.snapshot(),
        1e-9,
    );
    histogram(
        out,
        "petrel_flush_wait_seconds",
        "A SYNC_FLUSH send from its append to the flushed watermark passing it.",
        &s.flush_wait_ns.snapshot(),
        1e-9,
    );
    histogram(
        out,
        "petrel_commitlog_append_seconds",
        "Time inside the put-message lock per append (offsets, patch, hand-off to the stage).",
        &log.append_ns.snapshot(),
        1e-9,
    );
    histogram(
        out,
        "petrel_commitlog_flush_seconds",
        "Duration of one flush (fdatasync of the segments the dirty range spans).",
        &log.flush_ns.snapshot(),
        1e-9,
    );
    histogram(
        out,
        "petrel_commitlog_records_per_flush",
        "Records made durable by one flush (group commit).",
        &log.records_per_flush.snapshot(),
        1.0,
    );
    let parked = |mark: &petrel_store::Watermark| mark.parked_waits() as f64;
    let commit_log = broker.store.commit_log();
    let counters: [(&str, &str, f64); 11] = [
        (
            "petrel_written_waits_parked_total",
            "ASYNC_FLUSH sends that found their record not yet written and waited for the writer.",
            parked(commit_log.written_watermark()),
        ),
        (
            "petrel_flushed_waits_parked_total",
            "SYNC_FLUSH sends that waited for a flush (nearly all of them).",
            parked(commit_log.flushed_watermark()),
        ),
        ("petrel_commitlog_flushes_total", "Flushes done.", load(&log.flushes)),
        (
            "petrel_commitlog_flushed_bytes_total",
            "Bytes made durable.",
            load(&log.flushed_bytes),
        ),
        (
            "petrel_commitlog_segments_prepared_total",
            "Segments created ahead of the writer.",
            load(&log.segments_prepared),
        ),
        (
            "petrel_commitlog_appends_would_block_total",
            "Appends the non-blocking path handed back.",
            load(&log.appends_would_block),
        ),
        (
            "petrel_commitlog_roll_waits_total",
            "Rolls that waited for the next segment.",
            load(&log.roll_waits),
        ),
        (
            "petrel_appends_offloaded_total",
            "Appends run on the store pool.",
            load(&s.appends_offloaded),
        ),
        (
            "petrel_pulls_offloaded_total",
            "Pulls read on the store pool (cold data).",
            load(&s.pulls_offloaded),
        ),
        (
            "petrel_flush_timeouts_total",
            "SYNC_FLUSH sends answered FLUSH_DISK_TIMEOUT.",
            load(&s.flush_timeouts),
        ),
        (
            "petrel_busy_refusals_total",
            "Requests answered SYSTEM_BUSY at a bound.",
            load(&s.busy_refusals),
        ),
    ];
    metrics_of_kind(out, "counter", &counters);
    render_page_cache(out, broker.store.page_cache_stats());
    render_replication(out, broker);
}

/// A master's slaves (each one's lag, who is in sync, the replicated watermark and the wait
/// for it), or a slave's view of its master.
fn render_replication(out: &mut String, broker: &Broker) {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    if let Some(c) = broker.replication.controlled() {
        let gauges = [
            (
                "petrel_role_master",
                "Controller mode: 1 while this broker is its set's master.",
                if broker.role.is_master() { 1.0 } else { 0.0 },
            ),
            (
                "petrel_master_epoch",
                "Controller mode: the master epoch this broker's role belongs to.",
                f64::from(broker.role.master_epoch()),
            ),
            (
                "petrel_confirm_offset",
                "Controller mode: what every in-sync replica holds; consumers read no further.",
                c.confirmed.get() as f64,
            ),
        ];
        metrics_of_kind(out, "gauge", &gauges);
    }
    if let Some(slave) = broker.replication.slave() {
        let st = slave.state();
        let gauges = [
            (
                "petrel_ha_master_connected",
                "1 while this slave is connected to its master's HA server.",
                if st.connected.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
            ),
            (
                "petrel_ha_lag_bytes",
                "The master's offset in its last frame minus this slave's end.",
                (load(&st.master_offset) - broker.store.commit_log().max_offset() as f64).max(0.0),
            ),
        ];
        metrics_of_kind(out, "gauge", &gauges);
        let counters = [
            (
                "petrel_ha_received_bytes_total",
                "Log bytes received from the master.",
                load(&st.bytes),
            ),
            (
                "petrel_ha_reconnects_total",
                "Connections to the master that ended.",
                load(&st.reconnects),
            ),
        ];
        metrics_of_kind(out, "counter", &counters);
        return;
    }
    let Some(gate) = broker.replication.gate() else { return };
    let slaves = gate.slaves();
    let lag: Vec<(String, f64)> = slaves
        .iter()
        .map(|s| (format!("{{slave=\"{}\"}}", s.addr), s.lag_bytes as f64))
        .collect();
    let samples: Vec<(&str, f64)> = lag.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    metric(
        out,
        "petrel_ha_slave_lag_bytes",
        "gauge",
        "The master's end minus what each slave reported holding.",
        &samples,
    );
    let gauges = [
        ("petrel_ha_slaves", "Slaves connected.", slaves.len() as f64),
        (
            "petrel_ha_in_sync_replicas",
            "Replicas in sync, the master included.",
            1.0 + slaves.iter().filter(|s| s.in_sync).count() as f64,
        ),
        (
            "petrel_ha_replicated_offset",
            "The offset every send below it has the acks its policy needs for.",
            gate.replicated().get() as f64,
        ),
    ];
    metrics_of_kind(out, "gauge", &gauges);
    let s = &broker.stats;
    histogram(
        out,
        "petrel_replica_wait_seconds",
        "A SYNC_MASTER send from its append to the replicated watermark passing it.",
        &s.replica_wait_ns.snapshot(),
        1e-9,
    );
    let counters = [
        (
            "petrel_slave_timeouts_total",
            "SYNC_MASTER sends answered FLUSH_SLAVE_TIMEOUT.",
            load(&s.slave_timeouts),
        ),
        (
            "petrel_slave_not_available_total",
            "SYNC_MASTER sends answered SLAVE_NOT_AVAILABLE (too few slaves in sync).",
            load(&s.slave_not_available),
        ),
    ];
    metrics_of_kind(out, "counter", &counters);
}

/// The page-cache budget: resident bytes against it, and what releasing and flow control did.
fn render_page_cache(out: &mut String, pc: &petrel_store::PageCacheStats) {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    let gauges = [
        (
            "petrel_page_cache_budget_bytes",
            "Resident bytes the store's files are held under.",
            load(&pc.budget_bytes),
        ),
        (
            "petrel_page_cache_resident_bytes",
            "Resident bytes of the store's files at the last check.",
            load(&pc.resident_bytes),
        ),
        (
            "petrel_page_cache_busy",
            "1 while unflushed data keeps the cache over budget and sends are refused.",
            if pc.busy.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
        ),
    ];
    metrics_of_kind(out, "gauge", &gauges);
    let counters = [
        (
            "petrel_page_cache_releases_total",
            "Budget passes that released cold ranges.",
            load(&pc.releases),
        ),
        (
            "petrel_page_cache_released_bytes_total",
            "Resident bytes those passes released.",
            load(&pc.released_bytes),
        ),
        (
            "petrel_page_cache_busy_refusals_total",
            "Sends refused with [PC_SYNCHRONIZED].",
            load(&pc.busy_refusals),
        ),
    ];
    metrics_of_kind(out, "counter", &counters);
}

/// Every bound's current use beside its limit.
fn render_bounds(out: &mut String, sources: &Sources) {
    let broker = &sources.broker;
    let mark = broker.store.commit_log().flushed_watermark();
    let c = &broker.config;
    let gauges: [(&str, &str, f64, f64); 5] = [
        (
            "petrel_durability_waiters",
            "SYNC_FLUSH sends waiting for the disk.",
            mark.waiting() as f64,
            mark.capacity() as f64,
        ),
        (
            "petrel_store_pool_jobs",
            "Store jobs queued or running.",
            broker.pool.queued() as f64,
            broker.pool.capacity() as f64,
        ),
        (
            "petrel_long_poll_waiters",
            "Pulls held for new messages.",
            broker.long_poll.waiting() as f64,
            c.max_long_poll_waiters as f64,
        ),
        ("petrel_topics", "Topics held.", broker.topics.count() as f64, c.max_topics as f64),
        (
            "petrel_consumer_groups",
            "Consumer groups known.",
            broker.groups.known_count() as f64,
            c.max_groups as f64,
        ),
    ];
    for (name, help, now, limit) in gauges {
        metric(out, name, "gauge", help, &[("", now)]);
        metric(
            out,
            &format!("{name}_limit"),
            "gauge",
            &format!("The bound on {}", help.to_ascii_lowercase()),
            &[("", limit)],
        );
    }
    let per_server = |read: fn(&ServerStats) -> f64| -> Vec<(String, f64)> {
        sources
            .servers
            .iter()
            .map(|(server, stats)| (format!("{{server=\"{server}\"}}"), read(stats)))
            .collect()
    };
    // (name, type, help, reading)
    type Family = (&'static str, &'static str, &'static str, fn(&ServerStats) -> f64);
    let families: [Family; 5] = [
        ("petrel_connections", "gauge", "Open connections.", |s| {
            s.open.load(Ordering::Relaxed) as f64
        }),
        ("petrel_connections_accepted_total", "counter", "Connections accepted.", |s| {
            s.accepted.load(Ordering::Relaxed) as f64
        }),
        (
            "petrel_connections_refused_total",
            "counter",
            "Connections closed on arrival at maxConnections.",
            |s| s.refused.load(Ordering::Relaxed) as f64,
        ),
        (
            "petrel_connections_closed_idle_total",
            "counter",
            "Connections closed after the idle timeout.",
            |s| s.closed_idle.load(Ordering::Relaxed) as f64,
        ),
        (
            "petrel_connections_closed_bad_frame_total",
            "counter",
            "Connections closed after a bad frame.",
            |s| s.closed_bad_frame.load(Ordering::Relaxed) as f64,
        ),
    ];
    for (name, kind, help, read) in families {
        let samples = per_server(read);
        let samples: Vec<(&str, f64)> = samples.iter().map(|(l, v)| (l.as_str(), *v)).collect();
        metric(out, name, kind, help, &samples);
    }
}

/// CPU seconds and resident bytes of this process, from /proc (Linux only).
fn process_usage() -> Option<(f64, f64)> {
    use procfs::WithCurrentSystemInfo;
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    let ticks = (stat.utime + stat.stime) as f64;
    let hz = procfs::ticks_per_second().max(1) as f64;
    Some((ticks / hz, stat.rss_bytes().get() as f64))
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
            ha_listen_port: Some(0),
            ..crate::BrokerConfig::default()
        };
        let broker = Broker::open(config, crate::NameServers::External(vec![])).unwrap();
        broker.stats.put_messages.fetch_add(7, Ordering::Relaxed);
        let servers = vec![
            ("broker", Arc::new(ServerStats::default())),
            ("namesrv", Arc::new(ServerStats::default())),
        ];
        servers[0].1.refused.fetch_add(3, Ordering::Relaxed);
        let text = render(&Sources {
            broker: broker.clone(),
            servers,
        });
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let family = rest.split_whitespace().next().unwrap().to_owned();
                assert!(typed.insert(family.clone()), "{family} is typed twice");
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
        assert_eq!(value("petrel_durability_waiters_limit"), 65_536.0);
        assert_eq!(value("petrel_connections_refused_total{server=\"broker\"}"), 3.0);
        assert_eq!(value("petrel_commitlog_records_per_flush_count"), 0.0);
        broker.store.shutdown().unwrap();
    }
}
