//! Petrel's cold tier: sealed commit-log segments kept in an S3-compatible object store.
//!
//! Owns: the objects of a broker's tier (a segment's bytes and its checksum record, under one
//! prefix), the local manifest of the segments the object store is known to hold, uploads
//! (multipart, verified, retried, bounded in bandwidth) and range reads (verified block by
//! block, cached within a byte bound). Must never: decide which segments go or when a local
//! file may be deleted (the store does, from [`Tier::holds`]); log a credential.

mod config;
mod error;
mod manifest;
pub mod testing;
mod tier;

pub use config::{Secret, TierConfig};
pub use error::TierError;
pub use manifest::TieredSegment;
pub use tier::{Tier, TierStats};
