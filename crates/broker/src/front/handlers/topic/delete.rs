//! DELETE_TOPIC_IN_BROKER (215): the config, the offsets and the consume-queue files go; the
//! records in the commit log age out with retention.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::DeleteTopicRequestHeader;
use petrel_remoting::{Connection, Reply, answer};

use crate::broker::Broker;
use crate::front::reply::later;

pub(crate) fn handle<C: Admin + Offsets + Topics>(
    ctx: &Arc<C>,
    _conn: &Arc<Connection>,
    h: DeleteTopicRequestHeader,
    request: RemotingCommand,
) -> Reply {
    let ctx = ctx.clone();
    later(request.clone(), async move {
        let existed = ctx.topics().delete(&h.topic).await?;
        ctx.offsets().remove_topic(&h.topic);
        // Only a topic the table held: its name was checked when it was created.
        if existed {
            let queues = ctx.admin().delete_topic_files(h.topic.clone()).await?;
            tracing::info!(topic = %h.topic, queues, "topic deleted with its consume queues");
        }
        Ok(answer(&request, resp::SUCCESS))
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::DELETE_TOPIC_IN_BROKER,
    rule: Rule::Fields(DELETE, &[Named::Topic("topic")]),
    handle: &Typed::new(handle::<Broker>),
}];
