//! `GrpcFront`: the broker as a `MessagingService`. Each RPC is a thin adapter in its own
//! module (`route`, `send`, `receive`, `session`, `offsets`): it reads the request, calls the
//! broker's services, and answers with RocketMQ 5's status codes.
//!
//! Owns: what every gRPC request means. Must never: do a service's work itself.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::Stream;
use petrel_broker::Broker;
use petrel_broker::traffic::{RpcKey, RpcRequest, RpcResult};
use tonic::metadata::{Ascii, MetadataKey};
use tonic::{Request, Response, Status};

use crate::clients::{Clients, GrpcClient};
use crate::pb::{self, Code};
use crate::renew::RenewPolicy;
use crate::status::Refusal;

/// The gRPC port when `grpcServerPort` is unset: RocketMQ proxy's.
pub const DEFAULT_PORT: u16 = 8081;
/// gRPC clients the broker keeps at most (`grpcMaxClients`'s default).
pub const DEFAULT_MAX_CLIENTS: usize = 65_536;
/// A client not heard from for this long may give its place to a new one (RocketMQ's
/// channel expiry: two minutes without a heartbeat).
pub const CLIENT_IDLE: Duration = Duration::from_secs(120);

/// The broker's gRPC front end.
#[derive(Clone)]
pub struct GrpcFront {
    pub(crate) broker: Arc<Broker>,
    pub(crate) clients: Arc<Clients>,
    /// The port clients reach this front end at, for routes asked without endpoints.
    pub(crate) port: u16,
    /// How push consumers' messages are kept invisible for them (`auto_renew`).
    pub(crate) renew: RenewPolicy,
}

impl GrpcFront {
    /// The front end of `broker` served at `port`, knowing at most `max_clients` clients at once.
    #[must_use]
    pub fn new(broker: Arc<Broker>, port: u16, max_clients: usize) -> GrpcFront {
        GrpcFront {
            broker,
            clients: Arc::new(Clients::new(max_clients, CLIENT_IDLE)),
            port,
            renew: RenewPolicy::default(),
        }
    }

    /// The same front end renewing as `policy` says (tests shorten its times).
    #[must_use]
    pub fn with_renew_policy(mut self, policy: RenewPolicy) -> GrpcFront {
        assert!(policy.ahead < policy.invisible, "a renewal must come before the message does");
        self.renew = policy;
        self
    }

    /// The clients known now.
    #[must_use]
    pub fn clients(&self) -> &Arc<Clients> {
        &self.clients
    }
}

/// The metadata every request is read for, parsed once: a key given as `&str` is parsed (and
/// checked) again on every lookup, which showed in a send's profile.
struct MetadataKeys {
    client_id: MetadataKey<Ascii>,
    language: MetadataKey<Ascii>,
    client_version: MetadataKey<Ascii>,
    authorization: MetadataKey<Ascii>,
    date_time: MetadataKey<Ascii>,
}

static METADATA_KEYS: std::sync::LazyLock<MetadataKeys> = std::sync::LazyLock::new(|| MetadataKeys {
    client_id: MetadataKey::from_static("x-mq-client-id"),
    language: MetadataKey::from_static("x-mq-language"),
    client_version: MetadataKey::from_static("x-mq-client-version"),
    authorization: MetadataKey::from_static("authorization"),
    date_time: MetadataKey::from_static("x-mq-date-time"),
});

/// A request's caller: the client id, language and version its metadata names.
pub(crate) struct Caller {
    pub(crate) client: Arc<GrpcClient>,
    pub(crate) peer: SocketAddr,
    /// The user the request is signed by (or names, when authentication is off).
    pub(crate) principal: petrel_auth::Principal,
}

impl GrpcFront {
    /// The client a request comes from, added on its first request.
    pub(crate) fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Refusal> {
        let meta = request.metadata();
        let keys = &*METADATA_KEYS;
        let text = |key: &MetadataKey<Ascii>| meta.get(key).and_then(|v| v.to_str().ok());
        let client_id = text(&keys.client_id).unwrap_or("");
        if client_id.is_empty() {
            return Err(Refusal::new(Code::ClientIdRequired, "x-mq-client-id is missing"));
        }
        let peer = request.remote_addr().unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let principal = self.principal(text(&keys.authorization), text(&keys.date_time))?;
        let language = text(&keys.language).unwrap_or("");
        let client = self
            .clients
            .get_or_add(client_id, peer, language, text(&keys.client_version).unwrap_or(""))
            .ok_or_else(|| Refusal::new(Code::TooManyRequests, "too many gRPC clients (grpcMaxClients)"))?;
        Ok(Caller { client, peer, principal })
    }
}

