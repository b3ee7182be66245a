//! Which handler answers which request code.

mod admin;
mod auth;
mod client;
mod message;
mod offset;
mod pop;
mod replica;
mod topic;

use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::request_code as rc;
use petrel_remoting::{Connection, Reply};

use crate::broker::Broker;

type HandlerFn = fn(&Arc<Broker>, &Arc<Connection>, RemotingCommand) -> Reply;

/// Every request code the broker serves, and its handler.
const TABLE: &[(i32, HandlerFn)] = &[
    (rc::SEND_MESSAGE, message::send::handle),
    (rc::SEND_MESSAGE_V2, message::send::handle),
    (rc::SEND_REPLY_MESSAGE, message::send_reply::handle),
    (rc::SEND_REPLY_MESSAGE_V2, message::send_reply::handle),
    (rc::CONSUMER_SEND_MSG_BACK, message::send_back::handle),
    (rc::END_TRANSACTION, message::end_transaction::handle),
    (rc::SEND_BATCH_MESSAGE, message::send::handle),
    (rc::PULL_MESSAGE, message::pull::handle),
    (rc::LITE_PULL_MESSAGE, message::pull::handle),
    (rc::QUERY_CONSUMER_OFFSET, offset::query::handle),
    (rc::UPDATE_CONSUMER_OFFSET, offset::update::handle),
    (rc::GET_MAX_OFFSET, offset::bounds::max),
    (rc::GET_MIN_OFFSET, offset::bounds::min),
    (rc::GET_EARLIEST_MSG_STORETIME, offset::bounds::earliest_store_time),
    (rc::SEARCH_OFFSET_BY_TIMESTAMP, offset::bounds::search_by_time),
    (rc::HEART_BEAT, client::heartbeat::handle),
    (rc::UNREGISTER_CLIENT, client::unregister::handle),
    (rc::GET_CONSUMER_LIST_BY_GROUP, client::consumers::list),
    (rc::GET_CONSUMER_CONNECTION_LIST, client::consumers::connections),
    (rc::CHECK_CLIENT_CONFIG, client::check_config::handle),
    (rc::LOCK_BATCH_MQ, client::queue_lock::lock),
    (rc::UNLOCK_BATCH_MQ, client::queue_lock::unlock),
    (rc::UPDATE_AND_CREATE_TOPIC, topic::update::handle),
    (rc::DELETE_TOPIC_IN_BROKER, topic::delete::handle),
    (rc::GET_ALL_TOPIC_CONFIG, topic::config::all),
    (rc::GET_TOPIC_CONFIG, topic::config::one),
    (rc::GET_TOPIC_STATS_INFO, topic::stats::handle),
    (rc::GET_CONSUME_STATS, admin::consume_stats::handle),
    (rc::GET_BROKER_RUNTIME_INFO, admin::runtime_info::handle),
    (rc::GET_BROKER_CONFIG, admin::broker_config::handle),
    (rc::VIEW_MESSAGE_BY_ID, admin::view_message::handle),
    (rc::QUERY_MESSAGE, admin::query_message::handle),
    (rc::INVOKE_BROKER_TO_RESET_OFFSET, admin::reset_offset::handle),
    (rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, admin::group_config::update),
    (rc::DELETE_SUBSCRIPTIONGROUP, admin::group_config::delete),
    (rc::GET_SUBSCRIPTIONGROUP_CONFIG, admin::group_config::one),
    (rc::GET_ALL_CONSUMER_OFFSET, replica::metadata::consumer_offsets),
    (rc::GET_ALL_DELAY_OFFSET, replica::metadata::delay_offsets),
    (rc::GET_TIMER_CHECK_POINT, replica::metadata::timer_checkpoint),
    (rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, replica::metadata::subscription_groups),
    (rc::GET_ALL_MESSAGE_REQUEST_MODE, replica::metadata::message_request_modes),
    (rc::POP_MESSAGE, pop::take::handle),
    (rc::ACK_MESSAGE, pop::ack::handle),
    (rc::CHANGE_MESSAGE_INVISIBLETIME, pop::change_invisible::handle),
    (rc::QUERY_ASSIGNMENT, pop::assignment::query),
    (rc::SET_MESSAGE_REQUEST_MODE, pop::assignment::set_mode),
    (rc::NOTIFY_BROKER_ROLE_CHANGED, replica::controller::role_changed),
    (rc::GET_BROKER_EPOCH_CACHE, replica::controller::epoch_cache),
    (rc::AUTH_CREATE_USER, auth::user::create),
    (rc::AUTH_UPDATE_USER, auth::user::update),
    (rc::AUTH_DELETE_USER, auth::user::delete),
    (rc::AUTH_GET_USER, auth::user::get),
    (rc::AUTH_LIST_USER, auth::user::list),
    (rc::AUTH_CREATE_ACL, auth::acl::put),
    (rc::AUTH_UPDATE_ACL, auth::acl::put),
    (rc::AUTH_DELETE_ACL, auth::acl::delete),
    (rc::AUTH_GET_ACL, auth::acl::get),
    (rc::AUTH_LIST_ACL, auth::acl::list),
];

pub(super) fn route(code: i32) -> Option<HandlerFn> {
    TABLE.iter().find(|(c, _)| *c == code).map(|(_, h)| *h)
}

/// The request codes the broker answers.
#[must_use]
pub fn served_codes() -> Vec<i32> {
    TABLE.iter().map(|(code, _)| *code).collect()
}
