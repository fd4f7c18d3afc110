//! The team's own failures: what errbook could not answer (captured when the team
//! turns capture on), what users said of its answers, grouped so that one failure seen
//! on many ranks and jobs is one line of a curator's inbox.
//!
//! - [`Capture`] and [`Feedback`]: what is kept, built from a paste and its diagnosis,
//!   redacted before anything leaves this module.
//! - [`store`]: the SQL store (SQLite or PostgreSQL) with its migrations.
//! - [`queue`]: the bounded queue between answers and the store, so an answer never
//!   waits for a write.
//! - [`export`]: the inbox as an `errbook eval` folder.

pub mod export;
pub mod queue;
pub mod store;

use std::fmt::Write as _;

use crate::diagnose::{Diagnosis, Verdict, lines, looks_like_error, normalize};
use crate::redact::redact;

pub use queue::{Inbox, InboxOptions, StoreHealth, StoreState};
pub use store::{EntryVotes, Group, GroupStatus, Location, Store, StoreError};

/// Lines kept before a root exception's line, and after it.
const BEFORE: usize = 30;
const AFTER: usize = 5;
/// Lines kept on either side of any other line the answer rests on.
const AROUND: usize = 2;
/// At most this many lines and bytes of a paste are ever stored.
pub const SAMPLE_LINES: usize = 120;
pub const SAMPLE_BYTES: usize = 16 << 10;
/// Longest line kept, in characters.
const LINE_CHARS: usize = 1000;

/// A paste errbook could not answer, as it is stored: redacted and cut to the lines
/// around its evidence and root cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    pub fingerprint: String,
    /// The root cause in one line (`RuntimeError: ...`), redacted.
    pub root_cause: String,
    pub verdict: Verdict,
    pub sample: String,
    /// What happened, from parsing alone (the answer page's triage), redacted.
    pub triage: String,
    /// The entries nearest to it, best first.
    pub closest: Vec<String>,
    /// Unix seconds.
    pub at: i64,
}

impl Capture {
    /// What is kept of `text`, which `d` answered; `None` when `d` answered it
    /// (`matched`): only what errbook could not answer is captured.
    pub fn of(text: &str, d: &Diagnosis, at: i64) -> Option<Capture> {
        if d.verdict == Verdict::Matched {
            return None;
        }
        let closest = (d.matches.iter().map(|m| m.slug.clone()))
            .chain(d.closest.iter().map(|h| h.slug.clone()))
            .fold(Vec::new(), |mut out, slug| {
                if !out.contains(&slug) && out.len() < 5 {
                    out.push(slug);
                }
                out
            });
        Some(Capture {
            fingerprint: fingerprint(text, d),
            root_cause: redact(&root_cause(text, d)).text,
            verdict: d.verdict,
            sample: sample(text, d),
            triage: redact(&d.triage.summary(d.parsed.root_exception())).text,
            closest,
            at,
        })
    }
}

/// What a user said of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vote {
    /// The fix worked.
    Yes,
    /// The entry was the right one, and its fix did not work.
    No,
    /// The answer named the wrong problem.
    WrongEntry,
}

impl Vote {
    pub fn as_str(self) -> &'static str {
        match self {
            Vote::Yes => "yes",
            Vote::No => "no",
            Vote::WrongEntry => "wrong_entry",
        }
    }

    pub fn parse(text: &str) -> Option<Vote> {
        match text {
            "yes" => Some(Vote::Yes),
            "no" => Some(Vote::No),
            "wrong_entry" => Some(Vote::WrongEntry),
            _ => None,
        }
    }
}

/// A user's word on one answer, stored with the answer: the entry it led with, its
/// verdict, the paste's group, and (with capture on) the paste itself, redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feedback {
    pub vote: Vote,
    pub entry: Option<String>,
    pub verdict: Option<Verdict>,
    pub fingerprint: Option<String>,
    pub sample: Option<String>,
    pub comment: Option<String>,
    pub at: i64,
}

/// Longest comment kept, in characters.
pub const COMMENT_CHARS: usize = 2000;

