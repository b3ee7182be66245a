//! Typed calls: routes from the name server, topic creation, sends, pulls, offsets and runtime
//! info from brokers.
//!
//! Owns: one connection per address (replaced when it dies) and the request shapes the official
//! Java client sends. Must never: hide a broker's error code (callers count errors by code).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use petrel_protocol::batch::{BatchItem, encode_batch};
use petrel_protocol::body::{ClusterInfo, KvTable, TopicRouteData, from_json, perm};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{
    CommandHeader, CreateTopicRequestHeader, PullMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
};
use petrel_protocol::properties::{Properties, encode_properties};
use petrel_protocol::{MessageExt, RemotingCommand, decode_messages};

use crate::connection::{Connection, Credentials};
use crate::error::ClientError;

/// A writable queue of a topic and the master that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueAddr {
    /// The name of the broker (master and slaves) that holds the queue.
    pub broker_name: String,
    /// The master's address, `host:port`.
    pub broker_addr: String,
    /// The queue's id within the topic on that broker.
    pub queue_id: i32,
}

/// A successful send answer.
#[derive(Debug, Clone)]
pub struct SendResult {
    /// The message id the broker assigned; empty when the answer lacks it.
    pub msg_id: String,
    /// The queue the message was stored in.
    pub queue_id: i32,
    /// The message's offset in that queue.
    pub queue_offset: i64,
}

/// A pull answer the broker did not reject.
#[derive(Debug, Clone)]
pub struct PullResult {
    /// The broker's response code (SUCCESS, PULL_NOT_FOUND, ...).
    pub code: i32,
    /// The offset to pull from next.
    pub next_begin_offset: i64,
    /// The queue's max offset as the broker reported it; 0 when the answer lacks it.
    pub max_offset: i64,
    /// The messages pulled; empty unless `code` is SUCCESS.
    pub messages: Vec<MessageExt>,
}

/// A client of a RocketMQ cluster, reached through its name servers.
pub struct Client {
    namesrv: Vec<String>,
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    /// How long a call waits for its answer (10 seconds unless changed).
    pub timeout: Duration,
    signer: Option<Arc<Credentials>>,
}

fn broker_error(addr: &str, answer: &RemotingCommand) -> ClientError {
    ClientError::Broker {
        addr: addr.to_owned(),
        code: answer.code,
        remark: answer.remark.clone().unwrap_or_default(),
    }
}

fn ext_i64(answer: &RemotingCommand, key: &str) -> Result<i64, ClientError> {
    answer
        .ext(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| ClientError::BadAnswer(format!("missing or bad {key}")))
}

impl Client {
    /// `namesrv`: `host:port;host:port`.
    pub fn new(namesrv: &str) -> Client {
        Client {
            namesrv: namesrv
                .split(';')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            connections: Mutex::new(HashMap::new()),
            timeout: Duration::from_secs(10),
            signer: None,
        }
    }

    /// Signs every request with these credentials (a broker with `authenticationEnabled`).
    #[must_use]
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Client {
        self.signer = credentials.map(Arc::new);
        self
    }

    /// The live connection to `addr`, made if needed.
    pub async fn connection(&self, addr: &str) -> Result<Arc<Connection>, ClientError> {
        if let Some(c) = self.connections.lock().get(addr).filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let c = Connection::connect_signed(addr, self.signer.clone()).await?;
        self.connections.lock().insert(addr.to_owned(), c.clone());
        Ok(c)
    }

    /// A new connection not shared with other callers (one per simulated producer).
    pub async fn dedicated(&self, addr: &str) -> Result<Arc<Connection>, ClientError> {
        Connection::connect_signed(addr, self.signer.clone()).await
    }

    /// Sends `request` to `addr` over the shared connection and waits for its answer, up to [`Client::timeout`].
    pub async fn call(&self, addr: &str, request: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        self.connection(addr).await?.call(request, self.timeout).await
    }

