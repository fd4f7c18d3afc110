//! Portal pages: each handler extracts its input, asks the domain, and wraps the result
//! in a template struct named after the page (`SearchPage` -> `search.html`).

use askama::Template;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::AppState;
use super::error::AppError;
use crate::diagnose::{Diagnosis, Match, Verdict};
use crate::kb::Entry;
use crate::search::{Hit, SearchQuery};

const PAGE_HITS: usize = 20;

type PageResult = Result<Html<String>, AppError>;

fn render(page: impl Template) -> PageResult {
    Ok(Html(page.render()?))
}

/// A search or diagnosis result as the templates show it.
pub struct ResultView<'a> {
    pub entry: &'a Entry,
    pub snippet_html: String,
}

fn result_views<'a>(state: &'a AppState, hits: Vec<Hit>) -> Vec<ResultView<'a>> {
    hits.into_iter()
        .filter_map(|hit| {
            Some(ResultView {
                entry: state.index.kb().get(&hit.slug)?,
                snippet_html: hit.snippet_html,
            })
        })
        .collect()
}

#[derive(Template)]
#[template(path = "home.html")]
pub struct HomePage<'a> {
    pub entries: &'a [Entry],
    pub tags: Vec<(&'a str, usize)>,
}

pub async fn home(State(state): State<AppState>) -> PageResult {
    let kb = state.index.kb();
    render(HomePage {
        entries: kb.entries(),
        tags: kb.tags().collect(),
    })
}

#[derive(Debug, Deserialize)]
pub struct SearchParams {
    #[serde(default)]
    pub q: String,
    pub tag: Option<String>,
}

#[derive(Template)]
#[template(path = "search.html")]
pub struct SearchPage<'a> {
    pub q: String,
    pub tag: Option<String>,
    pub results: Vec<ResultView<'a>>,
    pub tags: Vec<(&'a str, usize)>,
}

pub async fn search(
    State(state): State<AppState>,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> PageResult {
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let query = SearchQuery::new(&params.q, params.tag.as_deref(), PAGE_HITS);
    let hits = state.index.search(&query)?;
    render(SearchPage {
        q: query.text,
        tag: query.tag,
        results: result_views(&state, hits),
        tags: state.index.kb().tags().collect(),
    })
}

#[derive(Template)]
#[template(path = "entry.html")]
pub struct EntryPage<'a> {
    pub entry: &'a Entry,
    pub related: Vec<&'a Entry>,
}

/// An entry's page; `/entries/{slug}.md` is the same entry as Markdown.
pub async fn entry(
    State(state): State<AppState>,
    Path(slug): Path<String>,
) -> Result<Response, AppError> {
    if let Some(slug) = slug.strip_suffix(".md") {
        return super::llms::entry_markdown(&state, slug);
    }
    entry_page(&state, &slug).map(IntoResponse::into_response)
}

fn entry_page(state: &AppState, slug: &str) -> PageResult {
    let kb = state.index.kb();
    let entry = kb
        .get(slug)
        .ok_or_else(|| AppError::NotFound(format!("There is no entry `{slug}`.")))?;
    render(EntryPage {
        entry,
        related: entry.related.iter().filter_map(|s| kb.get(s)).collect(),
    })
}

#[derive(Template)]
#[template(path = "tag.html")]
pub struct TagPage<'a> {
    pub tag: String,
    pub entries: Vec<&'a Entry>,
}

pub async fn tag(State(state): State<AppState>, Path(tag): Path<String>) -> PageResult {
    let entries = state.index.kb().tagged(&tag);
    if entries.is_empty() {
        return Err(AppError::NotFound(format!("No entry has the tag `{tag}`.")));
    }
    render(TagPage { tag, entries })
}

#[derive(Debug, Deserialize)]
pub struct DiagnoseForm {
    #[serde(default)]
    pub text: String,
}

/// One answer on the diagnosis page.
pub struct MatchView<'a> {
    pub entry: &'a Entry,
    pub m: Match,
    /// The entry's Fix section, shown inline for the top answer.
    pub fix_html: Option<String>,
}

#[derive(Template)]
#[template(path = "diagnose.html")]
pub struct DiagnosePage<'a> {
    pub text: String,
    pub diagnosis: Diagnosis,
    pub matches: Vec<MatchView<'a>>,
    pub closest: Vec<ResultView<'a>>,
}

impl DiagnosePage<'_> {
    pub fn matched(&self) -> bool {
        self.diagnosis.verdict == Verdict::Matched
    }
}

/// The paste box's target: the answer page for a pasted traceback or log.
pub async fn diagnose(
    State(state): State<AppState>,
    form: Result<Form<DiagnoseForm>, FormRejection>,
) -> PageResult {
    let Form(form) = form.map_err(|e| match e.status().as_u16() {
        413 => AppError::PayloadTooLarge(format!(
            "The paste is over {} bytes: paste the part of the log around the failure.",
            super::MAX_BODY_BYTES
        )),
        _ => AppError::BadRequest(e.body_text()),
    })?;
    if form.text.trim().is_empty() {
        return Err(AppError::BadRequest(
            "The paste is empty: paste a traceback or a log into the box.".into(),
        ));
    }
    let mut diagnosis = state.diagnoser.diagnose_text(&form.text, 5)?;
    let kb = state.index.kb();
    let matches = diagnosis
        .matches
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let entry = kb.get(&m.slug)?;
            Some(MatchView {
                entry,
                m: m.clone(),
                fix_html: (i == 0).then(|| section_html(&entry.html, "fix")).flatten(),
            })
        })
        .collect();
    let closest = result_views(&state, std::mem::take(&mut diagnosis.closest));
    render(DiagnosePage {
        text: form.text,
        diagnosis,
        matches,
        closest,
    })
}

/// The HTML of one `## Section` of a rendered entry body, heading excluded.
fn section_html(html: &str, id: &str) -> Option<String> {
    let start = html.find(&format!("<h2 id=\"{id}\">"))?;
    let body_start = start + html[start..].find("</h2>")? + "</h2>".len();
    let end = html[body_start..]
        .find("<h2")
        .map_or(html.len(), |i| body_start + i);
    Some(html[body_start..end].trim().to_string())
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    pub status: u16,
    pub title: String,
    pub detail: String,
}

impl ErrorPage {
    /// Error pages must never fail themselves: fall back to plain text.
    pub fn render_or_plain(&self) -> String {
        self.render()
            .unwrap_or_else(|_| format!("{} {}: {}", self.status, self.title, self.detail))
    }
}

pub async fn not_found() -> AppError {
    AppError::NotFound("There is no page at this address.".into())
}
