//! Runs the real `petrel serve` binary on free ports with a temporary data directory, and talks
//! to it over plain blocking TCP.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use petrel_chaos::process::Process;
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::header::{CommandHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2};
use petrel_protocol::{DEFAULT_MAX_FRAME_BYTES, RemotingCommand, decode_frame};

/// A port that nothing listens on now and that this test binary has not handed out before.
/// Waits until every thread of `pid` is stopped (state `T` in `/proc/PID/task/*/stat`):
/// kill(2) returns before a busy process has stopped, and a thread still running would go on
/// with what the test meant it to miss.
pub fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let stopped = || {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return false;
        };
        tasks.flatten().all(|t| {
            // The state follows the command name in parentheses.
            std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.starts_with('T')))
                .unwrap_or(false)
        })
    };
    while !stopped() {
        assert!(Instant::now() < deadline, "process {pid} did not stop within 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub fn free_port() -> u16 {
    claim_ports(1, 1)
}

/// A base port `b`, a multiple of 10, with `b .. b + span` all free now and none handed out
/// before: for processes that take ports next to the one they are given (RocketMQ's broker:
/// its port - 2 and + 1).
pub fn free_port_block(span: u16) -> u16 {
    claim_ports(span, 10)
}

/// Ports come from 20000..32000, below the kernel's ephemeral range (32768 and up), so that no
/// outgoing connection of another test takes one between its check here and its process's
/// bind; and each is handed out once per test binary, so that two tests running side by side
/// never get the same port (a port only checked free by binding it is free again as soon as
/// the check ends, and the kernel may give it to the next check).
fn claim_ports(span: u16, align: u16) -> u16 {
    static CLAIMED: std::sync::Mutex<std::collections::BTreeSet<u16>> = std::sync::Mutex::new(std::collections::BTreeSet::new());
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    const FIRST: u16 = 20_000;
    const SLOTS: u64 = 11_900;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let seed = u64::from(std::process::id()) * 7919 + u64::from(nanos);
    let slots = SLOTS / u64::from(align);
    for _ in 0..4000 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // 4099 is prime and so coprime to every slot count: the walk visits every slot.
        let base = FIRST + u16::try_from((seed + n * 4099) % slots).unwrap() * align;
        let ports = base..base + span;
        let mut claimed = CLAIMED.lock().unwrap();
        if ports.clone().any(|p| claimed.contains(&p)) {
            continue;
        }
        if ports.clone().all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            claimed.extend(ports);
            return base;
        }
    }
    panic!("no block of {span} free ports in 20000..32000");
}

/// Fields drop in order: the process dies before its directory is removed.
pub struct Petrel {
    /// The running `petrel serve`, through the one process harness tests and chaos share.
    process: Option<Process>,
    pub dir: tempfile::TempDir,
    pub ns_port: u16,
    pub broker_port: u16,
    /// The master's HA port (`haListenPort`), free like the others rather than `broker_port + 1`.
    pub ha_port: u16,
    /// Serve RocketMQ's "VIP channel" on `broker_port - 2` (off unless asked for).
    pub fast_channel: bool,
    pub extra_args: Vec<String>,
    /// The process's open-file limit (soft and hard), if a test sets one.
    pub open_files: Option<u64>,
}

impl Petrel {
    /// [`Petrel::start`] with the process's open-file limit at `limit`.
    pub fn start_with_open_files(extra_args: &[&str], limit: u64) -> Petrel {
        let mut p = Self::unstarted(extra_args, false);
        p.open_files = Some(limit);
        p.spawn();
        p
    }

    pub fn start(extra_args: &[&str]) -> Petrel {
        Self::start_as(extra_args, false)
    }

    /// [`Petrel::start`] with RocketMQ's "VIP channel" on `broker_port - 2` (RocketMQ's slaves
    /// copy their master's topics over it).
    pub fn start_with_fast_channel(extra_args: &[&str]) -> Petrel {
        Self::start_as(extra_args, true)
    }

    fn start_as(extra_args: &[&str], fast_channel: bool) -> Petrel {
        let mut p = Self::unstarted(extra_args, fast_channel);
        p.spawn();
        p
    }

