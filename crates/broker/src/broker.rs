//! `Broker`: the services assembled over one store — opened, started and shut down together.
//!
//! Owns: wiring (which service sees which), and the order of startup and shutdown. Must never:
//! close the store before the writers of metadata and the drained connections are done with it.

use std::net::SocketAddr;
use std::sync::Arc;

use petrel_store::MessageStore;
use tokio::task::JoinSet;

use crate::chores::registration::{Identity, NameServers, Registrar};
use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::long_poll::LongPoll;
use crate::replication::Replication;
use crate::services::admin::AdminService;
use crate::services::consume::{ConsumeService, ConsumeSettings};
use crate::services::groups::GroupService;
use crate::services::offsets::{OffsetService, OffsetTable};
use crate::services::pop::PopService;
use crate::services::produce::{ProduceService, ProduceSettings, Routing};
use crate::services::queue_locks::QueueLockService;
use crate::services::schedule::ScheduleService;
use crate::services::timer::{TimerService, TimerSettings};
use crate::services::topics::{TopicService, TopicSettings};
use crate::services::transactions::{TransactionService, TransactionSettings};
use crate::stats::BrokerStats;
use crate::store_pool::StorePool;

/// One broker: its configuration, its store, and the services and chores over it.
pub struct Broker {
    /// The configuration it was opened with (`broker.conf` and its defaults).
    pub config: Arc<BrokerConfig>,
    /// The commit log, consume queues and indexes every service reads and writes through.
    pub store: Arc<MessageStore>,
    /// The threads that run store work which may block, off the async runtime.
    pub pool: Arc<StorePool>,
    /// The topic table (`config/topics.json`).
    pub topics: Arc<TopicService>,
    /// Connected clients by group, and the consumer groups' settings.
    pub groups: Arc<GroupService>,
    /// Consumer groups' committed offsets (`config/consumerOffset.json`) and queue offset lookups.
    pub offsets: Arc<OffsetService>,
    /// Orderly consumers' queue locks.
    pub queue_locks: QueueLockService,
    /// Sends: from their checks to a stored (and, under SYNC_FLUSH, durable) record.
    pub produce: ProduceService,
    /// Delay levels: which sends wait, and how far each level has delivered.
    pub schedule: Arc<ScheduleService>,
    /// Timer messages: which sends wait for a due time, the index, and the checkpoint.
    pub timer: Arc<TimerService>,
    /// Half messages' decisions and the check chore's positions.
    pub transactions: Arc<TransactionService>,
    /// Pulls: filtering, reads, and holding empty pulls until messages arrive.
    pub consume: ConsumeService,
    /// POP consumption and the groups that read by it.
    pub pop: Arc<PopService>,
    /// What `mqadmin` and dashboards read: statistics, runtime info, a message by offset.
    pub admin: Arc<AdminService>,
    /// Pulls and pops waiting for new messages in their queue.
    pub long_poll: Arc<LongPoll>,
    /// Counters and stage timers for runtime info and the metrics endpoint.
    pub stats: Arc<BrokerStats>,
    /// Registers this broker with the name servers, periodically and on topic changes.
    pub registrar: Arc<Registrar>,
    /// A master's HA server and ack gate, or a slave's HA client.
    pub replication: Replication,
    /// The address clients reach this broker at, written into message ids.
    pub store_host: SocketAddr,
    /// Master or slave, and the id registered under.
    pub role: Arc<crate::role::Role>,
    /// ACL 2.0: users, policies and the gate in front of every handler.
    pub access: Arc<crate::access::Access>,
    /// Each client's share of the pools of held pulls and of sends awaiting durability.
    pub quotas: Quotas,
    /// The cold tier and its offload, when `objectStoreEndpoint` names one.
    pub tiering: Option<crate::tiering::Tiering>,
}

/// Per-client shares of the broker's pools (see [`crate::quota`]).
pub struct Quotas {
    /// Pulls and pops that may wait for messages (`maxLongPollWaitersPerClient`).
    pub long_polls: Arc<crate::quota::Quota>,
    /// Sends being stored and awaiting their durability or replicas
    /// (`maxDurabilityWaitersPerClient`).
    pub sends: Arc<crate::quota::Quota>,
}

impl Quotas {
    fn new(config: &BrokerConfig) -> Quotas {
        Quotas {
            long_polls: crate::quota::Quota::new("held pulls", config.max_long_poll_waiters_per_client),
            sends: crate::quota::Quota::new("sends in progress", config.max_durability_waiters_per_client),
        }
    }
}

impl Broker {
    /// Opens the store and the metadata under `storePathRootDir` and assembles the services.
    /// Blocking (recovery reads the disk): call it off the runtime.
    ///
    /// # Errors
    /// The store or a metadata file cannot be opened.
    pub fn open(config: BrokerConfig, name_servers: NameServers) -> Result<Arc<Broker>, BrokerError> {
        Self::open_with(config, name_servers, |_| {})
    }

