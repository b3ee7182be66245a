//! The gRPC clients this broker knows, by client id: what each said about itself over
//! Telemetry (its settings: producer topics or consumer group and subscriptions), and the
//! stream the broker reaches it by — for a transaction's check-back, for instance. Each is
//! registered with the group service as a client of its groups, so `consumerConnection`,
//! `producerConnection` and `consumerProgress` show gRPC clients beside remoting ones.
//!
//! Owns: the client table and each client's Telemetry sender. Must never: keep more than
//! `max_clients` clients, or block on a client's stream (a full stream drops the command, and
//! the check that sent it asks again later).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use petrel_broker::services::{ClientHandle, ClientQuestion, PushError, ReplyPush, TransactionCheck};
use petrel_protocol::codes::LanguageCode;
use petrel_protocol::message::MessageExt;
use tokio::sync::mpsc;

use crate::ask::Calls;
use crate::convert::{Delivery, message_of};
use crate::pb::{self, Language, TelemetryCommand, telemetry_command::Command};
use crate::renew::Renewals;
use crate::transaction::TransactionId;

/// Commands waiting to be written to one client's Telemetry stream; past it, a command is
/// dropped (the transaction check that sent it asks again on its next round).
pub const TELEMETRY_QUEUE_LEN: usize = 64;

/// Ids of gRPC clients as the group service sees them: far above any connection id of the
/// remoting server (which counts from 1), so that the two never meet.
const ID_BASE: u64 = 1 << 48;
static NEXT_ID: AtomicU64 = AtomicU64::new(ID_BASE);

/// The sender of a Telemetry stream's answers.
pub type TelemetrySender = mpsc::Sender<Result<TelemetryCommand, tonic::Status>>;

/// One gRPC client.
pub struct GrpcClient {
    id: u64,
    /// The id the client sends in every request (`x-mq-client-id`).
    pub client_id: String,
    peer: SocketAddr,
    /// Its language, as the group service lists it.
    pub language: LanguageCode,
    /// Its SDK's version, as RocketMQ's version number.
    pub version: i32,
    /// Its SDK's version as it said it (`x-mq-client-version`).
    version_text: String,
    /// When the broker first heard from it (ms since the epoch).
    pub started_ms: i64,
    /// The admin questions put to it and not yet answered.
    pub calls: Calls,
    /// The messages the broker keeps invisible for it (its receives with `auto_renew`).
    pub renewals: Renewals,
    /// Itself, for the questions that outlive a borrow of it.
    me: std::sync::Weak<GrpcClient>,
    /// What it said about itself on its Telemetry stream.
    pub settings: Mutex<Option<pb::Settings>>,
    telemetry: Mutex<Option<TelemetrySender>>,
    last_seen: Mutex<Instant>,
}

impl GrpcClient {
    /// Its SDK's version as RocketMQ's admin tools print one (`V5_2_0`).
    #[must_use]
    pub fn version_name(&self) -> String {
        format!("V{}", self.version_text.replace('.', "_"))
    }

    /// Records that the client was heard from.
    pub fn touch(&self) {
        *self.last_seen.lock() = Instant::now();
    }

    /// The stream the broker writes commands to, once the client opened Telemetry.
    pub fn attach(&self, sender: TelemetrySender) {
        *self.telemetry.lock() = Some(sender);
    }

    /// Whether the client has a Telemetry stream open: the sign a push consumer is connected.
    #[must_use]
    pub fn has_telemetry(&self) -> bool {
        self.telemetry.lock().is_some()
    }

    /// Forgets the client's Telemetry stream `ended`, unless a newer one replaced it (a client
    /// can open its next stream before the broker sees the last one end).
    pub fn detach(&self, ended: &TelemetrySender) {
        let mut telemetry = self.telemetry.lock();
        if telemetry.as_ref().is_some_and(|s| s.same_channel(ended)) {
            *telemetry = None;
        }
    }

    /// Hands `command` to the client's Telemetry stream; false when it has none or it is full.
    pub fn push(&self, command: Command) -> bool {
        let sender = self.telemetry.lock().clone();
        sender.is_some_and(|s| {
            s.try_send(Ok(TelemetryCommand {
                status: None,
                command: Some(command),
            }))
            .is_ok()
        })
    }
}

