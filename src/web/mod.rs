//! HTTP: the router (every URL, once), portal pages, the JSON API and the error type.
//! The only module that knows axum, askama and JSON.

mod api;
mod assets;
mod error;
mod pages;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
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
}

impl AppState {
    pub fn new(index: SearchIndex) -> Self {
        let index = Arc::new(index);
        AppState {
            diagnoser: Arc::new(Diagnoser::new(index.clone())),
            index,
        }
    }
}

/// Every route errbook serves.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/search", get(api::search))
        .route("/diagnose", post(api::diagnose))
        .route("/entries", get(api::entries))
        .route("/entries/{slug}", get(api::entry))
        .fallback(api::not_found);

    Router::new()
        .route("/", get(pages::home))
        .route("/search", get(pages::search))
        .route("/diagnose", post(pages::diagnose))
        .route("/entries/{slug}", get(pages::entry))
        .route("/tags/{tag}", get(pages::tag))
        .route("/static/{*path}", get(assets::serve))
        .route("/healthz", get(api::healthz))
        .nest("/api/v1", api)
        .fallback(pages::not_found)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(CompressionLayer::new())
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
