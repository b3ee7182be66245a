//! Scenarios that drive Petrel's gRPC endpoint (RocketMQ 5's gRPC protocol) with the official
//! RocketMQ 5 Rust SDK, the `rocketmq` crate 5.0.0.
//!
//! ```text
//! grpc-rust-test ENDPOINT SCENARIO TOPIC GROUP
//!
//!   normal   a NORMAL topic: 10 tagged, keyed messages sent, received through a tag filter,
//!            acked, and not received again
//!   delay    a DELAY topic: one message due 3 s after its send arrives no sooner than 0.5 s
//!            before its delivery timestamp and within 20 s
//! ```
//!
//! ENDPOINT is host:port of the gRPC listener, reached without TLS and without credentials.
//! Each run prints exactly one verdict line on stdout, `ok: rust SCENARIO: ...` (exit 0) or
//! `FAIL: rust SCENARIO: ...` (exit 1); progress notes go to stderr as `info: ...`. A run never
//! takes longer than 60 s. The SDK logs through slog; its log is written as JSON under
//! `$TMPDIR/petrel-grpc-rust-test-PID/` (kept when a run fails, removed when it passes) rather
//! than onto the terminal.
//!
//! What this SDK does on the wire, which the scenarios depend on:
//! - `ClientOption::long_polling_timeout` is both the `long_polling_timeout` of each
//!   ReceiveMessage and that call's whole deadline (`grpc-timeout`): with the 5 s used here, an
//!   empty long poll has to be answered within 5 s of the request.
//! - A delivery timestamp is whole seconds since the epoch.
//! - A `MESSAGE_NOT_FOUND` status on ReceiveMessage comes back as an empty list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq::conf::{ClientOption, LoggingFormat, ProducerOption, SimpleConsumerOption};
use rocketmq::error::ClientError;
use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::model::message::{MessageBuilder, MessageView};
use rocketmq::{Producer, SimpleConsumer};

/// No run lasts longer than this, whatever it is waiting for.
const HARD_LIMIT: Duration = Duration::from_secs(60);
/// The scenario's own waits end by then, leaving time to report and close the clients.
const WORK_LIMIT: Duration = Duration::from_secs(50);
/// How long closing each client may take once the verdict is out.
const CLOSE_LIMIT: Duration = Duration::from_secs(3);
const TAG: &str = "TagA";
/// The consumer's long-polling wait (the SDK's `long_polling_timeout`).
const AWAIT: Duration = Duration::from_secs(5);
/// A receive that has not returned this long after its long poll should have ended is stuck.
const RECEIVE_GRACE: Duration = Duration::from_secs(5);
const INVISIBLE: Duration = Duration::from_secs(20);
const BATCH: i32 = 16;

const USAGE: &str = "usage: grpc-rust-test ENDPOINT (normal|delay) TOPIC GROUP";

static VERDICT_GIVEN: AtomicBool = AtomicBool::new(false);
static EXIT_CODE: AtomicI32 = AtomicI32::new(1);
static STEP: Mutex<String> = Mutex::new(String::new());

/// Prints the run's one verdict line; later calls print nothing.
fn verdict(ok: bool, scenario: &str, text: &str) {
    if VERDICT_GIVEN.swap(true, Ordering::SeqCst) {
        return;
    }
    EXIT_CODE.store(if ok { 0 } else { 1 }, Ordering::SeqCst);
    let word = if ok { "ok" } else { "FAIL" };
    println!("{word}: rust {scenario}: {text}");
}

fn info(text: &str) {
    eprintln!("info: {text}");
}

/// Names what the scenario is doing now, for a verdict given by a timeout.
fn step(text: &str) {
    info(text);
    if let Ok(mut s) = STEP.lock() {
        *s = text.to_owned();
    }
}

