//! Telemetry, Heartbeat and NotifyClientTermination: a client's session. Over Telemetry the
//! client says what it is (its Settings) and the broker answers with what applies to it — the
//! backoff policy, the body limit, FIFO, batch size and long-polling time — and later sends it
//! commands (a transaction's check-back). Heartbeats keep it registered with its groups, so
//! RocketMQ's admin tools list it beside remoting clients.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use petrel_broker::services::groups::ClientChannel;
use petrel_protocol::model::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData};
use tokio::sync::mpsc;
use tonic::Request;

use crate::access;
use crate::ask::Answered;
use crate::clients::{GrpcClient, TELEMETRY_QUEUE_LEN};
use crate::convert::{duration, resource_name};
use crate::front::{Caller, GrpcFront, Streamed};
use crate::pb::{self, ClientType, Code, settings::PubSub, telemetry_command::Command};
use crate::status::{Refusal, ok, status};

/// Messages a consumer receives per request at most, as the broker tells it.
pub const RECEIVE_BATCH_SIZE: i32 = 32;
/// How long a push consumer's receive may be held, as the broker tells it (RocketMQ's proxy
/// says 20 s; the client's deadline adds its request timeout).
pub const LONG_POLLING_TIMEOUT: Duration = Duration::from_secs(20);
/// Settings a client may send on one stream before the broker stops reading it: a client sends
/// one at start and one every five minutes.
pub const MAX_COMMANDS_PER_STREAM: u64 = 1 << 20;

