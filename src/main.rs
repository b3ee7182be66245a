//! `petrel`: broker, name server, load generator, chaos harness and admin tool in one binary.

#![forbid(unsafe_code)]

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod controller;
mod limits;
mod scrape;
mod serve;

/// glibc's allocator was a tenth of the broker's CPU under load (its consolidation and free
/// lists); mimalloc's per-thread heaps make the many small allocations of request handling cheap.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "petrel", version, about = "A RocketMQ-compatible message broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker with an embedded name server (name server 9876, broker 10911, data in ./data).
    Serve(serve::ServeArgs),
    /// Run a standalone name server that RocketMQ brokers register with and clients ask for routes.
    Namesrv(NamesrvArgs),
    /// Run one member of a controller group (RocketMQ 5's controller mode): Raft-replicated
    /// masters, epochs and SyncStateSets, and elections when a master dies.
    Controller(controller::ControllerArgs),
    /// Generate load against any RocketMQ-protocol broker and report percentiles.
    #[command(subcommand)]
    Bench(Box<petrel_bench::BenchCommand>),
    /// Run a local cluster under fault injection and check that nothing acknowledged is lost.
    Chaos(Box<petrel_chaos::ChaosArgs>),
    /// Administrative commands (topics, groups, offsets).
    Admin,
    /// Decode a RocketMQ remoting frame given as hex, and print its header and body.
    Decode {
        /// The frame's bytes in hexadecimal (whitespace ignored).
        hex: String,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    if !matches!(cli.command, Command::Decode { .. }) {
        tracing_subscriber::fmt()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,openraft=warn".into()))
            .init();
    }
    match cli.command {
        Command::Decode { hex } => decode(&hex),
        Command::Serve(args) => serve::serve(args),
        Command::Namesrv(args) => namesrv(&args),
        Command::Controller(args) => controller::run(&args),
        Command::Bench(cmd) => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(petrel_bench::cli::execute(*cmd)).map_err(Into::into)
        }
        Command::Chaos(args) => return chaos(*args),
        Command::Admin => not_yet("admin", "the admin commands"),
    }
    .map(|()| ExitCode::SUCCESS)
}

/// `petrel chaos`: exit status 1 when an acknowledged message was lost or an ordered one
/// reordered, 2 when the run could not be made.
fn chaos(args: petrel_chaos::ChaosArgs) -> Result<ExitCode> {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let runtime = tokio::runtime::Runtime::new()?;
    match runtime.block_on(petrel_chaos::execute(args, command)) {
        Ok(true) => Ok(ExitCode::SUCCESS),
        Ok(false) => Ok(ExitCode::from(1)),
        Err(e) => {
            eprintln!("chaos: {e}");
            Ok(ExitCode::from(2))
        }
    }
}

#[derive(clap::Args, Debug)]
struct NamesrvArgs {
    /// Address to listen on (else `bindAddress:listenPort` of the config file: all interfaces and
    /// 9876 unless it says otherwise).
    #[arg(long)]
    listen: Option<String>,
    /// A RocketMQ-style namesrv.conf: `listenPort`, and with `enableControllerInNamesrv=true`
    /// the controller keys of `petrel controller`, which then runs in this process too.
    #[arg(short = 'c', long = "config")]
    config: Option<std::path::PathBuf>,
    /// Any namesrv.conf key, e.g. `--set enableControllerInNamesrv=true`; may repeat.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

/// The name server's settings, and the controller's when it runs embedded.
struct NamesrvSettings {
    listen: String,
    controller: Option<petrel_controller::ControllerConfig>,
    access: petrel_namesrv::NamesrvAccess,
    tls: Option<std::sync::Arc<petrel_remoting::ServerTls>>,
}

/// `tls.server.mode`, `tls.server.certPath` and `tls.server.keyPath` of namesrv.conf.
fn namesrv_tls(pairs: &[(String, String)]) -> Result<Option<std::sync::Arc<petrel_remoting::ServerTls>>> {
    use petrel_broker::config::{ConfigValue, TlsMode};
    let mut mode = TlsMode::Disabled;
    let (mut cert, mut key) = (None, None);
    for (k, v) in pairs {
        match k.as_str() {
            "tls.server.mode" => {
                mode = TlsMode::parse(v.trim()).ok_or_else(|| anyhow::anyhow!("tls.server.mode: {v:?} is not {}", TlsMode::EXPECTED))?;
            }
            "tls.server.certPath" => cert = Some(std::path::PathBuf::from(v.trim())),
            "tls.server.keyPath" => key = Some(std::path::PathBuf::from(v.trim())),
            _ => {}
        }
    }
    petrel_remoting::ServerTls::load(mode, cert.as_deref(), key.as_deref()).map_err(|e| anyhow::anyhow!("TLS: {e}"))
}

/// The name server's own users (the brokers' inner credentials and an initial super user) and
/// switches, from namesrv.conf's keys of the same names as broker.conf's.
fn namesrv_access(pairs: &[(String, String)]) -> Result<petrel_namesrv::NamesrvAccess> {
    use petrel_broker::access::{parse_credentials, parse_init_user};
    let store = petrel_auth::AuthStore::in_memory();
    let mut settings = petrel_auth::AuthSettings::default();
    let mut max_failures = 8u64;
    let flag = |key: &str, value: &str| -> Result<bool> {
        value
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{key}: {value:?} is not true or false"))
    };
    for (key, value) in pairs {
        match key.as_str() {
            "authenticationEnabled" => settings.authentication_enabled = flag(key, value)?,
            "authorizationEnabled" => settings.authorization_enabled = flag(key, value)?,
            "initAuthenticationUser" => {
                let (name, password) = parse_init_user(value).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
                store.ensure_super_user(&name, &password)?;
            }
            "innerClientAuthenticationCredentials" => {
                let c = parse_credentials(value).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
                store.ensure_super_user(&c.access_key, &c.secret_key)?;
            }
            "maxAuthenticationFailuresPerConnection" => {
                max_failures = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| anyhow::anyhow!("{key}: {value:?} is not a positive integer"))?;
            }
            _ => {}
        }
    }
    Ok(petrel_namesrv::NamesrvAccess {
        store: std::sync::Arc::new(store),
        settings,
        max_failures,
    })
}

