//! GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)
//! and GET_ALL_MESSAGE_REQUEST_MODE (402): the tables a slave copies from its master, in the
//! layout of the files RocketMQ keeps them in (`consumerOffset.json`, `delayOffset.json`,
//! `subscriptionGroup.json`, `messageRequestMode.json`). Petrel has no POP request modes yet, so
//! that table is empty, as on a RocketMQ broker that never used them.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;

pub(crate) fn consumer_offsets<C: Offsets>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    Reply::Now(answer(&request, resp::SUCCESS).with_body(ctx.offsets().table().to_json()))
}

pub(crate) fn subscription_groups<C: Groups>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    Reply::Now(answer(&request, resp::SUCCESS).with_body(ctx.groups().to_json()))
}

pub(crate) fn delay_offsets<C: Schedule>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    Reply::Now(answer(&request, resp::SUCCESS).with_body(ctx.schedule().to_json()))
}

pub(crate) fn timer_checkpoint<C: Timer>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    Reply::Now(answer(&request, resp::SUCCESS).with_body(ctx.timer().to_json()))
}

pub(crate) fn message_request_modes<C: Pop>(ctx: &Arc<C>, _conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    Reply::Now(answer(&request, resp::SUCCESS).with_body(ctx.pop().modes_json()))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    // What a slave copies from its master (it signs with the inner credentials, a super user):
    // every group's offsets and settings, so cluster-wide reads.
    Unit {
        code: rc::GET_ALL_CONSUMER_OFFSET,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(consumer_offsets::<Broker>),
    },
    Unit {
        code: rc::GET_ALL_DELAY_OFFSET,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(delay_offsets::<Broker>),
    },
    Unit {
        code: rc::GET_TIMER_CHECK_POINT,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(timer_checkpoint::<Broker>),
    },
    Unit {
        code: rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(subscription_groups::<Broker>),
    },
    Unit {
        code: rc::GET_ALL_MESSAGE_REQUEST_MODE,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(message_request_modes::<Broker>),
    },
];
