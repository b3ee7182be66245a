//! `petrel chaos`: a local cluster of real `petrel` processes (one node, a master with slaves,
//! or three controllers with a broker set of three), a workload through `petrel-client`
//! (unique-key and ordered sync sends, a consumer group committing offsets), faults on a seeded
//! schedule (kill -9 and restart, SIGSTOP past the heartbeat timeouts, partitions through
//! network namespaces or, without root, TCP proxies, a broker's disk filled), and a checker in the manner of OpenChaos and Jepsen: acknowledged and
//! lost (must be 0), duplicated and why, reordered (must be 0), and unavailability.
//!
//! Owns: the processes it starts (and nothing else: with `--target` it only runs the workload
//! and the checker), their network namespaces, proxies and tmpfs mounts, and the reports. Must never: leave a process or
//! namespace or mount behind after a run that returned, or call a run good that lost an acknowledged
//! message.

#![forbid(unsafe_code)]

mod checker;
mod cli;
mod cluster;
mod disk;
mod error;
mod net;
pub mod process;
pub mod proxy;
mod report;
mod rocketmq;
mod run;
mod workload;

pub use checker::Verdict;
pub use cli::{ChaosArgs, FaultKind, Mode, Network};
pub use error::ChaosError;
pub use report::Report;
pub use run::run;

/// Runs `args`, prints the report's path and, last, the summary line; whether nothing
/// acknowledged was lost and nothing reordered. SIGINT or SIGTERM ends the run without a
/// verdict, its processes killed and its namespaces and mounts removed (by dropping it).
pub async fn execute(args: ChaosArgs, command: String) -> Result<bool, ChaosError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let report = tokio::select! {
        report = run(args.clone(), command) => report?,
        _ = interrupt.recv() => return Err(ChaosError::Setup("interrupted (SIGINT); the cluster was stopped".into())),
        _ = terminate.recv() => return Err(ChaosError::Setup("terminated (SIGTERM); the cluster was stopped".into())),
    };
    println!("{}", report.to_markdown());
    println!("chaos: reports in {}", args.report_dir.display());
    println!("{}", report.summary_line());
    Ok(report.verdict.passed())
}
