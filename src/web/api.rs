//! The JSON API under `/api/v1`: typed query parameters in, typed responses out,
//! errors as problem+json. The OpenAPI document is generated from these handlers and
//! types (`routes()`), so it cannot drift from them; what the types cannot say (the
//! non-blank rule, the refusals every route can give) is added to it in one place,
//! `document`.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, AppError, Problem};
use super::error_bodies::RETRY_AFTER_SECS;
use super::{AppState, MAX_BODY_BYTES, NON_BLANK, WatchState, integer};
use crate::answer::{Affected, DiagnoseResponse, SearchResponse};
use crate::diagnose;
use crate::kb::{Entry, Lang};
use crate::search::{MAX_LIMIT, SearchQuery};

const DEFAULT_LIMIT: usize = 10;
/// Largest `offset` of a search (the OpenAPI document calls it a 32-bit number).
const MAX_OFFSET: usize = u32::MAX as usize;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "errbook",
        description = "Known problems of distributed PyTorch training (DDP, torchrun, NCCL, \
                       Accelerate, DeepSpeed): search them, read them, or diagnose a pasted \
                       traceback or log. Errors are application/problem+json (RFC 9457)."
    ),
    tags(
        (name = "search", description = "Full-text search over the entries"),
        (name = "diagnose", description = "A traceback, log or question to the entry that solves it"),
        (name = "entries", description = "The entries themselves"),
        (name = "feedback", description = "What users said of the answers, for the team's curators"),
    )
)]
struct ApiDoc;

/// The `/api/v1` routes and their OpenAPI 3.1 document, whose server is `public_url`
/// when given (else `/`, where the document was read from).
pub fn routes(public_url: Option<&str>) -> (axum::Router<AppState>, Value) {
    let (router, mut doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(search))
        .routes(routes!(diagnose))
        .routes(routes!(entries))
        .routes(routes!(entry))
        .routes(routes!(super::feedback::api))
        .split_for_parts();
    // Handlers are written with their paths under the prefix they are nested at.
    let paths = std::mem::take(&mut doc.paths.paths);
    doc.paths.paths = paths
        .into_iter()
        .map(|(path, item)| (format!("/api/v1{path}"), item))
        .collect();
    let mut doc = serde_json::to_value(&doc).unwrap_or_default();
    document(&mut doc, public_url);
    (router, doc)
}

/// Adds to the generated document what its types cannot say: the server, the rule that
/// `q` and `text` are not blank, and the refusals every route can give (a wrong method,
/// a body that is too large or too slow, a long address or headers, errbook busy).
fn document(doc: &mut Value, public_url: Option<&str>) {
    doc["servers"] = json!([{
        "url": public_url.unwrap_or("/"),
        "description": "This errbook server",
    }]);
    let search = &mut doc["paths"]["/api/v1/search"]["get"]["parameters"];
    for parameter in search.as_array_mut().into_iter().flatten() {
        if parameter["name"] == "q" {
            non_blank(&mut parameter["schema"]);
        }
    }
    non_blank(&mut doc["components"]["schemas"]["DiagnoseRequest"]["properties"]["text"]);
    let feedback = &mut doc["components"]["schemas"]["FeedbackRequest"]["properties"];
    feedback["vote"]["enum"] = json!(["yes", "no", "wrong_entry"]);
    non_blank(&mut feedback["text"]);
    non_blank(&mut feedback["entry"]);
    feedback["entry"]["maxLength"] = 200.into();
    let mut refusals = serde_json::Map::new();
    for (status, name, description, header) in REFUSALS {
        let mut response = json!({
            "description": description,
            "content": { "application/problem+json": {
                "schema": { "$ref": "#/components/schemas/Problem" },
            } },
        });
        if let Some((header, what)) = header {
            let schema = match header {
                "Retry-After" => json!({ "type": "integer", "example": RETRY_AFTER_SECS }),
                _ => json!({ "type": "string" }),
            };
            response["headers"] = json!({ header: {
                "description": what,
                "required": true,
                "schema": schema,
            } });
        }
        refusals.insert(name.to_string(), response);
        for item in doc["paths"]
            .as_object_mut()
            .into_iter()
            .flat_map(|p| p.values_mut())
        {
            for operation in item
                .as_object_mut()
                .into_iter()
                .flat_map(|i| i.values_mut())
            {
                let responses = &mut operation["responses"];
                if responses.get(status).is_none() {
                    responses[status] = json!({ "$ref": format!("#/components/responses/{name}") });
                }
            }
        }
    }
    doc["components"]["responses"] = Value::Object(refusals);
}