fn current_step() -> String {
    STEP.lock().map(|s| s.clone()).unwrap_or_default()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = args.get(1).cloned().unwrap_or_else(|| "?".to_owned());
    if args.len() != 4 || !matches!(scenario.as_str(), "normal" | "delay") {
        verdict(false, &scenario, USAGE);
        std::process::exit(1);
    }
    let endpoint = match plain_endpoint(&args[0]) {
        Ok(e) => e,
        Err(e) => {
            verdict(false, &scenario, &e);
            std::process::exit(1);
        }
    };
    let (topic, group) = (args[2].clone(), args[3].clone());

    let watched = scenario.clone();
    std::thread::spawn(move || {
        std::thread::sleep(HARD_LIMIT);
        verdict(
            false,
            &watched,
            &format!("no verdict within {} s (last step: {})", HARD_LIMIT.as_secs(), current_step()),
        );
        std::process::exit(EXIT_CODE.load(Ordering::SeqCst));
    });

    let log_dir = std::env::temp_dir().join(format!("petrel-grpc-rust-test-{}", std::process::id()));
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            verdict(false, &scenario, &format!("cannot start the tokio runtime: {e}"));
            std::process::exit(1);
        }
    };
    let started = Instant::now();
    let run = Run {
        endpoint,
        scenario: scenario.clone(),
        topic,
        group,
        log_dir: log_dir.clone(),
        deadline: started + WORK_LIMIT,
    };
    runtime.block_on(async move {
        let task = tokio::spawn(run.main());
        // The work deadline plus time for the clients to close.
        match tokio::time::timeout(WORK_LIMIT + 2 * CLOSE_LIMIT + Duration::from_secs(1), task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.is_panic() => {
                let what = panic_text(e.into_panic());
                verdict(false, &scenario, &format!("{}: the SDK or this program panicked: {what}", current_step()));
            }
            Ok(Err(e)) => verdict(false, &scenario, &format!("{}: scenario task ended: {e}", current_step())),
            Err(_) => verdict(
                false,
                &scenario,
                &format!("no verdict within {} s (last step: {})", WORK_LIMIT.as_secs(), current_step()),
            ),
        }
    });
    let code = EXIT_CODE.load(Ordering::SeqCst);
    if code == 0 {
        let _ = std::env::set_current_dir(std::env::temp_dir());
        let _ = std::fs::remove_dir_all(&log_dir);
    } else {
        info(&format!("the SDK's log is under {}", log_dir.display()));
    }
    std::process::exit(code);
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

/// The SDK takes `host:port`; a leading `http://` is dropped, TLS is not offered.
fn plain_endpoint(given: &str) -> Result<String, String> {
    if given.starts_with("https://") {
        return Err(format!("endpoint {given}: this test speaks plaintext gRPC only"));
    }
    let bare = given.strip_prefix("http://").unwrap_or(given).trim_end_matches('/');
    match bare.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(bare.to_owned()),
        _ => Err(format!("endpoint {given} is not host:port; {USAGE}")),
    }
}

/// One run: where to connect, what to check, and by when.
struct Run {
    endpoint: String,
    scenario: String,
    topic: String,
    group: String,
    log_dir: PathBuf,
    deadline: Instant,
}

/// The clients a scenario opened, closed after the verdict.
#[derive(Default)]
struct Clients {
    producer: Option<Producer>,
    consumer: Option<SimpleConsumer>,
}

impl Run {
    async fn main(self) {
        let mut clients = Clients::default();
        let result = match self.scenario.as_str() {
            "normal" => self.normal(&mut clients).await,
            _ => self.delay(&mut clients).await,
        };
        match result {
            Ok(held) => verdict(true, &self.scenario, &held),
            Err(why) => verdict(false, &self.scenario, &why),
        }
        if let Some(consumer) = clients.consumer.take() {
            close("simple consumer", consumer.shutdown()).await;
        }
        if let Some(producer) = clients.producer.take() {
            close("producer", producer.shutdown()).await;
        }
    }

    // ------------------------------------------------------------------ scenarios

