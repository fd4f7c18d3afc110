//! Plain-text views for language models: `/llms.txt` (what errbook is, and a link to
//! every entry's Markdown, following the llms.txt convention) and `/entries/{slug}.md`.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::AppError;
use crate::kb::{Entry, Lang};

const MARKDOWN: &str = "text/markdown; charset=utf-8";

pub async fn llms_txt(State(state): State<AppState>) -> Response {
    let served = state.served();
    let mut out = String::from(
        "# errbook\n\n\
         > Known problems of distributed PyTorch training (DDP, torchrun, NCCL, Accelerate, \
         DeepSpeed, FSDP), each with its symptoms, cause, fix and how to verify the fix. \
         Entries are in English and Chinese: add `?lang=zh-CN` to an entry's Markdown \
         link for its Chinese body.\n\n\
         To name the problem behind a traceback or log, POST it as `{\"text\": ...}` to ",
    );
    out.push_str(&state.url("/api/v1/diagnose"));
    out.push_str(" (OpenAPI: ");
    out.push_str(&state.url("/api/v1/openapi.json"));
    out.push_str("), or use the MCP server at ");
    out.push_str(&state.url("/mcp"));
    out.push_str(" (tools `search`, `fetch`, `diagnose`).\n\n## Entries\n\n");
    for entry in served.index.kb().entries() {
        out.push_str(&format!(
            "- [{}]({}): {}\n",
            entry.title,
            state.url(&format!("/entries/{}.md", entry.slug)),
            entry.summary
        ));
    }
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], out).into_response()
}

/// The entry `slug` as one Markdown document: titles, summaries, tags, then its body in
/// `lang`.
pub fn entry_markdown(state: &AppState, slug: &str, lang: Lang) -> Result<Response, AppError> {
    let served = state.served();
    let entry = served
        .index
        .kb()
        .get(slug)
        .ok_or_else(|| AppError::NotFound(format!("There is no entry `{slug}`.")))?;
    Ok((
        [(header::CONTENT_TYPE, MARKDOWN)],
        markdown(state, entry, lang),
    )
        .into_response())
}

fn markdown(state: &AppState, e: &Entry, lang: Lang) -> String {
    let mut out = format!(
        "# {}\n\n{}\n\n> {}\n>\n> {}\n\nTags: {}. Page: {}\n\n",
        e.title,
        e.title_zh,
        e.summary,
        e.summary_zh,
        e.tags.join(", "),
        state.entry_url(&e.slug)
    );
    out.push_str(e.body(lang).markdown.trim());
    out.push('\n');
    out
}