    /// [`Broker::open`], with a last word on the store's configuration (fault injection in tests).
    ///
    /// # Errors
    /// The store or a metadata file cannot be opened.
    #[doc(hidden)]
    #[expect(
        clippy::too_many_lines,
        reason = "the broker's one assembly: each service opened in dependency order, a line or two each"
    )]
    pub fn open_with(
        config: BrokerConfig,
        name_servers: NameServers,
        tweak_store: impl FnOnce(&mut petrel_store::MessageStoreConfig),
    ) -> Result<Arc<Broker>, BrokerError> {
        crate::replication::check_roles(&config)?;
        let config = Arc::new(config);
        let root = config.store_path_root_dir.clone();
        let mut store_config = config.store_config();
        tweak_store(&mut store_config);
        let tiering = crate::tiering::Tiering::open(&config, &store_config)?;
        store_config.cold = tiering.as_ref().map(|(_, cold)| cold.clone());
        let store = Arc::new(MessageStore::open(store_config)?);
        let tiering = tiering.map(|(tiering, _)| tiering);
        if let Some(tiering) = &tiering {
            tiering.start(&store)?;
        }
        let pool = Arc::new(
            StorePool::new(config.store_pool_threads, config.store_pool_queue_capacity)
                .map_err(BrokerError::io("starting the store pool"))?,
        );
        let stats = Arc::new(BrokerStats::default());
        stats.traffic.set_cardinality_limit(config.metrics_otel_cardinality_limit);
        // Nothing is counted for metrics nobody exports.
        stats
            .traffic
            .set_enabled(config.metrics_exporter_type == crate::config::MetricsExporter::Prom);
        let topics = Arc::new(TopicService::open(&root, topic_settings(&config)).map_err(BrokerError::io("opening the topic table"))?);
        let table = Arc::new(OffsetTable::open(&root).map_err(BrokerError::io("opening the consumer offsets"))?);
        if store.commit_log().recovery_report().unclean {
            let clamped = table.clamp_to_queue_max(|topic, queue_id| store.queue_offsets(topic, queue_id).1);
            if clamped > 0 {
                table.persist().map_err(BrokerError::io("writing the consumer offsets"))?;
            }
        }
        let groups = Arc::new(
            GroupService::open(&root, config.max_groups, config.auto_create_subscription_group, &table.groups())
                .map_err(BrokerError::io("opening the subscription groups"))?
                .with_created_per_client(config.max_groups_created_per_client)
                .with_lmq(config.lmq()),
        );
        let offsets = Arc::new(OffsetService::new(table, groups.clone(), store.clone(), pool.clone()));
        let long_poll = Arc::new(LongPoll::new(config.max_long_poll_waiters));
        let notifier = long_poll.clone();
        store.set_dispatch_listener(Arc::new(move |topic: &str, queue_id: i32| notifier.notify(topic, queue_id)));
        let store_host = config.advertised_addr();
        let role = Arc::new(crate::role::Role::from_config(&config));
        let replication = Replication::start(&config, &store)?;
        let ha_port = replication.listen_port().unwrap_or_else(|| crate::replication::ha_port(&config));
        let access = Arc::new(crate::access::Access::open(&config)?);
        let quotas = Quotas::new(&config);
        let registrar = Registrar::new(
            Identity {
                cluster: config.broker_cluster_name.clone(),
                broker_name: config.broker_name.clone(),
                role: role.clone(),
                broker_addr: store_host.to_string(),
                ha_server_addr: format!("{}:{ha_port}", store_host.ip()),
            },
            name_servers,
            &topics,
            access.clone(),
        );
        topics.set_announcer(registrar.clone());
        let routing = open_routing(&config, &root)?;
        let (schedule, timer, transactions) = (routing.schedule.clone(), routing.timer.clone(), routing.transactions.clone());
        let produce = ProduceService::new(
            store.clone(),
            topics.clone(),
            routing,
            pool.clone(),
            stats.clone(),
            produce_settings(&config, store_host, role.clone(), &replication),
        );
        let consume = ConsumeService::new(
            store.clone(),
            topics.clone(),
            groups.clone(),
            offsets.clone(),
            long_poll.clone(),
            pool.clone(),
            stats.clone(),
            consume_settings(&config),
        );
        let pop = Arc::new(
            PopService::open(
                &root,
                store.clone(),
                topics.clone(),
                groups.clone(),
                offsets.clone(),
                long_poll.clone(),
            )
            .map_err(BrokerError::io("opening the POP state"))?
            .with_stats(stats.clone())
            .with_pool(pool.clone()),
        );
        let admin = Arc::new(AdminService::new(
            config.clone(),
            store.clone(),
            topics.clone(),
            groups.clone(),
            offsets.clone(),
            pool.clone(),
            stats.clone(),
        ));
        let queue_locks = QueueLockService::new(
            std::time::Duration::from_millis(config.rebalance_lock_max_live_time_ms),
            config.max_queue_locks,
        );
        Ok(Arc::new(Broker {
            config,
            store,
            pool,
            topics,
            groups,
            offsets,
            queue_locks,
            produce,
            schedule,
            timer,
            transactions,
            consume,
            pop,
            admin,
            long_poll,
            stats,
            registrar,
            replication,
            store_host,
            role,
            access,
            quotas,
            tiering,
        }))
    }

    /// Registers with the name servers and starts the chores in `tasks`.
    pub async fn start(self: &Arc<Self>, tasks: &mut JoinSet<()>) {
        let me = self.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || crate::chores::transaction_check::load_decisions(&me)).await {
            tracing::error!(error = %e, "reading the transaction decisions back failed");
        }
        crate::chores::start(self, tasks);
        self.registrar.register_all().await;
    }

    /// Ends held pulls, unregisters, writes the metadata and offsets, and closes the store
    /// (flush + checkpoint). Call after the connections have drained.
    ///
    /// # Errors
    /// A metadata file or the store's final flush failed.
    pub async fn shutdown(self: &Arc<Self>) -> Result<(), BrokerError> {
        self.long_poll.close();
        self.registrar.unregister_all().await;
        let me = self.clone();
        tokio::task::spawn_blocking(move || -> Result<(), BrokerError> {
            me.offsets
                .table()
                .persist()
                .map_err(BrokerError::io("writing the consumer offsets"))?;
            me.topics.write_file().map_err(BrokerError::io("writing the topic table"))?;
            me.groups.write_file().map_err(BrokerError::io("writing the subscription groups"))?;
            me.schedule.persist().map_err(BrokerError::io("writing the delay offsets"))?;
            me.timer.persist().map_err(BrokerError::io("writing the timer checkpoint"))?;
            me.replication.stop();
            if let Some(tiering) = &me.tiering {
                tiering.stop();
            }
            me.pool.shutdown();
            me.store.shutdown()?;
            Ok(())
        })
        .await
        .map_err(|e| BrokerError::Internal(format!("shutdown failed: the shutdown task {e}")))?
    }
}