    /// Ten tagged, keyed messages: each send answered with a message id; all ten received
    /// through the tag filter with their ids, keys and tag, acked, and not received again.
    async fn normal(&self, clients: &mut Clients) -> Result<String, String> {
        const TOTAL: usize = 10;
        let filter = FilterExpression::new(FilterType::Tag, TAG);
        self.start_consumer(clients).await?;
        self.start_producer(clients).await?;
        let (Some(producer), Some(consumer)) = (clients.producer.as_ref(), clients.consumer.as_ref()) else {
            return Err("the clients did not start".to_owned());
        };

        step(&format!("sending {TOTAL} messages"));
        let mut id_by_body = BTreeMap::new();
        for i in 0..TOTAL {
            let body = format!("rust-{i}");
            let message = MessageBuilder::builder()
                .set_topic(self.topic.as_str())
                .set_tag(TAG)
                .set_keys(vec![format!("k{i}")])
                .set_body(body.clone().into_bytes())
                .build()
                .map_err(|e| format!("building {body}: {e}"))?;
            let receipt = producer.send(message).await.map_err(|e| format!("sending {body}: {e}"))?;
            if receipt.message_id().is_empty() {
                return Err(format!("the send of {body} returned no message id"));
            }
            id_by_body.insert(body, receipt.message_id().to_owned());
        }

        step(&format!("receiving the {TOTAL} messages"));
        let began = Instant::now();
        let until = self.deadline.min(began + Duration::from_secs(30));
        let mut seen = BTreeSet::new();
        let (mut receives, mut empty) = (0_u32, 0_u32);
        while seen.len() < TOTAL && Instant::now() < until {
            let views = self.receive(consumer, &filter).await?;
            receives += 1;
            if views.is_empty() {
                empty += 1;
            }
            for view in views {
                let body = body_of(&view);
                let Some(sent_id) = id_by_body.get(&body) else {
                    return Err(format!("received a message this run did not send: {}", describe(&view)));
                };
                if seen.contains(&body) {
                    return Err(format!(
                        "received {body} twice before its {} s invisible duration ran out: {}",
                        INVISIBLE.as_secs(),
                        describe(&view)
                    ));
                }
                if view.tag() != Some(TAG) {
                    return Err(format!("{body} came back with tag {:?}, expected {TAG}", view.tag()));
                }
                if view.message_id() != sent_id {
                    return Err(format!(
                        "{body} came back with message id {}, its send returned {sent_id}",
                        view.message_id()
                    ));
                }
                let key = format!("k{}", body.trim_start_matches("rust-"));
                if !view.keys().iter().any(|k| *k == key) {
                    return Err(format!("{body} came back with keys {:?}, expected {key}", view.keys()));
                }
                if view.delivery_attempt() != 1 {
                    return Err(format!(
                        "{body} came back with delivery attempt {} on its first delivery, expected 1",
                        view.delivery_attempt()
                    ));
                }
                consumer.ack(&view).await.map_err(|e| format!("acking {body}: {e}"))?;
                seen.insert(body);
            }
        }
        let took = began.elapsed();
        if seen.len() < TOTAL {
            let missing: Vec<&String> = id_by_body.keys().filter(|b| !seen.contains(*b)).collect();
            return Err(format!(
                "received {} of {TOTAL} messages in {} ms ({receives} receives, {empty} empty); missing {missing:?}",
                seen.len(),
                took.as_millis()
            ));
        }

        step("checking the acked messages stay gone");
        let quiet_began = Instant::now();
        let quiet_until = quiet_began + Duration::from_secs(4);
        let mut quiet_receives = 0_u32;
        while Instant::now() < quiet_until {
            let views = self.receive(consumer, &filter).await?;
            quiet_receives += 1;
            if let Some(view) = views.first() {
                return Err(format!(
                    "a receive after all {TOTAL} acks returned {} message(s), first {}",
                    views.len(),
                    describe(view)
                ));
            }
        }
        Ok(format!(
            "{TOTAL} messages sent, each send returning a message id; all {TOTAL} received through tag \
             filter {TAG} with their ids, keys k<i> and delivery attempt 1 in {} ms ({receives} receives, \
             {empty} empty) and acked; {quiet_receives} receive(s) over the next {} ms returned nothing",
            took.as_millis(),
            quiet_began.elapsed().as_millis()
        ))
    }

