//! The HTTP/1.1 server loop: per-connection limits that the router cannot set (the
//! size of a request head, how long a client may take to send it) and a graceful
//! stop that lets every request already received finish.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Largest request head (request line and headers) a connection buffers. A longer
/// one gets 431 (414 for a long request line) from hyper before errbook sees it.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long a client may take to send a request's head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop waits for requests in flight before closing their connections.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections open at once; more wait in the kernel's backlog until one closes.
/// Each may buffer up to [`MAX_HEAD_BYTES`], so this bounds that memory too.
pub const MAX_CONNECTIONS: usize = 4096;

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting,
/// lets the requests in flight finish (up to [`DRAIN_TIMEOUT`]) and returns.
/// Idle keep-alive connections are closed at once.
pub async fn serve(listener: TcpListener, router: Router, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            accepted = accept(&listener, &slots) => accepted,
            () = &mut shutdown => break,
        };
        let (stream, slot) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors, or a connection reset before it was
                // accepted: neither stops the server. Pause so a full table can drain.
                tracing::warn!(error = %err, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    let open = graceful.count();
    tracing::info!(open, "stopped accepting; answering the requests in flight");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("every request answered"),
        () = tokio::time::sleep(DRAIN_TIMEOUT) => {
            tracing::warn!("requests still running after {DRAIN_TIMEOUT:?}; closing them");
        }
    }
}

/// The next connection, once fewer than [`MAX_CONNECTIONS`] are open.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> std::io::Result<(TcpStream, OwnedSemaphorePermit)> {
    let slot = slots
        .clone()
        .acquire_owned()
        .await
        .map_err(std::io::Error::other)?;
    let (stream, _) = listener.accept().await?;
    Ok((stream, slot))
}
