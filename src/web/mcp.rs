//! `POST /mcp`: errbook as a Model Context Protocol server, so that an assistant can
//! search, read and diagnose against the knowledge base through tool calls.
//!
//! The subset of MCP 2025-06-18 implemented, over the streamable HTTP transport:
//! - one JSON-RPC 2.0 message per POST, answered with one `application/json` response;
//!   no SSE stream (`GET /mcp` is 405), no batches, no sessions: every request stands
//!   alone, so any replica can answer it;
//! - requests `initialize`, `ping`, `tools/list` and `tools/call`; a notification, or a
//!   response from the client, is accepted with `202 Accepted` and an empty body;
//! - three read-only tools, `search`, `fetch` and `diagnose`, whose results carry
//!   `structuredContent` that matches their `outputSchema`, and the same JSON as text;
//! - `initialize` answers with the version the client asks for when it is one we speak,
//!   else the latest we speak; the `MCP-Protocol-Version` header, when sent, must name a
//!   version we speak.
//!
//! Errors follow the spec's split. A message that is not JSON, or not a JSON-RPC request,
//! is rejected with HTTP 400 and a JSON-RPC error; an unknown method or tool is a
//! JSON-RPC error; a tool called with bad arguments (a paste over [`MAX_TEXT_CHARS`]
//! included) answers with `isError: true` and a message the model can act on, since a
//! client shows the model tool results, not protocol errors. Refusals made before the
//! message is read (a body over its limit, a wrong method, errbook busy) are JSON-RPC
//! errors too, with a null id.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use super::{AppState, integer, off_the_runtime};
use crate::answer::{self, Affected, DiagnoseResponse};
use crate::diagnose::{DEFAULT_MATCHES, MAX_MATCHES, Request, clip};
use crate::kb::{Branch, Kb, Lang, Section};
use crate::search::{SearchError, SearchQuery};

/// The protocol version this server speaks, and answers `initialize` with.
const PROTOCOL_VERSION: &str = "2025-06-18";
/// Versions accepted in the `MCP-Protocol-Version` header (the older one differs only
/// in features this server does not use).
const ACCEPTED_VERSIONS: [&str; 2] = [PROTOCOL_VERSION, "2025-03-26"];
const VERSION_HEADER: &str = "mcp-protocol-version";

// JSON-RPC 2.0 error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

const INSTRUCTIONS: &str = "errbook is an offline knowledge base of distributed-training \
failures (PyTorch DDP/FSDP, NCCL, CUDA, torchrun), each entry with its cause and fix. Call \
`diagnose` with a pasted traceback or log, `search` to look entries up by words or error \
codes, and `fetch` to read an entry by its id.";

const TOOL_NAMES: &str = "`search`, `fetch`, `diagnose` and `feedback`";

/// Longest paste `diagnose` takes, in characters (what JSON Schema's `maxLength`
/// counts): far more than the failure's own lines, which is what the model should send.
pub const MAX_TEXT_CHARS: usize = 512 * 1024;
/// Longest `search` query: an error message or a question, not a log.
const MAX_QUERY_CHARS: usize = 2_000;

/// `POST /mcp`: one JSON-RPC message in; a JSON-RPC response, or `202 Accepted`, out.
pub async fn handle(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(origin) = headers.get(header::ORIGIN)
        && !state.origin_allowed(&String::from_utf8_lossy(origin.as_bytes()))
    {
        // A web page the user visits must not drive the tools (DNS rebinding).
        return reject_with(
            StatusCode::FORBIDDEN,
            RpcError::new(
                INVALID_REQUEST,
                "this Origin may not call errbook's MCP endpoint; the server's operator can \
                 allow it with --allowed-origin",
            ),
        );
    }
    if !super::api::is_json(&headers) {
        return reject_with(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            RpcError::new(
                INVALID_REQUEST,
                "send the JSON-RPC message with Content-Type: application/json",
            ),
        );
    }
    if let Err(error) = check_version(&headers) {
        return reject(error);
    }
    // Broken UTF-8 in a pasted log becomes U+FFFD rather than a parse error.
    match Message::parse(String::from_utf8_lossy(&body).as_bytes()) {
        Err(error) => reject(error),
        Ok(Message::Request { id, method, params }) => {
            // A large paste is diagnosed on a blocking thread, as the API's is.
            let dispatched = {
                let state = state.clone();
                off_the_runtime(body.len(), move || dispatch(&state, &method, params)).await
            };
            let answered = dispatched
                .unwrap_or_else(|error| Err(RpcError::new(INTERNAL_ERROR, error.to_string())));
            let outcome = match answered {
                Ok(result) => Outcome::Result(result),
                Err(error) => Outcome::Error(error),
            };
            Json(RpcResponse::new(Some(id), outcome)).into_response()
        }
        Ok(Message::Notification { method }) => {
            tracing::debug!(%method, "MCP notification");
            StatusCode::ACCEPTED.into_response()
        }
        Ok(Message::Response) => StatusCode::ACCEPTED.into_response(),
    }
}

