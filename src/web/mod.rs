//! HTTP: the router (every URL, once), portal pages, the JSON API and the error type.
//! The only module that knows axum, askama and JSON.

mod api;
mod assets;
pub mod curator;
mod error;
mod error_bodies;
mod feedback;
mod i18n;
mod inbox;
mod inbox_text;
mod llms;
mod mcp;
mod metrics;
mod pages;
pub mod server;
pub mod share;
mod upload;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Router, middleware};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::answer::{Answers, EntryTexts};
use crate::diagnose::{Diagnoser, Request};
use crate::inbox::store::Write;
use crate::inbox::{Capture, Inbox};
use crate::search::SearchIndex;

pub use error::AppError;
pub use upload::DRAINED_BYTES;

/// `base` as a base for absolute links (`http(s)://host[/path]`, no trailing slash).
pub fn public_base(base: &str) -> Result<&str, String> {
    let base = base.trim().trim_end_matches('/');
    let rest = base
        .strip_prefix("https://")
        .or_else(|| base.strip_prefix("http://"))
        .ok_or_else(|| format!("public URL `{base}` must start with http:// or https://"))?;
    if rest.is_empty() || rest.contains(|c: char| c.is_whitespace() || c == '?' || c == '#') {
        return Err(format!("public URL `{base}` is not a base URL"));
    }
    Ok(base)
}

/// Largest request body accepted (a paste of a long log fits).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest body accepted at `/mcp`: a `diagnose` paste of [`mcp::MAX_TEXT_CHARS`]
/// characters however it is escaped (a character outside the Basic Multilingual Plane
/// is 12 bytes as `\uXXXX\uXXXX`), with room for the rest of the message. A longer paste
/// is refused by the tool itself, in a result the model reads.
pub const MCP_MAX_BODY_BYTES: usize = 12 * mcp::MAX_TEXT_CHARS + (64 << 10);

/// A JSON Schema `pattern` (ECMA-262, as Python's `re` reads it too) that a text
/// matches when it is not blank: it holds a character that is not white space, as
/// Rust's `str::trim` (Unicode `White_Space`) counts it. Every text errbook refuses as
/// blank fails it, and every other passes (a unit test checks each code point).
pub const NON_BLANK: &str = "[^\\u0009-\\u000d\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// A JSON number with no fractional part, as JSON Schema's `integer` takes it (`5`,
/// `5.0`, `5e0`); one past the range of `i64` saturates, and is then out of any range
/// errbook takes.
pub fn integer(value: &serde_json::Value) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    if value.is_u64() {
        return Some(i64::MAX);
    }
    let x = value.as_f64()?;
    (x.fract() == 0.0).then_some(x as i64)
}

/// The largest body a request to `path` may send.
pub fn body_limit(path: &str) -> usize {
    if path == "/mcp" {
        MCP_MAX_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    }
}

/// How much one request may take of the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// From the request's arrival (waiting for a turn included) to its answer.
    pub request_timeout: Duration,
    /// Requests handled at once; the rest wait their turn (within the timeout).
    pub concurrent_requests: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Limits {
            request_timeout: Duration::from_secs(15),
            concurrent_requests: 32 * cores,
        }
    }
}

/// How reloads of the knowledge base have gone (see `--watch` and `SIGHUP`).
#[derive(Clone, Debug, Default)]
pub struct ReloadStatus {
    pub reloads: u64,
    pub failed_reloads: u64,
    pub last_reload: Option<SystemTime>,
    /// Why the latest reload failed, while no later one has succeeded.
    pub error: Option<ReloadError>,
    /// How watching the folder goes (`serve --watch`).
    pub watch: WatchState,
    /// Times a failed watch was set up again.
    pub watch_restarts: u64,
}

/// Whether the knowledge base folder is watched for changes.
#[derive(Clone, Debug, Default)]
pub enum WatchState {
    /// Not asked for: reloads come from `SIGHUP` only.
    #[default]
    Off,
    /// Watching this folder (where the kb path leads now).
    Watching(std::path::PathBuf),
    /// The watch broke (why); it is set up again as soon as it can be.
    Failed(String),
}

/// Why a reload failed.
#[derive(Clone, Debug)]
pub struct ReloadError {
    pub at: SystemTime,
    /// What went wrong, in one line.
    pub message: String,
    /// Each problem found, as `file:line: message`.
    pub problems: Vec<String>,
}

