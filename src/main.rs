//! The `errbook` command: serve the portal and API, check a knowledge base, search it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use errbook::answer::{Answers, EntryTexts};
use errbook::diagnose::{Diagnoser, Paste, Pasted, Request, Verdict, clip};
use errbook::kb::{Branch, Kb, LoadError};
use errbook::reload::Reloader;
use errbook::search::{CacheBudget, IndexStore, SearchError, SearchIndex, SearchQuery};
use errbook::web::server;
use errbook::{AppState, app};

mod eval;

/// mimalloc instead of glibc's allocator: faster for the many small allocations of
/// analysis, indexing and JSON; tuned in `tune_allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "errbook",
    version,
    about = "Known problems of distributed training, answered offline"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct KbArg {
    /// Folder of Markdown entries.
    #[arg(long, env = "ERRBOOK_KB", default_value = "kb")]
    kb: PathBuf,
    /// Folder where built indexes are kept, so that the next start with the same
    /// entries opens them instead of building them [default: $XDG_CACHE_HOME/errbook,
    /// or ~/.cache/errbook].
    #[arg(long, env = "ERRBOOK_INDEX_CACHE")]
    index_cache: Option<PathBuf>,
    /// Build the indexes in memory only, reading and writing no index cache.
    #[arg(long)]
    no_index_cache: bool,
}

