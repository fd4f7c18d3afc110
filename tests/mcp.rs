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
    assert_eq!(names, ["search", "fetch", "diagnose", "feedback"]);
    for tool in &tools {
        let description = tool["description"].as_str().unwrap();
        assert!(
            !description.is_empty() && description.chars().count() < 300,
            "{description}"
        );
        assert!(tool["title"].is_string());
        // Only `feedback` writes (what the user said, for the curators).
        let writes = tool["name"] == "feedback";
        assert_eq!(tool["annotations"]["readOnlyHint"], !writes);
        let input = &tool["inputSchema"];
        assert_eq!(input["type"], "object", "{tool}");
        assert_eq!(input["additionalProperties"], false, "{tool}");
        assert!(input["properties"].is_object());
        let required = if writes { 2 } else { 1 };
        assert_eq!(
            input["required"].as_array().unwrap().len(),
            required,
            "{tool}"
        );
        for (name, property) in input["properties"].as_object().unwrap() {
            if property["type"] == "string" {
                assert!(
                    property["maxLength"].as_u64().is_some_and(|n| n > 0),
                    "{name} of {tool} has no maxLength"
                );
            }
        }
        let output = &tool["outputSchema"];
        assert_eq!(output["type"], "object", "{tool}");
        assert!(output["properties"].is_object());
        assert!(!output["required"].as_array().unwrap().is_empty());
    }
}

