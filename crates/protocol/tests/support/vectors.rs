//! Loads the captures in `tests/vectors`: the frames of each pcap, and the decoded `.txt`
//! expectations beside it. Test support only.

use std::collections::HashMap;
use std::path::PathBuf;

use petrel_protocol::{DEFAULT_MAX_FRAME_BYTES, RemotingCommand, decode_frame};

use super::pcap::read_flows;

/// Port of a role named without one in the `.txt` files.
fn role_port(role: &str) -> u16 {
    match role {
        "namesrv" => 9876,
        "broker" => 10911,
        other => panic!("unknown role {other:?}"),
    }
}

fn side_port(side: &str) -> u16 {
    match side.rsplit_once(':') {
        Some((_, port)) => port.parse().unwrap_or_else(|_| panic!("bad port in {side:?}")),
        None => role_port(side),
    }
}

/// The directory of the captures: `$PETREL_VECTORS_DIR`, else `tests/vectors` in this
/// repository (recorded by `scripts/record-vectors.sh`).
pub fn vectors_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("PETREL_VECTORS_DIR") {
        return PathBuf::from(dir);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors");
    assert!(dir.join("README.md").exists(), "test vectors not found in {}", dir.display());
    dir
}

/// Every `NAME` with both `NAME.pcap` and `NAME.txt`, sorted.
pub fn vector_names() -> Vec<String> {
    let dir = vectors_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "pcap").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    for n in &names {
        assert!(dir.join(format!("{n}.txt")).exists(), "{n}.pcap has no .txt beside it");
    }
    names
}

/// One frame as the `.txt` describes it.
#[derive(Debug)]
pub struct Expected {
    pub src_port: u16,
    pub dst_port: u16,
    pub is_response: bool,
    pub code: i32,
    pub frame_bytes: usize,
    pub serialize_type: String,
    pub header_bytes: usize,
    pub body_bytes: usize,
    pub header: serde_json::Value,
    pub body_hex: Option<String>,
    /// Body text; `true` when the `.txt` cut it short with " ...".
    pub body_text: Option<(String, bool)>,
    pub stored_messages: Vec<HashMap<String, String>>,
    pub stored_properties: Vec<Vec<(String, String)>>,
}

/// Parses a Python string literal starting at `s[0]` (a quote); returns it and the rest.
fn py_string(s: &str) -> (String, &str) {
    let quote = s.chars().next().unwrap();
    assert!(quote == '\'' || quote == '"', "expected a quoted literal in {s:?}");
    let mut out = String::new();
    let mut chars = s[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, e) = chars.next().unwrap();
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'x' => {
                        let h: String = (0..2).map(|_| chars.next().unwrap().1).collect();
                        out.push(char::from(u8::from_str_radix(&h, 16).unwrap()));
                    }
                    other => out.push(other),
                }
            }
            c if c == quote => return (out, &s[1 + i + 1..]),
            c => out.push(c),
        }
    }
    panic!("unterminated literal {s:?}")
}

fn parse_stored(line: &str) -> (HashMap<String, String>, Vec<(String, String)>) {
    let (_, fields) = line.split_once("): ").unwrap();
    let (simple, rest) = fields.split_once(" body=b").unwrap();
    let mut map: HashMap<String, String> = simple
        .split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let (body, rest) = py_string(rest);
    map.insert("body".into(), body);
    let mut rest = rest.trim_start().strip_prefix("properties={").unwrap();
    let mut props = Vec::new();
    while !rest.starts_with('}') {
        let (k, r) = py_string(rest.trim_start_matches([',', ' ']));
        let r = r.strip_prefix(": ").unwrap();
        let (v, r) = py_string(r);
        props.push((k, v));
        rest = r.trim_start_matches([',', ' ']);
    }
    (map, props)
}