impl KbArg {
    fn store(&self) -> Option<IndexStore> {
        if self.no_index_cache {
            return None;
        }
        let root = self.index_cache.clone().or_else(|| {
            let home = |var| std::env::var_os(var).filter(|dir| !dir.is_empty());
            home("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| home("HOME").map(|dir| Path::new(&dir).join(".cache")))
                .map(|cache| cache.join("errbook"))
        })?;
        Some(IndexStore::new(root))
    }

    /// The search index of `kb`, opened from the index cache when it holds it.
    fn index(&self, kb: Kb) -> Result<SearchIndex, SearchError> {
        SearchIndex::build_in(Arc::new(kb), self.store().as_ref())
    }
}

#[derive(Subcommand)]
enum Command {
    /// Serve the web portal and the JSON API.
    Serve {
        #[command(flatten)]
        kb: KbArg,
        #[command(flatten)]
        options: ServeOptions,
    },
    /// Validate every entry; exits non-zero naming file and line of each problem.
    Check {
        #[command(flatten)]
        kb: KbArg,
    },
    /// Diagnose a traceback or log: `torchrun train.py 2>&1 | errbook diagnose -`.
    Diagnose {
        /// Log file to read, or `-` for standard input.
        #[arg(default_value = "-")]
        file: PathBuf,
        #[command(flatten)]
        kb: KbArg,
        /// Number of matches, 1 to 20 [default: 5].
        #[arg(long, allow_negative_numbers = true)]
        limit: Option<i64>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Score diagnosis against labelled pastes: DIR/manifest.tsv (file, expected, kind, source).
    Eval {
        /// Folder with manifest.tsv and the paste files.
        dir: PathBuf,
        #[command(flatten)]
        kb: KbArg,
        /// Print one line per case.
        #[arg(long)]
        verbose: bool,
    },
    /// Full-text search from the terminal.
    Search {
        /// Words, an error message, or Chinese text.
        query: String,
        #[command(flatten)]
        kb: KbArg,
        /// Only entries with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Number of results.
        #[arg(long, default_value_t = 5)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. }) {
        quit_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Serve { kb, options } => serve(&kb, options),
        Command::Check { kb } => check(&kb),
        Command::Diagnose {
            file,
            kb,
            limit,
            json,
        } => diagnose(&kb, &file, limit, json),
        Command::Eval { dir, kb, verbose } => eval::run(&kb.kb, &dir, verbose),
        Command::Search {
            query,
            kb,
            tag,
            limit,
            json,
        } => search(&kb, &query, tag.as_deref(), limit, json),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// A command whose reader goes away (`errbook diagnose x.log | head -1`) ends quietly as
/// other Unix tools do, by SIGPIPE, instead of panicking on the failed write. The
/// server keeps Rust's default of ignoring it: a client that hangs up is not an end.
fn quit_on_closed_pipe() {
    // SAFETY: called before any thread starts; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Loads the knowledge base, printing every problem in it when it is invalid.
fn load(dir: &Path) -> anyhow::Result<Option<Kb>> {
    match Kb::load(dir) {
        Ok(kb) => Ok(Some(kb)),
        Err(LoadError::Invalid { problems }) => {
            for problem in &problems {
                eprintln!("error: {problem}");
            }
            eprintln!("{}: {} problem(s) found", dir.display(), problems.len());
            Ok(None)
        }
        Err(err) => Err(err.into()),
    }
}

fn check(kb_arg: &KbArg) -> anyhow::Result<ExitCode> {
    let dir = kb_arg.kb.as_path();
    let Some(kb) = load(dir)? else {
        return Ok(ExitCode::FAILURE);
    };
    let entries = kb.len();
    let examples: usize = kb.entries().iter().map(|e| e.examples.len()).sum();
    let mut problems = kb.compile_regexes();
    problems.extend(kb.example_problems());
    let diagnoser = Diagnoser::new(Arc::new(kb_arg.index(kb)?));
    problems.extend(diagnoser.check_examples()?);
    problems.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("error: {problem}");
        }
        eprintln!("{}: {} problem(s) found", dir.display(), problems.len());
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "{}: {entries} entries, all valid; all {examples} examples diagnose to their own entry",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn search(
    kb_arg: &KbArg,
    query: &str,
    tag: Option<&str>,
    limit: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Some(kb) = load(&kb_arg.kb)? else {
        return Ok(ExitCode::FAILURE);
    };
    let index = kb_arg.index(kb)?;
    let asked = SearchQuery::new(query, tag, limit);
    let found = index.search(&asked)?;
    let hits = &found.hits;
    if json {
        let kb = index.kb();
        let texts = EntryTexts::new(kb);
        let answers = Answers {
            kb,
            texts: &texts,
            base: "",
        };
        let response = answers.search(asked, &found);
        println!("{}", serde_json::to_string_pretty(&response)?);
    } else if hits.is_empty() {
        println!("no entry matches {query:?}");
    } else {
        for (i, h) in hits.iter().enumerate() {
            let Some(e) = index.kb().get(&h.slug) else {
                continue;
            };
            println!("{}. {}  [{}]  score {:.2}", i + 1, e.title, e.slug, h.score);
            println!("   {}", e.title_zh);
            println!("   {}", h.snippet);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn diagnose(
    kb_arg: &KbArg,
    file: &Path,
    limit: Option<i64>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Some(kb) = load(&kb_arg.kb)? else {
        return Ok(ExitCode::FAILURE);
    };
    let paste = if file == Path::new("-") {
        Paste::from_reader(std::io::stdin().lock()).context("reading standard input")?
    } else {
        let f =
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
        Paste::from_reader(std::io::BufReader::new(f))
            .with_context(|| format!("cannot read {}", file.display()))?
    };
    let request = Request::new(Pasted::Read(paste), limit)
        .with_context(|| format!("cannot diagnose {}", file.display()))?;
    let diagnoser = Diagnoser::new(Arc::new(kb_arg.index(kb)?));
    let d = diagnoser.answer(&request)?;
    let kb = diagnoser.index().kb();
    if json {
        let texts = EntryTexts::new(kb);
        let answers = Answers {
            kb,
            texts: &texts,
            base: "",
        };
        println!("{}", serde_json::to_string_pretty(&answers.diagnosis(&d))?);
        return Ok(ExitCode::SUCCESS);
    }
    print_diagnosis(kb, &d);
    Ok(ExitCode::SUCCESS)
}

/// Lines of an entry's Fix printed under the first match.
const FIX_LINES: usize = 30;

/// A diagnosis as a terminal's first screen: the answer and its fix first when there is
/// one; otherwise what happened, then the candidates (`possible`) or the leads
/// (`no_match`), one line each past the first.
fn print_diagnosis(kb: &errbook::kb::Kb, d: &errbook::diagnose::Diagnosis) {
    let summary = d.triage.summary(d.parsed.root_exception());
    let what_happened = || {
        if !summary.is_empty() {
            println!("{summary}");
        }
        for fact in &d.triage.environment {
            println!("  {}: {}", fact.name, fact.value);
        }
    };
    match d.verdict {
        Verdict::Matched => {}
        Verdict::Possible => {
            println!("errbook is not sure; the closest candidate:");
            what_happened();
            println!();
        }
        Verdict::NoMatch => {
            // A question's leads are the entries about it; a failure's are unlikely.
            let question = d.question && !d.matches.is_empty();
            if question {
                // Words alone pick the right entry first less than half the time: list
                // the entries, and assert none of their causes.
                println!("no error in this paste to diagnose; the entries closest to its words");
                println!("(paste the traceback or the log's last lines for a diagnosis):");
            } else {
                println!("errbook does not know this failure: no entry fits it firmly.");
                what_happened();
                for hit in &d.closest {
                    if let Some(e) = kb.get(&hit.slug) {
                        println!("  closest by text: {} [{}]", e.title, e.slug);
                    }
                }
                if !d.matches.is_empty() {
                    println!("\nentries with a little evidence, each unlikely:");
                }
            }
            for m in &d.matches {
                if let Some(e) = kb.get(&m.slug) {
                    println!("  - {} [{}]", e.title, e.slug);
                }
            }
            return;
        }
    }
    let Some((m, e)) = d.matches.first().and_then(|m| Some((m, kb.get(&m.slug)?))) else {
        return;
    };
    let answer = d.verdict == Verdict::Matched;
    println!(
        "{} [{}] — {}{} confidence",
        e.title,
        e.slug,
        if answer { "the answer, " } else { "" },
        m.confidence.as_str()
    );
    println!("   {}", e.summary);
    for ev in &m.evidence {
        println!("   line {:>5}: {}", ev.line, clip(&ev.text, 120));
    }
    for check in &m.versions {
        println!("   {}", check.sentence());
    }
    if let Some(chosen) = &m.branch {
        let b = &e.branches[chosen.index];
        let lines: Vec<String> = chosen.lines.iter().map(usize::to_string).collect();
        println!("\n   most likely: {} (line {})", b.title, lines.join(", "));
        for line in Branch::filled(&b.fix, &chosen.values).lines() {
            println!("     {line}");
        }
        let others: Vec<&str> = (e.branches.iter())
            .filter(|o| o.id != b.id)
            .map(|o| o.title.as_str())
            .collect();
        if !others.is_empty() {
            println!("   if it is not this, check: {}", others.join("; "));
        }
    } else if let Some(fix) = e.section("Fix") {
        if !e.branches.is_empty() {
            println!("\n   the paste does not say which of these causes it is:");
            for b in &e.branches {
                println!("     - {}", b.title);
            }
        }
        println!("\n   fix:");
        for line in fix.lines().take(FIX_LINES) {
            println!("     {line}");
        }
        let more = fix.lines().count().saturating_sub(FIX_LINES);
        if more > 0 {
            println!("     … {more} more lines in {}", e.path.display());
        }
    }
    if answer && !(summary.is_empty() && d.triage.environment.is_empty()) {
        println!();
        what_happened();
    }
    let others: Vec<_> = d.matches[1..]
        .iter()
        .filter_map(|m| Some((m, kb.get(&m.slug)?)))
        .collect();
    if !others.is_empty() {
        println!("\nother candidates:");
        for (m, e) in others {
            println!("  - {} [{}] — {}", e.title, e.slug, m.confidence.as_str());
        }
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(format!(
            "`{text}` is not a number of seconds from 0 to 3600"
        )),
    }
}

/// `errbook serve`'s settings beside the knowledge base.
#[derive(clap::Args)]
struct ServeOptions {
    /// Address to listen on.
    #[arg(long, env = "ERRBOOK_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// The URL users reach this server at (`https://errbook.example.com`): API and
    /// MCP answers then carry absolute links a chatbot can cite.
    #[arg(long, env = "ERRBOOK_PUBLIC_URL")]
    public_url: Option<String>,
    /// Reload the knowledge base whenever a file under it changes (`SIGHUP`
    /// reloads it in any case). A broken edit keeps the last good one serving.
    #[arg(long)]
    watch: bool,
    /// Seconds a request may take, waiting for its turn included, before 503.
    #[arg(long, env = "ERRBOOK_REQUEST_TIMEOUT", default_value_t = 15.0,
      value_parser = parse_seconds)]
    request_timeout: f64,
    /// Seconds a stop (SIGTERM, Ctrl-C) waits for requests in flight before
    /// closing them; under Docker's and Kubernetes' default of 10 s before SIGKILL.
    #[arg(long, env = "ERRBOOK_GRACE_PERIOD", default_value_t = 8.0,
      value_parser = parse_seconds)]
    grace_period: f64,
    /// A browser origin (`https://chat.example.com`) whose pages may call `/mcp`,
    /// besides pages on this machine and the public URL; repeat for more.
    /// Environment: comma-separated.
    #[arg(
        long = "allowed-origin",
        env = "ERRBOOK_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,
    /// Mebibytes the caches (term impacts, recent diagnoses and searches) may hold
    /// together [default: 64, or 8 KiB per entry past 8,192 entries].
    #[arg(long, env = "ERRBOOK_CACHE_MB", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    cache_mb: Option<u64>,
}

fn serve(kb_arg: &KbArg, options: ServeOptions) -> anyhow::Result<ExitCode> {
    let ServeOptions {
        addr,
        public_url,
        watch,
        request_timeout,
        grace_period,
        allowed_origins,
        cache_mb,
    } = options;
    let request_timeout = Duration::from_secs_f64(request_timeout);
    let grace_period = Duration::from_secs_f64(grace_period);
    CacheBudget::set(cache_mb.map(|mb| mb << 20));
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "errbook=info,tower_http=warn".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let started = Instant::now();
    let dir = kb_arg.kb.as_path();
    let Some(kb) = load(dir)? else {
        eprintln!(
            "error: refusing to serve an invalid knowledge base; fix it and run `errbook check`"
        );
        return Ok(ExitCode::FAILURE);
    };
    let entries = kb.len();
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "kb loaded");
    let store = kb_arg.store();
    let index =
        SearchIndex::build_in(Arc::new(kb), store.as_ref()).context("building the search index")?;
    let mut state = AppState::new(index);
    state.limits.request_timeout = request_timeout;
    state.allowed_origins = allowed_origins
        .iter()
        .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
        .filter(|o| !o.is_empty())
        .collect();
    // Before anything opens files: a reload reads every entry, and at the common
    // `ulimit -n 1024` a flood of connections would leave it none.
    let config = server::ServerConfig {
        max_connections: server::connection_cap(),
        grace_period,
    };
    if let Some(base) = public_url.as_deref() {
        state = match state.with_public_url(base) {
            Ok(state) => state,
            Err(message) => {
                eprintln!("error: --public-url: {message}");
                return Ok(ExitCode::FAILURE);
            }
        };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let reloader = Reloader::new(dir, state.clone()).with_store(store);
        // Listening for SIGHUP replaces its default action (exit) before anyone can
        // send it.
        #[cfg(unix)]
        let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("listening for SIGHUP")?;
        // Likewise Ctrl-C and SIGTERM: caught from before the address is logged, so a
        // stop sent as soon as the server answers is a graceful one.
        let shutdown = shutdown_signal()?;
        let _watcher = watch.then(|| {
            tracing::info!(kb = %dir.display(), "watching the knowledge base for changes");
            reloader.watch()
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr()?;
        tracing::info!(
            entries,
            kb = %dir.display(),
            ready_ms = started.elapsed().as_millis() as u64,
            max_connections = config.max_connections,
            "errbook listening on http://{local}"
        );
        // Search is ready. Now jieba's whole dictionary, which Chinese queries need
        // (indexing used only part of it), and the signature matcher that diagnosis
        // needs are built, side by side (rather than when the first query or paste
        // arrives), and the memory indexing freed is handed back.
        let served = state.served();
        tokio::task::spawn_blocking(move || {
            let jieba = std::thread::spawn(errbook::search::analysis::warm_up);
            served.index.kb().signatures();
            if jieba.join().is_err() {
                tracing::error!("loading jieba's dictionary failed");
            }
            settle_allocator();
            tracing::debug!(ms = started.elapsed().as_millis() as u64, "settled");
        });
        #[cfg(unix)]
        tokio::spawn(reload_on_hangup(hangups, reloader.clone()));
        server::serve(listener, app(state), config, shutdown).await;
        anyhow::Ok(())
    })?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Reloads the knowledge base on each `SIGHUP`.
#[cfg(unix)]
async fn reload_on_hangup(mut hangups: tokio::signal::unix::Signal, reloader: Reloader) {
    while hangups.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the knowledge base");
        reloader.reload_in_background().await;
    }
}

/// mimalloc's options, by their numbers in the `mi_option_e` of the mimalloc v3 that
/// libmimalloc-sys builds (its Rust constants follow v2's numbering).
const MI_OPTION_PURGE_DECOMMITS: libmimalloc_sys::mi_option_t = 5;
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// How long freed memory stays with mimalloc once the server is serving (its own
/// default).
const SERVING_PURGE_DELAY_MS: std::ffi::c_long = 1_000;

/// Freed memory goes back to the system at once (decommitted: `MADV_FREE` pages would
/// still count as resident), so that what indexing frees at start never stays.
fn tune_allocator() {
    // SAFETY: setting an option is always allowed; this runs before other threads.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DECOMMITS, 1);
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

/// Once indexing is done: hands back what it freed, then lets freed memory wait a
/// second before it is handed back (requests free and reuse the same memory all the
/// time, and decommitting it each time would cost a page fault each reuse).
fn settle_allocator() {
    // SAFETY: mi_collect only frees memory mimalloc no longer uses; options may be set
    // at any time.
    unsafe {
        libmimalloc_sys::mi_collect(true);
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, SERVING_PURGE_DELAY_MS);
    }
}

/// Starts listening for Ctrl-C and SIGTERM at once; the future resolves on the first
/// of them, so in-flight requests finish before exit. A second one, while they finish,
/// exits at once (status 130), as a person pressing Ctrl-C twice expects.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    let (mut interrupt, mut terminate) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).context("listening for Ctrl-C")?,
            signal(SignalKind::terminate()).context("listening for SIGTERM")?,
        )
    };
    Ok(async move {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = interrupt.recv() => {},
                _ = terminate.recv() => {},
            }
            tokio::spawn(async move {
                tokio::select! {
                    _ = interrupt.recv() => {},
                    _ = terminate.recv() => {},
                }
                tracing::warn!("second stop signal: exiting without waiting");
                std::process::exit(130);
            });
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
    })
}