    fn unstarted(extra_args: &[&str], fast_channel: bool) -> Petrel {
        Petrel {
            dir: tempfile::tempdir().unwrap(),
            ns_port: free_port(),
            // With the fast channel the broker also takes `broker_port - 2`: claimed as a block.
            broker_port: if fast_channel { free_port_block(3) + 2 } else { free_port() },
            ha_port: free_port(),
            fast_channel,
            process: None,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            open_files: None,
        }
    }

    /// The broker process's id.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().and_then(Process::pid).expect("running")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("petrel.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn spawn(&mut self) {
        let boots_before = self.log().matches("boot success").count();
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--store-dir".into(),
            self.data_dir().to_str().unwrap().into(),
            "--namesrv-listen".into(),
            format!("127.0.0.1:{}", self.ns_port),
            "--listen-port".into(),
            self.broker_port.to_string(),
            "--broker-ip".into(),
            "127.0.0.1".into(),
            "--set".into(),
            format!("haListenPort={}", self.ha_port),
            "--set".into(),
            format!("fastListenPort={}", if self.fast_channel { self.broker_port - 2 } else { 0 }),
        ];
        args.extend(self.extra_args.iter().cloned());
        let mut process = Process::new("petrel serve", env!("CARGO_BIN_EXE_petrel"), args, self.log_path());
        if let Some(limit) = self.open_files {
            process = process.with_open_files(limit);
        }
        process.start().unwrap();
        process
            .wait_until(Duration::from_secs(30), |p| p.log().matches("boot success").count() > boots_before)
            .unwrap_or_else(|e| panic!("petrel serve did not start: {e}"));
        self.process = Some(process);
    }

    /// Sends `sig` to the running process; after SIGSTOP, returns once every thread of it has
    /// stopped.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        self.process.as_ref().expect("running").signal(sig).unwrap();
        if sig == nix::sys::signal::Signal::SIGSTOP {
            wait_stopped(self.pid());
        }
    }

    /// SIGKILL, then waits for the exit: the process stops wherever it was.
    pub fn kill(&mut self) {
        self.process.take().expect("running").kill().unwrap();
    }

    /// SIGTERM, then waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.process.take().expect("running").terminate().unwrap()
    }

    pub fn broker(&self) -> Client {
        Client::connect(self.broker_port)
    }

    pub fn namesrv(&self) -> Client {
        Client::connect(self.ns_port)
    }

    pub fn data(&self) -> &Path {
        self.dir.path()
    }
}

/// `petrel namesrv` on a free port with `extra` arguments, through the harness tests and chaos
/// share; killed on drop.
pub struct NameServer {
    pub process: Process,
    pub port: u16,
}

impl NameServer {
    /// Starts it, its log in `dir`, and waits until it listens.
    pub fn start(dir: &Path, extra: &[&str]) -> NameServer {
        let port = free_port();
        let mut args = vec!["namesrv".to_owned(), "--listen".to_owned(), format!("127.0.0.1:{port}")];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut process = Process::new(
            "namesrv",
            env!("CARGO_BIN_EXE_petrel"),
            args,
            dir.join(format!("namesrv-{port}.log")),
        );
        process.start().unwrap();
        process
            .wait_until(Duration::from_secs(20), |_| TcpStream::connect(("127.0.0.1", port)).is_ok())
            .unwrap_or_else(|e| panic!("the name server did not listen: {e}"));
        NameServer { process, port }
    }
}

