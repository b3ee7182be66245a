//! `petrel serve`: the broker, with the name server in the same process unless external name
//! servers are given; SIGTERM/SIGINT flushes, checkpoints and exits 0.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use petrel_broker::namesrv::{BROKER_EXPIRY, NameServer};
use petrel_broker::{Broker, BrokerConfig, BrokerHandler, NameServers};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// A RocketMQ-style broker.conf (key=value); flags below override it.
    #[arg(short = 'c', long = "config")]
    pub config: Option<PathBuf>,
    /// External name servers, `host:port;host:port`; without it the name server runs in this
    /// process.
    #[arg(long)]
    pub namesrv_addr: Option<String>,
    /// Where the embedded name server listens.
    #[arg(long, default_value = "0.0.0.0:9876")]
    pub namesrv_listen: String,
    /// The broker's port (broker.conf `listenPort`).
    #[arg(long)]
    pub listen_port: Option<u16>,
    /// Data directory (broker.conf `storePathRootDir`).
    #[arg(long)]
    pub store_dir: Option<PathBuf>,
    /// Address advertised to clients (broker.conf `brokerIP1`).
    #[arg(long)]
    pub broker_ip: Option<IpAddr>,
    /// Any broker.conf key, e.g. `--set flushDiskType=SYNC_FLUSH`; may repeat.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

pub fn config_from(args: &ServeArgs) -> Result<BrokerConfig> {
    let mut config = BrokerConfig::default();
    if let Some(path) = &args.config {
        for key in config.apply_file(path)? {
            tracing::warn!(key, "broker.conf key not used by Petrel; ignored");
        }
    }
    for kv in &args.set {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--set {kv:?}: expected KEY=VALUE");
        };
        if !config.set(k.trim(), v)? {
            bail!("--set {k}: unknown key (known: {})", petrel_broker::config::KNOWN_KEYS.join(", "));
        }
    }
    if let Some(a) = &args.namesrv_addr {
        config.namesrv_addr = Some(a.clone());
    }
    if let Some(p) = args.listen_port {
        config.listen_port = p;
    }
    if let Some(d) = &args.store_dir {
        config.store_path_root_dir = d.clone();
    }
    if let Some(ip) = args.broker_ip {
        config.broker_ip1 = Some(ip);
    }
    Ok(config)
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let config = config_from(&args)?;
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(run(config, args.namesrv_listen))
}

async fn run(config: BrokerConfig, namesrv_listen: String) -> Result<()> {
    let max_frame_bytes = config.max_frame_bytes;
    let mut tasks = tokio::task::JoinSet::new();
    let name_servers = match config.namesrv_addr.as_deref() {
        Some(addrs) => NameServers::External(
            addrs
                .split(';')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        None => {
            let ns = Arc::new(NameServer::new());
            let listener = tokio::net::TcpListener::bind(&namesrv_listen)
                .await
                .with_context(|| format!("name server: listen on {namesrv_listen}"))?;
            tracing::info!(addr = %listener.local_addr()?, "name server listening");
            let expiring = ns.clone();
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(10));
                loop {
                    tick.tick().await;
                    for addr in expiring.expire_brokers(BROKER_EXPIRY) {
                        tracing::warn!(%addr, "broker expired: no registration for 120 s");
                    }
                }
            });
            let served = ns.clone();
            tasks.spawn(async move {
                if let Err(e) = petrel_broker::server::serve(listener, served, max_frame_bytes).await {
                    tracing::error!(error = %e, "name server stopped");
                }
            });
            NameServers::Embedded(ns)
        }
    };
    let listen: SocketAddr = SocketAddr::from(([0, 0, 0, 0], config.listen_port));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("broker: listen on {listen}"))?;
    let summary = format!(
        "data {}, {:?} flush, put lock {}",
        config.store_path_root_dir.display(),
        config.flush_disk_type,
        config.put_message_lock
    );
    let opened = tokio::task::spawn_blocking(move || Broker::open(config, name_servers)).await?;
    let broker = opened.context("open the store")?;
    broker.register_all().await;
    tasks.spawn(broker.clone().run_background());
    if broker.config.metrics_prometheus {
        let addr = SocketAddr::new(broker.config.metrics_prom_exporter_host, broker.config.metrics_prom_exporter_port);
        let metrics = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("metrics: listen on {addr}"))?;
        tracing::info!("Prometheus metrics at http://{}/metrics", metrics.local_addr()?);
        let scraped = broker.clone();
        tasks.spawn(async move {
            if let Err(e) = petrel_broker::metrics::serve(metrics, scraped).await {
                tracing::error!(error = %e, "metrics endpoint stopped");
            }
        });
    }
    let handler = Arc::new(BrokerHandler(broker.clone()));
    tasks.spawn(async move {
        if let Err(e) = petrel_broker::server::serve(listener, handler, max_frame_bytes).await {
            tracing::error!(error = %e, "broker stopped");
        }
    });
    let name_server = match &broker.name_servers {
        NameServers::Embedded(_) => namesrv_listen.clone(),
        NameServers::External(a) => a.join(";"),
    };
    tracing::info!(
        "The broker[{}, {}] boot success. name server is {}; {}",
        broker.config.broker_name,
        broker.store_host,
        name_server,
        summary
    );
    shutdown_signal().await;
    tracing::info!("shutting down: unregistering, flushing, writing the checkpoint");
    tasks.abort_all();
    broker.shutdown().await.context("clean shutdown")?;
    tracing::info!("shutdown complete");
    Ok(())
}

/// SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
