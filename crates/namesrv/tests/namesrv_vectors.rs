//! The name server against the captures: replay every request the official clients and a real
//! RocketMQ 5.5.0 broker sent to the Java name server, and require the same answers — code,
//! remark, header fields and body, byte for byte — from the point where the capture holds a full
//! broker registration (before that, the Java name server knew things the capture does not show).

#[path = "../../protocol/tests/support/mod.rs"]
mod support;

use petrel_namesrv::NameServer;
use petrel_protocol::codes::request_code as rc;
use support::vectors::{load_captured, vector_names};

const NAMESRV_PORT: u16 = 9876;
/// A periodic registration carries the broker's whole topic table (3–4 KB); an incremental one
/// a single topic (under 1 KB).
const FULL_REGISTRATION_BYTES: usize = 2000;

#[test]
fn answers_match_the_java_name_server() {
    let mut compared = 0;
    let mut by_code = std::collections::BTreeMap::<i32, usize>::new();
    for name in vector_names() {
        let frames = load_captured(&name);
        let ns = NameServer::new();
        let mut armed = false;
        for req in frames.iter().filter(|f| f.dst_port == NAMESRV_PORT && !f.command.is_response()) {
            let ours = ns.handle(&req.command);
            let full = req.command.code == rc::REGISTER_BROKER && req.command.body.len() > FULL_REGISTRATION_BYTES;
            if armed {
                let theirs = frames
                    .iter()
                    .find(|f| {
                        f.src_port == NAMESRV_PORT
                            && f.dst_port == req.src_port
                            && f.command.is_response()
                            && f.command.opaque == req.command.opaque
                    })
                    .unwrap_or_else(|| panic!("{name}: no captured answer to opaque {}", req.command.opaque));
                let ours = ours.expect("the name server answers every two-way request");
                let what = format!("{name}: code {} opaque {}", req.command.code, req.command.opaque);
                let t = &theirs.command;
                assert_eq!(ours.code, t.code, "{what}: response code");
                assert_eq!(ours.opaque, t.opaque, "{what}");
                assert!(ours.is_response());
                assert_eq!(ours.remark, t.remark, "{what}: remark");
                assert_eq!(ours.ext_fields, t.ext_fields, "{what}: extFields");
                assert_eq!(
                    String::from_utf8_lossy(&ours.body),
                    String::from_utf8_lossy(&t.body),
                    "{what}: body, byte for byte"
                );
                compared += 1;
                *by_code.entry(req.command.code).or_default() += 1;
            }
            armed |= full;
        }
    }
    eprintln!("compared {compared} name-server answers with the captures: {by_code:?}");
    // The six captures hold nine answers after a full registration: 1 REGISTER_BROKER,
    // 4 GET_ROUTEINFO_BY_TOPIC (found and not found), 4 GET_BROKER_CLUSTER_INFO.
    assert_eq!(compared, 9);
    assert_eq!(by_code.get(&rc::GET_ROUTEINFO_BY_TOPIC), Some(&4));
    assert_eq!(by_code.get(&rc::GET_BROKER_CLUSTER_INFO), Some(&4));
}