/// A blocking connection: requests and their answers by opaque; requests the broker pushes are
/// kept in `pushed`.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    next_opaque: i32,
    pub pushed: Vec<RemotingCommand>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        Self::try_connect(port).unwrap_or_else(|| panic!("nothing listens on 127.0.0.1:{port}"))
    }

    /// [`Client::connect`] from another loopback address (`127.0.0.2`, say): a second client
    /// host, as far as the broker can tell.
    pub fn connect_from(source: [u8; 4], port: u16) -> Client {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
        let stream = runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind((source, 0).into()).unwrap();
            let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
            stream.into_std().unwrap()
        });
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client {
            stream,
            buf: Vec::new(),
            next_opaque: 1,
            pushed: Vec::new(),
        }
    }

    /// [`Client::connect`] to a peer that may be down: `None` when nothing listens.
    pub fn try_connect(port: u16) -> Option<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Some(Client {
            stream,
            buf: Vec::new(),
            next_opaque: 1,
            pushed: Vec::new(),
        })
    }

    pub fn write(&mut self, mut request: RemotingCommand) -> i32 {
        request.opaque = self.next_opaque;
        self.next_opaque += 1;
        self.stream.write_all(&request.to_frame().unwrap()).unwrap();
        request.opaque
    }

    /// The next frame, or `None` if the connection closed (or the read timed out).
    pub fn read(&mut self) -> Option<RemotingCommand> {
        loop {
            if let Some((cmd, used)) = decode_frame(&self.buf, DEFAULT_MAX_FRAME_BYTES).unwrap() {
                self.buf.drain(..used);
                return Some(cmd);
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    pub fn answer(&mut self, opaque: i32) -> RemotingCommand {
        loop {
            let cmd = self.read().expect("connection closed before the answer");
            if cmd.is_response() && cmd.opaque == opaque {
                return cmd;
            }
            if !cmd.is_response() {
                self.pushed.push(cmd);
            }
        }
    }

    /// [`Client::call`] for a broker that may die: `None` once the connection is gone.
    pub fn try_call(&mut self, mut request: RemotingCommand) -> Option<RemotingCommand> {
        request.opaque = self.next_opaque;
        self.next_opaque += 1;
        self.stream.write_all(&request.to_frame().unwrap()).ok()?;
        loop {
            let cmd = self.read()?;
            if cmd.is_response() && cmd.opaque == request.opaque {
                return Some(cmd);
            }
        }
    }

    pub fn call(&mut self, request: RemotingCommand) -> RemotingCommand {
        let opaque = self.write(request);
        self.answer(opaque)
    }

    /// Answers a broker-initiated request.
    pub fn reply(&mut self, response: RemotingCommand) {
        assert!(response.is_response(), "a reply is a response");
        self.stream.write_all(&response.to_frame().unwrap()).unwrap();
    }

    /// Waits up to `timeout` for a broker-initiated request.
    pub fn wait_push(&mut self, timeout: Duration) -> Option<RemotingCommand> {
        if !self.pushed.is_empty() {
            return Some(self.pushed.remove(0));
        }
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let got = self.read();
        self.stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        got
    }
}

pub fn send_header(topic: &str, queue_id: i32, tags: &str, seq: usize) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "test_pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(format!("TAGS\u{1}{tags}\u{2}seq\u{1}{seq}\u{2}WAIT\u{1}true\u{2}")),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: None,
        bname: None,
    }
}

/// SEND_MESSAGE_V2 (the Java client's form).
pub fn send_v2(topic: &str, queue_id: i32, tags: &str, seq: usize, body: &[u8]) -> RemotingCommand {
    let h: SendMessageRequestHeaderV2 = send_header(topic, queue_id, tags, seq).into();
    RemotingCommand::request(rc::SEND_MESSAGE_V2, 0)
        .with_ext_fields(h.to_ext())
        .with_body(body.to_vec())
}

/// PULL_MESSAGE as a pull consumer sends it; long polling when `suspend_ms > 0`.
pub fn pull(group: &str, topic: &str, queue_id: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    petrel_client::Client::pull_request(group, topic, queue_id, offset, 32, suspend_ms)
}

/// Pulls `topic`'s queue from `c`, starting at `from`, until `count` messages came back (an
/// answer other than SUCCESS is retried: a slave may not have the topic or the messages yet);
/// returns their bodies. Fails after `patience`.
pub fn pull_bodies(c: &mut Client, topic: &str, queue_id: i32, from: i64, count: usize, patience: Duration) -> Vec<String> {
    pull_bodies_as(c, "BodyReaders", topic, queue_id, from, count, patience)
}

