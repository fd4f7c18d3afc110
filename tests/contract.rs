//! The API contract: the OpenAPI document describes every route, every response the
//! tests get conforms to it, and every error is problem+json (HTML for pages).

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{Reply, get, send};
use errbook::kb::Kb;
use errbook::search::SearchIndex;
use errbook::{AppState, app};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn openapi() -> Value {
    let reply = get("/api/v1/openapi.json").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.content_type().starts_with("application/json"));
    reply.json()
}

fn post_json(uri: &str, body: &str) -> Request<Body> {
    Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Checks `value` against an OpenAPI 3.1 schema: `$ref`, `type` (with `null`),
/// `properties` and `required`, `items`, `oneOf`/`anyOf`/`allOf`, `enum`. Returns
/// what does not conform.
fn conform(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/components/schemas/");
        let target = &doc["components"]["schemas"][name];
        assert!(!target.is_null(), "dangling $ref {r}");
        return conform(doc, target, value, at, errors);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let fits = options.iter().any(|o| {
                let mut e = Vec::new();
                conform(doc, o, value, at, &mut e);
                e.is_empty()
            });
            if !fits {
                errors.push(format!("{at}: fits none of {key}"));
            }
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for s in all {
            conform(doc, s, value, at, errors);
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{at}: {value} not in {options:?}"));
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let ok = types.contains(&actual) || (actual == "integer" && types.contains(&"number"));
        if !ok {
            errors.push(format!("{at}: a {actual}, the schema says {types:?}"));
            return;
        }
    }
    if let (Some(required), Some(object)) = (schema["required"].as_array(), value.as_object()) {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                errors.push(format!("{at}: required `{name}` missing"));
            }
        }
    }
    if let (Some(properties), Some(object)) = (schema["properties"].as_object(), value.as_object())
    {
        for (name, s) in properties {
            if let Some(v) = object.get(name) {
                conform(doc, s, v, &format!("{at}.{name}"), errors);
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            conform(doc, items, v, &format!("{at}[{i}]"), errors);
        }
    }
}

/// `value`, or what its `$ref` (within the document) points at.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str() {
        Some(reference) => {
            let target =
                (reference.trim_start_matches("#/").split('/')).fold(doc, |at, part| &at[part]);
            assert!(!target.is_null(), "dangling $ref {reference}");
            target
        }
        None => value,
    }
}

/// Asserts that `reply` is what the document promises for `method path`, headers the
/// response declares required included.
fn assert_documented(doc: &Value, method: &str, path: &str, reply: &Reply) {
    let operation = &doc["paths"][path][method];
    assert!(!operation.is_null(), "{method} {path} is not documented");
    let response = resolve(doc, &operation["responses"][reply.status.as_str()]);
    assert!(
        !response.is_null(),
        "{method} {path}: status {} is not documented",
        reply.status
    );
    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        if header["required"] == true {
            assert!(
                reply.headers.contains_key(name.as_str()),
                "{method} {path} {}: no {name} header",
                reply.status
            );
        }
    }
    let content_type = reply.content_type().split(';').next().unwrap_or("");
    let schema = &response["content"][content_type]["schema"];
    assert!(
        !schema.is_null(),
        "{method} {path} {}: no schema for {content_type}",
        reply.status
    );
    let mut errors = Vec::new();
    conform(doc, schema, &reply.json(), "$", &mut errors);
    assert!(
        errors.is_empty(),
        "{method} {path} {}: {errors:#?}",
        reply.status
    );
}

#[tokio::test]
async fn the_openapi_document_describes_every_route_briefly() {
    let doc = openapi().await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let words = format!(
                "{} {}",
                op["summary"].as_str().unwrap_or(""),
                op["description"].as_str().unwrap_or("")
            );
            assert!(words.trim().len() > 10, "{method} {path} is undescribed");
            assert!(words.len() < 300, "{method} {path}: {} chars", words.len());
            assert!(op["operationId"].is_string());
            operations.push(format!("{method} {path}"));
        }
    }
    operations.sort();
    assert_eq!(
        operations,
        [
            "get /api/v1/entries",
            "get /api/v1/entries/{slug}",
            "get /api/v1/search",
            "post /api/v1/diagnose",
            "post /api/v1/feedback",
        ]
    );
}

