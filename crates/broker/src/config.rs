//! Broker configuration: RocketMQ's `broker.conf` key names where the meaning is the same,
//! with Petrel's defaults (documented in docs/configuration.md).
//!
//! Owns: parsing `key=value` text (Java properties: `#`/`!` comments, `=` or `:`), checking
//! values, and turning them into the store's configuration. Must never: silently accept a value
//! it cannot use — a bad value is an error naming the key; an unknown key is a warning, because
//! real broker.conf files carry many keys Petrel has no use for.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use petrel_lock::LockKind;
use petrel_store::{CommitLogConfig, FlushMode, MessageStoreConfig};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{key}: {value:?} is not {expected}")]
    BadValue {
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub broker_cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    /// `;`-separated external name servers; empty: register with the embedded one.
    pub namesrv_addr: Option<String>,
    /// Address the broker listens on (`listenPort` sets the port).
    pub listen_port: u16,
    /// Address advertised to clients and written into message ids; detected when absent.
    pub broker_ip1: Option<IpAddr>,
    pub store_path_root_dir: PathBuf,
    pub flush_disk_type: FlushMode,
    pub sync_flush_timeout_ms: u64,
    pub flush_interval_commit_log_ms: u64,
    pub mapped_file_size_commit_log: u64,
    pub file_reserved_time_hours: u64,
    pub disk_max_used_space_ratio_percent: u64,
    pub put_message_lock: LockKind,
    pub auto_create_topic_enable: bool,
    pub default_topic_queue_nums: i32,
    pub auto_create_subscription_group: bool,
    pub max_message_size_bytes: usize,
    pub long_polling_enable: bool,
    /// Pull hold time when long polling is off (`shortPollingTimeMills`).
    pub short_polling_time_ms: u64,
    pub register_name_server_period_ms: u64,
    pub flush_consumer_offset_interval_ms: u64,
    pub region_id: String,
    pub trace_on: bool,
    pub channel_expired_timeout_ms: u64,
    /// Largest frame a client may send (`com.rocketmq.remoting.frameMaxLength`).
    pub max_frame_bytes: usize,
    /// Serve Prometheus metrics (`metricsExporterType=PROM`).
    pub metrics_prometheus: bool,
    pub metrics_prom_exporter_host: IpAddr,
    pub metrics_prom_exporter_port: u16,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            broker_cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 0,
            namesrv_addr: None,
            listen_port: 10911,
            broker_ip1: None,
            store_path_root_dir: PathBuf::from("./data"),
            flush_disk_type: FlushMode::Async,
            sync_flush_timeout_ms: 5000,
            flush_interval_commit_log_ms: 500,
            mapped_file_size_commit_log: 1 << 30,
            file_reserved_time_hours: 72,
            disk_max_used_space_ratio_percent: 75,
            put_message_lock: LockKind::Adaptive,
            auto_create_topic_enable: true,
            default_topic_queue_nums: 8,
            auto_create_subscription_group: true,
            max_message_size_bytes: 4 * 1024 * 1024,
            long_polling_enable: true,
            short_polling_time_ms: 1000,
            register_name_server_period_ms: 30_000,
            flush_consumer_offset_interval_ms: 5000,
            region_id: "DefaultRegion".into(),
            trace_on: true,
            channel_expired_timeout_ms: 120_000,
            max_frame_bytes: petrel_protocol::DEFAULT_MAX_FRAME_BYTES,
            metrics_prometheus: false,
            metrics_prom_exporter_host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            metrics_prom_exporter_port: 5557,
        }
    }
}

/// Every key `set` understands, with its meaning, for `--help` and the docs test.
pub const KNOWN_KEYS: &[&str] = &[
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "namesrvAddr",
    "listenPort",
    "brokerIP1",
    "storePathRootDir",
    "flushDiskType",
    "syncFlushTimeout",
    "flushIntervalCommitLog",
    "mappedFileSizeCommitLog",
    "fileReservedTime",
    "diskMaxUsedSpaceRatio",
    "putMessageLock",
    "useABSLock",
    "useReentrantLockWhenPutMessage",
    "autoCreateTopicEnable",
    "defaultTopicQueueNums",
    "autoCreateSubscriptionGroup",
    "maxMessageSize",
    "longPollingEnable",
    "shortPollingTimeMills",
    "registerNameServerPeriod",
    "flushConsumerOffsetInterval",
    "regionId",
    "traceOn",
    "channelExpiredTimeout",
    "frameMaxLength",
    "metricsExporterType",
    "metricsPromExporterHost",
    "metricsPromExporterPort",
];

