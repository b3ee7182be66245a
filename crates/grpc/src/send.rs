//! SendMessage and EndTransaction: each message checked as RocketMQ 5 checks it (its topic, its
//! kind against the topic's `message.type`, its size and fields), then stored by the broker's
//! produce service — the same send the remoting front end makes.

use petrel_broker::services::any_topic;
use petrel_broker::services::produce::{Durability, EndTransaction, Ended, SendOutcome};
use petrel_protocol::msgid::decode_offset_msg_id;
use tonic::Request;

use crate::access;
use crate::convert::{accepted_kinds, resource_name, send_request};
use crate::front::{Caller, GrpcFront};
use crate::pb::{self, Code, MessageType, TransactionResolution};
use crate::route::no_such_topic;
use crate::status::{Refusal, ok, status};
use crate::transaction::TransactionId;

/// Messages one SendMessage may carry (RocketMQ's batch bound on the remoting side).
pub const MAX_MESSAGES_PER_SEND: usize = 1024;

/// SendMessage: one entry per message; the answer's status is the entry's for a single message.
pub(crate) async fn send_message(front: &GrpcFront, r: Request<pb::SendMessageRequest>) -> pb::SendMessageResponse {
    let caller = match front.caller(&r) {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    let messages = r.into_inner().messages;
    if messages.is_empty() || messages.len() > MAX_MESSAGES_PER_SEND {
        return refused(&Refusal::new(
            Code::BadRequest,
            format!("a send carries 1 to {MAX_MESSAGES_PER_SEND} messages, not {}", messages.len()),
        ));
    }
    let mut entries = Vec::with_capacity(messages.len());
    for m in messages {
        let message_id = m.system_properties.as_ref().map(|s| s.message_id.clone()).unwrap_or_default();
        entries.push(match send_one(front, &caller, m).await {
            Ok(entry) => entry,
            Err(e) => pb::SendResultEntry {
                status: Some(e.status()),
                message_id,
                ..pb::SendResultEntry::default()
            },
        });
    }
    let all_ok = entries.iter().all(|e| e.status.as_ref().is_some_and(|s| s.code == Code::Ok as i32));
    let overall = match (all_ok, entries.as_slice()) {
        (true, _) => ok(),
        (false, [one]) => one.status.clone().unwrap_or_else(ok),
        _ => status(Code::MultipleResults, "the messages were not all stored; see each entry"),
    };
    pb::SendMessageResponse {
        status: Some(overall),
        entries,
    }
}

fn refused(e: &Refusal) -> pb::SendMessageResponse {
    pb::SendMessageResponse {
        status: Some(e.status()),
        entries: Vec::new(),
    }
}

async fn send_one(front: &GrpcFront, caller: &Caller, m: pb::Message) -> Result<pb::SendResultEntry, Refusal> {
    let broker = &front.broker;
    let (req, kind) = send_request(m, caller.peer, broker.config.max_message_size_bytes)?;
    front.authorize(caller, &[access::topic(&req.topic, access::PUB)])?;
    // Read in place: a copy of the topic's config per message showed in a send's profile.
    let topics = &broker.topics;
    let accepted = topics.with(&req.topic, |config| accepted_kinds(&config.attributes).contains(&kind));
    match accepted {
        None => return Err(no_such_topic(&req.topic)),
        Some(false) => {
            let declared = topics.with(&req.topic, |c| c.attributes.get("message.type").cloned()).flatten();
            return Err(Refusal::new(
                Code::MessagePropertyConflictWithType,
                format!(
                    "a {} message cannot be sent to topic [{}], whose message.type is {}",
                    kind.as_str_name(),
                    req.topic,
                    declared.as_deref().unwrap_or("NORMAL")
                ),
            ));
        }
        Some(true) => {}
    }
    let message_id = req
        .properties
        .as_deref()
        .and_then(|p| petrel_protocol::properties::property(p, petrel_protocol::properties::keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        .unwrap_or_default()
        .to_owned();
    // Held until the send is answered: the client's share of the sends in progress.
    let _place = broker.quotas.sends.take(Some(caller.peer.ip()))?;
    let outcome = broker.produce.send(req).await?;
    entry_of(&outcome, message_id, kind)
}

/// A stored send's entry: SUCCESS, or RocketMQ 5's code for a durability that fell short (the
/// message is stored either way, as on remoting).
fn entry_of(outcome: &SendOutcome, message_id: String, kind: MessageType) -> Result<pb::SendResultEntry, Refusal> {
    let status = match outcome.durability {
        Durability::Stored => ok(),
        Durability::FlushTimedOut => status(
            Code::MasterPersistenceTimeout,
            "stored; the disk did not confirm within syncFlushTimeout",
        ),
        Durability::SlaveTimedOut => status(
            Code::SlavePersistenceTimeout,
            "stored; the replicas did not confirm within slaveTimeout",
        ),
        Durability::SlaveNotAvailable => status(Code::HaNotAvailable, "stored on the master; no replica is in sync"),
    };
    let transaction_id = if kind == MessageType::Transaction {
        let (_, commit_log_offset) =
            decode_offset_msg_id(&outcome.msg_id).map_err(|e| Refusal::new(Code::InternalServerError, e.to_string()))?;
        TransactionId {
            commit_log_offset,
            tran_state_table_offset: outcome.queue_offset,
        }
        .encode()
    } else {
        String::new()
    };
    Ok(pb::SendResultEntry {
        status: Some(status),
        message_id,
        transaction_id,
        offset: outcome.queue_offset,
        recall_handle: String::new(),
    })
}

/// EndTransaction: the producer's (or its checker's) decision on a half message.
pub(crate) async fn end_transaction(front: &GrpcFront, r: Request<pb::EndTransactionRequest>) -> pb::EndTransactionResponse {
    let ended = async {
        let caller = front.caller(&r)?;
        let req = r.into_inner();
        front.authorize(&caller, &[access::topic(&resource_name(req.topic.as_ref()), access::PUB)])?;
        let id = TransactionId::decode(&req.transaction_id)?;
        let commit = match TransactionResolution::try_from(req.resolution) {
            Ok(TransactionResolution::Commit) => Some(true),
            Ok(TransactionResolution::Rollback) => Some(false),
            _ => None,
        };
        let end = EndTransaction {
            producer_group: resource_name(req.topic.as_ref()),
            may_publish: any_topic(),
            tran_state_table_offset: id.tran_state_table_offset,
            commit_log_offset: id.commit_log_offset,
            commit,
        };
        Ok::<Ended, Refusal>(front.broker.produce.end_transaction(end).await?)
    };
    let status = match ended.await {
        Ok(Ended::Committed | Ended::RolledBack | Ended::AlreadyDecided | Ended::Undecided) => ok(),
        Err(e) => e.status(),
    };
    pb::EndTransactionResponse { status: Some(status) }
}
