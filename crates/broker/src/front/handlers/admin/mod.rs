//! What mqadmin and dashboards read.

pub(in crate::front) mod broker_config;
pub(in crate::front) mod consume_stats;
pub(in crate::front) mod group_config;
pub(in crate::front) mod query_message;
pub(in crate::front) mod reset_offset;
pub(in crate::front) mod runtime_info;
pub(in crate::front) mod view_message;
