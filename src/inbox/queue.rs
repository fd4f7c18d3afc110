//! Between answers and the store: a bounded queue and one writer task. An answer
//! only offers its write to the queue and goes on; when the queue is full (the store
//! slow or down) the write is dropped and counted. The writer opens the store (again
//! and again while it cannot), writes what is queued in batches of one transaction
//! each, and purges what is older than the retention.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::sync::mpsc;

use super::store::{Location, Store, Write};

/// Writes waiting at most; past it, writes are dropped.
pub const QUEUE: usize = 4096;
/// Writes at most per transaction.
const BATCH: usize = 256;
/// How long one transaction may take before the store counts as failing.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often old groups and feedback are purged.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
pub struct InboxOptions {
    pub location: Location,
    /// Keep pastes errbook could not answer (`--capture`).
    pub capture: bool,
    /// Days a group or feedback is kept after it was last seen.
    pub retention_days: u32,
}

impl InboxOptions {
    /// Unix seconds before which everything is purged, at `now`.
    pub fn cutoff(&self, now: i64) -> i64 {
        now - i64::from(self.retention_days) * 86_400
    }
}

/// How the store is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreState {
    /// Not open yet.
    Opening,
    Ok,
    /// Its last open or write failed; writes are dropped until one succeeds.
    Failing,
}

impl StoreState {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreState::Opening => "opening",
            StoreState::Ok => "ok",
            StoreState::Failing => "failing",
        }
    }
}

/// What `/healthz` and `/metrics` say of the store.
#[derive(Debug, Clone)]
pub struct StoreHealth {
    pub backend: &'static str,
    pub location: String,
    pub state: StoreState,
    /// Why the last open or write failed, while it is failing.
    pub error: Option<String>,
    pub capture: bool,
    pub queued: u64,
    pub written: u64,
    pub dropped: u64,
}

/// The inbox as the server holds it: cheap to clone.
#[derive(Clone, Debug)]
pub struct Inbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    options: InboxOptions,
    queue: mpsc::Sender<Write>,
    store: ArcSwapOption<Store>,
    status: Mutex<(StoreState, Option<String>)>,
    written: AtomicU64,
    dropped: AtomicU64,
}

impl Inbox {
    /// Starts the writer on the current Tokio runtime; the store opens in the
    /// background, so a store that is down never delays the server.
    pub fn start(options: InboxOptions) -> Inbox {
        Inbox::with_queue(options, QUEUE)
    }

    pub fn with_queue(options: InboxOptions, capacity: usize) -> Inbox {
        let (queue, writes) = mpsc::channel(capacity.max(1));
        let inbox = Inbox {
            inner: Arc::new(Inner {
                options,
                queue,
                store: ArcSwapOption::empty(),
                status: Mutex::new((StoreState::Opening, None)),
                written: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            }),
        };
        tokio::spawn(writer(Arc::downgrade(&inbox.inner), writes));
        inbox
    }

    pub fn capture(&self) -> bool {
        self.inner.options.capture
    }

    pub fn retention_days(&self) -> u32 {
        self.inner.options.retention_days
    }

    /// Offers `write` to the queue; `false` when it was dropped (the queue full).
    pub fn keep(&self, write: Write) -> bool {
        match self.inner.queue.try_send(write) {
            Ok(()) => true,
            Err(_) => {
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// The store, to read from, once it is open.
    pub fn store(&self) -> Option<Arc<Store>> {
        self.inner.store.load_full()
    }

    pub fn health(&self) -> StoreHealth {
        let (state, error) = self
            .inner
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let queue = &self.inner.queue;
        StoreHealth {
            backend: self.inner.options.location.backend(),
            location: self.inner.options.location.describe(),
            state,
            error,
            capture: self.capture(),
            queued: (queue.max_capacity() - queue.capacity()) as u64,
            written: self.inner.written.load(Ordering::Relaxed),
            dropped: self.inner.dropped.load(Ordering::Relaxed),
        }
    }

    /// Waits until the queue is empty, or `within` has passed (a stopping server
    /// writes what it holds).
    pub async fn flush(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while self.health().queued > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.health().queued > 0 {
            tracing::warn!(
                left = self.health().queued,
                "stopping with inbox writes not yet stored"
            );
        }
    }
}

impl Inner {
    fn set(&self, state: StoreState, error: Option<String>) {
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if state == StoreState::Failing && status.0 != StoreState::Failing {
            tracing::error!(
                error = error.as_deref().unwrap_or(""),
                "the inbox store fails"
            );
        } else if state == StoreState::Ok && status.0 == StoreState::Failing {
            tracing::info!("the inbox store works again");
        }
        *status = (state, error);
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Opens the store, then writes what comes until every sender is gone.
async fn writer(inbox: std::sync::Weak<Inner>, mut writes: mpsc::Receiver<Write>) {
    let Some(options) = inbox.upgrade().map(|i| i.options.clone()) else {
        return;
    };
    let mut backoff = Duration::from_millis(250);
    let store = loop {
        match Store::open(&options.location).await {
            Ok(store) => break Arc::new(store),
            Err(err) => {
                let Some(inner) = inbox.upgrade() else { return };
                inner.set(StoreState::Failing, Some(err.to_string()));
                drop(inner);
                // Writes that arrive meanwhile wait in the queue, up to its size.
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    };
    match inbox.upgrade() {
        Some(inner) => {
            inner.store.store(Some(store.clone()));
            inner.set(StoreState::Ok, None);
            tracing::info!(
                store = %options.location.describe(),
                capture = options.capture,
                retention_days = options.retention_days,
                "inbox store open"
            );
        }
        None => return,
    }
    let mut next_purge = tokio::time::Instant::now();
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            got = writes.recv_many(&mut batch, BATCH) => {
                if got == 0 {
                    break;
                }
            }
            () = tokio::time::sleep_until(next_purge) => {
                next_purge += PURGE_EVERY;
                match store.purge(options.cutoff(now())).await {
                    Ok(purged) if purged.groups + purged.feedback > 0 => tracing::info!(
                        groups = purged.groups,
                        feedback = purged.feedback,
                        "purged the inbox past its retention"
                    ),
                    Ok(_) => {}
                    Err(err) => tracing::warn!(error = %err, "purging the inbox failed"),
                }
                continue;
            }
        }
        let result = tokio::time::timeout(WRITE_TIMEOUT, store.write(&batch)).await;
        let Some(inner) = inbox.upgrade() else { break };
        match result {
            Ok(Ok(())) => {
                inner
                    .written
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                inner.set(StoreState::Ok, None);
                backoff = Duration::from_millis(250);
            }
            failed => {
                let error = match failed {
                    Ok(Err(err)) => err.to_string(),
                    _ => format!("a write took over {} s", WRITE_TIMEOUT.as_secs()),
                };
                inner
                    .dropped
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                inner.set(StoreState::Failing, Some(error));
                drop(inner);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
        batch.clear();
    }
    store.close().await;
}
