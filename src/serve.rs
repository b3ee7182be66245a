//! `petrel serve`: the broker, with the name server in the same process unless external name
//! servers are given. SIGTERM/SIGINT stops accepting, drains connections (held pulls answer at
//! once, pending SYNC_FLUSH sends finish), unregisters, flushes, checkpoints and exits 0.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use petrel_broker::metrics::Sources;
use petrel_broker::{Broker, BrokerConfig, MetricsExporter, NameServers, RocketMqFront};
use petrel_namesrv::{NameServer, NamesrvAccess, run_expiry};
use petrel_remoting::{Server, ServerLimits, ServerTls};
use tokio::task::JoinSet;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// A RocketMQ-style broker.conf (Java properties); flags below override it.
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
    /// A controller.conf (the file `petrel controller -c` takes): a member of a controller
    /// group runs in this process too, as RocketMQ's `enableControllerInNamesrv` runs one in the
    /// name server.
    #[arg(long, value_name = "PATH")]
    pub controller_config: Option<PathBuf>,
    /// For power-failure tests only: journal every store file's synced point here, so that a
    /// test can rebuild the files as a power failure would leave them after killing this
    /// process (`petrel_store::power_loss`). Costs a lock per write.
    #[arg(long, hide = true, value_name = "PATH")]
    pub power_loss_journal: Option<PathBuf>,
}

pub fn config_from(args: &ServeArgs) -> Result<BrokerConfig> {
    let mut config = BrokerConfig::default();
    if let Some(path) = &args.config {
        for key in config.apply_file(path)? {
            tracing::warn!(key, "a RocketMQ broker.conf key Petrel does not use; ignored");
        }
    }
    for kv in &args.set {
        if let Some(key) = petrel_kit::config::apply_set(&mut config, kv)? {
            tracing::warn!(key, "a RocketMQ broker.conf key Petrel does not use; ignored");
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
    let controller = args
        .controller_config
        .as_ref()
        .map(|path| {
            crate::controller::config_from(&crate::controller::ControllerArgs {
                config: Some(path.clone()),
                set: Vec::new(),
            })
        })
        .transpose()?;
    if let Some(journal) = &args.power_loss_journal {
        petrel_store::power_loss::record_syncs_to(journal).with_context(|| format!("open the power-loss journal {}", journal.display()))?;
        tracing::warn!(journal = %journal.display(), "journalling every sync for a power-failure test");
    }
    crate::limits::raise_open_file_limit(config.max_connections);
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(async {
        // Before the broker: a broker in controller mode may name this very process.
        let controller = match controller {
            Some(c) => Some(crate::controller::Running::start(c).await?),
            None => None,
        };
        let result = run(config, args.namesrv_listen).await;
        if let Some(c) = controller {
            c.stop().await;
        }
        result
    })
}

/// The embedded name server, with its port bound but not yet served: the broker opens first, so
/// that the name server checks writes against the broker's users from its first request.
async fn embedded_name_server(listen: &str) -> Result<(Arc<NameServer>, tokio::net::TcpListener)> {
    let ns = Arc::new(NameServer::new());
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("name server: listen on {listen}"))?;
    Ok((ns, listener))
}

/// Serves the embedded name server, its writes checked as the broker's `authenticationEnabled`
/// and `authorizationEnabled` say, and starts its expiry chore.
fn serve_name_server(
    ns: &Arc<NameServer>,
    listener: tokio::net::TcpListener,
    broker: &Broker,
    (tls, broker_limits): (Option<Arc<ServerTls>>, &ServerLimits),
    tasks: &mut JoinSet<()>,
) -> Result<Server> {
    // The broker's unfinished-frame budget, shared; the name server's default connection cap.
    let limits = ServerLimits {
        connection: broker_limits.connection.clone(),
        partial_frames: broker_limits.partial_frames.clone(),
        ..ServerLimits::default()
    };
    ns.set_access(NamesrvAccess {
        store: broker.access.store.clone(),
        settings: broker.access.settings.clone(),
        max_failures: broker.config.max_authentication_failures_per_connection,
    });
    let server = Server::start_with_tls("namesrv", listener, ns.clone(), limits, tls)?;
    tracing::info!(addr = %server.local_addr(), "name server listening");
    tasks.spawn(run_expiry(ns.clone()));
    Ok(server)
}

async fn run(config: BrokerConfig, namesrv_listen: String) -> Result<()> {
    let mut tasks = JoinSet::new();
    let mut embedded = None;
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
            let (ns, listener) = embedded_name_server(&namesrv_listen).await?;
            embedded = Some((ns.clone(), listener));
            NameServers::Embedded(ns)
        }
    };
    let listen = SocketAddr::new(config.bind_address, config.listen_port);
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
    let tls = broker.config.server_tls().map_err(|e| anyhow::anyhow!("TLS: {e}"))?;
    // One unfinished-frame budget for every port.
    let limits = broker.config.server_limits();
    let name_server = match embedded {
        Some((ns, listener)) => Some(serve_name_server(&ns, listener, &broker, (tls.clone(), &limits), &mut tasks)?),
        None => None,
    };
    broker.start(&mut tasks).await;
    let server = Server::start_with_tls(
        "broker",
        listener,
        Arc::new(RocketMqFront(broker.clone())),
        limits.clone(),
        tls.clone(),
    )?;
    let grpc_server = start_grpc(&broker, tls.as_deref()).await?;
    let fast_server = start_fast_channel(&broker, tls, limits).await?;
    if broker.config.metrics_exporter_type == MetricsExporter::Prom {
        let mut servers = vec![("broker", server.stats())];
        servers.extend(name_server.as_ref().map(|s| ("namesrv", s.stats())));
        start_metrics(&broker, servers, &mut tasks).await?;
    }
    tracing::info!(
        "The broker[{}, {}] boot success. name server is {}; {}",
        broker.config.broker_name,
        broker.store_host,
        if name_server.is_some() {
            namesrv_listen.clone()
        } else {
            broker.registrar.describe()
        },
        summary
    );
    shutdown_signal().await;
    tracing::info!("shutting down: draining connections, then unregistering, flushing, writing the checkpoint");
    broker.long_poll.close();
    if let Some(fast) = fast_server {
        fast.drain().await;
    }
    server.drain().await;
    if let Some(grpc) = grpc_server {
        grpc.drain().await;
    }
    tasks.abort_all();
    broker.shutdown().await.context("clean shutdown")?;
    if let Some(ns) = name_server {
        ns.drain().await;
    }
    tracing::info!("shutdown complete");
    Ok(())
}

