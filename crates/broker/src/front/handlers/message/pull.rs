//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): the flags to a typed pull, RocketMQ's status
//! to response-code table.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader, pull_sys_flag};
use petrel_remoting::{Connection, Reply, answer};
use petrel_store::GetStatus;

use crate::broker::Broker;
use crate::front::reply::{from_error, later_on_own_task};
use crate::services::consume::{PullOutcome, PullRequest, PullSubscription, nothing_yet};

pub(crate) fn handle<C: Config + Consume + Roles + Shares>(
    ctx: &Arc<C>,
    conn: &Arc<Connection>,
    h: PullMessageRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let flag = |bit: i32| h.sys_flag & bit != 0;
    // A pull that may be held counts against its client's share of the held pulls.
    let place = if flag(pull_sys_flag::SUSPEND) {
        match ctx.quotas().long_polls.take(Some(conn.peer().ip())) {
            Ok(place) => place,
            Err(e) => return Reply::Now(from_error(&request, &e)),
        }
    } else {
        None
    };
    let pull = PullRequest {
        commit_offset: flag(pull_sys_flag::COMMIT_OFFSET).then_some(h.commit_offset),
        suspend: flag(pull_sys_flag::SUSPEND).then(|| Duration::from_millis(u64::try_from(h.suspend_timeout_millis).unwrap_or(0))),
        subscription: flag(pull_sys_flag::SUBSCRIPTION).then(|| PullSubscription {
            expression_type: h.expression_type.clone().unwrap_or_else(|| "TAG".into()),
            expression: h.subscription.clone().unwrap_or_else(|| "*".into()),
            sub_version: h.sub_version,
        }),
        group: h.consumer_group,
        topic: h.topic,
        queue_id: h.queue_id,
        queue_offset: h.queue_offset,
        max_msgs: h.max_msg_nums,
    };
    let ctx = ctx.clone();
    let offset = pull.queue_offset;
    later_on_own_task(request.clone(), async move {
        let got = ctx.consume().pull(pull).await?;
        drop(place);
        Ok(answer_pull(&request, offset, got, Role::of(&ctx)))
    })
}

/// RocketMQ's `GetMessageStatus` → pull response code.
fn code_of(status: GetStatus, offset: i64) -> i32 {
    match status {
        GetStatus::Found => resp::SUCCESS,
        GetStatus::NoMatchedMessage => resp::PULL_RETRY_IMMEDIATELY,
        // The cold tier slow or down: the client backs off and pulls again.
        GetStatus::ColdUnavailable => resp::SYSTEM_BUSY,
        s if nothing_yet(s, offset) => resp::PULL_NOT_FOUND,
        GetStatus::NoMatchedLogicQueue
        | GetStatus::NoMessageInQueue
        | GetStatus::OffsetOverflowOne
        | GetStatus::OffsetOverflowBadly
        | GetStatus::OffsetTooSmall
        | GetStatus::OffsetReset => resp::PULL_OFFSET_MOVED,
    }
}

/// What the pull's answer depends on of the broker's replication role.
#[derive(Clone, Copy)]
struct Role {
    /// A slave's id; `None` on a master.
    slave_id: Option<i64>,
    slave_read_enable: bool,
}

impl Role {
    fn of<C: Config + Roles>(ctx: &C) -> Role {
        Role {
            slave_id: (!ctx.role().is_master()).then(|| ctx.role().broker_id()),
            slave_read_enable: ctx.config().slave_read_enable,
        }
    }
}

fn answer_pull(request: &RemotingCommand, offset: i64, got: PullOutcome, role: Role) -> RemotingCommand {
    let mut code = code_of(got.status, offset);
    if role.slave_id.is_some() && code == resp::PULL_OFFSET_MOVED {
        // A slave may simply lag its master: it never tells a consumer to move its offset
        // (RocketMQ's default, offsetCheckInSlave=false), it sends it back to the master.
        code = resp::PULL_RETRY_IMMEDIATELY;
    }
    let header = PullMessageResponseHeader {
        suggest_which_broker_id: match role.slave_id {
            Some(id) if role.slave_read_enable && code != resp::PULL_RETRY_IMMEDIATELY => id,
            _ => 0,
        },
        next_begin_offset: got.next_begin_offset,
        min_offset: got.min_offset,
        max_offset: got.max_offset,
        offset_delta: None,
        topic_sys_flag: Some(0),
        group_sys_flag: Some(0),
        forbidden_type: None,
    };
    answer(request, code)
        .with_remark(got.status.name())
        .with_ext_fields(header.to_ext())
        .with_body(got.body)
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::PULL_MESSAGE,
        rule: Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB))),
        handle: &Typed::new(handle::<Broker>),
    },
    Unit {
        code: rc::LITE_PULL_MESSAGE,
        rule: Rule::Custom(|r| Ok(read(r, "consumerGroup", SUB))),
        handle: &Typed::new(handle::<Broker>),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_as_rocketmq_maps_them() {
        assert_eq!(code_of(GetStatus::Found, 5), resp::SUCCESS);
        assert_eq!(code_of(GetStatus::NoMatchedMessage, 5), resp::PULL_RETRY_IMMEDIATELY);
        assert_eq!(code_of(GetStatus::OffsetOverflowOne, 5), resp::PULL_NOT_FOUND);
        assert_eq!(code_of(GetStatus::NoMessageInQueue, 0), resp::PULL_NOT_FOUND);
        assert_eq!(code_of(GetStatus::NoMessageInQueue, 3), resp::PULL_OFFSET_MOVED);
        assert_eq!(code_of(GetStatus::NoMatchedLogicQueue, 0), resp::PULL_NOT_FOUND);
        assert_eq!(code_of(GetStatus::OffsetOverflowBadly, 5), resp::PULL_OFFSET_MOVED);
        assert_eq!(code_of(GetStatus::OffsetTooSmall, 5), resp::PULL_OFFSET_MOVED);
    }
}
