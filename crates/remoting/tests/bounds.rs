//! Every bound of the transport, over real TCP on loopback: the connection limit, the idle
//! timeout, requests in flight per connection, queued answer bytes, and the drain — each shown
//! at its edge, with another connection served all the while.
#![allow(clippy::unwrap_used, reason = "test code: a failure is the test failing")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use petrel_protocol::{DEFAULT_MAX_FRAME_BYTES, RemotingCommand, decode_frame};
use petrel_remoting::{Connection, ConnectionLimits, Handler, IgnoreRequests, Reply, Server, ServerLimits, answer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

const ECHO: i32 = 1;
const HOLD: i32 = 2;
const BIG: i32 = 3;
const BIG_BYTES: usize = 32 * 1024;

/// Echoes at once, holds until the gate lets a request through, or answers with 32 KiB.
struct TestHandler {
    gate: Arc<Semaphore>,
    handled: AtomicUsize,
}

impl Handler for TestHandler {
    fn handle(&self, _conn: &Arc<Connection>, request: RemotingCommand) -> Reply {
        self.handled.fetch_add(1, Ordering::SeqCst);
        match request.code {
            HOLD => {
                let gate = self.gate.clone();
                Reply::Later(Box::pin(async move {
                    gate.acquire().await.expect("gate open").forget();
                    Some(answer(&request, 0))
                }))
            }
            BIG => Reply::Now(answer(&request, 0).with_body(vec![7u8; BIG_BYTES])),
            _ => Reply::Now(answer(&request, 0)),
        }
    }
}

async fn start(limits: ServerLimits) -> (Server, Arc<TestHandler>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handler = Arc::new(TestHandler {
        gate: Arc::new(Semaphore::new(0)),
        handled: AtomicUsize::new(0),
    });
    let server = Server::start("test", listener, handler.clone(), limits).unwrap();
    (server, handler)
}

fn limits(f: impl FnOnce(&mut ServerLimits)) -> ServerLimits {
    let mut l = ServerLimits::default();
    f(&mut l);
    l
}

async fn send(stream: &mut TcpStream, code: i32, opaque: i32) {
    stream
        .write_all(&RemotingCommand::request(code, opaque).to_frame().unwrap())
        .await
        .unwrap();
}

/// The next answer, or `None` when the connection closed or nothing came within `wait`.
async fn next(stream: &mut TcpStream, buf: &mut Vec<u8>, wait: Duration) -> Option<RemotingCommand> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some((cmd, used)) = decode_frame(buf, DEFAULT_MAX_FRAME_BYTES).unwrap() {
            buf.drain(..used);
            return Some(cmd);
        }
        let mut chunk = vec![0u8; 64 * 1024];
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn echo_works(addr: std::net::SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr).await else { return false };
    send(&mut s, ECHO, 9).await;
    next(&mut s, &mut Vec::new(), Duration::from_secs(5))
        .await
        .is_some_and(|a| a.opaque == 9)
}

