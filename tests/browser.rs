//! End to end in a real browser: the `errbook` binary serves the shipped knowledge base
//! and a headless Chromium, driven through chromedriver, does what a user does — paste a
//! traceback, search, follow links, switch language — and fails on any console error.
//!
//! Run: `cargo test --test browser` (needs `chromium` and `chromedriver`; Debian:
//! `apt-get install chromium chromium-driver`; without them every test says it is
//! skipping, except under `CI=true`, where it fails). Screenshots are written to
//! `target/tmp/browser-screenshots/<name>.png` (`CARGO_TARGET_TMPDIR`) and each path is
//! printed; add `-- --nocapture` to see them. The tests take turns on one shared server.
#![cfg(unix)]

#[path = "common/mod.rs"]
mod common;
#[path = "browser/harness.rs"]
mod harness;

use harness::{Browser, Lang, Viewport, with_browser};
use serde_json::json;

/// A realistic two-rank torchrun job killed by the NCCL watchdog, as a user copies it
/// from the terminal: launcher warnings, training output, the watchdog's report with its
/// C++ stack, and torchrun's ChildFailedError summary.
const WATCHDOG_TIMEOUT_LOG: &str = include_str!("browser/nccl-watchdog-timeout.log");

/// The `title` (or `title_zh`) of a shipped entry.
fn kb_title(slug: &str, field: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
    let kb = errbook::kb::Kb::load(&dir).expect("the shipped kb loads");
    let entry = kb.get(slug).unwrap_or_else(|| panic!("no entry `{slug}`"));
    match field {
        "title" => entry.title.clone(),
        "title_zh" => entry.title_zh.clone(),
        _ => panic!("no field `{field}`"),
    }
}

/// The entry slug a link points to (`/entries/<slug>`, possibly absolute).
fn entry_slug(href: &str) -> Option<&str> {
    let path = href.split_once("/entries/")?.1;
    Some(path.split(['?', '#']).next().unwrap_or(path))
}