/// Parses a `.txt` decode into its frames, in file order.
pub fn load_expected(name: &str) -> Vec<Expected> {
    let text = std::fs::read_to_string(vectors_dir().join(format!("{name}.txt"))).unwrap();
    let mut out: Vec<Expected> = Vec::new();
    let mut declared = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("[t=") {
            let (_, rest) = rest.split_once("] ").unwrap();
            let (left, rest) = rest.split_once(" -> ").unwrap();
            let (kind_at, is_response) = match (rest.find(": REQUEST "), rest.find(": RESPONSE ")) {
                (Some(i), _) => (i, false),
                (None, Some(i)) => (i, true),
                _ => panic!("no direction in {line:?}"),
            };
            let right = &rest[..kind_at];
            let after = rest[kind_at..].split_whitespace().nth(2).unwrap();
            out.push(Expected {
                src_port: side_port(left),
                dst_port: side_port(right),
                is_response,
                code: after.parse().unwrap(),
                frame_bytes: 0,
                serialize_type: String::new(),
                header_bytes: 0,
                body_bytes: 0,
                header: serde_json::Value::Null,
                body_hex: None,
                body_text: None,
                stored_messages: Vec::new(),
                stored_properties: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("  frame ") {
            let cur = out.last_mut().unwrap();
            let nums: Vec<&str> = rest.split([' ', ',', '=']).filter(|s| !s.is_empty()).collect();
            // "N bytes serializeType X header H bytes body B bytes"
            cur.frame_bytes = nums[0].parse().unwrap();
            cur.serialize_type = nums[3].to_owned();
            cur.header_bytes = nums[5].parse().unwrap();
            cur.body_bytes = nums[8].parse().unwrap();
        } else if let Some(rest) = line.strip_prefix("  header ") {
            out.last_mut().unwrap().header = serde_json::from_str(rest).unwrap();
        } else if let Some(rest) = line.strip_prefix("  body hex ") {
            out.last_mut().unwrap().body_hex = Some(rest.trim().to_owned());
        } else if let Some(rest) = line.strip_prefix("  body (JSON-like text): ") {
            let cut = rest.strip_suffix(" ...");
            out.last_mut().unwrap().body_text = Some((cut.unwrap_or(rest).to_owned(), cut.is_some()));
        } else if line.starts_with("  body: stored message") {
            let (m, p) = parse_stored(line);
            let cur = out.last_mut().unwrap();
            cur.stored_messages.push(m);
            cur.stored_properties.push(p);
        } else if let Some(rest) = line.strip_prefix("# ").and_then(|r| r.strip_suffix(" frames decoded")) {
            declared = Some(rest.parse::<usize>().unwrap());
        }
    }
    assert_eq!(Some(out.len()), declared, "{name}.txt: frame count line disagrees with its blocks");
    out
}

/// One frame decoded from the pcap.
#[derive(Debug, Clone)]
pub struct Captured {
    pub src_port: u16,
    pub dst_port: u16,
    pub time_us: u64,
    pub bytes: Vec<u8>,
    pub command: RemotingCommand,
}

/// Decodes every frame of every TCP flow of `NAME.pcap`, ordered by the time of each frame's
/// first byte.
pub fn load_captured(name: &str) -> Vec<Captured> {
    let data = std::fs::read(vectors_dir().join(format!("{name}.pcap"))).unwrap();
    let mut frames = Vec::new();
    for flow in read_flows(&data).into_values() {
        let mut at = 0;
        while at < flow.bytes.len() {
            let (command, used) = decode_frame(&flow.bytes[at..], DEFAULT_MAX_FRAME_BYTES)
                .unwrap_or_else(|e| panic!("{name}: {}->{} at byte {at}: {e}", flow.src_port, flow.dst_port))
                .unwrap_or_else(|| panic!("{name}: {}->{} ends in a partial frame", flow.src_port, flow.dst_port));
            frames.push(Captured {
                src_port: flow.src_port,
                dst_port: flow.dst_port,
                time_us: flow.time_of(at),
                bytes: flow.bytes[at..at + used].to_vec(),
                command,
            });
            at += used;
        }
    }
    frames.sort_by_key(|f| (f.time_us, f.src_port, f.dst_port));
    frames
}
