//! Broker configuration: one table of keys — RocketMQ's `broker.conf` names where the meaning is
//! the same, Petrel's own where RocketMQ has none — each with its type, default, check and
//! documentation. The struct, the parser, `GET_BROKER_CONFIG`'s answer and the tables in
//! docs/configuration.md all come from that one table.
//!
//! Owns: parsing `broker.conf` (Java properties syntax: escapes, continuations and comments, by
//! the `java-properties` crate), checking values, and turning them into the store's and the
//! servers' settings. Must never: accept a value it cannot use, or clamp one silently — a bad or
//! out-of-range value is an error naming the key; an unknown key is a warning, because real
//! broker.conf files carry many keys Petrel has no use for.

mod value;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use petrel_lock::LockKind;
use petrel_remoting::{ConnectionLimits, ServerLimits};
use petrel_store::{CommitLogConfig, FlushMode, MessageStoreConfig};

pub use petrel_kit::config::{ConfigError, ConfigValue, KeySpec};
pub use value::{BrokerRole, MetricsExporter, REDACTED, Secret, TlsMode, at_least, at_least_if_set, within};

fn bad(key: &str, value: &str, expected: impl Into<String>) -> ConfigError {
    ConfigError::bad(key, value, expected)
}

/// RocketMQ's broker.conf keys (its BrokerConfig, MessageStoreConfig, Netty and auth
/// settings, from rocketmq-all-5.3.3, and 5.5.0's `enable*Metrics` switches): those Petrel does
/// not use are ignored with a warning.
const ROCKETMQ_KEYS: &str = include_str!("rocketmq_broker_keys.txt");

/// Keys of RocketMQ's own sample broker.conf files (4.x spellings and paths RocketMQ 5 derives)
/// that its 5.x broker ignores silently: ignored here too, with the same warning.
const ROCKETMQ_LEGACY_KEYS: &[&str] = &[
    "storePathConsumeQueue",
    "storePathIndex",
    "storeCheckpoint",
    "abortFile",
    "mapedFileSizeCommitLog",
    "mapedFileSizeConsumeQueue",
];

/// Where a key is documented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The broker's identity, ports, addresses and name servers.
    Processes,
    /// The commit log, flushing, retention, the message index and the store's threads.
    Storage,
    /// Client connections: how many, idle time, requests in flight, buffered bytes, shutdown drain.
    Connections,
    /// Master and slave: the broker's role, HA, and how many replicas a send waits for.
    Replication,
    /// Controller mode: the controllers, heartbeats to them and elections.
    Controller,
    /// Topics, groups, pulls, delayed, timer and transaction messages.
    Topics,
    /// The metrics exporter.
    Metrics,
    /// ACL 2.0 authentication and authorization, and TLS.
    Security,
}

