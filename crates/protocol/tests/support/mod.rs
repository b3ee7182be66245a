#![allow(dead_code, clippy::unwrap_used, reason = "test support: a failure is the test failing")]
pub mod pcap;
pub mod vectors;
