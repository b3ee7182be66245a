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
        ("kit", &[][..]),
        ("protocol", &[][..]),
        ("lock", &[][..]),
        ("filter", &[][..]),
        ("auth", &["petrel-protocol"][..]),
        ("store", &["petrel-protocol", "petrel-lock"][..]),
        ("tier", &[][..]),
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
                "petrel-tier",
                "petrel-remoting",
                "petrel-namesrv",
                "petrel-replication",
            ][..],
        ),
        ("grpc", &["petrel-protocol", "petrel-auth", "petrel-store", "petrel-broker"][..]),
        ("replication", &["petrel-store", "petrel-auth"][..]),
        ("controller", &["petrel-protocol", "petrel-remoting", "petrel-auth"][..]),
        ("client", &["petrel-protocol", "petrel-remoting", "petrel-auth"][..]),
        ("bench", &["petrel-protocol", "petrel-client"][..]),
        ("chaos", &["petrel-protocol", "petrel-client"][..]),
    ]);
    let mut seen = BTreeSet::new();
    // kit sits under everything: it may use no Petrel crate, and every crate may use it.
    let anyone = ["petrel-kit"];
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let dir = entry.expect("entry").path();
        let name = dir.file_name().and_then(|n| n.to_str()).expect("utf-8 name").to_owned();
        let Some(may) = allowed.get(name.as_str()) else {
            panic!("crates/{name} is not in docs/architecture.md's table");
        };
        let uses = petrel_dependencies(&dir.join("Cargo.toml"));
        let extra: Vec<&String> = uses
            .iter()
            .filter(|d| !may.contains(&d.as_str()) && (name == "kit" || !anyone.contains(&d.as_str())))
            .collect();
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

/// Whether an item carries `#[cfg(test)]` (exactly: `cfg(not(test))` is production code).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Path>().is_ok_and(|p| p.is_ident("test")))
}

/// Every path a file's production items name (`a::b::C`, use trees spelled out), test items
/// skipped whole.
#[derive(Default)]
struct Paths {
    seen: Vec<String>,
    /// `#[cfg(test)] mod name;`: files that are test code however they are named.
    test_modules: Vec<String>,
}

impl Paths {
    fn use_tree(&mut self, prefix: &str, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => self.use_tree(&format!("{prefix}{}::", p.ident), &p.tree),
            syn::UseTree::Name(n) => self.seen.push(format!("{prefix}{}", n.ident)),
            syn::UseTree::Rename(r) => self.seen.push(format!("{prefix}{}", r.ident)),
            syn::UseTree::Glob(_) => self.seen.push(format!("{prefix}*")),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                self.test_modules.push(m.ident.to_string());
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree("", &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let spelled: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.seen.push(spelled.join("::"));
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // A macro's arguments are tokens, not parsed paths: look at their words.
        self.visit_path(&mac.path);
        let words: Vec<String> = mac.tokens.to_string().split([' ', '(', ')', ',']).map(str::to_owned).collect();
        self.seen.extend(words);
    }
}

fn production_paths(file: &Path) -> Paths {
    let text = std::fs::read_to_string(file).expect("readable source");
    let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
    let mut paths = Paths::default();
    syn::visit::Visit::visit_file(&mut paths, &parsed);
    paths
}

/// What the services may not name: the wire's command, its headers and bodies, its codes, its
/// transport. RocketMQ's records (`petrel_protocol::model`: a topic's config, a subscription…)
/// are the services' own, as RocketMQ persists them; the bodies that carry them are not.
const WIRE: &[&str] = &[
    "RemotingCommand",
    "petrel_protocol::header",
    "petrel_protocol::body",
    "response_code",
    "request_code",
    "petrel_remoting",
];

/// A path names `wire` when `wire`'s segments appear in it, in order and adjacent.
fn names(path: &str, wire: &str) -> bool {
    let path: Vec<&str> = path.split("::").collect();
    let wire: Vec<&str> = wire.split("::").collect();
    path.windows(wire.len()).any(|w| w == wire.as_slice())
}

/// The services' files that are production code: `#[cfg(test)] mod x;` files are left out.
fn services_files() -> Vec<(String, Paths)> {
    let dir = root().join("crates/broker/src/services");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let parsed: Vec<(PathBuf, Paths)> = files
        .into_iter()
        .map(|f| {
            let p = production_paths(&f);
            (f, p)
        })
        .collect();
    let mut test_files = BTreeSet::new();
    for (file, paths) in &parsed {
        // `x/mod.rs` and `lib`-like roots declare children beside them; `x.rs` inside `x/`.
        let base = if file.file_name().is_some_and(|n| n == "mod.rs") {
            file.parent().expect("parent").to_path_buf()
        } else {
            file.with_extension("")
        };
        for m in &paths.test_modules {
            test_files.insert(base.join(format!("{m}.rs")));
            test_files.insert(base.join(m).join("mod.rs"));
        }
    }
    parsed
        .into_iter()
        .filter(|(f, _)| !test_files.contains(f))
        .map(|(f, p)| (f.strip_prefix(&dir).expect("under services").to_string_lossy().into_owned(), p))
        .collect()
}

#[test]
fn services_import_nothing_of_the_wire() {
    let files = services_files();
    assert!(files.len() >= 6, "the services are where the architecture says");
    assert!(
        !files.iter().any(|(f, _)| f == "testing.rs"),
        "test-only modules are left out by their #[cfg(test)]"
    );
    for (file, paths) in &files {
        for path in &paths.seen {
            for wire in WIRE {
                assert!(
                    !names(path, wire),
                    "services/{file} uses {path}: services take typed requests and return typed results"
                );
            }
        }
    }
}

#[test]
fn the_item_reader_sees_what_the_text_split_missed() {
    let source = r#"
        #[cfg(test)]
        mod testing;
        pub struct Push { pub header: petrel_protocol::header::ReplyMessageRequestHeader }
        #[cfg(test)]
        mod tests { use petrel_remoting::Connection; }
        #[cfg(not(test))]
        fn real() { let _ = petrel_protocol::codes::response_code::SUCCESS; }
    "#;
    let parsed = syn::parse_file(source).expect("parses");
    let mut paths = Paths::default();
    syn::visit::Visit::visit_file(&mut paths, &parsed);
    assert_eq!(paths.test_modules, ["testing"]);
    assert!(
        paths.seen.iter().any(|p| names(p, "petrel_protocol::header")),
        "a field after a #[cfg(test)] item is seen"
    );
    assert!(
        paths.seen.iter().any(|p| names(p, "response_code")),
        "cfg(not(test)) is production code"
    );
    assert!(
        !paths.seen.iter().any(|p| names(p, "petrel_remoting")),
        "a #[cfg(test)] module is skipped whole"
    );
}

/// Non-test code of `crates/*/src`, item by item (test items and `#[cfg(test)] mod x;` files
/// left out), as `(file, text)`.
fn production_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let src = entry.expect("entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name == "tests.rs" || name == "testing.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("readable source");
            let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
            let kept: Vec<syn::Item> = parsed
                .items
                .into_iter()
                .filter(|item| !matches!(item, syn::Item::Mod(m) if is_test_only(&m.attrs)))
                .collect();
            let code: String = kept.iter().map(quote_item).collect::<Vec<_>>().join("\n");
            out.push((file.strip_prefix(root()).expect("under the root").display().to_string(), code));
        }
    }
    out
}