/// The knowledge base being served: its index and the diagnoser over it. Replaced
/// whole by a reload; a request holds the one it started with until it finishes.
#[derive(Debug)]
pub struct Served {
    pub index: Arc<SearchIndex>,
    pub diagnoser: Arc<Diagnoser>,
    /// Each entry's texts as JSON, for answers.
    texts: EntryTexts,
}

impl Served {
    pub fn new(index: SearchIndex) -> Served {
        let index = Arc::new(index);
        Served {
            diagnoser: Arc::new(Diagnoser::new(index.clone())),
            texts: EntryTexts::new(index.kb()),
            index,
        }
    }
}

/// What every handler can reach: the knowledge base being served, how the last reload
/// went, the server's limits.
#[derive(Clone, Debug)]
pub struct AppState {
    served: Arc<ArcSwap<Served>>,
    reloads: Arc<Mutex<ReloadStatus>>,
    /// What `/metrics` reports.
    metrics: Arc<metrics::Metrics>,
    pub limits: Limits,
    /// Where users reach this server (`https://errbook.example.com`), without a
    /// trailing slash; `None` when unknown, and then URLs are relative.
    pub public_url: Option<Arc<str>>,
    /// Browser origins besides errbook's own that may call `/mcp`
    /// (`scheme://host[:port]`, lowercase).
    pub allowed_origins: Arc<[String]>,
    /// The team's inbox: feedback, and with capture on what errbook could not answer.
    /// `None` keeps nothing (feedback is then refused).
    pub inbox: Option<Inbox>,
    /// The curator's sign-in to `/inbox`; `None` turns the inbox pages off.
    pub curator: Option<Arc<curator::Curator>>,
}

impl AppState {
    pub fn new(index: SearchIndex) -> Self {
        let served = Arc::new(ArcSwap::from_pointee(Served::new(index)));
        let reloads = Arc::default();
        AppState {
            metrics: Arc::new(metrics::Metrics::new(served.clone(), Arc::clone(&reloads))),
            served,
            reloads,
            limits: Limits::default(),
            public_url: None,
            allowed_origins: Arc::new([]),
            inbox: None,
            curator: None,
        }
    }

    /// Keeps an inbox: `/metrics` and `/healthz` report its store from now on.
    pub fn with_inbox(mut self, inbox: Inbox) -> Self {
        self.metrics.watch_inbox(inbox.clone());
        self.inbox = Some(inbox);
        self
    }

    /// Answers a paste a user sent (the portal's form, the API, MCP) as
    /// [`AppState::diagnose`] does, and keeps it for the inbox when capture is on and
    /// errbook could not answer it. The answer never waits for the store.
    pub async fn answer_paste(
        &self,
        served: &Arc<Served>,
        request: Request,
    ) -> Result<crate::diagnose::Diagnosis, AppError> {
        let text = request.text_pasted().cloned();
        let d = self.diagnose(served, request).await?;
        if let Some(text) = text {
            self.capture(&text, &d);
        }
        Ok(d)
    }

    /// With capture on, offers `text` to the inbox when `d` did not answer it.
    pub fn capture(&self, text: &str, d: &crate::diagnose::Diagnosis) {
        if let Some(inbox) = self.inbox.as_ref().filter(|inbox| inbox.capture())
            && let Some(captured) = Capture::of(text, d, unix_now())
        {
            inbox.keep(Write::Capture(captured));
        }
    }

    /// Answers `request` against `served` (the knowledge base the request took): from
    /// the cache of recent answers, or anew, a large paste on a blocking thread (see
    /// [`off_the_runtime`]).
    pub async fn diagnose(
        &self,
        served: &Arc<Served>,
        request: Request,
    ) -> Result<crate::diagnose::Diagnosis, AppError> {
        let served = served.clone();
        let d = off_the_runtime(request.len(), move || served.diagnoser.answer(&request)).await??;
        self.metrics.diagnosed(&d);
        Ok(d)
    }

    /// What answers for `served` are written from.
    pub fn answers<'a>(&'a self, served: &'a Served) -> Answers<'a> {
        Answers {
            kb: served.index.kb(),
            texts: &served.texts,
            base: self.public_url.as_deref().unwrap_or(""),
        }
    }

    /// The knowledge base now served. Take it once per request, so one answer never
    /// mixes two versions of the knowledge base.
    pub fn served(&self) -> Arc<Served> {
        self.served.load_full()
    }