#[tokio::test]
async fn initialize_answers_with_the_version_asked_for_when_it_speaks_it() {
    for (asked, answered) in [
        (json!("2025-06-18"), "2025-06-18"),
        (json!("2025-03-26"), "2025-03-26"),
        // Versions it does not speak get the latest it does.
        (json!("2024-11-05"), "2025-06-18"),
        (json!("2025-11-25"), "2025-06-18"),
        (json!(20250326), "2025-06-18"),
        (Value::Null, "2025-06-18"),
    ] {
        let result = rpc(
            "initialize",
            json!({ "protocolVersion": asked, "capabilities": {},
                    "clientInfo": { "name": "client", "version": "0" } }),
        )
        .await;
        assert_eq!(result["result"]["protocolVersion"], answered, "{asked}");
    }
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
    // The fix in brief, without a `fetch`.
    assert!(
        (top["summary"].as_str().unwrap()).starts_with("DDP was given"),
        "{top}"
    );
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
    for tag in [
        "no-such-tag",
        "NCCL",
        "a-tag-longer-than-any-the-knowledge-base-has",
    ] {
        let message = call_err("search", json!({ "query": "GPU", "tag": tag })).await;
        assert!(
            message.contains("`tag` must be one of") && message.contains("autograd"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn fetch_gives_what_a_model_needs_and_no_regexes_or_file_names() {
    let out = call_ok("fetch", json!({ "id": "nccl-invalid-usage" })).await;
    assert_eq!(out["id"], "nccl-invalid-usage");
    assert_eq!(out["url"], "/entries/nccl-invalid-usage");
    assert_eq!(
        out["title"],
        "NCCL invalid usage when the model sits on another GPU"
    );
    let text = |field: &str| out[field].as_str().unwrap().to_string();
    assert!(text("summary").starts_with("DDP was given"), "{out:#}");
    assert!(text("symptoms").contains("ncclInvalidUsage"), "{out:#}");
    assert!(text("cause").contains("device_ids"), "{out:#}");
    assert!(text("fix").contains("model.to(local_rank)"), "{out:#}");
    assert!(text("verify").contains("training starts"), "{out:#}");
    for (field, section) in [("symptoms", "Symptom"), ("cause", "Cause"), ("fix", "Fix")] {
        assert!(
            !text(field).contains("## "),
            "{field} holds the {section} section only"
        );
    }
    assert_eq!(out["causes"], json!([]));
    assert_eq!(out["related"][0]["id"], "launcher-wrapper");
    assert!(out["related"][0]["title"].is_string());
    assert_eq!(
        out["references"],
        json!(["https://pytorch.org/docs/stable/notes/ddp.html"])
    );
    assert_eq!(out["truncated"], false);
    let whole = out.to_string();
    // The entry's regex signature (`ProcessGroupNCCL\.cpp:\d+`) is for diagnosis only.
    assert!(
        !whole.contains(r"\\d+") && !whole.contains("signatures"),
        "{whole}"
    );

    // A source that is a file the entry was drawn from stays out; the versions stay.
    let out = call_ok("fetch", json!({ "id": "view-inplace" })).await;
    assert_eq!(out["references"], json!([]));
    assert!(!out.to_string().contains("seed"), "{out:#}");
    assert_eq!(out["versions"][0]["package"], "torch");
    assert_eq!(out["versions"][0]["fixed"], "1.11.0");
}

/// An entry whose symptom has two causes, each with its own fix.
const BRANCHED: &str = r#"---
slug: loss-nan
title: "Loss becomes NaN"
title_zh: "loss 变成 NaN"
summary: "The loss turns NaN; the cause decides the fix."
summary_zh: "loss 变成 NaN；原因不同修法不同。"
tags: [amp]
signatures:
  - "loss is nan"
symptoms:
  - "loss is nan after a few steps"
branches:
  - id: overflow
    title: "fp16 overflow"
    title_zh: "fp16 溢出"
    when: ["overflow in fp16"]
    fix: "Use bf16 or a GradScaler on {rank|every rank}."
    fix_zh: "换 bf16 或 GradScaler。"
  - id: bad-data
    title: "A bad sample"
    title_zh: "坏样本"
    when: ["nan in input"]
    fix: "Check the inputs for NaN."
    fix_zh: "检查输入里的 NaN。"
---

## Symptom

The loss prints `nan`.

## Cause

It depends: see the causes.

## Fix

Pick the fix of the cause.

## Verify

The loss stays finite.
"#;

#[tokio::test]
async fn fetch_lists_each_cause_with_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("loss-nan.md"), BRANCHED).unwrap();
    let kb = errbook::kb::Kb::load(dir.path()).unwrap();
    let index = errbook::search::SearchIndex::build(std::sync::Arc::new(kb)).unwrap();
    let app = errbook::app(errbook::AppState::new(index));
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": { "name": "fetch", "arguments": { "id": "loss-nan" } } });
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(call.to_string()))
        .unwrap();
    let reply = common::reply_of(app.oneshot(request).await.unwrap()).await;
    let out = &reply.json()["result"]["structuredContent"];
    assert_eq!(
        out["causes"],
        json!([
            { "id": "overflow", "title": "fp16 overflow",
              "fix": "Use bf16 or a GradScaler on every rank." },
            { "id": "bad-data", "title": "A bad sample", "fix": "Check the inputs for NaN." },
        ]),
        "{out:#}"
    );
}

#[tokio::test]
async fn fetch_answers_in_chinese_when_asked() {
    let out = call_ok(
        "fetch",
        json!({ "id": "nccl-invalid-usage", "lang": "zh-CN" }),
    )
    .await;
    assert_eq!(out["lang"], "zh-CN", "{out:#}");
    assert_eq!(
        out["title"],
        "NCCL invalid usage：模型与 device_ids 不在同一张卡"
    );
    let text = |field: &str| out[field].as_str().unwrap().to_string();
    assert!(text("cause").contains("模型参数所在的设备"), "{out:#}");
    assert!(
        text("fix").contains("包装之前先用 `model.to(local_rank)`"),
        "{out:#}"
    );
    assert!(text("verify").contains("训练正常开始"), "{out:#}");
    assert!(
        text("symptoms").contains("ncclInvalidUsage"),
        "the error text stays: {out:#}"
    );

    let english = call_ok("fetch", json!({ "id": "nccl-invalid-usage", "lang": "en" })).await;
    assert_eq!(english["lang"], "en");
    assert!(english["fix"].as_str().unwrap().contains("Move the model"));

    let message = call_err("fetch", json!({ "id": "nccl-invalid-usage", "lang": "fr" })).await;
    assert!(message.contains("lang"), "{message}");
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

// ---- limits ----------------------------------------------------------------------------

/// A `tools/call` of `diagnose` on `text`, as an SDK writes it.
fn diagnose_call(id: u32, text: &str) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "diagnose", "arguments": { "text": text } } })
    .to_string()
}

const MCP_HEAD: &str = "POST /mcp HTTP/1.1\r\nhost: errbook\r\ncontent-type: application/json\r\n\
                        accept: application/json, text/event-stream";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paste_over_a_mebibyte_gets_a_tool_error_and_the_connection_goes_on() {
    let server = common::serve_fixture().await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    // Over 1 MiB: read whole, and refused by the tool, in a result the model reads.
    let paste =
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, invalid usage\n".repeat(16_000);
    assert!(paste.len() > 1 << 20);
    let reply = common::exchange(&mut stream, MCP_HEAD, diagnose_call(3, &paste).as_bytes())
        .await
        .expect("an answer, not a reset connection");
    assert_eq!(reply.status, 200);
    let json = reply.json();
    assert_eq!(json["id"], 3, "{json}");
    assert_eq!(json["result"]["isError"], true, "{json}");
    let message = json["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains(&format!("{} characters", paste.chars().count()))
            && message.contains("send at most 524288 characters")
            && message.contains("traceback"),
        "{message}"
    );
    // The same connection answers the next call of the same session.
    let search = json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call",
                         "params": { "name": "search", "arguments": { "query": "ncclInvalidUsage" } } });
    let reply = common::exchange(&mut stream, MCP_HEAD, search.to_string().as_bytes())
        .await
        .expect("the connection still open");
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.json()["result"]["structuredContent"]["results"][0]["id"],
        "nccl-invalid-usage"
    );

    // Past what `/mcp` reads at all: the body is still read and dropped, and the answer
    // is a JSON-RPC error an SDK hands to the caller.
    let huge = diagnose_call(5, &"x".repeat(errbook::web::MCP_MAX_BODY_BYTES));
    let reply = common::exchange(&mut stream, MCP_HEAD, huge.as_bytes())
        .await
        .expect("an answer, not a reset connection");
    assert_eq!(reply.status, 413);
    assert!(
        reply
            .header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let json = reply.json();
    assert_eq!(json["jsonrpc"], "2.0");
    assert_eq!(json["id"], Value::Null);
    assert_eq!(json["error"]["code"], -32600, "{json}");
    let message = json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&errbook::web::MCP_MAX_BODY_BYTES.to_string()),
        "{message}"
    );
    let ping = json!({ "jsonrpc": "2.0", "id": 6, "method": "ping" }).to_string();
    let reply = common::exchange(&mut stream, MCP_HEAD, ping.as_bytes())
        .await
        .expect("the connection still open");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["result"], json!({}));
}

