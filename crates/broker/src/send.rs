//! SEND_MESSAGE (10, long keys), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320, short keys):
//! checks, topic auto-creation, retry/DLQ routing, the stored record, the answer.
//!
//! Owns: turning a send request into commit-log records exactly as RocketMQ lays them out.
//! Must never: store a message it then reports as failed, or report success before the store
//! does (under SYNC_FLUSH that means durable).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use petrel_protocol::batch::decode_batch;
use petrel_protocol::body::{TopicConfig, perm};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{SendMessageRequestHeader, SendMessageResponseHeader};
use petrel_protocol::message::MessageExt;
use petrel_protocol::msgid::{UniqKeyGenerator, create_offset_msg_id};
use petrel_protocol::properties::{Properties, decode_properties, keys};
use petrel_protocol::{MessageError, RemotingCommand};
use petrel_store::{FlushMode, StoreError};

use crate::broker::{Broker, error, ok_with};
use crate::server::{Connection, Reply};
use crate::topics::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, DLQ_GROUP_TOPIC_PREFIX, NOT_ALLOWED_SEND_TOPICS, RETRY_GROUP_TOPIC_PREFIX, validate_topic_name,
};

/// Retries before a message goes to the DLQ when the request does not say (`retryMaxTimes`).
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;

/// What a prepared send will append.
struct Prepared {
    topic: String,
    queue_id: i32,
    records: BytesMut,
    count: usize,
    uniq_key: Option<String>,
    topic_created: bool,
}

fn uniq_keys() -> &'static UniqKeyGenerator {
    static GEN: std::sync::OnceLock<UniqKeyGenerator> = std::sync::OnceLock::new();
    GEN.get_or_init(|| {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as i32);
        UniqKeyGenerator::new(crate::config::detect_local_ip(), std::process::id(), seed)
    })
}

fn store_error_code(e: &StoreError) -> (i32, String) {
    match e {
        StoreError::FlushTimeout { .. } => (resp::FLUSH_DISK_TIMEOUT, e.to_string()),
        StoreError::DiskFull { .. } | StoreError::NotWritable(_) => (resp::SERVICE_NOT_AVAILABLE, e.to_string()),
        StoreError::RecordTooLarge { .. } => (resp::MESSAGE_ILLEGAL, e.to_string()),
        _ => (resp::SYSTEM_ERROR, e.to_string()),
    }
}

impl Broker {
    pub(crate) fn send(self: &Arc<Self>, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        let prepared = match self.prepare_send(conn, &request) {
            Ok(p) => p,
            Err(response) => {
                self.stats.put_failures.fetch_add(1, Ordering::Relaxed);
                return Reply::Now(*response);
            }
        };
        let sync = self.config.flush_disk_type == FlushMode::Sync;
        if !sync && !prepared.topic_created {
            return Reply::Now(self.append_prepared(&request, prepared));
        }
        // A new topic is registered before the answer (clients look its route up next); a
        // sync-flush append waits for the disk: neither may hold up the connection's reader.
        let broker = self.clone();
        Reply::Later(Box::pin(async move {
            if prepared.topic_created {
                broker.register_all().await;
            }
            let response = if sync {
                let b = broker.clone();
                let req = request.clone();
                tokio::task::spawn_blocking(move || b.append_prepared(&req, prepared))
                    .await
                    .unwrap_or_else(|e| error(&request, resp::SYSTEM_ERROR, format!("append task failed: {e}")))
            } else {
                broker.append_prepared(&request, prepared)
            };
            Some(response)
        }))
    }