    /// Serves `index` from now on; requests already running finish on the old one.
    pub fn replace(&self, index: SearchIndex) {
        self.metrics.swap_served(&self.served, Served::new(index));
        let mut status = self.reloads.lock().unwrap_or_else(|e| e.into_inner());
        status.reloads += 1;
        status.last_reload = Some(SystemTime::now());
        status.error = None;
    }

    /// Records a reload that failed: the last good knowledge base stays served, and
    /// `/healthz` reports `error` until a reload succeeds.
    pub fn reload_failed(&self, error: ReloadError) {
        let mut status = self.reloads.lock().unwrap_or_else(|e| e.into_inner());
        status.failed_reloads += 1;
        status.error = Some(error);
    }

    /// Records how watching the folder goes.
    pub fn set_watch(&self, watch: WatchState) {
        let mut status = self.reloads.lock().unwrap_or_else(|e| e.into_inner());
        status.watch = watch;
    }

    /// Counts a failed watch set up again.
    pub fn watch_restarted(&self) {
        let mut status = self.reloads.lock().unwrap_or_else(|e| e.into_inner());
        status.watch_restarts += 1;
    }

    /// How reloads have gone so far.
    pub fn reload_status(&self) -> ReloadStatus {
        self.reloads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The same state, with URLs made absolute against `base` (`http(s)://host[/path]`).
    pub fn with_public_url(mut self, base: &str) -> Result<Self, String> {
        self.public_url = Some(public_base(base)?.into());
        Ok(self)
    }

    /// Whether a browser page from `origin` (an `Origin` header) may call `/mcp`:
    /// pages served from this machine (`localhost`, `127.0.0.0/8`, `[::1]`), from the
    /// public URL, or from an origin allowed by the operator. An origin is never
    /// judged by the `Host` header, which a DNS-rebinding page controls.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        let Some(rest) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        let host = match rest.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => rest.split(':').next().unwrap_or(""),
        };
        let loopback = host == "localhost"
            || host == "::1"
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback());
        loopback
            || self
                .public_url
                .as_deref()
                .is_some_and(|base| origin_of(base).eq_ignore_ascii_case(&origin))
            || self.allowed_origins.contains(&origin)
    }

    /// Warns, in the log, when serving on `local`, an address other machines reach,
    /// without a public URL (see [`relative_links_warning`]).
    pub fn warn_if_links_relative(&self, local: std::net::SocketAddr) {
        if let Some(warning) = relative_links_warning(local, self.public_url.as_deref()) {
            tracing::warn!("{warning}");
        }
    }

    /// `path` (starting with `/`) as a URL to give out: absolute when the public URL
    /// is known.
    pub fn url(&self, path: &str) -> String {
        match &self.public_url {
            Some(base) => format!("{base}{path}"),
            None => path.to_string(),
        }
    }

    /// The URL of an entry's page.
    pub fn entry_url(&self, slug: &str) -> String {
        self.url(&format!("/entries/{slug}"))
    }
}

