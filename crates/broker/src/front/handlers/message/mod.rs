//! Messages: sends, pulls, and consumers giving messages back.

pub(super) mod pull;
pub(super) mod send;
pub(super) mod send_back;
