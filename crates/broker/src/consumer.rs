//! Consumer-facing requests besides pulls: HEART_BEAT, UNREGISTER_CLIENT, the group queries,
//! and the offset requests (QUERY/UPDATE_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET,
//! GET_EARLIEST_MSG_STORETIME, SEARCH_OFFSET_BY_TIMESTAMP).
//!
//! Owns: these answers. Must never: answer a heartbeat that created a retry topic before the
//! name server knows the topic (the client looks its route up right after).

use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, Connection as ConnectionInfo, ConsumerConnection, ConsumerListBody, HeartbeatData, TopicConfig, perm};
use petrel_protocol::codes::response_code as resp;
use petrel_protocol::header::{
    CommandHeader, GetConsumerConnectionListRequestHeader, GetConsumerListByGroupRequestHeader, GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, HeartbeatResponseHeader,
    OffsetResponseHeader, QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader, UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use petrel_store::Boundary;

use crate::broker::{Broker, answer, error, ok_with};
use crate::clients::ClientChannel;
use crate::server::{Connection, Reply};
use crate::topics::RETRY_GROUP_TOPIC_PREFIX;

macro_rules! header_or_error {
    ($ty:ty, $request:expr) => {
        match <$ty>::from_command($request) {
            Ok(h) => h,
            Err(e) => return error($request, resp::SYSTEM_ERROR, e.to_string()),
        }
    };
}

impl Broker {
    pub(crate) fn heartbeat(self: &Arc<Self>, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        let data: HeartbeatData = match body::from_json(&request.body) {
            Ok(d) => d,
            Err(e) => return Reply::Now(error(&request, resp::SYSTEM_ERROR, format!("bad heartbeat body: {e}"))),
        };
        let channel = ClientChannel {
            conn: conn.clone(),
            client_id: data.client_id.clone(),
            language: request.language,
            version: request.version,
            last_update: Instant::now(),
        };
        let mut created_topic = false;
        for consumer in &data.consumer_data_set {
            let retry = format!("{RETRY_GROUP_TOPIC_PREFIX}{}", consumer.group_name);
            match self
                .topics
                .get_or_create(&retry, || TopicConfig::new(&retry, 1, perm::READ | perm::WRITE))
            {
                Ok((_, created)) => created_topic |= created,
                Err(e) => return Reply::Now(error(&request, resp::SYSTEM_ERROR, format!("cannot create {retry}: {e}"))),
            }
        }
        let reply = {
            let header = HeartbeatResponseHeader {
                is_support_heart_beat_v2: Some(true),
                is_sub_change: Some(true),
            };
            ok_with(&request, &header)
        };
        let broker = self.clone();
        let register = move || {
            for consumer in &data.consumer_data_set {
                broker.clients.register_consumer(channel.clone(), consumer);
            }
            for producer in &data.producer_data_set {
                broker.clients.register_producer(&producer.group_name, channel.clone());
            }
        };
        if !created_topic {
            register();
            return Reply::Now(reply);
        }
        let broker = self.clone();
        Reply::Later(Box::pin(async move {
            broker.register_all().await;
            register();
            Some(reply)
        }))
    }

    pub(crate) fn unregister_client(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(UnregisterClientRequestHeader, request);
        self.clients
            .unregister(&h.client_id, h.producer_group.as_deref(), h.consumer_group.as_deref());
        answer(request, resp::SUCCESS).with_ext_fields(Default::default())
    }

    pub(crate) fn get_consumer_list_by_group(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(GetConsumerListByGroupRequestHeader, request);
        let ids = self.clients.consumer_ids(&h.consumer_group);
        if ids.is_empty() {
            return error(
                request,
                resp::SYSTEM_ERROR,
                format!("no consumer for this group, {}", h.consumer_group),
            );
        }
        let body = body::to_json(&ConsumerListBody { consumer_id_list: ids });
        answer(request, resp::SUCCESS).with_ext_fields(Default::default()).with_body(body)
    }

    pub(crate) fn get_consumer_connection_list(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(GetConsumerConnectionListRequestHeader, request);
        let cc = self.clients.with_group(&h.consumer_group, |info| ConsumerConnection {
            connection_set: info
                .channels
                .values()
                .map(|c| ConnectionInfo {
                    client_addr: c.conn.peer.to_string(),
                    client_id: c.client_id.clone(),
                    language: c.language.name().to_owned(),
                    version: c.version,
                })
                .collect(),
            consume_from_where: info.consume_from_where,
            consume_type: info.consume_type,
            message_model: info.message_model,
            subscription_table: info
                .subscriptions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<IndexMap<_, _>>(),
        });
        match cc {
            Some(cc) => answer(request, resp::SUCCESS).with_body(body::to_json(&cc)),
            None => error(
                request,
                resp::CONSUMER_NOT_ONLINE,
                format!("the consumer group[{}] not online", h.consumer_group),
            ),
        }
    }

    pub(crate) fn check_client_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let body: serde_json::Value = match body::from_json(&request.body) {
            Ok(b) => b,
            Err(e) => return error(request, resp::SYSTEM_ERROR, format!("bad CHECK_CLIENT_CONFIG body: {e}")),
        };
        let expression_type = body["subscriptionData"]["expressionType"].as_str().unwrap_or("TAG");
        if !expression_type.eq_ignore_ascii_case("TAG") {
            return error(
                request,
                resp::SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92",
            );
        }
        answer(request, resp::SUCCESS)
    }

    pub(crate) fn query_consumer_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(QueryConsumerOffsetRequestHeader, request);
        if let Some(offset) = self.offsets.query(&h.consumer_group, &h.topic, h.queue_id) {
            return ok_with(request, &OffsetResponseHeader { offset });
        }
        // A new group on a queue that still starts at 0 begins at 0, as RocketMQ does while the
        // queue's first message is in memory; Petrel keeps recent segments mapped, so "the
        // queue was never trimmed" is the analogue.
        let (min, max) = self.store.queue_offsets(&h.topic, h.queue_id);
        if h.set_zero_if_not_found != Some(false) && min <= 0 && max > 0 {
            return ok_with(request, &OffsetResponseHeader { offset: 0 });
        }
        error(
            request,
            resp::QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )
        .with_ext_fields(Default::default())
    }

    pub(crate) fn update_consumer_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(UpdateConsumerOffsetRequestHeader, request);
        if self.topics.get(&h.topic).is_none() {
            return error(request, resp::TOPIC_NOT_EXIST, format!("Topic {} not exist!", h.topic));
        }
        self.offsets.commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
        answer(request, resp::SUCCESS)
    }

    pub(crate) fn get_max_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(GetMaxOffsetRequestHeader, request);
        ok_with(
            request,
            &OffsetResponseHeader {
                offset: self.store.queue_offsets(&h.topic, h.queue_id).1,
            },
        )
    }

    pub(crate) fn get_min_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(GetMinOffsetRequestHeader, request);
        ok_with(
            request,
            &OffsetResponseHeader {
                offset: self.store.queue_offsets(&h.topic, h.queue_id).0,
            },
        )
    }

    pub(crate) fn get_earliest_msg_storetime(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(GetEarliestMsgStoretimeRequestHeader, request);
        let timestamp = self.store.earliest_store_time(&h.topic, h.queue_id);
        ok_with(request, &GetEarliestMsgStoretimeResponseHeader { timestamp })
    }

    pub(crate) fn search_offset_by_timestamp(&self, request: &RemotingCommand) -> RemotingCommand {
        let h = header_or_error!(SearchOffsetRequestHeader, request);
        let boundary = match h.boundary_type.as_deref() {
            Some(b) if b.eq_ignore_ascii_case("upper") => Boundary::Upper,
            _ => Boundary::Lower,
        };
        let offset = self.store.offset_by_time(&h.topic, h.queue_id, h.timestamp, boundary);
        ok_with(request, &OffsetResponseHeader { offset })
    }
}
