//! `/metrics`: what the server has done, in the Prometheus text format (version 0.0.4).
//! Requests are counted by route template (the router's own list, `unmatched` for any
//! other address, so no request can add a series), method and status, and timed by
//! route; diagnoses by verdict and confidence. The rest is read at each scrape from what
//! the server keeps anyway: the caches' hits and misses, the requests waiting for a
//! turn and holding one, reloads and entries. No label ever carries a query or a paste.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::{AppState, ReloadStatus, Served};
use crate::diagnose::Diagnosis;
use crate::inbox::{Inbox, StoreState};
use crate::search::CacheStats;

/// The route label of a request no route matched (a 404, or a 405 of no route).
pub const UNMATCHED: &str = "unmatched";

/// Upper bounds of the latency buckets, in seconds: from a cached answer (tens of
/// microseconds) to the request timeout (15 s).
const LATENCY_BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 15.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: Arc<str>,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DiagnosisLabels {
    verdict: &'static str,
    /// The first match's confidence; `none` when there is no match at all.
    confidence: &'static str,
}

/// Every verdict with the confidence it comes with (see `policy::verdict`), listed at
/// 0 from the start so a rate is defined before the first of each.
const DIAGNOSIS_KINDS: [(&str, &str); 4] = [
    ("matched", "high"),
    ("possible", "medium"),
    ("no_match", "low"),
    ("no_match", "none"),
];

type LatencyFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

/// The server's metrics: counted as requests are answered, or read from the state at
/// each scrape.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    diagnoses: Family<DiagnosisLabels, Counter>,
    /// Requests waiting for a turn and holding one.
    pub turns: Arc<Turns>,
    /// The caches' counts of knowledge bases a reload replaced, so that the counters
    /// never go down.
    retired: Arc<Mutex<Caches>>,
    /// The inbox whose store is reported, once the server keeps one.
    inbox: Arc<ArcSwapOption<Inbox>>,
    unmatched: Arc<str>,
}

impl Metrics {
    /// Metrics of the server serving `served`, whose reloads go as `reloads` says.
    pub fn new(served: Arc<ArcSwap<Served>>, reloads: Arc<Mutex<ReloadStatus>>) -> Metrics {
        let mut registry = Registry::with_prefix("errbook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template (`unmatched` when none), method and status",
            requests.clone(),
        );
        let latency: LatencyFamily =
            Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS));
        registry.register_with_unit(
            "http_request_duration",
            "Time from a request's arrival to its answer's head, by route template",
            Unit::Seconds,
            latency.clone(),
        );
        let diagnoses = Family::<DiagnosisLabels, Counter>::default();
        for (verdict, confidence) in DIAGNOSIS_KINDS {
            drop(diagnoses.get_or_create(&DiagnosisLabels {
                verdict,
                confidence,
            }));
        }
        registry.register(
            "diagnoses",
            "Diagnoses answered (page, API and MCP), by verdict and the first match's confidence",
            diagnoses.clone(),
        );
        let turns = Arc::new(Turns::default());
        let retired = Arc::new(Mutex::new(Caches::default()));
        let inbox = Arc::new(ArcSwapOption::empty());
        registry.register_collector(Box::new(Observed {
            served,
            inbox: inbox.clone(),
            reloads,
            retired: retired.clone(),
            turns: turns.clone(),
        }));
        Metrics {
            registry,
            requests,
            latency,
            diagnoses,
            turns,
            retired,
            inbox,
            unmatched: UNMATCHED.into(),
        }
    }

    /// Reports `inbox`'s store from now on.
    pub fn watch_inbox(&self, inbox: Inbox) {
        self.inbox.store(Some(Arc::new(inbox)));
    }

    /// Counts an answer to a request for `route` (a template) and times it.
    fn answered(
        &self,
        route: Option<Arc<str>>,
        method: &Method,
        status: StatusCode,
        took: Duration,
    ) {
        let route = route.unwrap_or_else(|| self.unmatched.clone());
        self.latency
            .get_or_create(&RouteLabels {
                route: route.clone(),
            })
            .observe(took.as_secs_f64());
        self.requests
            .get_or_create(&RequestLabels {
                route,
                method: method_label(method),
                status: status.as_u16(),
            })
            .inc();
    }

    /// Counts a diagnosis answered.
    pub fn diagnosed(&self, d: &Diagnosis) {
        let confidence = d.matches.first().map_or("none", |m| m.confidence.as_str());
        self.diagnoses
            .get_or_create(&DiagnosisLabels {
                verdict: d.verdict.as_str(),
                confidence,
            })
            .inc();
    }

    /// Serves `new` in place of the knowledge base in `served`, keeping the replaced
    /// one's cache counts. Done under the same lock a scrape reads them with, so no
    /// scrape sees a count fall.
    pub fn swap_served(&self, served: &ArcSwap<Served>, new: Served) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        let old = served.swap(Arc::new(new));
        *retired = *retired + Caches::of(&old);
    }

    /// Every metric in the Prometheus text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::with_capacity(16 << 10);
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// A method as a label: the standard ones by name, any other as `other`, so a client
/// cannot add series with made-up methods.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// Requests past their body, waiting for a turn or holding one (see the concurrency
/// limit in `app`).
#[derive(Debug, Default)]
pub struct Turns {
    /// Waiting for a turn or holding one.
    queued: AtomicI64,
    /// Holding a turn.
    running: AtomicI64,
    /// Turns there are.
    limit: AtomicU64,
}

