//! The JSON API: shapes a chatbot relies on, and problem+json errors.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{get, send};
use serde_json::json;
use tower::ServiceExt;

#[tokio::test]
async fn search_returns_hits_with_every_field() {
    let reply = get("/api/v1/search?q=ncclInvalidUsage&limit=2").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.content_type().starts_with("application/json"));
    let json = reply.json();
    assert_eq!(json["query"], "ncclInvalidUsage");
    let hits = json["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 2, "{json}");
    let hit = &hits[0];
    assert_eq!(hit["slug"], "nccl-invalid-usage");
    assert_eq!(
        hit["title"],
        "NCCL invalid usage when the model sits on another GPU"
    );
    assert_eq!(
        hit["title_zh"],
        "NCCL invalid usage：模型与 device_ids 不在同一张卡"
    );
    assert_eq!(hit["url"], "/entries/nccl-invalid-usage");
    assert!(
        hit["summary"]
            .as_str()
            .unwrap()
            .starts_with("DDP was given")
    );
    assert!(
        hit["snippet"]
            .as_str()
            .unwrap()
            .contains("ncclInvalidUsage")
    );
    assert!(hit["score"].as_f64().unwrap() > 0.0);
    assert_eq!(hit["tags"], serde_json::json!(["nccl", "ddp"]));
}

#[tokio::test]
async fn search_limit_is_respected_and_validated() {
    let one = get("/api/v1/search?q=GPU&limit=1").await;
    assert_eq!(one.json()["hits"].as_array().unwrap().len(), 1);
    for bad in ["0", "abc", "-1", "101"] {
        let reply = get(&format!("/api/v1/search?q=GPU&limit={bad}")).await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit={bad}"
        );
        assert_eq!(reply.content_type(), "application/problem+json");
        let problem = reply.json();
        assert_eq!(problem["status"], 422);
        assert!(
            problem["detail"].as_str().unwrap().contains("limit"),
            "{problem}"
        );
    }
}

#[tokio::test]
async fn search_pages_through_every_hit_with_offset_and_total() {
    let slugs = |reply: &common::Reply| -> Vec<String> {
        (reply.json()["hits"].as_array().unwrap().iter())
            .map(|h| h["slug"].as_str().unwrap().to_string())
            .collect()
    };
    let all = get("/api/v1/search?q=rank%20GPU&limit=100").await;
    assert_eq!(all.status, StatusCode::OK);
    let everything = slugs(&all);
    let total = all.json()["total"].as_u64().unwrap() as usize;
    assert_eq!(total, everything.len());
    assert!(
        total >= 3,
        "the query finds several entries: {everything:?}"
    );
    assert_eq!(all.json()["offset"], 0);

    // Two at a time, the pages add up to the whole ranking, each saying the same total.
    let mut paged = Vec::new();
    for offset in (0..total + 2).step_by(2) {
        let page = get(&format!(
            "/api/v1/search?q=rank%20GPU&limit=2&offset={offset}"
        ))
        .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert_eq!(page.json()["total"], total, "offset {offset}");
        assert_eq!(page.json()["offset"], offset);
        let hits = slugs(&page);
        assert_eq!(
            hits.len(),
            total.saturating_sub(offset).min(2),
            "offset {offset}"
        );
        paged.extend(hits);
    }
    assert_eq!(paged, everything);

    // A tag narrows the total too.
    let tagged = get("/api/v1/search?q=rank%20GPU&tag=memory").await;
    assert_eq!(tagged.status, StatusCode::OK);
    let tagged_total = tagged.json()["total"].as_u64().unwrap() as usize;
    assert!(tagged_total >= 1 && tagged_total < total, "{}", tagged.body);
    assert_eq!(slugs(&tagged).len(), tagged_total.min(10));

    for bad in ["", "-1", "abc", "1.5", "99999999999999999999999"] {
        let reply = get(&format!("/api/v1/search?q=GPU&offset={bad}")).await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "offset={bad}"
        );
        assert_eq!(reply.content_type(), "application/problem+json");
        let detail = reply.json()["detail"].as_str().unwrap().to_string();
        assert!(
            detail.contains("`offset`") && detail.contains(bad),
            "{detail}"
        );
    }
}