/// Telemetry: answers each Settings with the broker's, and keeps the stream for commands.
pub(crate) fn telemetry(
    front: &GrpcFront,
    r: Request<tonic::Streaming<pb::TelemetryCommand>>,
) -> Result<Streamed<pb::TelemetryCommand>, Refusal> {
    let caller = front.caller(&r)?;
    let mut inbound = r.into_inner();
    let (tx, rx) = mpsc::channel(TELEMETRY_QUEUE_LEN);
    caller.client.attach(tx.clone());
    let front = front.clone();
    let client = caller.client.clone();
    tokio::spawn(async move {
        let mut commands = 0_u64;
        while let Some(Ok(command)) = inbound.next().await {
            commands += 1;
            if commands > MAX_COMMANDS_PER_STREAM {
                break;
            }
            client.touch();
            let status = command.status;
            let answer = match command.command {
                Some(Command::Settings(settings)) => Some(settings_answer(&front, &caller, settings).await),
                // Answers to an admin's questions (crate::ask), matched by their nonce.
                Some(Command::ThreadStackTrace(t)) => {
                    let answered = Answered {
                        status,
                        stack_trace: t.thread_stack_trace,
                    };
                    if !client.calls.answer(&t.nonce, answered) {
                        tracing::debug!(client = %client.client_id, nonce = %t.nonce, "a thread dump nobody waits for");
                    }
                    None
                }
                Some(Command::VerifyMessageResult(v)) => {
                    let answered = Answered { status, stack_trace: None };
                    if !client.calls.answer(&v.nonce, answered) {
                        tracing::debug!(client = %client.client_id, nonce = %v.nonce, "a verify result nobody waits for");
                    }
                    None
                }
                _ => None,
            };
            if let Some(answer) = answer
                && tx.send(Ok(answer)).await.is_err()
            {
                break;
            }
        }
        // The stream ended. A live client reopens it at once, and some SDKs close it before
        // their NotifyClientTermination: only the stream is dropped here; the client's
        // registrations expire without heartbeats, as a remoting client's do.
        client.detach(&tx);
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}

impl GrpcFront {
    /// Drops a client and everything registered for it.
    pub(crate) fn forget(&self, client: &Arc<GrpcClient>) {
        use petrel_broker::services::ClientHandle as _;
        // Its messages are no longer kept invisible: they come back when their time ends.
        client.renewals.clear();
        self.broker.groups.connection_closed(client.id());
        if let Some(known) = self.clients.get(&client.client_id)
            && Arc::ptr_eq(&known, client)
        {
            self.clients.remove(&client.client_id);
        }
    }
}

/// The broker's answer to a client's Settings: the client's own, with what the broker decides.
async fn settings_answer(front: &GrpcFront, caller: &Caller, mut settings: pb::Settings) -> pb::TelemetryCommand {
    let client = &caller.client;
    let config = &front.broker.config;
    match settings.pub_sub.as_mut() {
        Some(PubSub::Publishing(p)) => {
            p.max_body_size = i32::try_from(config.max_message_size_bytes).unwrap_or(i32::MAX);
            p.validate_message_type = true;
            settings.backoff_policy = Some(producer_backoff());
        }
        Some(PubSub::Subscription(s)) => {
            let group = front.broker.groups.config(&resource_name(s.group.as_ref()));
            s.fifo = Some(group.consume_message_orderly);
            s.receive_batch_size = Some(RECEIVE_BATCH_SIZE);
            s.long_polling_timeout = Some(duration(LONG_POLLING_TIMEOUT));
            settings.backoff_policy = Some(consumer_backoff(front, group.retry_max_times));
        }
        None => {
            return pb::TelemetryCommand {
                status: Some(status(Code::BadRequest, "settings name neither publishing nor subscription")),
                command: None,
            };
        }
    }
    settings.metric = Some(pb::Metric {
        on: false,
        endpoints: None,
    });
    *client.settings.lock() = Some(settings.clone());
    let registered = register(front, caller).await;
    pb::TelemetryCommand {
        status: Some(registered.map_or_else(|e| e.status(), |()| ok())),
        command: Some(Command::Settings(settings)),
    }
}

/// A producer retries at once, then backs off: 10 ms doubling to 1 s, three attempts.
fn producer_backoff() -> pb::RetryPolicy {
    pb::RetryPolicy {
        max_attempts: 3,
        strategy: Some(pb::retry_policy::Strategy::ExponentialBackoff(pb::ExponentialBackoff {
            initial: Some(duration(Duration::from_millis(10))),
            max: Some(duration(Duration::from_secs(1))),
            multiplier: 2.0,
        })),
    }
}

/// A consumer's failed message comes back after the broker's delay levels (`messageDelayLevel`),
/// `retryMaxTimes` + 1 deliveries in all.
fn consumer_backoff(front: &GrpcFront, retry_max_times: i32) -> pb::RetryPolicy {
    let levels = petrel_broker::services::schedule::parse_delay_levels(&front.broker.config.message_delay_level).unwrap_or_default();
    pb::RetryPolicy {
        max_attempts: retry_max_times.saturating_add(1).max(1),
        strategy: Some(pb::retry_policy::Strategy::CustomizedBackoff(pb::CustomizedBackoff {
            next: levels.into_iter().map(|ms| duration(Duration::from_millis(ms))).collect(),
        })),
    }
}

/// Registers the client with its groups: a producer under each topic it publishes (RocketMQ's
/// producer group for gRPC clients), a consumer under its group with its subscriptions.
async fn register(front: &GrpcFront, caller: &Caller) -> Result<(), Refusal> {
    let client = &caller.client;
    let settings = client.settings.lock().clone().ok_or_else(unknown_client)?;
    front.authorize(caller, &checks_of(&settings))?;
    let channel = ClientChannel {
        handle: client.clone(),
        client_id: client.client_id.clone(),
        language: client.language,
        version: client.version,
        last_update: Instant::now(),
    };
    match settings.pub_sub {
        Some(PubSub::Publishing(p)) => {
            for topic in &p.topics {
                front
                    .broker
                    .groups
                    .register_producer(&resource_name(Some(topic)), channel.clone())?;
            }
        }
        Some(PubSub::Subscription(s)) => {
            let push = settings.client_type == Some(ClientType::PushConsumer as i32);
            let data = ConsumerData {
                consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                consume_type: if push {
                    ConsumeType::ConsumePassively
                } else {
                    ConsumeType::ConsumeActively
                },
                group_name: resource_name(s.group.as_ref()),
                message_model: MessageModel::Clustering,
                subscription_data_set: s.subscriptions.iter().map(subscription_of).collect(),
                unit_mode: false,
            };
            front.broker.groups.register_consumer(channel, &data)?;
            // The group's retry topic, as a remoting consumer's heartbeat makes it: admin tools
            // look its route up before they list the group's clients or progress.
            let retry_queue_nums = front.broker.groups.config(&data.group_name).retry_queue_nums;
            if front.broker.topics.ensure_retry(&data.group_name, retry_queue_nums)? {
                front.broker.topics.settle().await?;
            }
        }
        None => return Err(unknown_client()),
    }
    Ok(())
}

/// What a client's settings say it will do: publish its topics, or consume its topics as its group.
fn checks_of(settings: &pb::Settings) -> Vec<petrel_auth::Check> {
    match &settings.pub_sub {
        Some(PubSub::Publishing(p)) => p
            .topics
            .iter()
            .map(|t| access::topic(&resource_name(Some(t)), access::PUB))
            .collect(),
        Some(PubSub::Subscription(s)) => std::iter::once(access::group(&resource_name(s.group.as_ref()), access::SUB))
            .chain(
                s.subscriptions
                    .iter()
                    .map(|e| access::topic(&resource_name(e.topic.as_ref()), access::SUB)),
            )
            .collect(),
        None => Vec::new(),
    }
}

pub(crate) fn subscription_of(entry: &pb::SubscriptionEntry) -> SubscriptionData {
    let topic = resource_name(entry.topic.as_ref());
    let expression = entry.expression.clone().unwrap_or_default();
    let mut data = SubscriptionData::from_tag_expression(
        &topic,
        if expression.expression.is_empty() {
            "*"
        } else {
            &expression.expression
        },
        0,
    );
    if pb::FilterType::try_from(expression.r#type) == Ok(pb::FilterType::Sql) {
        data.expression_type = "SQL92".into();
        data.tags_set.clear();
        data.code_set.clear();
    }
    data
}

fn unknown_client() -> Refusal {
    Refusal::new(Code::UnrecognizedClientType, "cannot find client settings for this client")
}

/// Heartbeat: the client is alive; its registrations are renewed.
pub(crate) async fn heartbeat(front: &GrpcFront, r: Request<pb::HeartbeatRequest>) -> pb::HeartbeatResponse {
    let status = match front.caller(&r) {
        Ok(caller) => register(front, &caller).await,
        Err(e) => Err(e),
    };
    pb::HeartbeatResponse {
        status: Some(status.map_or_else(|e| e.status(), |()| ok())),
    }
}

/// NotifyClientTermination: the client closes; it is forgotten at once.
pub(crate) fn terminate(front: &GrpcFront, r: Request<pb::NotifyClientTerminationRequest>) -> pb::NotifyClientTerminationResponse {
    let status = front.caller(&r).and_then(|caller| {
        if caller.client.settings.lock().is_none() {
            front.forget(&caller.client);
            return Err(unknown_client());
        }
        front.forget(&caller.client);
        Ok(())
    });
    pb::NotifyClientTerminationResponse {
        status: Some(status.map_or_else(|e| e.status(), |()| ok())),
    }
}