#[tokio::test]
async fn every_successful_response_matches_its_schema() {
    let doc = openapi().await;
    let reply = get("/api/v1/search?q=watchdog%20timeout&limit=3").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_documented(&doc, "get", "/api/v1/search", &reply);
    let reply = get("/api/v1/entries").await;
    assert_documented(&doc, "get", "/api/v1/entries", &reply);
    let reply = get("/api/v1/entries/nccl-invalid-usage").await;
    assert_documented(&doc, "get", "/api/v1/entries/{slug}", &reply);
    for text in [
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage\nncclInvalidUsage: Duplicate GPU detected",
        "ModuleNotFoundError: No module named 'yaml'",
        "how do I pick the batch size",
    ] {
        let body = json!({ "text": text, "limit": 3 }).to_string();
        let reply = send(post_json("/api/v1/diagnose", &body)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_documented(&doc, "post", "/api/v1/diagnose", &reply);
    }
}

/// The problem document for `reply`, checked for RFC 9457 shape and status.
fn problem(reply: &Reply, status: StatusCode) -> Value {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.content_type(), "application/problem+json");
    let p = reply.json();
    assert_eq!(p["type"], "about:blank");
    assert_eq!(p["status"], status.as_u16());
    assert_eq!(p["title"], status.canonical_reason().unwrap());
    assert!(p["detail"].as_str().is_some_and(|d| !d.is_empty()));
    p
}

