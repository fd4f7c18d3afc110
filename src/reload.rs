//! Reloading the knowledge base while serving: on `SIGHUP`, and on every change under
//! `kb/` with `serve --watch`. The new index is built beside the old one, which keeps
//! answering; only a knowledge base that loads cleanly replaces it. A broken edit
//! leaves the last good one serving and is reported in the log and on `/healthz`.
//! Nothing here writes to the knowledge base folder.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::kb::{Kb, LoadError};
use crate::search::{IndexStore, SearchIndex};
use crate::web::{AppState, ReloadError};

/// Quiet time after the last change before rebuilding: an editor's save or a
/// `git pull` is many events, and they become one reload.
pub const SETTLE: Duration = Duration::from_millis(300);

/// Loads `dir` and builds everything a request could need from it (the signature
/// matcher included, so the first paste after a reload is not slow).
pub fn build(dir: &Path, store: Option<&IndexStore>) -> Result<SearchIndex, ReloadError> {
    let failed = |message: String, problems: Vec<String>| ReloadError {
        at: SystemTime::now(),
        message,
        problems,
    };
    let kb = Kb::load(dir).map_err(|err| match err {
        LoadError::Invalid { problems } => failed(
            format!(
                "{} problem(s) in the knowledge base; `errbook check` lists them too",
                problems.len()
            ),
            problems.iter().map(ToString::to_string).collect(),
        ),
        err => failed(err.to_string(), Vec::new()),
    })?;
    let index = SearchIndex::build_in(Arc::new(kb), store)
        .map_err(|err| failed(format!("building the index: {err}"), Vec::new()))?;
    index.kb().signatures();
    Ok(index)
}

/// Rebuilds the served knowledge base from its folder, one reload at a time.
#[derive(Clone, Debug)]
pub struct Reloader {
    dir: PathBuf,
    state: AppState,
    /// Where built indexes are kept (see `IndexStore`), if anywhere.
    store: Option<IndexStore>,
    running: Arc<Mutex<()>>,
}

impl Reloader {
    pub fn new(dir: &Path, state: AppState) -> Reloader {
        Reloader {
            dir: dir.to_path_buf(),
            state,
            store: None,
            running: Arc::default(),
        }
    }

    /// Reloads through `store`: a reload opens the stored indexes of a kb it has seen
    /// before (an edit undone) rather than building them again.
    pub fn with_store(mut self, store: Option<IndexStore>) -> Reloader {
        self.store = store;
        self
    }

    /// Loads the folder again and serves it when it is valid; otherwise keeps serving
    /// the last good knowledge base and records why. Blocks for the whole build.
    pub fn reload(&self) -> Result<usize, ReloadError> {
        let _one_at_a_time = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        match build(&self.dir, self.store.as_ref()) {
            Ok(index) => {
                let entries = index.kb().len();
                self.state.replace(index);
                tracing::info!(
                    entries,
                    ms = started.elapsed().as_millis() as u64,
                    "knowledge base reloaded"
                );
                Ok(entries)
            }
            Err(error) => {
                tracing::error!(
                    kb = %self.dir.display(),
                    "reload failed; still serving the last good knowledge base: {}{}",
                    error.message,
                    error.problems.iter().map(|p| format!("\n  {p}")).collect::<String>()
                );
                self.state.reload_failed(error.clone());
                Err(error)
            }
        }
    }

    /// [`Reloader::reload`] on a blocking thread, so the server's own threads go on
    /// answering from the old index meanwhile.
    pub async fn reload_in_background(&self) {
        let reloader = self.clone();
        if let Err(err) = tokio::task::spawn_blocking(move || reloader.reload()).await {
            tracing::error!(error = %err, "the reload task failed");
        }
    }

    /// Watches the folder and reloads after each burst of changes, until the returned
    /// watcher is dropped. Must be called within the tokio runtime.
    pub fn watch(&self) -> notify::Result<notify::RecommendedWatcher> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(event) if matters(&event.kind) => {
                    let _ = tx.send(());
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "watching the knowledge base"),
            })?;
        watcher.watch(&self.dir, RecursiveMode::Recursive)?;
        let reloader = self.clone();
        tokio::spawn(async move {
            while rx.recv().await.is_some() {
                // Wait for the burst to end.
                while let Ok(Some(())) = tokio::time::timeout(SETTLE, rx.recv()).await {}
                tracing::info!(kb = %reloader.dir.display(), "knowledge base changed; reloading");
                reloader.reload_in_background().await;
            }
        });
        Ok(watcher)
    }
}

/// Whether a file-system event can change what the folder holds (reads cannot).
fn matters(kind: &EventKind) -> bool {
    !matches!(kind, EventKind::Access(_))
}
