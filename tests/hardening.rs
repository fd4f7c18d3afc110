//! Bad input, hostile input and too much input: limits, security headers, escaping,
//! path traversal and methods, through the router as a client would meet them.

mod common;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode, header};
use common::{Reply, encode, fixture_dir, get, post_form, reply_of, send};
use errbook::kb::Kb;
use errbook::search::SearchIndex;
use errbook::{AppState, app};
use hyper::body::Frame;
use tokio::sync::mpsc;
use tower::ServiceExt;

const WATCHDOG: &str = "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600321 milliseconds before timing out.";

/// The fixture app with its own limits (a fresh index, so nothing is shared).
fn app_with(configure: impl FnOnce(&mut AppState)) -> Router {
    let kb = Kb::load(&fixture_dir()).unwrap();
    let mut state = AppState::new(SearchIndex::build(Arc::new(kb)).unwrap());
    configure(&mut state);
    app(state)
}

/// A request body the test sends piece by piece, or never finishes.
struct Trickle(mpsc::UnboundedReceiver<Bytes>);

impl hyper::body::Body for Trickle {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

fn trickle_json(uri: &str) -> (Request<Body>, mpsc::UnboundedSender<Bytes>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::new(Trickle(rx)))
        .unwrap();
    (request, tx)
}

/// `future`'s output, or a test failure instead of a hang.
async fn within_10s<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("no answer within 10 s")
}

fn assert_problem(reply: &Reply, status: StatusCode, needle: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.content_type(), "application/problem+json");
    let detail = reply.json()["detail"].as_str().unwrap().to_string();
    assert!(
        detail.contains(needle),
        "{detail:?} should mention {needle:?}"
    );
}

fn assert_error_page(reply: &Reply, status: StatusCode, needle: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert!(
        reply.content_type().starts_with("text/html"),
        "{}",
        reply.body
    );
    assert!(reply.body.contains(needle), "page should say {needle:?}");
}

// ---- limits ----------------------------------------------------------------

#[tokio::test]
async fn a_body_over_one_mebibyte_is_413_with_a_message_on_page_and_api() {
    let big = "x".repeat(1024 * 1024 + 10);
    let page = post_form("/diagnose", &format!("text={big}")).await;
    assert_error_page(&page, StatusCode::PAYLOAD_TOO_LARGE, "1048576 bytes");
    let api = send(
        Request::post("/api/v1/diagnose")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(format!("{{\"text\":\"{big}\"}}")))
            .unwrap(),
    )
    .await;
    assert_problem(&api, StatusCode::PAYLOAD_TOO_LARGE, "1048576 bytes");
    // `/mcp` reads more (a paste the tool refuses in words the model reads), but not
    // without end, and says so in a JSON-RPC error.
    let huge = "x".repeat(errbook::web::MCP_MAX_BODY_BYTES + 1);
    let mcp = send(
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(huge))
            .unwrap(),
    )
    .await;
    assert_eq!(mcp.status, StatusCode::PAYLOAD_TOO_LARGE);
    let error = &mcp.json()["error"];
    assert!(
        (error["message"].as_str().unwrap())
            .contains(&format!("{} bytes", errbook::web::MCP_MAX_BODY_BYTES)),
        "{error}"
    );
}

#[tokio::test]
async fn a_very_long_address_is_414_and_huge_headers_are_431() {
    let long = format!("/search?q={}", "a".repeat(20 * 1024));
    assert_error_page(&get(&long).await, StatusCode::URI_TOO_LONG, "address");
    let long_api = format!("/api/v1/search?q={}", "a".repeat(20 * 1024));
    assert_problem(&get(&long_api).await, StatusCode::URI_TOO_LONG, "16384");

    // A share link of the longest kind (12,000 characters) is still fine.
    let share = format!("/search?q={}", "a".repeat(12_000));
    assert_eq!(get(&share).await.status, StatusCode::OK);

    let mut request = Request::get("/api/v1/search?q=nccl");
    for i in 0..8 {
        request = request.header(format!("x-filler-{i}"), "v".repeat(5000));
    }
    let reply = send(request.body(Body::empty()).unwrap()).await;
    assert_problem(
        &reply,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers",
    );
}

