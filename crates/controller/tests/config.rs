//! controller.conf: RocketMQ's keys parse as RocketMQ writes them, bad values name their key,
//! and docs/configuration.md lists every key with its default.

use std::path::Path;

use petrel_controller::{CONTROLLER_KEYS, ControllerConfig};
use petrel_kit::config::ConfigError;

fn markdown_table() -> String {
    ControllerConfig::markdown_table()
}

#[test]
fn docs_configuration_md_lists_every_controller_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let text = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let (open, close) = ("<!-- keys:controller -->\n", "<!-- /keys -->");
    let start = text.find(open).expect("docs/configuration.md has the controller table") + open.len();
    let end = start + text[start..].find(close).expect("the table ends");
    if std::env::var_os("PETREL_BLESS").is_some() {
        let blessed = format!("{}{}{}", &text[..start], markdown_table(), &text[end..]);
        std::fs::write(&path, blessed).expect("write docs/configuration.md");
        return;
    }
    assert_eq!(
        &text[start..end],
        markdown_table(),
        "docs/configuration.md is out of date with CONTROLLER_KEYS; run PETREL_BLESS=1 cargo test -p petrel-controller --test config"
    );
}

#[test]
fn every_key_takes_its_own_default_back() {
    for k in CONTROLLER_KEYS {
        let mut c = ControllerConfig::default();
        let default = (k.default)();
        assert_eq!(c.set(k.key, &default).ok(), Some(true), "{}={default}", k.key);
        assert_eq!(c.get(k.key), Some(default), "{}", k.key);
    }
}

#[test]
fn a_controller_conf_line_that_is_wrong_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("controller.conf");
    std::fs::write(&path, "controllerDLegerGroup=g\nenableElectUncleanMaster=maybe\n").expect("write");
    let err = ControllerConfig::default().apply_file(&path).expect_err("a bad boolean");
    assert!(err.to_string().contains("controller.conf:2: enableElectUncleanMaster"), "{err}");
}

#[test]
fn rocketmq_peer_lists_parse_and_bad_values_name_their_key() {
    let mut config = ControllerConfig::default();
    assert_eq!(
        config
            .set("controllerDLegerPeers", "n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879;")
            .ok(),
        Some(true)
    );
    assert_eq!(config.set("controllerDLegerSelfId", "n2").ok(), Some(true));
    assert_eq!(config.raft_address(), Some("127.0.0.1:9879"));
    assert_eq!(
        config.listen_address().as_deref(),
        Some("127.0.0.1:9879"),
        "its own entry by default"
    );
    assert_eq!(config.set("bindAddress", "127.0.0.2").ok(), Some(true));
    assert_eq!(
        config.listen_address().as_deref(),
        Some("127.0.0.2:9879"),
        "bindAddress with its entry's port"
    );
    assert!(config.validate().is_ok());
    assert_eq!(config.set("controllerDLegerSelfId", "n7").ok(), Some(true));
    assert!(
        config.validate().unwrap_err().to_string().contains("n7"),
        "a self id outside the peers is refused"
    );
    for (key, value) in [
        ("controllerDLegerPeers", "127.0.0.1:9877"),
        ("controllerDLegerPeers", "n0-a:1;n0-b:2"),
        ("controllerDLegerPeers", ""),
        ("controllerDLegerSelfId", "zero"),
        ("scanNotActiveBrokerInterval", "0"),
        ("enableElectUncleanMaster", "yes"),
        ("bindAddress", "localhost"),
    ] {
        let err = config.set(key, value).expect_err(value);
        assert!(matches!(&err, ConfigError::BadValue { key: k, .. } if k == key), "{err}");
    }
    assert_eq!(
        petrel_kit::config::apply_set(&mut config, "controllerType=jRaft").ok(),
        Some(Some("controllerType".to_owned())),
        "RocketMQ keys Petrel does not use are reported, not fatal"
    );
    assert!(
        config.set("controllerRaftSecret", "  ").is_err(),
        "a secret of spaces is refused, not taken for unset"
    );
    let typo = petrel_kit::config::apply_set(&mut config, "controllerDLegerPeer=n0-127.0.0.1:9877").expect_err("a typo");
    assert!(typo.to_string().contains("unknown key \"controllerDLegerPeer\""), "{typo}");
    let mut tight = ControllerConfig::default();
    assert_eq!(tight.set("raftElectionTimeoutMs", "200").ok(), Some(true));
    assert!(tight.validate().is_err(), "an election timeout under three heartbeats is refused");
}
