//! A remoting connection as the services see a client: something to tell that its consumer
//! group changed (NOTIFY_CONSUMER_IDS_CHANGED, oneway), or to ask whether a transaction
//! committed (CHECK_TRANSACTION_STATE, oneway: the producer answers with END_TRANSACTION), or
//! to take a reply to its request (PUSH_REPLY_MESSAGE_TO_CLIENT, answered), or what an admin
//! asks of it (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY: forwarded with RocketMQ's
//! fields, the client's answer returned as it is).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use petrel_protocol::codes::response_code;
use petrel_protocol::header::{
    CheckTransactionStateRequestHeader, CommandHeader, ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    ReplyMessageRequestHeader,
};
use petrel_protocol::{RemotingCommand, request_code};
use petrel_remoting::Connection;

use crate::services::{CLIENT_CALL_TIMEOUT, ClientHandle, ClientQuestion, PushError, REPLY_PUSH_TIMEOUT, ReplyPush, TransactionCheck};

static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);

pub struct ConnectionClient(pub Arc<Connection>);

impl ClientHandle for ConnectionClient {
    fn id(&self) -> u64 {
        self.0.id()
    }

    fn peer(&self) -> SocketAddr {
        self.0.peer()
    }

    fn notify_consumer_ids_changed(&self, group: &str) -> bool {
        let mut cmd = RemotingCommand::request(
            request_code::NOTIFY_CONSUMER_IDS_CHANGED,
            NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed),
        );
        cmd.put_ext("consumerGroup", group);
        cmd.mark_oneway();
        self.0.push(cmd)
    }

    fn check_transaction_state(&self, check: &TransactionCheck) -> bool {
        let header = CheckTransactionStateRequestHeader {
            topic: None,
            tran_state_table_offset: check.tran_state_table_offset,
            commit_log_offset: check.commit_log_offset,
            msg_id: check.msg_id.clone(),
            transaction_id: check.msg_id.clone(),
            offset_msg_id: Some(check.offset_msg_id.clone()),
            bname: None,
        };
        let mut cmd = RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE, NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed))
            .with_ext_fields(header.to_ext())
            .with_body(check.record.clone());
        cmd.mark_oneway();
        self.0.push(cmd)
    }

    fn push_reply(&self, reply: ReplyPush) -> std::pin::Pin<Box<dyn Future<Output = Result<(), PushError>> + Send + 'static>> {
        let conn = self.0.clone();
        Box::pin(async move {
            let header = ReplyMessageRequestHeader {
                producer_group: reply.producer_group,
                topic: reply.topic,
                default_topic: reply.default_topic,
                default_topic_queue_nums: reply.default_topic_queue_nums,
                queue_id: reply.queue_id,
                sys_flag: reply.sys_flag,
                born_timestamp: reply.born_timestamp_ms,
                flag: reply.flag,
                properties: reply.properties,
                reconsume_times: reply.reconsume_times,
                unit_mode: reply.unit_mode,
                born_host: reply.born_host.to_string(),
                store_host: reply.store_host.to_string(),
                store_timestamp: reply.store_timestamp_ms,
            };
            let cmd = RemotingCommand::request(request_code::PUSH_REPLY_MESSAGE_TO_CLIENT, 0)
                .with_ext_fields(header.to_ext())
                .with_body(reply.body);
            match conn.call(cmd, REPLY_PUSH_TIMEOUT).await {
                Ok(answer) if answer.code == response_code::SUCCESS => Ok(()),
                Ok(answer) => Err(PushError::Refused {
                    code: answer.code,
                    remark: answer.remark.unwrap_or_default(),
                }),
                Err(e) => Err(PushError::Unreached(Box::new(e))),
            }
        })
    }

    fn ask(&self, question: ClientQuestion) -> std::pin::Pin<Box<dyn Future<Output = Result<bytes::Bytes, PushError>> + Send + 'static>> {
        let conn = self.0.clone();
        Box::pin(async move {
            let cmd = question_command(question);
            match conn.call(cmd, CLIENT_CALL_TIMEOUT).await {
                Ok(answer) if answer.code == response_code::SUCCESS => Ok(answer.body),
                Ok(answer) => Err(PushError::Refused {
                    code: answer.code,
                    remark: answer.remark.unwrap_or_default(),
                }),
                Err(petrel_remoting::CallError::Timeout { .. }) => Err(PushError::TimedOut(CLIENT_CALL_TIMEOUT)),
                Err(e) => Err(PushError::Unreached(Box::new(e))),
            }
        })
    }
}

/// The request a remoting client is asked `question` with: RocketMQ's code and fields.
fn question_command(question: ClientQuestion) -> RemotingCommand {
    let opaque = NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed);
    match question {
        ClientQuestion::RunningInfo { group, client_id, jstack } => {
            let header = GetConsumerRunningInfoRequestHeader {
                consumer_group: group,
                client_id,
                jstack_enable: Some(jstack),
            };
            RemotingCommand::request(request_code::GET_CONSUMER_RUNNING_INFO, opaque).with_ext_fields(header.to_ext())
        }
        ClientQuestion::ConsumeDirectly {
            group,
            client_id,
            msg_id,
            topic,
            broker_name,
            topic_sys_flag,
            group_sys_flag,
            record,
        } => {
            let header = ConsumeMessageDirectlyResultRequestHeader {
                consumer_group: group,
                client_id: Some(client_id),
                msg_id: Some(msg_id),
                broker_name: Some(broker_name),
                topic,
                topic_sys_flag,
                group_sys_flag,
            };
            RemotingCommand::request(request_code::CONSUME_MESSAGE_DIRECTLY, opaque)
                .with_ext_fields(header.to_ext())
                .with_body(record)
        }
    }
}
