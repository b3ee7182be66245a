//! `petrel namesrv` as a process: answers over TCP and exits 0 on SIGTERM.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure is the test failing")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::{DEFAULT_MAX_FRAME_BYTES, RemotingCommand, decode_frame};

mod common;
use common::{free_port, free_port_block};

fn ask(stream: &mut TcpStream, request: &RemotingCommand) -> RemotingCommand {
    try_ask(stream, request).unwrap()
}

fn try_ask(stream: &mut TcpStream, request: &RemotingCommand) -> std::io::Result<RemotingCommand> {
    stream.write_all(&request.to_frame().unwrap())?;
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((cmd, _)) = decode_frame(&buf, DEFAULT_MAX_FRAME_BYTES).unwrap() {
            return Ok(cmd);
        }
    }
}

#[test]
fn namesrv_serves_and_stops_cleanly() {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["namesrv", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // Until the name server answers once: a connection made while it starts may be refused or
    // reset, and is made again.
    let (mut stream, info) = loop {
        let attempt = TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
            let info = try_ask(&mut s, &RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 1))?;
            Ok((s, info))
        });
        match attempt {
            Ok(answered) => break answered,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("name server did not start: {e}"),
        }
    };
    assert_eq!((info.code, info.opaque, info.is_response()), (resp::SUCCESS, 1, true));
    assert_eq!(info.body.as_ref(), br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
    let mut route = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC, 2);
    route.put_ext("topic", "TBW102");
    assert_eq!(ask(&mut stream, &route).code, resp::TOPIC_NOT_EXIST);

    // SAFETY: plain kill(2) on our child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "SIGTERM ends the name server cleanly: {status:?}");
}

#[test]
fn namesrv_runs_an_embedded_controller_when_the_config_asks() {
    // Two ports checked free together, below the ephemeral range: never the same port twice,
    // nor one an outgoing connection takes meanwhile.
    let ns_port = free_port_block(2);
    let controller_port = ns_port + 1;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("namesrv.log");
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(
        &conf,
        format!(
            "listenPort={ns_port}\nbindAddress=127.0.0.1\nenableControllerInNamesrv=true\ncontrollerDLegerPeers=n0-127.0.0.1:{controller_port}\ncontrollerDLegerSelfId=n0\ncontrollerStorePath={}\n",
            dir.path().join("controller").display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["namesrv", "-c", conf.to_str().unwrap()])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let connect = |port: u16| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "nothing listens on {port}; the name server said:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut ns = connect(ns_port);
    let cluster = ask(&mut ns, &RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO, 1));
    assert_eq!(cluster.code, resp::SUCCESS, "the name server answers on listenPort");
    let elsewhere = std::net::SocketAddr::from(([127, 0, 0, 2], ns_port));
    assert!(
        TcpStream::connect_timeout(&elsewhere, Duration::from_secs(1)).is_err(),
        "bindAddress=127.0.0.1: not reached at 127.0.0.2"
    );
    let mut controller = connect(controller_port);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let meta = ask(&mut controller, &RemotingCommand::request(rc::CONTROLLER_GET_METADATA_INFO, 2));
        if meta.ext("isLeader") == Some("true") {
            assert_eq!(
                meta.ext("controllerLeaderAddress"),
                Some(format!("127.0.0.1:{controller_port}").as_str())
            );
            break;
        }
        assert!(Instant::now() < deadline, "the one-member controller group never led: {meta:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: plain kill(2) on our child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "exits 0 on SIGTERM");
}