impl Turns {
    pub fn set_limit(&self, turns: usize) {
        self.limit.store(turns as u64, Ordering::Relaxed);
    }

    /// (waiting, holding a turn) now. Read one after the other, so a request that just
    /// took its turn could count in neither: never below 0.
    fn now(&self) -> (i64, i64) {
        let running = self.running.load(Ordering::Relaxed).max(0);
        let queued = self.queued.load(Ordering::Relaxed);
        ((queued - running).max(0), running)
    }
}

/// One more on a count for as long as it lives (a request dropped while waiting
/// included).
struct Held<'a>(&'a AtomicI64);

impl<'a> Held<'a> {
    fn new(count: &'a AtomicI64) -> Held<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Held(count)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Outside the concurrency limit: a request waiting for its turn or holding it.
pub async fn queued(State(turns): State<Arc<Turns>>, request: Request, next: Next) -> Response {
    let _queued = Held::new(&turns.queued);
    next.run(request).await
}

/// Inside the concurrency limit: a request holding its turn.
pub async fn running(State(turns): State<Arc<Turns>>, request: Request, next: Next) -> Response {
    let _running = Held::new(&turns.running);
    next.run(request).await
}

/// Where the router notes the route template a request matched, for [`track`], which
/// sees the answer after the layers that may answer instead of the route (timeout,
/// limits).
#[derive(Clone, Default)]
struct RouteSlot(Arc<OnceLock<Arc<str>>>);

/// Counts and times every answer (outside the layers that answer for a route: the
/// timeout's 503, the limits' 408, 413, 414, 431).
pub async fn track(
    State(metrics): State<Arc<Metrics>>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = RouteSlot::default();
    request.extensions_mut().insert(route.clone());
    let method = request.method().clone();
    let response = next.run(request).await;
    let route = route.0.get().cloned();
    metrics.answered(route, &method, response.status(), started.elapsed());
    response
}

/// On every route: notes the template it matched for [`track`].
pub async fn note_route(request: Request, next: Next) -> Response {
    let extensions = request.extensions();
    if let (Some(path), Some(slot)) = (
        extensions.get::<MatchedPath>(),
        extensions.get::<RouteSlot>(),
    ) {
        let _ = slot.0.set(path.as_str().into());
    }
    next.run(request).await
}

/// `GET /metrics`. Never stored by a cache between the server and the scraper: each
/// scrape must see the counts of now.
pub async fn serve(State(state): State<AppState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(
                        prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    ),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            text,
        )
            .into_response(),
        Err(err) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the metrics could not be written: {err}"),
        )
            .into_response(),
    }
}

/// The caches' counts of one knowledge base, by the share of the cache budget each
/// has (see `CacheBudget`).
#[derive(Clone, Copy, Debug, Default)]
struct Caches {
    terms: CacheStats,
    passage_terms: CacheStats,
    diagnoses: CacheStats,
    searches: CacheStats,
}