#[tokio::test]
async fn the_paste_limit_counts_characters_however_they_are_escaped() {
    const MAX: usize = 512 * 1024;
    // The longest paste, every character as large as JSON writes one (a surrogate pair
    // of `\uXXXX` escapes, 12 bytes), fits what `/mcp` reads; one more character is
    // the tool's refusal.
    for (chars, refused) in [(MAX, false), (MAX + 1, true)] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"diagnose","arguments":{{"text":"RuntimeError: {}"}}}}}}"#,
            r"\ud83d\ude00".repeat(chars - "RuntimeError: ".len())
        );
        assert!(body.len() <= errbook::web::MCP_MAX_BODY_BYTES);
        let reply = post_raw(&body, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let result = &reply.json()["result"];
        assert_eq!(result["isError"], refused, "{chars}: {result}");
    }
}

#[tokio::test]
async fn limits_given_as_json_schema_integers_are_taken() {
    for limit in [json!(2.0), json!(2e0)] {
        let out = call_ok("search", json!({ "query": "GPU", "limit": limit })).await;
        assert!(out["results"].as_array().unwrap().len() <= 2, "{limit}");
        call_ok(
            "diagnose",
            json!({ "text": NCCL_TRACEBACK, "limit": limit }),
        )
        .await;
    }
    let message = call_err("search", json!({ "query": "GPU", "limit": 2.5 })).await;
    assert!(message.contains("integer"), "{message}");
    let long = "GPU ".repeat(600);
    let message = call_err("search", json!({ "query": long })).await;
    assert!(
        message.contains("2400 characters, over the limit of 2000") && message.contains("diagnose"),
        "{message}"
    );
}

#[tokio::test]
async fn a_busy_server_says_when_to_try_again() {
    let app = common::fixture_app_with_timeout(std::time::Duration::from_millis(100));
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .body(common::stalled_body())
        .unwrap();
    let reply = common::reply_of(app.oneshot(request).await.unwrap()).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers[header::RETRY_AFTER], "2");
    assert!(reply.content_type().starts_with("application/json"));
    let json = reply.json();
    assert_eq!(json["id"], Value::Null);
    assert_eq!(json["error"]["code"], -32603, "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("try again in 2 s"),
        "{json}"
    );
}

#[tokio::test]
async fn evidence_lists_each_paste_line_once_whatever_cites_it() {
    let paste = "Traceback (most recent call last):\n  File \"train.py\", line 9\n\
                 RuntimeError: NCCL error: invalid usage on GPU 0 out of memory\n";
    let out = call_ok("diagnose", json!({ "text": paste })).await;
    let lines: Vec<u64> = (out["lines"].as_array().unwrap().iter())
        .map(|l| l["line"].as_u64().unwrap())
        .collect();
    let mut distinct = lines.clone();
    distinct.dedup();
    assert_eq!(lines, distinct, "each line once, in order: {out:#}");
    let mut citing = 0;
    for m in out["matches"].as_array().unwrap() {
        for e in m["evidence"].as_array().unwrap() {
            assert!(lines.contains(&e["line"].as_u64().unwrap()), "{e}");
            assert!(e.get("text").is_none(), "the text is in `lines`: {e}");
            citing += usize::from(e["line"] == 3);
        }
    }
    assert!(citing >= 2, "line 3 is cited by several matches: {out:#}");
    let third = &out["lines"].as_array().unwrap()[lines.iter().position(|&l| l == 3).unwrap()];
    assert_eq!(
        third["text"],
        "RuntimeError: NCCL error: invalid usage on GPU 0 out of memory"
    );
}
