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

use crate::kb::{Kb, LoadError, Sources};
use crate::search::{IndexStore, SearchIndex};
use crate::web::{AppState, ReloadError, WatchState};

/// Quiet time after the last change before rebuilding: an editor's save or a
/// `git pull` is many events, and they become one reload.
pub const SETTLE: Duration = Duration::from_millis(300);

/// Loads `sources` and builds everything a request could need from them (the
/// signature matcher included, so the first paste after a reload is not slow).
pub fn build(sources: &Sources, store: Option<&IndexStore>) -> Result<SearchIndex, ReloadError> {
    let failed = |message: String, problems: Vec<String>| ReloadError {
        at: SystemTime::now(),
        message,
        problems,
    };
    let kb = Kb::load_from(sources)
        .map_err(|err| match err {
            LoadError::Invalid { problems } => failed(
                format!(
                    "{} problem(s) in the knowledge base; `errbook check` lists them too",
                    problems.len()
                ),
                problems.iter().map(ToString::to_string).collect(),
            ),
            err => failed(err.to_string(), Vec::new()),
        })?
        .kb;
    let index = SearchIndex::build_in(Arc::new(kb), store)
        .map_err(|err| failed(format!("building the index: {err}"), Vec::new()))?;
    index.kb().signatures();
    Ok(index)
}

/// Rebuilds the served knowledge base from its sources, one reload at a time.
#[derive(Clone, Debug)]
pub struct Reloader {
    sources: Sources,
    state: AppState,
    /// Where built indexes are kept (see `IndexStore`), if anywhere.
    store: Option<IndexStore>,
    running: Arc<Mutex<()>>,
}

