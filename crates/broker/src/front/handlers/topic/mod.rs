//! Topic administration.

pub(super) mod config;
pub(super) mod delete;
pub(super) mod stats;
pub(super) mod update;