/// An absent `MCP-Protocol-Version` header is accepted (the spec says to assume the
/// older version then); a present one must name a version this server speaks.
fn check_version(headers: &HeaderMap) -> Result<(), RpcError> {
    let Some(value) = headers.get(VERSION_HEADER) else {
        return Ok(());
    };
    let version = String::from_utf8_lossy(value.as_bytes());
    if ACCEPTED_VERSIONS.contains(&version.trim()) {
        return Ok(());
    }
    Err(RpcError::new(
        INVALID_REQUEST,
        format!(
            "unsupported MCP-Protocol-Version `{}`; this server speaks {}",
            clip(&version, 40),
            ACCEPTED_VERSIONS.join(" and ")
        ),
    ))
}

/// A message that could not be taken as a request: HTTP 400, with the error and a null id.
fn reject(error: RpcError) -> Response {
    reject_with(StatusCode::BAD_REQUEST, error)
}

fn reject_with(status: StatusCode, error: RpcError) -> Response {
    let body = Json(RpcResponse::new(None, Outcome::Error(error)));
    (status, body).into_response()
}

/// A refusal made before the message was read (a limit, a wrong method, errbook busy),
/// as a JSON-RPC error with a null id: MCP clients hand that to the caller of the
/// request, where a problem document would be an unexplained HTTP error.
pub(super) fn http_error(status: StatusCode, detail: String) -> Response {
    let code = if status.is_server_error() {
        INTERNAL_ERROR
    } else {
        INVALID_REQUEST
    };
    reject_with(status, RpcError::new(code, detail))
}

// ---------------------------------------------------------------------------------
// JSON-RPC envelope

/// A request id: MCP allows a string or an integer, never null.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum RequestId {
    Number(i64),
    Text(String),
}

/// One incoming message, classified.
#[derive(Debug)]
enum Message {
    Request {
        id: RequestId,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
    },
    /// A response to a request of the server's; this server sends none, so it is ignored.
    Response,
}

/// Any JSON-RPC 2.0 message, before it is told apart.
#[derive(Debug, Deserialize)]
struct Envelope {
    jsonrpc: String,
    /// `Some(Value::Null)` for `"id": null`, which is not the same as no id.
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    method: Option<String>,
    params: Option<Value>,
    result: Option<IgnoredAny>,
    error: Option<IgnoredAny>,
}

/// Keeps a field that is present but null apart from a missing one (`default` gives `None`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Message {
    fn parse(body: &[u8]) -> Result<Message, RpcError> {
        let invalid = |message: String| RpcError::new(INVALID_REQUEST, message);
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| RpcError::new(PARSE_ERROR, format!("the body is not valid JSON: {e}")))?;
        if value.is_array() {
            return Err(invalid(format!(
                "JSON-RPC batches are not supported in MCP {PROTOCOL_VERSION}: send one message per POST"
            )));
        }
        if !value.is_object() {
            return Err(invalid("expected a JSON-RPC 2.0 message object".into()));
        }
        let envelope: Envelope = serde_json::from_value(value)
            .map_err(|e| invalid(format!("not a JSON-RPC 2.0 message: {e}")))?;
        if envelope.jsonrpc != "2.0" {
            return Err(invalid(format!(
                "`jsonrpc` must be \"2.0\", got {:?}",
                clip(&envelope.jsonrpc, 20)
            )));
        }
        match (envelope.method, envelope.id) {
            (Some(method), None) => Ok(Message::Notification { method }),
            (Some(method), Some(id)) => {
                let id = RequestId::deserialize(id)
                    .map_err(|_| invalid("`id` must be a string or an integer".into()))?;
                Ok(Message::Request {
                    id,
                    method,
                    params: envelope.params,
                })
            }
            (None, Some(_)) if envelope.result.is_some() || envelope.error.is_some() => {
                Ok(Message::Response)
            }
            (None, _) => Err(invalid("missing `method`".into())),
        }
    }
}