/// RocketMQ's "VIP channel": the same requests on `listenPort - 2` (or `fastListenPort`).
/// RocketMQ's slaves copy a master's topic table over it. Best effort on the default port.
async fn start_fast_channel(broker: &Arc<Broker>, tls: Option<Arc<ServerTls>>, limits: ServerLimits) -> Result<Option<Server>> {
    let c = &broker.config;
    let (port, required) = match c.fast_listen_port {
        Some(0) => return Ok(None),
        Some(p) => (p, true),
        None if c.listen_port > 2 => (c.listen_port - 2, false),
        None => return Ok(None),
    };
    let listen = SocketAddr::new(c.bind_address, port);
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) if !required => {
            tracing::warn!(%listen, error = %e, "no fast channel (RocketMQ slaves copy topics over it); set fastListenPort to choose its port");
            return Ok(None);
        }
        Err(e) => return Err(e).with_context(|| format!("fast channel: listen on {listen}")),
    };
    Ok(Some(Server::start_with_tls(
        "broker-fast",
        listener,
        Arc::new(RocketMqFront(broker.clone())),
        limits,
        tls,
    )?))
}

/// RocketMQ 5's gRPC protocol on `grpcServerPort` (unless 0), over the same services, with the
/// remoting ports' TLS (certificate and `tls.server.mode`).
async fn start_grpc(broker: &Arc<Broker>, tls: Option<&ServerTls>) -> Result<Option<petrel_grpc::GrpcServer>> {
    let c = &broker.config;
    let (port, required) = match c.grpc_server_port {
        Some(0) => return Ok(None),
        Some(p) => (p, true),
        None => (petrel_grpc::DEFAULT_PORT, false),
    };
    let listen = SocketAddr::new(c.bind_address, port);
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) if !required => {
            tracing::warn!(%listen, error = %e, "no gRPC port (RocketMQ 5 SDKs connect there); set grpcServerPort to choose one");
            return Ok(None);
        }
        Err(e) => return Err(e).with_context(|| format!("gRPC: listen on {listen} (grpcServerPort; 0 turns gRPC off)")),
    };
    let port = listener.local_addr()?.port();
    let front = petrel_grpc::GrpcFront::new(broker.clone(), port, c.grpc_max_clients);
    let limits = petrel_grpc::GrpcLimits {
        max_streams_per_connection: u32::try_from(c.grpc_max_concurrent_streams).unwrap_or(u32::MAX),
        max_message_bytes: c.max_message_size_bytes,
    };
    let tls = tls.map(|t| petrel_grpc::GrpcTls::new(&t.rustls_config(), t.mode() == petrel_remoting::TlsMode::Permissive));
    let mode = match &tls {
        None => "plain text",
        Some(_) if c.tls_server_mode == petrel_remoting::TlsMode::Permissive => "TLS or plain text",
        Some(_) => "TLS only",
    };
    let server = petrel_grpc::GrpcServer::start(listener, front, limits, tls)?;
    tracing::info!(addr = %server.local_addr(), mode, "gRPC (RocketMQ 5 SDKs) listening");
    Ok(Some(server))
}

async fn start_metrics(
    broker: &Arc<Broker>,
    servers: Vec<(&'static str, Arc<petrel_remoting::ServerStats>)>,
    tasks: &mut JoinSet<()>,
) -> Result<()> {
    let addr = SocketAddr::new(broker.config.metrics_prom_exporter_host, broker.config.metrics_prom_exporter_port);
    let metrics = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("metrics: listen on {addr}"))?;
    tracing::info!("Prometheus metrics at http://{}/metrics", metrics.local_addr()?);
    let sources = Arc::new(Sources {
        broker: broker.clone(),
        servers,
    });
    let render: crate::scrape::Render = Arc::new(move || petrel_broker::metrics::render(&sources));
    tasks.spawn(async move {
        if let Err(e) = crate::scrape::serve(metrics, render).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    });
    Ok(())
}

/// SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "cannot install the SIGTERM handler; only SIGINT stops the process");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