    fn append_prepared(&self, request: &RemotingCommand, mut p: Prepared) -> RemotingCommand {
        let result = if p.count == 1 {
            self.store.append(&mut p.records, &p.topic, p.queue_id).map(|r| vec![r])
        } else {
            self.store.append_batch(&mut p.records, &p.topic, p.queue_id)
        };
        match result {
            Ok(results) => {
                let bytes: u64 = results.iter().map(|r| r.size_bytes as u64).sum();
                self.stats.put_messages.fetch_add(results.len() as u64, Ordering::Relaxed);
                self.stats.put_bytes.fetch_add(bytes, Ordering::Relaxed);
                let msg_id = results
                    .iter()
                    .map(|r| create_offset_msg_id(self.store_host, r.physical_offset as i64))
                    .collect::<Vec<_>>()
                    .join(",");
                let header = SendMessageResponseHeader {
                    msg_id,
                    queue_id: p.queue_id,
                    queue_offset: results[0].queue_offset,
                    transaction_id: p.uniq_key,
                    batch_uniq_id: None,
                    recall_handle: None,
                    msg_region: Some(self.config.region_id.clone()),
                    trace_on: Some(self.config.trace_on.to_string()),
                };
                ok_with(request, &header)
            }
            Err(e) => {
                self.stats.put_failures.fetch_add(1, Ordering::Relaxed);
                let (code, remark) = store_error_code(&e);
                tracing::warn!(topic = %p.topic, error = %e, "append failed");
                let mut r = error(request, code, remark);
                // The Java client reads MSG_REGION from every send answer.
                r.put_ext("MSG_REGION", self.config.region_id.clone());
                r
            }
        }
    }