#[derive(Debug, Serialize)]
struct RpcResponse {
    jsonrpc: &'static str,
    /// Null when the request's id could not be read.
    id: Option<RequestId>,
    #[serde(flatten)]
    outcome: Outcome,
}

impl RpcResponse {
    fn new(id: Option<RequestId>, outcome: Outcome) -> Self {
        RpcResponse {
            jsonrpc: "2.0",
            id,
            outcome,
        }
    }
}

/// Serialized as a `result` or an `error` member.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
enum Outcome {
    Result(Value),
    Error(RpcError),
}

#[derive(Debug, Serialize)]
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

// ---------------------------------------------------------------------------------
// Methods

fn dispatch(state: &AppState, method: &str, params: Option<Value>) -> Result<Value, RpcError> {
    match method {
        "initialize" => Ok(initialize(params.as_ref())),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tool_definitions(state) })),
        "tools/call" => call_tool(state, params),
        _ => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!(
                "method `{}` is not supported; errbook implements initialize, ping, \
                 tools/list and tools/call",
                clip(method, 60)
            ),
        )),
    }
}

/// The answer to `initialize`: the version the client asked for when the server speaks
/// it, else the latest it speaks (a client that cannot speak that disconnects), as the
/// spec's version negotiation says.
fn initialize(params: Option<&Value>) -> Value {
    let asked = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let version = asked
        .filter(|v| ACCEPTED_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": {
            "name": "errbook",
            "title": "errbook",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": INSTRUCTIONS,
    })
}

/// `tools/call` parameters; `_meta` and future fields are ignored.
#[derive(Debug, Deserialize)]
struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Value,
}

fn call_tool(state: &AppState, params: Option<Value>) -> Result<Value, RpcError> {
    let params: CallParams = params
        .map(serde_json::from_value)
        .transpose()
        .ok()
        .flatten()
        .ok_or_else(|| {
            RpcError::new(
                INVALID_PARAMS,
                format!(
                    "tools/call needs params {{\"name\": <tool>, \"arguments\": {{...}}}}; \
                     the tools are {TOOL_NAMES}"
                ),
            )
        })?;
    let arguments = params.arguments;
    let outcome = match params.name.as_str() {
        "search" => search(state, arguments),
        "fetch" => fetch(state, arguments),
        "diagnose" => diagnose(state, arguments),
        "feedback" => feedback(state, arguments),
        other => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "unknown tool `{}`; the tools are {TOOL_NAMES}",
                    clip(other, 60)
                ),
            ));
        }
    };
    match outcome {
        Ok(result) => Ok(result),
        Err(ToolError::Invalid(message)) => Ok(json!({
            "content": [{ "type": "text", "text": message }],
            "isError": true,
        })),
        Err(ToolError::Internal(detail)) => {
            tracing::error!(tool = %params.name, error = %detail, "MCP tool failed");
            Err(RpcError::new(
                INTERNAL_ERROR,
                "errbook failed to run the tool; the details are in the server log",
            ))
        }
    }
}

/// Why a tool call failed.
#[derive(Debug)]
enum ToolError {
    /// The caller's fault: reported as a tool result with `isError`, for the model to read.
    Invalid(String),
    /// Ours: logged, and reported as a JSON-RPC internal error.
    Internal(String),
}

