//! Responses made outside handlers (axum's 405, the body limit's 413, a limit's own
//! refusal) and errors from page handlers get errbook's formats here: problem+json for
//! the API and MCP, an HTML error page in the reader's language elsewhere.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Limits;
use super::error::{ApiError, AppError, PageError, problem};
use super::i18n::Lang;
use super::pages::ErrorPage;

/// Gives errbook's error format to error responses that carry no body of ours: axum's
/// 405 for a wrong method, the body limit's 413, a 415 or 400 from an extractor.
/// Under `/api/` and at `/mcp` they become problem+json, elsewhere an HTML page.
/// Responses that already have a typed body (ours, JSON-RPC) pass untouched.
pub async fn error_bodies(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let api = path.starts_with("/api/") || path == "/mcp";
    let method = request.method().clone();
    // Only pages speak the reader's language; API errors are problem documents.
    let lang = if api {
        Lang::En
    } else {
        Lang::of_request(request.headers())
    };
    let response = next.run(request).await;
    let status = response.status();
    if let Some(PageError(detail)) = response.extensions().get::<PageError>().cloned() {
        if api {
            // A limit that refused the request before any API handler saw it.
            let mut out = problem(status, detail);
            if let Some(allow) = response.headers().get(header::ALLOW) {
                out.headers_mut().insert(header::ALLOW, allow.clone());
            }
            return out;
        }
        return page_error(lang, response, detail);
    }
    let typed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| !t.starts_with("text/plain"));
    if typed || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let error = match status {
        StatusCode::METHOD_NOT_ALLOWED => AppError::MethodNotAllowed(format!(
            "{method} is not accepted here{}",
            allow
                .as_ref()
                .and_then(|a| a.to_str().ok())
                .map(|a| format!("; use {a}"))
                .unwrap_or_default()
        )),
        StatusCode::PAYLOAD_TOO_LARGE => AppError::body_too_large(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            AppError::UnsupportedMediaType("send the body as application/json".into())
        }
        StatusCode::NOT_FOUND => AppError::NotFound("nothing at this address".into()),
        StatusCode::SERVICE_UNAVAILABLE => AppError::Unavailable(format!(
            "no answer within {} s: errbook is busy, or the request was sent too slowly; \
             try again",
            limits.request_timeout.as_secs_f32()
        )),
        StatusCode::BAD_REQUEST => AppError::BadRequest("the request is malformed".into()),
        _ => return response,
    };
    let mut out = if api {
        ApiError(error).into_response()
    } else {
        page_error(lang, error.status().into_response(), error.public_detail())
    };
    if let Some(allow) = allow {
        out.headers_mut().insert(header::ALLOW, allow);
    }
    out
}

/// `response` with its body replaced by the error page for `detail`; status and
/// headers (`Allow`, `Vary`) kept.
fn page_error(lang: Lang, response: Response, detail: String) -> Response {
    let (mut parts, _) = response.into_parts();
    let html = ErrorPage::new(lang, parts.status, detail).render_or_plain();
    // The old body's length no longer holds.
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    Response::from_parts(parts, Body::from(html))
}
