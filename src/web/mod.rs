//! HTTP: the router (every URL, once), portal pages, the JSON API and the error type.
//! The only module that knows axum, askama and JSON.

mod api;
mod assets;
mod error;
mod i18n;
mod llms;
mod mcp;
mod pages;
mod share;

use std::sync::Arc;

use axum::http::header;
use axum::routing::{get, post};
use axum::{Router, middleware};
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::diagnose::Diagnoser;
use crate::search::SearchIndex;

pub use error::AppError;

/// Largest request body accepted (a paste of a long log fits).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach: the knowledge base, its index and the diagnoser.
#[derive(Clone, Debug)]
pub struct AppState {
    pub index: Arc<SearchIndex>,
    pub diagnoser: Arc<Diagnoser>,
    /// Where users reach this server (`https://errbook.example.com`), without a
    /// trailing slash; `None` when unknown, and then URLs are relative.
    pub public_url: Option<Arc<str>>,
}

impl AppState {
    pub fn new(index: SearchIndex) -> Self {
        let index = Arc::new(index);
        AppState {
            diagnoser: Arc::new(Diagnoser::new(index.clone())),
            index,
            public_url: None,
        }
    }

    /// The same state, with URLs made absolute against `base` (`http(s)://host[/path]`).
    pub fn with_public_url(mut self, base: &str) -> Result<Self, String> {
        let base = base.trim().trim_end_matches('/');
        let rest = base
            .strip_prefix("https://")
            .or_else(|| base.strip_prefix("http://"))
            .ok_or_else(|| format!("public URL `{base}` must start with http:// or https://"))?;
        if rest.is_empty() || rest.contains(|c: char| c.is_whitespace() || c == '?' || c == '#') {
            return Err(format!("public URL `{base}` is not a base URL"));
        }
        self.public_url = Some(base.into());
        Ok(self)
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

/// Every route errbook serves.
pub fn app(state: AppState) -> Router {
    let (api, doc) = api::routes();
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
        .route("/entries/{slug}", get(pages::entry))
        .route("/tags/{tag}", get(pages::tag))
        .route("/static/{*path}", get(assets::serve))
        .route("/healthz", get(api::healthz))
        .route("/mcp", post(mcp::handle))
        .route("/llms.txt", get(llms::llms_txt))
        .nest("/api/v1", api)
        .fallback(pages::not_found)
        .with_state(state);
    // Layers on a router wrap each route; wrapped as one service instead, the error
    // formatter sees the finished response (axum's 405 gets its `Allow` header late).
    Router::new()
        .fallback_service(routes)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(middleware::from_fn(error::error_bodies))
        .layer(CompressionLayer::new())
        .layer(TraceLayer::new_for_http())
}
