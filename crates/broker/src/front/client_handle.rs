//! A remoting connection as the services see a client: something to tell that its consumer
//! group changed (NOTIFY_CONSUMER_IDS_CHANGED, oneway), or to ask whether a transaction
//! committed (CHECK_TRANSACTION_STATE, oneway: the producer answers with END_TRANSACTION), or
//! to take a reply to its request (PUSH_REPLY_MESSAGE_TO_CLIENT, answered).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use petrel_protocol::codes::response_code;
use petrel_protocol::header::{CheckTransactionStateRequestHeader, CommandHeader};
use petrel_protocol::{RemotingCommand, request_code};
use petrel_remoting::Connection;

use crate::services::{ClientHandle, REPLY_PUSH_TIMEOUT, ReplyPush, TransactionCheck};

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

    fn push_reply(&self, reply: ReplyPush) -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>> {
        let conn = self.0.clone();
        Box::pin(async move {
            let cmd = RemotingCommand::request(request_code::PUSH_REPLY_MESSAGE_TO_CLIENT, 0)
                .with_ext_fields(reply.header.to_ext())
                .with_body(reply.body);
            match conn.call(cmd, REPLY_PUSH_TIMEOUT).await {
                Ok(answer) if answer.code == response_code::SUCCESS => Ok(()),
                Ok(answer) => Err(format!("code {}: {}", answer.code, answer.remark.unwrap_or_default())),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}
