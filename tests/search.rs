//! Full-text search as a user types it: English, Chinese, error strings with
//! punctuation, stray query syntax, tag filters.

mod common;

use axum::http::StatusCode;
use common::{api_slugs, encode, get};

async fn check_first(query: &str, expected: &str) {
    let slugs = api_slugs(query).await;
    assert_eq!(
        slugs.first().map(String::as_str),
        Some(expected),
        "query {query:?} ranked {slugs:?}"
    );
}

#[tokio::test]
async fn error_strings_with_punctuation_find_their_entry_first() {
    check_first("ncclInvalidUsage", "nccl-invalid-usage").await;
    check_first("Output 0 of SliceBackward0", "view-inplace").await;
    check_first("torch.distributed.DistBackendError", "watchdog-timeout").await;
    check_first(
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
        "launcher-wrapper",
    )
    .await;
    check_first(
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "cuda-oom",
    )
    .await;
}

#[tokio::test]
async fn part_of_an_identifier_finds_it() {
    check_first("ncclInvalid", "nccl-invalid-usage").await;
    check_first("SliceBackward", "view-inplace").await;
}

#[tokio::test]
async fn english_words_are_stemmed() {
    check_first("training hanging", "watchdog-timeout").await;
    check_first("memory imbalanced on gpu 0", "gpu0-imbalance").await;
}

#[tokio::test]
async fn chinese_queries_of_one_and_two_characters_find_entries() {
    let one = api_slugs("卡").await;
    assert!(one.contains(&"gpu0-imbalance".to_string()), "卡 -> {one:?}");
    let two = api_slugs("显存").await;
    assert!(two.contains(&"cuda-oom".to_string()), "显存 -> {two:?}");
    assert!(
        two.contains(&"gpu0-imbalance".to_string()),
        "显存 -> {two:?}"
    );
    assert!(
        !two.contains(&"view-inplace".to_string()),
        "显存 -> {two:?}"
    );
    check_first("显存不均衡", "gpu0-imbalance").await;
    check_first("多卡训练卡住", "watchdog-timeout").await;
}

#[tokio::test]
async fn mixed_chinese_and_english_query() {
    check_first("报错 ncclInvalidUsage 怎么办", "nccl-invalid-usage").await;
}

#[tokio::test]
async fn stray_query_syntax_never_errors() {
    for q in [
        "((",
        "title:",
        "slug:view-inplace",
        "-ncclInvalidUsage",
        "https://pytorch.org/docs/stable/ddp.html?x=1#y",
        "\"unbalanced",
        "a AND OR NOT",
        "*?~^[]{}\\",
        "",
        "   ",
        "🔥",
    ] {
        let page = get(&format!("/search?q={}", encode(q))).await;
        assert_eq!(page.status, StatusCode::OK, "page for {q:?}: {}", page.body);
        let api = get(&format!("/api/v1/search?q={}&tag=nccl", encode(q))).await;
        // A blank `q` is refused, as the OpenAPI document says (leaving it out lists).
        let status = match q.trim() {
            "" => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::OK,
        };
        assert_eq!(api.status, status, "api for {q:?}: {}", api.body);
    }
    // A leading minus is a word to find, not an exclusion.
    check_first("-ncclInvalidUsage", "nccl-invalid-usage").await;
}

#[tokio::test]
async fn tag_filter_keeps_only_tagged_entries() {
    let reply = get("/api/v1/search?q=memory%20GPU&tag=memory").await;
    let hits = reply.json()["hits"].as_array().unwrap().clone();
    assert!(!hits.is_empty());
    for hit in &hits {
        let tags: Vec<&str> = hit["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(tags.contains(&"memory"), "{hit}");
    }
    let none = get("/api/v1/search?q=ncclInvalidUsage&tag=memory").await;
    assert_eq!(none.json()["hits"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn tag_alone_lists_its_entries() {
    let reply = get("/api/v1/search?tag=memory").await;
    let mut slugs: Vec<String> = reply.json()["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["slug"].as_str().unwrap().to_string())
        .collect();
    slugs.sort();
    assert_eq!(slugs, ["cuda-oom", "gpu0-imbalance"]);
}

#[tokio::test]
async fn snippets_highlight_the_matched_words() {
    let page = get("/search?q=map_location").await;
    assert!(
        page.body.contains("<mark>map_location</mark>"),
        "{}",
        page.body
    );
    let reply = get("/api/v1/search?q=nvidia-smi").await;
    let snippet = reply.json()["hits"][0]["snippet"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(snippet.contains("nvidia-smi"), "{snippet}");
    assert!(
        !snippet.contains("<mark>"),
        "API snippet is plain text: {snippet}"
    );
}

#[tokio::test]
async fn snippets_do_not_mark_stop_words() {
    let page = get(&format!(
        "/search?q={}",
        encode("find the rank that is behind")
    ))
    .await;
    assert!(page.body.contains("<mark>rank</mark>"), "{}", page.body);
    for stop in ["the", "that", "is"] {
        assert!(
            !page.body.contains(&format!("<mark>{stop}</mark>")),
            "{stop} marked: {}",
            page.body
        );
    }
}

#[tokio::test]
async fn chinese_snippet_highlights_characters() {
    let page = get(&format!("/search?q={}", encode("卡"))).await;
    assert!(page.body.contains("<mark>卡</mark>"), "{}", page.body);
}

/// Words that only the Chinese body holds (not a title, summary or symptom).
#[tokio::test]
async fn a_chinese_question_finds_an_entry_by_its_chinese_body() {
    check_first("找出落后的那个", "watchdog-timeout").await;
    check_first("显存一直低于显卡容量", "cuda-oom").await;
    // The snippet quotes the Chinese body, marked.
    let page = get(&format!("/search?q={}", encode("显卡容量"))).await;
    assert!(
        page.body.contains("<mark>显卡</mark><mark>容量</mark>")
            || page.body.contains("<mark>显卡容量</mark>"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn unmatched_query_says_so() {
    let page = get("/search?q=zzyzx").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("No entry matches"), "{}", page.body);
}