/// An answer's `apache.rocketmq.v2.Code`, for `rocketmq_rpc_latency`.
pub(crate) trait Answered {
    /// The code the answer carries (streams: their status item's).
    fn code(&self) -> i32;
}

macro_rules! answered {
    ($($answer:ty),* $(,)?) => {
        $(impl Answered for $answer {
            fn code(&self) -> i32 {
                self.status.as_ref().map_or(Code::Unspecified as i32, |s| s.code)
            }
        })*
    };
}

answered!(
    pb::QueryRouteResponse,
    pb::HeartbeatResponse,
    pb::SendMessageResponse,
    pb::QueryAssignmentResponse,
    pb::AckMessageResponse,
    pb::ForwardMessageToDeadLetterQueueResponse,
    pb::UpdateOffsetResponse,
    pb::GetOffsetResponse,
    pb::QueryOffsetResponse,
    pb::EndTransactionResponse,
    pb::NotifyClientTerminationResponse,
    pb::ChangeInvisibleDurationResponse,
    pb::RecallMessageResponse,
    pb::SyncLiteSubscriptionResponse,
);

/// A streamed answer's code: its status item's.
macro_rules! answered_stream {
    ($($answer:ty => $content:path),* $(,)?) => {
        $(impl Answered for Vec<$answer> {
            fn code(&self) -> i32 {
                use $content as Content;
                self.iter()
                    .find_map(|r| match &r.content {
                        Some(Content::Status(s)) => Some(s.code),
                        _ => None,
                    })
                    .unwrap_or(Code::Unspecified as i32)
            }
        })*
    };
}

answered_stream!(
    pb::ReceiveMessageResponse => pb::receive_message_response::Content,
    pb::PullMessageResponse => pb::pull_message_response::Content,
);

impl GrpcFront {
    /// Counts a call in `rocketmq_rpc_latency` (`protocol_type="grpc"`, the method as its
    /// `request_code`, the answer's code as its `response_code`), from its start to its answer
    /// being ready; a receive, held until messages come or its wait ends, is a long poll.
    fn record(&self, method: &'static str, code: i32, long_polling: bool, started: Instant) {
        let broker = &self.broker;
        if !(broker.stats.traffic.enabled() && broker.config.enable_remoting_metrics) {
            return;
        }
        let code = Code::try_from(code).map_or("UNRECOGNIZED", |c| c.as_str_name());
        let key = RpcKey {
            request: RpcRequest::Grpc { method, code },
            result: RpcResult::Success,
            long_polling,
        };
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        broker.stats.traffic.rpc(key, elapsed_ms);
    }

    /// A unary call's answer, counted.
    fn answer<T: Answered>(&self, method: &'static str, started: Instant, answer: T) -> Unary<T> {
        self.record(method, answer.code(), false, started);
        Ok(Response::new(answer))
    }
}

/// A unary answer.
pub(crate) type Unary<T> = Result<Response<T>, Status>;
/// A streamed answer.
pub(crate) type Streamed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A finished list of answers as a stream that marks `guard` written once the server has
/// taken its last item; dropped sooner (the call cancelled), the guard gives its messages back.
pub(crate) fn stream_then<T: Send + 'static>(items: Vec<T>, guard: Option<crate::renew::HeldGuard>) -> Streamed<T> {
    let mut guard = guard;
    let end = futures::stream::poll_fn(move |_| {
        if let Some(g) = guard.take() {
            g.written();
        }
        std::task::Poll::Ready(None)
    });
    Box::pin(futures::stream::StreamExt::chain(
        futures::stream::iter(items.into_iter().map(Ok)),
        end,
    ))
}

/// A finished list of answers as a stream.
pub(crate) fn stream_of<T: Send + 'static>(items: Vec<T>) -> Streamed<T> {
    Box::pin(futures::stream::iter(items.into_iter().map(Ok)))
}

#[tonic::async_trait]
impl pb::messaging_service_server::MessagingService for GrpcFront {
    type ReceiveMessageStream = Streamed<pb::ReceiveMessageResponse>;
    type PullMessageStream = Streamed<pb::PullMessageResponse>;
    type TelemetryStream = Streamed<pb::TelemetryCommand>;

    async fn query_route(&self, r: Request<pb::QueryRouteRequest>) -> Unary<pb::QueryRouteResponse> {
        self.answer("query_route", Instant::now(), crate::route::query_route(self, r))
    }

