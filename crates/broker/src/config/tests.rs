use std::path::Path;

use super::*;

fn apply(c: &mut BrokerConfig, text: &str) -> Result<Vec<String>, ConfigError> {
    c.apply_properties(text, Path::new("broker.conf"))
}

#[test]
fn broker_conf_keys_apply_and_unknown_keys_are_reported() {
    let mut c = BrokerConfig::default();
    let unknown = apply(
        &mut c,
        "# comment\n! also a comment\nbrokerClusterName = C1\nbrokerName=b\nlistenPort:20911\nflushDiskType=SYNC_FLUSH\n\
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
fn a_key_neither_petrel_nor_rocketmq_reads_is_an_error_naming_its_line() {
    let mut c = BrokerConfig::default();
    let e = apply(&mut c, "brokerName=b\n\n# a typo of flushDiskType\nflushDiskTyp=SYNC_FLUSH\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "broker.conf:4: unknown key \"flushDiskTyp\" (not a broker.conf key of Petrel's or of RocketMQ's; see docs/configuration.md)"
    );
    let e = apply(&mut c, "brokerName=b\nlistenPort=port\n").unwrap_err();
    assert!(e.to_string().starts_with("broker.conf:2: listenPort: \"port\" is not valid"), "{e}");
    // RocketMQ's own keys, from its BrokerConfig, MessageStoreConfig and Netty settings.
    let ignored = apply(&mut c, "brokerPermission=6\nmaxMessageSize=4194304\nserverWorkerThreads=8\n").unwrap();
    assert_eq!(
        ignored,
        ["brokerPermission", "serverWorkerThreads"],
        "maxMessageSize is Petrel's too"
    );
    let ignored = apply(&mut c, "storePathConsumeQueue=/data/cq\nmapedFileSizeCommitLog=1073741824\n").unwrap();
    assert_eq!(ignored.len(), 2, "RocketMQ's sample files' older keys");
}

#[test]
fn java_properties_syntax_is_honoured() {
    let mut c = BrokerConfig::default();
    // A continuation line, an escaped separator in a value, a unicode escape, and whitespace
    // as the separator — all as java.util.Properties reads them.
    apply(
        &mut c,
        "namesrvAddr = 127.0.0.1:9876;\\\n    127.0.0.2:9876\nregionId=east\\:1\nbrokerName \\u0062roker-z\n",
    )
    .unwrap();
    assert_eq!(c.namesrv_addr.as_deref(), Some("127.0.0.1:9876;127.0.0.2:9876"));
    assert_eq!(c.region_id, "east:1");
    assert_eq!(c.broker_name, "broker-z");
}

#[test]
fn rocketmq_lock_flags_map_to_lock_kinds() {
    let mut c = BrokerConfig::default();
    c.set("putMessageLock", "spin").unwrap();
    c.set("useReentrantLockWhenPutMessage", "true").unwrap();
    assert_eq!(c.put_message_lock, LockKind::Mutex);
    c.set("useABSLock", "true").unwrap();
    assert_eq!(c.put_message_lock, LockKind::Adaptive);
    assert!(c.set("useABSLock", "maybe").is_err());
}

#[test]
fn bad_values_name_the_key_and_out_of_range_values_are_refused_not_clamped() {
    let mut c = BrokerConfig::default();
    let e = c.set("flushDiskType", "SOMETIMES").unwrap_err().to_string();
    assert!(e.contains("flushDiskType") && e.contains("SYNC_FLUSH"), "{e}");
    assert!(c.set("listenPort", "-1").is_err());
    for (key, value) in [
        ("diskMaxUsedSpaceRatio", "99"),
        ("registerNameServerPeriod", "5000"),
        ("defaultTopicQueueNums", "0"),
        ("maxConnections", "0"),
        ("storePoolThreads", "1000"),
        ("tieredOffloadNice", "20"),
    ] {
        let before = c.get(key);
        let e = c.set(key, value).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("must be"), "{e}");
        assert_eq!(c.get(key), before, "{key}: a refused value changes nothing");
    }
    assert!(c.set("diskMaxUsedSpaceRatio", "95").unwrap(), "the edge itself is accepted");
    assert_eq!(c.disk_max_used_space_ratio_percent, 95);
    assert!(c.set("tieredOffloadNice", "19").unwrap(), "the lowest priority is accepted");
    assert!(c.set("tieredOffloadNice", "0").unwrap(), "and the broker's own");
    assert_eq!(c.tiered_offload_nice, 0);
}

#[test]
fn every_key_takes_its_own_default_back() {
    for k in KEYS {
        let mut c = BrokerConfig::default();
        let default = (k.default)();
        assert!(c.set(k.key, &default).unwrap(), "{}={default}", k.key);
        assert_eq!(c.get(k.key), Some(default), "{}", k.key);
    }
    let mut c = BrokerConfig::default();
    assert!(!c.set("noSuchKey", "1").unwrap(), "unknown keys are reported, not refused");
}

#[test]
fn get_broker_config_lists_every_key_once() {
    let text = BrokerConfig::default().to_properties();
    let keys: Vec<&str> = text.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k)).collect();
    assert_eq!(keys, KEYS.iter().map(|k| k.key).collect::<Vec<_>>());
}

/// docs/configuration.md holds each section's table exactly as `markdown_table` renders it,
/// between `<!-- keys:NAME -->` and `<!-- /keys -->`. `PETREL_BLESS=1` rewrites them.
#[test]
fn docs_configuration_md_matches_the_key_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let mut blessed = doc.clone();
    for (section, name) in SECTIONS {
        let open = format!("<!-- keys:{name} -->\n");
        let close = "<!-- /keys -->";
        let start = blessed.find(&open).unwrap_or_else(|| panic!("docs/configuration.md lacks {open}")) + open.len();
        let end = start + blessed[start..].find(close).expect("a closing marker");
        blessed.replace_range(start..end, &markdown_table(*section));
    }
    if std::env::var_os("PETREL_BLESS").is_some() {
        std::fs::write(&path, &blessed).unwrap();
        return;
    }
    assert!(
        doc == blessed,
        "docs/configuration.md is out of date with the key table; run PETREL_BLESS=1 cargo test -p petrel-broker config"
    );
}
