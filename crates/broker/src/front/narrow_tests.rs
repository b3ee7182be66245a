//! Handlers against narrow contexts: each test builds only the services the handler's signature
//! names (over a temporary directory), not a broker, and calls the handler with its typed
//! header — the answers and the refusals, with RocketMQ's codes. A handler that reached for a
//! service its signature does not name would not compile here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{self, LockBatchResponseBody, TopicConfig};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, CreateTopicRequestHeader, GetTopicStatsInfoRequestHeader, UserRequestHeader};
use petrel_remoting::{Connection, Reply};

use super::context::{Acl, Context, QueueLocks, Topics};
use super::handlers::{auth, client, topic};
use super::unit::NoHeader;
use crate::access::Access;
use crate::config::{BrokerConfig, Secret};
use crate::services::queue_locks::QueueLockService;
use crate::services::topics::{TopicService, TopicSettings};

fn conn() -> Arc<Connection> {
    Connection::detached(SocketAddr::from(([127, 0, 0, 1], 40_321)))
}

async fn answer_of(reply: Reply) -> RemotingCommand {
    match reply {
        Reply::Now(answer) => answer,
        Reply::Later(work) => work.await.expect("a request is answered"),
        Reply::None => panic!("no answer to a request that wants one"),
    }
}

/// Only the topic table: all that topic creation and the topic-config reads may touch.
struct TopicsOnly {
    topics: Arc<TopicService>,
}

impl Context for TopicsOnly {}

impl Topics for TopicsOnly {
    fn topics(&self) -> &Arc<TopicService> {
        &self.topics
    }
}

fn create(topic: &str) -> (CreateTopicRequestHeader, RemotingCommand) {
    let header = CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 2,
        write_queue_nums: 2,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        ..CreateTopicRequestHeader::default()
    };
    let request = RemotingCommand::request(rc::UPDATE_AND_CREATE_TOPIC, 1).with_ext_fields(header.to_ext());
    (header, request)
}

fn topic_config(topic: &str) -> (GetTopicStatsInfoRequestHeader, RemotingCommand) {
    let header = GetTopicStatsInfoRequestHeader { topic: topic.into() };
    let request = RemotingCommand::request(rc::GET_TOPIC_CONFIG, 2).with_ext_fields(header.to_ext());
    (header, request)
}

#[tokio::test]
async fn topic_handlers_run_on_the_topic_table_alone_and_refuse_past_its_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = |max_topics| TopicSettings {
        trace_topic: None,
        cluster: "C".into(),
        broker: "b".into(),
        default_queue_nums: 4,
        auto_create: false,
        max_topics,
        lmq: false,
    };
    // The system topics a new table holds, then a table with room for one more.
    let system = TopicService::open(dir.path(), settings(usize::MAX))
        .expect("topic table")
        .snapshot()
        .topic_config_table
        .len();
    let topics = Arc::new(TopicService::open(dir.path(), settings(system + 1)).expect("topic table"));
    // The table's writer: a change is answered once it is on disk.
    let (writer, job) = topics.persister();
    let writing = tokio::spawn(writer.run(job));
    let ctx = Arc::new(TopicsOnly { topics });
    let (header, request) = create("orders");
    let made = answer_of(topic::update::handle(&ctx, &conn(), header, request)).await;
    assert_eq!(made.code, resp::SUCCESS, "{:?}", made.remark);
    let file = std::fs::read_to_string(dir.path().join("config").join("topics.json")).expect("the table's file");
    assert!(file.contains("\"orders\""), "answered after the table was written");
    let (header, request) = topic_config("orders");
    let found = answer_of(topic::config::one(&ctx, &conn(), header, request)).await;
    assert_eq!(found.code, resp::SUCCESS, "{:?}", found.remark);
    let config: TopicConfig = body::from_json(&found.body).expect("a TopicConfig body");
    assert_eq!((config.topic_name.as_str(), config.write_queue_nums), ("orders", 2));
    let (header, request) = topic_config("missing");
    let missing = answer_of(topic::config::one(&ctx, &conn(), header, request)).await;
    assert_eq!(missing.code, resp::TOPIC_NOT_EXIST, "{:?}", missing.remark);
    let (header, request) = create("one-too-many");
    let refused = answer_of(topic::update::handle(&ctx, &conn(), header, request)).await;
    assert_eq!(refused.code, resp::SYSTEM_ERROR, "past maxTopics: {:?}", refused.remark);
    assert!(ctx.topics.get("one-too-many").is_none(), "a refused topic is not created");
    let all = answer_of(topic::config::all(
        &ctx,
        &conn(),
        NoHeader,
        RemotingCommand::request(rc::GET_ALL_TOPIC_CONFIG, 3),
    ))
    .await;
    assert_eq!(all.ext("totalTopicNum"), Some((system + 1).to_string().as_str()));
    writing.abort();
}

/// Only the queue-lock table.
struct LocksOnly {
    queue_locks: QueueLockService,
}

impl Context for LocksOnly {}

impl QueueLocks for LocksOnly {
    fn queue_locks(&self) -> &QueueLockService {
        &self.queue_locks
    }
}

