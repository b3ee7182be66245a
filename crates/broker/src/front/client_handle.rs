//! A remoting connection as the services see a client: something to tell that its consumer
//! group changed (NOTIFY_CONSUMER_IDS_CHANGED, oneway), or to ask whether a transaction
//! committed (CHECK_TRANSACTION_STATE, oneway: the producer answers with END_TRANSACTION).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use petrel_protocol::header::{CheckTransactionStateRequestHeader, CommandHeader};
use petrel_protocol::{RemotingCommand, request_code};
use petrel_remoting::Connection;

use crate::services::{ClientHandle, TransactionCheck};

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
}
