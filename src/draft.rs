//! A new entry's first draft from a paste errbook could not answer: a slug and a title
//! from its root exception, signatures generalised from its message, the redacted
//! lines around it as the first example, the closest entries as related, and every
//! part a person must write marked [`TODO`], which `errbook check` reports until it
//! is written.

use std::fmt::Write as _;

use crate::diagnose::{Diagnosis, Exception, as_pattern, lines, query_words};
use crate::kb::Kb;
use crate::redact::redact;

/// What marks a part of a draft still to write. `errbook check` names each one left.
pub const TODO: &str = crate::kb::UNWRITTEN;

/// Lines of the paste kept before the root exception's line, and after it.
const BEFORE: usize = 30;
const AFTER: usize = 5;
/// Longest message a signature is made from, in characters.
const SIGNATURE_CHARS: usize = 160;

/// A draft: the entry's file and its Chinese body, and the slug they are named by.
#[derive(Debug)]
pub struct Draft {
    pub slug: String,
    pub entry: String,
    pub chinese: String,
}

/// Why a paste gives no draft.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    #[error(
        "no exception or error message found in the paste: a draft starts from the error a \
         failure printed (its traceback or the log lines around it)"
    )]
    NoError,
}

/// The draft of an entry for `text`, which `d` diagnosed against `kb`.
pub fn draft(kb: &Kb, text: &str, d: &Diagnosis) -> Result<Draft, DraftError> {
    let root = d.parsed.root_exception().ok_or(DraftError::NoError)?;
    let message = redact(&root.message).text;
    let slug = unused_slug(kb, &suggested_slug(root, &message));
    let title = clip_words(&format!("{}: {message}", root.kind), 90);
    let mut entry = String::new();
    let _ = writeln!(entry, "---");
    let _ = writeln!(entry, "slug: {slug}");
    let _ = writeln!(entry, "title: {}", quoted(&title));
    let _ = writeln!(entry, "title_zh: \"{TODO}: 中文标题\"");
    let _ = writeln!(
        entry,
        "summary: \"{TODO}: the cause and the fix in one sentence.\""
    );
    let _ = writeln!(entry, "summary_zh: \"{TODO}: 一句话说明原因和解决方法。\"");
    let _ = writeln!(entry, "tags: [draft]");
    let _ = writeln!(entry, "signatures:");
    for line in signatures(d, root, &message) {
        let _ = writeln!(entry, "  - {line}");
    }
    let _ = writeln!(entry, "symptoms:");
    let _ = writeln!(
        entry,
        "  - \"{TODO}: the problem as people describe it in words\""
    );
    let _ = writeln!(entry, "  - \"{TODO}: 用中文描述的现象\"");
    let _ = writeln!(entry, "examples:");
    let _ = writeln!(entry, "  - |");
    for line in example(text, root).lines() {
        let _ = writeln!(entry, "    {line}");
    }
    let related: Vec<&str> = (d.matches.iter().map(|m| m.slug.as_str()))
        .chain(d.closest.iter().map(|h| h.slug.as_str()))
        .filter(|slug| kb.get(slug).is_some())
        .take(3)
        .collect();
    if !related.is_empty() {
        let mut unique = related.clone();
        unique.dedup();
        let _ = writeln!(entry, "related: [{}]", unique.join(", "));
    }
    let _ = writeln!(entry, "sources:");
    let _ = writeln!(
        entry,
        "  - \"{TODO}: the report, documentation or maintainer's answer the facts come from\""
    );
    let _ = writeln!(entry, "---");
    let _ = writeln!(entry);
    let _ = writeln!(entry, "## Symptom\n");
    let _ = writeln!(entry, "```text\n{}: {message}\n```\n", root.qualified);
    let _ = writeln!(
        entry,
        "{TODO}: what the user sees, in which launcher and versions.\n"
    );
    for (section, what) in [
        ("Cause", "why it happens, concretely."),
        ("Fix", "ordered steps with the commands that fix it."),
        ("Verify", "how to confirm the fix worked."),
    ] {
        let _ = writeln!(entry, "## {section}\n\n{TODO}: {what}\n");
    }
    let mut chinese = String::new();
    let _ = writeln!(chinese, "## 症状\n");
    let _ = writeln!(chinese, "```text\n{}: {message}\n```\n", root.qualified);
    let _ = writeln!(chinese, "{TODO}: 用户看到什么，在哪个启动器和版本下。\n");
    for (section, what) in [
        ("原因", "具体说明为什么会发生。"),
        ("解决", "按顺序写出解决步骤和命令。"),
        ("验证", "怎样确认已经解决。"),
    ] {
        let _ = writeln!(chinese, "## {section}\n\n{TODO}: {what}\n");
    }
    Ok(Draft {
        slug,
        entry,
        chinese,
    })
}

