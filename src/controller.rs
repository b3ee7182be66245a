//! `petrel controller`: one member of a controller group (RocketMQ 5's controller mode). It
//! listens on its own peer address for the other controllers' Raft messages and for brokers
//! and mqadmin, forms the group with its peers on first start, and, while it leads, elects a
//! new master for any broker set whose master stopped heartbeating.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use petrel_controller::{Controller, ControllerConfig, ControllerHandler, ControllerNode, TcpNetwork, scan_for_dead_masters};
use petrel_remoting::{Server, ServerLimits};

#[derive(clap::Args, Debug)]
pub struct ControllerArgs {
    /// A RocketMQ-style controller.conf (Java properties); `--set` overrides it.
    #[arg(short = 'c', long = "config")]
    pub config: Option<PathBuf>,
    /// Any controller.conf key, e.g. `--set controllerDLegerSelfId=n1`; may repeat.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Applies `--set KEY=VALUE` pairs to `config`.
fn apply_sets(config: &mut ControllerConfig, sets: &[String]) -> Result<()> {
    for kv in sets {
        if let Some(key) = petrel_kit::config::apply_set(config, kv)? {
            tracing::warn!(key, "a RocketMQ controller.conf key Petrel does not use; ignored");
        }
    }
    Ok(())
}

/// A controller.conf (and `--set`s) as a validated configuration.
///
/// # Errors
/// An unreadable file, a bad value, or an inconsistent configuration.
pub fn config_from(args: &ControllerArgs) -> Result<ControllerConfig> {
    let mut config = ControllerConfig::default();
    if let Some(path) = &args.config {
        for key in config.apply_file(path)? {
            tracing::warn!(key, "a RocketMQ controller.conf key Petrel does not use; ignored");
        }
    }
    apply_sets(&mut config, &args.set)?;
    config.validate()?;
    Ok(config)
}

pub fn run(args: &ControllerArgs) -> Result<()> {
    let config = config_from(args)?;
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(async {
        let running = Running::start(config).await?;
        crate::serve::shutdown_signal().await;
        tracing::info!("shutting down");
        running.stop().await;
        Ok(())
    })
}

/// A controller serving on its peer address, until [`Running::stop`].
pub struct Running {
    node: ControllerNode,
    server: Server,
    scan: tokio::task::JoinHandle<()>,
    metrics: Option<tokio::task::JoinHandle<()>>,
}

/// Serves the controller's metrics at `metricsPromExporterHost:metricsPromExporterPort`.
async fn start_metrics(config: &ControllerConfig, controller: &Arc<Controller>) -> Result<tokio::task::JoinHandle<()>> {
    let addr = std::net::SocketAddr::new(config.metrics_prom_exporter_host, config.metrics_prom_exporter_port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("metrics: listen on {addr}"))?;
    tracing::info!("Prometheus metrics at http://{}/metrics", listener.local_addr()?);
    let controller = Arc::clone(controller);
    let render: crate::scrape::Render = Arc::new(move || petrel_controller::render_metrics(&controller));
    Ok(tokio::spawn(async move {
        if let Err(e) = crate::scrape::serve(listener, render).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    }))
}

impl Running {
    /// Opens the Raft files, listens, joins or forms the group and starts the dead-master scan.
    pub async fn start(config: ControllerConfig) -> Result<Running> {
        let listen = config
            .listen_address()
            .context("this controller's address (its peer entry with a port)")?;
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("listen on {listen}"))?;
        let (server_tls, client_tls) = config.tls().map_err(|e| anyhow::anyhow!("TLS: {e}"))?;
        let node = ControllerNode::start(
            config.self_id.0,
            &config.store_path,
            config.timing(),
            TcpNetwork::new(config.raft_secret(), client_tls),
        )
        .await
        .with_context(|| format!("open the controller's Raft files in {}", config.store_path.display()))?;
        let controller = Controller::new(node.clone(), config.clone());
        let server = Server::start_with_tls(
            "controller",
            listener,
            Arc::new(ControllerHandler(Arc::clone(&controller))),
            ServerLimits::default(),
            server_tls,
        )?;
        tracing::info!(addr = %server.local_addr(), id = config.self_id.0, group = %config.group, "controller listening");
        // Every member proposes the same initial membership; Raft keeps one, and a member that
        // has state already ignores it.
        let members: BTreeMap<u64, String> = config.peers.0.iter().map(|(id, (_, addr))| (*id, addr.clone())).collect();
        if let Err(e) = node.initialize(members).await {
            tracing::warn!(error = %e, "could not form the controller group");
        }
        let metrics = if config.metrics_prom() {
            Some(start_metrics(&config, &controller).await?)
        } else {
            None
        };
        let scan = tokio::spawn(scan_for_dead_masters(controller));
        Ok(Running {
            node,
            server,
            scan,
            metrics,
        })
    }

    /// Stops serving and shuts the Raft node down.
    pub async fn stop(self) {
        self.scan.abort();
        if let Some(metrics) = self.metrics {
            metrics.abort();
        }
        self.server.drain().await;
        self.node.shutdown().await;
    }
}