impl Feedback {
    /// Feedback on the answer `d` gave to `text` (when the paste came with it).
    /// `keep_paste`: whether capture is on, so the paste itself may be kept.
    pub fn new(
        vote: Vote,
        entry: Option<String>,
        answered: Option<(&str, &Diagnosis)>,
        comment: Option<&str>,
        keep_paste: bool,
        at: i64,
    ) -> Feedback {
        let comment = comment
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(|c| redact(&crate::diagnose::clip(c, COMMENT_CHARS)).text);
        Feedback {
            vote,
            entry: entry
                .or_else(|| answered.and_then(|(_, d)| Some(d.matches.first()?.slug.clone()))),
            verdict: answered.map(|(_, d)| d.verdict),
            fingerprint: answered.map(|(text, d)| fingerprint(text, d)),
            sample: answered
                .filter(|_| keep_paste)
                .map(|(text, d)| sample(text, d)),
            comment,
            at,
        }
    }
}

/// The group a failure belongs to: a hash of its normalised root cause, the same for
/// the same failure whatever the job, rank, host, path, address or time. It is the
/// root exception's type, its message with run-specific details masked, and the
/// innermost frame in the user's own code; without an exception, the first line that
/// reads as an error; without one, the text in words.
pub fn fingerprint(text: &str, d: &Diagnosis) -> String {
    let mut key = String::new();
    match d.parsed.root_exception() {
        Some(root) => {
            let _ = writeln!(key, "{}\n{}", root.qualified, masked(&root.message));
            if let Some(frame) = &d.triage.user_frame {
                let _ = write!(key, "{}:{}", frame.file, frame.function);
            }
        }
        None => key.push_str(&masked(&first_error_line(text).unwrap_or_else(|| {
            text.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase()
        }))),
    }
    let hash = xxhash_rust::xxh3::xxh3_128(key.as_bytes());
    format!("{:016x}", (hash >> 64) as u64 ^ hash as u64)
}

/// `text` with whatever differs between runs of one failure masked: numbers, hex,
/// paths, and the names of people and machines (which `redact` finds).
fn masked(text: &str) -> String {
    let redacted = redact(text).text;
    normalize(&crate::redact::PLACEHOLDER.replace_all(&redacted, "<id>"))
}

/// The root cause in one line: the root exception, else the first error line, else the
/// start of the text.
fn root_cause(text: &str, d: &Diagnosis) -> String {
    let line = match d.parsed.root_exception() {
        Some(root) => format!("{}: {}", root.qualified, root.message),
        None => first_error_line(text).unwrap_or_else(|| text.trim().to_string()),
    };
    crate::diagnose::clip(line.lines().next().unwrap_or("").trim(), 200)
}

fn first_error_line(text: &str) -> Option<String> {
    lines(text)
        .map(str::trim)
        .find(|line| looks_like_error(line))
        .map(str::to_string)
}

/// What is stored of a paste: the lines around its root exception (the traceback
/// before it) and around each line its answer rests on, at most [`SAMPLE_LINES`] lines
/// and [`SAMPLE_BYTES`] bytes, `…` where lines were left out, redacted.
pub fn sample(text: &str, d: &Diagnosis) -> String {
    let all: Vec<&str> = lines(text).map(str::trim_end).collect();
    if all.is_empty() {
        return String::new();
    }
    let last = all.len() - 1;
    let mut keep = vec![false; all.len()];
    let mut mark = |from: usize, to: usize| {
        for k in &mut keep[from.min(last)..=to.min(last)] {
            *k = true;
        }
    };
    let mut anchored = false;
    if let Some(root) = d.parsed.root_exception() {
        let at = root.line.saturating_sub(1);
        mark(at.saturating_sub(BEFORE), at + AFTER);
        anchored = true;
    }
    for evidence in d.matches.iter().flat_map(|m| &m.evidence) {
        let at = evidence.line.saturating_sub(1);
        mark(at.saturating_sub(AROUND), at + AROUND);
        anchored = true;
    }
    if !anchored {
        // Nothing to center on: the start, which for a question is all of it.
        mark(0, SAMPLE_LINES - 1);
    }
    let mut out = String::new();
    let mut count = 0;
    let mut skipped = false;
    for (line, kept) in all.iter().zip(&keep) {
        if !kept {
            skipped = true;
            continue;
        }
        let line = crate::diagnose::clip(line, LINE_CHARS);
        if count == SAMPLE_LINES || out.len() + line.len() > SAMPLE_BYTES {
            out.push_str("…\n");
            break;
        }
        if skipped && count > 0 {
            out.push_str("…\n");
        }
        skipped = false;
        out.push_str(&line);
        out.push('\n');
        count += 1;
    }
    redact(out.trim_end()).text
}