#[tokio::test]
async fn every_api_error_is_problem_json_with_the_right_status() {
    let doc = openapi().await;

    let reply = send(post_json("/api/v1/diagnose", "{\"text\": ")).await;
    problem(&reply, StatusCode::BAD_REQUEST);
    assert_documented(&doc, "post", "/api/v1/diagnose", &reply);

    let reply = send(post_json("/api/v1/diagnose", r#"{"limit": 3}"#)).await;
    let p = problem(&reply, StatusCode::BAD_REQUEST);
    assert!(p["detail"].as_str().unwrap().contains("text"), "{p}");

    let reply = send(
        Request::post("/api/v1/diagnose")
            .body(Body::from(r#"{"text": "x"}"#))
            .unwrap(),
    )
    .await;
    problem(&reply, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_documented(&doc, "post", "/api/v1/diagnose", &reply);

    let reply = send(post_json(
        "/api/v1/diagnose",
        r#"{"text": "x", "limit": 0}"#,
    ))
    .await;
    problem(&reply, StatusCode::UNPROCESSABLE_ENTITY);
    assert_documented(&doc, "post", "/api/v1/diagnose", &reply);

    let reply = send(post_json("/api/v1/diagnose", r#"{"text": "   "}"#)).await;
    problem(&reply, StatusCode::UNPROCESSABLE_ENTITY);

    let reply = get("/api/v1/search?q=x&limit=500").await;
    problem(&reply, StatusCode::UNPROCESSABLE_ENTITY);
    assert_documented(&doc, "get", "/api/v1/search", &reply);

    let reply = get("/api/v1/entries/no-such-entry").await;
    let p = problem(&reply, StatusCode::NOT_FOUND);
    assert_eq!(
        p,
        json!({"type": "about:blank", "title": "Not Found", "status": 404,
               "detail": "there is no entry `no-such-entry`"})
    );
    assert_documented(&doc, "get", "/api/v1/entries/{slug}", &reply);
    problem(&get("/api/v1/nothing-here").await, StatusCode::NOT_FOUND);

    // Wrong method: 405 with the methods that work.
    let reply = get("/api/v1/diagnose").await;
    let p = problem(&reply, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(reply.headers[header::ALLOW], "POST");
    assert_eq!(p["detail"], "GET is not accepted here; use POST");
    assert_documented(&doc, "post", "/api/v1/diagnose", &reply);
    let reply = send(post_json("/api/v1/search", "{}")).await;
    problem(&reply, StatusCode::METHOD_NOT_ALLOWED);
    assert_documented(&doc, "get", "/api/v1/search", &reply);

    let reply = get("/api/v1/search?q=%20").await;
    problem(&reply, StatusCode::UNPROCESSABLE_ENTITY);
    assert_documented(&doc, "get", "/api/v1/search", &reply);
    let reply = get(&format!("/api/v1/entries?x={}", "a".repeat(17 << 10))).await;
    problem(&reply, StatusCode::URI_TOO_LONG);
    assert_documented(&doc, "get", "/api/v1/entries", &reply);
    let reply = send(
        Request::get("/api/v1/entries/nccl-invalid-usage")
            .header("x-large", "a".repeat(33 << 10))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    problem(&reply, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_documented(&doc, "get", "/api/v1/entries/{slug}", &reply);

    // Too large, announced by Content-Length or streamed without it.
    let big = format!(
        r#"{{"text": "{}"}}"#,
        "a".repeat(errbook::web::MAX_BODY_BYTES)
    );
    let reply = send(post_json("/api/v1/diagnose", &big)).await;
    problem(&reply, StatusCode::PAYLOAD_TOO_LARGE);
    assert_documented(&doc, "post", "/api/v1/diagnose", &reply);
    let chunks = vec![Ok::<_, std::io::Error>(big.into_bytes())];
    let streamed = Request::post("/api/v1/diagnose")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(futures_stream(chunks)))
        .unwrap();
    problem(&send(streamed).await, StatusCode::PAYLOAD_TOO_LARGE);
}

/// A body stream without a length.
fn futures_stream(
    chunks: Vec<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_core::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    struct Chunks(std::vec::IntoIter<Result<Vec<u8>, std::io::Error>>);
    impl futures_core::Stream for Chunks {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::task::Poll::Ready(self.0.next())
        }
    }
    Chunks(chunks.into_iter())
}

#[tokio::test]
async fn page_errors_are_html_pages() {
    let reply = send(Request::delete("/diagnose").body(Body::empty()).unwrap()).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(reply.content_type().starts_with("text/html"));
    assert!(
        reply.body.contains("405 Method not allowed"),
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains("DELETE is not accepted here"),
        "{}",
        reply.body
    );
    let big = format!("text={}", "a".repeat(errbook::web::MAX_BODY_BYTES));
    let reply = send(
        Request::post("/diagnose")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(big))
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply.content_type().starts_with("text/html"));
}

#[tokio::test]
async fn urls_are_absolute_with_a_public_url() {
    let kb = Kb::load(&common::fixture_dir()).unwrap();
    let state = AppState::new(SearchIndex::build(Arc::new(kb)).unwrap())
        .with_public_url("https://errbook.example.com/")
        .unwrap();
    let router = app(state);
    let response = router
        .clone()
        .oneshot(
            Request::get("/api/v1/search?q=watchdog")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        json["hits"][0]["url"],
        "https://errbook.example.com/entries/watchdog-timeout"
    );
    let response = router
        .oneshot(Request::get("/llms.txt").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("(https://errbook.example.com/entries/watchdog-timeout.md)"));

    let bad = AppState::new(SearchIndex::build(Arc::new(Kb::from_entries(vec![]))).unwrap())
        .with_public_url("errbook.example.com");
    assert!(bad.unwrap_err().contains("http"));
}

#[tokio::test]
async fn llms_txt_links_every_entry_as_markdown() {
    let reply = get("/llms.txt").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.body.starts_with("# errbook\n"));
    let links: Vec<&str> = reply
        .body
        .lines()
        .filter_map(|l| l.split("](").nth(1)?.split(')').next())
        .collect();
    assert_eq!(links.len(), 6, "{}", reply.body);
    for link in links {
        let md = get(link).await;
        assert_eq!(md.status, StatusCode::OK, "{link}");
        assert!(md.content_type().starts_with("text/markdown"));
        assert!(md.body.starts_with("# "));
        assert!(md.body.contains("## Fix"), "{link}");
    }
    let md = get("/entries/nccl-invalid-usage.md").await;
    assert!(md.body.contains("ncclInvalidUsage"));
    let zh = get("/entries/nccl-invalid-usage.md?lang=zh-CN").await;
    assert!(zh.body.contains("## 解决"), "{}", zh.body);
    assert!(zh.body.contains("ncclInvalidUsage"), "the error text stays");
    assert_eq!(
        get("/entries/no-such-entry.md").await.status,
        StatusCode::NOT_FOUND
    );
}

/// The command line, the API and the MCP tool give one answer in one shape: the
/// same JSON, but for the MCP result's `truncated` flag.
#[tokio::test]
async fn one_answer_in_one_shape_from_the_command_line_the_api_and_mcp() {
    let text = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n\
                torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";
    let kb = common::fixture_dir();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("train.log");
    std::fs::write(&log, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_errbook"))
        .args([
            "diagnose",
            "--no-builtin",
            "--kb",
            kb.to_str().unwrap(),
            "--json",
            log.to_str().unwrap(),
        ])
        .env("ERRBOOK_INDEX_CACHE", dir.path().join("index-cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let post = |uri: &str, body: serde_json::Value| {
        Request::post(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let api = common::send(post("/api/v1/diagnose", json!({ "text": text })))
        .await
        .json();
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "diagnose", "arguments": { "text": text } },
    });
    let mut mcp =
        common::send(post("/mcp", call)).await.json()["result"]["structuredContent"].clone();
    assert_eq!(mcp["truncated"], false);
    mcp.as_object_mut().unwrap().remove("truncated");

    assert_eq!(cli["matches"][0]["slug"], "cuda-oom", "{cli:#}");
    assert_eq!(cli, api);
    assert_eq!(api, mcp);
}

#[tokio::test]
async fn the_document_names_its_server_and_refuses_blank_texts_as_the_server_does() {
    let doc = openapi().await;
    assert_eq!(doc["servers"][0]["url"], "/");
    let q = (doc["paths"]["/api/v1/search"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter())
    .find(|p| p["name"] == "q")
    .unwrap()["schema"]
        .clone();
    let text = doc["components"]["schemas"]["DiagnoseRequest"]["properties"]["text"].clone();
    for schema in [&q, &text] {
        assert_eq!(schema["minLength"], 1, "{schema}");
        let pattern = regex::Regex::new(schema["pattern"].as_str().unwrap()).unwrap();
        for blank in ["", " ", "\t\r\n", "\u{a0}\u{3000}\u{2028}"] {
            assert!(!pattern.is_match(blank), "{blank:?}");
        }
        for text in ["x", "  NCCL  ", "\u{feff}", "\u{1c}", "显存"] {
            assert!(pattern.is_match(text), "{text:?}");
        }
    }
    // What the pattern refuses, the server refuses; what it takes, the server takes.
    for (text, status) in [
        ("\u{a0}\u{3000}", StatusCode::UNPROCESSABLE_ENTITY),
        ("\u{feff}", StatusCode::OK),
        ("\u{1c}", StatusCode::OK),
    ] {
        let body = json!({ "text": text }).to_string();
        let reply = send(post_json("/api/v1/diagnose", &body)).await;
        assert_eq!(reply.status, status, "{text:?}: {}", reply.body);
        let reply = get(&format!("/api/v1/search?q={}", common::encode(text))).await;
        assert_eq!(reply.status, status, "{text:?}: {}", reply.body);
    }

    let kb = Kb::load(&common::fixture_dir()).unwrap();
    let state = AppState::new(SearchIndex::build(Arc::new(kb)).unwrap())
        .with_public_url("https://errbook.example.com/")
        .unwrap();
    let response = app(state)
        .oneshot(
            Request::get("/api/v1/openapi.json")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["servers"][0]["url"], "https://errbook.example.com");
}

#[tokio::test]
async fn every_operation_lists_every_status_it_can_answer_and_has_an_example() {
    let doc = openapi().await;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let responses = &operation["responses"];
            // 202 where the work is queued, not done (feedback).
            let success = if responses["202"].is_null() {
                "200"
            } else {
                "202"
            };
            for status in [success, "405", "408", "413", "414", "431", "503"] {
                let response = resolve(&doc, &responses[status]);
                assert!(!response.is_null(), "{method} {path}: no {status}");
                if status != success {
                    let content = &response["content"]["application/problem+json"];
                    assert!(!content.is_null(), "{method} {path} {status}: {response}");
                }
            }
            let header = |status: &str, name: &str| {
                resolve(&doc, &responses[status])["headers"][name]["required"] == true
            };
            assert!(header("405", "Allow"), "{method} {path}");
            assert!(header("503", "Retry-After"), "{method} {path}");

            let parameters = operation["parameters"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let body = &operation["requestBody"]["content"]["application/json"];
            let answer = &responses[success]["content"]["application/json"];
            let examples = parameters
                .iter()
                .filter(|p| !p["example"].is_null())
                .count()
                + usize::from(!body["example"].is_null())
                + usize::from(!answer["example"].is_null());
            assert!(examples > 0, "{method} {path} has no example");
            // Each example fits its schema.
            let mut errors = Vec::new();
            for p in &parameters {
                if !p["example"].is_null() {
                    conform(
                        &doc,
                        &p["schema"],
                        &p["example"],
                        &format!("{path} {}", p["name"]),
                        &mut errors,
                    );
                }
            }
            for (content, at) in [(body, "request"), (answer, "answer")] {
                if !content["example"].is_null() {
                    conform(
                        &doc,
                        &content["schema"],
                        &content["example"],
                        &format!("{path} {at}"),
                        &mut errors,
                    );
                }
            }
            assert!(errors.is_empty(), "{errors:#?}");
        }
    }
}

#[tokio::test]
async fn the_documented_examples_are_answered_as_documented() {
    let doc = openapi().await;
    let search = &doc["paths"]["/api/v1/search"]["get"]["parameters"];
    let query: Vec<String> = (search.as_array().unwrap().iter())
        .filter(|p| p["name"] != "tag")
        .map(|p| {
            format!(
                "{}={}",
                p["name"].as_str().unwrap(),
                common::encode(p["example"].to_string().trim_matches('"'))
            )
        })
        .collect();
    let reply = get(&format!("/api/v1/search?{}", query.join("&"))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_documented(&doc, "get", "/api/v1/search", &reply);
    let example = &doc["paths"]["/api/v1/diagnose"]["post"]["requestBody"]["content"]["application/json"]
        ["example"];
    let reply = send(post_json("/api/v1/diagnose", &example.to_string())).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_documented(&doc, "post", "/api/v1/diagnose", &reply);
    let slug = &doc["paths"]["/api/v1/entries/{slug}"]["get"]["parameters"][0]["example"];
    // The example names an entry of the shipped knowledge base, not of the fixtures.
    let reply = get(&format!("/api/v1/entries/{}", slug.as_str().unwrap())).await;
    assert_documented(&doc, "get", "/api/v1/entries/{slug}", &reply);
    assert!(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("kb/nccl/{}.md", slug.as_str().unwrap()))
            .exists(),
        "{slug}"
    );
}

#[tokio::test]
async fn a_busy_answer_is_documented_with_its_retry_after() {
    let doc = openapi().await;
    let app = common::fixture_app_with_timeout(std::time::Duration::from_millis(100));
    let request = Request::post("/api/v1/diagnose")
        .header(header::CONTENT_TYPE, "application/json")
        .body(common::stalled_body())
        .unwrap();
    let reply = common::reply_of(app.oneshot(request).await.unwrap()).await;
    problem(&reply, StatusCode::SERVICE_UNAVAILABLE);
    assert_documented(&doc, "post", "/api/v1/diagnose", &reply);
}