#[tokio::test]
async fn connections_past_the_limit_are_closed_on_arrival() {
    let (server, _) = start(limits(|l| l.max_connections = 2)).await;
    let addr = server.local_addr();
    let mut a = TcpStream::connect(addr).await.unwrap();
    let mut b = TcpStream::connect(addr).await.unwrap();
    for (s, opaque) in [(&mut a, 1), (&mut b, 2)] {
        send(s, ECHO, opaque).await;
        assert_eq!(next(s, &mut Vec::new(), Duration::from_secs(5)).await.unwrap().opaque, opaque);
    }
    let mut third = TcpStream::connect(addr).await.unwrap();
    send(&mut third, ECHO, 3).await;
    assert!(
        next(&mut third, &mut Vec::new(), Duration::from_secs(5)).await.is_none(),
        "closed at once"
    );
    assert_eq!(server.stats().refused.load(Ordering::SeqCst), 1);
    send(&mut a, ECHO, 4).await;
    assert!(
        next(&mut a, &mut Vec::new(), Duration::from_secs(5)).await.is_some(),
        "the others keep being served"
    );
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !echo_works(addr).await {
        assert!(Instant::now() < deadline, "a closed connection gives its place back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn idle_connections_close_but_busy_ones_and_ones_owed_an_answer_stay() {
    let idle_timeout = Duration::from_millis(300);
    let (server, handler) = start(limits(|l| l.connection.idle_timeout = idle_timeout)).await;
    let addr = server.local_addr();
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut chatty = TcpStream::connect(addr).await.unwrap();
    let mut owed = TcpStream::connect(addr).await.unwrap();
    send(&mut owed, HOLD, 1).await;
    let started = Instant::now();
    let mut buf = Vec::new();
    while started.elapsed() < idle_timeout * 3 {
        send(&mut chatty, ECHO, 1).await;
        assert!(
            next(&mut chatty, &mut buf, Duration::from_secs(5)).await.is_some(),
            "a busy connection stays open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        next(&mut idle, &mut Vec::new(), Duration::from_secs(2)).await.is_none(),
        "the idle one was closed"
    );
    assert!(server.stats().closed_idle.load(Ordering::SeqCst) >= 1);
    handler.gate.add_permits(1);
    let answer = next(&mut owed, &mut Vec::new(), Duration::from_secs(5)).await;
    assert_eq!(answer.map(|a| a.opaque), Some(1), "a connection owed an answer is not idle");
}

#[tokio::test]
async fn a_connection_at_its_in_flight_bound_stops_being_read_and_others_are_served() {
    let (server, handler) = start(limits(|l| l.connection.max_in_flight = 2)).await;
    let addr = server.local_addr();
    let mut s = TcpStream::connect(addr).await.unwrap();
    for opaque in 1..=3 {
        send(&mut s, HOLD, opaque).await;
    }
    send(&mut s, ECHO, 4).await;
    let mut buf = Vec::new();
    assert!(
        next(&mut s, &mut buf, Duration::from_millis(300)).await.is_none(),
        "nothing is read past the bound"
    );
    assert_eq!(
        handler.handled.load(Ordering::SeqCst),
        2,
        "two requests in flight, the rest wait in the socket"
    );
    assert!(echo_works(addr).await, "another connection is served meanwhile");
    handler.gate.add_permits(3);
    let mut opaques: Vec<i32> = Vec::new();
    for _ in 0..4 {
        opaques.push(next(&mut s, &mut buf, Duration::from_secs(5)).await.unwrap().opaque);
    }
    opaques.sort_unstable();
    assert_eq!(opaques, [1, 2, 3, 4], "everything is answered once the bound frees");
}

#[tokio::test]
async fn answers_that_wait_are_kept_by_their_connection_not_a_task_each() {
    let (server, handler) = start(ServerLimits::default()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    let waiting = 64;
    for opaque in 1..=waiting {
        send(&mut s, HOLD, opaque).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while handler.handled.load(Ordering::SeqCst) < waiting as usize {
        assert!(Instant::now() < deadline, "the requests were not all read");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The server's accept loop, this connection's task and the test's own: not one per answer.
    let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    assert!(tasks < 8, "{tasks} tasks alive for {waiting} waiting answers");
    handler.gate.add_permits(waiting as usize);
    let mut buf = Vec::new();
    let mut opaques: Vec<i32> = Vec::new();
    for _ in 0..waiting {
        opaques.push(next(&mut s, &mut buf, Duration::from_secs(5)).await.unwrap().opaque);
    }
    opaques.sort_unstable();
    assert_eq!(opaques, (1..=waiting).collect::<Vec<_>>(), "each answered once");
}

#[tokio::test]
async fn answers_still_owed_when_the_connection_breaks_are_finished_not_dropped() {
    let (server, handler) = start(ServerLimits::default()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    for opaque in 1..=3 {
        send(&mut s, HOLD, opaque).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while handler.handled.load(Ordering::SeqCst) < 3 {
        assert!(Instant::now() < deadline, "the requests were not all read");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Not a frame: the connection's task ends at once, with three answers owed. The work behind
    // them goes on and takes the gate's permits, as a handler's later steps would run.
    s.write_all(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]).await.unwrap();
    let mut buf = Vec::new();
    assert!(
        next(&mut s, &mut buf, Duration::from_secs(5)).await.is_none(),
        "closed, nothing answered"
    );
    handler.gate.add_permits(3);
    let deadline = Instant::now() + Duration::from_secs(10);
    while handler.gate.available_permits() > 0 {
        assert!(Instant::now() < deadline, "the owed work was dropped with the connection");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn answers_queue_only_up_to_their_byte_bound_while_the_peer_does_not_read() {
    let max_queued_bytes = 128 * 1024;
    let (server, handler) = start(limits(|l| l.connection.max_queued_bytes = max_queued_bytes)).await;
    let addr = server.local_addr();
    let s = TcpStream::connect(addr).await.unwrap();
    let requests = 20_000;
    let (_reader, mut writer) = s.into_split();
    let frames: Vec<u8> = (0..requests)
        .flat_map(|i| RemotingCommand::request(BIG, i).with_body(vec![0u8; 1024]).to_frame().unwrap())
        .collect();
    let writing = tokio::spawn(async move { writer.write_all(&frames).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let handled = handler.handled.load(Ordering::SeqCst);
    // Socket buffers on both sides hold some answers (a few MB on loopback); the rest stop at
    // the bound, and the requests back up behind them.
    assert!(
        handled < 1000,
        "{handled} of {requests} requests handled while the peer read nothing: the answers were not bounded"
    );
    assert!(!writing.is_finished(), "the requests back up in the socket");
    assert!(echo_works(addr).await, "another connection is served meanwhile");
}

#[tokio::test]
async fn draining_finishes_what_is_owed_and_reads_nothing_new() {
    let (server, handler) = start(ServerLimits::default()).await;
    let addr = server.local_addr();
    let mut s = TcpStream::connect(addr).await.unwrap();
    send(&mut s, HOLD, 1).await;
    while handler.handled.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let drain = tokio::spawn(server.drain());
    tokio::time::sleep(Duration::from_millis(100)).await;
    send(&mut s, ECHO, 2).await;
    handler.gate.add_permits(1);
    let mut buf = Vec::new();
    assert_eq!(next(&mut s, &mut buf, Duration::from_secs(5)).await.map(|a| a.opaque), Some(1));
    assert!(
        next(&mut s, &mut buf, Duration::from_secs(5)).await.is_none(),
        "no new request is served"
    );
    tokio::time::timeout(Duration::from_secs(10), drain).await.unwrap().unwrap();
    assert_eq!(handler.handled.load(Ordering::SeqCst), 1);
    assert!(!echo_works(addr).await, "the listener is closed");
}

#[tokio::test]
async fn client_calls_are_matched_by_opaque_and_fail_when_the_peer_goes() {
    let (server, handler) = start(ServerLimits::default()).await;
    let addr = server.local_addr().to_string();
    let conn = petrel_remoting::connect(&addr, Duration::from_secs(5), ConnectionLimits::default(), Arc::new(IgnoreRequests))
        .await
        .unwrap();
    let held = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call(RemotingCommand::request(HOLD, 0), Duration::from_secs(30)).await })
    };
    let echoed = conn.call(RemotingCommand::request(ECHO, 0), Duration::from_secs(5)).await.unwrap();
    assert!(echoed.is_response());
    let timed_out = conn.call(RemotingCommand::request(HOLD, 0), Duration::from_millis(100)).await;
    assert!(matches!(timed_out, Err(petrel_remoting::CallError::Timeout { .. })));
    conn.shutdown();
    assert!(matches!(held.await.unwrap(), Err(petrel_remoting::CallError::Closed(_))));
    handler.gate.add_permits(2);
    server.drain().await;
}