fn bad(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(key, v, "true or false")),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError> {
    v.parse().map_err(|_| bad(key, v, "a non-negative integer"))
}

impl BrokerConfig {
    /// Applies one `key=value`; `Ok(false)` for a key Petrel does not know.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let v = value.trim();
        match key {
            "brokerClusterName" => self.broker_cluster_name = v.to_owned(),
            "brokerName" => self.broker_name = v.to_owned(),
            "brokerId" => self.broker_id = parse_num(key, v)?,
            "namesrvAddr" => self.namesrv_addr = (!v.is_empty()).then(|| v.to_owned()),
            "listenPort" => self.listen_port = parse_num(key, v)?,
            "brokerIP1" => self.broker_ip1 = Some(v.parse().map_err(|_| bad(key, v, "an IP address"))?),
            "storePathRootDir" => self.store_path_root_dir = PathBuf::from(v),
            "flushDiskType" => {
                self.flush_disk_type = match v {
                    "ASYNC_FLUSH" => FlushMode::Async,
                    "SYNC_FLUSH" => FlushMode::Sync,
                    _ => return Err(bad(key, v, "ASYNC_FLUSH or SYNC_FLUSH")),
                }
            }
            "syncFlushTimeout" => self.sync_flush_timeout_ms = parse_num(key, v)?,
            "flushIntervalCommitLog" => self.flush_interval_commit_log_ms = parse_num(key, v)?,
            "mappedFileSizeCommitLog" => self.mapped_file_size_commit_log = parse_num(key, v)?,
            "fileReservedTime" => self.file_reserved_time_hours = parse_num(key, v)?,
            "diskMaxUsedSpaceRatio" => self.disk_max_used_space_ratio_percent = parse_num::<u64>(key, v)?.clamp(10, 95),
            "putMessageLock" => self.put_message_lock = v.parse().map_err(|_| bad(key, v, "abs, mutex, spin or backoff"))?,
            // RocketMQ's two flags: ABS wins if both are set, as in RocketMQ.
            "useABSLock" => {
                if parse_bool(key, v)? {
                    self.put_message_lock = LockKind::Adaptive;
                }
            }
            "useReentrantLockWhenPutMessage" => {
                let reentrant = parse_bool(key, v)?;
                if reentrant && self.put_message_lock != LockKind::Adaptive {
                    self.put_message_lock = LockKind::Mutex;
                } else if !reentrant && self.put_message_lock == LockKind::Mutex {
                    self.put_message_lock = LockKind::Spin;
                }
            }
            "autoCreateTopicEnable" => self.auto_create_topic_enable = parse_bool(key, v)?,
            "defaultTopicQueueNums" => self.default_topic_queue_nums = parse_num(key, v)?,
            "autoCreateSubscriptionGroup" => self.auto_create_subscription_group = parse_bool(key, v)?,
            "maxMessageSize" => self.max_message_size_bytes = parse_num(key, v)?,
            "longPollingEnable" => self.long_polling_enable = parse_bool(key, v)?,
            "shortPollingTimeMills" => self.short_polling_time_ms = parse_num(key, v)?,
            "registerNameServerPeriod" => self.register_name_server_period_ms = parse_num::<u64>(key, v)?.clamp(10_000, 60_000),
            "flushConsumerOffsetInterval" => self.flush_consumer_offset_interval_ms = parse_num(key, v)?,
            "regionId" => self.region_id = v.to_owned(),
            "traceOn" => self.trace_on = parse_bool(key, v)?,
            "channelExpiredTimeout" => self.channel_expired_timeout_ms = parse_num(key, v)?,
            "frameMaxLength" => self.max_frame_bytes = parse_num(key, v)?,
            "metricsExporterType" => {
                self.metrics_prometheus = match v {
                    "PROM" => true,
                    "DISABLE" => false,
                    _ => return Err(bad(key, v, "PROM or DISABLE (Petrel has no OTLP or LOG exporter)")),
                }
            }
            "metricsPromExporterHost" => {
                self.metrics_prom_exporter_host = if v.is_empty() {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                } else {
                    v.parse().map_err(|_| bad(key, v, "an IP address"))?
                }
            }
            "metricsPromExporterPort" => self.metrics_prom_exporter_port = parse_num(key, v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Applies a broker.conf text; returns the keys it did not know.
    pub fn apply_properties(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some(split) = line.find(['=', ':']) else {
                unknown.push(line.to_owned());
                continue;
            };
            let (key, value) = (line[..split].trim(), &line[split + 1..]);
            if !self.set(key, value)? {
                unknown.push(key.to_owned());
            }
        }
        Ok(unknown)
    }

    /// Reads and applies a broker.conf file.
    pub fn apply_file(&mut self, path: &std::path::Path) -> Result<Vec<String>, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.apply_properties(&text)
    }