impl From<SearchError> for ToolError {
    fn from(error: SearchError) -> Self {
        ToolError::Internal(error.to_string())
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(error: serde_json::Error) -> Self {
        ToolError::Internal(error.to_string())
    }
}

/// A tool's arguments, typed. They are first checked against the tool's `inputSchema`
/// (names and types), so that a message names the argument at fault; a null counts as
/// absent. `usage` says what the tool accepts.
fn arguments<T: DeserializeOwned>(
    tool: &str,
    schema: &Value,
    arguments: Value,
    usage: &str,
) -> Result<T, ToolError> {
    let invalid = |problem: String| ToolError::Invalid(format!("{problem}. {usage}"));
    let mut arguments = match arguments {
        Value::Null => serde_json::Map::new(),
        Value::Object(map) => map,
        _ => {
            return Err(invalid(format!(
                "the arguments of `{tool}` must be a JSON object"
            )));
        }
    };
    arguments.retain(|_, value| !value.is_null());
    for (name, value) in &mut arguments {
        let Some(property) = schema["properties"].get(name.as_str()) else {
            return Err(invalid(format!(
                "`{tool}` has no argument `{}`",
                clip(name, 40)
            )));
        };
        if let Some(allowed) = property["enum"].as_array()
            && !allowed.contains(value)
        {
            return Err(invalid(format!(
                "`{name}` must be one of: {}; or leave it out",
                listed(allowed.iter().filter_map(Value::as_str))
            )));
        }
        let wanted = match property["type"].as_str() {
            Some("string") => match value.as_str() {
                None => Some("a string"),
                Some(text) => {
                    too_long(name, text, &property["maxLength"]).map_err(invalid)?;
                    None
                }
            },
            Some("integer") => match integer(value) {
                Some(n) => {
                    *value = n.into();
                    None
                }
                None => Some("an integer"),
            },
            _ => None,
        };
        if let Some(wanted) = wanted {
            return Err(invalid(format!(
                "`{name}` must be {wanted}, got {}",
                clip(&value.to_string(), 40)
            )));
        }
    }
    serde_json::from_value(Value::Object(arguments))
        .map_err(|e| invalid(format!("invalid arguments for `{tool}`: {e}")))
}

/// Refuses a text longer than the schema's `maxLength`, in characters, saying how much
/// to send.
fn too_long(name: &str, text: &str, max: &Value) -> Result<(), String> {
    let Some(max) = max.as_u64() else {
        return Ok(());
    };
    let chars = text.chars().count() as u64;
    if chars <= max {
        return Ok(());
    }
    Err(format!(
        "`{name}` is {chars} characters, over the limit of {max}: send at most {max} \
         characters"
    ))
}

/// A `limit` argument checked against `1..=max`.
fn limit(value: Option<i64>, default: usize, max: usize, usage: &str) -> Result<usize, ToolError> {
    match value {
        None => Ok(default),
        Some(n) if n >= 1 && n as usize <= max => Ok(n as usize),
        Some(n) => Err(ToolError::Invalid(format!(
            "`limit` must be from 1 to {max}, got {n}. {usage}"
        ))),
    }
}

/// A required text argument, which must not be blank.
fn required_text<'a>(name: &str, value: &'a str, usage: &str) -> Result<&'a str, ToolError> {
    if value.trim().is_empty() {
        Err(ToolError::Invalid(format!("`{name}` is empty. {usage}")))
    } else {
        Ok(value)
    }
}

// ---------------------------------------------------------------------------------
// Tool results and their size budget

/// Largest tool result, in bytes of JSON; as a character takes at least one byte, the
/// whole JSON-RPC response stays under 100,000 characters.
const MAX_RESULT_BYTES: usize = 99_000;
/// Longest text field on the first attempt; halved until the result fits.
const FIELD_CHARS: usize = 48_000;
/// Shortest cut: below it, the limits on list lengths already bound the result.
const MIN_FIELD_CHARS: usize = 200;

/// Cuts long texts to `max_chars`, and remembers whether anything was cut.
struct Clip {
    max_chars: usize,
    cut: bool,
}

impl Clip {
    fn text(&mut self, text: &str) -> String {
        let clipped = clip(text, self.max_chars);
        self.cut |= clipped.len() != text.len();
        clipped
    }
}

/// A tool's output with the flag that says whether fields were cut to fit.
#[derive(Serialize)]
struct Clipped<T> {
    #[serde(flatten)]
    output: T,
    truncated: bool,
}