/// What to tell the operator of a server on `local` without a public URL, when others
/// reach it: every link in API, MCP and `llms.txt` answers is then relative, so a
/// chatbot cannot cite or open it. `None` on a loopback address, or with a public URL.
pub fn relative_links_warning(
    local: std::net::SocketAddr,
    public_url: Option<&str>,
) -> Option<String> {
    if public_url.is_some() || local.ip().is_loopback() {
        return None;
    }
    Some(format!(
        "serving on {local} without --public-url: links in API, MCP and llms.txt answers \
         are relative (/entries/...), which chatbots and other clients cannot follow; \
         pass --public-url https://HOST (or set ERRBOOK_PUBLIC_URL) to make them absolute"
    ))
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Pastes at least this large are diagnosed on a blocking thread: their diagnosis can
/// take milliseconds, which would hold up every other connection of an async worker.
pub const LARGE_PASTE: usize = 128 << 10;

/// `work` (about a paste of `len` bytes) run at once, or on a blocking thread when the
/// paste is large (see [`LARGE_PASTE`]).
pub async fn off_the_runtime<T: Send + 'static>(
    len: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AppError> {
    if len < LARGE_PASTE {
        return Ok(work());
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| AppError::Internal(format!("the diagnosis failed: {err}")))
}

/// The `scheme://host[:port]` part of a URL.
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// Every route errbook serves.
pub fn app(state: AppState) -> Router {
    let state_limits = state.limits;
    let (api, doc) = api::routes(state.public_url.as_deref());
    // Serialised once: the document is fixed for the life of the process.
    let doc = axum::body::Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
    let api = api
        .route(
            "/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], doc) }
            }),
        )
        .fallback(api::not_found);

    let routes = Router::new()
        .route("/", get(pages::home))
        .route("/search", get(pages::search))
        .route(
            "/diagnose",
            post(pages::diagnose).get(pages::diagnose_shared),
        )
        .route("/lang/{code}", get(pages::switch_language))
        .route("/feedback", post(feedback::page))
        .route("/inbox", get(inbox::list))
        .route("/inbox/login", get(inbox::login_form).post(inbox::login))
        .route("/inbox/logout", post(inbox::logout))
        .route("/inbox/groups/{fingerprint}", get(inbox::group))
        .route("/inbox/groups/{fingerprint}/{action}", post(inbox::decide))
        .route("/entries/{slug}", get(pages::entry))
        .route("/tags/{tag}", get(pages::tag))
        .route("/static/{*path}", get(assets::serve))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(metrics::serve))
        .route(
            "/mcp",
            post(mcp::handle).layer(DefaultBodyLimit::max(MCP_MAX_BODY_BYTES)),
        )
        .route("/llms.txt", get(llms::llms_txt))
        .nest("/api/v1", api)
        .route_layer(middleware::from_fn(metrics::note_route))
        .fallback(pages::not_found)
        .with_state(state.clone());
    // Layers on a router wrap each route; wrapped as one service instead, the error
    // formatter sees the finished response (axum's 405 gets its `Allow` header late).
    // Outermost first: a request is traced, its answer compressed, counted and timed,
    // and given security headers and an error body; it must fit the head limits, is
    // answered within the timeout (waiting for a turn included), its body is read
    // before it takes a turn (requests waiting for one and holding one are counted),
    // and the body must fit the body limit (`read_body` holds each path to its own;
    // the layer bounds them all).
    let limits = state_limits;
    let turns = state.metrics.turns.clone();
    turns.set_limit(limits.concurrent_requests);
    Router::new()
        .fallback_service(routes)
        .layer(RequestBodyLimitLayer::new(MCP_MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(
            turns.clone(),
            metrics::running,
        ))
        .layer(GlobalConcurrencyLimitLayer::new(limits.concurrent_requests))
        .layer(middleware::from_fn_with_state(turns, metrics::queued))
        .layer(middleware::from_fn_with_state(
            upload::BodyRoom::default(),
            upload::read_body,
        ))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ))
        .layer(middleware::from_fn(error::head_limits))
        .layer(middleware::from_fn_with_state(
            limits,
            error_bodies::error_bodies,
        ))
        .layer(middleware::map_response(security_headers))
        .layer(middleware::from_fn_with_state(
            state.metrics.clone(),
            metrics::track,
        ))
        .layer(CompressionLayer::new())
        .layer(TraceLayer::new_for_http())
}

/// What a browser may do with errbook's pages: scripts, styles and images only from
/// errbook itself (no inline script, so injected markup cannot run), no framing, no
/// MIME sniffing, and no paste-bearing URL leaked to other sites as a referrer.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
    base-uri 'none'; frame-ancestors 'none'";

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_non_blank_pattern_is_the_rule_the_server_applies() {
        let pattern = regex::Regex::new(NON_BLANK).unwrap();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let text = c.to_string();
            assert_eq!(
                pattern.is_match(&text),
                !text.trim().is_empty(),
                "U+{:04X}",
                c as u32
            );
        }
        assert!(!pattern.is_match(" \t\n\u{3000}"));
        assert!(pattern.is_match(" \tx\n"));
    }

    #[test]
    fn relative_links_are_warned_of_only_where_others_reach_the_server() {
        let at = |addr: &str| addr.parse::<std::net::SocketAddr>().unwrap();
        let warning = relative_links_warning(at("0.0.0.0:8080"), None).unwrap();
        assert!(warning.contains("--public-url"), "{warning}");
        assert!(relative_links_warning(at("[::]:8080"), None).is_some());
        assert!(relative_links_warning(at("10.1.2.3:80"), None).is_some());
        assert!(relative_links_warning(at("127.0.0.1:8080"), None).is_none());
        assert!(relative_links_warning(at("[::1]:8080"), None).is_none());
        let public = Some("https://errbook.example.com");
        assert!(relative_links_warning(at("0.0.0.0:8080"), public).is_none());
    }
}
