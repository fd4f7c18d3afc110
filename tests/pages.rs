//! The portal as a browser sees it: home, entry, tag, diagnose and error pages.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{Reply, encode, get, post_form, send};

async fn get_with(uri: &str, headers: &[(header::HeaderName, &str)]) -> Reply {
    let mut request = Request::get(uri);
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    send(request.body(Body::empty()).unwrap()).await
}

fn location(reply: &Reply) -> &str {
    reply
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no Location: {} {}", reply.status, reply.body))
}

#[tokio::test]
async fn home_has_paste_box_search_box_tags_and_entries() {
    let page = get("/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.content_type().starts_with("text/html"));
    let b = &page.body;
    assert!(
        b.contains(r#"<form id="paste-form" action="/diagnose" method="post">"#),
        "{b}"
    );
    let paste_box = b.find("paste-text").unwrap();
    let search_box = b.find("home-q").unwrap();
    assert!(paste_box < search_box, "the paste box comes first");
    assert!(
        b.contains(r#"<textarea id="paste-text" name="text""#),
        "{b}"
    );
    assert!(b.contains(r#"action="/search""#));
    assert!(b.contains(r#"href="/tags/memory""#));
    assert!(b.contains(r#"href="/entries/view-inplace""#));
    assert!(b.contains("多卡训练时 0 号卡显存占用更多"));
    let start = b.find("class=\"start-here\"").expect("a start-here list");
    assert!(
        b[start..].contains(r#"href="/entries/nccl-invalid-usage""#),
        "the most linked-to entry is suggested"
    );
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
    assert!(page.body.contains("404 Not found"), "{}", page.body);
    assert!(page.body.contains("no-such-problem"));
    assert!(page.body.contains(r#"href="/""#), "way back home");
}

#[tokio::test]
async fn unknown_page_is_a_404_page() {
    let page = get("/no/such/page").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains("404 Not found"));
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
async fn the_chinese_interface_shows_the_chinese_body_with_a_link_to_the_english() {
    let zh = [(header::COOKIE, "errbook_lang=zh-CN")];
    let page = get_with("/entries/cuda-oom", &zh).await;
    assert_eq!(page.status, StatusCode::OK);
    let b = &page.body;
    assert!(b.contains(r#"<div class="body" lang="zh-CN">"#), "{b}");
    assert!(b.contains(r#"<h2 id="fix">解决</h2>"#), "{b}");
    assert!(b.contains("batch size 减半。"), "{b}");
    assert!(!b.contains("Halve the batch size"), "{b}");
    assert!(
        b.contains(r#"<a href="/entries/cuda-oom?lang=en" lang="en" hreflang="en">Read this entry in English</a>"#),
        "{b}"
    );

    // The link: the English body, the interface still Chinese.
    let page = get_with("/entries/cuda-oom?lang=en", &zh).await;
    let b = &page.body;
    assert!(b.contains(r#"<html lang="zh-CN""#), "{b}");
    assert!(b.contains(r#"<div class="body" lang="en">"#), "{b}");
    assert!(b.contains("Halve the batch size."), "{b}");
    assert!(b.contains(r#"href="/entries/cuda-oom?lang=zh-CN""#), "{b}");

    // And the English interface offers the Chinese.
    let page = get("/entries/cuda-oom").await;
    assert!(page.body.contains("Halve the batch size."));
    assert!(page.body.contains("阅读本条目的中文版"));

    let page = get("/entries/cuda-oom?lang=fr").await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.body.contains("not `fr`"), "{}", page.body);
}

#[tokio::test]
async fn a_chinese_answer_page_shows_the_chinese_fix() {
    let paste = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
    let page = send(
        Request::post("/diagnose")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::COOKIE, "errbook_lang=zh-CN")
            .body(Body::from(format!("text={}", encode(paste))))
            .unwrap(),
    )
    .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let b = &page.body;
    assert!(
        b.contains(r#"<section class="fix" aria-labelledby="fix-heading" lang="zh-CN">"#),
        "{b}"
    );
    assert!(b.contains("batch size 减半。"), "{b}");
    assert!(!b.contains("Halve the batch size"), "{b}");
    assert!(b.contains(r#"href="/entries/cuda-oom?lang=en#fix""#), "{b}");
    // What happened, in Chinese too; the error's own text as printed.
    assert!(
        b.contains("报错：OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB。"),
        "{b}"
    );
}

#[tokio::test]
async fn empty_paste_is_a_clear_400() {
    let page = post_form("/diagnose", "text=++").await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.body.contains("The paste is empty"));
}

#[tokio::test]
async fn the_interface_follows_the_browser_language() {
    let zh = get_with("/", &[(header::ACCEPT_LANGUAGE, "zh-CN,zh;q=0.9,en;q=0.5")]).await;
    assert!(zh.body.contains(r#"<html lang="zh-CN""#), "{}", zh.body);
    assert!(zh.body.contains("训练任务为什么挂了？"));
    assert!(zh.body.contains(">诊断</button>"));
    assert!(
        zh.body
            .contains(r#"class="lang-switch" href="/lang/en?next=/""#)
    );
    let vary = zh.headers.get(header::VARY).unwrap().to_str().unwrap();
    assert!(vary.contains("Accept-Language") && vary.contains("Cookie"));

    let en = get_with("/", &[(header::ACCEPT_LANGUAGE, "en-US,en;q=0.9")]).await;
    assert!(en.body.contains(r#"<html lang="en""#));
    assert!(en.body.contains("What killed your training job?"));
    assert!(
        get("/").await.body.contains(r#"<html lang="en""#),
        "English by default"
    );
}

#[tokio::test]
async fn lists_show_both_titles_with_the_readers_language_first() {
    let zh = get_with("/tags/memory", &[(header::COOKIE, "errbook_lang=zh-CN")]).await;
    let b = &zh.body;
    let zh_title = b.find("多卡训练时 0 号卡显存占用更多").unwrap();
    let en_title = b.find("GPU 0 uses more memory").unwrap();
    assert!(
        zh_title < en_title,
        "Chinese first for a Chinese reader: {b}"
    );
    assert!(b.contains("标签：memory"), "{b}");
}

#[tokio::test]
async fn the_language_switch_remembers_the_choice_and_returns() {
    let reply = get("/lang/zh-CN?next=/entries/view-inplace%3Fx%3D1").await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&reply), "/entries/view-inplace?x=1");
    let cookie = reply
        .headers
        .get(header::SET_COOKIE)
        .unwrap()
        .to_str()
        .unwrap();
    assert!(cookie.starts_with("errbook_lang=zh-CN;"), "{cookie}");
    assert!(cookie.contains("Path=/") && cookie.contains("SameSite=Lax"));

    let page = get_with(
        "/entries/view-inplace",
        &[
            (header::COOKIE, "errbook_lang=zh-CN"),
            (header::ACCEPT_LANGUAGE, "en"),
        ],
    )
    .await;
    assert!(
        page.body.contains(r#"<html lang="zh-CN""#),
        "the choice beats the browser"
    );

    for next in [
        "//evil.example/x",
        "https://evil.example/",
        "javascript:alert(1)",
        "/\\evil",
    ] {
        let reply = get(&format!("/lang/en?next={}", encode(next))).await;
        assert_eq!(location(&reply), "/", "{next} is not followed");
    }
    assert_eq!(get("/lang/fr").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn error_pages_speak_the_readers_language() {
    let page = get_with("/entries/nope", &[(header::ACCEPT_LANGUAGE, "zh")]).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains("404 页面不存在"), "{}", page.body);
    assert!(page.body.contains("回到首页"));
}

const VIEW_PASTE: &str = "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"train.py\", line 9, in <module>\n[rank1]: RuntimeError: Output 0 of SliceBackward0 is a view and is being modified inplace.";

/// The share link on an answer page.
fn share_link(body: &str) -> String {
    let start = body
        .find(r#"id="share-link" class="share-link" href=""#)
        .expect("share link")
        + r#"id="share-link" class="share-link" href=""#.len();
    body[start..start + body[start..].find('"').unwrap()].replace("&#38;", "&")
}

#[tokio::test]
async fn an_answer_has_a_link_that_gives_the_same_answer() {
    let page = post_form("/diagnose", &format!("text={}", encode(VIEW_PASTE))).await;
    let link = share_link(&page.body);
    assert!(link.starts_with("/diagnose?p="), "{link}");
    assert!(link.len() < 400, "a short paste makes a short link: {link}");
    let shared = get(&link).await;
    assert_eq!(shared.status, StatusCode::OK, "{}", shared.body);
    assert!(
        shared
            .body
            .contains(r#"<h1 id="verdict-title"><a href="/entries/view-inplace">"#)
    );
    assert!(
        shared.body.contains("SliceBackward0"),
        "the paste is shown again"
    );
    assert_eq!(share_link(&shared.body), link, "the link is stable");

    let damaged = get(&link[..link.len() - 12]).await;
    assert_eq!(damaged.status, StatusCode::BAD_REQUEST);
    assert!(
        damaged.body.contains("share link is damaged"),
        "{}",
        damaged.body
    );
    let home = get("/diagnose").await;
    assert_eq!(home.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&home), "/");
}

#[tokio::test]
async fn a_huge_paste_gets_a_short_link_to_the_same_answer() {
    let mut paste = String::new();
    for step in 0..4000 {
        paste.push_str(&format!(
            "[rank{}]: step {step} loss {:.4} lr 0.0001 throughput {} samples/s\n",
            step % 8,
            1.0 / (step as f32 + 1.0),
            1000 + step * 7 % 113
        ));
    }
    paste.push_str(VIEW_PASTE);
    let page = post_form("/diagnose", &format!("text={}", encode(&paste))).await;
    assert!(
        page.body
            .contains(r#"<h1 id="verdict-title"><a href="/entries/view-inplace">"#)
    );
    let link = share_link(&page.body);
    assert!(link.len() < 13_000, "{} chars", link.len());
    assert!(page.body.contains("the link keeps"), "the reader is told");
    let shared = get(&link).await;
    assert!(
        shared
            .body
            .contains(r#"<h1 id="verdict-title"><a href="/entries/view-inplace">"#),
        "{}",
        shared.body
    );
}

#[tokio::test]
async fn a_traceback_typed_into_search_goes_to_its_diagnosis() {
    let flat = VIEW_PASTE.replace('\n', " ");
    let reply = get(&format!("/search?q={}", encode(&flat))).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let answer = get(location(&reply)).await;
    assert!(
        answer.body.contains(r#"<a href="/entries/view-inplace">"#),
        "{}",
        answer.body
    );
    let words = get("/search?q=view+modified+inplace").await;
    assert_eq!(words.status, StatusCode::OK, "a plain query stays a search");
}

#[tokio::test]
async fn static_assets_have_fingerprinted_urls_and_validators() {
    let home = get("/").await;
    let start = home.body.find("/static/style.").unwrap();
    let url = &home.body[start..start + home.body[start..].find('"').unwrap()];
    assert_ne!(url, "/static/style.css");
    let css = get(url).await;
    assert_eq!(css.status, StatusCode::OK);
    assert_eq!(
        css.headers.get(header::CACHE_CONTROL).unwrap(),
        "public, max-age=31536000, immutable"
    );
    let js = home
        .body
        .find("/static/app.")
        .expect("the script is linked");
    assert_eq!(
        get(&home.body[js..js + home.body[js..].find('"').unwrap()])
            .await
            .status,
        StatusCode::OK
    );

    let plain = get("/static/style.css").await;
    assert_eq!(
        plain.headers.get(header::CACHE_CONTROL).unwrap(),
        "no-cache"
    );
    let etag = plain
        .headers
        .get(header::ETAG)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let again = get_with("/static/style.css", &[(header::IF_NONE_MATCH, &etag)]).await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.body.is_empty());

    let zipped = get_with(url, &[(header::ACCEPT_ENCODING, "gzip")]).await;
    assert_eq!(
        zipped.headers.get(header::CONTENT_ENCODING).unwrap(),
        "gzip"
    );
    let vary = zipped.headers.get(header::VARY).unwrap().to_str().unwrap();
    assert!(
        vary.to_ascii_lowercase().contains("accept-encoding"),
        "{vary}"
    );
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

/// The app over `n` generated copies of a fixture entry (slugs `generated-0000`...).
fn generated_app(n: usize) -> axum::Router {
    let dir = tempfile::tempdir().unwrap();
    let template =
        std::fs::read_to_string(common::fixture_dir().join("launcher-wrapper.md")).unwrap();
    for i in 0..n {
        let slug = format!("generated-{i:04}");
        let text = template.replace("slug: launcher-wrapper", &format!("slug: {slug}"));
        std::fs::write(dir.path().join(format!("{slug}.md")), text).unwrap();
    }
    let kb = errbook::kb::Kb::load(dir.path()).expect("generated kb loads");
    let index = errbook::search::SearchIndex::build(std::sync::Arc::new(kb)).unwrap();
    errbook::app(errbook::AppState::new(index))
}

async fn get_from(app: &axum::Router, uri: &str) -> (StatusCode, String) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_large_knowledge_base_is_listed_a_page_at_a_time() {
    let app = generated_app(1_201);
    let links = |body: &str| body.matches("href=\"/entries/generated-").count();

    let (status, first) = get_from(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(first.contains("All entries (1201)"), "{first}");
    assert_eq!(links(&first), 500);
    assert!(first.contains("Entries 1–500 of 1201"));
    assert!(first.contains(r#"rel="next" href="/?page=2""#));
    assert!(!first.contains(r#"rel="prev""#));

    let (status, last) = get_from(&app, "/?page=3").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(links(&last), 201);
    assert!(last.contains("generated-1200"));
    assert!(!last.contains("generated-0999\""));
    assert!(last.contains("Entries 1001–1201 of 1201"));
    assert!(last.contains(r#"rel="prev" href="/?page=2""#));
    assert!(!last.contains(r#"rel="next""#));

    // Tag pages page the same way, back to the tag's own path.
    let (status, tagged) = get_from(&app, "/tags/launcher?page=2").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(links(&tagged), 500);
    assert!(tagged.contains(r#"rel="prev" href="/tags/launcher""#));
    assert!(tagged.contains(r#"rel="next" href="/tags/launcher?page=3""#));

    for (uri, status, says) in [
        ("/?page=4", StatusCode::NOT_FOUND, "no page 4"),
        ("/?page=0", StatusCode::BAD_REQUEST, "page number"),
        ("/?page=two", StatusCode::BAD_REQUEST, "page number"),
        ("/tags/launcher?page=9", StatusCode::NOT_FOUND, "no page 9"),
    ] {
        let (got, body) = get_from(&app, uri).await;
        assert_eq!(got, status, "{uri}");
        assert!(body.contains(says), "{uri}: {body}");
    }
}

#[tokio::test]
async fn a_small_knowledge_base_is_one_page_without_a_pager() {
    let page = get("/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("class=\"pager\""));
}

/// The app over the shipped knowledge base, whose searches run to several pages (the
/// index is built once per test binary).
fn shipped_app() -> axum::Router {
    static STATE: std::sync::OnceLock<errbook::AppState> = std::sync::OnceLock::new();
    let state = STATE.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
        let kb = errbook::kb::Kb::load(&dir).expect("kb/ loads");
        let index = errbook::search::SearchIndex::build(std::sync::Arc::new(kb)).unwrap();
        errbook::AppState::new(index)
    });
    errbook::app(state.clone())
}

/// The entries a search page lists, in order.
fn result_slugs(body: &str) -> Vec<String> {
    body.split("<h2><a href=\"/entries/")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn search_pages_show_the_true_total_and_page_through_every_result() {
    let app = shipped_app();
    // Every hit, from the API's pages of 100.
    let mut ranked: Vec<String> = Vec::new();
    let mut total = usize::MAX;
    while ranked.len() < total {
        let uri = format!("/api/v1/search?q=nccl&limit=100&offset={}", ranked.len());
        let (status, api) = get_from(&app, &uri).await;
        assert_eq!(status, StatusCode::OK);
        let api: serde_json::Value = serde_json::from_str(&api).unwrap();
        total = api["total"].as_u64().unwrap() as usize;
        let hits = api["hits"].as_array().unwrap();
        assert!(
            !hits.is_empty(),
            "{uri} ends early at {} of {total}",
            ranked.len()
        );
        ranked.extend(hits.iter().map(|h| h["slug"].as_str().unwrap().to_string()));
    }
    assert!(total > 40, "nccl finds {total}");
    assert_eq!(ranked.len(), total);

    let (status, first) = get_from(&app, "/search?q=nccl").await;
    assert_eq!(status, StatusCode::OK);
    assert!(first.contains(&format!("{total} results")), "{first}");
    assert!(first.contains(&format!("Results 1–20 of {total}")));
    assert!(first.contains(r#"rel="next" href="/search?q=nccl&#38;page=2""#));
    assert!(!first.contains(r#"rel="prev""#));
    let first_slugs = result_slugs(&first);
    assert_eq!(first_slugs, ranked[..20]);

    let (status, second) = get_from(&app, "/search?q=nccl&page=2").await;
    assert_eq!(status, StatusCode::OK);
    assert!(second.contains(&format!("{total} results")));
    assert!(second.contains(&format!("Results 21–40 of {total}")));
    assert!(second.contains(r#"<ol class="results" start="21">"#));
    assert!(second.contains(r#"rel="prev" href="/search?q=nccl""#));
    assert!(second.contains(r#"rel="next" href="/search?q=nccl&#38;page=3""#));
    let second_slugs = result_slugs(&second);
    assert_eq!(second_slugs, ranked[20..40]);
    assert!(second_slugs.iter().all(|s| !first_slugs.contains(s)));

    // The last page holds the rest and leads nowhere further; past it there is none.
    let pages = total.div_ceil(20);
    let (status, last) = get_from(&app, &format!("/search?q=nccl&page={pages}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(result_slugs(&last), ranked[(pages - 1) * 20..]);
    assert!(last.contains(&format!(
        "Results {}–{total} of {total}",
        (pages - 1) * 20 + 1
    )));
    assert!(!last.contains(r#"rel="next""#));
    let mut seen: Vec<String> = Vec::new();
    for page in 1..=pages {
        let (_, body) = get_from(&app, &format!("/search?q=nccl&page={page}")).await;
        seen.extend(result_slugs(&body));
    }
    assert_eq!(seen, ranked, "every result once, in the API's order");

    for (uri, status, says) in [
        (
            format!("/search?q=nccl&page={}", pages + 1),
            StatusCode::NOT_FOUND,
            "no page",
        ),
        (
            "/search?q=nccl&page=0".into(),
            StatusCode::BAD_REQUEST,
            "page number",
        ),
        (
            "/search?q=nccl&page=two".into(),
            StatusCode::BAD_REQUEST,
            "page number",
        ),
        (
            "/search?q=nccl&page=99999999999999999999".into(),
            StatusCode::BAD_REQUEST,
            "page number",
        ),
        (
            "/search?q=nccl&page=9999999999999999".into(),
            StatusCode::NOT_FOUND,
            "no page",
        ),
    ] {
        let (got, body) = get_from(&app, &uri).await;
        assert_eq!(got, status, "{uri}");
        assert!(body.contains(says), "{uri}: {body}");
    }
}

#[tokio::test]
async fn search_pages_keep_the_tag_and_speak_chinese() {
    let app = shipped_app();
    let (_, api) = get_from(&app, "/api/v1/search?q=nccl&tag=nccl&limit=1").await;
    let total = serde_json::from_str::<serde_json::Value>(&api).unwrap()["total"]
        .as_u64()
        .unwrap() as usize;
    assert!(total > 20, "nccl tagged nccl finds {total}");
    use tower::ServiceExt;
    let response = app
        .oneshot(
            Request::get("/search?q=nccl&tag=nccl&page=2")
                .header(header::ACCEPT_LANGUAGE, "zh-CN")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let page = common::reply_of(response).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains(&format!("{total} 个结果")),
        "{}",
        page.body
    );
    let last = 40.min(total);
    assert!(
        page.body
            .contains(&format!("第 21–{last} 个结果，共 {total} 个"))
    );
    assert!(page.body.contains("← 上一页"));
    assert!(
        page.body
            .contains(r#"rel="prev" href="/search?q=nccl&#38;tag=nccl""#),
        "{}",
        page.body
    );
}
