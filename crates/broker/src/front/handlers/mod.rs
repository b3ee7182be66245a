//! Every request file of the broker, registered by one line each; the dispatcher, the list of
//! served codes and the access map come from their declarations.

pub(super) mod admin;
pub(super) mod auth;
pub(super) mod client;
pub(super) mod message;
pub(super) mod offset;
pub(super) mod pop;
pub(super) mod replica;
pub(super) mod topic;

use std::sync::LazyLock;

use petrel_remoting::dispatch::Dispatcher;

use crate::front::unit::Unit;

/// Every request file of the broker, one line each: adding a request is a new file declaring
/// its `UNITS` and one line here.
const FILES: &[&[Unit]] = &[
    message::send::UNITS,
    message::send_reply::UNITS,
    message::send_back::UNITS,
    message::end_transaction::UNITS,
    message::pull::UNITS,
    offset::query::UNITS,
    offset::update::UNITS,
    offset::bounds::UNITS,
    client::heartbeat::UNITS,
    client::unregister::UNITS,
    client::consumers::UNITS,
    client::producers::UNITS,
    client::check_config::UNITS,
    client::queue_lock::UNITS,
    client::ask::UNITS,
    topic::update::UNITS,
    topic::delete::UNITS,
    topic::config::UNITS,
    topic::stats::UNITS,
    topic::consumers::UNITS,
    admin::consume_stats::UNITS,
    admin::runtime_info::UNITS,
    admin::broker_config::UNITS,
    admin::view_message::UNITS,
    admin::query_message::UNITS,
    admin::reset_offset::UNITS,
    admin::group_config::UNITS,
    replica::metadata::UNITS,
    pop::take::UNITS,
    pop::ack::UNITS,
    pop::change_invisible::UNITS,
    pop::assignment::UNITS,
    replica::controller::UNITS,
    replica::ha_info::UNITS,
    auth::user::UNITS,
    auth::acl::UNITS,
];

static DISPATCHER: LazyLock<Dispatcher<Unit>> = LazyLock::new(|| Dispatcher::new(FILES));

/// The broker's dispatcher: the units indexed by code.
pub(crate) fn dispatcher() -> &'static Dispatcher<Unit> {
    &DISPATCHER
}

/// The request codes the broker answers.
#[must_use]
pub fn served_codes() -> Vec<i32> {
    DISPATCHER.served_codes().collect()
}
