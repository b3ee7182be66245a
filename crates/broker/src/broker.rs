//! The broker: state shared by every processor, request dispatch by code, registration with
//! name servers, and the background chores (offset persistence, channel expiry).
//!
//! Owns: the `Broker` value and which processor answers which code. Must never: block the
//! async runtime on a disk flush (sync-flush sends run on the blocking pool), or answer a code
//! it does not implement with anything but REQUEST_CODE_NOT_SUPPORTED naming the code.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{RegisterBrokerBody, register_body_crc32};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader};
use petrel_store::MessageStore;

use crate::clients::ClientManager;
use crate::config::BrokerConfig;
use crate::long_poll::LongPoll;
use crate::namesrv::NameServer;
use crate::offsets::OffsetManager;
use crate::server::{Connection, Handler, Reply};
use crate::topics::TopicManager;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("store: {0}")]
    Store(#[from] petrel_store::StoreError),
    #[error("broker metadata: {0}")]
    Io(#[from] std::io::Error),
}

/// Message counters for runtime info and metrics.
#[derive(Default)]
pub struct Stats {
    pub put_messages: AtomicU64,
    pub put_bytes: AtomicU64,
    pub put_failures: AtomicU64,
    pub got_messages: AtomicU64,
}

/// Where REGISTER_BROKER goes: the name server in this process, or external ones over TCP.
pub enum NameServers {
    Embedded(Arc<NameServer>),
    External(Vec<String>),
}

pub struct Broker {
    pub config: BrokerConfig,
    pub store: MessageStore,
    pub topics: TopicManager,
    pub offsets: OffsetManager,
    pub clients: ClientManager,
    pub long_poll: Arc<LongPoll>,
    pub stats: Stats,
    pub store_host: SocketAddr,
    pub name_servers: NameServers,
    pub boot: Instant,
    pub boot_timestamp_ms: i64,
    queue_picker: AtomicI32,
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) use crate::server::{answer, error};

pub(crate) fn ok_with<H: CommandHeader>(request: &RemotingCommand, header: &H) -> RemotingCommand {
    answer(request, resp::SUCCESS).with_ext_fields(header.to_ext())
}

impl Broker {
    /// Opens the store and the metadata under `config.store_path_root_dir`.
    pub fn open(config: BrokerConfig, name_servers: NameServers) -> Result<Arc<Broker>, BrokerError> {
        let root = config.store_path_root_dir.clone();
        let store = MessageStore::open(config.store_config())?;
        let topics = TopicManager::open(
            &root,
            &config.broker_cluster_name,
            &config.broker_name,
            config.default_topic_queue_nums,
            config.auto_create_topic_enable,
        )?;
        let offsets = OffsetManager::open(&root)?;
        let long_poll = Arc::new(LongPoll::default());
        let notifier = long_poll.clone();
        store.set_dispatch_listener(Arc::new(move |topic: &str, queue_id: i32| notifier.notify(topic, queue_id)));
        let store_host = config.advertised_addr();
        Ok(Arc::new(Broker {
            config,
            store,
            topics,
            offsets,
            clients: ClientManager::default(),
            long_poll,
            stats: Stats::default(),
            store_host,
            name_servers,
            boot: Instant::now(),
            boot_timestamp_ms: now_ms(),
            queue_picker: AtomicI32::new(0),
        }))
    }

    /// A queue for a send that did not name one (`queueId < 0`).
    pub(crate) fn pick_queue(&self, write_queue_nums: i32) -> i32 {
        self.queue_picker
            .fetch_add(1, Ordering::Relaxed)
            .rem_euclid(write_queue_nums.max(1))
    }

    /// Answers one request.
    pub fn dispatch(self: &Arc<Self>, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        let oneway = request.is_oneway();
        let reply = match request.code {
            rc::SEND_MESSAGE | rc::SEND_MESSAGE_V2 | rc::SEND_BATCH_MESSAGE => self.send(conn, request),
            rc::PULL_MESSAGE | rc::LITE_PULL_MESSAGE => self.pull(request),
            rc::QUERY_CONSUMER_OFFSET => Reply::Now(self.query_consumer_offset(&request)),
            rc::UPDATE_CONSUMER_OFFSET => Reply::Now(self.update_consumer_offset(&request)),
            rc::GET_MAX_OFFSET => Reply::Now(self.get_max_offset(&request)),
            rc::GET_MIN_OFFSET => Reply::Now(self.get_min_offset(&request)),
            rc::GET_EARLIEST_MSG_STORETIME => Reply::Now(self.get_earliest_msg_storetime(&request)),
            rc::SEARCH_OFFSET_BY_TIMESTAMP => Reply::Now(self.search_offset_by_timestamp(&request)),
            rc::HEART_BEAT => self.heartbeat(conn, request),
            rc::UNREGISTER_CLIENT => Reply::Now(self.unregister_client(&request)),
            rc::GET_CONSUMER_LIST_BY_GROUP => Reply::Now(self.get_consumer_list_by_group(&request)),
            rc::GET_CONSUMER_CONNECTION_LIST => Reply::Now(self.get_consumer_connection_list(&request)),
            rc::CHECK_CLIENT_CONFIG => Reply::Now(self.check_client_config(&request)),
            rc::UPDATE_AND_CREATE_TOPIC => self.update_and_create_topic(request),
            rc::DELETE_TOPIC_IN_BROKER => self.delete_topic(request),
            rc::GET_ALL_TOPIC_CONFIG => Reply::Now(self.get_all_topic_config(&request)),
            rc::GET_TOPIC_CONFIG => Reply::Now(self.get_topic_config(&request)),
            rc::GET_TOPIC_STATS_INFO => Reply::Now(self.get_topic_stats_info(&request)),
            rc::GET_CONSUME_STATS => Reply::Now(self.get_consume_stats(&request)),
            rc::GET_BROKER_RUNTIME_INFO => Reply::Now(self.get_broker_runtime_info(&request)),
            rc::GET_BROKER_CONFIG => Reply::Now(self.get_broker_config(&request)),
            rc::VIEW_MESSAGE_BY_ID => Reply::Now(self.view_message_by_id(&request)),
            code => Reply::Now(error(
                &request,
                resp::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            )),
        };
        if oneway { Reply::None } else { reply }
    }

    /// The REGISTER_BROKER request this broker sends (the full topic table, uncompressed).
    pub fn register_request(&self) -> RemotingCommand {
        let body = RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: self.topics.snapshot(),
        };
        let body = petrel_protocol::body::to_json(&body).into_bytes();
        let header = RegisterBrokerRequestHeader {
            broker_name: self.config.broker_name.clone(),
            broker_addr: self.store_host.to_string(),
            cluster_name: self.config.broker_cluster_name.clone(),
            ha_server_addr: format!("{}:{}", self.store_host.ip(), self.config.listen_port as u32 + 1),
            broker_id: self.config.broker_id,
            heartbeat_timeout_millis: Some(120_000),
            enable_acting_master: Some(false),
            compressed: Some(false),
            body_crc32: Some(register_body_crc32(&body)),
        };
        RemotingCommand::request(rc::REGISTER_BROKER, 0)
            .with_ext_fields(header.to_ext())
            .with_body(body)
    }

    pub fn unregister_request(&self) -> RemotingCommand {
        let header = UnregisterBrokerRequestHeader {
            broker_name: self.config.broker_name.clone(),
            broker_addr: self.store_host.to_string(),
            cluster_name: self.config.broker_cluster_name.clone(),
            broker_id: self.config.broker_id,
        };
        RemotingCommand::request(rc::UNREGISTER_BROKER, 0).with_ext_fields(header.to_ext())
    }

    /// Registers with every name server; errors are logged (the next period retries).
    pub async fn register_all(&self) {
        let request = self.register_request();
        match &self.name_servers {
            NameServers::Embedded(ns) => {
                if let Some(r) = ns.handle(&request)
                    && r.code != resp::SUCCESS
                {
                    tracing::error!(code = r.code, remark = ?r.remark, "embedded name server refused registration");
                }
            }
            NameServers::External(addrs) => {
                let calls = addrs
                    .iter()
                    .map(|a| crate::outbound::call(a, request.clone(), Duration::from_secs(6)));
                for (addr, result) in addrs.iter().zip(futures::future::join_all(calls).await) {
                    match result {
                        Ok(r) if r.code == resp::SUCCESS => {}
                        Ok(r) => tracing::warn!(%addr, code = r.code, remark = ?r.remark, "name server refused registration"),
                        Err(e) => tracing::warn!(%addr, error = %e, "registration failed"),
                    }
                }
            }
        }
    }

    pub async fn unregister_all(&self) {
        let request = self.unregister_request();
        match &self.name_servers {
            NameServers::Embedded(ns) => {
                ns.handle(&request);
            }
            NameServers::External(addrs) => {
                let calls = addrs
                    .iter()
                    .map(|a| crate::outbound::call(a, request.clone(), Duration::from_secs(3)));
                futures::future::join_all(calls).await;
            }
        }
    }

    /// Periodic chores; runs until the task is dropped.
    pub async fn run_background(self: Arc<Self>) {
        let register_every = Duration::from_millis(self.config.register_name_server_period_ms);
        let offsets_every = Duration::from_millis(self.config.flush_consumer_offset_interval_ms.max(100));
        let expire_after = Duration::from_millis(self.config.channel_expired_timeout_ms);
        let mut register = tokio::time::interval(register_every);
        let mut offsets = tokio::time::interval(offsets_every);
        let mut expire = tokio::time::interval(Duration::from_secs(10));
        loop {
            tokio::select! {
                _ = register.tick() => self.register_all().await,
                _ = offsets.tick() => {
                    if let Err(e) = self.offsets.persist() {
                        tracing::error!(error = %e, "cannot persist consumer offsets");
                    }
                }
                _ = expire.tick() => self.clients.expire(expire_after),
            }
        }
    }

    /// Unregisters, then persists offsets and closes the store (flush + checkpoint).
    pub async fn shutdown(&self) -> Result<(), BrokerError> {
        self.unregister_all().await;
        self.offsets.persist()?;
        self.store.shutdown()?;
        Ok(())
    }
}

/// The broker as a connection handler.
pub struct BrokerHandler(pub Arc<Broker>);

impl Handler for BrokerHandler {
    fn handle(&self, conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        self.0.dispatch(conn, request)
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        self.0.clients.connection_closed(conn);
    }
}
