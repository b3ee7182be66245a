//! A consumer group's settings, RocketMQ's `SubscriptionGroupConfig`:
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200, `mqadmin updateSubGroup`), DELETE_SUBSCRIPTIONGROUP
//! (207, `mqadmin deleteSubGroup`) and GET_SUBSCRIPTIONGROUP_CONFIG (352). Changes are made on a
//! master; its slaves copy the table.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{DeleteSubscriptionGroupRequestHeader, GetSubscriptionGroupConfigRequestHeader};
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::reply::from_error;
use crate::services::groups::GroupConfig;

fn on_master<C: Roles>(ctx: &C, what: &str) -> Result<(), BrokerError> {
    if ctx.role().is_master() {
        Ok(())
    } else {
        Err(BrokerError::Internal(format!(
            "Can not {what} in slave broker; the master's groups are copied here"
        )))
    }
}

pub(crate) fn update<C: Groups + Roles>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let config: GroupConfig = match body::from_json(&request.body) {
        Ok(c) => c,
        Err(e) => {
            let e = BrokerError::BadRequest(format!("bad SubscriptionGroupConfig body: {e}"));
            return Reply::Now(from_error(&request, &e));
        }
    };
    let done = on_master(ctx, "update a subscription group").and_then(|()| ctx.groups().upsert_config(config));
    match done {
        Ok(_) => Reply::Now(answer(&request, resp::SUCCESS)),
        Err(e) => Reply::Now(from_error(&request, &e)),
    }
}

pub(crate) fn delete<C: Groups + Offsets + Roles>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: DeleteSubscriptionGroupRequestHeader,
    request: RemotingCommand,
) -> Reply {
    if let Err(e) = on_master(ctx, "delete a subscription group") {
        return Reply::Now(from_error(&request, &e));
    }
    // As RocketMQ: deleting a group that does not exist succeeds.
    ctx.groups().delete(&h.group_name);
    if h.clean_offset == Some(true) {
        ctx.offsets().remove_group(&h.group_name);
    }
    Reply::Now(answer(&request, resp::SUCCESS))
}

pub(crate) fn one<C: Groups>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: GetSubscriptionGroupConfigRequestHeader,
    request: RemotingCommand,
) -> Reply {
    match ctx.groups().find_config(&h.group) {
        Some(config) => Reply::Now(answer(&request, resp::SUCCESS).with_body(body::to_json(&config))),
        None => Reply::Now(answer(&request, resp::SUBSCRIPTION_GROUP_NOT_EXIST).with_remark("No group in this broker")),
    }
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    // Can disable or reshape another group: Update on the group the body names.
    Unit {
        code: rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        rule: Rule::Custom(group_config),
        handle: &Typed::new(update::<Broker>),
    },
    Unit {
        code: rc::DELETE_SUBSCRIPTIONGROUP,
        rule: Rule::Fields(DELETE, &[Named::Group("groupName")]),
        handle: &Typed::new(delete::<Broker>),
    },
    Unit {
        code: rc::GET_SUBSCRIPTIONGROUP_CONFIG,
        rule: Rule::Fields(GET, &[Named::Group("group")]),
        handle: &Typed::new(one::<Broker>),
    },
];