#[tokio::test]
async fn the_openapi_document_describes_search_paging() {
    let doc = get("/api/v1/openapi.json").await.json();
    let search = &doc["paths"]["/api/v1/search"]["get"];
    let offset = (search["parameters"].as_array().unwrap().iter())
        .find(|p| p["name"] == "offset")
        .unwrap_or_else(|| panic!("no offset parameter: {search}"));
    assert_eq!(offset["in"], "query");
    assert_eq!(offset["schema"]["minimum"], 0);
    let response = &doc["components"]["schemas"]["SearchResponse"];
    for field in ["total", "offset"] {
        assert!(
            (response["required"].as_array().unwrap()).contains(&field.into()),
            "{response}"
        );
        assert_eq!(response["properties"][field]["type"], "integer");
    }
}

#[tokio::test]
async fn a_blank_query_is_422_and_no_query_lists_entries() {
    for q in ["", "%20%20", "%09%0A", "%E3%80%80"] {
        let reply = get(&format!("/api/v1/search?q={q}")).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "q={q}");
        assert!(
            reply.json()["detail"]
                .as_str()
                .unwrap()
                .contains("`q` is blank")
        );
        let tagged = get(&format!("/api/v1/search?q={q}&tag=nccl")).await;
        assert_eq!(tagged.status, StatusCode::UNPROCESSABLE_ENTITY, "q={q}");
    }
    // Neither words nor a tag: the first entries, as a tag alone lists its own.
    let all = get("/api/v1/search?limit=4").await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    assert_eq!(all.json()["hits"].as_array().unwrap().len(), 4);
    let tagged = get("/api/v1/search?tag=nccl").await.json();
    for hit in tagged["hits"].as_array().unwrap() {
        assert!(
            hit["tags"].as_array().unwrap().contains(&json!("nccl")),
            "{hit}"
        );
    }
    // Words that are no searchable term find nothing rather than everything.
    let none = get("/api/v1/search?q=%21%21%21").await;
    assert_eq!(none.status, StatusCode::OK);
    assert_eq!(none.json()["hits"], json!([]));
}

#[tokio::test]
async fn limit_is_any_json_schema_integer_and_nothing_else() {
    for (limit, hits) in [("2", 2), ("2.0", 2), ("2e0", 2), ("1.00", 1)] {
        let reply = get(&format!("/api/v1/search?limit={limit}")).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "limit={limit}: {}",
            reply.body
        );
        assert_eq!(
            reply.json()["hits"].as_array().unwrap().len(),
            hits,
            "{limit}"
        );
    }
    for limit in ["", "2.5", "%202", "+2", "02", "1e400", "NaN", "inf", "true"] {
        let reply = get(&format!("/api/v1/search?q=GPU&limit={limit}")).await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit={limit}"
        );
    }
    for (limit, status) in [
        ("2.0", StatusCode::OK),
        ("2e0", StatusCode::OK),
        ("2.5", StatusCode::UNPROCESSABLE_ENTITY),
        ("21.0", StatusCode::UNPROCESSABLE_ENTITY),
        ("null", StatusCode::OK),
    ] {
        let body = format!(r#"{{"text": "CUDA out of memory", "limit": {limit}}}"#);
        let reply = send(
            Request::post("/api/v1/diagnose")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, status, "limit {limit}: {}", reply.body);
    }
}

