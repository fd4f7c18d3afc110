//! Responses made outside handlers (axum's 405, the body limit's 413, a limit's own
//! refusal) and errors from page handlers get errbook's formats here: problem+json for
//! the API, a JSON-RPC error for MCP, an HTML error page in the reader's language
//! elsewhere. Every 503 says when to try again (`Retry-After`).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, AppError, PageError, problem};
use super::i18n::Lang;
use super::pages::ErrorPage;
use super::{Limits, body_limit, mcp};

/// Seconds a client told 503 (errbook busy) waits before trying again.
pub const RETRY_AFTER_SECS: u32 = 2;

/// Who reads an error: a program of the JSON API, an MCP client, or a person.
#[derive(Clone, Copy)]
enum Reader {
    Api,
    Mcp,
    Page(Lang),
}

/// Gives errbook's error format to error responses that carry no body of ours: axum's
/// 405 for a wrong method, the body limit's 413, a 415 or 400 from an extractor.
/// Under `/api/` they become problem+json, at `/mcp` a JSON-RPC error (which an MCP
/// client passes on), elsewhere an HTML page. Responses that already have a typed body
/// (ours, JSON-RPC) pass untouched, but for `Retry-After` on a 503.
pub async fn error_bodies(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    let mut response = shape(limits, request, next).await;
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .entry(header::RETRY_AFTER)
            .or_insert(HeaderValue::from(RETRY_AFTER_SECS));
    }
    response
}

async fn shape(limits: Limits, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    // Only pages speak the reader's language; API errors are problem documents.
    let reader = if path == "/mcp" {
        Reader::Mcp
    } else if path.starts_with("/api/") {
        Reader::Api
    } else {
        Reader::Page(Lang::of_request(request.headers()))
    };
    let limit = body_limit(path);
    let method = request.method().clone();
    let response = next.run(request).await;
    let status = response.status();
    if let Some(PageError(detail)) = response.extensions().get::<PageError>().cloned() {
        // A limit that refused the request before any handler saw it, or a page's error.
        return match reader {
            Reader::Page(lang) => page_error(lang, response, detail),
            Reader::Api => keep_allow(&response, problem(status, detail)),
            Reader::Mcp => keep_allow(&response, mcp::http_error(status, detail)),
        };
    }
    let typed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| !t.starts_with("text/plain"));
    if typed || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let allow = response.headers().get(header::ALLOW);
    let error = match status {
        StatusCode::METHOD_NOT_ALLOWED => AppError::MethodNotAllowed(format!(
            "{method} is not accepted here{}",
            allow
                .as_ref()
                .and_then(|a| a.to_str().ok())
                .map(|a| format!("; use {a}"))
                .unwrap_or_default()
        )),
        StatusCode::PAYLOAD_TOO_LARGE => AppError::body_too_large(limit),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            AppError::UnsupportedMediaType("send the body as application/json".into())
        }
        StatusCode::NOT_FOUND => AppError::NotFound("nothing at this address".into()),
        StatusCode::SERVICE_UNAVAILABLE => AppError::Unavailable(format!(
            "no answer within {} s: errbook is busy, or the request was sent too slowly; \
             try again in {RETRY_AFTER_SECS} s",
            limits.request_timeout.as_secs_f32()
        )),
        StatusCode::BAD_REQUEST => AppError::BadRequest("the request is malformed".into()),
        _ => return response,
    };
    let out = match reader {
        Reader::Api => ApiError(error).into_response(),
        Reader::Mcp => mcp::http_error(error.status(), error.public_detail()),
        Reader::Page(lang) => {
            page_error(lang, error.status().into_response(), error.public_detail())
        }
    };
    keep_allow(&response, out)
}

/// `out` with the `Allow` header of the response it replaces.
fn keep_allow(response: &Response, mut out: Response) -> Response {
    if let Some(allow) = response.headers().get(header::ALLOW) {
        out.headers_mut().insert(header::ALLOW, allow.clone());
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
