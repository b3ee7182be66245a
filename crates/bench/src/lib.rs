//! `petrel bench`: a load generator for any broker that speaks RocketMQ's remoting protocol,
//! with HdrHistogram percentiles up to P99.99, open-loop rates that do not hide stalls, live
//! progress, reports (JSON, Markdown, SVG) and A/B comparisons.
//!
//! Owns: workloads, statistics and reports. Must never: report a figure without the settings
//! and machine it came from.

#![forbid(unsafe_code)]

pub mod cgroup;
pub mod cli;
pub mod compare;
pub mod connections;
pub mod hist;
pub mod lock_study;
pub mod procstat;
pub mod queues;
pub mod replication;
pub mod report;
pub mod run;
pub mod soak;

pub use cli::BenchCommand;
pub use run::{BenchError, Kind, SendMode, Workload};
