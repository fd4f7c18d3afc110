//! Arbitrary bytes as a knowledge-base entry file: parsing and validating it, and
//! rendering Markdown to sanitised HTML, must never panic, and the HTML must never
//! carry script.
#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use errbook::kb::{Entry, render_markdown};
use libfuzzer_sys::fuzz_target;
use regex::Regex;

/// A tag: the serialiser escapes `<` and `>` everywhere else.
static TAG: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"<[^>]*>?").unwrap());
/// A double-quoted attribute value, as html5ever serialises every one.
static QUOTED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#""[^"]*""#).unwrap());
/// An event-handler attribute (`onerror=`, `onclick =`) among a tag's attributes.
static EVENT_HANDLER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\son[a-z]+\s*=").unwrap());

/// Panics if sanitised HTML could run script: a `<script` tag or an `on...=` attribute
/// (the check `<[^>]*\son[a-z]+\s*=`, case-insensitive).
///
/// The sanitiser's serialiser escapes `<` and `>` in text and in attribute values and
/// `"` in attribute values, so every `<...>` in its output is a tag and each attribute
/// value in it is a `"..."` string without quotes inside. The event-handler check is
/// applied to each tag with those values blanked: an `alt` or `title` whose *text*
/// reads "x onerror=1" is harmless words, not an attribute, although the bare regex
/// over the whole output reports it.
fn assert_no_script(html: &str, what: &str, input: &str) {
    assert!(
        !html.to_ascii_lowercase().contains("<script"),
        "{what} contains <script\ninput: {input:?}\nhtml: {html:?}"
    );
    for tag in TAG.find_iter(html) {
        let markup = QUOTED.replace_all(tag.as_str(), "\"\"");
        if let Some(m) = EVENT_HANDLER.find(&markup) {
            panic!(
                "{what} contains an event-handler attribute {:?} in tag {:?}\ninput: {input:?}\nhtml: {html:?}",
                m.as_str(),
                tag.as_str()
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(entry) = Entry::from_file_text(Path::new("fuzz.md"), &text) {
        assert_no_script(entry.html(), "entry.html()", &text);
        for signature in &entry.signatures {
            let _ = signature.searchable_text();
            let _ = signature.as_str();
        }
    }
    let html = render_markdown(&text);
    assert_no_script(&html, "render_markdown", &text);
});
