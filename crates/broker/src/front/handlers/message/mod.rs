//! Messages: sends and pulls.

pub(super) mod pull;
pub(super) mod send;