#[tokio::test]
async fn a_request_that_outlasts_the_timeout_gets_503_saying_so() {
    let app = app_with(|s| s.limits.request_timeout = Duration::from_millis(300));
    // A client that sends its headers and never its body.
    let (request, _tx) = trickle_json("/api/v1/diagnose");
    let reply = reply_of(within_10s(app.clone().oneshot(request)).await.unwrap()).await;
    assert_problem(&reply, StatusCode::SERVICE_UNAVAILABLE, "0.3 s");

    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let page = Request::post("/diagnose")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::new(Trickle(rx)))
        .unwrap();
    let reply = reply_of(within_10s(app.oneshot(page)).await.unwrap()).await;
    drop(tx);
    assert_error_page(&reply, StatusCode::SERVICE_UNAVAILABLE, "try again");
}

#[tokio::test]
async fn an_upload_still_waiting_for_its_body_holds_no_turn() {
    // Regression: 300 connections that promised a body and sent none held every turn
    // until the request timeout, and `/healthz` took 11.8 s.
    let app = app_with(|s| {
        s.limits.concurrent_requests = 1;
        s.limits.request_timeout = Duration::from_secs(20);
    });
    let (stalled, tx) = trickle_json("/api/v1/diagnose");
    let first = tokio::spawn(app.clone().oneshot(stalled));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let health = tokio::time::timeout(
        Duration::from_secs(1),
        app.clone()
            .oneshot(Request::get("/healthz").body(Body::empty()).unwrap()),
    )
    .await
    .expect("/healthz answers while an upload stalls")
    .unwrap();
    assert_eq!(health.status(), StatusCode::OK);

    // The body finally comes, piece by piece: the paste is answered.
    let body = serde_json::json!({ "text": WATCHDOG }).to_string();
    let (a, b) = body.split_at(body.len() / 2);
    tx.send(Bytes::from(a.to_string())).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    tx.send(Bytes::from(b.to_string())).unwrap();
    drop(tx);
    let first = reply_of(within_10s(first).await.unwrap().unwrap()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_408_with_a_message() {
    let app = app_with(|s| s.limits.request_timeout = Duration::from_secs(30));
    let (stalled, tx) = trickle_json("/api/v1/diagnose");
    tx.send(Bytes::from_static(b"{\"text\": \"Traceback"))
        .unwrap();
    let started = std::time::Instant::now();
    let reply = reply_of(within_10s(app.oneshot(stalled)).await.unwrap()).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "gave up after {:?}",
        started.elapsed()
    );
    assert_problem(
        &reply,
        StatusCode::REQUEST_TIMEOUT,
        "did not arrive in time",
    );
    drop(tx);
}

// ---- any query string ------------------------------------------------------

const HOSTILE_VALUES: &[&str] = &[
    "%22*%3A()%5B%5D%7B%7D%5E~!%5C%2F%20AND%20OR%20NOT%20%2B-",
    "%00",
    "a%00b",
    "%FF%FE%FD",
    "%C3",
    "%E2%82",
    "%zz",
    "%",
    "%%%",
    "+",
    "&&&",
    "%0D%0ASet-Cookie:%20x=1",
    "..%2F..%2Fetc%2Fpasswd",
    "-1",
    "99999999999999999999999999",
];

fn hostile_addresses() -> Vec<String> {
    let long = "ab%20".repeat(1000); // 5,000 characters of query
    let mut values: Vec<String> = HOSTILE_VALUES.iter().map(|v| v.to_string()).collect();
    values.push(long);
    let mut out = Vec::new();
    for v in &values {
        for path in [
            "/?page=",
            "/search?q=",
            "/search?tag=",
            "/search?q=nccl&page=",
            "/tags/nccl?page=",
            "/diagnose?p=",
            "/api/v1/search?q=",
            "/api/v1/search?q=nccl&limit=",
            "/api/v1/search?q=nccl&tag=",
            "/lang/zh?to=",
            "/lang/en?next=",
            "/lang/en?next=/",
            "/lang/zh-CN?next=/search%3Fq%3D",
            "/entries/",
            "/tags/",
            "/api/v1/entries/",
        ] {
            out.push(format!("{path}{v}"));
        }
        out.push(format!("/search?{v}"));
        out.push(format!("/api/v1/search?{v}"));
    }
    out
}

#[tokio::test]
async fn query_strings_of_any_content_are_answered_never_with_a_server_error() {
    for address in hostile_addresses() {
        let reply = get(&address).await;
        let status = reply.status.as_u16();
        assert!(
            matches!(status, 200 | 303 | 400 | 404 | 422),
            "{address} -> {status}: {}",
            reply.body
        );
        if !reply.status.is_redirection() {
            assert!(!reply.body.is_empty(), "{address} -> empty body");
        }
    }
}

#[tokio::test]
async fn every_control_byte_in_a_query_string_is_answered_without_a_server_error() {
    // Regression: `/lang/en?next=/%0A` answered `500 failed to parse header value`.
    let routes = [
        "/lang/en?next=/",
        "/lang/zh-CN?next=",
        "/?page=",
        "/search?q=",
        "/search?q=nccl&tag=",
        "/tags/nccl?page=",
        "/diagnose?p=",
        "/entries/view-inplace?x=",
        "/api/v1/search?q=",
        "/api/v1/search?q=nccl&limit=",
        "/api/v1/entries?x=",
        "/healthz?x=",
    ];
    for route in routes {
        for byte in (0u8..0x20).chain([0x7F]) {
            let address = format!("{route}%{byte:02X}");
            let reply = get(&address).await;
            let status = reply.status.as_u16();
            assert!(
                (200..500).contains(&status),
                "{address} -> {status}: {}",
                reply.body
            );
        }
    }
}

/// Where a browser goes for `Location: location` (from `http://errbook.test/lang/en`)
/// after its URL parser's clean-up: tabs and line breaks removed, C0 controls and
/// spaces trimmed, `\\` read as `/`. Only the part that decides the origin.
fn leaves_origin(location: &str) -> bool {
    let cleaned: String = location
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .map(|c| if c == '\\' { '/' } else { c })
        .collect();
    !cleaned.starts_with('/') || cleaned.starts_with("//")
}

#[tokio::test]
async fn the_language_switch_only_goes_back_to_errbooks_own_pages() {
    for payload in common::REDIRECT_PAYLOADS {
        let reply = get(&format!("/lang/en?next={payload}")).await;
        assert_eq!(
            reply.status,
            StatusCode::SEE_OTHER,
            "{payload}: {}",
            reply.body
        );
        let location = reply.headers[header::LOCATION].to_str().unwrap();
        assert!(!leaves_origin(location), "{payload} -> {location:?}");
        assert_eq!(location, "/", "{payload} falls back to the home page");
    }
    // Real targets keep working, past ASCII included.
    for (next, location) in [
        ("/search%3Fq%3Dnccl%26tag%3Dnccl", "/search?q=nccl&tag=nccl"),
        ("/entries/view-inplace", "/entries/view-inplace"),
        (
            "/search%3Fq%3D%E6%98%BE%E5%AD%98",
            "/search?q=%E6%98%BE%E5%AD%98",
        ),
    ] {
        let reply = get(&format!("/lang/zh-CN?next={next}")).await;
        assert_eq!(reply.headers[header::LOCATION], location, "{next}");
    }
}

#[tokio::test]
async fn queries_with_syntax_nul_invalid_utf8_and_5000_characters_are_searched() {
    for q in [
        "%22ncclInvalidUsage%22%20AND%20(%5B*%5D)",
        "nccl%00InvalidUsage",
        "ncclInvalidUsage%FF%FE",
        &format!("ncclInvalidUsage%20{}", "x%20".repeat(1660)),
    ] {
        // The page searches, or takes a query this long for a paste to diagnose.
        let page = get(&format!("/search?q={q}")).await;
        assert!(matches!(page.status.as_u16(), 200 | 303), "/search?q={q}");
        let api = get(&format!("/api/v1/search?q={q}")).await;
        assert_eq!(api.status, StatusCode::OK, "/api/v1/search?q={q}");
        assert_eq!(api.json()["hits"][0]["slug"], "nccl-invalid-usage", "q={q}");
    }
}

// ---- invalid UTF-8 in pastes -------------------------------------------------

fn with_broken_bytes(text: &str) -> Vec<u8> {
    let mut bytes = b"garbage \xff\xfe\xc3 from a terminal\n".to_vec();
    bytes.extend_from_slice(text.as_bytes());
    bytes.extend_from_slice(b"\n\xe2\x82 trailing\n");
    bytes
}

#[tokio::test]
async fn a_paste_with_invalid_utf8_is_decoded_lossily_and_diagnosed() {
    // The API, as raw JSON bytes.
    let mut json = b"{\"text\": \"".to_vec();
    json.extend(
        with_broken_bytes(&WATCHDOG.replace('"', "\\\""))
            .iter()
            .flat_map(|&b| if b == b'\n' { b"\\n".to_vec() } else { vec![b] }),
    );
    json.extend_from_slice(b"\"}");
    let reply = send(
        Request::post("/api/v1/diagnose")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(json))
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["verdict"], "matched");
    assert_eq!(body["matches"][0]["slug"], "watchdog-timeout");

    // The portal form, with the bytes sent raw and percent-encoded.
    let raw = with_broken_bytes(WATCHDOG);
    let mut form = b"text=".to_vec();
    form.extend(encode_bytes(&raw).into_bytes());
    let reply = send(
        Request::post("/diagnose")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(form))
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(reply.body.contains("/entries/watchdog-timeout"));
    assert!(
        reply.body.contains('\u{FFFD}'),
        "broken bytes shown as U+FFFD"
    );

    // MCP's diagnose tool.
    let mut rpc = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"diagnose","arguments":{"text":"#.to_vec();
    rpc.extend_from_slice(b"\"\xff\xfe ");
    rpc.extend_from_slice(WATCHDOG.replace('"', "\\\"").as_bytes());
    rpc.extend_from_slice(b"\"}}}");
    let reply = send(
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(Body::from(rpc))
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(reply.body.contains("watchdog-timeout"), "{}", reply.body);
}

fn encode_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}

// ---- escaping ----------------------------------------------------------------

const XSS: &[&str] = &[
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "'><svg onload=alert(1)>",
    "</textarea><script>alert(2)</script>",
    "javascript:alert(3)",
    "\" autofocus onfocus=alert(4) x=\"",
];

fn assert_inert(what: &str, body: &str) {
    for raw in [
        "<script>alert",
        "<img src=x",
        "<svg onload",
        "href=\"javascript:",
        "src=\"javascript:",
        "\" autofocus onfocus",
        "</textarea><script",
    ] {
        assert!(
            !body.contains(raw),
            "{what}: `{raw}` reached the page unescaped"
        );
    }
}

#[tokio::test]
async fn payloads_in_queries_are_escaped_wherever_they_are_shown() {
    for payload in XSS {
        let q = encode(payload);
        for address in [
            format!("/search?q={q}"),
            format!("/search?q=nccl+{q}"),
            format!("/search?tag={q}"),
            format!("/?page={q}"),
            format!("/tags/{q}"),
            format!("/tags/nccl?page={q}"),
            format!("/entries/{q}"),
            format!("/diagnose?p={q}"),
            format!("/lang/en?to={q}"),
            format!("/{q}"),
        ] {
            let reply = get(&address).await;
            assert_inert(&address, &reply.body);
            if let Some(location) = reply.headers.get(header::LOCATION) {
                let location = location.to_str().unwrap();
                assert!(
                    location.starts_with('/') && !location.starts_with("//"),
                    "{address} redirects off-site to {location}"
                );
            }
        }
    }
}

#[tokio::test]
async fn payloads_in_pastes_are_escaped_in_the_answer_and_its_share_link() {
    for payload in XSS {
        let paste = format!("{WATCHDOG} {payload}\n{payload}\nRuntimeError: {payload}");
        let page = post_form("/diagnose", &format!("text={}", encode(&paste))).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(page.body.contains("/entries/watchdog-timeout"));
        assert_inert("POST /diagnose", &page.body);
        if payload.contains('<') {
            assert!(
                page.body.contains("&lt;") || page.body.contains("&#60;"),
                "the payload is shown, escaped"
            );
        }

        let share = page
            .body
            .split("href=\"/diagnose?p=")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the answer carries its share link");
        let shared = get(&format!("/diagnose?p={share}")).await;
        assert_eq!(shared.status, StatusCode::OK);
        assert_inert("GET /diagnose?p=", &shared.body);
    }
}

// ---- headers, paths and methods ----------------------------------------------

#[tokio::test]
async fn every_response_carries_the_security_headers() {
    for address in [
        "/",
        "/search?q=nccl",
        "/entries/watchdog-timeout",
        "/entries/nope",
        "/api/v1/search?q=nccl",
        "/healthz",
        "/metrics",
        "/static/app.js",
        "/llms.txt",
    ] {
        let reply = get(address).await;
        let h = |name: header::HeaderName| {
            reply
                .headers
                .get(&name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_else(|| panic!("{address} lacks {name}"))
                .to_string()
        };
        let csp = h(header::CONTENT_SECURITY_POLICY);
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(h(header::X_CONTENT_TYPE_OPTIONS), "nosniff");
        assert_eq!(h(header::REFERRER_POLICY), "no-referrer");
        assert_eq!(h(header::X_FRAME_OPTIONS), "DENY");
    }
}

#[tokio::test]
async fn pages_have_no_inline_script_or_style_for_the_policy_to_block() {
    let answer = post_form("/diagnose", &format!("text={}", encode(WATCHDOG))).await;
    for (what, body) in [
        ("home", get("/").await.body),
        ("entry", get("/entries/watchdog-timeout").await.body),
        ("answer", answer.body),
    ] {
        for tag in body.split("<script").skip(1) {
            let open = tag.split('>').next().unwrap_or("");
            assert!(open.contains(" src="), "{what}: inline <script{open}>");
        }
        assert!(!body.contains("<style"), "{what}: inline <style>");
        assert!(!body.contains(" style=\""), "{what}: style attribute");
        assert!(!body.contains(" onclick="), "{what}: inline handler");
    }
}

#[tokio::test]
async fn no_path_leads_outside_the_embedded_assets_or_the_entries() {
    for address in [
        "/static/../Cargo.toml",
        "/static/%2e%2e/Cargo.toml",
        "/static/%2E%2E%2FCargo.toml",
        "/static/..%2f..%2fCargo.toml",
        "/static/..%5c..%5cCargo.toml",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/static/style.css/../../Cargo.toml",
        "/static/%00",
        "/entries/..%2f..%2fCargo.toml",
        "/entries/%2e%2e%2fREADME",
        "/entries/%2fetc%2fpasswd",
        "/entries/..",
        "/entries/README",
        "/entries/watchdog-timeout%2f..%2f..%2fCargo.toml",
        "/api/v1/entries/..%2f..%2fCargo.toml",
        "/tags/..%2f..%2fCargo.toml",
        "/../Cargo.toml",
        "/%2e%2e/%2e%2e/etc/passwd",
    ] {
        let reply = get(address).await;
        assert!(
            matches!(reply.status.as_u16(), 400 | 404),
            "{address} -> {}",
            reply.status
        );
        for secret in ["[package]", "root:x:0", "# Writing errbook entries"] {
            assert!(!reply.body.contains(secret), "{address} leaked {secret}");
        }
    }
    // The real assets are still there.
    assert_eq!(get("/static/style.css").await.status, StatusCode::OK);
}

#[tokio::test]
async fn each_route_allows_only_its_methods() {
    let cases: &[(&str, &[Method], &str)] = &[
        ("/", &[Method::POST, Method::PUT, Method::DELETE], "GET"),
        ("/search", &[Method::POST, Method::PATCH], "GET"),
        ("/diagnose", &[Method::PUT, Method::DELETE], "POST"),
        (
            "/entries/watchdog-timeout",
            &[Method::POST, Method::DELETE],
            "GET",
        ),
        ("/tags/nccl", &[Method::POST], "GET"),
        ("/static/app.js", &[Method::POST, Method::PUT], "GET"),
        ("/healthz", &[Method::POST], "GET"),
        ("/metrics", &[Method::POST], "GET"),
        ("/lang/en", &[Method::POST], "GET"),
        ("/llms.txt", &[Method::DELETE], "GET"),
        ("/mcp", &[Method::GET, Method::PUT, Method::DELETE], "POST"),
        ("/api/v1/search", &[Method::POST, Method::DELETE], "GET"),
        ("/api/v1/diagnose", &[Method::GET, Method::PUT], "POST"),
        ("/api/v1/entries", &[Method::POST], "GET"),
        (
            "/api/v1/entries/watchdog-timeout",
            &[Method::PUT, Method::DELETE],
            "GET",
        ),
        ("/api/v1/openapi.json", &[Method::POST], "GET"),
    ];
    for (path, refused, allowed) in cases {
        for method in *refused {
            let reply = send(
                Request::builder()
                    .method(method.clone())
                    .uri(*path)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
            assert_eq!(
                reply.status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}: {}",
                reply.body
            );
            let allow = reply
                .headers
                .get(header::ALLOW)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            assert!(allow.contains(allowed), "{method} {path}: Allow: {allow}");
            assert!(!reply.body.is_empty(), "{method} {path}: no message");
        }
    }
}

#[tokio::test]
async fn raw_html_in_an_entry_is_sanitised_on_its_page_and_in_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture_dir().join("view-inplace.md"))
        .unwrap()
        .replace(
            "## Cause\n",
            "## Cause\n\n<script>alert(1)</script>\n<img src=x onerror=alert(2)>\n\
             <iframe src=\"https://example.com\"></iframe>\n<a href=\"javascript:alert(3)\">x</a>\n\n\
             A [link](javascript:alert(4)) and <span style=\"color:red\" onclick=\"alert(5)\">y</span>\n\
             <svg onload=alert(6)></svg> <form action=\"https://example.com\"><input></form>\n\n",
        );
    std::fs::write(dir.path().join("view-inplace.md"), text).unwrap();
    let kb = Kb::load(dir.path()).unwrap();
    let app = app(AppState::new(SearchIndex::build(Arc::new(kb)).unwrap()));
    for address in ["/entries/view-inplace", "/api/v1/entries/view-inplace"] {
        let reply = reply_of(
            app.clone()
                .oneshot(Request::get(address).body(Body::empty()).unwrap())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
        let html = if address.starts_with("/api") {
            reply.json()["html"].as_str().unwrap().to_string()
        } else {
            reply.body
        };
        assert!(html.contains("Cause"), "{html}");
        for forbidden in [
            "<script>alert",
            "onerror",
            "<iframe",
            "href=\"javascript:",
            "onclick",
            "style=\"color",
            "<svg",
            "<form action=\"https",
        ] {
            assert!(
                !html.contains(forbidden),
                "{address}: {forbidden} in {html}"
            );
        }
    }
}

#[tokio::test]
async fn version_strings_in_other_scripts_digits_are_diagnosed_not_crashed_on() {
    // `+cu` and three Devanagari digits (three bytes each) once made version reading
    // cut a character in half.
    let text = "torch 2.1.0+cu११८ NCCL version ٢.١٨.١\nRuntimeError: CUDA error: out of memory";
    let reply = send(
        Request::post("/api/v1/diagnose")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::json!({ "text": text }).to_string()))
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let versions = &reply.json()["parsed"]["versions"];
    assert_eq!(versions[0], "NCCL ٢.١٨.١", "{}", reply.body);
    assert_eq!(versions[1], "torch 2.1.0", "{}", reply.body);
}
