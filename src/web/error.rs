//! The one place where failures become responses: an HTML error page for the portal,
//! `application/problem+json` (RFC 9457) for the API. Internal details are logged, not shown.

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;

use super::pages::ErrorPage;
use crate::search::SearchError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("search failed: {0}")]
    Search(#[from] SearchError),
    #[error("template rendering failed: {0}")]
    Render(#[from] askama::Error),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Search(_) | AppError::Render(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the user may read: the message for client errors, a generic line for ours.
    fn public_detail(&self) -> String {
        if self.status().is_server_error() {
            tracing::error!(error = %self, "request failed");
            "errbook failed to answer this request; the details are in the server log.".into()
        } else {
            self.to_string()
        }
    }
}

/// Portal pages render errors as HTML.
impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let page = ErrorPage {
            status: status.as_u16(),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            detail: self.public_detail(),
        };
        let body = page.render_or_plain();
        (status, Html(body)).into_response()
    }
}

/// An error from a `/api/v1` route, rendered as problem+json.
#[derive(Debug)]
pub struct ApiError(pub AppError);

impl<E: Into<AppError>> From<E> for ApiError {
    fn from(err: E) -> Self {
        ApiError(err.into())
    }
}

#[derive(Serialize)]
struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: String,
    status: u16,
    detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let problem = Problem {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: self.0.public_detail(),
        };
        let mut response = (status, Json(problem)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/problem+json"),
        );
        response
    }
}