    /// The address clients reach this broker at (`brokerIP1:listenPort`).
    pub fn advertised_addr(&self) -> SocketAddr {
        SocketAddr::new(self.broker_ip1.unwrap_or_else(detect_local_ip), self.listen_port)
    }

    pub fn store_config(&self) -> MessageStoreConfig {
        let mut store = MessageStoreConfig::new(&self.store_path_root_dir);
        let mut log = CommitLogConfig::new(self.store_path_root_dir.join("commitlog"));
        log.segment_size_bytes = self.mapped_file_size_commit_log;
        log.flush_mode = self.flush_disk_type;
        log.sync_flush_timeout = Duration::from_millis(self.sync_flush_timeout_ms);
        log.async_flush_interval = Duration::from_millis(self.flush_interval_commit_log_ms.max(1));
        log.lock = self.put_message_lock;
        log.file_reserved_time = Duration::from_secs(self.file_reserved_time_hours * 3600);
        log.disk_max_used_ratio = self.disk_max_used_space_ratio_percent as f64 / 100.0;
        store.commit_log = log;
        store
    }

    /// `key=value` lines of every setting, as GET_BROKER_CONFIG answers.
    pub fn to_properties(&self) -> String {
        let lock = match self.put_message_lock {
            LockKind::Adaptive => "abs".to_owned(),
            other => other.name().to_owned(),
        };
        let flush = match self.flush_disk_type {
            FlushMode::Async => "ASYNC_FLUSH",
            FlushMode::Sync => "SYNC_FLUSH",
        };
        let rows: Vec<(&str, String)> = vec![
            ("brokerClusterName", self.broker_cluster_name.clone()),
            ("brokerName", self.broker_name.clone()),
            ("brokerId", self.broker_id.to_string()),
            ("namesrvAddr", self.namesrv_addr.clone().unwrap_or_default()),
            ("listenPort", self.listen_port.to_string()),
            ("brokerIP1", self.advertised_addr().ip().to_string()),
            ("storePathRootDir", self.store_path_root_dir.display().to_string()),
            ("flushDiskType", flush.to_owned()),
            ("syncFlushTimeout", self.sync_flush_timeout_ms.to_string()),
            ("flushIntervalCommitLog", self.flush_interval_commit_log_ms.to_string()),
            ("mappedFileSizeCommitLog", self.mapped_file_size_commit_log.to_string()),
            ("fileReservedTime", self.file_reserved_time_hours.to_string()),
            ("diskMaxUsedSpaceRatio", self.disk_max_used_space_ratio_percent.to_string()),
            ("putMessageLock", lock),
            ("autoCreateTopicEnable", self.auto_create_topic_enable.to_string()),
            ("defaultTopicQueueNums", self.default_topic_queue_nums.to_string()),
            ("autoCreateSubscriptionGroup", self.auto_create_subscription_group.to_string()),
            ("maxMessageSize", self.max_message_size_bytes.to_string()),
            ("longPollingEnable", self.long_polling_enable.to_string()),
            ("shortPollingTimeMills", self.short_polling_time_ms.to_string()),
            ("registerNameServerPeriod", self.register_name_server_period_ms.to_string()),
            ("flushConsumerOffsetInterval", self.flush_consumer_offset_interval_ms.to_string()),
            ("regionId", self.region_id.clone()),
            ("traceOn", self.trace_on.to_string()),
            ("channelExpiredTimeout", self.channel_expired_timeout_ms.to_string()),
            ("frameMaxLength", self.max_frame_bytes.to_string()),
            (
                "metricsExporterType",
                if self.metrics_prometheus { "PROM" } else { "DISABLE" }.to_owned(),
            ),
            ("metricsPromExporterHost", self.metrics_prom_exporter_host.to_string()),
            ("metricsPromExporterPort", self.metrics_prom_exporter_port.to_string()),
        ];
        rows.into_iter().map(|(k, v)| format!("{k}={v}\n")).collect()
    }
}

