//! `POST /mcp`: the Model Context Protocol server, as an MCP client sees it, over the
//! fixture entries.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{Reply, get, send};
use serde_json::{Value, json};
use tower::ServiceExt;

const NCCL_TRACEBACK: &str = "\
Traceback (most recent call last):
  File \"/work/train.py\", line 88, in <module>
    model = DDP(model, device_ids=[local_rank])
RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, invalid usage, NCCL version 2.10.3
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
";

/// POSTs `body` to `/mcp` as a client does, with `extra` headers.
async fn post_raw(body: &str, extra: &[(&str, &str)]) -> Reply {
    let mut request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let reply = send(request.body(Body::from(body.to_string())).unwrap()).await;
    assert!(
        reply.body.chars().count() < 100_000,
        "reply of {} characters",
        reply.body.chars().count()
    );
    reply
}

/// Sends a request and returns the whole JSON-RPC response, which must be HTTP 200 JSON.
async fn rpc(method: &str, params: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
    let reply = post_raw(&body.to_string(), &[("mcp-protocol-version", "2025-06-18")]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(reply.content_type().starts_with("application/json"));
    let json = reply.json();
    assert_eq!(json["jsonrpc"], "2.0");
    assert_eq!(json["id"], 7, "{json}");
    json
}

/// The `result` of a `tools/call`.
async fn call(tool: &str, arguments: Value) -> Value {
    let response = rpc(
        "tools/call",
        json!({ "name": tool, "arguments": arguments }),
    )
    .await;
    assert!(response.get("error").is_none(), "{response}");
    response["result"].clone()
}

/// A successful call's structured content, checked against the tool's `outputSchema`
/// and against the text content, which must hold the same JSON.
async fn call_ok(tool: &str, arguments: Value) -> Value {
    let result = call(tool, arguments).await;
    assert_eq!(result["isError"], false, "{result}");
    let structured = result["structuredContent"].clone();
    assert_eq!(result["content"][0]["type"], "text");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, structured);
    let schema = output_schema(tool).await;
    if let Err(problem) = conforms(&schema, &structured, "structuredContent") {
        panic!("{problem}\n{structured:#}");
    }
    structured
}

/// A failed call's message: `isError` with one text block.
async fn call_err(tool: &str, arguments: Value) -> String {
    let result = call(tool, arguments).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["content"][0]["type"], "text");
    result["content"][0]["text"].as_str().unwrap().to_string()
}

async fn tools() -> Vec<Value> {
    rpc("tools/list", json!({})).await["result"]["tools"]
        .as_array()
        .unwrap()
        .clone()
}

async fn output_schema(tool: &str) -> Value {
    tools()
        .await
        .into_iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("no tool {tool}"))["outputSchema"]
        .clone()
}

/// Checks `value` against the parts of JSON Schema the tools use: `type` (one or a
/// list), `required`, `properties`, `items` and `enum`.
fn conforms(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let fits = |t: &str| match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    };
    if !types.is_empty() && !types.iter().any(|t| fits(t)) {
        return Err(format!("{path}: {value} is not of type {types:?}"));
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        return Err(format!("{path}: {value} is not one of {allowed:?}"));
    }
    if let Some(object) = value.as_object() {
        for key in schema["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap();
            if !object.contains_key(key) {
                return Err(format!("{path}: required property `{key}` is missing"));
            }
        }
        for (key, sub) in schema["properties"].as_object().into_iter().flatten() {
            if let Some(v) = object.get(key) {
                conforms(sub, v, &format!("{path}.{key}"))?;
            }
        }
    }
    if let Some(items) = value.as_array() {
        for (i, item) in items.iter().enumerate() {
            conforms(&schema["items"], item, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_session_initializes_lists_tools_and_pings() {
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "test-client", "version": "1.0" },
        },
    });
    let reply = post_raw(&init.to_string(), &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.content_type().starts_with("application/json"));
    let result = &reply.json()["result"];
    assert_eq!(reply.json()["id"], 1);
    assert_eq!(result["protocolVersion"], "2025-06-18");
    assert_eq!(result["serverInfo"]["name"], "errbook");
    assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(result["capabilities"]["tools"]["listChanged"], false);
    assert!(
        result["instructions"]
            .as_str()
            .unwrap()
            .contains("diagnose")
    );

    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let reply = post_raw(
        &initialized.to_string(),
        &[("mcp-protocol-version", "2025-06-18")],
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    assert!(reply.body.is_empty(), "{}", reply.body);

    assert_eq!(rpc("ping", json!({})).await["result"], json!({}));

    let tools = tools().await;
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search", "fetch", "diagnose"]);
    for tool in &tools {
        let description = tool["description"].as_str().unwrap();
        assert!(
            !description.is_empty() && description.chars().count() < 300,
            "{description}"
        );
        assert!(tool["title"].is_string());
        assert_eq!(tool["annotations"]["readOnlyHint"], true);
        let input = &tool["inputSchema"];
        assert_eq!(input["type"], "object", "{tool}");
        assert_eq!(input["additionalProperties"], false, "{tool}");
        assert!(input["properties"].is_object());
        assert_eq!(input["required"].as_array().unwrap().len(), 1, "{tool}");
        let output = &tool["outputSchema"];
        assert_eq!(output["type"], "object", "{tool}");
        assert!(output["properties"].is_object());
        assert!(!output["required"].as_array().unwrap().is_empty());
    }
}