/// namesrv.conf keys read by [`namesrv_access`].
const NAMESRV_ACCESS_KEYS: &[&str] = &[
    "authenticationEnabled",
    "authorizationEnabled",
    "initAuthenticationUser",
    "innerClientAuthenticationCredentials",
    "maxAuthenticationFailuresPerConnection",
    "tls.server.mode",
    "tls.server.certPath",
    "tls.server.keyPath",
];

fn namesrv_settings(args: &NamesrvArgs) -> Result<NamesrvSettings> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(path) = &args.config {
        let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        pairs.extend(java_properties::read(std::io::BufReader::new(file)).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?);
    }
    for kv in &args.set {
        let (k, v) = split_set(kv)?;
        pairs.push((k.to_owned(), v.to_owned()));
    }
    let (mut port, mut embed) = (9876u16, false);
    let mut bind = std::net::IpAddr::from([0, 0, 0, 0]);
    let mut controller = petrel_controller::ControllerConfig::default();
    for (key, value) in &pairs {
        match key.as_str() {
            "listenPort" => {
                port = value
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("listenPort: {value:?} is not a port"))?
            }
            "bindAddress" => {
                bind = value
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("bindAddress: {value:?} is not an IP address"))?;
            }
            "enableControllerInNamesrv" => {
                embed = value
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("enableControllerInNamesrv: {value:?} is not true or false"))?;
            }
            k if NAMESRV_ACCESS_KEYS.contains(&k) => {}
            _ => {
                if !controller.set(key, value)? {
                    tracing::warn!(key, "namesrv.conf key not used by Petrel; ignored");
                }
            }
        }
    }
    if embed {
        controller.validate().map_err(|e| anyhow::anyhow!(e))?;
    }
    let listen = args
        .listen
        .clone()
        .unwrap_or_else(|| std::net::SocketAddr::new(bind, port).to_string());
    Ok(NamesrvSettings {
        listen,
        controller: embed.then_some(controller),
        access: namesrv_access(&pairs)?,
        tls: namesrv_tls(&pairs)?,
    })
}

fn namesrv(args: &NamesrvArgs) -> Result<()> {
    use std::sync::Arc;

    use anyhow::Context;
    use petrel_namesrv::{NameServer, run_expiry};
    use petrel_remoting::{Server, ServerLimits};

    let settings = namesrv_settings(args)?;
    let limits = ServerLimits::default();
    limits::raise_open_file_limit(limits.max_connections);
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&settings.listen)
            .await
            .with_context(|| format!("listen on {}", settings.listen))?;
        let ns = Arc::new(NameServer::new());
        if settings.access.settings.any_enabled() {
            tracing::info!(
                authentication = settings.access.settings.authentication_enabled,
                authorization = settings.access.settings.authorization_enabled,
                "name server checks broker registrations and other writes"
            );
        }
        ns.set_access(settings.access);
        let server = Server::start_with_tls("namesrv", listener, ns.clone(), limits, settings.tls)?;
        tracing::info!(addr = %server.local_addr(), "name server listening");
        // RocketMQ's `enableControllerInNamesrv`: the controller shares the process, not the port.
        let controller = match settings.controller {
            Some(config) => Some(controller::Running::start(config).await?),
            None => None,
        };
        let expiry = tokio::spawn(run_expiry(ns));
        serve::shutdown_signal().await;
        tracing::info!("shutting down");
        expiry.abort();
        if let Some(c) = controller {
            c.stop().await;
        }
        server.drain().await;
        Ok(())
    })
}

/// One `--set KEY=VALUE` of any subcommand: the key trimmed, the value as given.
fn split_set(kv: &str) -> Result<(&str, &str)> {
    let Some((k, v)) = kv.split_once('=') else {
        bail!("--set {kv:?}: expected KEY=VALUE");
    };
    Ok((k.trim(), v))
}

fn not_yet(subcommand: &str, what: &str) -> Result<()> {
    bail!("petrel {subcommand}: not yet — {what} is not implemented in this version (see README.md, \"Status\")")
}

fn decode(hex: &str) -> Result<()> {
    let digits: String = hex.chars().filter(|c| !c.is_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        bail!("odd number of hex digits");
    }
    let bytes = (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()?;
    let Some((cmd, used)) = petrel_protocol::decode_frame(&bytes, usize::MAX >> 1)? else {
        bail!("incomplete frame: {} bytes given", bytes.len());
    };
    let kind = if cmd.is_response() { "response" } else { "request" };
    let name = if cmd.is_response() {
        petrel_protocol::response_code_name(cmd.code)
    } else {
        petrel_protocol::request_code_name(cmd.code)
    };
    println!(
        "{kind} {} {} ({used} bytes, {:?} header)",
        cmd.code,
        name.unwrap_or("?"),
        cmd.serialize_type
    );
    println!("header {}", cmd.encode_json_header());
    if !cmd.body.is_empty() {
        match std::str::from_utf8(&cmd.body) {
            Ok(text) => println!("body {text}"),
            Err(_) => println!("body {} bytes (binary)", cmd.body.len()),
        }
    }
    if used < bytes.len() {
        println!("({} bytes after the frame not decoded)", bytes.len() - used);
    }
    Ok(())
}
