//! Topic administration.

pub(in crate::front) mod config;
pub(in crate::front) mod consumers;
pub(in crate::front) mod delete;
pub(in crate::front) mod stats;
pub(in crate::front) mod update;
