//! namesrv.conf: the key table documents itself in docs/configuration.md, and its values keep
//! their own spellings.

use std::path::Path;

use petrel_kit::config::{Table, apply_set};
use petrel_namesrv::{NAMESRV_KEYS, NamesrvConfig};

/// `PETREL_BLESS=1 cargo test -p petrel-namesrv --test config` rewrites the table.
#[test]
fn docs_configuration_md_lists_every_namesrv_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let blessed = petrel_kit::config::fill_doc_tables(&doc, &[("namesrv", NamesrvConfig::markdown_table())]).expect("markers");
    if std::env::var_os("PETREL_BLESS").is_some() {
        std::fs::write(&path, &blessed).expect("write docs/configuration.md");
        return;
    }
    assert!(
        doc == blessed,
        "docs/configuration.md is out of date with the namesrv key table; run PETREL_BLESS=1 cargo test -p petrel-namesrv --test config"
    );
}

#[test]
fn every_key_takes_its_own_default_back_and_a_typo_is_refused() {
    for k in NAMESRV_KEYS {
        let mut c = NamesrvConfig::default();
        let default = (k.default)();
        assert_eq!(c.set_from_table(k.key, &default).ok(), Some(true), "{}={default}", k.key);
        assert_eq!(c.get(k.key), Some(default), "{}", k.key);
    }
    let mut c = NamesrvConfig::default();
    assert_eq!(apply_set(&mut c, "listenPort=9877").ok(), Some(None));
    assert_eq!(c.listen_address().to_string(), "0.0.0.0:9877");
    assert_eq!(
        apply_set(&mut c, "orderMessageEnable=true").ok(),
        Some(Some("orderMessageEnable".to_owned())),
        "RocketMQ's own key"
    );
    assert!(
        NamesrvConfig::known_to_rocketmq("controllerDLegerPeers"),
        "the embedded controller's keys are RocketMQ's too"
    );
    assert!(apply_set(&mut c, "listenPrt=9877").is_err(), "a typo");
    let e = apply_set(&mut c, "maxAuthenticationFailuresPerConnection=0").expect_err("below 1");
    assert!(e.to_string().contains("must be at least 1"), "{e}");
    let e = apply_set(&mut c, r#"initAuthenticationUser={"username":"root","password":""}"#).expect_err("an empty password");
    assert!(!e.to_string().contains("root"), "a secret is not shown: {e}");
}