    /// One message with a delivery timestamp 3 s ahead: not received more than 0.5 s before
    /// that timestamp, received within 20 s of its send.
    async fn delay(&self, clients: &mut Clients) -> Result<String, String> {
        const BODY: &str = "rust-delay";
        let filter = FilterExpression::new(FilterType::Tag, TAG);
        self.start_consumer(clients).await?;
        self.start_producer(clients).await?;
        let (Some(producer), Some(consumer)) = (clients.producer.as_ref(), clients.consumer.as_ref()) else {
            return Err("the clients did not start".to_owned());
        };

        // The SDK sends whole seconds: round up so that the message is due at least 3 s out.
        let now_ms = epoch_ms();
        let due_s = (now_ms + 3_000 + 999) / 1_000;
        step(&format!("sending {BODY}, due at epoch second {due_s}"));
        let message = MessageBuilder::delay_message_builder(self.topic.as_str(), BODY.as_bytes().to_vec(), due_s)
            .set_tag(TAG)
            .set_keys(vec!["kdelay"])
            .build()
            .map_err(|e| format!("building {BODY}: {e}"))?;
        let receipt = producer.send(message).await.map_err(|e| format!("sending {BODY}: {e}"))?;
        let sent_at = Instant::now();
        let sent_ms = epoch_ms();
        if receipt.message_id().is_empty() {
            return Err(format!("the send of {BODY} returned no message id"));
        }
        let due_after_ms = due_s * 1_000 - sent_ms;

        step(&format!("waiting for {BODY} (due {due_after_ms} ms after its send)"));
        let until = self.deadline.min(sent_at + Duration::from_secs(20));
        let mut receives = 0_u32;
        while Instant::now() < until {
            let views = self.receive(consumer, &filter).await?;
            receives += 1;
            for view in views {
                let after = sent_at.elapsed();
                let body = body_of(&view);
                if body != BODY {
                    return Err(format!("received a message this run did not send: {}", describe(&view)));
                }
                // Against the due time itself, not the send's return: on a loaded machine the send
                // can take most of the 3 s, and an on-time delivery then looks early.
                let early_ms = due_s * 1_000 - epoch_ms();
                if early_ms > 500 {
                    return Err(format!(
                        "{BODY} was received {} ms after its send, {early_ms} ms before its delivery \
                         timestamp (at most 500 ms allowed)",
                        after.as_millis()
                    ));
                }
                if after > Duration::from_secs(20) {
                    return Err(format!(
                        "{BODY} was received {} ms after its send, due {due_after_ms} ms after it (within 20 s expected)",
                        after.as_millis()
                    ));
                }
                if view.message_id() != receipt.message_id() {
                    return Err(format!(
                        "{BODY} came back with message id {}, its send returned {}",
                        view.message_id(),
                        receipt.message_id()
                    ));
                }
                consumer.ack(&view).await.map_err(|e| format!("acking {BODY}: {e}"))?;
                let stamp = view
                    .delivery_timestamp()
                    .map_or_else(|| "none".to_owned(), |s| s.to_string());
                return Ok(format!(
                    "sent with delivery timestamp epoch second {due_s} ({due_after_ms} ms after the send \
                     returned); received {} ms after the send (no sooner than 500 ms before the timestamp, within 20 s) on \
                     receive {receives}, delivery timestamp on the message {stamp}; acked",
                    after.as_millis()
                ));
            }
        }
        Err(format!(
            "{BODY} (due {due_after_ms} ms after its send) not received within {} ms ({receives} receives)",
            sent_at.elapsed().as_millis()
        ))
    }

    // ------------------------------------------------------------------ clients

    fn client_option(&self) -> ClientOption {
        let mut option = ClientOption::default();
        option.set_access_url(self.endpoint.as_str());
        option.set_enable_tls(false);
        option.set_timeout(Duration::from_secs(3));
        option.set_long_polling_timeout(AWAIT);
        option
    }

    async fn start_consumer(&self, clients: &mut Clients) -> Result<(), String> {
        step(&format!("starting a simple consumer of {} in group {} at {}", self.topic, self.group, self.endpoint));
        let mut option = SimpleConsumerOption::default();
        option.set_consumer_group(self.group.as_str());
        option.set_topics(vec![self.topic.as_str()]);
        option.set_logging_format(LoggingFormat::Json);
        let mut consumer = self.in_log_dir("consumer", || SimpleConsumer::new(option, self.client_option()))?;
        consumer.start().await.map_err(|e| format!("starting the simple consumer: {e}"))?;
        clients.consumer = Some(consumer);
        Ok(())
    }

