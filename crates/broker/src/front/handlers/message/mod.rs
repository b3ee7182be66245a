//! Messages: sends, replies to requests, pulls, consumers giving messages back, and
//! transactions ending.

pub(super) mod end_transaction;
pub(super) mod pull;
pub(super) mod send;
pub(super) mod send_back;
pub(super) mod send_reply;