petrel_kit::config_table! {
    /// Every setting of `petrel serve`; see [`KEYS`] for their keys and meaning.
    pub struct BrokerConfig, sections Section, keys KEYS {
    Processes {
        "brokerClusterName" => broker_cluster_name: String = "DefaultCluster".into();
            "Cluster name reported to the name server."
        "brokerName" => broker_name: String = "broker-a".into();
            "Broker name in routes and message queues."
        "brokerId" => broker_id: i64 = 0, check at_least(0);
            "`0` is a master."
        "namesrvAddr" => namesrv_addr: Option<String> = None;
            "External name servers, `host:port;host:port` (also `--namesrv-addr`). Unset: the name server runs inside `petrel serve`. Set: the broker keeps one connection to each, sends REGISTER_BROKER every `registerNameServerPeriod` and on every topic change, and UNREGISTER_BROKER on shutdown; Apache RocketMQ's name servers work too."
        "listenPort" => listen_port: u16 = 10911, check at_least(1);
            "The broker's port (also `--listen-port`), on `bindAddress`."
        "bindAddress" => bind_address: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
            "Address the broker's ports (`listenPort`, the fast channel and a master's HA port) listen on (RocketMQ's `NettyServerConfig.bindAddress`; RocketMQ's HA port always listens on every interface). `0.0.0.0`: every interface; `127.0.0.1`: this host only."
        "fastListenPort" => fast_listen_port: Option<u16> = None;
            "A second port serving the same requests: RocketMQ's \"VIP channel\", which its slaves use to copy a master's topics and clients may use for sends. Unset: `listenPort - 2` when that port is free (a warning otherwise); `0`: none; a port: that one, or the broker does not start."
        "grpcServerPort" => grpc_server_port: Option<u16> = None;
            "Port of RocketMQ 5's gRPC protocol (`apache.rocketmq.v2.MessagingService`, the rocketmq-clients SDKs), on `bindAddress`. Unset: 8081, RocketMQ proxy's default, when that port is free (a warning otherwise); `0`: no gRPC; a port: that one, or the broker does not start."
        "grpcMaxConcurrentStreams" => grpc_max_concurrent_streams: usize = 256, check within(1, 65_536);
            "Streams one gRPC connection may have open at once (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`): a client's receives, sends and its Telemetry stream together."
        "grpcMaxClients" => grpc_max_clients: usize = 65_536, check at_least(1);
            "gRPC clients (client ids) the broker keeps at once; past it a new client is refused with `TOO_MANY_REQUESTS` unless one silent for two minutes makes room."
        "brokerIP1" => broker_ip1: Option<IpAddr> = None;
            "The address advertised in routes and written into offset message ids (also `--broker-ip`). Default: the address of the interface the host routes outbound traffic through, else `127.0.0.1`."
        "registerNameServerPeriod" => register_name_server_period_ms: u64 = 30_000, check within(10_000, 60_000);
            "Milliseconds between registrations, 10,000 to 60,000 (RocketMQ clamps to that range; Petrel refuses values outside it)."
        "frameMaxLength" => max_frame_bytes: usize = petrel_protocol::DEFAULT_MAX_FRAME_BYTES, check within(1024, 1 << 30);
            "Largest frame a client may send, bytes (RocketMQ's `com.rocketmq.remoting.frameMaxLength`). A larger frame closes that connection."
    }
    Storage {
        "storePathRootDir" => store_path_root_dir: PathBuf = PathBuf::from("./data");
            "Data directory: `commitlog/`, `consumequeue/`, `config/`, checkpoints (also `--store-dir`)."
        "flushDiskType" => flush_disk_type: FlushMode = FlushMode::Async;
            "`SYNC_FLUSH`: a send is answered once its record is on disk (group commit: one flush covers every send waiting). `ASYNC_FLUSH`: once it is in the page cache; the flusher runs every `flushIntervalCommitLog`."
        "syncFlushTimeout" => sync_flush_timeout_ms: u64 = 5000, check at_least(1);
            "Milliseconds a SYNC_FLUSH send waits for the disk before answering `FLUSH_DISK_TIMEOUT` (10); the answer still carries the message id, queue and offset, and the record becomes durable later."
        "flushIntervalCommitLog" => flush_interval_commit_log_ms: u64 = 500, check at_least(1);
            "Milliseconds between ASYNC_FLUSH flushes."
        "mappedFileSizeCommitLog" => mapped_file_size_commit_log: u64 = 1 << 30, check within(4096, 1 << 31);
            "Commit-log segment size, bytes."
        "fileReservedTime" => file_reserved_time_hours: u64 = 72;
            "Hours a commit-log segment is kept."
        "diskMaxUsedSpaceRatio" => disk_max_used_space_ratio_percent: u64 = 75, check within(10, 95);
            "Percent of the disk the store may fill before the oldest segments are deleted early, 10 to 95."
        "cleanFileForciblyEnable" => clean_file_forcibly_enable: bool = true;
            "Whether a disk fuller than `diskMaxUsedSpaceRatio` deletes segments younger than `fileReservedTime` (the oldest, one per pass). `false`: nothing unexpired is deleted, and once the disk is full sends are answered `SERVICE_NOT_AVAILABLE` (14) until space is freed."
        "objectStoreEndpoint" => object_store_endpoint: String = String::new();
            "The cold tier: an S3-compatible endpoint (`http://host:port` or `https://…`; RocketMQ tieredstore's key). With `objectStoreBucket` set too, every sealed commit-log segment is uploaded there (verified against its parts' checksums), and a local segment is deleted only once the tier holds it (whatever its age or the disk's fill). Unset: no tier."
        "objectStoreBucket" => object_store_bucket: String = String::new();
            "The cold tier's bucket; it must exist (or the store must create buckets on first write)."
        "objectStoreRegion" => object_store_region: String = "us-east-1".to_owned();
            "The region the cold tier's requests are signed for."
        "objectStoreSignPayload" => object_store_sign_payload: Option<bool> = None;
            "Petrel: sign each request's body (SigV4's SHA-256 of the payload) as well as its headers. Unset: signed over `http://`, not over `https://`, as AWS's SDKs do (TLS already keeps the body from being changed on the way). `false`: requests carry `UNSIGNED-PAYLOAD`, as S3 allows; a segment's upload is still checked by its ETag (the MD5 of its parts, computed by the store from what it received) or, where the ETag is not that, by reading it back, which catches accidental corruption but not a body and its answers both changed by someone on a plain-HTTP path. Signing costs a SHA-256 of every byte sent, about a fifth of the upload's CPU."
        "objectStoreAccessKey" => object_store_access_key: String = String::new();
            "The cold tier's access key id."
        "objectStoreSecretKey" => object_store_secret_key: Option<Secret> = None;
            "The cold tier's secret key. Shown masked, never logged."
        "tieredStoreFilePath" => tiered_store_file_path: String = String::new();
            "Key prefix of this broker's objects in the bucket (RocketMQ tieredstore's base path). Empty: `petrel/CLUSTER/BROKER_NAME/BROKER_ID`; required in controller mode, where ids are given at runtime (each replica needs its own)."
        "tieredStoreFileReservedTime" => tiered_store_file_reserved_time_hours: u64 = 72;
            "Hours a segment is kept in the cold tier, counted from its last write, once it has left the local disk (RocketMQ tieredstore's key); then it is deleted from the bucket and its messages are gone. Locally, `fileReservedTime` still applies: with a tier it is the hot retention, and reads of older messages go to the bucket."
        "tieredUploadBytesPerSecond" => tiered_upload_bytes_per_second: u64 = 0;
            "Upload bandwidth of the cold tier, bytes per second; 0: unbounded. Uploads run on their own thread, never on the append path."
        "tieredOffloadNice" => tiered_offload_nice: u64 = 19, check within(0, 19);
            "Petrel: the nice value the offload's thread runs at (Linux, per thread), 0 to 19. At 19 (the default) it takes only CPU the append path leaves: on a broker with cores to spare it keeps up with the writes, and on one whose cores the sends keep busy it falls behind and catches up once they ease, with the untiered segments kept on disk meanwhile (docs/benchmarks.md). 0: the broker's own priority, for a broker that runs saturated for longer than its disk can hold the backlog."
        "tieredReadCacheBytes" => tiered_read_cache_bytes: u64 = 64 << 20, check at_least(1 << 20);
            "Bytes of verified blocks read back from the cold tier kept in memory. They count in the page-cache budget (`pageCacheBudgetBytes`, or its default): what the cache holds comes off the budget before the store's files get theirs, and the cache is kept to half the budget at most (one 1 MiB block at least)."
        "tieredReadAheadBlocks" => tiered_read_ahead_blocks: u64 = 2, check within(0, 64);
            "Blocks (1 MiB each) fetched ahead of a reader going through a tiered segment in order (a consumer or a replica catching up from the bucket), in the background, into the read cache; a read wanting a block being fetched waits for it rather than asking twice. At most what the cache holds besides the block being read; at most 16 fetches in flight over all readers. A lone read (a view by id) fetches nothing more. 0: none."
        "messageIndexEnable" => message_index_enable: bool = true;
            "Index every message by its `UNIQ_KEY` and each of its `KEYS` (files under `index/`), so that QUERY_MESSAGE (`mqadmin queryMsgByKey`, `queryMsgByUniqueKey`, `queryMsgById`) finds it. `false`: no index; queries find nothing."
        "maxHashSlotNum" => max_hash_slot_num: i32 = 262_144, check within(1, 50_000_000);
            "Hash slots of one index file (4 bytes each). RocketMQ's key; its default is 5,000,000."
        "maxIndexNum" => max_index_num: i32 = 1_048_576, check within(1, 100_000_000);
            "Keys one index file holds (20 bytes each; a full file is followed by a new one, and files whose messages retention removed are deleted). RocketMQ's key; its default is 20,000,000 (a 400 MB file)."
        "defaultQueryMaxNum" => default_query_max_num: i32 = 32, check within(1, 64);
            "Messages a query by unique key (`_UNIQUE_KEY_QUERY=true`) returns at most; a query by key returns at most its `maxNum`, and never more than 64."
        "maxMessageSize" => max_message_size_bytes: usize = 4 * 1024 * 1024, check at_least(1);
            "Largest message body, bytes; larger sends get `MESSAGE_ILLEGAL` (13)."
        "putMessageLock" => put_message_lock: LockKind = LockKind::Adaptive;
            "The commit-log append lock: `abs` (adaptive backoff spin), `mutex`, `spin` or `backoff`. RocketMQ's `useABSLock=true` selects `abs`, `useReentrantLockWhenPutMessage=true` selects `mutex` (unless `abs` was chosen) and `false` selects `spin`."
        "warmMapedFileEnable" => warm_maped_file_enable: Option<bool> = None;
            "Each new commit-log segment is written with zeros (in the background, before the writer reaches it) so that its blocks are written extents: a flush then writes data only, with no journal commit for extent conversion (on the reference ext4 disk a 10 KiB write + `fdatasync` took 173 µs instead of 354 µs). It costs a second write of every byte of the log, which only SYNC_FLUSH earns back: unset, it is on under SYNC_FLUSH and off under ASYNC_FLUSH (with the Java benchmark tools under ASYNC_FLUSH it cost a quarter of the throughput). RocketMQ's key (its spelling); RocketMQ's default is `false`."
        "pageCacheBudgetBytes" => page_cache_budget_bytes: Option<u64> = None, check at_least_if_set(16 << 20);
            "Petrel: resident bytes of the store's files (commit-log and consume-queue segments) the broker holds itself under, at least 16 MiB. Unset: a quarter of the memory limit of the cgroup the broker runs in (v2 `memory.max`, v1 `memory.limit_in_bytes`), else a quarter of the machine's memory, and at most 1 GiB (a store that never releases pages wrote 4–7% slower in docs/benchmarks.md; a consumer more than half the budget behind reads from the disk). Above three quarters of it, durable ranges outside the newest half of the budget (where tailing consumers read) are released from memory (with a cold tier, its read cache's blocks come off the budget first: `tieredReadCacheBytes`); when unflushed data alone keeps the cache over it, sends are answered `SYSTEM_BUSY` (2) with RocketMQ's `[PC_SYNCHRONIZED]` remark until the flusher catches up."
        "enableLmq" => enable_lmq: bool = false;
            "Light message queues (LMQ, for MQTT-style per-device queues and lite topics): a message whose `INNER_MULTI_DISPATCH` property names `%LMQ%…` queues (comma-separated) is also filed in each of them, with its offset in each written in `INNER_MULTI_QUEUE_OFFSET` at append; an LMQ has one queue (id 0), needs no topic or group config (pulls, POP, offsets and `GET_MAX_OFFSET` answer for any `%LMQ%` name), and is kept through kill -9, restarts and replication. As RocketMQ, it takes `enableMultiDispatch=true` too; with only one of the two on, neither acts. Batches, retry topics, delayed messages until they are due and half messages until committed are not dispatched."
        "enableMultiDispatch" => enable_multi_dispatch: bool = false;
            "Dispatch messages to the light message queues their `INNER_MULTI_DISPATCH` names; see `enableLmq`, which it needs."
        "maxLmqConsumeQueueNum" => max_lmq_consume_queue_num: usize = 20_000, check at_least(1);
            "Light message queues the broker creates at most (RocketMQ's key and default, which RocketMQ 5 does not enforce); a message naming a new one past it is answered `SYSTEM_ERROR` (1) with `[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]`, and nothing is stored."
        "lmqCleanupIntervalSeconds" => lmq_cleanup_interval_s: u64 = 60, check at_least(1);
            "Petrel: seconds between passes that remove light message queues holding nothing readable any more (every message they had is past retention), with every group's offsets in them, at most 10,000 a pass; a removed queue's next message starts it again at offset 0, as on RocketMQ after its admin `CLEAN_EXPIRED_CONSUMEQUEUE`. Only with `enableLmq` and `enableMultiDispatch`."
        "truncateCorruptLog" => truncate_corrupt_log: bool = false;
            "Petrel: what recovery does with a damaged commit-log record that has valid records after it (a flipped bit or a bad sector, not a torn tail). `false`: refuse to start, naming the segment and offset, so that an operator can restore the file; `true`: cut the log there, losing every record after it. A torn tail (a crash before the sync) is always cut."
        "maxDurabilityWaiters" => max_durability_waiters: usize = 65_536, check at_least(1);
            "Petrel: SYNC_FLUSH sends waiting for the disk at once; a send beyond it is answered `SYSTEM_BUSY` (2) before anything is written."
        "maxDurabilityWaitersPerClient" => max_durability_waiters_per_client: usize = 16_384, check at_least(1);
            "Petrel: sends one client address may have in progress at once (stored and awaiting their flush or replicas), over all its connections; beyond it that client's send is answered `SYSTEM_BUSY` (2) and other clients keep their share of `maxDurabilityWaiters`."
        "storePoolThreads" => store_pool_threads: usize = 4, check within(1, 256);
            "Petrel: threads that run store work which may block (an append that must wait for a segment or a page fault, reads of cold data), so that it never runs on the network threads."
        "storePoolQueueCapacity" => store_pool_queue_capacity: usize = 10_000, check at_least(1);
            "Petrel: store jobs waiting for those threads; beyond it a request is answered `SYSTEM_BUSY` (2)."
    }
    Connections {
        "maxConnections" => max_connections: usize = 50_000, check at_least(1);
            "Petrel: connections the broker keeps at once; a connection beyond it is closed as it arrives (logged at most once a second). The process's open-file limit is raised to its hard limit at start."
        "serverChannelMaxIdleTimeSeconds" => server_channel_max_idle_time_seconds: u64 = 120, check at_least(1);
            "A connection with no traffic either way and nothing in flight for this many seconds is closed (RocketMQ's key and default). Clients heartbeat every 30 s."
        "maxRequestsInFlightPerConnection" => max_requests_in_flight_per_connection: usize = 4096, check at_least(1);
            "Petrel: requests of one connection whose answers are pending (long polls, SYNC_FLUSH waits); at the bound the broker stops reading that connection until one completes, and other connections are unaffected."
        "partialFrameBudgetBytes" => partial_frame_budget_bytes: usize = petrel_remoting::DEFAULT_PARTIAL_FRAME_BUDGET_BYTES, check at_least(1024);
            "Petrel: bytes of unfinished request frames (sent in part, or not yet served) that all connections of the broker's ports and its embedded name server may hold together. A frame's buffer grows only with the bytes that arrive, whatever its length word claims; past this budget the connections whose unfinished frame has waited longest are closed until the rest fit. At least `frameMaxLength`."
        "maxQueuedBytesPerConnection" => max_queued_bytes_per_connection: usize = 16 << 20, check at_least(4096);
            "Petrel: bytes of answers waiting for one connection's socket; at the bound the broker stops reading that connection until the client reads."
        "shutdownDrainTimeoutMillis" => shutdown_drain_timeout_ms: u64 = 5000;
            "Petrel: on SIGTERM, how long connections may take to finish the answers they owe (new requests are no longer read) before the store is closed."
    }
    Replication {
        "brokerRole" => broker_role: BrokerRole = BrokerRole::AsyncMaster;
            "`ASYNC_MASTER`: sends are answered without waiting for slaves. `SYNC_MASTER`: a send is answered once enough replicas hold it (see `inSyncReplicas` and `allAckInSyncStateSet`). `SLAVE`: follows the master of its `brokerName` (brokerId must be above 0) and refuses sends with `SERVICE_NOT_AVAILABLE` (14)."
        "haListenPort" => ha_listen_port: Option<u16> = None;
            "Port of a master's HA server, where slaves connect (RocketMQ's classic HA protocol). Default: `listenPort + 1`."
        "haMasterAddress" => ha_master_address: Option<String> = None;
            "A slave's master, `host:haPort`. Default: learnt from the name server's answer to the slave's registration (the master of the same `brokerName`)."
        "haSendHeartbeatInterval" => ha_send_heartbeat_interval_ms: u64 = 5000, check at_least(100);
            "Milliseconds between a slave's reports when nothing arrives, and between a master's heartbeat frames when nothing is written."
        "haHousekeepingInterval" => ha_housekeeping_interval_ms: u64 = 20_000, check at_least(1000);
            "Milliseconds without traffic after which either side closes an HA connection."
        "haTransferBatchSize" => ha_transfer_batch_size: usize = 32 * 1024, check within(1024, 4 << 20);
            "Largest frame a master sends a slave, bytes (at most 4 MiB, the read buffer of RocketMQ's slave)."
        "haMaxGapNotInSync" => ha_max_gap_not_in_sync: u64 = 256 << 20, check at_least(1);
            "A slave further behind the master than this many bytes is not in sync: sends stop waiting for it."
        "slaveTimeout" => slave_timeout_ms: u64 = 3000, check at_least(1);
            "Milliseconds a SYNC_MASTER send waits for its replicas before answering `FLUSH_SLAVE_TIMEOUT` (12); the message is stored on the master either way."
        "inSyncReplicas" => in_sync_replicas: usize = 1, check at_least(1);
            "Replicas, the master included, that must hold a SYNC_MASTER send before it is answered. Petrel is stricter than RocketMQ 5 here: RocketMQ's default of 1 makes a SYNC_MASTER wait for no slave; Petrel's SYNC_MASTER always waits for at least one (`max(inSyncReplicas, 2)`), as RocketMQ 4 did and as its `2m-2s-sync` sample expects."
        "minInSyncReplicas" => min_in_sync_replicas: usize = 1, check at_least(1);
            "While fewer replicas than this (the master included) are in sync, a master refuses sends before writing them (`SYSTEM_ERROR`, \"in-sync replicas not enough\")."
        "allAckInSyncStateSet" => all_ack_in_sync_state_set: Option<bool> = None;
            "`true`: sends wait for every slave in sync (in controller mode: every SyncStateSet member) rather than for `inSyncReplicas`; with no slave in sync they wait for none (raise `minInSyncReplicas` to refuse instead). Unset, in controller mode: as `true` unless `inSyncReplicas` is 2 or more — Petrel's default, stricter than RocketMQ 5's (whose controller-mode master waits for no slave unless told), so that a failover loses no acknowledged message; set `false` explicitly for RocketMQ's behaviour. Unset in classic mode: `false`. Whatever this says, in controller mode consumers read only what every SyncStateSet member holds."
        "totalReplicas" => total_replicas: usize = 1, check at_least(1);
            "Replicas in the broker set, the master included (informational; RocketMQ uses it with acting-master mode)."
        "syncFromLastFile" => sync_from_last_file: bool = false;
            "An empty slave receives only the master's newest segment (what RocketMQ's classic master always sends) instead of the master's whole log."
        "slaveReadEnable" => slave_read_enable: bool = false;
            "A slave serves pulls and tells consumers to stay (`suggestWhichBrokerId` = its id); otherwise it still answers but suggests the master."
        "haSecret" => ha_secret: Option<Secret> = None, check |v: &Option<Secret>| v.as_ref().map_or(Ok(()), |s| petrel_auth::PeerSecret::new(s.expose()).map(drop));
            "Petrel: a secret (16 bytes or more) every broker of the set shares. With it, master and slave prove to each other that they hold it (HMAC-SHA256 over fresh nonces) before a byte of RocketMQ's HA protocol: a peer that cannot is refused and logged, so it can neither ack for a SyncStateSet member nor take one of `haMaxSlaves` places, and a slave follows no impostor. Unset: the HA port speaks RocketMQ's protocol to anyone who connects (RocketMQ brokers can join; the port is unprotected — keep it on a trusted network, `bindAddress`). Shown masked."
        "haMaxSlaves" => ha_max_slaves: usize = 16, check within(1, 256);
            "Petrel: slaves a master serves at once; a further connection is closed as it arrives."
    }
    Controller {
        "enableControllerMode" => enable_controller_mode: bool = false;
            "The broker set's master is chosen by controllers (`petrel controller`, or RocketMQ's): the broker registers with them, heartbeats them, takes the role they give it (brokerId 0 while master), replicates with RocketMQ's controller-mode HA protocol (epochs, confirm offset, a rejoining replica's divergent tail cut) and keeps the SyncStateSet. `brokerRole` and `brokerId` are then decided at run time."
        "controllerAddr" => controller_addr: String = String::new();
            "The controllers, `host:port;host:port`."
        "syncBrokerMetadataPeriod" => sync_broker_metadata_period_ms: u64 = 5000, check at_least(100);
            "Milliseconds between two asks of the controller for this set's master, epoch and SyncStateSet (a role notice from the controller also triggers one)."
        "brokerHeartbeatInterval" => broker_heartbeat_interval_ms: u64 = 1000, check at_least(100);
            "Milliseconds between heartbeats to the controllers."
        "controllerHeartBeatTimeoutMills" => controller_heart_beat_timeout_ms: u64 = 10_000, check at_least(1000);
            "After this many milliseconds without a heartbeat the controller takes the broker for dead (sent with each heartbeat)."
        "brokerElectionPriority" => broker_election_priority: i32 = i32::MAX;
            "Among replicas equal in epoch and offset, the lower value is elected first."
        "checkSyncStateSetPeriod" => check_sync_state_set_period_ms: u64 = 5000, check at_least(100);
            "Milliseconds between a master's checks of its SyncStateSet (slaves to drop or add)."
        "haMaxTimeSlaveNotCatchup" => ha_max_time_slave_not_catchup_ms: u64 = 15_000, check at_least(100);
            "A member of the SyncStateSet that has not caught up with the master's end for this many milliseconds (or is not connected) is dropped from it."
        "asyncLearner" => async_learner: bool = false;
            "This replica follows the master but never joins the SyncStateSet, so sends never wait for it."
    }
    Topics {
        "autoCreateTopicEnable" => auto_create_topic_enable: bool = true;
            "A send to an unknown topic creates it from `TBW102` (with the producer's `defaultTopicQueueNums`, at most TBW102's queues). `false`: such sends get `TOPIC_NOT_EXIST` (17)."
        "defaultTopicQueueNums" => default_topic_queue_nums: i32 = 8, check within(1, 1024);
            "Queues of `TBW102`, hence the most an auto-created topic gets."
        "maxTopics" => max_topics: usize = 65_536, check at_least(16);
            "Petrel: topics the broker holds; creating one more (by a send, a heartbeat's retry topic or mqadmin) is refused with a remark saying so."
        "traceTopicEnable" => trace_topic_enable: bool = false;
            "Makes the message-trace topic (`msgTraceTopicName`) at start, as RocketMQ does; clients with message traces on (`enableMsgTrace`) write their send and consume hops there, and `mqadmin queryMsgTraceById` and the dashboard read them. Off: the topic is made by the first trace sent, when `autoCreateTopicEnable` allows."
        "msgTraceTopicName" => msg_trace_topic_name: String = "RMQ_SYS_TRACE_TOPIC".into();
            "The message-trace topic."
        "autoCreateSubscriptionGroup" => auto_create_subscription_group: bool = true;
            "A consumer group is created by its first heartbeat. `false`: only groups that exist already (from earlier heartbeats, persisted) may pull and commit offsets; others get `SUBSCRIPTION_GROUP_NOT_EXIST` (26)."
        "maxGroups" => max_groups: usize = 65_536, check at_least(16);
            "Petrel: consumer groups the broker remembers, and likewise producer groups; a heartbeat that would add one more group is answered with an error saying so."
        "maxGroupsCreatedPerClient" => max_groups_created_per_client: usize = 1024, check at_least(1);
            "Petrel: consumer groups the heartbeats from one client address may create (with `autoCreateSubscriptionGroup`), counted until the broker restarts; a heartbeat naming one more new group is answered with an error saying so, and the groups that exist are served as before. Keeps one client from filling `maxGroups` (and as many retry topics)."
        "longPollingEnable" => long_polling_enable: bool = true;
            "A pull that finds nothing waits for new messages up to its `suspendTimeoutMillis` (at most 25 s). `false`: it waits `shortPollingTimeMills`."
        "shortPollingTimeMills" => short_polling_time_ms: u64 = 1000;
            "Hold time of an empty pull when long polling is off, milliseconds."
        "storeReplyMessageEnable" => store_reply_message_enable: bool = true;
            "A reply (SEND_REPLY_MESSAGE, from `MessageUtil.createReplyMessage`) is stored in `<cluster>_REPLY_TOPIC` as well as pushed to the requester. `false`: only pushed."
        "enablePropertyFilter" => enable_property_filter: bool = false;
            "SQL92 subscriptions (`MessageSelector.bySql`): checked by CHECK_CLIENT_CONFIG (an expression that does not compile gets `SUBSCRIPTION_PARSE_FAILED` (23) with the reason) and evaluated on each message's properties in the broker. `false`, RocketMQ's default: SQL92 subscriptions get `SYSTEM_ERROR` (1)."
        "maxLongPollWaiters" => max_long_poll_waiters: usize = 65_536, check at_least(1);
            "Petrel: pulls held waiting for messages at once; a pull beyond it is answered `SYSTEM_BUSY` (2) at once (the client pulls again after its back-off)."
        "maxLongPollWaitersPerClient" => max_long_poll_waiters_per_client: usize = 16_384, check at_least(1);
            "Petrel: pulls and pops that may wait for messages which one client address may have in progress at once, over all its connections; beyond it that client's pull is answered `SYSTEM_BUSY` (2) and other clients are served as before."
        "flushConsumerOffsetInterval" => flush_consumer_offset_interval_ms: u64 = 5000, check at_least(100);
            "Milliseconds between writes of `config/consumerOffset.json` (also written on shutdown)."
        "rebalanceLockMaxLiveTime" => rebalance_lock_max_live_time_ms: u64 = 60_000, check at_least(1000);
            "Milliseconds an orderly consumer's queue lock (LOCK_BATCH_MQ) lasts unless renewed (clients renew every 20 s); after it another member of the group may lock the queue. RocketMQ's `rocketmq.broker.rebalance.lockMaxLiveTime`."
        "maxQueueLocks" => max_queue_locks: usize = 1_000_000, check at_least(1);
            "Petrel: queue locks held at once, over all groups; a queue beyond it is not locked (its orderly consumer waits and retries) until locks are released or expire."
        "messageDelayLevel" => message_delay_level: String = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".into(), check |spec: &String| crate::services::schedule::parse_delay_levels(spec).map(drop);
            "The delay of each level a send's `DELAY` property (`setDelayTimeLevel`) or a consumer's retry may name, level 1 first: numbers with a unit of ms, s, m, h or d, at most 64 levels of at most 30d. A level past the last waits as long as the last. Retries wait at level 3 + the times already retried unless the consumer names a level."
        "timerWheelEnable" => timer_wheel_enable: bool = true;
            "Timer messages (RocketMQ 5's `TIMER_DELIVER_MS` / `TIMER_DELAY_SEC` / `TIMER_DELAY_MS` properties, the Java client's `setDeliverTimeMs` / `setDelayTimeSec`) wait in `rmq_sys_wheel_timer` until their time. `false`: they are refused with `SYSTEM_ERROR`."
        "timerMaxDelaySec" => timer_max_delay_sec: u64 = 259_200, check within(1, 3_153_600_000);
            "The furthest a timer message may be due, seconds from its send; one due later is refused with `MESSAGE_ILLEGAL` (13)."
        "timerMaxPending" => timer_max_pending: usize = 200_000, check at_least(1);
            "Petrel: timer messages stored and not yet delivered; a timer send past it is refused with `SYSTEM_ERROR` (the producer retries). The broker keeps each in memory (about 100 bytes) until it is delivered."
        "transactionTimeOut" => transaction_time_out_ms: u64 = 6000, check at_least(1);
            "Milliseconds a half message (the first phase of a transactional send) may stay undecided before the broker asks a producer of its group (CHECK_TRANSACTION_STATE). A message's `CHECK_IMMUNITY_TIME_IN_SECONDS` property overrides it."
        "transactionCheckMax" => transaction_check_max: i32 = 15, check within(1, 1000);
            "Checks of one undecided half message; after the last it is moved to `TRANS_CHECK_MAX_TIME_TOPIC` and never delivered."
        "transactionCheckInterval" => transaction_check_interval_ms: u64 = 30_000, check at_least(100);
            "Milliseconds between two passes over the undecided half messages."
        "rejectTransactionMessage" => reject_transaction_message: bool = false;
            "Refuse half messages (`NO_PERMISSION`, 16)."
        "channelExpiredTimeout" => channel_expired_timeout_ms: u64 = 120_000, check at_least(1000);
            "A client not heard from for this many milliseconds is dropped from its groups."
        "regionId" => region_id: String = "DefaultRegion".into();
            "The `MSG_REGION` property and send-answer field."
        "traceOn" => trace_on: bool = true;
            "The `TRACE_ON` property and send-answer field."
    }
    Security {
        "authenticationEnabled" => authentication_enabled: bool = false;
            "Every request must be signed by a known, enabled user (the `AccessKey` and `Signature` fields of RocketMQ's `AclClientRPCHook`); others get `NO_PERMISSION` (16) with the reason. Also makes the embedded name server refuse unsigned broker registrations and other writes."
        "authorizationEnabled" => authorization_enabled: bool = false;
            "Every request's resources (topic, group, cluster) and actions are checked against the user's policies (ACL 2.0); a super user may do anything. Refusals get `NO_PERMISSION` (16) naming the user, the resource and the address."
        "authenticationWhitelist" => authentication_whitelist: String = String::new(), check |v: &String| crate::access::parse_codes(v).map(drop);
            "Request codes served without a signature, comma-separated (RocketMQ's key)."
        "authorizationWhitelist" => authorization_whitelist: String = String::new(), check |v: &String| crate::access::parse_codes(v).map(drop);
            "Request codes served without a policy check, comma-separated."
        "initAuthenticationUser" => init_authentication_user: Option<Secret> = None, check |v: &Option<Secret>| v.as_ref().map_or(Ok(()), |j| crate::access::parse_init_user(j.expose()).map(drop));
            "A super user created at start if no user of that name exists: `{\"username\":\"rocketmq\",\"password\":\"12345678\"}`."
        "innerClientAuthenticationCredentials" => inner_client_authentication_credentials: Option<Secret> = None, check |v: &Option<Secret>| v.as_ref().map_or(Ok(()), |j| crate::access::parse_credentials(j.expose()).map(drop));
            "The credentials this broker signs its own requests with (registration with external name servers, a slave's copying of its master's metadata), `{\"accessKey\":\"...\",\"secretKey\":\"...\"}`; created as a super user at start if missing, as in RocketMQ."
        "authConfigPath" => auth_config_path: Option<PathBuf> = None;
            "Directory of `users.json` and `acls.json` (written on every change, mode 0600). Default: `storePathRootDir/config/auth`."
        "authenticationStrategy" => authentication_strategy: String = "stateful".into(), check crate::access::check_strategy;
            "RocketMQ's two strategies, by class name or `stateful` / `stateless`. Stateful (Petrel's default): a connection's first request for a user is verified, and its later requests naming that user skip the signature for `statefulAuthenticationCacheExpiredSecond` (the user must still exist and be enabled). Stateless (RocketMQ's default): every request's signature is verified, which costs the send path about 8% here (docs/benchmarks.md)."
        "statefulAuthenticationCacheExpiredSecond" => stateful_authentication_cache_expired_second: u64 = 60, check at_least(1);
            "How long the stateful strategy trusts a connection's verified user, seconds."
        "maxAuthenticationFailuresPerConnection" => max_authentication_failures_per_connection: u64 = 8, check at_least(1);
            "Petrel: failed authentications one connection may make; the one that reaches it is answered and the connection is closed, so a client cannot guess passwords at wire speed."
        "tls.server.mode" => tls_server_mode: TlsMode = TlsMode::Disabled;
            "TLS on the broker's ports (remoting, HA and gRPC) and the embedded name server's (RocketMQ's key): `disabled`, `permissive` (TLS and plain connections both accepted, told apart by their first byte) or `enforcing` (TLS only)."
        "tls.server.certPath" => tls_server_cert_path: Option<PathBuf> = None;
            "PEM certificate chain the servers present (leaf first). Required unless `tls.server.mode=disabled`."
        "tls.server.keyPath" => tls_server_key_path: Option<PathBuf> = None;
            "PEM private key of that certificate (PKCS#8, PKCS#1 or SEC1), unencrypted."
        "tls.client.trustCertPath" => tls_client_trust_cert_path: Option<PathBuf> = None;
            "PEM CA certificates a slave verifies its master's HA certificate against (with `tls.server.mode` not `disabled`, a master's HA port takes TLS as its other ports do, and a slave reaches its master over TLS). Unset: the session is encrypted without verifying the master; `haSecret`, whose proof is bound to the session, then authenticates it — set one of the two."
    }
    Metrics {
        "metricsExporterType" => metrics_exporter_type: MetricsExporter = MetricsExporter::Disable;
            "`PROM` serves Prometheus metrics at `http://metricsPromExporterHost:metricsPromExporterPort/metrics` (RocketMQ's keys; its `OTLP_GRPC` and `LOG` exporters are not offered)."
        "metricsPromExporterHost" => metrics_prom_exporter_host: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
            "Address the metrics endpoint listens on. Petrel's default is this host only (RocketMQ's is every interface): set `0.0.0.0` or an interface's address for a Prometheus elsewhere."
        "metricsPromExporterPort" => metrics_prom_exporter_port: u16 = 5557;
            "Port of the metrics endpoint."
        "metricsLabel" => metrics_label: String = String::new(), check |v: &String| crate::metrics::parse_metrics_label(v).map(drop);
            "Labels added to every `rocketmq_*` series, as `key1:value1,key2:value2` (RocketMQ's key; at most 16). Stricter than RocketMQ, which skips a bad item: an item that is not `key:value`, a key that is not a Prometheus label name, or one a series has already (`cluster`, `topic`, …) is refused at start, since Prometheus refuses a whole scrape over one bad label."
        "metricsInDelta" => metrics_in_delta: bool = false;
            "Adds `aggregation=\"delta\"` to every `rocketmq_*` series, as RocketMQ does (its Prometheus values stay cumulative, and so do Petrel's)."
        "metricsOtelCardinalityLimit" => metrics_otel_cardinality_limit: usize = 50_000, check at_least(1);
            "Label sets one `rocketmq_*` family keeps; past it, new label sets count in one series labelled `otel_metric_overflow=\"true\"` (RocketMQ's key and default)."
        "enableStatsMetrics" => enable_stats_metrics: bool = true;
            "Exports `rocketmq_processor_watermark`, `rocketmq_broker_permission`, `rocketmq_topic_number` and `rocketmq_consumer_group_number`."
        "enableRequestMetrics" => enable_request_metrics: bool = true;
            "Exports messages and bytes in and out, message sizes, and topic and group creation times."
        "enableConnectionMetrics" => enable_connection_metrics: bool = true;
            "Exports producer and consumer connections by client language, version and protocol."
        "enableLagAndDlqMetrics" => enable_lag_and_dlq_metrics: bool = true;
            "Exports consumer lag, in-flight, ready and queueing figures per group and topic, and messages sent to DLQs."
        "enableTransactionMetrics" => enable_transaction_metrics: bool = true;
            "Exports transactions committed, rolled back and pending, and how long they took."
        "enableRemotingMetrics" => enable_remoting_metrics: bool = true;
            "Exports `rocketmq_rpc_latency` per request code (a gRPC call's: its method), answer code and result."
        "enablePopMetrics" => enable_pop_metrics: bool = true;
            "Exports POP checkpoints, acks, revivals and backlog."
        "enableMessageStoreMetrics" => enable_message_store_metrics: bool = true;
            "Exports the store's size, flush and dispatch backlog, oldest message, and the timer's figures."
    }
    }
}

