//! `petrel`: broker, name server, load generator, chaos harness and admin tool in one binary.

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod controller;
mod limits;
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
    Namesrv {
        /// Address to listen on.
        #[arg(long, default_value = "0.0.0.0:9876")]
        listen: String,
    },
    /// Run one member of a controller group (RocketMQ 5's controller mode): Raft-replicated
    /// masters, epochs and SyncStateSets, and elections when a master dies.
    Controller(controller::ControllerArgs),
    /// Generate load against any RocketMQ-protocol broker and report percentiles.
    #[command(subcommand)]
    Bench(Box<petrel_bench::BenchCommand>),
    /// Run a local cluster under fault injection and check that nothing acknowledged is lost.
    Chaos,
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
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    if !matches!(cli.command, Command::Decode { .. }) {
        tracing_subscriber::fmt()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,openraft=warn".into()))
            .init();
    }
    match cli.command {
        Command::Decode { hex } => decode(&hex),
        Command::Serve(args) => serve::serve(args),
        Command::Namesrv { listen } => namesrv(&listen),
        Command::Controller(args) => controller::run(&args),
        Command::Bench(cmd) => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(petrel_bench::cli::execute(*cmd)).map_err(Into::into)
        }
        Command::Chaos => not_yet("chaos", "the chaos harness"),
        Command::Admin => not_yet("admin", "the admin commands"),
    }
}

fn namesrv(listen: &str) -> Result<()> {
    use std::sync::Arc;

    use anyhow::Context;
    use petrel_namesrv::{NameServer, run_expiry};
    use petrel_remoting::{Server, ServerLimits};

    let limits = ServerLimits::default();
    limits::raise_open_file_limit(limits.max_connections);
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listen on {listen}"))?;
        let ns = Arc::new(NameServer::new());
        let server = Server::start("namesrv", listener, ns.clone(), limits)?;
        tracing::info!(addr = %server.local_addr(), "name server listening");
        let expiry = tokio::spawn(run_expiry(ns));
        serve::shutdown_signal().await;
        tracing::info!("shutting down");
        expiry.abort();
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
