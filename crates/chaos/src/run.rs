//! One chaos run: the cluster, the workload, the fault schedule, the drain and the verdict.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use petrel_client::Client;
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::TopicConfig;
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, GetTopicStatsInfoRequestHeader};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::checker::{Stored, check};
use crate::cli::{ChaosArgs, FaultKind, Network};
use crate::cluster::{Cluster, HEARTBEAT_TIMEOUT_MS};
use crate::error::{ChaosError, Result};
use crate::report::{ExitRecord, FaultRecord, Report, Sample, Schedule};
use crate::workload::{self, Ctx, Delivery, Drain, Live, ORDERED_TOPIC, QUEUES, Sent, TOPIC};

/// How long a send may wait for its answer (RocketMQ's client default is 3 s).
const SEND_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the cluster gets to take its first message.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Restarts tried before a process that will not come back ends the run.
const RESTART_ATTEMPTS: usize = 3;
/// A full disk is held this much longer than other faults: a broker is refused only when it
/// must create a segment (Petrel allocates every byte of a file when it creates it), which at
/// the default rate happens every dozen seconds.
const DISK_FULL_EXTRA: Duration = Duration::from_secs(8);

/// Runs `args` and returns the report (already written to `args.report_dir`).
pub async fn run(args: ChaosArgs, command: String) -> Result<Report> {
    validate(&args)?;
    let network = network(&args)?;
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    let (dir, temporary) = match &args.work_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("petrel-chaos-{}-{seed}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir)?;
    let disk_mib = (args.faults.contains(&FaultKind::DiskFull) && crate::disk::available()).then_some(args.disk_mib);
    let mut cluster = match &args.target {
        Some(_) => None,
        None => Some(Cluster::start(args.mode, &args.implementation(), &dir, network, disk_mib, &args.broker_set).await?),
    };
    let (faults, skipped) = usable_faults(&args, cluster.as_ref())?;
    let namesrv = args
        .target
        .clone()
        .or_else(|| cluster.as_ref().map(|c| c.namesrv.clone()))
        .unwrap_or_default();
    println!("chaos: cluster up (name server {namesrv}, work directory {})", dir.display());
    let result = drive(&args, cluster.as_mut(), &faults, seed, &namesrv).await;
    if let Some(c) = cluster.as_mut() {
        c.stop().await;
    }
    drop(cluster);
    let seen = result?;
    let ordered: HashSet<u32> = ordered_ids(&args).collect();
    let verdict = check(&seen.sent, &seen.delivered, &seen.stored, &ordered, seen.window);
    let report = Report::new(
        &args,
        command,
        seed,
        network,
        skipped,
        seen.schedule,
        verdict,
        seen.timeline,
        seen.errors,
    );
    report.write(&args.report_dir)?;
    if temporary && report.verdict.passed() && !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(report)
}

/// How the run's processes reach each other (`auto` resolved).
fn network(args: &ChaosArgs) -> Result<Network> {
    let rocketmq = args.rocketmq_lib.is_some();
    Ok(match args.network {
        _ if args.target.is_some() => Network::Loopback,
        Network::Auto if crate::net::available() => Network::Netns,
        // RocketMQ's HA port listens on every interface, so it cannot sit behind a proxy.
        Network::Auto if rocketmq => Network::Loopback,
        Network::Auto => Network::Proxy,
        Network::Netns if !crate::net::available() => {
            return Err(ChaosError::Setup("--network netns needs root and iproute2".into()));
        }
        Network::Proxy if rocketmq => {
            return Err(ChaosError::Setup(
                "--network proxy: Apache RocketMQ's HA port listens on every interface, so its processes cannot sit behind the proxies; use --network netns (root)".into(),
            ));
        }
        other => other,
    })
}

fn validate(args: &ChaosArgs) -> Result<()> {
    let bad = |m: &str| Err(ChaosError::Setup(m.into()));
    if args.rate == 0 || args.producers + args.ordered == 0 {
        return bad("--rate and --producers + --ordered must be above 0");
    }
    if args.ordered > QUEUES as usize {
        return bad("--ordered: at most one ordered producer per queue (8)");
    }
    if args.consumers == 0 || args.consumers > 2 * QUEUES as usize {
        return bad("--consumers: 1 to 16");
    }
    if args.target.is_some() && args.rocketmq_lib.is_some() {
        return bad("--target and --rocketmq-lib: a run either starts a cluster or uses one");
    }
    if !args.broker_set.is_empty() && (args.target.is_some() || args.rocketmq_lib.is_some()) {
        return bad("--broker-set: only for a cluster of Petrel's brokers this run starts");
    }
    Ok(())
}

/// The fault kinds this cluster can take; a kind it cannot is left out with the reason, unless
/// it was the only one asked for.
fn usable_faults(args: &ChaosArgs, cluster: Option<&Cluster>) -> Result<(Vec<FaultKind>, Vec<String>)> {
    let mut usable = Vec::new();
    let mut skipped = Vec::new();
    for kind in &args.faults {
        if usable.contains(kind) {
            continue;
        }
        let why = match (kind, cluster) {
            (_, None) => Some("no process started (--target)"),
            (FaultKind::Partition, Some(c)) if !c.can_partition() => Some(
                "partitions need more than one process, and network namespaces (root and iproute2) or the proxies (Petrel's processes)",
            ),
            (FaultKind::DiskFull, Some(c)) if !c.any_disk() => Some("a full disk needs root (a tmpfs per broker)"),
            _ => None,
        };
        match why {
            Some(why) => skipped.push(format!("{}: {why}", kind.name())),
            None => usable.push(*kind),
        }
    }
    if usable.is_empty() && args.injections > 0 && cluster.is_some() {
        return Err(ChaosError::Setup(format!("no fault can be injected: {}", skipped.join("; "))));
    }
    for s in &skipped {
        println!("chaos: left out {s}");
    }
    Ok((usable, skipped))
}

fn ordered_ids(args: &ChaosArgs) -> impl Iterator<Item = u32> {
    let first = u32::try_from(args.producers).unwrap_or(0);
    (0..u32::try_from(args.ordered).unwrap_or(0)).map(move |i| first + i)
}

/// What a run saw, for the checker and the report.
struct Observed {
    sent: Vec<Sent>,
    delivered: Vec<Delivery>,
    stored: Stored,
    schedule: Schedule,
    timeline: Vec<Sample>,
    /// When the producers ran, milliseconds since the start.
    window: (u64, u64),
    errors: std::collections::BTreeMap<String, u64>,
}

async fn drive(args: &ChaosArgs, cluster: Option<&mut Cluster>, faults: &[FaultKind], seed: u64, namesrv: &str) -> Result<Observed> {
    let mut client = Client::new(namesrv);
    client.timeout = SEND_TIMEOUT;
    ready(&client).await?;
    if let Some(c) = cluster.as_deref() {
        replicas_know_topics(&client, c).await?;
    }
    let producers = args.producers + args.ordered;
    let ctx = Arc::new(Ctx {
        client,
        started: Instant::now(),
        live: Live::default(),
        body_bytes: args.size,
        period: Duration::from_secs_f64(producers as f64 / f64::from(args.rate)),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let (drain_tx, drain_rx) = watch::channel(None::<Drain>);
    let (done_tx, done_rx) = watch::channel(false);
    let sampler = tokio::spawn(sample(Arc::clone(&ctx), done_rx));
    let mut sends = JoinSet::new();
    for p in 0..u32::try_from(args.producers).unwrap_or(0) {
        sends.spawn(workload::produce(Arc::clone(&ctx), p, stop_rx.clone()));
    }
    for (queue, p) in ordered_ids(args).enumerate() {
        sends.spawn(workload::produce_ordered(
            Arc::clone(&ctx),
            p,
            i32::try_from(queue).unwrap_or(0),
            stop_rx.clone(),
        ));
    }
    let mut consumers = JoinSet::new();
    for c in 0..args.consumers {
        let owned: Vec<(&'static str, i32)> = [TOPIC, ORDERED_TOPIC]
            .into_iter()
            .flat_map(|t| (0..QUEUES).map(move |q| (t, q)))
            .enumerate()
            .filter(|(i, _)| i % args.consumers == c)
            .map(|(_, tq)| tq)
            .collect();
        consumers.spawn(workload::consume(Arc::clone(&ctx), owned, drain_rx.clone()));
    }
    let schedule = match cluster {
        Some(c) => inject(args, c, faults, seed, &ctx).await?,
        None => {
            tokio::time::sleep(Duration::from_secs(args.duration_s.unwrap_or(30))).await;
            Schedule::default()
        }
    };
    let _ = stop_tx.send(true);
    let sent: Vec<Sent> = sends.join_all().await.into_iter().flatten().collect();
    let window = (0, ctx.elapsed_ms());
    println!("chaos: producers stopped after {} s; draining", window.1 / 1000);
    let deadline = Instant::now() + Duration::from_secs(args.drain_timeout_s);
    let targets = workload::queue_ends(&ctx.client, deadline).await;
    let _ = drain_tx.send(Some(Drain { targets, deadline }));
    let delivered: Vec<Delivery> = consumers.join_all().await.into_iter().flatten().collect();
    let _ = done_tx.send(true);
    let stored = read_all(&ctx.client, deadline.max(Instant::now() + Duration::from_secs(20))).await;
    let timeline = sampler.await.unwrap_or_default();
    let errors = ctx.live.errors_by_kind.lock().clone();
    Ok(Observed {
        sent,
        delivered,
        stored,
        schedule,
        timeline,
        window,
        errors,
    })
}

/// Waits until both topics exist and take a message.
async fn ready(client: &Client) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    for topic in [TOPIC, ORDERED_TOPIC] {
        loop {
            let probe = async {
                let queues = client.ensure_topic(topic, QUEUES).await?;
                let q = &queues[0];
                let req = Client::send_request("chaos-probe", q, topic, "probe".into(), &Default::default(), 0);
                Client::send_result(&q.broker_addr, &client.call(&q.broker_addr, req).await?)
            };
            match probe.await {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => {
                    return Err(ChaosError::Setup(format!("the cluster took no message in {READY_TIMEOUT:?}: {e}")));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }
    Ok(())
}

/// Waits until every broker the run started holds both topics with all their queues. A topic is
/// created on the master, and its replicas learn it from the master's metadata some seconds
/// later. A master lost before then leaves a successor that creates the topic anew on the next
/// send, with the sender's default queue count, so what the old master took into the queues
/// beyond that count becomes unreadable: the run would count that as a loss, caused by its own
/// haste rather than by a fault an operator would meet (topics are created before traffic).
async fn replicas_know_topics(client: &Client, cluster: &Cluster) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let brokers = cluster.nodes().iter().filter(|n| n.name.starts_with("broker"));
    for addr in brokers.map(|n| n.addr.as_str()) {
        for topic in [TOPIC, ORDERED_TOPIC] {
            while !knows_topic(client, addr, topic).await {
                if Instant::now() > deadline {
                    return Err(ChaosError::Setup(format!(
                        "broker {addr} did not learn topic {topic} from its master in {READY_TIMEOUT:?}"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    }
    Ok(())
}

/// GET_TOPIC_CONFIG on `addr` names `topic` with every queue.
async fn knows_topic(client: &Client, addr: &str, topic: &str) -> bool {
    let header = GetTopicStatsInfoRequestHeader { topic: topic.into() };
    let request = RemotingCommand::request(rc::GET_TOPIC_CONFIG, 0).with_ext_fields(header.to_ext());
    match client.call(addr, request).await {
        Ok(a) if a.code == resp::SUCCESS => serde_json::from_slice::<TopicConfig>(&a.body).is_ok_and(|c| c.read_queue_nums >= QUEUES),
        _ => false,
    }
}

/// The queues' contents at the end, each retried until `deadline`; a queue that cannot be read
/// by then is named as such (the checker counts what it should hold as lost, apart).
async fn read_all(client: &Client, deadline: Instant) -> Stored {
    let mut out = Stored {
        log: Vec::new(),
        unreadable: std::collections::HashSet::new(),
    };
    for topic in [TOPIC, ORDERED_TOPIC] {
        for queue in 0..QUEUES {
            loop {
                match workload::read_queue(client, topic, queue).await {
                    Ok(q) => {
                        out.log.extend(q);
                        break;
                    }
                    Err(e) if Instant::now() > deadline => {
                        println!("chaos: {topic} queue {queue} unreadable at the end: {e}");
                        out.unreadable.insert((topic, queue));
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
    }
    out
}

/// Once a second, the acknowledgements, send errors and deliveries of the last second.
async fn sample(ctx: Arc<Ctx>, done: watch::Receiver<bool>) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let mut last = (0, 0, 0);
    // Bounded: the consumers end by their drain deadline, and then `done` is set.
    while !*done.borrow() {
        ticker.tick().await;
        let now = (
            ctx.live.acked.load(Ordering::Relaxed),
            ctx.live.send_errors.load(Ordering::Relaxed),
            ctx.live.consumed.load(Ordering::Relaxed),
        );
        out.push(Sample {
            t_s: ctx.started.elapsed().as_secs_f64(),
            acked: now.0 - last.0,
            errors: now.1 - last.1,
            consumed: now.2 - last.2,
        });
        last = now;
    }
    out
}

/// The fault schedule: each fault on a random process, held, healed, then a quiet spell; the
/// first `faults.len()` injections are each kind once.
/// A process found to have exited by itself is restarted (and reported) before the next fault.
async fn inject(args: &ChaosArgs, cluster: &mut Cluster, faults: &[FaultKind], seed: u64, ctx: &Ctx) -> Result<Schedule> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (hold_lo, hold_hi) = args.hold();
    let (quiet_lo, quiet_hi) = args.quiet();
    let end = args.duration_s.map(|s| Instant::now() + Duration::from_secs(s));
    let mut schedule = Schedule::default();
    let mut records = Vec::with_capacity(args.injections);
    // Every kind once, in a seeded order, before any is drawn again: a short run covers them all.
    let mut first_round = faults.to_vec();
    rng.shuffle(&mut first_round);
    tokio::time::sleep(quiet_lo).await;
    for index in 0..args.injections {
        revive(cluster, ctx, &mut schedule.exits).await?;
        let kind = first_round.get(index).copied().unwrap_or_else(|| faults[rng.usize(..faults.len())]);
        let target = pick_target(&mut rng, cluster, kind, ctx).await;
        let mut hold = between(&mut rng, hold_lo, hold_hi);
        // A pause outlasts the heartbeat timeout, so a paused master is replaced and resumes
        // fenced; half the partitions do too, the other half heal before anyone notices.
        if kind == FaultKind::Pause || (kind == FaultKind::Partition && rng.bool()) {
            hold += Duration::from_millis(HEARTBEAT_TIMEOUT_MS);
        }
        if kind == FaultKind::DiskFull {
            hold += DISK_FULL_EXTRA;
        }
        let name = cluster.nodes()[target].name.clone();
        let start_ms = ctx.elapsed_ms();
        apply(cluster, kind, target).await?;
        tokio::time::sleep(hold).await;
        heal(cluster, kind, target, args.wipe_on_restart).await?;
        let healed_ms = ctx.elapsed_ms();
        println!(
            "chaos: {}/{} {} {name}: {} ms (acked so far {})",
            index + 1,
            args.injections,
            kind.name(),
            healed_ms - start_ms,
            ctx.live.acked.load(Ordering::Relaxed)
        );
        records.push(FaultRecord {
            index,
            kind,
            target: name,
            start_ms,
            healed_ms,
        });
        let mut quiet = between(&mut rng, quiet_lo, quiet_hi);
        if let Some(end) = end {
            let left = u32::try_from(args.injections - index).unwrap_or(1);
            quiet = quiet.max(end.saturating_duration_since(Instant::now()) / left);
        }
        tokio::time::sleep(quiet).await;
    }
    if let Some(end) = end {
        tokio::time::sleep(end.saturating_duration_since(Instant::now())).await;
    }
    revive(cluster, ctx, &mut schedule.exits).await?;
    schedule.faults = records;
    Ok(schedule)
}

async fn revive(cluster: &mut Cluster, ctx: &Ctx, exits: &mut Vec<ExitRecord>) -> Result<()> {
    for (process, status) in cluster.revive().await? {
        println!("chaos: {process} had exited by itself ({status}); restarted");
        exits.push(ExitRecord {
            process,
            status,
            restarted_ms: ctx.elapsed_ms(),
        });
    }
    Ok(())
}

/// Half the faults go to the master the name server names (where a fault costs the most), the
/// rest to any process the fault applies to (a full disk: the brokers).
async fn pick_target(rng: &mut fastrand::Rng, cluster: &Cluster, kind: FaultKind, ctx: &Ctx) -> usize {
    let eligible: Vec<usize> = (0..cluster.nodes().len())
        .filter(|i| kind != FaultKind::DiskFull || cluster.has_disk(*i))
        .collect();
    assert!(!eligible.is_empty(), "{} has a process to apply to", kind.name());
    let any = eligible[rng.usize(..eligible.len())];
    if !rng.bool() {
        return any;
    }
    let master = ctx
        .client
        .write_queues(TOPIC)
        .await
        .ok()
        .and_then(|q| q.first().map(|q| q.broker_addr.clone()));
    master
        .and_then(|addr| cluster.nodes().iter().position(|n| n.addr == addr))
        .filter(|i| eligible.contains(i))
        .unwrap_or(any)
}

fn between(rng: &mut fastrand::Rng, lo: Duration, hi: Duration) -> Duration {
    let lo_ms = u64::try_from(lo.as_millis()).unwrap_or(u64::MAX);
    let hi_ms = u64::try_from(hi.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rng.u64(lo_ms..=hi_ms.max(lo_ms)))
}

async fn apply(cluster: &mut Cluster, kind: FaultKind, target: usize) -> Result<()> {
    match kind {
        FaultKind::Kill => cluster.kill(target).await,
        FaultKind::Pause => cluster.pause(target),
        FaultKind::Partition => cluster.partition(target),
        FaultKind::DiskFull => {
            let ballast_bytes = cluster.fill_disk(target)?;
            tracing::debug!(ballast_bytes, "disk filled");
            Ok(())
        }
    }
}

async fn heal(cluster: &mut Cluster, kind: FaultKind, target: usize, wipe: bool) -> Result<()> {
    match kind {
        FaultKind::Kill => {
            let mut last = None;
            for _ in 0..RESTART_ATTEMPTS {
                match cluster.restart(target, wipe).await {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        tracing::warn!(error = %e, "restart failed; trying again");
                        let _ = cluster.kill(target).await;
                        last = Some(e);
                    }
                }
            }
            Err(last.unwrap_or_else(|| ChaosError::Setup("restart".into())))
        }
        FaultKind::Pause => cluster.resume(target),
        FaultKind::Partition => cluster.heal(target),
        FaultKind::DiskFull => cluster.free_disk(target),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failure is the test failing")]

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ChaosArgs,
    }

    fn args(line: &[&str]) -> ChaosArgs {
        Cli::try_parse_from(std::iter::once("chaos").chain(line.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn the_network_is_the_one_that_can_partition_here() {
        let auto = network(&args(&[])).unwrap();
        let expected = if crate::net::available() { Network::Netns } else { Network::Proxy };
        assert_eq!(auto, expected, "Petrel's processes: namespaces as root, else the proxies");
        assert_eq!(network(&args(&["--network", "proxy"])).unwrap(), Network::Proxy);
        assert_eq!(
            network(&args(&["--target", "127.0.0.1:9876", "--network", "proxy"])).unwrap(),
            Network::Loopback,
            "a target's processes are not ours to put behind anything"
        );
        let refused = network(&args(&["--network", "proxy", "--rocketmq-lib", "lib"])).unwrap_err();
        assert!(refused.to_string().contains("every interface"), "{refused}");
        if !crate::net::available() {
            assert_eq!(network(&args(&["--rocketmq-lib", "lib"])).unwrap(), Network::Loopback);
        }
    }
}