fn topic_settings(config: &BrokerConfig) -> TopicSettings {
    TopicSettings {
        cluster: config.broker_cluster_name.clone(),
        broker: config.broker_name.clone(),
        default_queue_nums: config.default_topic_queue_nums,
        auto_create: config.auto_create_topic_enable,
        max_topics: config.max_topics,
        trace_topic: config.trace_topic_enable.then(|| config.msg_trace_topic_name.clone()),
        lmq: config.lmq(),
    }
}

/// The services a send may be routed to instead of its topic: delay levels, the timer, the
/// transaction half queue.
fn open_routing(config: &BrokerConfig, root: &std::path::Path) -> Result<Routing, BrokerError> {
    let schedule =
        Arc::new(ScheduleService::open(root, &config.message_delay_level).map_err(BrokerError::io("opening the delay offsets"))?);
    let transactions = Arc::new(
        TransactionService::open(
            root,
            TransactionSettings {
                timeout_ms: config.transaction_time_out_ms,
                check_max: u32::try_from(config.transaction_check_max).expect("transactionCheckMax is checked to be 1..=1000"),
                check_interval_ms: config.transaction_check_interval_ms,
            },
        )
        .map_err(BrokerError::io("opening the transaction checks"))?,
    );
    let timer = Arc::new(
        TimerService::open(
            root,
            TimerSettings {
                enabled: config.timer_wheel_enable,
                max_delay_ms: config.timer_max_delay_sec.saturating_mul(1000),
                max_pending: config.timer_max_pending,
            },
        )
        .map_err(BrokerError::io("opening the timer checkpoint"))?,
    );
    Ok(Routing {
        schedule,
        timer,
        transactions,
    })
}

fn produce_settings(
    config: &BrokerConfig,
    store_host: std::net::SocketAddr,
    role: Arc<crate::role::Role>,
    replication: &Replication,
) -> ProduceSettings {
    ProduceSettings {
        store_host,
        cluster: config.broker_cluster_name.clone(),
        broker_name: config.broker_name.clone(),
        region_id: config.region_id.clone(),
        trace_on: config.trace_on,
        max_message_size_bytes: config.max_message_size_bytes,
        sync_flush_timeout: std::time::Duration::from_millis(config.sync_flush_timeout_ms),
        role,
        replicas: replication.gate(),
        slave_timeout: std::time::Duration::from_millis(config.slave_timeout_ms),
        reject_transaction_message: config.reject_transaction_message,
        lmq: config.lmq(),
    }
}

fn consume_settings(config: &BrokerConfig) -> ConsumeSettings {
    ConsumeSettings {
        long_polling_enable: config.long_polling_enable,
        short_polling_time: std::time::Duration::from_millis(config.short_polling_time_ms),
        enable_property_filter: config.enable_property_filter,
    }
}