fn has_cjk(text: &str) -> bool {
    text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// Asserts the answer page names the NCCL watchdog entry as the top answer.
async fn assert_top_answer_is_watchdog_timeout(b: &Browser) {
    let top = b.wait_for("#verdict h1 a").await;
    let href = top.attr("href").await.unwrap().unwrap_or_default();
    assert_eq!(
        entry_slug(&href),
        Some("nccl-watchdog-timeout"),
        "top answer links to {href}"
    );
    let title = top.text().await.unwrap();
    assert_eq!(title, kb_title("nccl-watchdog-timeout", "title"));
}

/// Pastes the watchdog log into the home page's box and submits it with the button;
/// returns on the answer page.
async fn diagnose_from_home(b: &Browser) {
    b.goto("/").await;
    paste_into(b, "textarea#paste-text", WATCHDOG_TIMEOUT_LOG).await;
    b.find("button#paste-submit").await.click().await.unwrap();
    b.wait_for_path("the answer page", |p| p == "/diagnose")
        .await;
}

/// Puts `text` on a fake clipboard and pastes it into the element matching `css`, the way
/// the browser does for Ctrl+V: a `paste` event carrying the text, then (unless a handler
/// cancelled it) the text inserted at the cursor.
async fn paste_into(b: &Browser, css: &str, text: &str) {
    b.find(css).await.click().await.unwrap();
    b.js(
        r#"
        const [selector, text] = arguments;
        const target = document.querySelector(selector);
        const data = new DataTransfer();
        data.setData("text/plain", text);
        const event = new ClipboardEvent("paste", {
            clipboardData: data, bubbles: true, cancelable: true,
        });
        if (target.dispatchEvent(event)) {
            document.execCommand("insertText", false, text);
        }
        "#,
        vec![json!(css), json!(text)],
    )
    .await;
}

#[tokio::test]
async fn console_errors_are_caught() {
    with_browser(Lang::English, |b| async move {
        b.goto("/").await;
        b.wait_for("#site-q").await;
        b.console_log().await;

        b.js(
            r#"
            console.error("errbook harness probe");
            const script = document.createElement("script");
            script.src = "/static/nope.js";
            document.head.append(script);
            "#,
            vec![],
        )
        .await;
        let mut errors = Vec::new();
        for _ in 0..50 {
            errors.extend(b.console_errors().await);
            let probe = errors
                .iter()
                .any(|e| e.message.contains("errbook harness probe"));
            let missing = errors.iter().any(|e| e.message.contains("/static/nope.js"));
            if probe && missing {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(
            errors
                .iter()
                .any(|e| e.message.contains("errbook harness probe")),
            "console.error was not reported: {errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.message.contains("/static/nope.js")),
            "the failed script load was not reported: {errors:?}"
        );
        // Each entry is reported once: the console is clean again.
        b.assert_no_console_errors().await;

        // And the assertion the other tests rely on fails, naming the error.
        b.js("console.error('errbook second probe')", vec![]).await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let checker = b.clone();
        let outcome = tokio::spawn(async move { checker.assert_no_console_errors().await }).await;
        let panic = outcome.expect_err("assert_no_console_errors passed despite console.error");
        let message = panic.into_panic();
        let message = message
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        assert!(
            message.contains("errbook second probe"),
            "the failure does not name the error: {message}"
        );
    })
    .await;
}

#[tokio::test]
async fn paste_a_traceback_and_see_the_answer() {
    with_browser(Lang::English, |b| async move {
        b.goto("/").await;
        b.wait_for("form#paste-form").await;
        b.screenshot("home-desktop", Viewport::Desktop).await;
        b.screenshot("home-phone", Viewport::Phone).await;
        b.assert_no_sideways_scroll().await;
        b.set_viewport(Viewport::Desktop).await;
        b.assert_no_console_errors().await;

        let form = b.find("form#paste-form").await;
        assert_eq!(
            form.attr("action").await.unwrap().as_deref(),
            Some("/diagnose")
        );
        assert_eq!(
            form.attr("method")
                .await
                .unwrap()
                .map(|m| m.to_ascii_lowercase()),
            Some("post".to_string())
        );
        assert!(
            b.find("button#paste-submit")
                .await
                .is_displayed()
                .await
                .unwrap()
        );
        let textarea = b.find("textarea#paste-text").await;
        textarea.click().await.unwrap();
        textarea.send_keys(WATCHDOG_TIMEOUT_LOG).await.unwrap();
        let typed = textarea.prop("value").await.unwrap().unwrap_or_default();
        assert_eq!(typed.trim_end(), WATCHDOG_TIMEOUT_LOG.trim_end());
        // Ctrl+Enter submits; the modifier stays down until the Null key releases it.
        let chord = format!(
            "{}{}{}",
            fantoccini::key::Key::Control,
            fantoccini::key::Key::Enter,
            fantoccini::key::Key::Null
        );
        textarea.send_keys(&chord).await.unwrap();
        b.wait_for_path("the answer page", |p| p == "/diagnose")
            .await;

        assert_top_answer_is_watchdog_timeout(&b).await;
        let label = b.text("#verdict .verdict-label").await;
        assert!(!label.trim().is_empty(), "the confidence label is empty");

        // The evidence shows which pasted line matched, with the match highlighted.
        let paste: Vec<&str> = WATCHDOG_TIMEOUT_LOG.lines().collect();
        let mut highlighted = 0;
        for row in b.find_all("table.evidence tr").await {
            let Ok(mark) = row
                .find(fantoccini::Locator::Css("td.paste-line mark"))
                .await
            else {
                continue;
            };
            if !mark.is_displayed().await.unwrap() {
                continue;
            }
            let marked = mark.text().await.unwrap();
            let number = row
                .find(fantoccini::Locator::Css("td.line-no"))
                .await
                .expect("an evidence row with a match has a line number")
                .text()
                .await
                .unwrap();
            let number: usize = number
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("line number {number:?}"));
            assert!(
                (1..=paste.len()).contains(&number),
                "line {number} is outside the paste"
            );
            assert!(
                paste[number - 1].contains(marked.trim()),
                "line {number} of the paste does not contain the highlighted {marked:?}"
            );
            highlighted += 1;
        }
        assert!(
            highlighted > 0,
            "no highlighted evidence on the answer page"
        );
        b.assert_no_console_errors().await;

        b.screenshot("answer-desktop", Viewport::Desktop).await;
        b.screenshot("answer-phone", Viewport::Phone).await;
        b.assert_no_sideways_scroll().await;
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn search_in_chinese() {
    with_browser(Lang::English, |b| async move {
        b.goto("/").await;
        let q = b.wait_for("form.quick-search input#site-q").await;
        q.click().await.unwrap();
        q.send_keys("显存不足").await.unwrap();
        q.send_keys(&fantoccini::key::Key::Enter).await.unwrap();
        b.wait_for_path("the search results", |p| p == "/search")
            .await;

        let first = b.wait_for("ol.results li.result h2 a").await;
        let href = first.attr("href").await.unwrap().unwrap_or_default();
        assert_eq!(
            entry_slug(&href),
            Some("cuda-out-of-memory"),
            "first hit {href}"
        );
        assert_eq!(
            first.text().await.unwrap(),
            kb_title("cuda-out-of-memory", "title")
        );
        // The query stays in the header box, so the user can refine it.
        let kept = b.find("#site-q").await.prop("value").await.unwrap();
        assert_eq!(kept.as_deref(), Some("显存不足"));
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn follow_a_related_link() {
    with_browser(Lang::English, |b| async move {
        b.goto("/entries/nccl-watchdog-timeout").await;
        assert_eq!(
            b.text("h1").await,
            kb_title("nccl-watchdog-timeout", "title")
        );
        assert_eq!(
            b.text(".title-zh").await,
            kb_title("nccl-watchdog-timeout", "title_zh")
        );
        b.screenshot("entry-desktop", Viewport::Desktop).await;
        b.screenshot("entry-phone", Viewport::Phone).await;
        b.assert_no_sideways_scroll().await;
        b.set_viewport(Viewport::Desktop).await;
        b.assert_no_console_errors().await;

        let link = b.find("section.related a").await;
        let href = link.attr("href").await.unwrap().unwrap_or_default();
        let slug = entry_slug(&href)
            .unwrap_or_else(|| panic!("related link {href} is not an entry"))
            .to_string();
        assert_ne!(slug, "nccl-watchdog-timeout");
        link.click().await.unwrap();
        let target = format!("/entries/{slug}");
        b.wait_for_path(&target, |p| p == target).await;
        assert_eq!(b.text("h1").await, kb_title(&slug, "title"));
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn share_link_reproduces_the_answer() {
    with_browser(Lang::English, |b| async move {
        diagnose_from_home(&b).await;
        assert_top_answer_is_watchdog_timeout(&b).await;
        let answer = b.attr("#verdict h1 a", "href").await;

        let share = b
            .attr("a#share-link", "href")
            .await
            .expect("the share link has an href");
        let share_path = share.strip_prefix(b.base()).unwrap_or(&share).to_string();
        assert!(
            share_path.starts_with("/diagnose?p="),
            "share link {share} is not /diagnose?p=…"
        );
        b.assert_no_console_errors().await;

        // Someone opening the link in a fresh tab sees the same answer.
        b.goto("/").await;
        b.goto(&share).await;
        assert_top_answer_is_watchdog_timeout(&b).await;
        assert_eq!(b.attr("#verdict h1 a", "href").await, answer);
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn copy_buttons_on_code_blocks() {
    with_browser(Lang::English, |b| async move {
        b.goto("/entries/nccl-watchdog-timeout").await;
        b.wait_for("button.copy").await;
        // Each code block has a visible copy button of its own, inside it or beside it;
        // the first block's button gets a test marker so it can be clicked for real.
        let report = b
            .js(
                r#"
                const blocks = [...document.querySelectorAll("main pre")];
                const buttons = blocks.map((pre) => pre.querySelector("button.copy")
                    || pre.parentElement.querySelector(":scope > button.copy"));
                if (buttons[0]) buttons[0].dataset.testFirstCopy = "";
                return {
                    blocks: blocks.length,
                    without: buttons.filter((b) => !b).length,
                    hidden: buttons.filter((b) => b && !b.getClientRects().length).length,
                    shared: buttons.length - new Set(buttons).size,
                };
                "#,
                vec![],
            )
            .await;
        assert!(
            report["blocks"].as_u64() > Some(0),
            "no code blocks: {report}"
        );
        assert_eq!(
            report["without"], 0,
            "code blocks without a copy button: {report}"
        );
        assert_eq!(report["hidden"], 0, "hidden copy buttons: {report}");
        assert_eq!(
            report["shared"], 0,
            "code blocks sharing a button: {report}"
        );

        // Clicking it puts the block's text on the clipboard.
        b.cdp(
            "Browser.grantPermissions",
            json!({
                "origin": b.base(),
                "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
            }),
        )
        .await;
        b.find("button.copy[data-test-first-copy]")
            .await
            .click()
            .await
            .unwrap();
        let copied = b
            .js_async(
                r#"
                const done = arguments[arguments.length - 1];
                setTimeout(() => navigator.clipboard.readText()
                    .then(done, (e) => done("clipboard error: " + e)), 300);
                "#,
                vec![],
            )
            .await;
        let copied = copied.as_str().unwrap_or_default().trim().to_string();
        let block = b
            .js(
                r#"const pre = document.querySelector("main pre");
                   return (pre.querySelector("code") || pre).innerText.trim();"#,
                vec![],
            )
            .await;
        assert_eq!(
            json!(copied),
            block,
            "the clipboard does not hold the first code block"
        );
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn chinese_browser_gets_chinese_labels() {
    with_browser(Lang::Chinese, |b| async move {
        b.goto("/").await;
        b.wait_for("#paste-submit").await;
        assert_eq!(b.attr("html", "lang").await.as_deref(), Some("zh-CN"));
        let submit = b.text("#paste-submit").await;
        assert!(has_cjk(&submit), "the paste button says {submit:?}");
        b.screenshot("home-zh-desktop", Viewport::Desktop).await;
        b.assert_no_console_errors().await;

        // The switch in the header leads to the English UI.
        b.find("a.lang-switch").await.click().await.unwrap();
        b.wait_for_js(
            "the English page",
            "return document.documentElement.lang === 'en'",
        )
        .await;
        let submit = b.wait_for("#paste-submit").await.text().await.unwrap();
        assert!(
            !has_cjk(&submit),
            "the English paste button says {submit:?}"
        );
        b.find("a.lang-switch").await;
        b.assert_no_console_errors().await;
    })
    .await;
}

/// The first sentence of a shipped entry's Fix in `lang`, its Markdown emphasis left out.
fn first_fix_sentence(slug: &str, lang: errbook::kb::Lang) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
    let kb = errbook::kb::Kb::load(&dir).expect("the shipped kb loads");
    let entry = kb.get(slug).unwrap_or_else(|| panic!("no entry `{slug}`"));
    let fix = entry.body(lang).section(errbook::kb::Section::Fix).unwrap();
    let step = fix.lines().next().unwrap().trim_start_matches("1. ");
    let sentence = step.replace("**", "");
    let end = sentence.find(['。', '.']).unwrap();
    sentence[..end].to_string()
}

#[tokio::test]
async fn a_chinese_reader_gets_the_fix_in_chinese() {
    with_browser(Lang::Chinese, |b| async move {
        diagnose_from_home(&b).await;
        let title = b.wait_for("#verdict h1 a").await.text().await.unwrap();
        assert_eq!(title, kb_title("nccl-watchdog-timeout", "title_zh"));
        let zh = first_fix_sentence("nccl-watchdog-timeout", errbook::kb::Lang::Zh);
        let en = first_fix_sentence("nccl-watchdog-timeout", errbook::kb::Lang::En);
        assert!(has_cjk(&zh), "{zh}");
        // The paste does not say which cause it is: the entry's whole fix, in Chinese.
        let fix = b.find("section.fix").await;
        assert_eq!(fix.attr("lang").await.unwrap().as_deref(), Some("zh-CN"));
        let text = fix.text().await.unwrap();
        assert!(
            text.contains(&zh),
            "the Chinese fix starts with {zh:?}: {text}"
        );
        assert!(!text.contains(&en), "no English in the Chinese fix: {text}");
        b.screenshot("answer-zh-fix", Viewport::Desktop).await;

        // The link to the English fix opens the entry's English body there.
        b.find("a.other-body").await.click().await.unwrap();
        b.wait_for_path("the entry", |p| p == "/entries/nccl-watchdog-timeout")
            .await;
        let body = b.wait_for("div.body").await;
        assert_eq!(body.attr("lang").await.unwrap().as_deref(), Some("en"));
        let text = body.text().await.unwrap();
        assert!(text.contains(&en), "the English fix: {text}");
        assert_eq!(b.attr("html", "lang").await.as_deref(), Some("zh-CN"));
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn traceback_pasted_in_search_goes_to_diagnosis() {
    with_browser(Lang::English, |b| async move {
        b.goto("/").await;
        b.wait_for("#site-q").await;
        paste_into(&b, "#site-q", WATCHDOG_TIMEOUT_LOG).await;
        b.wait_for_path("the answer page", |p| p == "/diagnose")
            .await;
        assert_top_answer_is_watchdog_timeout(&b).await;
        b.assert_no_console_errors().await;
    })
    .await;
}

/// Accessibility checks a reader would trip over, run in the page: every control has a
/// name, every image a text, one `h1`, no duplicate ids, and every visible piece of text
/// at least WCAG AA contrast against what is really behind it (4.5:1, 3:1 when large).
const ACCESSIBILITY_AUDIT: &str = r##"
const problems = [];
const rgba = (css) => {
    const m = css.match(/[\d.]+/g);
    if (!m) return null;
    const [r, g, b, a] = m.map(Number);
    return { r, g, b, a: a === undefined ? 1 : a };
};
const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a),
    g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a),
    a: 1,
});
const channel = (v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
};
const luminance = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
const backdrop = (el) => {
    const chain = [];
    for (let e = el; e; e = e.parentElement) chain.unshift(e);
    let bg = { r: 255, g: 255, b: 255, a: 1 };
    for (const e of chain) {
        const c = rgba(getComputedStyle(e).backgroundColor);
        if (c && c.a > 0) bg = over(c, bg);
    }
    return bg;
};
const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + [...el.classList].map((c) => "." + c).join("");
for (const el of document.querySelectorAll("body *")) {
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    if (style.visibility !== "visible" || box.width <= 1 || box.height <= 1) continue;
    const text = [...el.childNodes]
        .filter((n) => n.nodeType === Node.TEXT_NODE)
        .map((n) => n.textContent.trim())
        .join("");
    if (!text) continue;
    const bg = backdrop(el);
    const fg = over(rgba(style.color), bg);
    const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) {
        problems.push(`contrast ${ratio.toFixed(2)} for ${name(el)} "${text.slice(0, 40)}"`);
    }
}
for (const control of document.querySelectorAll("input:not([type=hidden]), textarea, select")) {
    if (!control.labels.length && !control.getAttribute("aria-label")) {
        problems.push(`no label for ${name(control)}`);
    }
}
for (const el of document.querySelectorAll("a, button")) {
    if (!el.textContent.trim() && !el.getAttribute("aria-label")) {
        problems.push(`no text for ${name(el)}`);
    }
}
for (const img of document.querySelectorAll("img:not([alt])")) problems.push(`no alt: ${name(img)}`);
const h1 = document.querySelectorAll("h1").length;
if (h1 !== 1) problems.push(`${h1} h1 elements`);
if (!document.documentElement.lang) problems.push("no lang on html");
const ids = [...document.querySelectorAll("[id]")].map((e) => e.id);
for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i))) problems.push(`duplicate id ${id}`);
return problems;
"##;

/// The audit finds what it looks for (so a pass means something).
async fn audit_self_check(b: &Browser) {
    b.js(
        r##"const p = document.createElement("p");
           p.textContent = "faint words";
           p.style.color = "#c8c8c8";
           p.style.background = "#ffffff";
           document.querySelector("main").append(p);
           const input = document.createElement("input");
           document.querySelector("main").append(input);"##,
        vec![],
    )
    .await;
    let found = b.js(ACCESSIBILITY_AUDIT, vec![]).await.to_string();
    assert!(
        found.contains("faint words"),
        "low contrast not found: {found}"
    );
    assert!(
        found.contains("no label for input"),
        "unlabelled input not found: {found}"
    );
}

async fn audit(b: &Browser, page: &str) {
    let problems = b.js(ACCESSIBILITY_AUDIT, vec![]).await;
    let problems = problems.as_array().cloned().unwrap_or_default();
    assert!(problems.is_empty(), "{page}: {problems:#?}");
}

async fn color_scheme(b: &Browser, scheme: &str) {
    let media = json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] });
    b.cdp("Emulation.setEmulatedMedia", media).await;
    let applied = format!("return matchMedia('(prefers-color-scheme: {scheme})').matches");
    b.wait_for_js(&format!("the {scheme} colour scheme"), &applied)
        .await;
}

#[tokio::test]
async fn pages_are_readable_and_labelled_in_light_and_dark() {
    with_browser(Lang::English, |b| async move {
        diagnose_from_home(&b).await;
        let answer = b.location().await;
        let pages = [
            "/".to_string(),
            answer,
            "/entries/nccl-watchdog-timeout".to_string(),
            "/search?q=%E6%98%BE%E5%AD%98%E4%B8%8D%E8%B6%B3".to_string(),
            "/tags/nccl".to_string(),
            "/entries/no-such-entry".to_string(),
        ];
        for scheme in ["light", "dark"] {
            color_scheme(&b, scheme).await;
            for page in &pages {
                b.goto(page).await;
                b.wait_for("main").await;
                audit(&b, &format!("{page} ({scheme})")).await;
            }
        }
        audit_self_check(&b).await;
        // The dark pages, to look at.
        b.goto(&pages[1]).await;
        b.screenshot("answer-dark-phone", Viewport::Phone).await;
        b.goto(&pages[2]).await;
        b.screenshot("entry-dark-desktop", Viewport::Desktop).await;
        color_scheme(&b, "light").await;
        // The 404 page is expected to log its own status; nothing else may.
        let unexpected: Vec<_> = b
            .console_errors()
            .await
            .into_iter()
            .filter(|e| !e.message.contains("no-such-entry"))
            .collect();
        assert!(unexpected.is_empty(), "{unexpected:#?}");
    })
    .await;
}

#[tokio::test]
async fn the_keyboard_alone_gets_an_answer() {
    with_browser(Lang::English, |b| async move {
        b.goto("/").await;
        b.wait_for("#paste-text").await;
        // On a desktop the paste box has the focus from the start.
        b.wait_for_js(
            "the paste box to have the focus",
            "return document.activeElement.id === 'paste-text'",
        )
        .await;
        b.press(WATCHDOG_TIMEOUT_LOG).await;
        b.press(&fantoccini::key::Key::Tab).await;
        assert_eq!(
            b.active().await.attr("id").await.unwrap().as_deref(),
            Some("paste-submit")
        );
        b.press(&fantoccini::key::Key::Enter).await;
        b.wait_for_path("the answer page", |p| p == "/diagnose")
            .await;
        assert_top_answer_is_watchdog_timeout(&b).await;

        // The first Tab reaches the skip link, which jumps past the header.
        b.js("document.activeElement.blur()", vec![]).await;
        b.find("body")
            .await
            .send_keys(&fantoccini::key::Key::Tab)
            .await
            .unwrap();
        assert_eq!(
            b.active().await.attr("class").await.unwrap().as_deref(),
            Some("skip")
        );
        b.press(&fantoccini::key::Key::Enter).await;
        b.wait_for_js(
            "the focus in main",
            "return document.activeElement.id === 'main'",
        )
        .await;

        // "/" jumps to the search box from anywhere outside a text field.
        b.find("body").await.send_keys("/").await.unwrap();
        b.wait_for_js(
            "the search box to have the focus",
            "return document.activeElement.id === 'site-q'",
        )
        .await;
        b.press("ncclInvalidUsage").await;
        b.press(&fantoccini::key::Key::Enter).await;
        b.wait_for_path("the search results", |p| p == "/search")
            .await;
        b.wait_for("ol.results li.result h2 a").await;
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn everything_works_without_javascript() {
    with_browser(Lang::English, |b| async move {
        b.cdp(
            "Emulation.setScriptExecutionDisabled",
            json!({ "value": true }),
        )
        .await;
        b.goto("/").await;
        let textarea = b.wait_for("textarea#paste-text").await;
        assert!(
            b.find_all("button.copy").await.is_empty(),
            "scripts are really off"
        );
        textarea.click().await.unwrap();
        textarea.send_keys(WATCHDOG_TIMEOUT_LOG).await.unwrap();
        b.find("button#paste-submit").await.click().await.unwrap();
        b.wait_for_path("the answer page", |p| p == "/diagnose")
            .await;
        assert_top_answer_is_watchdog_timeout(&b).await;
        assert!(!b.find_all("table.evidence mark").await.is_empty());

        // The share link, the language switch and search are plain links and forms.
        let share = b.attr("a#share-link", "href").await.unwrap();
        b.find("a.lang-switch").await.click().await.unwrap();
        b.wait_for_js(
            "the Chinese page",
            "return document.documentElement.lang === 'zh-CN'",
        )
        .await;
        let top = b.attr("#verdict h1 a", "href").await.unwrap_or_default();
        assert_eq!(entry_slug(&top), Some("nccl-watchdog-timeout"));
        assert_eq!(b.attr("a#share-link", "href").await.unwrap(), share);
        let q = b.find("#site-q").await;
        q.send_keys("显存不足").await.unwrap();
        q.send_keys(&fantoccini::key::Key::Enter).await.unwrap();
        b.wait_for_path("the search results", |p| p == "/search")
            .await;
        b.wait_for("ol.results li.result h2 a").await;

        // "Did this fix it?" is a plain form too.
        b.goto(&share).await;
        b.find("form.feedback-form button[value='yes']")
            .await
            .click()
            .await
            .unwrap();
        b.wait_for_path("the thanks page", |p| p == "/feedback")
            .await;
        let thanks = b.find("#thanks-heading").await.text().await.unwrap();
        assert!(thanks.contains("已记录"), "{thanks}");
        b.cdp(
            "Emulation.setScriptExecutionDisabled",
            json!({ "value": false }),
        )
        .await;
        b.assert_no_console_errors().await;
    })
    .await;
}

#[tokio::test]
async fn the_language_switch_never_sends_the_browser_off_site() {
    with_browser(Lang::English, |b| async move {
        for payload in common::REDIRECT_PAYLOADS {
            b.goto(&format!("/lang/zh-CN?next={payload}")).await;
            let url = b.url().await;
            assert!(
                url.starts_with(&format!("{}/", b.base())),
                "{payload} took the browser to {url}"
            );
        }
        b.goto("/lang/en?next=/search%3Fq%3Dnccl").await;
        assert_eq!(b.location().await, "/search?q=nccl");
        b.assert_no_console_errors().await;
    })
    .await;
}
