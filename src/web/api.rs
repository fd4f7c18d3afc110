//! The JSON API under `/api/v1`: typed query parameters in, typed responses out,
//! errors as problem+json.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::error::{ApiError, AppError};
use crate::diagnose::{Confidence, Evidence, Parsed, Verdict};
use crate::kb::Entry;
use crate::search::{Hit, MAX_LIMIT, SearchQuery};

const DEFAULT_LIMIT: usize = 10;

#[derive(Debug, Deserialize)]
pub struct SearchQueryParams {
    pub q: Option<String>,
    pub tag: Option<String>,
    pub limit: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SearchResponse {
    pub query: String,
    pub tag: Option<String>,
    pub hits: Vec<SearchHit>,
}

#[derive(Debug, Serialize)]
pub struct SearchHit {
    pub slug: String,
    pub title: String,
    pub title_zh: String,
    pub url: String,
    pub summary: String,
    pub snippet: String,
    pub score: f32,
    pub tags: Vec<String>,
}

impl SearchHit {
    fn new(state: &AppState, hit: Hit, entry: &Entry) -> Self {
        SearchHit {
            slug: hit.slug,
            title: entry.title.clone(),
            title_zh: entry.title_zh.clone(),
            url: state.entry_url(&entry.slug),
            summary: entry.summary.clone(),
            snippet: hit.snippet,
            score: hit.score,
            tags: entry.tags.clone(),
        }
    }
}

pub async fn search(
    State(state): State<AppState>,
    params: Result<Query<SearchQueryParams>, QueryRejection>,
) -> Result<Json<SearchResponse>, ApiError> {
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let limit = match params.limit.as_deref().map(str::trim) {
        None | Some("") => DEFAULT_LIMIT,
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(AppError::Unprocessable(format!(
                    "`limit` must be a whole number from 1 to {MAX_LIMIT}, got `{raw}`"
                ))
                .into());
            }
        },
    };
    let query = SearchQuery::new(
        params.q.as_deref().unwrap_or(""),
        params.tag.as_deref(),
        limit,
    );
    if query.text.is_empty() && query.tag.is_none() {
        return Err(AppError::Unprocessable(
            "give a query in `q` (or a `tag` to list its entries)".into(),
        )
        .into());
    }
    let kb = state.index.kb();
    let hits = state
        .index
        .search(&query)?
        .into_iter()
        .filter_map(|hit| {
            let entry = kb.get(&hit.slug)?;
            Some(SearchHit::new(&state, hit, entry))
        })
        .collect();
    Ok(Json(SearchResponse {
        query: query.text,
        tag: query.tag,
        hits,
    }))
}

/// Largest `limit` a diagnosis may ask for.
const MAX_DIAGNOSE_LIMIT: usize = 20;

#[derive(Debug, Deserialize)]
pub struct DiagnoseRequest {
    pub text: String,
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct DiagnoseResponse {
    pub verdict: Verdict,
    pub matches: Vec<DiagnoseMatch>,
    /// With `no_match`: nearest entries by full text, not a diagnosis.
    pub closest: Vec<SearchHit>,
    pub parsed: ParsedSummary,
}

#[derive(Debug, Serialize)]
pub struct DiagnoseMatch {
    pub slug: String,
    pub title: String,
    pub title_zh: String,
    pub url: String,
    pub summary: String,
    pub score: f32,
    pub confidence: Confidence,
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Serialize)]
pub struct ParsedSummary {
    pub lines: usize,
    pub distinct_lines: usize,
    pub truncated: bool,
    pub root_cause: Option<crate::diagnose::Exception>,
    #[serde(flatten)]
    pub parsed: Parsed,
}

pub async fn diagnose(
    State(state): State<AppState>,
    body: Result<Json<DiagnoseRequest>, JsonRejection>,
) -> Result<Json<DiagnoseResponse>, ApiError> {
    let Json(request) = body.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let limit = request.limit.unwrap_or(5);
    if !(1..=MAX_DIAGNOSE_LIMIT).contains(&limit) {
        return Err(AppError::Unprocessable(format!(
            "`limit` must be from 1 to {MAX_DIAGNOSE_LIMIT}, got {limit}"
        ))
        .into());
    }
    if request.text.trim().is_empty() {
        return Err(AppError::Unprocessable(
            "`text` is empty: send the traceback, log or question".into(),
        )
        .into());
    }
    let d = state.diagnoser.diagnose_text(&request.text, limit)?;
    let kb = state.index.kb();
    let matches = d
        .matches
        .iter()
        .filter_map(|m| {
            let e = kb.get(&m.slug)?;
            Some(DiagnoseMatch {
                slug: m.slug.clone(),
                title: e.title.clone(),
                title_zh: e.title_zh.clone(),
                url: state.entry_url(&e.slug),
                summary: e.summary.clone(),
                score: m.score,
                confidence: m.confidence,
                evidence: m.evidence.clone(),
            })
        })
        .collect();
    let closest = d
        .closest
        .iter()
        .filter_map(|hit| Some(SearchHit::new(&state, hit.clone(), kb.get(&hit.slug)?)))
        .collect();
    Ok(Json(DiagnoseResponse {
        verdict: d.verdict,
        matches,
        closest,
        parsed: ParsedSummary {
            lines: d.lines,
            distinct_lines: d.distinct_lines,
            truncated: d.truncated,
            root_cause: d.parsed.root_exception().cloned(),
            parsed: d.parsed,
        },
    }))
}

#[derive(Debug, Serialize)]
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

#[derive(Debug, Serialize)]
pub struct EntryListResponse {
    pub entries: Vec<EntrySummary>,
}

pub async fn entries(State(state): State<AppState>) -> Json<EntryListResponse> {
    Json(EntryListResponse {
        entries: state
            .index
            .kb()
            .entries()
            .iter()
            .map(|e| EntrySummary::new(&state, e))
            .collect(),
    })
}

#[derive(Debug, Serialize)]
pub struct EntryResponse {
    #[serde(flatten)]
    pub summary: EntrySummary,
    pub signatures: Vec<String>,
    pub symptoms: Vec<String>,
    pub examples: Vec<String>,
    pub related: Vec<String>,
    pub sources: Vec<String>,
    pub markdown: String,
    pub html: String,
}

pub async fn entry(
    State(state): State<AppState>,
    Path(slug): Path<String>,
) -> Result<Json<EntryResponse>, ApiError> {
    let e = state
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
        markdown: e.markdown.clone(),
        html: e.html.clone(),
    }))
}

#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub entries: usize,
}

pub async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        entries: state.index.kb().len(),
    })
}

pub async fn not_found() -> ApiError {
    AppError::NotFound("no API route at this address".into()).into()
}
