//! Shared helpers for integration tests: the fixture knowledge base and one-shot requests.
#![allow(dead_code)]

#[cfg(unix)]
pub mod server;

use std::path::{Path, PathBuf};
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

/// Copies the folder `from` and everything under it to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
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

/// The fixture app served over TCP on a free loopback port by errbook's own server
/// loop, as `errbook serve` serves it; it stops when dropped.
pub struct TcpServer {
    pub addr: std::net::SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

pub async fn serve_fixture() -> TcpServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(errbook::web::server::serve(
        listener,
        fixture_app(),
        errbook::web::server::ServerConfig::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    TcpServer { addr, _stop: stop }
}

/// One HTTP/1.1 response read off a connection.
#[derive(Debug)]
pub struct RawReply {
    pub status: u16,
    /// Header names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Sends a request on `stream` (kept open, as a client's connection pool keeps it) and
/// reads its response, which must carry a `Content-Length`; `None` when the server
/// closed the connection instead of answering. Fails the test past 60 s.
pub async fn exchange(
    stream: &mut tokio::net::TcpStream,
    head: &str,
    body: &[u8],
) -> Option<RawReply> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("{head}\r\ncontent-length: {}\r\n\r\n", body.len());
    let exchange = async {
        // A server that answers before the body is sent may close the connection:
        // the write then fails, and the answer, if any, is still read.
        let sent = async {
            stream.write_all(request.as_bytes()).await?;
            stream.write_all(body).await
        };
        let _ = sent.await;
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        let end = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = (headers.iter())
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .expect("a response with a Content-Length");
        let mut body = buffer[end + 4..].to_vec();
        while body.len() < length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
            }
        }
        Some(RawReply {
            status,
            headers,
            body,
        })
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), exchange)
        .await
        .expect("an answer within 60 s")
}

/// A body stream that never sends anything: a client that stalls.
pub fn stalled_body() -> Body {
    struct Stalled;
    impl futures_core::Stream for Stalled {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::task::Poll::Pending
        }
    }
    Body::from_stream(Stalled)
}

/// The app over the fixture entries, answering within `timeout` (queueing and the
/// body's arrival included).
pub fn fixture_app_with_timeout(timeout: std::time::Duration) -> Router {
    let kb = Kb::load(&fixture_dir()).expect("fixture kb is valid");
    let mut state = AppState::new(SearchIndex::build(Arc::new(kb)).expect("index builds"));
    state.limits.request_timeout = timeout;
    app(state)
}
