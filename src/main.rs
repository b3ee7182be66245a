//! `petrel`: broker, name server, load generator, chaos harness and admin tool in one binary.

#![forbid(unsafe_code)]

use anyhow::{Context, Result, bail};
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

/// namesrv.conf as RocketMQ's name server reads it: its own keys, and with
/// `enableControllerInNamesrv` the embedded controller's keys in the same file.
struct NamesrvFile {
    namesrv: petrel_namesrv::NamesrvConfig,
    controller: petrel_controller::ControllerConfig,
}

impl petrel_kit::config::Table for NamesrvFile {
    const FILE: &'static str = "namesrv.conf";
    fn set(&mut self, key: &str, value: &str) -> Result<bool, petrel_kit::config::ConfigError> {
        Ok(self.namesrv.set_from_table(key, value)? || self.controller.set(key, value)?)
    }
    fn known_to_rocketmq(key: &str) -> bool {
        petrel_namesrv::config_known_to_rocketmq(key)
    }
}

fn namesrv_settings(args: &NamesrvArgs) -> Result<NamesrvSettings> {
    let mut file = NamesrvFile {
        namesrv: petrel_namesrv::NamesrvConfig::default(),
        controller: petrel_controller::ControllerConfig::default(),
    };
    let mut ignored = Vec::new();
    if let Some(path) = &args.config {
        ignored.extend(petrel_kit::config::apply_file(&mut file, path)?);
    }
    for kv in &args.set {
        ignored.extend(petrel_kit::config::apply_set(&mut file, kv)?);
    }
    for key in ignored {
        tracing::warn!(key, "a RocketMQ namesrv.conf key Petrel does not use; ignored");
    }
    let embed = file.namesrv.enable_controller_in_namesrv;
    if embed {
        file.controller.validate()?;
    }
    let listen = args.listen.clone().unwrap_or_else(|| file.namesrv.listen_address().to_string());
    Ok(NamesrvSettings {
        listen,
        controller: embed.then_some(file.controller),
        access: file.namesrv.access()?,
        tls: file.namesrv.server_tls().context("TLS")?,
    })
}

fn namesrv(args: &NamesrvArgs) -> Result<()> {
    use std::sync::Arc;

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
