//! HEART_BEAT (34): consumer and producer groups, and each consumer group's retry topic.

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{NoHeader, Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use std::sync::Arc;
use std::time::Instant;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, HeartbeatData};
use petrel_protocol::header::HeartbeatResponseHeader;
use petrel_remoting::{Connection, Reply};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::front::client_handle::ConnectionClient;
use crate::front::reply::{from_error, later, ok_with};
use crate::services::groups::ClientChannel;

pub(crate) fn handle<C: Groups + Topics>(ctx: &Arc<C>, conn: &Arc<Connection>, _header: NoHeader, request: RemotingCommand) -> Reply {
    let data: HeartbeatData = match body::from_json(&request.body) {
        Ok(d) => d,
        Err(e) => return Reply::Now(from_error(&request, &BrokerError::BadRequest(format!("bad heartbeat body: {e}")))),
    };
    let channel = ClientChannel {
        handle: Arc::new(ConnectionClient(conn.clone())),
        client_id: data.client_id.clone(),
        language: request.language,
        version: request.version,
        last_update: Instant::now(),
    };
    let mut created_topic = false;
    let mut registered = || -> Result<(), BrokerError> {
        for consumer in &data.consumer_data_set {
            ctx.groups().register_consumer(channel.clone(), consumer)?;
            let retry_queue_nums = ctx.groups().config(&consumer.group_name).retry_queue_nums;
            created_topic |= ctx.topics().ensure_retry(&consumer.group_name, retry_queue_nums)?;
        }
        for producer in &data.producer_data_set {
            ctx.groups().register_producer(&producer.group_name, channel.clone())?;
        }
        Ok(())
    };
    if let Err(e) = registered() {
        return Reply::Now(from_error(&request, &e));
    }
    let reply = ok_with(
        &request,
        &HeartbeatResponseHeader {
            is_support_heart_beat_v2: Some(true),
            is_sub_change: Some(true),
        },
    );
    if !created_topic {
        return Reply::Now(reply);
    }
    // The client looks the retry topic's route up next: answer once the name server knows it.
    let ctx = ctx.clone();
    later(request, async move {
        ctx.topics().settle().await?;
        Ok(reply)
    })
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[Unit {
    code: rc::HEART_BEAT,
    rule: Rule::Custom(heartbeat),
    handle: &Typed::new(handle::<Broker>),
}];