    async fn start_producer(&self, clients: &mut Clients) -> Result<(), String> {
        step(&format!("starting a producer for {} at {}", self.topic, self.endpoint));
        let mut option = ProducerOption::default();
        option.set_topics(vec![self.topic.as_str()]);
        option.set_logging_format(LoggingFormat::Json);
        let mut producer = self.in_log_dir("producer", || Producer::new(option, self.client_option()))?;
        producer.start().await.map_err(|e| format!("starting the producer: {e}"))?;
        clients.producer = Some(producer);
        Ok(())
    }

    /// Makes a client whose JSON log (always `logs/rocketmq_client.log` under the working
    /// directory) lands in a directory of its own under this run's log directory.
    fn in_log_dir<T>(&self, name: &str, make: impl FnOnce() -> Result<T, ClientError>) -> Result<T, String> {
        let dir = self.log_dir.join(name);
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        std::env::set_current_dir(&dir).map_err(|e| format!("entering {}: {e}", dir.display()))?;
        let made = make().map_err(|e| format!("creating the {name}: {e}"));
        let _ = std::env::set_current_dir(Path::new(&self.log_dir));
        made
    }

    /// One receive: up to `BATCH` messages, invisible for `INVISIBLE`, after a long poll of up
    /// to `AWAIT`. "Message not found" is an empty list.
    async fn receive(&self, consumer: &SimpleConsumer, filter: &FilterExpression) -> Result<Vec<MessageView>, String> {
        let call = consumer.receive_with(self.topic.as_str(), filter, BATCH, INVISIBLE);
        match tokio::time::timeout(AWAIT + RECEIVE_GRACE, call).await {
            Ok(Ok(views)) => Ok(views),
            Ok(Err(e)) if code_of(&e) == Some("MESSAGE_NOT_FOUND") => Ok(Vec::new()),
            Ok(Err(e)) => {
                let text = e.to_string();
                let lower = text.to_ascii_lowercase();
                let hint = if lower.contains("timeout expired") || lower.contains("deadline") || lower.contains("cancelled") {
                    format!(
                        " (this SDK sends long_polling_timeout {} s and makes the same {} s the call's \
                         grpc-timeout, so a long poll that finds nothing must be answered before then)",
                        AWAIT.as_secs(),
                        AWAIT.as_secs()
                    )
                } else {
                    String::new()
                };
                Err(format!("receive: {text}{hint}"))
            }
            Err(_) => Err(format!(
                "a receive with long_polling_timeout {} s had not returned after {} s",
                AWAIT.as_secs(),
                (AWAIT + RECEIVE_GRACE).as_secs()
            )),
        }
    }
}

/// Closes a client, waiting at most `CLOSE_LIMIT`; a failure only goes to stderr.
async fn close(what: &str, shutdown: impl std::future::Future<Output = Result<(), ClientError>>) {
    match tokio::time::timeout(CLOSE_LIMIT, shutdown).await {
        Ok(Ok(())) => info(&format!("{what} closed")),
        Ok(Err(e)) => info(&format!("closing the {what}: {e}")),
        Err(_) => info(&format!("closing the {what} took over {} s; left", CLOSE_LIMIT.as_secs())),
    }
}

/// The response code a server error carried, by its name (e.g. `MESSAGE_NOT_FOUND`).
fn code_of(e: &ClientError) -> Option<&str> {
    e.context().iter().find(|(k, _)| *k == "code").map(|(_, v)| v.as_str())
}

fn body_of(view: &MessageView) -> String {
    String::from_utf8_lossy(view.body()).into_owned()
}

fn describe(view: &MessageView) -> String {
    format!(
        "{{id {}, body {:?}, tag {:?}, keys {:?}, delivery attempt {}}}",
        view.message_id(),
        body_of(view),
        view.tag(),
        view.keys(),
        view.delivery_attempt()
    )
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