/// The `tools/call` result for the output `build` makes, with text fields cut as much as
/// needed to keep the whole result under `MAX_RESULT_BYTES`.
fn fit<T: Serialize>(mut build: impl FnMut(&mut Clip) -> T) -> Result<Value, ToolError> {
    let mut max_chars = FIELD_CHARS;
    loop {
        let mut clip = Clip {
            max_chars,
            cut: false,
        };
        let output = build(&mut clip);
        let structured = serde_json::to_value(Clipped {
            output,
            truncated: clip.cut,
        })?;
        let result = json!({
            "content": [{ "type": "text", "text": structured.to_string() }],
            "structuredContent": structured,
            "isError": false,
        });
        if max_chars <= MIN_FIELD_CHARS || result.to_string().len() <= MAX_RESULT_BYTES {
            return Ok(result);
        }
        max_chars /= 2;
    }
}

// ---------------------------------------------------------------------------------
// The tools

const SEARCH_MAX_LIMIT: usize = 20;
const SEARCH_DEFAULT_LIMIT: usize = 5;
const SEARCH_USAGE: &str = "Arguments: `query` (string, required, at most 2000 characters: an \
error message, exception type, error code or question; send a whole log to `diagnose`), `tag` \
(string, optional), `limit` (integer 1-20, default 5).";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    tag: Option<String>,
    limit: Option<i64>,
}

#[derive(Serialize)]
struct SearchOutput {
    results: Vec<SearchResult>,
}

#[derive(Serialize)]
struct SearchResult {
    id: String,
    title: String,
    title_zh: String,
    url: String,
    /// The problem and its fix in a few sentences.
    summary: String,
    snippet: String,
    tags: Vec<String>,
}

fn search(state: &AppState, args: Value) -> Result<Value, ToolError> {
    let served = state.served();
    let kb = served.index.kb();
    let args: SearchArgs = arguments("search", &search_input_schema(kb), args, SEARCH_USAGE)?;
    let text = required_text("query", &args.query, SEARCH_USAGE)?;
    let limit = limit(
        args.limit,
        SEARCH_DEFAULT_LIMIT,
        SEARCH_MAX_LIMIT,
        SEARCH_USAGE,
    )?;
    let query = SearchQuery::new(text, args.tag.as_deref(), limit);
    let found = served.index.search(&query)?;
    fit(|clip| SearchOutput {
        results: (found.hits.iter())
            .filter_map(|hit| {
                let entry = kb.get(&hit.slug)?;
                Some(SearchResult {
                    id: entry.slug.clone(),
                    title: entry.title.clone(),
                    title_zh: entry.title_zh.clone(),
                    url: state.entry_url(&entry.slug),
                    summary: clip.text(&entry.summary),
                    snippet: clip.text(&hit.snippet),
                    tags: entry.tags.clone(),
                })
            })
            .collect(),
    })
}

/// `names` comma-separated, at most 40 of them.
fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let mut listed = names
        .iter()
        .take(40)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 40 {
        listed.push_str(", …");
    }
    listed
}

const FETCH_USAGE: &str = "Arguments: `id` (string, required: an entry id returned by \
`search` or `diagnose`), `lang` (`en` or `zh-CN`, default `en`: the language of the texts).";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FetchArgs {
    id: String,
    lang: Option<String>,
}

/// An entry as a model needs it: what the problem looks like, why it happens, how to
/// fix and check it, in Markdown. The regexes that recognise it and where it was
/// drawn from stay out: they are for the diagnosis, not for a reader.
#[derive(Serialize)]
struct FetchOutput {
    id: String,
    /// The language of the texts below: the one asked for (`en` when the entry has no
    /// Chinese body; its title and summary are then still Chinese).
    lang: &'static str,
    title: String,
    url: String,
    summary: String,
    symptoms: String,
    cause: String,
    fix: String,
    verify: String,
    /// The causes this symptom has, each with its own fix, when there are several.
    causes: Vec<FetchCause>,
    related: Vec<RelatedEntry>,
    /// Public pages (issues, documentation) the entry rests on.
    references: Vec<String>,
    versions: Vec<Affected>,
}

#[derive(Serialize)]
struct FetchCause {
    id: String,
    title: String,
    fix: String,
}

#[derive(Serialize)]
struct RelatedEntry {
    id: String,
    title: String,
}