/// RocketMQ's two lock flags, which map onto `putMessageLock`.
pub const LOCK_FLAG_KEYS: &[&str] = &["useABSLock", "useReentrantLockWhenPutMessage"];

impl BrokerConfig {
    /// Applies one `key=value`; `Ok(false)` for a key Petrel does not know.
    ///
    /// # Errors
    /// A value that does not parse or fails its key's check, naming the key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let v = value.trim();
        match key {
            // RocketMQ's two flags: ABS wins if both are set, as in RocketMQ.
            "useABSLock" => {
                if bool::parse(v).ok_or_else(|| bad(key, v, bool::EXPECTED))? {
                    self.put_message_lock = LockKind::Adaptive;
                }
                Ok(true)
            }
            "useReentrantLockWhenPutMessage" => {
                let reentrant = bool::parse(v).ok_or_else(|| bad(key, v, bool::EXPECTED))?;
                if reentrant && self.put_message_lock != LockKind::Adaptive {
                    self.put_message_lock = LockKind::Mutex;
                } else if !reentrant && self.put_message_lock == LockKind::Mutex {
                    self.put_message_lock = LockKind::Spin;
                }
                Ok(true)
            }
            _ => self.set_from_table(key, v),
        }
    }

    /// Applies a broker.conf text (Java properties); returns the RocketMQ keys it ignored.
    ///
    /// # Errors
    /// A syntax error, a value refused by [`BrokerConfig::set`], or a key neither Petrel nor
    /// RocketMQ reads in broker.conf, each naming its line.
    pub fn apply_properties(&mut self, text: &str, origin: &std::path::Path) -> Result<Vec<String>, ConfigError> {
        let entries = petrel_kit::config::read_bytes(text.as_bytes(), origin)?;
        petrel_kit::config::apply(self, &entries, origin)
    }

    /// Reads and applies a broker.conf file; returns the RocketMQ keys it ignored.
    ///
    /// # Errors
    /// As [`BrokerConfig::apply_properties`], or the file cannot be read.
    pub fn apply_file(&mut self, path: &std::path::Path) -> Result<Vec<String>, ConfigError> {
        petrel_kit::config::apply_file(self, path)
    }

    /// The address clients reach this broker at (`brokerIP1:listenPort`).
    #[must_use]
    pub fn advertised_addr(&self) -> SocketAddr {
        SocketAddr::new(self.broker_ip1.unwrap_or_else(detect_local_ip), self.listen_port)
    }

    /// Whether light message queues are on: `enableLmq` and `enableMultiDispatch` both.
    #[must_use]
    pub fn lmq(&self) -> bool {
        self.enable_lmq && self.enable_multi_dispatch
    }

    /// The store's configuration (commit log, consume queues, index, page-cache budget) as
    /// these settings give it.
    #[must_use]
    pub fn store_config(&self) -> MessageStoreConfig {
        let mut store = MessageStoreConfig::new(&self.store_path_root_dir);
        store.confirm_gate = self.enable_controller_mode;
        let mut log = CommitLogConfig::new(self.store_path_root_dir.join("commitlog"));
        log.segment_size_bytes = self.mapped_file_size_commit_log;
        log.flush_mode = self.flush_disk_type;
        log.sync_flush_timeout = Duration::from_millis(self.sync_flush_timeout_ms);
        log.async_flush_interval = Duration::from_millis(self.flush_interval_commit_log_ms);
        log.lock = self.put_message_lock;
        log.file_reserved_time = Duration::from_secs(self.file_reserved_time_hours * 3600);
        log.disk_max_used_ratio = self.disk_max_used_space_ratio_percent as f64 / 100.0;
        log.clean_forcibly = self.clean_file_forcibly_enable;
        log.max_flush_waiters = self.max_durability_waiters;
        log.zero_fill_segments = self.warm_maped_file_enable.unwrap_or(self.flush_disk_type == FlushMode::Sync);
        log.truncate_corruption = self.truncate_corrupt_log;
        log.lmq = self.lmq();
        log.max_lmq_queues = self.max_lmq_consume_queue_num;
        store.page_cache_budget_bytes = Some(self.page_cache_budget_bytes.unwrap_or_else(petrel_store::default_budget_bytes));
        store.commit_log = log;
        store.index = self.message_index_enable.then_some(petrel_store::IndexConfig {
            slots: u32::try_from(self.max_hash_slot_num).expect("maxHashSlotNum is checked to be positive"),
            capacity: u32::try_from(self.max_index_num).expect("maxIndexNum is checked to be positive"),
        });
        store
    }

    /// The broker's server bounds, with a new unfinished-frame budget: give clones of one
    /// value to every server that shares it.
    #[must_use]
    pub fn server_limits(&self) -> ServerLimits {
        ServerLimits {
            partial_frames: petrel_remoting::FrameBudget::new(self.partial_frame_budget_bytes.max(1)),
            max_connections: self.max_connections,
            connection: ConnectionLimits {
                max_frame_bytes: self.max_frame_bytes,
                idle_timeout: Duration::from_secs(self.server_channel_max_idle_time_seconds),
                max_in_flight: self.max_requests_in_flight_per_connection,
                max_queued_bytes: self.max_queued_bytes_per_connection,
                drain_timeout: Duration::from_millis(self.shutdown_drain_timeout_ms),
            },
        }
    }

    /// `key=value` lines of every setting, as GET_BROKER_CONFIG answers.
    #[must_use]
    pub fn to_properties(&self) -> String {
        KEYS.iter()
            .filter_map(|k| {
                let value = if k.key == "brokerIP1" {
                    self.advertised_addr().ip().to_string()
                } else {
                    self.get(k.key)?
                };
                Some(format!("{}={value}\n", k.key))
            })
            .collect()
    }
}

