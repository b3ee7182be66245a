//! What every Petrel crate shares and none of them owns: replacing a file durably, making a
//! directory durably, reading the wall clock, and the configuration-table mechanism. It depends on nothing of Petrel's, so every
//! crate may use it.
//!
//! Owns: the write-temp, fsync, rename, fsync-directory sequence (one copy for every metadata
//! file) and the one `now_ms`. Must never: hold state beyond the durability observer, or know
//! what the files it writes mean.

#![forbid(unsafe_code)]

pub mod clock;
pub mod config;
pub mod fs;