#[tokio::test]
async fn initialize_offers_its_own_version_to_a_client_asking_for_another() {
    let result = rpc(
        "initialize",
        json!({ "protocolVersion": "2024-11-05", "capabilities": {},
                "clientInfo": { "name": "old", "version": "0" } }),
    )
    .await;
    assert_eq!(result["result"]["protocolVersion"], "2025-06-18");
}

#[tokio::test]
async fn other_notifications_and_client_responses_are_accepted_without_a_body() {
    for message in [
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": { "requestId": 3 } }),
        json!({ "jsonrpc": "2.0", "id": 5, "result": {} }),
    ] {
        let reply = post_raw(&message.to_string(), &[]).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{message}");
        assert!(reply.body.is_empty());
    }
}

#[tokio::test]
async fn search_finds_the_entry_and_matches_its_output_schema() {
    let out = call_ok(
        "search",
        json!({ "query": "NCCL invalid usage device_ids" }),
    )
    .await;
    let results = out["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() <= 5, "{out}");
    let top = &results[0];
    assert_eq!(top["id"], "nccl-invalid-usage");
    assert_eq!(
        top["title"],
        "NCCL invalid usage when the model sits on another GPU"
    );
    assert_eq!(top["url"], "/entries/nccl-invalid-usage");
    assert_eq!(top["tags"], json!(["nccl", "ddp"]));
    assert!(!top["snippet"].as_str().unwrap().is_empty());
    assert_eq!(out["truncated"], false);
}

#[tokio::test]
async fn search_honours_limit_and_tag() {
    let one = call_ok("search", json!({ "query": "GPU", "limit": 1 })).await;
    assert_eq!(one["results"].as_array().unwrap().len(), 1);
    let tagged = call_ok("search", json!({ "query": "GPU NCCL", "tag": "autograd" })).await;
    for r in tagged["results"].as_array().unwrap() {
        assert!(
            r["tags"].as_array().unwrap().contains(&json!("autograd")),
            "{r}"
        );
    }
    let message = call_err("search", json!({ "query": "GPU", "tag": "no-such-tag" })).await;
    assert!(
        message.contains("nccl") && message.contains("autograd"),
        "{message}"
    );
}

#[tokio::test]
async fn fetch_returns_the_markdown_and_metadata() {
    let out = call_ok("fetch", json!({ "id": "nccl-invalid-usage" })).await;
    assert_eq!(out["id"], "nccl-invalid-usage");
    assert_eq!(out["url"], "/entries/nccl-invalid-usage");
    assert_eq!(
        out["title_zh"],
        "NCCL invalid usage：模型与 device_ids 不在同一张卡"
    );
    let text = out["text"].as_str().unwrap();
    assert!(text.starts_with("## Symptom"), "{text}");
    assert!(text.contains("model.to(local_rank)"), "{text}");
    let meta = &out["metadata"];
    assert!(
        meta["summary"]
            .as_str()
            .unwrap()
            .starts_with("DDP was given")
    );
    assert_eq!(meta["signatures"][0], "ncclInvalidUsage");
    assert_eq!(meta["related"], json!(["launcher-wrapper"]));
    assert_eq!(
        meta["sources"][0],
        "https://pytorch.org/docs/stable/notes/ddp.html"
    );
    assert_eq!(out["truncated"], false);
}

#[tokio::test]
async fn diagnose_matches_a_traceback_with_evidence() {
    let out = call_ok("diagnose", json!({ "text": NCCL_TRACEBACK })).await;
    assert_eq!(out["verdict"], "matched", "{out:#}");
    let top = &out["matches"][0];
    assert_eq!(top["slug"], "nccl-invalid-usage");
    assert_eq!(top["url"], "/entries/nccl-invalid-usage");
    assert!(top["score"].as_f64().unwrap() > 0.0);
    let evidence = top["evidence"].as_array().unwrap();
    assert!(!evidence.is_empty());
    assert!(
        evidence
            .iter()
            .any(|e| e["signature"] == "ncclInvalidUsage" && e["line"] == 5),
        "{evidence:?}"
    );
    assert!(out["matches"].as_array().unwrap().len() <= 5);
    assert_eq!(out["parsed"]["root_cause"]["type"], "RuntimeError");
    assert!(
        out["parsed"]["error_codes"]
            .as_array()
            .unwrap()
            .contains(&json!("ncclInvalidUsage")),
        "{out:#}"
    );
}

#[tokio::test]
async fn diagnose_without_a_match_says_no_match_and_offers_the_closest() {
    let out = call_ok(
        "diagnose",
        json!({ "text": "FileNotFoundError: dataset shard missing on GPU node", "limit": 2 }),
    )
    .await;
    assert_eq!(out["verdict"], "no_match", "{out:#}");
    assert!(out["matches"].as_array().unwrap().is_empty());
    let closest = out["closest"].as_array().unwrap();
    assert!(!closest.is_empty() && closest.len() <= 2, "{out:#}");
    for c in closest {
        assert!(c["url"].as_str().unwrap().starts_with("/entries/"), "{c}");
    }
    assert_eq!(out["parsed"]["root_cause"]["type"], "FileNotFoundError");
}

#[tokio::test]
async fn a_huge_paste_is_cut_to_fit_and_says_so() {
    // Thirty distinct exceptions whose messages are each thousands of characters long.
    let text: String = (0..30u8)
        .map(|i| {
            let letter = char::from(b'a' + i % 26);
            let word = format!("{letter}{}", char::from(b'a' + i / 26)).repeat(4);
            format!(
                "Quux{}Error: {}\n",
                word.to_uppercase(),
                format!("{word} ").repeat(1500)
            )
        })
        .collect();
    let out = call_ok("diagnose", json!({ "text": text })).await;
    assert_eq!(out["truncated"], true);
    let exceptions = out["parsed"]["exceptions"].as_array().unwrap();
    assert!(
        !exceptions.is_empty() && exceptions.len() <= 10,
        "{}",
        exceptions.len()
    );
    assert!(exceptions[0]["message"].as_str().unwrap().ends_with('…'));
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_a_model_can_act_on() {
    let missing = call_err("search", json!({})).await;
    assert!(
        missing.contains("query") && missing.contains("required"),
        "{missing}"
    );
    let no_arguments = rpc("tools/call", json!({ "name": "search" })).await;
    assert_eq!(no_arguments["result"]["isError"], true);

    let empty = call_err("search", json!({ "query": "   " })).await;
    assert!(empty.contains("`query` is empty"), "{empty}");

    for limit in [json!(0), json!(21), json!(-1), json!("5")] {
        let message = call_err("search", json!({ "query": "GPU", "limit": limit })).await;
        assert!(
            message.contains("limit") && message.contains("1-20"),
            "{message}"
        );
    }
    for limit in [0, 21] {
        let message = call_err("diagnose", json!({ "text": "x", "limit": limit })).await;
        assert!(message.contains("from 1 to 20"), "{message}");
    }

    let unknown_field = call_err("search", json!({ "q": "GPU" })).await;
    assert!(unknown_field.contains("`q`"), "{unknown_field}");
    let wrong_type = call_err("diagnose", json!({ "text": 42 })).await;
    assert!(wrong_type.contains("text"), "{wrong_type}");
    let not_object = call_err("fetch", json!("nccl-invalid-usage")).await;
    assert!(not_object.contains("JSON object"), "{not_object}");
    let blank = call_err("diagnose", json!({ "text": "\n \n" })).await;
    assert!(blank.contains("(`text`) is empty"), "{blank}");
}

#[tokio::test]
async fn fetching_an_unknown_id_points_to_search() {
    let message = call_err("fetch", json!({ "id": "no-such-entry" })).await;
    assert!(message.contains("no-such-entry"), "{message}");
    assert!(message.contains("search"), "{message}");
}

#[tokio::test]
async fn an_unknown_tool_is_invalid_params_listing_the_tools() {
    let response = rpc("tools/call", json!({ "name": "grep", "arguments": {} })).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    for tool in ["grep", "search", "fetch", "diagnose"] {
        assert!(message.contains(tool), "{message}");
    }
    let no_params = rpc("tools/call", Value::Null).await;
    assert_eq!(no_params["error"]["code"], -32602, "{no_params}");
}

#[tokio::test]
async fn an_unknown_method_is_method_not_found() {
    let response = rpc("resources/list", json!({})).await;
    assert_eq!(response["error"]["code"], -32601);
    assert!(response["result"].is_null());
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("resources/list")
    );
}

#[tokio::test]
async fn malformed_json_is_a_400_parse_error() {
    let reply = post_raw(r#"{"jsonrpc": "2.0", "id": 1, "method": "#, &[]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.content_type().starts_with("application/json"));
    let json = reply.json();
    assert_eq!(json["jsonrpc"], "2.0");
    assert_eq!(json["id"], Value::Null);
    assert_eq!(json["error"]["code"], -32700);
}

#[tokio::test]
async fn messages_that_are_not_requests_are_invalid_requests() {
    for body in [
        json!([{ "jsonrpc": "2.0", "id": 1, "method": "ping" }]),
        json!({ "id": 1, "method": "ping" }),
        json!({ "jsonrpc": "1.0", "id": 1, "method": "ping" }),
        json!({ "jsonrpc": "2.0", "id": 1 }),
        json!({ "jsonrpc": "2.0", "id": null, "method": "ping" }),
        json!({ "jsonrpc": "2.0", "id": 1, "method": 5 }),
        json!("ping"),
    ] {
        let reply = post_raw(&body.to_string(), &[]).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        let json = reply.json();
        assert_eq!(json["error"]["code"], -32600, "{body}: {json}");
        assert_eq!(json["id"], Value::Null);
    }
}

#[tokio::test]
async fn get_is_405_allowing_post() {
    let reply = get("/mcp").await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    let allow = reply.headers.get(header::ALLOW).unwrap().to_str().unwrap();
    assert!(allow.contains("POST"), "{allow}");
}

#[tokio::test]
async fn the_protocol_version_header_is_checked_when_present() {
    let ping = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();
    let bad = post_raw(&ping, &[("mcp-protocol-version", "1999-01-01")]).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let json = bad.json();
    assert_eq!(json["error"]["code"], -32600);
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2025-06-18")
    );
    for good in ["2025-06-18", "2025-03-26"] {
        let reply = post_raw(&ping, &[("mcp-protocol-version", good)]).await;
        assert_eq!(reply.status, StatusCode::OK, "{good}");
        assert_eq!(reply.json()["result"], json!({}));
    }
}

// ---- who may call ----------------------------------------------------------------------

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

#[tokio::test]
async fn a_web_page_from_another_origin_cannot_call_the_tools() {
    // DNS rebinding: the attacker's page reaches the server under its own name, so its
    // Origin is its own host, whatever the Host header says.
    for origin in [
        "http://evil.example",
        "http://attacker.example:8080",
        "https://127.0.0.1.evil.example",
        "http://localhost.evil.example",
        "null",
        "file://",
    ] {
        let reply = post_raw(LIST, &[("origin", origin), ("host", "evil.example")]).await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{origin}: {}",
            reply.body
        );
        let json = reply.json();
        assert_eq!(json["error"]["code"], -32600, "{json}");
        assert!(
            json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Origin")
        );
    }
    // Pages on this machine, and clients that send no Origin (SDKs, curl), may.
    for origin in [
        "http://localhost:8080",
        "http://127.0.0.1:3000",
        "https://[::1]",
    ] {
        let reply = post_raw(LIST, &[("origin", origin)]).await;
        assert_eq!(reply.status, StatusCode::OK, "{origin}: {}", reply.body);
    }
    assert_eq!(post_raw(LIST, &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn an_operator_allows_a_chat_origin_and_the_public_url() {
    let kb = errbook::kb::Kb::load(&common::fixture_dir()).unwrap();
    let index = errbook::search::SearchIndex::build(std::sync::Arc::new(kb)).unwrap();
    let mut state = errbook::AppState::new(index)
        .with_public_url("https://errbook.example.com/")
        .unwrap();
    state.allowed_origins = vec!["https://chat.example.com".to_string()].into();
    let app = errbook::app(state);
    for (origin, status) in [
        ("https://chat.example.com", StatusCode::OK),
        ("HTTPS://Chat.Example.com/", StatusCode::OK),
        ("https://errbook.example.com", StatusCode::OK),
        ("http://chat.example.com", StatusCode::FORBIDDEN),
        (
            "https://chat.example.com.evil.example",
            StatusCode::FORBIDDEN,
        ),
    ] {
        let request = Request::post("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ORIGIN, origin)
            .body(Body::from(LIST))
            .unwrap();
        let reply = common::reply_of(app.clone().oneshot(request).await.unwrap()).await;
        assert_eq!(reply.status, status, "{origin}: {}", reply.body);
    }
}

#[tokio::test]
async fn a_body_not_sent_as_json_is_415() {
    for content_type in ["text/plain", "application/x-www-form-urlencoded", ""] {
        let mut request = Request::post("/mcp");
        if !content_type.is_empty() {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let reply = send(request.body(Body::from(LIST)).unwrap()).await;
        assert_eq!(
            reply.status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type}: {}",
            reply.body
        );
        assert!(
            reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("application/json")
        );
    }
}
