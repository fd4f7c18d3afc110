//! Writes a synthetic knowledge base for scale benchmarks: `N` entries made from the
//! real ones in `kb/`, each with its own error signatures (literals and regexes, a few
//! weak ones shared by many entries, as launcher wrappers are), symptoms, titles in
//! both languages and a body with the four required sections.
//!
//! ```sh
//! cargo run --release --example synth-kb -- 10000 /tmp/kb-10k
//! ```
//!
//! Bodies are cut to 1.5–6 KB (the real entries run 5–21 KB with their examples, but
//! a team's own notes are usually shorter), so 100,000 entries are about 400 MB.
//! The output is deterministic for a given `N` and `--seed`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use errbook::kb::{Entry, Kb, SignatureKind};

const SYLLABLES: &[&str] = &[
    "ka", "zor", "vel", "min", "tra", "quo", "lux", "ber", "dan", "fil", "gro", "hex", "jin",
    "kel", "mor", "nex", "pal", "rix", "sol", "tor", "ulm", "vax", "wen", "yor", "zel",
];
const FAILURES: &[&str] = &[
    "timeout",
    "mismatch",
    "failure",
    "overflow",
    "deadlock",
    "corruption",
    "refused",
    "exhausted",
];
const EXCEPTIONS: &[&str] = &[
    "RuntimeError",
    "ValueError",
    "torch.distributed.DistBackendError",
    "AssertionError",
    "OSError",
    "torch.OutOfMemoryError",
];
/// Wrapper lines many problems share: weak signatures.
const WRAPPERS: &[&str] = &[
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
    "NCCL error in:",
    "CUDA error: an illegal memory access was encountered",
    "ProcessGroupNCCL.cpp",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(count), Some(out)) = (args.first(), args.get(1)) else {
        eprintln!("usage: synth-kb N OUT_DIR [--seed S] [--kb DIR]");
        std::process::exit(2);
    };
    let count: usize = count.parse().expect("N is a number");
    let seed = flag(&args, "--seed").map_or(7, |s| s.parse().expect("seed is a number"));
    let source = flag(&args, "--kb").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kb"),
        PathBuf::from,
    );
    let kb = Kb::load(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    let out = Path::new(out);
    std::fs::create_dir_all(out).expect("output directory");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut bytes = 0;
    for i in 0..count {
        let base = &kb.entries()[rng.usize(..kb.len())];
        let text = synthetic(&mut rng, i, base);
        bytes += text.len();
        std::fs::write(out.join(format!("synth-{i:06}.md")), text).expect("writing an entry");
    }
    println!(
        "{count} entries, {:.1} MB, in {}",
        bytes as f64 / 1e6,
        out.display()
    );
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).map(String::as_str)
}

/// A made-up identifier unique to entry `i` (its digits make it so).
fn word(rng: &mut fastrand::Rng, i: usize) -> String {
    let mut w = String::new();
    for _ in 0..rng.usize(2..4) {
        w.push_str(SYLLABLES[rng.usize(..SYLLABLES.len())]);
    }
    format!("{w}{i}")
}

fn camel(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''").replace('\n', " "))
}

fn synthetic(rng: &mut fastrand::Rng, i: usize, base: &Entry) -> String {
    let subject = word(rng, i);
    let component = word(rng, i);
    let failure = FAILURES[rng.usize(..FAILURES.len())];
    let exception = EXCEPTIONS[rng.usize(..EXCEPTIONS.len())];
    let message = format!("{component} {failure} while syncing {subject}");

    let mut signatures = vec![quote(&format!("{exception}: {message}"))];
    signatures.push(format!(
        "{{literal: {}}}",
        quote(&format!("{}{}Error", camel(&component), camel(failure)))
    ));
    if rng.bool() {
        signatures.push(format!(
            "{{regex: {}}}",
            quote(&format!(
                r"(?i){subject} (?:{failure}|stalled) after \d+ ?(?:ms|s)\b"
            ))
        ));
    }
    if rng.usize(..5) == 0 {
        signatures.push(format!(
            "{{regex: {}}}",
            quote(&format!(r"rank \d+ {component}: code \d{{3}}"))
        ));
    }
    if rng.usize(..5) == 0 {
        let wrapper = WRAPPERS[rng.usize(..WRAPPERS.len())];
        signatures.push(format!("{{literal: {}, weak: true}}", quote(wrapper)));
    }
    // Real signatures of the base entry, made this entry's own by a unique suffix.
    for s in base.signatures.iter().filter(|s| !s.weak).take(2) {
        if let SignatureKind::Literal(text) = &s.kind {
            signatures.push(quote(&format!("{text} [{subject}]")));
        }
    }

    let mut symptoms: Vec<String> = base
        .symptoms
        .iter()
        .take(rng.usize(2..5))
        .map(|s| quote(&format!("{s} ({subject})")))
        .collect();
    symptoms.push(quote(&format!("{component} {failure} on every rank")));
    symptoms.push(quote(&format!("{subject} 同步时{component}报错")));

    let mut front = String::new();
    let _ = writeln!(front, "---");
    let _ = writeln!(front, "slug: synth-{i:06}");
    let _ = writeln!(
        front,
        "title: {}",
        quote(&format!("{}: {message}", base.title))
    );
    let _ = writeln!(
        front,
        "title_zh: {}",
        quote(&format!("{}（{subject}）", base.title_zh))
    );
    let _ = writeln!(
        front,
        "summary: {}",
        quote(&format!("{} Here it shows as {message}.", base.summary))
    );
    let _ = writeln!(
        front,
        "summary_zh: {}",
        quote(&format!("{}（表现为 {message}）", base.summary_zh))
    );
    let _ = writeln!(front, "tags: [{}]", base.tags.join(", "));
    let _ = writeln!(front, "signatures:");
    for s in &signatures {
        let _ = writeln!(front, "  - {s}");
    }
    let _ = writeln!(front, "symptoms:");
    for s in &symptoms {
        let _ = writeln!(front, "  - {s}");
    }
    let _ = writeln!(front, "sources: [synthetic]");
    let _ = writeln!(front, "---");

    let budget = rng.usize(1500..6000);
    format!(
        "{front}\n{}",
        body(base, budget, &format!("{exception}: {message}"))
    )
}

/// The base entry's four required sections, each cut to a share of `budget` bytes at
/// a paragraph break, the error text quoted in the symptom.
fn body(base: &Entry, budget: usize, error: &str) -> String {
    let mut out = String::new();
    for heading in ["Symptom", "Cause", "Fix", "Verify"] {
        let section = section(&base.body.markdown, heading);
        let _ = writeln!(out, "## {heading}\n");
        if heading == "Symptom" {
            let _ = writeln!(out, "```\n{error}\n```\n");
        }
        let mut text = String::new();
        for block in blocks(section) {
            if !text.is_empty() && text.len() + block.len() > budget / 4 {
                break;
            }
            let _ = writeln!(text, "{block}\n");
        }
        if text.is_empty() {
            text.push_str("See the error above.\n\n");
        }
        out.push_str(&text);
    }
    out
}

/// A section's blocks: paragraphs, list items, tables, and code fences kept whole, so
/// a cut never leaves a fence open.
fn blocks(section: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current = String::new();
    let mut in_fence = false;
    for line in section.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if line.trim().is_empty() && !in_fence {
            if !current.is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
            continue;
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(line);
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks
}

fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let marker = format!("## {heading}\n");
    let Some(start) = markdown.find(&marker) else {
        return "";
    };
    let rest = &markdown[start + marker.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end].trim()
}
