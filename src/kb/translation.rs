//! The Chinese body of an entry against its English one, as `errbook check` holds
//! them: the same sections in the same order, and the same code blocks, so that a
//! command fixed in one language cannot stay wrong in the other.

use super::markdown::{self, CodeBlock};
use super::{Entry, Lang, Problem, Section};

/// What is wrong with `entry`'s Chinese body, located in the Chinese file.
pub(super) fn problems(entry: &Entry) -> Vec<Problem> {
    let Some(zh) = &entry.body_zh else {
        return vec![Problem::new(
            &entry.path_zh(),
            None,
            format!(
                "no Chinese body: write it in this file, beside `{}`, with the sections {}",
                entry.path.file_name().unwrap_or_default().to_string_lossy(),
                wanted_headings(&entry.body.markdown)
            ),
        )];
    };
    let at = |line: usize| Some(zh.line + line - 1);
    let en_line = |line: usize| entry.body.line + line - 1;
    let mut problems = Vec::new();
    if zh.markdown.starts_with("---") {
        problems.push(Problem::new(
            &zh.path,
            at(1),
            "a Chinese body has no front matter: titles and summaries stay in the entry's file",
        ));
    }
    for (line, message) in markdown::check_sections(&zh.markdown, Lang::Zh) {
        problems.push(Problem::new(&zh.path, at(line), message));
    }

    let en_sections = markdown::headings(&entry.body.markdown);
    let zh_sections = markdown::headings(&zh.markdown);
    for h in &zh_sections {
        if Section::named(&h.title, Lang::Zh).is_none() {
            problems.push(Problem::new(
                &zh.path,
                at(h.line),
                format!(
                    "unknown section `## {}`: a Chinese body's sections are 症状, 原因, 解决, 验证 and 背景",
                    h.title
                ),
            ));
        }
    }
    let en_order: Vec<Option<Section>> = en_sections
        .iter()
        .map(|h| Section::named(&h.title, Lang::En))
        .collect();
    let zh_order: Vec<Option<Section>> = zh_sections
        .iter()
        .map(|h| Section::named(&h.title, Lang::Zh))
        .collect();
    if en_order != zh_order && problems.is_empty() {
        problems.push(Problem::new(
            &zh.path,
            at(zh_sections.first().map_or(1, |h| h.line)),
            format!(
                "the sections differ from the English body's: it has {}, this one {}",
                names(&en_order, Lang::En),
                names(&zh_order, Lang::Zh)
            ),
        ));
    }

    let en_blocks = markdown::code_blocks(&entry.body.markdown);
    let zh_blocks = markdown::code_blocks(&zh.markdown);
    for (n, pair) in en_blocks.iter().zip(&zh_blocks).enumerate() {
        let (en, zh_block) = pair;
        if en != &moved(zh_block, en.line) {
            problems.push(Problem::new(
                &zh.path,
                at(zh_block.line),
                format!(
                    "code block {} differs from the English one ({}:{}): {}",
                    n + 1,
                    entry.path.display(),
                    en_line(en.line),
                    difference(en, zh_block)
                ),
            ));
        }
    }
    if en_blocks.len() != zh_blocks.len() {
        // An extra block is where it is; a missing one, in the section that should hold it.
        let line = match (
            zh_blocks.get(en_blocks.len()),
            en_blocks.get(zh_blocks.len()),
        ) {
            (Some(extra), _) => extra.line,
            (None, Some(missing)) => {
                let section = (en_sections.iter())
                    .rfind(|h| h.line < missing.line)
                    .and_then(|h| Section::named(&h.title, Lang::En));
                (zh_sections.iter())
                    .find(|h| section.is_some() && Section::named(&h.title, Lang::Zh) == section)
                    .map_or(1, |h| h.line)
            }
            (None, None) => 1,
        };
        problems.push(Problem::new(
            &zh.path,
            at(line),
            format!(
                "{} code blocks, and the English body has {}: each block is in both, in the same order",
                zh_blocks.len(),
                en_blocks.len()
            ),
        ));
    }
    problems
}

/// `block` as if it were on `line`: blocks are compared by what they hold.
fn moved(block: &CodeBlock, line: usize) -> CodeBlock {
    CodeBlock {
        info: block.info.clone(),
        text: block.text.clone(),
        line,
    }
}

/// Where two code blocks first differ, for the author to find it.
fn difference(en: &CodeBlock, zh: &CodeBlock) -> String {
    if en.info != zh.info {
        return format!("the English is ```{}, this one ```{}", en.info, zh.info);
    }
    let mut en_lines = en.text.lines();
    let mut zh_lines = zh.text.lines();
    for n in 1.. {
        match (en_lines.next(), zh_lines.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => {
                return format!("its line {n} reads `{b}` where the English reads `{a}`");
            }
            (Some(a), None) => return format!("its line {n} is missing: `{a}`"),
            (None, Some(b)) => return format!("its line {n} is not in the English: `{b}`"),
            (None, None) => break,
        }
    }
    "they differ in blank lines or line ends".to_string()
}

fn names(sections: &[Option<Section>], lang: Lang) -> String {
    let names: Vec<&str> = sections
        .iter()
        .map(|s| s.map_or("?", |s| s.heading(lang)))
        .collect();
    names.join(", ")
}

/// The Chinese headings an English body calls for.
fn wanted_headings(english: &str) -> String {
    let sections: Vec<Option<Section>> = markdown::headings(english)
        .iter()
        .map(|h| Section::named(&h.title, Lang::En))
        .collect();
    names(&sections, Lang::Zh)
}