fn fetch(state: &AppState, args: Value) -> Result<Value, ToolError> {
    let served = state.served();
    let kb = served.index.kb();
    let args: FetchArgs = arguments("fetch", &fetch_input_schema(kb), args, FETCH_USAGE)?;
    let id = required_text("id", &args.id, FETCH_USAGE)?.trim();
    let entry = kb.get(id).ok_or_else(|| {
        ToolError::Invalid(format!(
            "there is no entry with id `{}`. Ids are slugs such as `nccl-invalid-usage`: \
             call the `search` tool to find the right one.",
            clip(id, 80)
        ))
    })?;
    let lang = match args.lang.as_deref() {
        None => Lang::En,
        Some(tag) => Lang::parse(tag).ok_or_else(|| {
            ToolError::Invalid(format!(
                "unknown `lang` `{}`: use `en` or `zh-CN`. {FETCH_USAGE}",
                clip(tag, 40)
            ))
        })?,
    };
    let body = entry.body(lang);
    let section = |section: Section| body.section(section).unwrap_or_default();
    let pick = |en, zh| lang.pick(en, zh);
    fit(|clip| FetchOutput {
        id: entry.slug.clone(),
        lang: body.lang.code(),
        title: pick(&entry.title, &entry.title_zh).to_string(),
        url: state.entry_url(&entry.slug),
        summary: clip.text(pick(&entry.summary, &entry.summary_zh)),
        symptoms: clip.text(section(Section::Symptom)),
        cause: clip.text(section(Section::Cause)),
        fix: clip.text(section(Section::Fix)),
        verify: clip.text(section(Section::Verify)),
        causes: (entry.branches.iter())
            .map(|b| FetchCause {
                id: b.id.clone(),
                title: pick(&b.title, &b.title_zh).to_string(),
                // Without a paste, each placeholder reads as its fallback.
                fix: clip.text(&Branch::filled(pick(&b.fix, &b.fix_zh), &[])),
            })
            .collect(),
        related: (entry.related.iter())
            .filter_map(|slug| kb.get(slug))
            .map(|r| RelatedEntry {
                id: r.slug.clone(),
                title: pick(&r.title, &r.title_zh).to_string(),
            })
            .collect(),
        references: (entry.sources.iter())
            .filter(|s| s.starts_with("https://") || s.starts_with("http://"))
            .cloned()
            .collect(),
        versions: Affected::of(entry),
    })
}

/// Most exceptions, frames, error codes, versions and evidence lines in a diagnosis.
const MAX_PARSED_ITEMS: usize = 10;
const DIAGNOSE_USAGE: &str = "Arguments: `text` (string, required: the traceback, log excerpt \
or question, as pasted), `limit` (integer 1-20, default 5).";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiagnoseArgs {
    text: String,
    limit: Option<i64>,
}

/// The diagnosis, in the API's shape (`DiagnoseResponse`), cut to fit.
fn diagnose(state: &AppState, args: Value) -> Result<Value, ToolError> {
    let served = state.served();
    let args: DiagnoseArgs = arguments("diagnose", &diagnose_input_schema(), args, DIAGNOSE_USAGE)?;
    let request = Request::text(args.text, args.limit)
        .map_err(|err| ToolError::Invalid(format!("{err}. {DIAGNOSE_USAGE}")))?;
    let d = served.diagnoser.answer(&request)?;
    state.metrics.diagnosed(&d);
    if let Some(text) = request.text_pasted() {
        state.capture(text, &d);
    }
    let answers = state.answers(&served);
    fit(|clip| {
        let mut answer = answers.diagnosis(&d);
        clip.cut |= answer.clip(clip.max_chars, MAX_PARSED_ITEMS);
        answer
    })
}

const FEEDBACK_USAGE: &str = "Arguments: `vote` (required: `yes` when the fix worked, `no` \
when the entry was right but its fix did not work, `wrong_entry` when it named the wrong \
problem), `entry` (string, required: the id of the entry the answer named), `text` (the paste \
the answer was about, as sent to `diagnose`), `comment` (the user's own words).";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedbackArgs {
    vote: String,
    entry: String,
    text: Option<String>,
    comment: Option<String>,
}