/// An item's text, tokens spaced as `proc_macro2` prints them.
fn quote_item(item: &syn::Item) -> String {
    use quote::ToTokens;
    item.to_token_stream().to_string()
}

/// The `Result`s of `code` whose error is a `String` or a boxed `dyn Error`.
fn stringly_results(code: &str) -> Vec<String> {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let mut found = Vec::new();
    for (at, _) in compact.match_indices("Result<") {
        // The error type: after the last top-level comma of the Result's arguments.
        let rest = &compact[at + "Result<".len()..];
        let mut depth = 0usize;
        let mut last_comma = None;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => {
                    end = i;
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(i),
                _ => {}
            }
        }
        let Some(comma) = last_comma else { continue };
        let error = &rest[comma + 1..end];
        if error == "String" || error.starts_with("Box<dyn") {
            found.push(format!("Result<{}>", &rest[..end]));
        }
    }
    found
}

#[test]
fn the_error_scan_finds_text_and_boxed_errors_and_passes_typed_ones() {
    let found = stringly_results(
        "fn a() -> Result<Vec<(u8, String)>, String> {} fn b() -> io::Result<()> {} fn c() -> Result<(), Box<dyn std::error::Error>> {} fn d() -> Result<String, E> {}",
    );
    assert_eq!(found, ["Result<Vec<(u8,String)>,String>", "Result<(),Box<dynstd::error::Error>>"]);
}

/// One error style and no hand-written exposition format: no production signature returns a
/// `Result` whose error is a `String` or a boxed `dyn Error`, and the broker writes no `# TYPE`
/// line itself (prometheus-client does).
#[test]
fn errors_are_typed_and_metrics_are_the_crates() {
    let mut stringly = Vec::new();
    let mut hand_written = Vec::new();
    for (file, code) in production_sources() {
        stringly.extend(stringly_results(&code).into_iter().map(|r| format!("{file}: {r}")));
        if file.starts_with("crates/broker/src") && code.contains("# TYPE") {
            hand_written.push(file);
        }
    }
    assert!(stringly.is_empty(), "errors as text or boxed, not typed: {stringly:#?}");
    assert!(hand_written.is_empty(), "Prometheus text written by hand: {hand_written:?}");
}
