//! docs/architecture.md, checked: each crate uses only the crates its row allows, and the
//! broker's services import nothing of the wire.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `petrel-*` crates a manifest's `[dependencies]` names.
fn petrel_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).expect("readable manifest");
    let mut in_deps = false;
    let mut deps = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps
            && let Some(name) = line.split(['=', '.']).next().map(str::trim)
            && name.starts_with("petrel-")
        {
            deps.insert(name.to_owned());
        }
    }
    deps
}

#[test]
fn crates_depend_only_on_what_the_architecture_allows() {
    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("protocol", &[][..]),
        ("lock", &[][..]),
        ("filter", &[][..]),
        ("auth", &["petrel-protocol"][..]),
        ("store", &["petrel-protocol", "petrel-lock"][..]),
        ("remoting", &["petrel-protocol"][..]),
        ("namesrv", &["petrel-protocol", "petrel-remoting", "petrel-auth"][..]),
        (
            "broker",
            &[
                "petrel-protocol",
                "petrel-lock",
                "petrel-filter",
                "petrel-auth",
                "petrel-store",
                "petrel-remoting",
                "petrel-namesrv",
                "petrel-replication",
            ][..],
        ),
        ("replication", &["petrel-store", "petrel-auth"][..]),
        ("controller", &["petrel-protocol", "petrel-remoting", "petrel-auth"][..]),
        ("client", &["petrel-protocol", "petrel-remoting", "petrel-auth"][..]),
        ("bench", &["petrel-protocol", "petrel-client"][..]),
        ("chaos", &["petrel-protocol", "petrel-client"][..]),
    ]);
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let dir = entry.expect("entry").path();
        let name = dir.file_name().and_then(|n| n.to_str()).expect("utf-8 name").to_owned();
        let Some(may) = allowed.get(name.as_str()) else {
            panic!("crates/{name} is not in docs/architecture.md's table");
        };
        let uses = petrel_dependencies(&dir.join("Cargo.toml"));
        let extra: Vec<&String> = uses.iter().filter(|d| !may.contains(&d.as_str())).collect();
        assert!(
            extra.is_empty(),
            "crates/{name} uses {extra:?}, which docs/architecture.md does not allow"
        );
        seen.insert(name);
    }
    assert_eq!(seen.len(), allowed.len(), "every crate of the table exists");
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn services_import_nothing_of_the_wire() {
    let mut files = Vec::new();
    rust_files(&root().join("crates/broker/src/services"), &mut files);
    assert!(files.len() >= 6, "the services are where the architecture says");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        // Test code may build wire values; the services themselves may not.
        // Comments may name what the services avoid.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for wire in [
            "RemotingCommand",
            "petrel_protocol::header",
            "response_code",
            "request_code",
            "petrel_remoting",
        ] {
            assert!(
                !code.contains(wire),
                "{} uses {wire}: services take typed requests and return typed results",
                file.display()
            );
        }
    }
}
