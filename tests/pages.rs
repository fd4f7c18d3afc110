//! The portal as a browser sees it: home, entry, tag, diagnose and error pages.

mod common;

use axum::http::StatusCode;
use common::{encode, get, post_form};

#[tokio::test]
async fn home_has_paste_box_search_box_tags_and_entries() {
    let page = get("/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.content_type().starts_with("text/html"));
    let b = &page.body;
    assert!(
        b.contains(r#"<form action="/diagnose" method="post">"#),
        "{b}"
    );
    assert!(
        b.contains(r#"<textarea id="paste-text" name="text""#),
        "{b}"
    );
    assert!(b.contains(r#"action="/search""#));
    assert!(b.contains(r#"href="/tags/memory""#));
    assert!(b.contains(r#"href="/entries/view-inplace""#));
    assert!(b.contains("多卡训练时 0 号卡显存占用更多"));
}

#[tokio::test]
async fn search_page_links_results_to_entries() {
    let page = get("/search?q=ncclInvalidUsage").await;
    assert_eq!(page.status, StatusCode::OK);
    let first = page
        .body
        .find("/entries/nccl-invalid-usage")
        .expect("result link");
    if let Some(other) = page.body.find("/entries/watchdog-timeout") {
        assert!(first < other, "best hit listed first");
    }
}

#[tokio::test]
async fn search_page_filters_by_tag() {
    let page = get("/search?q=GPU&tag=memory").await;
    assert!(page.body.contains("/entries/gpu0-imbalance"));
    assert!(!page.body.contains("/entries/nccl-invalid-usage"));
    assert!(
        page.body.contains(r#"<option value="memory" selected>"#),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn search_page_escapes_the_query() {
    let page = get(&format!(
        "/search?q={}",
        encode("<script>alert(1)</script>")
    ))
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("<script>alert(1)"));
    assert!(
        page.body.contains("&#60;script&#62;alert(1)"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn entry_page_shows_everything_about_the_problem() {
    let page = get("/entries/watchdog-timeout").await;
    assert_eq!(page.status, StatusCode::OK);
    let b = &page.body;
    assert!(b.contains("NCCL watchdog timeout: a collective never finished"));
    assert!(b.contains("NCCL watchdog 超时：集合通信卡住"));
    assert!(b.contains("One rank stopped calling collectives"));
    assert!(b.contains("某个 rank 没有进入集合通信"));
    for section in ["symptom", "cause", "fix", "verify", "background"] {
        assert!(
            b.contains(&format!(r#"<h2 id="{section}">"#)),
            "section {section}: {b}"
        );
    }
    assert!(b.contains("<pre><code"), "code block rendered");
    assert!(b.contains("<code>NCCL_DEBUG=INFO</code>"));
    assert!(b.contains(r#"href="/tags/hang""#));
    assert!(
        b.contains(r#"href="/entries/nccl-invalid-usage""#),
        "related link"
    );
}

#[tokio::test]
async fn entry_page_lists_sources_with_links() {
    let page = get("/entries/nccl-invalid-usage").await;
    assert!(
        page.body
            .contains(r#"<a href="https://pytorch.org/docs/stable/notes/ddp.html""#)
    );
    let seeded = get("/entries/view-inplace").await;
    assert!(seeded.body.contains("seed: 002_47d489b6f6a8c547.txt"));
}

#[tokio::test]
async fn unknown_entry_is_a_real_404_page() {
    let page = get("/entries/no-such-problem").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.content_type().starts_with("text/html"));
    assert!(page.body.contains("404 Not Found"));
    assert!(page.body.contains("no-such-problem"));
    assert!(page.body.contains(r#"href="/""#), "way back home");
}

#[tokio::test]
async fn unknown_page_is_a_404_page() {
    let page = get("/no/such/page").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains("404 Not Found"));
}

#[tokio::test]
async fn tag_page_lists_tagged_entries() {
    let page = get("/tags/memory").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("/entries/cuda-oom"));
    assert!(page.body.contains("/entries/gpu0-imbalance"));
    assert!(!page.body.contains("/entries/view-inplace"));
    assert_eq!(get("/tags/nonexistent").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn paste_box_posts_to_diagnose() {
    let paste = "[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: Output 0 of SliceBackward0 is a view and is being modified inplace.";
    let page = post_form("/diagnose", &format!("text={}", encode(paste))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("/entries/view-inplace"));
    assert!(page.body.contains("2 lines"));
}

#[tokio::test]
async fn empty_paste_is_a_clear_400() {
    let page = post_form("/diagnose", "text=++").await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.body.contains("The paste is empty"));
}

#[tokio::test]
async fn static_css_is_served_with_its_type() {
    let css = get("/static/style.css").await;
    assert_eq!(css.status, StatusCode::OK);
    assert!(css.content_type().starts_with("text/css"));
    assert_eq!(get("/static/nope.js").await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        get("/static/../Cargo.toml").await.status,
        StatusCode::NOT_FOUND
    );
}
