//! Entry bodies: rendering Markdown to sanitised HTML, extracting plain text for the
//! index, and checking that the required sections are there.

use std::sync::LazyLock;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};

use super::{Lang, Section};

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH
}

/// Entries are trusted, but raw HTML in them is still sanitised: a slip in one file
/// must not be able to run script in every reader's browser.
static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut b = ammonia::Builder::default();
    b.add_generic_attributes(["id"])
        .add_tag_attributes("code", ["class"]);
    b
});

/// Renders a Markdown body to sanitised HTML; level-two headings get ids (`#fix`) so
/// sections can be linked to, the same in both languages (`## 解决` is `#fix` too).
pub fn render_markdown(markdown: &str) -> String {
    let events: Vec<Event> = Parser::new_ext(markdown, options()).collect();
    let mut with_ids = Vec::with_capacity(events.len());
    for (i, event) in events.iter().enumerate() {
        match event {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H2,
                id: None,
                classes,
                attrs,
            }) => {
                let title: String = events[i + 1..]
                    .iter()
                    .take_while(|e| !matches!(e, Event::End(TagEnd::Heading(_))))
                    .filter_map(|e| match e {
                        Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                        _ => None,
                    })
                    .collect();
                let title = match Section::named(&title, Lang::Zh) {
                    Some(section) => section.heading(Lang::En),
                    None => &title,
                };
                with_ids.push(Event::Start(Tag::Heading {
                    level: HeadingLevel::H2,
                    id: Some(anchor(title).into()),
                    classes: classes.clone(),
                    attrs: attrs.clone(),
                }));
            }
            other => with_ids.push(other.clone()),
        }
    }
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut out, with_ids.into_iter());
    SANITIZER.clean(&out).to_string()
}

/// A heading's anchor: lowercase words joined by `-` (`Verify` -> `verify`).
fn anchor(title: &str) -> String {
    let mut out = String::new();
    for word in title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push('-');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// The body's text without markup: what full-text search indexes and snippets quote.
pub fn plain_text(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Text(t) | Event::Code(t) => out.push_str(&t),
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::TableCell,
            ) => out.push('\n'),
            _ => {}
        }
    }
    out
}

/// A level-two heading: its text, the line it is on (1-based, in the body), and
/// whether any text follows it before the next one.
pub(super) struct Heading {
    pub title: String,
    pub line: usize,
    pub has_text: bool,
}

/// The level-two headings of a body, in order.
pub(super) fn headings(markdown: &str) -> Vec<Heading> {
    let line_of = |offset: usize| markdown[..offset].matches('\n').count() + 1;
    let mut headings: Vec<Heading> = Vec::new();
    let mut current: Option<String> = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H2,
                ..
            }) => current = Some(String::new()),
            Event::End(TagEnd::Heading(HeadingLevel::H2)) => {
                if let Some(title) = current.take() {
                    headings.push(Heading {
                        title: title.trim().to_string(),
                        line: line_of(range.start),
                        has_text: false,
                    });
                }
            }
            Event::Text(t) | Event::Code(t) if current.is_some() => {
                current.as_mut().unwrap().push_str(&t)
            }
            Event::Text(_) | Event::Code(_) | Event::Html(_) => {
                if let Some(last) = headings.last_mut() {
                    last.has_text = true;
                }
            }
            _ => {}
        }
    }
    headings
}

/// Problems with the sections of a body in `lang`, as (1-based line in the body,
/// message).
pub(super) fn check_sections(markdown: &str, lang: Lang) -> Vec<(usize, String)> {
    let headings = headings(markdown);
    let mut problems = Vec::new();
    let mut previous: Option<(usize, &str)> = None;
    for section in Section::REQUIRED {
        let name = section.heading(lang);
        match headings.iter().find(|h| h.title.eq_ignore_ascii_case(name)) {
            None => problems.push((
                1,
                format!("body is missing the required section `## {name}`"),
            )),
            Some(h) => {
                if !h.has_text {
                    problems.push((h.line, format!("section `## {name}` is empty")));
                }
                if let Some((prev_line, prev)) = previous
                    && h.line < prev_line
                {
                    problems.push((
                        h.line,
                        format!("section `## {name}` must come after `## {prev}`"),
                    ));
                }
                previous = Some((h.line, name));
            }
        }
    }
    problems
}

/// A code block of a body: its info string (`bash`; empty for an indented block), its
/// text as a reader copies it (a list item's indentation removed), and its line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct CodeBlock {
    pub info: String,
    pub text: String,
    pub line: usize,
}

/// The code blocks of a body, in order.
pub(super) fn code_blocks(markdown: &str) -> Vec<CodeBlock> {
    let line_of = |offset: usize| markdown[..offset].matches('\n').count() + 1;
    let mut blocks = Vec::new();
    let mut open: Option<CodeBlock> = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.trim().to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                open = Some(CodeBlock {
                    info,
                    text: String::new(),
                    line: line_of(range.start),
                });
            }
            Event::Text(t) if open.is_some() => open.as_mut().unwrap().text.push_str(&t),
            Event::End(TagEnd::CodeBlock) => blocks.extend(open.take()),
            _ => {}
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "## Symptom\n\nIt fails.\n\n## Cause\n\nA bug.\n\n## Fix\n\n1. Do `x`.\n\n## Verify\n\nRun it.\n";

    #[test]
    fn complete_body_has_no_section_problems() {
        assert!(check_sections(GOOD, Lang::En).is_empty());
    }

    #[test]
    fn missing_empty_and_misordered_sections_are_reported() {
        let body = "## Cause\n\ntext\n\n## Symptom\n\ntext\n\n## Fix\n\n## Verify\n\nok\n";
        let problems = check_sections(body, Lang::En);
        let messages: Vec<_> = problems.iter().map(|(_, m)| m.as_str()).collect();
        assert!(
            messages
                .iter()
                .any(|m| m.contains("`## Cause` must come after"))
        );
        assert!(problems.contains(&(9, "section `## Fix` is empty".to_string())));
        let missing = check_sections("## Symptom\n\ntext\n", Lang::En);
        assert_eq!(missing.len(), 3);
    }

    #[test]
    fn renders_anchors_and_code_and_drops_script() {
        let html = render_markdown(
            "## Fix\n\n```bash\nexport NCCL_DEBUG=INFO\n```\n\n<script>alert(1)</script>\n",
        );
        assert!(html.contains("<h2 id=\"fix\">Fix</h2>"), "{html}");
        let zh = render_markdown("## 解决\n\n重启。\n\n## 背景\n\n见下。\n");
        assert!(zh.contains("<h2 id=\"fix\">解决</h2>"), "{zh}");
        assert!(zh.contains("<h2 id=\"background\">背景</h2>"), "{zh}");
        assert!(html.contains("<code class=\"language-bash\">"), "{html}");
        assert!(!html.contains("<script"), "{html}");
    }

    #[test]
    fn plain_text_keeps_words_and_code() {
        let text = plain_text("## Symptom\n\nSee `ncclInvalidUsage` here.\n");
        assert!(text.contains("Symptom"));
        assert!(text.contains("See ncclInvalidUsage here."));
    }
}