impl ClientHandle for GrpcClient {
    fn protocol(&self) -> &'static str {
        "grpc"
    }

    fn id(&self) -> u64 {
        self.id
    }

    fn peer(&self) -> SocketAddr {
        self.peer
    }

    fn notify_consumer_ids_changed(&self, _group: &str) -> bool {
        // gRPC consumers are balanced by the broker on every receive: nothing to tell.
        true
    }

    fn check_transaction_state(&self, check: &TransactionCheck) -> bool {
        let Ok((message, _)) = MessageExt::decode(&check.record) else {
            tracing::warn!(client = %self.client_id, "a half message to check does not decode");
            return false;
        };
        let transaction_id = TransactionId {
            commit_log_offset: check.commit_log_offset,
            tran_state_table_offset: check.tran_state_table_offset,
        };
        let delivery = Delivery {
            receipt_handle: None,
            invisible_ms: None,
        };
        self.push(Command::RecoverOrphanedTransactionCommand(pb::RecoverOrphanedTransactionCommand {
            message: Some(message_of(&message, &delivery)),
            transaction_id: transaction_id.encode(),
        }))
    }

    fn push_reply(&self, _reply: ReplyPush) -> std::pin::Pin<Box<dyn Future<Output = Result<(), PushError>> + Send + 'static>> {
        Box::pin(async {
            Err(PushError::Refused {
                code: 0,
                remark: "request-reply is a remoting feature; gRPC clients cannot take replies".into(),
            })
        })
    }

    fn ask(&self, question: ClientQuestion) -> std::pin::Pin<Box<dyn Future<Output = Result<bytes::Bytes, PushError>> + Send + 'static>> {
        match self.me.upgrade() {
            Some(me) => Box::pin(crate::ask::ask(me, question)),
            None => Box::pin(async { Err(PushError::Unreached("the client is gone".into())) }),
        }
    }
}

/// Every gRPC client known, by client id.
pub struct Clients {
    by_id: Mutex<HashMap<String, Arc<GrpcClient>>>,
    max_clients: usize,
    idle: Duration,
}

impl Clients {
    /// An empty table of at most `max_clients`; a client silent for `idle` may be dropped.
    #[must_use]
    pub fn new(max_clients: usize, idle: Duration) -> Clients {
        assert!(max_clients > 0, "a table that holds no client serves nobody");
        Clients {
            by_id: Mutex::new(HashMap::new()),
            max_clients,
            idle,
        }
    }

    /// The client with `client_id`, added on its first request; `None` when the table is full
    /// of clients heard from lately.
    pub fn get_or_add(&self, client_id: &str, peer: SocketAddr, language: &str, version: &str) -> Option<Arc<GrpcClient>> {
        let mut by_id = self.by_id.lock();
        if let Some(c) = by_id.get(client_id) {
            c.touch();
            return Some(c.clone());
        }
        if by_id.len() >= self.max_clients {
            let idle = self.idle;
            by_id.retain(|_, c| c.telemetry.lock().is_some() || c.last_seen.lock().elapsed() < idle);
            if by_id.len() >= self.max_clients {
                return None;
            }
        }
        let client = Arc::new_cyclic(|me| GrpcClient {
            me: me.clone(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            client_id: client_id.to_owned(),
            peer,
            language: language_code(language),
            version: version_code(version),
            version_text: version
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
                .take(32)
                .collect(),
            started_ms: petrel_kit::clock::now_ms(),
            calls: Calls::default(),
            renewals: Renewals::default(),
            settings: Mutex::new(None),
            telemetry: Mutex::new(None),
            last_seen: Mutex::new(Instant::now()),
        });
        by_id.insert(client_id.to_owned(), client.clone());
        Some(client)
    }

    /// Every client known now (a copy of the table's handles).
    #[must_use]
    pub fn all(&self) -> Vec<Arc<GrpcClient>> {
        self.by_id.lock().values().cloned().collect()
    }

    /// The client with `client_id`, if known.
    #[must_use]
    pub fn get(&self, client_id: &str) -> Option<Arc<GrpcClient>> {
        self.by_id.lock().get(client_id).cloned()
    }

    /// Forgets a client (it said it terminates, or its Telemetry stream ended).
    pub fn remove(&self, client_id: &str) -> Option<Arc<GrpcClient>> {
        self.by_id.lock().remove(client_id)
    }

    /// Clients known now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_id.lock().len()
    }