#[tokio::test]
async fn entry_returns_markdown_html_and_metadata() {
    let reply = get("/api/v1/entries/view-inplace").await;
    assert_eq!(reply.status, StatusCode::OK);
    let e = reply.json();
    assert_eq!(e["slug"], "view-inplace");
    assert_eq!(e["title_zh"], "视图被原地修改（torch 1.10）");
    assert!(e["markdown"].as_str().unwrap().starts_with("## Symptom"));
    assert!(
        e["html"]
            .as_str()
            .unwrap()
            .contains(r#"<h2 id="fix">Fix</h2>"#)
    );
    assert_eq!(
        e["signatures"][0],
        "is a view and is being modified inplace"
    );
    assert_eq!(e["tags"], serde_json::json!(["autograd"]));
    assert_eq!(e["sources"][0], "seed: 002_47d489b6f6a8c547.txt");
    assert_eq!(e["url"], "/entries/view-inplace");
    assert_eq!(
        e["versions"],
        serde_json::json!([{"package": "torch", "affected": "==1.10.*", "fixed": "1.11.0"}])
    );
}

#[tokio::test]
async fn entry_body_comes_in_the_language_asked_for() {
    let english = get("/api/v1/entries/cuda-oom").await.json();
    assert_eq!(english["lang"], "en");
    assert!(
        english["markdown"]
            .as_str()
            .unwrap()
            .contains("1. Halve the batch size.")
    );

    let chinese = get("/api/v1/entries/cuda-oom?lang=zh-CN").await;
    assert_eq!(chinese.status, StatusCode::OK);
    let chinese = chinese.json();
    assert_eq!(chinese["lang"], "zh-CN");
    let markdown = chinese["markdown"].as_str().unwrap();
    assert!(markdown.starts_with("## 症状"), "{markdown}");
    assert!(markdown.contains("1. batch size 减半。"), "{markdown}");
    // The same section ids in both languages: `#fix` links work in either.
    assert!(
        chinese["html"]
            .as_str()
            .unwrap()
            .contains(r#"<h2 id="fix">解决</h2>"#),
        "{chinese}"
    );
    // The code blocks are the English ones.
    assert!(
        markdown.contains("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    );

    // Without `lang`, the browser's language decides; `lang` outranks it.
    let request = |uri: &str| {
        Request::get(uri)
            .header(header::ACCEPT_LANGUAGE, "zh-CN,zh;q=0.9,en;q=0.5")
            .body(Body::empty())
            .unwrap()
    };
    let by_header = send(request("/api/v1/entries/cuda-oom")).await.json();
    assert_eq!(by_header["lang"], "zh-CN");
    let by_param = send(request("/api/v1/entries/cuda-oom?lang=en"))
        .await
        .json();
    assert_eq!(by_param["lang"], "en");

    let unknown = get("/api/v1/entries/cuda-oom?lang=fr").await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(unknown.content_type(), "application/problem+json");
    assert!(
        unknown.json()["detail"]
            .as_str()
            .unwrap()
            .contains("use `en` or `zh-CN`"),
        "{}",
        unknown.body
    );
}

#[tokio::test]
async fn entry_list_has_every_entry() {
    let reply = get("/api/v1/entries").await;
    let entries = reply.json()["entries"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 6);
    assert!(entries.iter().any(|e| e["slug"] == "gpu0-imbalance"));
}

#[tokio::test]
async fn unknown_entry_is_problem_json_404() {
    let reply = get("/api/v1/entries/nope").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.content_type(), "application/problem+json");
    let p = reply.json();
    assert_eq!(p["status"], 404);
    assert_eq!(p["title"], "Not Found");
    assert!(p["detail"].as_str().unwrap().contains("nope"));
    let route = get("/api/v1/nothing-here").await;
    assert_eq!(route.status, StatusCode::NOT_FOUND);
    assert_eq!(route.content_type(), "application/problem+json");
}

#[tokio::test]
async fn bad_percent_encoding_is_a_400_not_a_500() {
    let reply = get("/api/v1/search?q=%FF%FE").await;
    assert!(
        reply.status == StatusCode::OK || reply.status == StatusCode::BAD_REQUEST,
        "{}",
        reply.status
    );
    let page = get("/search?q=%FF%FE").await;
    assert!(
        page.status == StatusCode::OK || page.status == StatusCode::BAD_REQUEST,
        "{}",
        page.status
    );
}

#[tokio::test]
async fn healthz_answers() {
    let reply = get("/healthz").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["status"], "ok");
    assert_eq!(reply.json()["entries"], 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_read_answered_413_and_the_connection_kept() {
    let server = common::serve_fixture().await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /api/v1/diagnose HTTP/1.1\r\nhost: errbook\r\ncontent-type: application/json";
    let big = format!(r#"{{"text": "{}"}}"#, "a".repeat(2 << 20));
    let reply = common::exchange(&mut stream, head, big.as_bytes())
        .await
        .expect("an answer, not a reset connection");
    assert_eq!(reply.status, 413);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
    let detail = reply.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("1048576 bytes"), "{detail}");
    let reply = common::exchange(
        &mut stream,
        "GET /api/v1/search?q=GPU HTTP/1.1\r\nhost: errbook",
        b"",
    )
    .await
    .expect("the connection still open");
    assert_eq!(reply.status, 200);

    // A body announced past what is ever read is refused at once, and the
    // connection closed rather than read for minutes.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let announced = errbook::web::DRAINED_BYTES + 1;
    stream
        .write_all(format!("{head}\r\ncontent-length: {announced}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    )
    .await
    .expect("answered and closed at once")
    .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

#[tokio::test]
async fn a_busy_server_says_when_to_try_again() {
    let app = common::fixture_app_with_timeout(std::time::Duration::from_millis(100));
    for uri in ["/api/v1/diagnose", "/diagnose"] {
        let request = Request::post(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(common::stalled_body())
            .unwrap();
        let reply = common::reply_of(app.clone().oneshot(request).await.unwrap()).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert_eq!(reply.headers[header::RETRY_AFTER], "2", "{uri}");
    }
}