fn lock_request(client: &str, queues: &[i32]) -> RemotingCommand {
    let mq_set: Vec<String> = queues
        .iter()
        .map(|q| format!(r#"{{"topic":"t","brokerName":"b","queueId":{q}}}"#))
        .collect();
    let json = format!(r#"{{"consumerGroup":"g","clientId":"{client}","mqSet":[{}]}}"#, mq_set.join(","));
    RemotingCommand::request(rc::LOCK_BATCH_MQ, 4).with_body(json.into_bytes())
}

fn granted(answer: &RemotingCommand) -> Vec<i32> {
    assert_eq!(answer.code, resp::SUCCESS, "{:?}", answer.remark);
    let body: LockBatchResponseBody = body::from_json(&answer.body).expect("a lock answer");
    let mut ids: Vec<i32> = body.lock_ok_mq_set.iter().map(|mq| mq.queue_id).collect();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn queue_locks_go_to_the_first_holder_and_a_bad_body_is_refused() {
    let ctx = Arc::new(LocksOnly {
        queue_locks: QueueLockService::new(Duration::from_secs(60), 16),
    });
    let first = answer_of(client::queue_lock::lock(&ctx, &conn(), NoHeader, lock_request("c1", &[0, 1]))).await;
    assert_eq!(granted(&first), [0, 1]);
    let second = answer_of(client::queue_lock::lock(&ctx, &conn(), NoHeader, lock_request("c2", &[1, 2]))).await;
    assert_eq!(granted(&second), [2], "queue 1 is held by c1");
    let released = answer_of(client::queue_lock::unlock(&ctx, &conn(), NoHeader, lock_request("c1", &[1]))).await;
    assert_eq!(released.code, resp::SUCCESS);
    let third = answer_of(client::queue_lock::lock(&ctx, &conn(), NoHeader, lock_request("c2", &[1]))).await;
    assert_eq!(granted(&third), [1], "released, so c2 takes it");
    let bad = RemotingCommand::request(rc::LOCK_BATCH_MQ, 5).with_body(b"{not json".to_vec());
    let bad = answer_of(client::queue_lock::lock(&ctx, &conn(), NoHeader, bad)).await;
    assert_eq!(bad.code, resp::SYSTEM_ERROR, "{:?}", bad.remark);
    let anonymous = answer_of(client::queue_lock::lock(&ctx, &conn(), NoHeader, lock_request("", &[3]))).await;
    assert_eq!(anonymous.code, resp::INVALID_PARAMETER, "{:?}", anonymous.remark);
}

/// Only ACL 2.0's tables and settings.
struct AclOnly {
    access: Arc<Access>,
}

impl Context for AclOnly {}

impl Acl for AclOnly {
    fn access(&self) -> &Arc<Access> {
        &self.access
    }
}

fn user(name: &str) -> UserRequestHeader {
    UserRequestHeader {
        username: Some(name.into()),
    }
}

fn user_request(code: i32, name: &str, body: Option<&str>, signer: Option<(&str, &str)>) -> RemotingCommand {
    let mut request = RemotingCommand::request(code, 6);
    request.put_ext("username", name);
    if let Some(body) = body {
        request = request.with_body(body.as_bytes().to_vec());
    }
    if let Some((user, password)) = signer {
        petrel_auth::sign(&mut request, user, password);
    }
    request
}

#[tokio::test]
async fn users_are_made_by_the_super_user_and_passwords_shown_only_to_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig {
        store_path_root_dir: dir.path().to_path_buf(),
        authentication_enabled: true,
        init_authentication_user: Some(Secret::new(r#"{"username":"root","password":"root-secret-123"}"#)),
        ..BrokerConfig::default()
    };
    let ctx = Arc::new(AclOnly {
        access: Arc::new(Access::open(&config).expect("access tables")),
    });
    let root = Some(("root", "root-secret-123"));
    let body = r#"{"username":"alice","password":"alice-secret-1","userType":"Normal"}"#;
    let made = answer_of(auth::user::create(
        &ctx,
        &conn(),
        user("alice"),
        user_request(rc::AUTH_CREATE_USER, "alice", Some(body), root),
    ))
    .await;
    assert_eq!(made.code, resp::SUCCESS, "{:?}", made.remark);
    let super_body = r#"{"username":"eve","password":"eve-secret-12","userType":"Super"}"#;
    let alice = Some(("alice", "alice-secret-1"));
    let refused = answer_of(auth::user::create(
        &ctx,
        &conn(),
        user("eve"),
        user_request(rc::AUTH_CREATE_USER, "eve", Some(super_body), alice),
    ))
    .await;
    assert_eq!(
        refused.code,
        resp::SYSTEM_ERROR,
        "only a super user makes one: {:?}",
        refused.remark
    );
    assert!(ctx.access.store.get_user("eve").is_none());
    let blank = answer_of(auth::user::create(
        &ctx,
        &conn(),
        user(" "),
        user_request(rc::AUTH_CREATE_USER, " ", Some(body), root),
    ))
    .await;
    assert_eq!(blank.code, resp::INVALID_PARAMETER, "{:?}", blank.remark);
    for (signer, shows) in [(root, true), (alice, false)] {
        let got = answer_of(auth::user::get(
            &ctx,
            &conn(),
            user("alice"),
            user_request(rc::AUTH_GET_USER, "alice", None, signer),
        ))
        .await;
        assert_eq!(got.code, resp::SUCCESS, "{:?}", got.remark);
        let text = String::from_utf8_lossy(&got.body);
        assert_eq!(text.contains("alice-secret-1"), shows, "signed by {signer:?}: {text}");
    }
}