impl Caches {
    fn of(served: &Served) -> Caches {
        Caches {
            terms: served.index.term_cache_stats(),
            passage_terms: served.index.passage_cache_stats(),
            diagnoses: served.diagnoser.cache_stats(),
            searches: served.index.search_cache_stats(),
        }
    }

    fn by_name(&self) -> [(&'static str, CacheStats); 4] {
        [
            ("terms", self.terms),
            ("passage_terms", self.passage_terms),
            ("diagnoses", self.diagnoses),
            ("searches", self.searches),
        ]
    }
}

impl std::ops::Add for Caches {
    type Output = Caches;

    fn add(self, other: Caches) -> Caches {
        Caches {
            terms: self.terms + other.terms,
            passage_terms: self.passage_terms + other.passage_terms,
            diagnoses: self.diagnoses + other.diagnoses,
            searches: self.searches + other.searches,
        }
    }
}

/// What is read from the server's state at each scrape rather than counted twice.
#[derive(Debug)]
struct Observed {
    served: Arc<ArcSwap<Served>>,
    inbox: Arc<ArcSwapOption<Inbox>>,
    reloads: Arc<Mutex<ReloadStatus>>,
    retired: Arc<Mutex<Caches>>,
    turns: Arc<Turns>,
}

impl Observed {
    /// Every cache's counts since the server started, reloads included.
    fn caches(&self) -> (Caches, usize) {
        let retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        let served = self.served.load();
        (*retired + Caches::of(&served), served.index.kb().len())
    }
}

impl Collector for Observed {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (caches, entries) = self.caches();
        let reloads = {
            let status = self.reloads.lock().unwrap_or_else(|e| e.into_inner());
            [("ok", status.reloads), ("failed", status.failed_reloads)]
        };
        let (waiting, running) = self.turns.now();
        let limit = self.turns.limit.load(Ordering::Relaxed) as i64;

        for (name, help, count) in [
            (
                "cache_hits",
                "Lookups a cache answered from memory, by cache.",
                (|s: CacheStats| s.hits) as fn(CacheStats) -> u64,
            ),
            (
                "cache_misses",
                "Lookups a cache did not hold, by cache (the work was done).",
                |s: CacheStats| s.misses,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (cache, stats) in caches.by_name() {
                ConstCounter::new(count(stats))
                    .encode(family.encode_family(&[("cache", cache)])?)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "kb_reloads",
            "Reloads of the knowledge base, by result (`failed` keeps the last good one).",
            None,
            MetricType::Counter,
        )?;
        for (result, count) in reloads {
            ConstCounter::new(count).encode(family.encode_family(&[("result", result)])?)?;
        }

        for (name, help, value) in [
            (
                "kb_entries",
                "Entries in the knowledge base served.",
                entries as i64,
            ),
            (
                "requests_waiting",
                "Requests read whole and waiting for a turn (the concurrency limit).",
                waiting,
            ),
            (
                "requests_in_flight",
                "Requests holding a turn (being answered).",
                running,
            ),
            (
                "request_turns",
                "Requests that may hold a turn at once.",
                limit,
            ),
        ] {
            ConstGauge::new(value).encode(encoder.encode_descriptor(
                name,
                help,
                None,
                MetricType::Gauge,
            )?)?;
        }

        if let Some(inbox) = self.inbox.load().as_deref() {
            let store = inbox.health();
            let backend = [("backend", store.backend)];
            for (name, help, value) in [
                (
                    "store_up",
                    "Whether the inbox store took its last write (1) or is opening or failing (0).",
                    i64::from(store.state == StoreState::Ok),
                ),
                (
                    "store_queued",
                    "Inbox writes waiting for the store.",
                    store.queued as i64,
                ),
            ] {
                let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(value).encode(family.encode_family(&backend)?)?;
            }
            for (name, help, value) in [
                (
                    "store_writes",
                    "Inbox writes (captured pastes, feedback) the store took.",
                    store.written,
                ),
                (
                    "store_dropped",
                    "Inbox writes dropped: the queue was full, or the store failed them.",
                    store.dropped,
                ),
            ] {
                let mut family =
                    encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
                ConstCounter::new(value).encode(family.encode_family(&backend)?)?;
            }
        }
        Ok(())
    }
}