/// The address this host uses for outbound traffic (no packet is sent), else loopback — the
/// analogue of RocketMQ picking the first non-loopback address for `brokerIP1`.
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
mod tests {
    use super::*;

    #[test]
    fn broker_conf_keys_apply_and_unknown_keys_are_reported() {
        let mut c = BrokerConfig::default();
        let unknown = c
            .apply_properties(
                "# comment\nbrokerClusterName = C1\nbrokerName=b\nlistenPort:20911\nflushDiskType=SYNC_FLUSH\n\
                 putMessageLock=spin\ndeleteWhen=04\n",
            )
            .unwrap();
        assert_eq!(unknown, vec!["deleteWhen".to_owned()]);
        assert_eq!(c.broker_cluster_name, "C1");
        assert_eq!(c.listen_port, 20911);
        assert_eq!(c.flush_disk_type, FlushMode::Sync);
        assert_eq!(c.put_message_lock, LockKind::Spin);
    }

    #[test]
    fn rocketmq_lock_flags_map_to_lock_kinds() {
        let mut c = BrokerConfig::default();
        c.set("putMessageLock", "spin").unwrap();
        c.set("useReentrantLockWhenPutMessage", "true").unwrap();
        assert_eq!(c.put_message_lock, LockKind::Mutex);
        c.set("useABSLock", "true").unwrap();
        assert_eq!(c.put_message_lock, LockKind::Adaptive);
    }

    #[test]
    fn bad_values_name_the_key() {
        let mut c = BrokerConfig::default();
        let e = c.set("flushDiskType", "SOMETIMES").unwrap_err().to_string();
        assert!(e.contains("flushDiskType") && e.contains("SYNC_FLUSH"), "{e}");
        assert!(c.set("listenPort", "-1").is_err());
    }

    #[test]
    fn every_known_key_is_settable() {
        for key in KNOWN_KEYS {
            let mut c = BrokerConfig::default();
            let value = c
                .to_properties()
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
                .unwrap_or_else(|| "true".to_owned());
            let value = if value.is_empty() { "127.0.0.1:9876".to_owned() } else { value };
            assert!(c.set(key, &value).unwrap(), "{key}={value}");
        }
    }

    #[test]
    fn every_known_key_is_documented_with_its_default() {
        let doc = include_str!("../../../docs/configuration.md");
        let defaults = BrokerConfig::default().to_properties();
        for key in KNOWN_KEYS {
            assert!(doc.contains(&format!("`{key}`")), "docs/configuration.md does not document {key}");
        }
        for line in defaults.lines() {
            let (key, value) = line.split_once('=').unwrap();
            if value.is_empty() || key == "brokerIP1" || key == "storePathRootDir" {
                continue;
            }
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `{key}`")))
                .unwrap_or_else(|| panic!("no row for {key}"));
            assert!(
                row.contains(&format!("`{value}`")),
                "the row of {key} does not give its default {value}: {row}"
            );
        }
    }
}
