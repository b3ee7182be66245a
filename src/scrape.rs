//! The Prometheus scrape endpoint of every `petrel` process that exports metrics
//! (`metricsExporterType=PROM`): `GET /metrics`, answered with what the process's renderer
//! writes (the broker's or the controller's), over a minimal HTTP/1.1 responder.
//!
//! Must never: keep a scraper's connection open (one answer, then close), or serve more than
//! `MAX_CONCURRENT_SCRAPES` at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Longest request head read from a scraper.
const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;
/// A scraper that sends nothing for this long is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes served at once; more wait in the listen backlog.
const MAX_CONCURRENT_SCRAPES: usize = 16;

/// Writes one scrape's body.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves scrapes until the task is dropped.
pub async fn serve(listener: TcpListener, render: Render) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_SCRAPES));
    loop {
        let (stream, _) = listener.accept().await?;
        let permit = slots.clone().acquire_owned().await.expect("semaphore stays open");
        let render = Arc::clone(&render);
        tokio::spawn(async move {
            if let Err(e) = answer_scrape(stream, render).await {
                tracing::debug!(error = %e, "metrics scrape failed");
            }
            drop(permit);
        });
    }
}

async fn answer_scrape(mut stream: TcpStream, render: Render) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = match tokio::time::timeout(READ_TIMEOUT, stream.read(&mut buf)).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        };
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST_HEAD_BYTES {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                PLAIN,
                "request head too large\n",
            )
            .await;
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(path)) if path == "/metrics" || path.starts_with("/metrics?") => {
            // Off the workers: the lag figures read store timestamps, which may touch the disk.
            let body = tokio::task::spawn_blocking(move || render()).await.map_err(std::io::Error::other)?;
            respond(&mut stream, "200 OK", OPENMETRICS, &body).await
        }
        (Some("GET"), Some(_)) => respond(&mut stream, "404 Not Found", PLAIN, "only /metrics is served here\n").await,
        _ => respond(&mut stream, "405 Method Not Allowed", PLAIN, "GET /metrics\n").await,
    }
}

/// What both processes' scrapes are: `prometheus-client`'s OpenMetrics text (with `# EOF`).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PLAIN: &str = "text/plain; charset=utf-8";

async fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
