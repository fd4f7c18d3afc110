//! Shared helpers for integration tests: the fixture knowledge base and one-shot requests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use errbook::kb::Kb;
use errbook::search::SearchIndex;
use errbook::{AppState, app};
use http_body_util::BodyExt;
use tower::ServiceExt;

pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kb")
}

/// The app over the fixture entries (the index is built once per test binary).
pub fn fixture_app() -> Router {
    static STATE: OnceLock<AppState> = OnceLock::new();
    let state = STATE.get_or_init(|| {
        let kb = Kb::load(&fixture_dir()).expect("fixture kb is valid");
        AppState::new(SearchIndex::build(Arc::new(kb)).expect("index builds"))
    });
    app(state.clone())
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn content_type(&self) -> &str {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub async fn send(request: Request<Body>) -> Reply {
    reply_of(fixture_app().oneshot(request).await.expect("infallible")).await
}

/// A response, read whole.
pub async fn reply_of(response: axum::response::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(uri: &str) -> Reply {
    send(Request::get(uri).body(Body::empty()).unwrap()).await
}

pub async fn post_form(uri: &str, body: &str) -> Reply {
    send(
        Request::post(uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

/// Percent-encodes a query-string value.
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Slugs of the API search hits for `q`, best first.
pub async fn api_slugs(q: &str) -> Vec<String> {
    let reply = get(&format!("/api/v1/search?q={}", encode(q))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.json()["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["slug"].as_str().unwrap().to_string())
        .collect()
}

/// `next` values that must not take a reader off errbook (percent-encoded as sent).
pub const REDIRECT_PAYLOADS: &[&str] = &[
    "/%09/evil.example/",
    "/%0A/evil.example",
    "/%0D/evil.example",
    "/%0D%0A/evil.example",
    "//evil.example",
    "/%5Cevil.example",
    "%5C%5Cevil.example",
    "%2F%2Fevil.example",
    "https://evil.example",
    "http:evil.example",
    "javascript:alert(1)",
    "/%20/evil.example",
    "%20//evil.example",
    "%09//evil.example",
    "/%00/evil.example",
    "/%7F/evil.example",
    "///evil.example",
    "//%09evil.example",
    "/%E3%80%80/evil.example",
    "%0A/%0A/evil.example",
    "data:text/html,x",
    "/%C2%A0/evil.example",
    "%E2%80%8B//evil.example",
];