    async fn heartbeat(&self, r: Request<pb::HeartbeatRequest>) -> Unary<pb::HeartbeatResponse> {
        self.answer("heartbeat", Instant::now(), crate::session::heartbeat(self, r).await)
    }

    async fn send_message(&self, r: Request<pb::SendMessageRequest>) -> Unary<pb::SendMessageResponse> {
        self.answer("send_message", Instant::now(), crate::send::send_message(self, r).await)
    }

    async fn query_assignment(&self, r: Request<pb::QueryAssignmentRequest>) -> Unary<pb::QueryAssignmentResponse> {
        self.answer("query_assignment", Instant::now(), crate::route::query_assignment(self, r))
    }

    async fn receive_message(&self, r: Request<pb::ReceiveMessageRequest>) -> Unary<Self::ReceiveMessageStream> {
        let started = Instant::now();
        let (answer, guard) = crate::receive::receive(self, r).await;
        self.record("receive_message", answer.code(), true, started);
        Ok(Response::new(stream_then(answer, guard)))
    }

    async fn ack_message(&self, r: Request<pb::AckMessageRequest>) -> Unary<pb::AckMessageResponse> {
        self.answer("ack_message", Instant::now(), crate::receive::ack(self, r))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        r: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Unary<pb::ForwardMessageToDeadLetterQueueResponse> {
        self.answer(
            "forward_message_to_dead_letter_queue",
            Instant::now(),
            crate::receive::forward_to_dlq(self, r).await,
        )
    }

    async fn pull_message(&self, r: Request<pb::PullMessageRequest>) -> Unary<Self::PullMessageStream> {
        let started = Instant::now();
        let answer = crate::offsets::pull(self, r).await;
        self.record("pull_message", answer.code(), false, started);
        Ok(Response::new(stream_of(answer)))
    }

    async fn update_offset(&self, r: Request<pb::UpdateOffsetRequest>) -> Unary<pb::UpdateOffsetResponse> {
        self.answer("update_offset", Instant::now(), crate::offsets::update(self, r))
    }

    async fn get_offset(&self, r: Request<pb::GetOffsetRequest>) -> Unary<pb::GetOffsetResponse> {
        self.answer("get_offset", Instant::now(), crate::offsets::get(self, r))
    }

    async fn query_offset(&self, r: Request<pb::QueryOffsetRequest>) -> Unary<pb::QueryOffsetResponse> {
        self.answer("query_offset", Instant::now(), crate::offsets::query(self, r).await)
    }

    async fn end_transaction(&self, r: Request<pb::EndTransactionRequest>) -> Unary<pb::EndTransactionResponse> {
        self.answer("end_transaction", Instant::now(), crate::send::end_transaction(self, r).await)
    }

    async fn telemetry(&self, r: Request<tonic::Streaming<pb::TelemetryCommand>>) -> Unary<Self::TelemetryStream> {
        crate::session::telemetry(self, r)
            .map(Response::new)
            .map_err(|e| Status::invalid_argument(e.message))
    }

    async fn notify_client_termination(
        &self,
        r: Request<pb::NotifyClientTerminationRequest>,
    ) -> Unary<pb::NotifyClientTerminationResponse> {
        self.answer("notify_client_termination", Instant::now(), crate::session::terminate(self, r))
    }

    async fn change_invisible_duration(
        &self,
        r: Request<pb::ChangeInvisibleDurationRequest>,
    ) -> Unary<pb::ChangeInvisibleDurationResponse> {
        self.answer(
            "change_invisible_duration",
            Instant::now(),
            crate::receive::change_invisible(self, r),
        )
    }

    async fn recall_message(&self, _r: Request<pb::RecallMessageRequest>) -> Unary<pb::RecallMessageResponse> {
        self.answer(
            "recall_message",
            Instant::now(),
            pb::RecallMessageResponse {
                status: Some(crate::status::status(
                    Code::NotImplemented,
                    "RecallMessage is not supported by this broker",
                )),
                message_id: String::new(),
            },
        )
    }

    async fn sync_lite_subscription(&self, _r: Request<pb::SyncLiteSubscriptionRequest>) -> Unary<pb::SyncLiteSubscriptionResponse> {
        self.answer(
            "sync_lite_subscription",
            Instant::now(),
            pb::SyncLiteSubscriptionResponse {
                status: Some(crate::status::status(
                    Code::NotImplemented,
                    "lite topics are not supported by this broker",
                )),
            },
        )
    }
}