/// [`pull_bodies`] as consumer group `group` (a light queue's reader is a `%LMQ%` group).
pub fn pull_bodies_as(c: &mut Client, group: &str, topic: &str, queue_id: i32, from: i64, count: usize, patience: Duration) -> Vec<String> {
    let mut bodies = Vec::new();
    let mut offset = from;
    let deadline = Instant::now() + patience;
    while bodies.len() < count {
        let r = c.call(pull(group, topic, queue_id, offset, 0));
        assert!(
            Instant::now() < deadline,
            "pulled {} of {count}; last answer {} {:?}",
            bodies.len(),
            r.code,
            r.remark
        );
        if r.code != petrel_protocol::codes::response_code::SUCCESS {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let msgs = petrel_protocol::message::decode_messages(&r.body).unwrap();
        bodies.extend(msgs.iter().map(|m| String::from_utf8(m.body.to_vec()).unwrap()));
        offset = r.ext("nextBeginOffset").unwrap().parse().unwrap();
    }
    bodies
}

/// HEART_BEAT of one consumer of `group` subscribed to all of `topic`.
pub fn heartbeat(c: &mut Client, client_id: &str, group: &str, topic: &str) -> RemotingCommand {
    let body = format!(
        r#"{{"clientID":"{client_id}","consumerDataSet":[{{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"{group}","messageModel":"CLUSTERING","subscriptionDataSet":[{{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"{topic}"}}],"unitMode":false}}],"heartbeatFingerprint":0,"producerDataSet":[],"withoutSub":false}}"#
    );
    c.call(RemotingCommand::request(rc::HEART_BEAT, 0).with_body(body.into_bytes()))
}

/// The official admin tool's output (`ref_mqadmin` in scripts/reference-lib.sh), for the tests
/// that run Apache RocketMQ's jars.
pub fn mqadmin(namesrv: &str, args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg("-c")
        .arg("source scripts/reference-lib.sh && ref_mqadmin \"$@\"")
        .arg("mqadmin")
        .arg(namesrv)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a scenario of the official Java client's test (`tests/clients/java`, built by `mvn
/// package`: scripts/test.sh builds it before the scripts that run this) and returns its output;
/// panics with the output unless it says all its checks passed.
pub fn java_client(args: &[&str]) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/java/target");
    assert!(
        root.join("classes/petrel/ClientTest.class").exists(),
        "the Java client's test is not built: mvn -q -B -f tests/clients/java/pom.xml package -DskipTests"
    );
    let classpath = format!("{}:{}/lib/*", root.join("classes").display(), root.display());
    let out = Command::new("timeout")
        .args([
            "--signal=QUIT",
            "--kill-after=10",
            "300",
            "java",
            "-Xmx256m",
            "-cp",
            &classpath,
            "petrel.ClientTest",
        ])
        .args(args)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && text.contains("all checks passed"),
        "java {args:?}: {}\n{text}",
        out.status
    );
    text
}

/// Prints the failover distribution and checks the targets (median ≤ 5 s, max ≤ 10 s).
pub fn report_failovers(failovers: &mut [Duration]) {
    failovers.sort();
    let (median, max) = (failovers[failovers.len() / 2], failovers[failovers.len() - 1]);
    println!(
        "failover over {} kills: min {:?}, median {median:?}, max {max:?}",
        failovers.len(),
        failovers[0]
    );
    assert!(
        median <= Duration::from_secs(5) && max <= Duration::from_secs(10),
        "failover median {median:?}, max {max:?}"
    );
}

/// A CA and a leaf certificate for 127.0.0.1 signed by it, made with the openssl command in
/// `dir`: (CA certificate, leaf certificate, leaf key) paths.
pub fn ca_and_leaf(dir: &Path, name: &str) -> (String, String, String) {
    let p = |f: &str| dir.join(format!("{name}-{f}")).to_str().unwrap().to_owned();
    let run = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl is installed");
        assert!(status.success(), "openssl {args:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        &format!("/CN={name}-ca"),
        "-keyout",
        &p("ca.key"),
        "-out",
        &p("ca.pem"),
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        &p("key.pem"),
        "-out",
        &p("leaf.csr"),
    ]);
    std::fs::write(p("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        &p("leaf.csr"),
        "-CA",
        &p("ca.pem"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        &p("cert.pem"),
        "-extfile",
        &p("ext"),
    ]);
    (p("ca.pem"), p("cert.pem"), p("key.pem"))
}
