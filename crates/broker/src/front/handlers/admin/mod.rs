//! What mqadmin and dashboards read.

pub(super) mod broker_config;
pub(super) mod consume_stats;
pub(super) mod group_config;
pub(super) mod query_message;
pub(super) mod reset_offset;
pub(super) mod runtime_info;
pub(super) mod view_message;