impl Reloader {
    pub fn new(sources: Sources, state: AppState) -> Reloader {
        Reloader {
            sources,
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

    /// Loads the sources again and serves them when they are valid; otherwise keeps serving
    /// the last good knowledge base and records why. Blocks for the whole build.
    pub fn reload(&self) -> Result<usize, ReloadError> {
        let _one_at_a_time = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        match build(&self.sources, self.store.as_ref()) {
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
                    kb = %self.sources.describe(),
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
    /// answering from the old index meanwhile. A reload that failed for a reason other
    /// than the entries themselves (a file that could not be read: too many open files,
    /// a folder swapped mid-read) is tried again, a little later each time.
    pub async fn reload_in_background(&self) {
        let mut wait = RETRY_FIRST_WAIT;
        for attempt in 1..=RETRIES {
            let reloader = self.clone();
            match tokio::task::spawn_blocking(move || reloader.reload()).await {
                Ok(Err(error)) if error.problems.is_empty() && attempt < RETRIES => {
                    tracing::info!(attempt, "trying the reload again in {wait:?}");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                Ok(_) => return,
                Err(err) => {
                    tracing::error!(error = %err, "the reload task failed");
                    return;
                }
            }
        }
    }

    /// Watches each of the team's folders and reloads after each burst of changes, until
    /// the returned handle is dropped. Must be called within the tokio runtime.
    ///
    /// A folder is watched where its path leads now: every [`POLL`] the path is
    /// resolved again, so a symlink swapped to a new version (Kubernetes ConfigMap
    /// volumes, git-sync), at the folder or any folder above it, moves the watch and
    /// reloads. A watch that fails (its folder removed, the system out of watches) is
    /// reported on `/healthz` and set up again at the next poll.
    pub fn watch(&self) -> WatchHandle {
        let tasks = (self.sources.folders.iter())
            .map(|dir| {
                let (tx, rx) = mpsc::unbounded_channel();
                let mut watch = Watch {
                    reloader: self.clone(),
                    dir: dir.clone(),
                    tx,
                    watched: None,
                    failed: false,
                };
                // The first watch is set up before this returns, so no edit made after
                // the server says it is listening goes unseen.
                watch.follow();
                tokio::spawn(watch.run(rx))
            })
            .collect();
        WatchHandle(tasks)
    }
}

/// The state of the watch of one folder: where it is set up, and whether it is broken.
struct Watch {
    reloader: Reloader,
    /// The folder as it was named (a path that may lead elsewhere later).
    dir: PathBuf,
    tx: mpsc::UnboundedSender<Result<(), String>>,
    watched: Option<(PathBuf, notify::RecommendedWatcher)>,
    failed: bool,
}

impl Watch {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Result<(), String>>) {
        loop {
            let mut changed = false;
            tokio::select! {
                event = rx.recv() => match event {
                    Some(Ok(())) => changed = true,
                    Some(Err(message)) => {
                        self.fail(&message);
                        self.watched = None;
                    }
                    None => return,
                },
                () = tokio::time::sleep(POLL) => {}
            }
            changed |= self.follow();
            if changed {
                // Wait for the burst to end.
                while let Ok(Some(Ok(()))) = tokio::time::timeout(SETTLE, rx.recv()).await {}
                let dir = self.dir.display();
                tracing::info!(kb = %dir, "knowledge base changed; reloading");
                self.reloader.reload_in_background().await;
            }
        }
    }

    /// Resolves the folder's path again and moves the watch where it leads now;
    /// whether that may have changed what the folder holds (a watch moved, or
    /// restored after it broke).
    fn follow(&mut self) -> bool {
        let target = std::fs::canonicalize(&self.dir).ok();
        if target.as_ref() == self.watched.as_ref().map(|(path, _)| path) {
            return false;
        }
        let was_failed = self.failed;
        let before = self.watched.take().map(|(path, _)| path);
        match target {
            Some(target) => match watch_folder(&target, self.tx.clone()) {
                Ok(watcher) => {
                    if self.failed {
                        self.reloader.state.watch_restarted();
                    }
                    self.failed = false;
                    (self.reloader.state).set_watch(WatchState::Watching(target.clone()));
                    self.watched = Some((target, watcher));
                }
                Err(err) => self.fail(&err.to_string()),
            },
            None if !self.failed => {
                let dir = self.dir.display();
                self.fail(&format!("{dir} cannot be read"));
            }
            None => {}
        }
        (before.is_some() || was_failed) && self.watched.is_some()
    }

    fn fail(&mut self, message: &str) {
        let dir = self.dir.display();
        tracing::warn!(kb = %dir, "watching the knowledge base failed: {message}");
        (self.reloader.state).set_watch(WatchState::Failed(message.to_string()));
        self.failed = true;
    }
}

/// Stops watching when dropped.
#[derive(Debug)]
pub struct WatchHandle(Vec<tokio::task::JoinHandle<()>>);

impl Drop for WatchHandle {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// How often the watched path is resolved again (a swapped symlink sends no event to a
/// watch of its old target).
pub const POLL: Duration = Duration::from_secs(1);
/// Tries of a reload that failed for a transient reason, and the first wait between.
const RETRIES: u32 = 5;
const RETRY_FIRST_WAIT: Duration = Duration::from_millis(500);

/// A watch of `folder` and everything under it that sends `Ok(())` for each change
/// and `Err` when the watch itself breaks (its folder removed).
fn watch_folder(
    folder: &Path,
    tx: mpsc::UnboundedSender<Result<(), String>>,
) -> notify::Result<notify::RecommendedWatcher> {
    let root = folder.to_path_buf();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) if matters(&event.kind) => {
                let gone =
                    matches!(event.kind, EventKind::Remove(_)) && event.paths.contains(&root);
                let _ = tx.send(if gone {
                    Err(format!("{} was removed", root.display()))
                } else {
                    Ok(())
                });
            }
            Ok(_) => {}
            Err(err) => {
                let _ = tx.send(Err(err.to_string()));
            }
        })?;
    watcher.watch(folder, RecursiveMode::Recursive)?;
    Ok(watcher)
}

/// Whether a file-system event can change what the folder holds (reads cannot).
fn matters(kind: &EventKind) -> bool {
    !matches!(kind, EventKind::Access(_))
}