/// Passes on what the user said of an answer, for the team's curators.
fn feedback(state: &AppState, args: Value) -> Result<Value, ToolError> {
    let served = state.served();
    let args: FeedbackArgs = arguments("feedback", &feedback_input_schema(), args, FEEDBACK_USAGE)?;
    let vote = crate::inbox::Vote::parse(args.vote.trim()).ok_or_else(|| {
        ToolError::Invalid(format!(
            "unknown `vote` `{}`. {FEEDBACK_USAGE}",
            clip(&args.vote, 40)
        ))
    })?;
    let entry = required_text("entry", &args.entry, FEEDBACK_USAGE)?.trim();
    let d = match &args.text {
        Some(text) => {
            let request = Request::text(text.as_str(), None)
                .map_err(|err| ToolError::Invalid(format!("`text`: {err}. {FEEDBACK_USAGE}")))?;
            Some(served.diagnoser.answer(&request)?)
        }
        None => None,
    };
    let answered = args.text.as_deref().zip(d.as_ref());
    match super::feedback::record(
        state,
        &served,
        vote,
        entry,
        answered,
        args.comment.as_deref(),
    ) {
        Ok(recorded) => fit(|_| &recorded),
        Err(err) => Err(ToolError::Invalid(format!(
            "{}. {FEEDBACK_USAGE}",
            err.public_detail()
        ))),
    }
}

// ---------------------------------------------------------------------------------
// Tool definitions

/// The `tools/list` entries: names, descriptions and JSON Schemas of input and output.
fn tool_definitions(state: &AppState) -> Vec<Value> {
    let served = state.served();
    let kb = served.index.kb();
    vec![
        tool(
            "search",
            "Search errbook",
            "Search errbook, a knowledge base of distributed-training failures (PyTorch \
             DDP/FSDP, NCCL, CUDA, torchrun), by error message, error code or question \
             (English or Chinese). Returns entry ids, titles, summaries with the fix in \
             brief, and snippets; `fetch` reads one.",
            search_input_schema(kb),
            search_output_schema(),
        ),
        tool(
            "fetch",
            "Read an errbook entry",
            "Read one errbook entry by its id (from `search` or `diagnose`): summary, \
             symptoms, cause, fix and how to verify it, in Markdown (in Chinese with `lang` `zh-CN`); its several causes \
             with their fixes, if it has them; related entries and references.",
            fetch_input_schema(kb),
            fetch_output_schema(),
        ),
        tool(
            "diagnose",
            "Diagnose a training failure",
            "Diagnose a pasted traceback or log of a distributed-training job. `matched`: \
             the first entry is the answer. `possible`: candidates; check their evidence \
             lines first. `no_match`: unknown. `triage` always says which rank failed \
             first, with what, where, and what only follows.",
            diagnose_input_schema(),
            diagnose_output_schema(),
        ),
        {
            let mut tool = tool(
                "feedback",
                "Pass on whether an answer helped",
                "Tell the team that keeps errbook what the user said of an answer: `yes` \
                 the fix worked, `no` the entry was right but its fix did not work, \
                 `wrong_entry` it named the wrong problem. Call it when the user says so; \
                 with `text`, the paste the answer was about.",
                feedback_input_schema(),
                feedback_output_schema(),
            );
            tool["annotations"] =
                json!({ "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false });
            tool
        },
    ]
}

fn tool(name: &str, title: &str, description: &str, input: Value, output: Value) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input,
        "outputSchema": output,
        "annotations": { "readOnlyHint": true },
    })
}

/// A required text that is not blank: `minLength` and a `pattern` that finds a
/// character other than white space (see [`super::NON_BLANK`]), and at most `max`.
fn text_argument(max: usize, description: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": max,
        "pattern": super::NON_BLANK,
        "description": description,
    })
}

/// Characters in the longest of `names`: no id or tag longer can name anything.
fn longest<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names.map(|n| n.chars().count()).max().unwrap_or(1).max(1)
}

fn search_input_schema(kb: &Kb) -> Value {
    let tags: Vec<&str> = kb.tags().map(|(tag, _)| tag).collect();
    json!({
        "type": "object",
        "properties": {
            "query": text_argument(
                MAX_QUERY_CHARS,
                "Error message, exception type, NCCL/CUDA error code or question, in \
                 English or Chinese. For a whole log, call `diagnose`.",
            ),
            "tag": {
                "type": "string",
                "enum": tags,
                "maxLength": longest(tags.iter().copied()),
                "description": "Only entries with this tag.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": SEARCH_MAX_LIMIT,
                "default": SEARCH_DEFAULT_LIMIT,
                "description": "Most results to return.",
            },
        },
        "required": ["query"],
        "additionalProperties": false,
    })
}

