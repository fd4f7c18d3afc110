//! The one place where failures become responses: an HTML error page for the portal,
//! `application/problem+json` (RFC 9457) for the API. Internal details are logged, not shown.

use axum::Json;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::diagnose::RequestError;
use crate::search::SearchError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    UriTooLong(String),
    #[error("{0}")]
    HeadersTooLarge(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("search failed: {0}")]
    Search(#[from] SearchError),
    #[error("{0}")]
    Internal(String),
    #[error("template rendering failed: {0}")]
    Render(#[from] askama::Error),
}

impl From<RequestError> for AppError {
    fn from(err: RequestError) -> AppError {
        AppError::Unprocessable(err.to_string())
    }
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::UriTooLong(_) => StatusCode::URI_TOO_LONG,
            AppError::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Search(_) | AppError::Render(_) | AppError::Internal(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// A request body over `limit` bytes (see [`super::body_limit`]), however it was
    /// noticed.
    pub fn body_too_large(limit: usize) -> AppError {
        AppError::PayloadTooLarge(format!(
            "the request body is over the limit of {limit} bytes; send the part of the \
             log around the failure"
        ))
    }

    /// What the user may read: the message for client errors, a generic line for ours.
    pub(super) fn public_detail(&self) -> String {
        if let AppError::Unavailable(detail) = self {
            detail.clone()
        } else if self.status().is_server_error() {
            tracing::error!(error = %self, "request failed");
            "errbook failed to answer this request; the details are in the server log.".into()
        } else {
            self.to_string()
        }
    }
}

/// Portal pages render errors as HTML, in the reader's language, which only
/// `error_bodies` knows: here the response carries the message, and the middleware
/// renders the page once. (Outside `app()`, the message is the plain-text body.)
impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let detail = self.public_detail();
        let mut response = (self.status(), detail.clone()).into_response();
        response.extensions_mut().insert(PageError(detail));
        response
    }
}

/// The message of an HTML error page still to be rendered.
#[derive(Clone)]
pub(super) struct PageError(pub(super) String);

/// An error from a `/api/v1` route, rendered as problem+json.
#[derive(Debug)]
pub struct ApiError(pub AppError);

impl<E: Into<AppError>> From<E> for ApiError {
    fn from(err: E) -> Self {
        ApiError(err.into())
    }
}

/// An RFC 9457 problem document.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// Always `about:blank`: the status says what kind of problem it is.
    #[serde(rename = "type")]
    kind: &'static str,
    /// The status's reason phrase.
    title: String,
    status: u16,
    /// What was wrong with this request, in words.
    detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        problem(self.0.status(), self.0.public_detail())
    }
}

/// A problem+json response.
pub(super) fn problem(status: StatusCode, detail: String) -> Response {
    let problem = Problem {
        kind: "about:blank",
        title: status.canonical_reason().unwrap_or("Error").to_string(),
        status: status.as_u16(),
        detail,
    };
    let mut response = (status, Json(problem)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// Longest request target (path and query) accepted. A share link carries its paste
/// in the query, up to 12,000 characters.
pub const MAX_URI_BYTES: usize = 16 * 1024;
/// Most bytes of header names and values accepted in one request.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// Refuses a request whose URL (414) or headers (431) are over the limits, with a
/// message saying which. The connection already caps the whole head at
/// [`super::server::MAX_HEAD_BYTES`]; this names the problem.
pub async fn head_limits(request: Request, next: Next) -> Response {
    let uri = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if uri > MAX_URI_BYTES {
        return AppError::UriTooLong(format!(
            "the address is {uri} bytes long, over the limit of {MAX_URI_BYTES}; \
             paste long text into the form instead of the address"
        ))
        .into_response();
    }
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if headers > MAX_HEADER_BYTES {
        return AppError::HeadersTooLarge(format!(
            "the request headers are {headers} bytes, over the limit of {MAX_HEADER_BYTES}"
        ))
        .into_response();
    }
    next.run(request).await
}