impl BrokerConfig {
    /// The servers' TLS, from `tls.server.*`; `None` when disabled.
    ///
    /// # Errors
    /// The certificate or key cannot be loaded.
    pub fn server_tls(&self) -> Result<Option<std::sync::Arc<petrel_remoting::ServerTls>>, petrel_remoting::SetupError> {
        petrel_remoting::ServerTls::load(
            self.tls_server_mode,
            self.tls_server_cert_path.as_deref(),
            self.tls_server_key_path.as_deref(),
        )
    }
}

/// The Markdown table of one section's keys, as docs/configuration.md shows it.
#[must_use]
pub fn markdown_table(section: Section) -> String {
    petrel_kit::config::markdown_table(KEYS, &section)
}

impl petrel_kit::config::Table for BrokerConfig {
    const FILE: &'static str = "broker.conf";
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        BrokerConfig::set(self, key, value)
    }
    fn known_to_rocketmq(key: &str) -> bool {
        ROCKETMQ_KEYS.lines().any(|k| k == key) || ROCKETMQ_LEGACY_KEYS.contains(&key)
    }
}

/// Every section, in documentation order, with its marker name in docs/configuration.md.
pub const SECTIONS: &[(Section, &str)] = &[
    (Section::Processes, "processes"),
    (Section::Storage, "storage"),
    (Section::Connections, "connections"),
    (Section::Replication, "replication"),
    (Section::Controller, "broker-controller"),
    (Section::Topics, "topics"),
    (Section::Metrics, "metrics"),
    (Section::Security, "security"),
];

/// The address this host uses for outbound traffic (no packet is sent), else loopback — the
/// analogue of RocketMQ picking the first non-loopback address for `brokerIP1`.
#[must_use]
pub fn detect_local_ip() -> IpAddr {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect("192.0.2.1:9")?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_unspecified())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

#[cfg(test)]
mod tests;