fn fetch_input_schema(kb: &Kb) -> Value {
    let slugs = kb.entries().iter().map(|e| e.slug.as_str());
    json!({
        "type": "object",
        "properties": {
            "id": text_argument(longest(slugs), "Entry id (slug), e.g. `nccl-invalid-usage`."),
            "lang": {
                "type": "string",
                "enum": ["en", "zh-CN"],
                "maxLength": 5,
                "default": "en",
                "description": "Language of the texts: `zh-CN` for a user who writes Chinese.",
            },
        },
        "required": ["id"],
        "additionalProperties": false,
    })
}

fn diagnose_input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": text_argument(
                MAX_TEXT_CHARS,
                "The traceback, log excerpt or question, as pasted; keep the error lines \
                 and the lines around them. From a longer log, send the traceback and the \
                 lines around the first error.",
            ),
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_MATCHES,
                "default": DEFAULT_MATCHES,
                "description": "Most entries to return.",
            },
        },
        "required": ["text"],
        "additionalProperties": false,
    })
}

fn feedback_input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "vote": {
                "type": "string",
                "enum": ["yes", "no", "wrong_entry"],
                "maxLength": 11,
                "description": "`yes`: the fix worked; `no`: the right problem, but the fix did not work; `wrong_entry`: the wrong problem.",
            },
            "entry": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "The id of the entry the answer named (from `diagnose` or `search`).",
            },
            "text": text_argument(
                MAX_TEXT_CHARS,
                "The paste the answer was about, as sent to `diagnose`.",
            ),
            "comment": {
                "type": "string",
                "maxLength": 2000,
                "description": "What the user said, in their words.",
            },
        },
        "required": ["vote", "entry"],
        "additionalProperties": false,
    })
}

fn feedback_output_schema() -> Value {
    object(json!({
        "recorded": { "type": "boolean" },
        "kept_paste": {
            "type": "boolean",
            "description": "Whether the paste was kept with it (the server captures pastes).",
        },
        "truncated": truncated(),
    }))
}

/// An object schema whose every property is required.
fn object(properties: Value) -> Value {
    let required: Vec<&String> = properties
        .as_object()
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    json!({ "type": "object", "properties": properties, "required": required })
}

fn string() -> Value {
    json!({ "type": "string" })
}

fn strings() -> Value {
    json!({ "type": "array", "items": string() })
}

fn array(items: Value) -> Value {
    json!({ "type": "array", "items": items })
}

fn truncated() -> Value {
    json!({
        "type": "boolean",
        "description": "True when long texts or lists were cut to keep the result small.",
    })
}

fn search_output_schema() -> Value {
    object(json!({
        "results": array(object(json!({
            "id": string(),
            "title": string(),
            "title_zh": string(),
            "url": string(),
            "summary": string(),
            "snippet": string(),
            "tags": strings(),
        }))),
        "truncated": truncated(),
    }))
}

fn fetch_output_schema() -> Value {
    let markdown = |what: &str| json!({ "type": "string", "description": what });
    object(json!({
        "id": string(),
        "lang": { "type": "string", "enum": ["en", "zh-CN"], "description": "The language of the texts." },
        "title": string(),
        "url": string(),
        "summary": markdown("The problem and its fix in a few sentences."),
        "symptoms": markdown("What the failure looks like (Markdown)."),
        "cause": markdown("Why it happens (Markdown)."),
        "fix": markdown("What to change (Markdown)."),
        "verify": markdown("How to check the fix worked (Markdown)."),
        "causes": {
            "type": "array",
            "description": "The symptom's several causes, each with its own fix, when it has more than one.",
            "items": object(json!({ "id": string(), "title": string(), "fix": string() })),
        },
        "related": array(object(json!({ "id": string(), "title": string() }))),
        "references": {
            "type": "array",
            "items": string(),
            "description": "Public pages (issues, documentation) the entry rests on.",
        },
        "versions": answer::json_schema::<Vec<Affected>>(),
        "truncated": truncated(),
    }))
}

fn diagnose_output_schema() -> Value {
    let mut schema = answer::json_schema::<DiagnoseResponse>();
    schema["properties"]["truncated"] = truncated();
    if let Some(required) = schema["required"].as_array_mut() {
        required.push("truncated".into());
    }
    schema
}