    async fn call_namesrv(&self, request: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        let mut last = ClientError::NoRoute("no name server configured".into());
        for addr in &self.namesrv {
            match self.call(addr, request.clone()).await {
                Ok(r) => return Ok(r),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The route of `topic` from the first name server that answers.
    pub async fn route(&self, topic: &str) -> Result<TopicRouteData, ClientError> {
        let mut req = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC, 0);
        req.put_ext("topic", topic);
        let r = self.call_namesrv(req).await?;
        match r.code {
            resp::SUCCESS => TopicRouteData::from_json(&r.body).map_err(|e| ClientError::BadAnswer(e.to_string())),
            resp::TOPIC_NOT_EXIST => Err(ClientError::NoRoute(topic.to_owned())),
            _ => Err(broker_error(&self.namesrv.join(";"), &r)),
        }
    }

    /// The clusters and brokers registered with the name server.
    pub async fn cluster_info(&self) -> Result<ClusterInfo, ClientError> {
        let r = self.call_namesrv(RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 0)).await?;
        if r.code != resp::SUCCESS {
            return Err(broker_error(&self.namesrv.join(";"), &r));
        }
        ClusterInfo::from_json(&r.body).map_err(|e| ClientError::BadAnswer(e.to_string()))
    }

    /// The writable queues of `topic` on masters, in route order.
    pub async fn write_queues(&self, topic: &str) -> Result<Vec<QueueAddr>, ClientError> {
        let route = self.route(topic).await?;
        let mut out = Vec::new();
        for qd in route.queue_datas.iter().filter(|q| q.perm & perm::WRITE != 0) {
            let Some(addr) = route
                .broker_datas
                .iter()
                .find(|b| b.broker_name == qd.broker_name)
                .and_then(|b| b.broker_addrs.get(&0))
            else {
                continue;
            };
            out.extend((0..qd.write_queue_nums).map(|queue_id| QueueAddr {
                broker_name: qd.broker_name.clone(),
                broker_addr: addr.clone(),
                queue_id,
            }));
        }
        if out.is_empty() {
            return Err(ClientError::NoRoute(topic.to_owned()));
        }
        Ok(out)
    }

    /// Creates `topic` with `queues` read and write queues on every master of every cluster, unless
    /// it has a route already; waits until the name server has the route.
    pub async fn ensure_topic(&self, topic: &str, queues: i32) -> Result<Vec<QueueAddr>, ClientError> {
        if let Ok(q) = self.write_queues(topic).await {
            return Ok(q);
        }
        // A broker that just started may not have registered yet: give it a few seconds.
        let mut masters: Vec<String> = Vec::new();
        for _ in 0..50 {
            let info = self.cluster_info().await?;
            masters = info
                .broker_addr_table
                .values()
                .filter_map(|b| b.broker_addrs.get(&0).cloned())
                .collect();
            if !masters.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if masters.is_empty() {
            return Err(ClientError::NoRoute(format!("{topic}: no broker registered with the name server")));
        }
        for addr in &masters {
            let header = CreateTopicRequestHeader {
                topic: topic.to_owned(),
                default_topic: "TBW102".into(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: perm::READ | perm::WRITE,
                topic_filter_type: "SINGLE_TAG".into(),
                topic_sys_flag: Some(0),
                order: false,
                attributes: Some(String::new()),
                force: Some(false),
            };
            let r = self
                .call(
                    addr,
                    RemotingCommand::request(rc::UPDATE_AND_CREATE_TOPIC, 0).with_ext_fields(header.to_ext()),
                )
                .await?;
            if r.code != resp::SUCCESS {
                return Err(broker_error(addr, &r));
            }
        }
        // RocketMQ registers with the name server asynchronously after creating a topic.
        for _ in 0..100 {
            if let Ok(q) = self.write_queues(topic).await {
                return Ok(q);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ClientError::NoRoute(topic.to_owned()))
    }

    /// The SEND_MESSAGE_V2 request the Java client would send.
    pub fn send_request(
        producer_group: &str,
        q: &QueueAddr,
        topic: &str,
        body: Bytes,
        properties: &Properties,
        born_ms: i64,
    ) -> RemotingCommand {
        let header: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
            producer_group: producer_group.to_owned(),
            topic: topic.to_owned(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: q.queue_id,
            sys_flag: 0,
            born_timestamp: born_ms,
            flag: 0,
            properties: Some(encode_properties(properties).unwrap_or_default()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: Some(false),
            max_reconsume_times: None,
            bname: Some(q.broker_name.clone()),
        }
        .into();
        RemotingCommand::request(rc::SEND_MESSAGE_V2, 0)
            .with_ext_fields(header.to_ext())
            .with_body(body)
    }

    /// The SEND_BATCH_MESSAGE request for `items`.
    pub fn batch_request(
        producer_group: &str,
        q: &QueueAddr,
        topic: &str,
        items: &[BatchItem],
        born_ms: i64,
    ) -> Result<RemotingCommand, ClientError> {
        let body = encode_batch(items).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        let mut req = Self::send_request(producer_group, q, topic, body, &Properties::default(), born_ms);
        req.code = rc::SEND_BATCH_MESSAGE;
        req.put_ext("m", "true");
        Ok(req)
    }

    /// Reads a send answer.
    pub fn send_result(addr: &str, answer: &RemotingCommand) -> Result<SendResult, ClientError> {
        match answer.code {
            resp::SUCCESS | resp::FLUSH_DISK_TIMEOUT | resp::FLUSH_SLAVE_TIMEOUT | resp::SLAVE_NOT_AVAILABLE
                if answer.code == resp::SUCCESS =>
            {
                Ok(SendResult {
                    msg_id: answer.ext("msgId").unwrap_or_default().to_owned(),
                    queue_id: i32::try_from(ext_i64(answer, "queueId")?)
                        .map_err(|_| ClientError::BadAnswer("queueId out of range".into()))?,
                    queue_offset: ext_i64(answer, "queueOffset")?,
                })
            }
            _ => Err(broker_error(addr, answer)),
        }
    }

    /// PULL_MESSAGE as a pull consumer sends it (subscription in the request, no long polling
    /// unless `suspend_ms > 0`).
    pub fn pull_request(group: &str, topic: &str, queue_id: i32, offset: i64, max_msgs: i32, suspend_ms: i64) -> RemotingCommand {
        let header = PullMessageRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: max_msgs,
            sys_flag: petrel_protocol::header::pull_sys_flag::SUBSCRIPTION
                | if suspend_ms > 0 {
                    petrel_protocol::header::pull_sys_flag::SUSPEND
                } else {
                    0
                },
            commit_offset: 0,
            suspend_timeout_millis: suspend_ms,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            ..Default::default()
        };
        RemotingCommand::request(rc::PULL_MESSAGE, 0).with_ext_fields(header.to_ext())
    }

    /// Reads a pull answer; the "not found", "retry" and "offset moved" codes are results, not errors.
    pub fn pull_result(addr: &str, answer: &RemotingCommand) -> Result<PullResult, ClientError> {
        match answer.code {
            resp::SUCCESS | resp::PULL_NOT_FOUND | resp::PULL_RETRY_IMMEDIATELY | resp::PULL_OFFSET_MOVED => Ok(PullResult {
                code: answer.code,
                next_begin_offset: ext_i64(answer, "nextBeginOffset")?,
                max_offset: ext_i64(answer, "maxOffset").unwrap_or(0),
                messages: if answer.code == resp::SUCCESS {
                    decode_messages(&answer.body).map_err(|e| ClientError::BadAnswer(e.to_string()))?
                } else {
                    Vec::new()
                },
            }),
            _ => Err(broker_error(addr, answer)),
        }
    }

    /// The max offset (one past the last message) of queue `queue_id` of `topic` on the broker at `addr`.
    pub async fn max_offset(&self, addr: &str, topic: &str, queue_id: i32) -> Result<i64, ClientError> {
        let mut req = RemotingCommand::request(rc::GET_MAX_OFFSET, 0);
        req.put_ext("topic", topic);
        req.put_ext("queueId", queue_id.to_string());
        let r = self.call(addr, req).await?;
        if r.code != resp::SUCCESS {
            return Err(broker_error(addr, &r));
        }
        ext_i64(&r, "offset")
    }

    /// The broker's runtime statistics (GET_BROKER_RUNTIME_INFO) from the broker at `addr`.
    pub async fn runtime_info(&self, addr: &str) -> Result<KvTable, ClientError> {
        let r = self.call(addr, RemotingCommand::request(rc::GET_BROKER_RUNTIME_INFO, 0)).await?;
        if r.code != resp::SUCCESS {
            return Err(broker_error(addr, &r));
        }
        from_json(&r.body).map_err(|e| ClientError::BadAnswer(e.to_string()))
    }
}