/// What every route can answer before its handler runs: status, name, description,
/// and the header it carries.
#[allow(clippy::type_complexity)]
const REFUSALS: [(&str, &str, &str, Option<(&str, &str)>); 6] = [
    (
        "405",
        "MethodNotAllowed",
        "The method is not one this path accepts",
        Some(("Allow", "The methods this path accepts")),
    ),
    (
        "408",
        "RequestTimeout",
        "A request body that stopped arriving (a pause over 3 s, or over 10 s in all)",
        None,
    ),
    ("413", "PayloadTooLarge", "A request body over 1 MiB", None),
    (
        "414",
        "UriTooLong",
        "An address over 16 KiB (past 64 KiB of request head, an empty answer)",
        None,
    ),
    (
        "431",
        "HeadersTooLarge",
        "Headers over 32 KiB (past 64 KiB of request head or 1,000 fields, an empty answer)",
        None,
    ),
    (
        "503",
        "Unavailable",
        "No answer within the request timeout (15 s by default): errbook is busy",
        Some(("Retry-After", "Seconds to wait before trying again")),
    ),
];

/// A string schema that must not be blank (see [`NON_BLANK`]).
fn non_blank(schema: &mut Value) {
    schema["minLength"] = 1.into();
    schema["pattern"] = NON_BLANK.into();
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQueryParams {
    /// Words or an error message, in English or Chinese; not blank. Without it, entries
    /// are listed: the tag's, or without a tag the first ones.
    #[param(example = "NCCL watchdog timeout")]
    pub q: Option<String>,
    /// Only entries with this tag (see `GET /api/v1/entries`).
    #[param(example = "nccl")]
    pub tag: Option<String>,
    /// Number of hits, 1 to 100 (default 10).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100, example = 5)]
    pub limit: Option<String>,
    /// Hits to skip, from 0 (default 0): `offset` + `limit` asks for the next page, up
    /// to `total` in the answer. Past the last hit the answer has no hits.
    #[param(value_type = Option<u32>, minimum = 0, maximum = 4_294_967_295_u32, example = 0)]
    pub offset: Option<String>,
}

/// The whole number in a query parameter `name` (absent: `default`; an integer as JSON Schema counts one), which
/// must lie in `range`; else a 422 that says what was wrong.
fn number_param(
    name: &str,
    raw: Option<&str>,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, AppError> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    query_integer(raw)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            AppError::Unprocessable(format!(
                "`{name}` must be a whole number from {} to {}, got `{}`",
                range.start(),
                range.end(),
                diagnose::clip(raw, 40)
            ))
        })
}

/// A query-string value that is an integer as JSON Schema counts one: a JSON number,
/// written without spaces, with no fractional part (`5`, `5.0`, `5e0`).
fn query_integer(raw: &str) -> Option<i64> {
    if raw.is_empty() || raw.bytes().any(|b| b.is_ascii_whitespace()) {
        return None;
    }
    integer(&serde_json::from_str(raw).ok()?)
}

