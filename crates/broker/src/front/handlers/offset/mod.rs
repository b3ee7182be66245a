//! Consumer offsets and queue offset lookups.

pub(in crate::front) mod bounds;
pub(in crate::front) mod query;
pub(in crate::front) mod update;