    /// Whether no client is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The remoting language code of a gRPC client's `x-mq-language`.
#[must_use]
pub fn language_code(language: &str) -> LanguageCode {
    match Language::from_str_name(language) {
        Some(Language::Java | Language::Kotlin) => LanguageCode::Java,
        Some(Language::Cpp) => LanguageCode::Cpp,
        Some(Language::DotNet) => LanguageCode::Dotnet,
        Some(Language::Golang) => LanguageCode::Go,
        Some(Language::Rust) => LanguageCode::Rust,
        Some(Language::Python) => LanguageCode::Python,
        Some(Language::Php) => LanguageCode::Php,
        Some(Language::NodeJs) => LanguageCode::NodeJs,
        Some(Language::Ruby) => LanguageCode::Ruby,
        _ => LanguageCode::Other,
    }
}

/// RocketMQ's version number (the ordinal of `MQVersion.Version`) of a `major.minor.patch`
/// string, so listings print `V5_2_0`; 0 for what is not a 4.9.4 or later version. From 4.9.4
/// on, each release takes two ordinals (its SNAPSHOT, then itself) and each 5.x minor ten
/// patches.
#[must_use]
pub fn version_code(version: &str) -> i32 {
    let mut parts = version.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty());
    let mut next = || parts.next().and_then(|p| p.parse::<i32>().ok()).unwrap_or(-1);
    let (major, minor, patch) = (next(), next(), next());
    match (major, minor, patch) {
        (5, 0..=9, 0..=9) => 413 + 20 * minor + 2 * patch,
        (4, 9, 4..=9) => 401 + 2 * (patch - 4),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.1:1".parse().expect("an address")
    }

    #[test]
    fn the_table_is_bounded_and_makes_room_only_from_idle_clients() {
        let clients = Clients::new(2, Duration::from_millis(50));
        let a = clients.get_or_add("a", peer(), "JAVA", "5.2.0").expect("room");
        assert!(a.id() >= ID_BASE, "never a remoting connection's id");
        assert!(clients.get_or_add("b", peer(), "GOLANG", "5.1.3").is_some());
        assert!(clients.get_or_add("c", peer(), "PYTHON", "5.1.2").is_none(), "full of live clients");
        std::thread::sleep(Duration::from_millis(80));
        clients.get_or_add("b", peer(), "GOLANG", "5.1.3").expect("known");
        assert!(clients.get_or_add("c", peer(), "PYTHON", "5.1.2").is_some(), "a, idle, made room");
        assert!(clients.get("a").is_none());
        assert_eq!(clients.len(), 2);
        assert_eq!(clients.get("b").expect("kept").language, LanguageCode::Go);
    }

    #[test]
    fn a_client_without_telemetry_cannot_be_asked_anything() {
        let clients = Clients::new(4, Duration::from_secs(60));
        let a = clients.get_or_add("a", peer(), "JAVA", "5.2.0").expect("room");
        let print = || Command::PrintThreadStackTraceCommand(pb::PrintThreadStackTraceCommand { nonce: "n".into() });
        assert!(!a.push(print()));
        let (tx, mut rx) = mpsc::channel(1);
        a.attach(tx);
        assert!(a.push(print()));
        assert!(!a.push(print()), "the stream's queue is full: dropped, not waited for");
        assert!(rx.try_recv().is_ok());
    }

    #[test]
    fn versions_keep_their_order() {
        assert!(version_code("5.2.0") > version_code("5.1.3"));
        assert_eq!(version_code("5.2.0"), 453, "V5_2_0");
        assert_eq!(version_code("5.5.0"), 513, "V5_5_0, as Petrel's own commands say");
        assert_eq!(version_code("4.9.4"), 401, "V4_9_4");
        assert!(version_code("5.1.3") > version_code("4.9.8"));
        assert_eq!(version_code("garbage"), 0);
    }
}
