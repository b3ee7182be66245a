//! The RocketMQ front end: request units, each declared in its own file
//! (`handlers/<area>/<verb>.rs`: its code, access rule and handler) and registered by one line,
//! served through remoting's dispatcher. Each handler reads the typed header, calls a service,
//! and writes the answer; errors become answers in one place (`reply::from_error`).
//!
//! Owns: the wire side of the broker. Must never: answer a code it does not implement with
//! anything but REQUEST_CODE_NOT_SUPPORTED naming the code, answer a oneway request, or do a
//! service's work itself.

pub mod client_handle;
pub(crate) mod context;
mod handlers;
#[cfg(test)]
mod narrow_tests;
pub mod reply;
#[cfg(test)]
mod tests;
pub(crate) mod unit;

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use petrel_protocol::RemotingCommand;
use petrel_remoting::{Connection, Handler, Reply};

use crate::broker::Broker;
use crate::long_poll::SUSPENDED;
use crate::traffic::{RpcKey, RpcRequest, RpcResult, UNKNOWN_REQUEST_CODE};

pub use handlers::served_codes;

/// The unit serving `code`.
pub(crate) fn unit_for(code: i32) -> Option<&'static unit::Unit> {
    handlers::dispatcher().unit(code)
}

/// Every unit, in declaration order.
#[cfg(test)]
pub(crate) fn units() -> &'static [&'static unit::Unit] {
    handlers::dispatcher().units()
}

/// Counts a request in `rocketmq_rpc_latency`: from its dispatch to its answer being ready
/// (RocketMQ measures to the end of the answer's write; the write is the connection's). A pull
/// or pop that waited for messages is a long poll.
fn record_rpc(broker: &Broker, request_code: i32, response_code: Option<i32>, oneway: bool, long_polling: bool, started: Instant) {
    let result = match (response_code, oneway) {
        (_, true) => RpcResult::Oneway,
        (Some(_), false) => RpcResult::Success,
        (None, false) => RpcResult::ProcessRequestFailed,
    };
    let key = RpcKey {
        request: RpcRequest::Remoting {
            request_code,
            response_code,
        },
        result,
        long_polling,
    };
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    broker.stats.traffic.rpc(key, elapsed_ms);
}

/// A topic or group update, timed for `rocketmq_topic_create_execution_time` and
/// `rocketmq_consumer_group_create_execution_time`.
#[derive(Clone, Copy)]
enum Created {
    Neither,
    Topic { system: bool },
    Group,
}

impl Created {
    fn of(broker: &Broker, request: &RemotingCommand) -> Created {
        use petrel_protocol::codes::request_code as rc;
        match request.code {
            rc::UPDATE_AND_CREATE_TOPIC => Created::Topic {
                system: request.ext("topic").is_some_and(|t| broker.topics.is_system_topic(t)),
            },
            rc::UPDATE_AND_CREATE_TOPIC_LIST => Created::Topic { system: false },
            rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP | rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST => Created::Group,
            _ => Created::Neither,
        }
    }

    fn record(self, broker: &Broker, answer_code: Option<i32>, started: Instant) {
        let success = answer_code == Some(petrel_protocol::codes::response_code::SUCCESS);
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match self {
            Created::Neither => {}
            Created::Topic { system } => broker.stats.traffic.topic_updated(success, system, elapsed_ms),
            Created::Group => broker.stats.traffic.group_updated(success, elapsed_ms),
        }
    }
}

/// The broker as a connection handler.
pub struct RocketMqFront(pub Arc<Broker>);

impl Handler for RocketMqFront {
    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        let started = Instant::now();
        let (code, oneway) = (request.code, request.is_oneway());
        let traffic = &self.0.stats.traffic;
        let config = &self.0.config;
        let admitted = self.0.access.admit(conn, &request);
        let created = match (&admitted, traffic.enabled() && config.enable_request_metrics) {
            (Ok(_), true) => Created::of(&self.0, &request),
            _ => Created::Neither,
        };
        let reply = match admitted {
            Err(refusal) if oneway => {
                drop(refusal);
                Reply::None
            }
            Err(refusal) => Reply::Now(*refusal),
            Ok(_) => handlers::dispatcher().dispatch(request, |unit, request| unit.handle.run(&self.0, conn, request)),
        };
        let rpc = traffic.enabled() && config.enable_remoting_metrics;
        if !rpc && matches!(created, Created::Neither) {
            return reply;
        }
        // Codes this broker does not serve count as one.
        let counted_code = if unit_for(code).is_some() { code } else { UNKNOWN_REQUEST_CODE };
        match reply {
            Reply::Now(answer) => {
                if rpc {
                    record_rpc(&self.0, counted_code, Some(answer.code), oneway, false, started);
                }
                created.record(&self.0, Some(answer.code), started);
                Reply::Now(answer)
            }
            Reply::None => {
                if rpc {
                    record_rpc(&self.0, counted_code, None, oneway, false, started);
                }
                Reply::None
            }
            Reply::Later(work) => {
                let broker = Arc::clone(&self.0);
                Reply::Later(Box::pin(SUSPENDED.scope(Cell::new(false), async move {
                    let answer = work.await;
                    let answer_code = answer.as_ref().map(|a| a.code);
                    if rpc {
                        let long_polling = SUSPENDED.with(Cell::get);
                        record_rpc(&broker, counted_code, answer_code, oneway, long_polling, started);
                    }
                    created.record(&broker, answer_code, started);
                    answer
                })))
            }
        }
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        self.0.groups.connection_closed(conn.id());
    }
}