/// The signatures a draft would have for the paste `d` diagnosed, as YAML list items
/// (`{regex: '...'}`): what an existing entry needs to recognise it. None when the
/// paste has no exception.
pub fn suggested_signatures(d: &Diagnosis) -> Vec<String> {
    match d.parsed.root_exception() {
        Some(root) => signatures(d, root, &redact(&root.message).text),
        None => Vec::new(),
    }
}

/// A slug from the message's first words (numbers, paths and addresses left out), else
/// from the exception's type.
fn suggested_slug(root: &Exception, message: &str) -> String {
    const SKIP: &[&str] = &[
        "a", "an", "the", "is", "was", "are", "be", "to", "of", "in", "on", "at", "for", "and",
        "or", "with", "by", "from", "this", "that", "it", "but", "not", "error", "n", "hex", "ip",
        "path",
    ];
    // Words of the message, not of its paths, file names or numbers.
    let plain: Vec<&str> = (message.split_whitespace())
        .filter(|token| !token.contains(['/', '\\', '.', '<']))
        .collect();
    let words: Vec<String> = query_words(&plain.join(" "))
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .filter(|w| w.len() > 1 && !w.chars().all(|c| c.is_ascii_digit()))
        .filter(|w| !SKIP.contains(&w.as_str()))
        .take(5)
        .collect();
    let slug = if words.is_empty() {
        kebab(&root.kind)
    } else {
        words.join("-")
    };
    if slug.is_empty() {
        "new-failure".to_string()
    } else {
        slug
    }
}

/// `CamelCase` as `camel-case`.
fn kebab(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().filter(char::is_ascii_alphanumeric) {
        if c.is_ascii_uppercase() && !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// `slug`, or `slug-2`, `slug-3`… when an entry has it.
fn unused_slug(kb: &Kb, slug: &str) -> String {
    if kb.get(slug).is_none() {
        return slug.to_string();
    }
    (2..)
        .map(|n| format!("{slug}-{n}"))
        .find(|candidate| kb.get(candidate).is_none())
        .expect("some number is free")
}

/// The signatures, as YAML list items: the root message as a regex with its run's
/// details as patterns (strong), and each wrapper exception's type (weak).
fn signatures(d: &Diagnosis, root: &Exception, message: &str) -> Vec<String> {
    let mut out = Vec::new();
    let head = clip_words(message, SIGNATURE_CHARS);
    let pattern = as_pattern(&head);
    if pattern.trim().len() >= 8 {
        out.push(format!("{{regex: {}}}", single_quoted(&pattern)));
    } else {
        out.push(quoted(&root.qualified));
    }
    let mut wrappers: Vec<&str> = (d.parsed.exceptions.iter())
        .filter(|e| e.wrapper && e.qualified != root.qualified)
        .map(|e| e.qualified.as_str())
        .collect();
    wrappers.sort_unstable();
    wrappers.dedup();
    for wrapper in wrappers {
        out.push(format!("{{literal: {}, weak: true}}", quoted(wrapper)));
    }
    out
}

/// The paste's lines around the root exception, redacted: the first example.
fn example(text: &str, root: &Exception) -> String {
    let all: Vec<&str> = lines(text).collect();
    let at = root.line.saturating_sub(1).min(all.len().saturating_sub(1));
    let from = at.saturating_sub(BEFORE);
    let to = (at + AFTER + 1).min(all.len());
    let window: Vec<&str> = all[from..to]
        .iter()
        .map(|l| l.trim_end())
        .skip_while(|l| l.is_empty())
        .collect();
    redact(&window.join("\n")).text
}

/// `text` cut at a word boundary to at most `max` characters.
fn clip_words(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(at) if at > max / 2 => cut[..at].trim_end().to_string(),
        _ => cut,
    }
}

/// A YAML double-quoted string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// A YAML single-quoted string (backslashes stay as written, for regexes).
fn single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_comes_from_the_message_words_else_the_type() {
        let root = |kind: &str| Exception {
            kind: kind.into(),
            qualified: kind.into(),
            message: String::new(),
            line_index: 0,
            line: 1,
            rank: None,
            wrapper: false,
            frames: vec![],
        };
        assert_eq!(
            suggested_slug(
                &root("RuntimeError"),
                "Expected 4 tensors in /data/x.pt, got 3 on rank 2"
            ),
            "expected-tensors-got-rank"
        );
        assert_eq!(
            suggested_slug(&root("ZeroDivisionError"), ""),
            "zero-division-error"
        );
    }

    #[test]
    fn quoting_keeps_yaml_valid() {
        assert_eq!(single_quoted(r"it's \d+"), r"'it''s \d+'");
        assert_eq!(quoted("a \"b\""), r#""a \"b\"""#);
    }
}