/// `value` as an `application/json` response, written into a buffer of about the size
/// it will take (`axum::Json` starts at 128 bytes and grows by copying).
fn json_response<T: Serialize>(value: &T, size: usize) -> Response {
    let mut body = Vec::with_capacity(size);
    match serde_json::to_writer(&mut body, value) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        // As `axum::Json` answers: nothing errbook writes has a map key that is not a
        // string, the one way serialising to memory fails.
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Full-text search. `q` is analysed as words (never as query syntax); a `tag` alone
/// lists that tag's entries, and neither lists the first entries.
#[utoipa::path(
    get,
    path = "/search",
    tag = "search",
    operation_id = "search",
    params(SearchQueryParams),
    responses(
        (status = 200, description = "Ranked hits, best first", body = SearchResponse),
        (status = 400, description = "Malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A blank `q`, or `limit` or `offset` not a whole number in range", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn search(
    State(state): State<AppState>,
    params: Result<Query<SearchQueryParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let served = state.served();
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let limit = number_param(
        "limit",
        params.limit.as_deref(),
        DEFAULT_LIMIT,
        1..=MAX_LIMIT,
    )?;
    let offset = number_param("offset", params.offset.as_deref(), 0, 0..=MAX_OFFSET)?;
    if params.q.as_deref().is_some_and(|q| q.trim().is_empty()) {
        return Err(AppError::Unprocessable(
            "`q` is blank: give words or an error message, or leave `q` out to list \
             entries (with `tag`, that tag's)"
                .into(),
        )
        .into());
    }
    let query = SearchQuery::new(
        params.q.as_deref().unwrap_or(""),
        params.tag.as_deref(),
        limit,
    )
    .from(offset);
    let found = served.index.search(&query)?;
    let response = state.answers(&served).search(query, &found);
    Ok(json_response(&response, response.size()))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct DiagnoseRequest {
    /// The whole traceback or log as pasted (prefixes, colours and repeats are fine), or
    /// a question in words; not blank.
    pub text: String,
    /// Number of matches, 1 to 20 (default 5).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 20)]
    pub limit: Option<serde_json::Number>,
}

/// Names the known problem behind a traceback, log or question, with the paste lines
/// that show it (`matched`), candidates worth a look (`possible`), or `no_match` with the
/// closest entries; and, whatever the verdict, a `triage` of what the paste shows.
#[utoipa::path(
    post,
    path = "/diagnose",
    tag = "diagnose",
    operation_id = "diagnose",
    request_body(content = DiagnoseRequest, example = json!({
        "text": "[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
        "limit": 3,
    })),
    responses(
        (status = 200, description = "The verdict, matches with evidence, and what was parsed", body = DiagnoseResponse),
        (status = 400, description = "Malformed JSON or no `text` field (invalid UTF-8 is replaced, not refused)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body not sent as application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A blank `text`, or `limit` not a whole number from 1 to 20", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn diagnose(
    State(state): State<AppState>,
    LossyJson(request): LossyJson<DiagnoseRequest>,
) -> Result<Response, ApiError> {
    let served = state.served();
    let limit = match &request.limit {
        None => None,
        Some(n) => Some(integer(&Value::Number(n.clone())).ok_or_else(|| {
            AppError::Unprocessable(format!(
                "`limit` must be a whole number from 1 to {}, got {n}",
                diagnose::MAX_MATCHES
            ))
        })?),
    };
    let request = diagnose::Request::text(request.text, limit)?;
    let d = state.answer_paste(&served, request).await?;
    let response = state.answers(&served).diagnosis(&d);
    Ok(json_response(&response, response.size()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EntrySummary {
    pub slug: String,
    pub title: String,
    pub title_zh: String,
    pub summary: String,
    pub summary_zh: String,
    pub tags: Vec<String>,
    pub url: String,
}

impl EntrySummary {
    pub fn new(state: &AppState, e: &Entry) -> Self {
        EntrySummary {
            slug: e.slug.clone(),
            title: e.title.clone(),
            title_zh: e.title_zh.clone(),
            summary: e.summary.clone(),
            summary_zh: e.summary_zh.clone(),
            tags: e.tags.clone(),
            url: state.entry_url(&e.slug),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EntryListResponse {
    pub entries: Vec<EntrySummary>,
}

/// Every entry: slug, titles, summaries, tags and URL.
#[utoipa::path(
    get,
    path = "/entries",
    tag = "entries",
    operation_id = "list_entries",
    responses((status = 200, description = "All entries, by slug", body = EntryListResponse, example = json!({
        "entries": [{
            "slug": "nccl-watchdog-timeout",
            "title": "NCCL watchdog timeout: Watchdog caught collective operation timeout",
            "title_zh": "NCCL watchdog 超时：Watchdog caught collective operation timeout",
            "summary": "A collective did not complete on every rank within the process-group timeout because at least one rank never reached it; find the rank that is behind and make every rank issue the same collectives.",
            "summary_zh": "某个集合通信在超时时间内没有在所有 rank 上完成：通常是有 rank 没有走到这次通信；找出落后的 rank，保证所有 rank 调用相同的集合通信。",
            "tags": ["nccl", "ddp", "hang", "timeout", "debugging"],
            "url": "/entries/nccl-watchdog-timeout",
        }],
    })))
)]
pub async fn entries(State(state): State<AppState>) -> Json<EntryListResponse> {
    let served = state.served();
    Json(EntryListResponse {
        entries: served
            .index
            .kb()
            .entries()
            .iter()
            .map(|e| EntrySummary::new(&state, e))
            .collect(),
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EntryResponse {
    #[serde(flatten)]
    pub summary: EntrySummary,
    /// Error fragments (literal text or regexes) that identify the problem.
    pub signatures: Vec<String>,
    pub symptoms: Vec<String>,
    pub examples: Vec<String>,
    pub related: Vec<String>,
    pub sources: Vec<String>,
    /// Releases the problem affects, by package.
    pub versions: Vec<Affected>,
    /// The language of `markdown` and `html`: the one asked for, or `en` when the entry
    /// has no Chinese body.
    #[schema(example = "zh-CN")]
    pub lang: String,
    /// The entry body as Markdown: Symptom, Cause, Fix, Verify and Background, in
    /// Chinese 症状, 原因, 解决, 验证 and 背景.
    pub markdown: String,
    /// The same rendered to sanitized HTML.
    pub html: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EntryParams {
    /// The body's language, `en` or `zh-CN` (`zh` will do); without it, the
    /// `Accept-Language` header's, else English.
    #[param(value_type = Option<BodyLang>, inline, example = "zh-CN")]
    pub lang: Option<String>,
}

/// The languages an entry's body is written in.
#[derive(ToSchema)]
#[allow(dead_code)] // a schema only: `lang` is read as text, so `zh` is accepted too
pub enum BodyLang {
    #[schema(rename = "en")]
    En,
    #[schema(rename = "zh-CN")]
    ZhCn,
}

/// The language a request asks for: `lang` when given (an unknown one is a 422), else
/// `Accept-Language`, else English.
pub(super) fn requested_lang(lang: Option<&str>, headers: &HeaderMap) -> Result<Lang, AppError> {
    match lang {
        Some(tag) => Lang::parse(tag).ok_or_else(|| {
            AppError::Unprocessable(format!(
                "unknown `lang` `{}`: use `en` or `zh-CN`",
                diagnose::clip(tag, 40)
            ))
        }),
        None => Ok(headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok())
            .map_or(Lang::En, Lang::from_accept_language)),
    }
}

/// One entry in full: metadata, and its body as Markdown and HTML in English or Chinese.
#[utoipa::path(
    get,
    path = "/entries/{slug}",
    tag = "entries",
    operation_id = "get_entry",
    params(
        ("slug" = String, Path, description = "The entry's slug, e.g. `nccl-watchdog-timeout`", example = "nccl-watchdog-timeout"),
        EntryParams,
        ("Accept-Language" = Option<String>, Header, description = "The body's language when `lang` is not given", example = "zh-CN,zh;q=0.9"),
    ),
    responses(
        (status = 200, description = "The entry", body = EntryResponse),
        (status = 400, description = "A slug that is not valid UTF-8 once percent-decoded, or a malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No entry has this slug", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A `lang` other than `en` or `zh-CN`", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn entry(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    params: Result<Query<EntryParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Json<EntryResponse>, ApiError> {
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let lang = requested_lang(params.lang.as_deref(), &headers)?;
    let served = state.served();
    let e = served
        .index
        .kb()
        .get(&slug)
        .ok_or_else(|| AppError::NotFound(format!("there is no entry `{slug}`")))?;
    Ok(Json(EntryResponse {
        summary: EntrySummary::new(&state, e),
        signatures: e
            .signatures
            .iter()
            .map(|s| s.as_str().to_string())
            .collect(),
        symptoms: e.symptoms.clone(),
        examples: e.examples.clone(),
        related: e.related.clone(),
        sources: e.sources.clone(),
        versions: Affected::of(e),
        lang: e.body(lang).lang.code().to_string(),
        markdown: e.body(lang).markdown.clone(),
        html: e.body(lang).html().to_string(),
    }))
}

/// `/healthz`: always 200 while the server answers, with the knowledge base's state.
#[derive(Debug, Serialize)]
pub struct Health {
    /// `ok`, or `reload_failed` while the last good knowledge base is served because
    /// the latest reload found problems (listed in `reload_error`).
    pub status: &'static str,
    /// Entries served now.
    pub entries: usize,
    pub reloads: u64,
    pub failed_reloads: u64,
    /// When the served knowledge base was last reloaded (seconds since 1970).
    pub last_reload_unix: Option<u64>,
    pub reload_error: Option<HealthError>,
    /// `off` (no `--watch`), `watching`, or `failed` while a broken watch waits to be
    /// set up again (`watch_error` says why).
    pub watch: &'static str,
    /// The folder watched: where the kb path leads now, symlinks resolved.
    pub watch_target: Option<String>,
    pub watch_error: Option<String>,
    /// Times a failed watch was set up again.
    pub watch_restarts: u64,
    /// The inbox's store, when the server keeps one. A failing store never fails the
    /// server: answers go on, and its writes are dropped and counted.
    pub store: Option<HealthStore>,
}

#[derive(Debug, Serialize)]
pub struct HealthStore {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// `opening`, `ok`, or `failing` (`error` says why).
    pub state: &'static str,
    pub error: Option<String>,
    /// Whether pastes errbook could not answer are kept (`--capture`).
    pub capture: bool,
    /// Writes waiting, taken, and dropped (queue full or store failing).
    pub queued: u64,
    pub written: u64,
    pub dropped: u64,
}

#[derive(Debug, Serialize)]
pub struct HealthError {
    pub message: String,
    /// Each problem as `file:line: message`.
    pub problems: Vec<String>,
    pub at_unix: u64,
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub async fn healthz(State(state): State<AppState>) -> Json<Health> {
    let served = state.served();
    let reloads = state.reload_status();
    Json(Health {
        status: if reloads.error.is_some() {
            "reload_failed"
        } else {
            "ok"
        },
        entries: served.index.kb().len(),
        reloads: reloads.reloads,
        failed_reloads: reloads.failed_reloads,
        last_reload_unix: reloads.last_reload.map(unix_seconds),
        reload_error: reloads.error.map(|e| HealthError {
            message: e.message,
            problems: e.problems,
            at_unix: unix_seconds(e.at),
        }),
        watch: match reloads.watch {
            WatchState::Off => "off",
            WatchState::Watching(_) => "watching",
            WatchState::Failed(_) => "failed",
        },
        watch_target: match &reloads.watch {
            WatchState::Watching(path) => Some(path.display().to_string()),
            _ => None,
        },
        watch_error: match &reloads.watch {
            WatchState::Failed(why) => Some(why.clone()),
            _ => None,
        },
        watch_restarts: reloads.watch_restarts,
        store: state.inbox.as_ref().map(|inbox| {
            let h = inbox.health();
            HealthStore {
                backend: h.backend,
                state: h.state.as_str(),
                error: h.error,
                capture: h.capture,
                queued: h.queued,
                written: h.written,
                dropped: h.dropped,
            }
        }),
    })
}

pub async fn not_found() -> ApiError {
    AppError::NotFound("no API route at this address; see /api/v1/openapi.json".into()).into()
}

/// A JSON request body, with invalid UTF-8 replaced by U+FFFD instead of refused: a
/// log copied from a terminal may hold broken bytes and still deserves an answer.
/// Refused as problem+json: too large (413), not sent as JSON (415), malformed or
/// missing a field (400).
pub struct LossyJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for LossyJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(request.headers()) {
            return Err(AppError::UnsupportedMediaType(
                "send the body as JSON, with `Content-Type: application/json`".into(),
            )
            .into());
        }
        let bytes =
            Bytes::from_request(request, state)
                .await
                .map_err(|rejection| match rejection.status() {
                    StatusCode::PAYLOAD_TOO_LARGE => AppError::body_too_large(MAX_BODY_BYTES),
                    _ => AppError::BadRequest(rejection.body_text()),
                })?;
        let text = String::from_utf8_lossy(&bytes);
        let Json(value) = Json::<T>::from_bytes(text.as_bytes())
            .map_err(|rejection| ApiError(AppError::BadRequest(rejection.body_text())))?;
        Ok(LossyJson(value))
    }
}

/// `application/json`, or a `+json` type, by the request's `Content-Type`.
pub(super) fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_are_whole_json_with_their_content_type_past_the_size_guessed() {
        #[derive(Serialize)]
        struct Answer {
            title: &'static str,
            score: f32,
        }
        let answer = Answer {
            title: "显存 \"x\"",
            score: 1.5,
        };
        let response = json_response(&answer, 4);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            HeaderValue::from_static("application/json")
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(
            &body[..],
            r#"{"title":"显存 \"x\"","score":1.5}"#.as_bytes()
        );
    }
}