    /// Checks the request and encodes its records; an error is the answer to send.
    fn prepare_send(&self, conn: &Connection, request: &RemotingCommand) -> Result<Prepared, Box<RemotingCommand>> {
        let fail = |code: i32, remark: String| Box::new(error(request, code, remark));
        let h = SendMessageRequestHeader::from_send_command(request).map_err(|e| fail(resp::SYSTEM_ERROR, e.to_string()))?;
        validate_topic_name(&h.topic).map_err(|m| fail(resp::INVALID_PARAMETER, m))?;
        if NOT_ALLOWED_SEND_TOPICS.contains(&h.topic.as_str()) {
            return Err(fail(
                resp::NO_PERMISSION,
                format!("Sending message to topic[{}] is forbidden.", h.topic),
            ));
        }
        let mut reconsume_times = h.reconsume_times.unwrap_or(0);
        let (topic_config, topic_created) = self.topic_for_send(request, &h)?;
        if topic_config.perm & perm::WRITE == 0 {
            return Err(fail(
                resp::NO_PERMISSION,
                format!("the topic[{}] sending message is forbidden", h.topic),
            ));
        }
        let queue_nums = topic_config.write_queue_nums.max(topic_config.read_queue_nums);
        if h.queue_id >= queue_nums {
            return Err(fail(
                resp::INVALID_PARAMETER,
                format!("request queueId[{}] is illegal, {} producer: {}", h.queue_id, h.topic, conn.peer),
            ));
        }
        let mut topic = h.topic.clone();
        let mut queue_id = if h.queue_id < 0 {
            self.pick_queue(topic_config.write_queue_nums)
        } else {
            h.queue_id
        };
        let batch = h.is_batch();
        if batch && topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(fail(resp::MESSAGE_ILLEGAL, "batch request does not support retry group".into()));
        }
        // Retry topics: past the retry limit the message goes to the group's DLQ.
        if let Some(group) = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
            let max = h.max_reconsume_times.unwrap_or(DEFAULT_MAX_RECONSUME_TIMES);
            if reconsume_times > max {
                let dlq = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
                self.topics
                    .get_or_create(&dlq, || TopicConfig::new(&dlq, 1, perm::READ | perm::WRITE))
                    .map_err(|e| fail(resp::SYSTEM_ERROR, e.to_string()))?;
                topic = dlq;
                queue_id = 0;
                reconsume_times = reconsume_times.max(0);
            }
        }
        let base = MessageExt {
            topic: topic.clone(),
            queue_id,
            sys_flag: h.sys_flag,
            born_timestamp: h.born_timestamp,
            born_host: conn.peer,
            store_host: self.store_host,
            reconsume_times,
            ..MessageExt::default()
        };
        let mut records = BytesMut::new();
        let encode = |m: &MessageExt, out: &mut BytesMut| -> Result<(), Box<RemotingCommand>> {
            if m.body.len() > self.config.max_message_size_bytes {
                return Err(fail(
                    resp::MESSAGE_ILLEGAL,
                    format!(
                        "the message body size {} is over the limit {}",
                        m.body.len(),
                        self.config.max_message_size_bytes
                    ),
                ));
            }
            m.encode(out).map_err(|e: MessageError| fail(resp::MESSAGE_ILLEGAL, e.to_string()))
        };
        if batch {
            let items = decode_batch(&request.body).map_err(|e| fail(resp::MESSAGE_ILLEGAL, format!("bad batch body: {e}")))?;
            if items.is_empty() {
                return Err(fail(resp::MESSAGE_ILLEGAL, "empty batch".into()));
            }
            let count = items.len();
            for item in items {
                let m = MessageExt {
                    flag: item.flag,
                    body: item.body,
                    properties: item.properties,
                    ..base.clone()
                };
                encode(&m, &mut records)?;
            }
            let uniq_key = h
                .properties
                .as_deref()
                .map(decode_properties)
                .and_then(|p| p.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).cloned());
            return Ok(Prepared {
                topic,
                queue_id,
                records,
                count,
                uniq_key,
                topic_created,
            });
        }
        let mut properties: Properties = h.properties.as_deref().map(decode_properties).unwrap_or_default();
        if properties.get(keys::TRANSACTION_PREPARED).is_some_and(|v| v == "true") {
            return Err(fail(
                resp::NO_PERMISSION,
                format!(
                    "the broker[{}] sending transaction message is forbidden: transactions are not supported yet",
                    self.config.broker_name
                ),
            ));
        }
        if !properties.contains_key(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX) {
            properties.insert(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX.to_owned(), uniq_keys().next());
        }
        properties.insert(keys::MSG_REGION.to_owned(), self.config.region_id.clone());
        properties.insert(keys::CLUSTER.to_owned(), self.config.broker_cluster_name.clone());
        properties.insert(keys::TRACE_SWITCH.to_owned(), self.config.trace_on.to_string());
        let uniq_key = properties.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).cloned();
        let m = MessageExt {
            flag: h.flag,
            body: request.body.clone(),
            properties,
            ..base
        };
        // `encode` refuses properties over 32767 bytes (MESSAGE_ILLEGAL below).
        encode(&m, &mut records)?;
        Ok(Prepared {
            topic,
            queue_id,
            records,
            count: 1,
            uniq_key,
            topic_created,
        })
    }

    /// The topic's config, created from the default topic (or as a retry topic) if needed.
    fn topic_for_send(&self, request: &RemotingCommand, h: &SendMessageRequestHeader) -> Result<(TopicConfig, bool), Box<RemotingCommand>> {
        if let Some(c) = self.topics.get(&h.topic) {
            return Ok((c, false));
        }
        let not_exist = || {
            Box::new(error(
                request,
                resp::TOPIC_NOT_EXIST,
                format!(
                    "topic[{}] not exist, apply first please! https://rocketmq.apache.org/docs/bestPractice/06FAQ",
                    h.topic
                ),
            ))
        };
        let config = if h.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            TopicConfig::new(&h.topic, 1, perm::READ | perm::WRITE)
        } else {
            let template_name = if h.default_topic.is_empty() {
                AUTO_CREATE_TOPIC_KEY_TOPIC
            } else {
                &h.default_topic
            };
            let template = self.topics.get(template_name).filter(|t| t.perm & perm::INHERIT != 0);
            let Some(template) = template.filter(|_| self.config.auto_create_topic_enable) else {
                return Err(not_exist());
            };
            let queues = h.default_topic_queue_nums.clamp(1, template.write_queue_nums.max(1));
            let mut c = TopicConfig::new(&h.topic, queues, template.perm & !perm::INHERIT);
            c.topic_filter_type = template.topic_filter_type.clone();
            c
        };
        let made = config.clone();
        match self.topics.get_or_create(&h.topic, || made) {
            Ok((c, created)) => {
                if created {
                    tracing::info!(topic = %h.topic, queues = c.write_queue_nums, "topic created by a send");
                }
                Ok((c, created))
            }
            Err(e) => Err(Box::new(error(
                request,
                resp::SYSTEM_ERROR,
                format!("cannot save topic {}: {e}", h.topic),
            ))),
        }
    }
}
