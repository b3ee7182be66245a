//! Messages: sends, replies to requests, pulls, consumers giving messages back, and
//! transactions ending.

pub(in crate::front) mod end_transaction;
pub(in crate::front) mod pull;
pub(in crate::front) mod send;
pub(in crate::front) mod send_back;
pub(in crate::front) mod send_reply;
