//! Consumer offsets and queue offset lookups.

pub(super) mod bounds;
pub(super) mod query;
pub(super) mod update;
