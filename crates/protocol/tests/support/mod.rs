#![allow(dead_code)]
pub mod pcap;
pub mod vectors;
