//! The HTTP/1.1 server loop: per-connection limits that the router cannot set (the
//! size of a request head, how long a client may take to send it, how many connections
//! the process's file descriptors allow) and a graceful stop within a grace period.

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
/// Most header fields in one request. hyper refuses more with an empty 431 (it
/// writes that answer itself); fewer are checked by size, with errbook's message.
pub const MAX_HEADER_FIELDS: usize = 1000;
/// How long a client may take to send a request's head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once, at most; more wait in the kernel's backlog until one
/// closes. Each may buffer up to [`MAX_HEAD_BYTES`], so this bounds that memory too.
pub const MAX_CONNECTIONS: usize = 4096;
/// File descriptors kept free of connections: the index files, a reload reading every
/// entry, the index cache, standard streams.
const RESERVED_FDS: u64 = 256;
/// Fewest connections the cap allows, however low the descriptor limit.
const MIN_CONNECTIONS: usize = 16;

/// How the server treats connections.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// Connections open at once (see [`connection_cap`]).
    pub max_connections: usize,
    /// How long a stop waits for requests in flight before closing their connections.
    pub grace_period: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: MAX_CONNECTIONS,
            grace_period: Duration::from_secs(8),
        }
    }
}

/// Raises the soft limit on open files to the hard limit, and returns how many
/// connections fit under it with [`RESERVED_FDS`] to spare (at most
/// [`MAX_CONNECTIONS`]). A server at the common `ulimit -n 1024` would otherwise fail to
/// accept, and fail to reload, long before its connection cap.
pub fn connection_cap() -> usize {
    let Some(available) = raise_fd_limit() else {
        return MAX_CONNECTIONS;
    };
    let cap = available.saturating_sub(RESERVED_FDS);
    (cap.min(MAX_CONNECTIONS as u64) as usize).max(MIN_CONNECTIONS)
}

/// The soft limit on open files after raising it as far as allowed.
#[cfg(unix)]
fn raise_fd_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    #[allow(clippy::unnecessary_cast, reason = "rlim_t is not u64 on every target")]
    Some(limit.rlim_cur as u64)
}

#[cfg(not(unix))]
fn raise_fd_limit() -> Option<u64> {
    None
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting,
/// lets the requests in flight finish (up to the grace period) and returns. Idle
/// keep-alive connections are closed at once.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADER_FIELDS);
    let slots = Arc::new(Semaphore::new(config.max_connections));
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
        () = tokio::time::sleep(config.grace_period) => {
            tracing::warn!(
                "requests still running after the grace period of {:?}; closing them",
                config.grace_period
            );
        }
    }
}

/// The next connection, once fewer than the cap are open.
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
