//! Test support: a broker on a temporary directory with its chores running, and fake clients.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel_namesrv::NameServer;
use petrel_protocol::LanguageCode;
use petrel_protocol::model::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData};
use petrel_store::MessageStoreConfig;
use tokio::task::JoinSet;

use super::ClientHandle;
use super::groups::ClientChannel;
use super::produce::{SendOutcome, SendRequest};
use crate::broker::Broker;
use crate::chores::registration::NameServers;
use crate::config::BrokerConfig;

/// A client that counts the notifications it is sent.
pub struct FakeClient {
    id: u64,
    notified: AtomicUsize,
    /// The transaction checks it was sent.
    pub checks: parking_lot::Mutex<Vec<super::TransactionCheck>>,
    /// The replies pushed to it.
    pub replies: parking_lot::Mutex<Vec<super::ReplyPush>>,
}

impl FakeClient {
    pub fn new(id: u64) -> Arc<FakeClient> {
        Arc::new(FakeClient {
            id,
            notified: AtomicUsize::new(0),
            checks: parking_lot::Mutex::new(Vec::new()),
            replies: parking_lot::Mutex::new(Vec::new()),
        })
    }

    pub fn notifications(&self) -> usize {
        self.notified.load(Ordering::SeqCst)
    }
}

impl ClientHandle for FakeClient {
    fn id(&self) -> u64 {
        self.id
    }
    fn peer(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 40_000 + u16::try_from(self.id).expect("fake client ids are small")))
    }
    fn notify_consumer_ids_changed(&self, _group: &str) -> bool {
        self.notified.fetch_add(1, Ordering::SeqCst);
        true
    }
    fn check_transaction_state(&self, check: &super::TransactionCheck) -> bool {
        self.checks.lock().push(check.clone());
        true
    }
    fn push_reply(
        &self,
        reply: super::ReplyPush,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), super::PushError>> + Send + 'static>> {
        self.replies.lock().push(reply);
        Box::pin(async { Ok(()) })
    }
    fn ask(
        &self,
        question: super::ClientQuestion,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<bytes::Bytes, super::PushError>> + Send + 'static>> {
        // Answers with what it was asked, so a test sees what reached the client.
        let answer = bytes::Bytes::from(format!("{question:?}"));
        Box::pin(async { Ok(answer) })
    }
}

/// A clustering consumer of `group` subscribed to `topic` with a tag expression.
pub fn consumer_data(group: &str, topic: &str, expression: &str) -> ConsumerData {
    ConsumerData {
        consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
        consume_type: ConsumeType::ConsumePassively,
        group_name: group.into(),
        message_model: MessageModel::Clustering,
        subscription_data_set: vec![SubscriptionData::from_tag_expression(topic, expression, 1)],
        unit_mode: false,
    }
}

/// Registers a consumer of `group` on `topic`, as its heartbeat would.
pub fn heartbeat_consumer(broker: &Broker, group: &str, topic: &str) {
    let channel = ClientChannel {
        handle: FakeClient::new(99),
        client_id: format!("{group}-client"),
        language: LanguageCode::Java,
        version: 513,
        last_update: Instant::now(),
    };
    broker.groups.register_consumer(channel, &consumer_data(group, topic, "*")).unwrap();
}

/// A plain send of `body` with a tag.
pub fn send_request(topic: &str, queue_id: i32, tags: &str, body: &[u8]) -> SendRequest {
    SendRequest {
        producer_group: "test_pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 8,
        queue_id,
        born_timestamp: 1_700_000_000_000,
        properties: Some(format!("TAGS\u{1}{tags}\u{2}WAIT\u{1}true\u{2}")),
        body: Bytes::copy_from_slice(body),
        born_host: Some(SocketAddr::from(([127, 0, 0, 1], 50_000))),
        ..SendRequest::default()
    }
}

/// A broker on a temporary directory, with an embedded name server and its chores running.
pub struct TestBroker {
    pub dir: tempfile::TempDir,
    pub broker: Arc<Broker>,
    pub name_server: Arc<NameServer>,
    tasks: JoinSet<()>,
}

impl TestBroker {
    /// Starts a broker; `configure` adjusts the configuration first.
    pub fn start(configure: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        Self::start_with(configure, |_| {})
    }

    /// [`TestBroker::start`], with access to the store's configuration (fault injection).
    pub fn start_with(configure: impl FnOnce(&mut BrokerConfig), store: impl FnOnce(&mut MessageStoreConfig)) -> TestBroker {
        let dir = tempfile::tempdir().unwrap();
        let mut config = BrokerConfig {
            store_path_root_dir: dir.path().to_owned(),
            broker_ip1: Some("127.0.0.1".parse().unwrap()),
            mapped_file_size_commit_log: 1 << 20,
            // Tests run side by side: the HA server takes any free port.
            ha_listen_port: Some(0),
            ..BrokerConfig::default()
        };
        configure(&mut config);
        let name_server = Arc::new(NameServer::new());
        let broker = Broker::open_with(config, NameServers::Embedded(name_server.clone()), store).unwrap();
        let mut tasks = JoinSet::new();
        crate::chores::start(&broker, &mut tasks);
        TestBroker {
            dir,
            broker,
            name_server,
            tasks,
        }
    }

    /// Sends `n` messages to one queue; returns the outcomes.
    pub async fn send_n(&self, topic: &str, queue_id: i32, n: usize) -> Vec<SendOutcome> {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let req = send_request(topic, queue_id, "A", format!("body {i}").as_bytes());
            out.push(self.broker.produce.send(req).await.unwrap());
        }
        out
    }

    /// Waits until every readable record is in its consume queue.
    pub fn wait_dispatched(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.broker.store.dispatched_offset() < self.broker.store.commit_log().readable_end() {
            assert!(Instant::now() < deadline, "the dispatcher did not catch up");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub async fn stop(mut self) {
        self.broker.shutdown().await.unwrap();
        self.tasks.abort_all();
    }
}
