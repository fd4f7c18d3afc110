//! Diagnosis in stages, over one paste:
//!
//! 1. **read**: the paste's lines joined, parsed into exceptions and a root cause;
//! 2. **signals**: the signatures that fire on it, the entries full-text search ranks
//!    for its messages, the entries whose describing phrases are closest;
//! 3. **candidates**: those signals gathered by entry, each entry's `Claim`;
//! 4. **ranking**: claims scored, with the share of the paste's vocabulary each entry
//!    holds, best first;
//! 5. **verdict**: the best of the top few that the evidence supports, or `no_match`;
//! 6. **evidence**: the paste lines behind each answer, and its confidence.
//!
//! What counts for how much, and what is enough, is `policy`'s to say.

use std::borrow::Cow;
use std::cell::OnceCell;

use rustc_hash::FxHashMap;

use super::branch::{self, ChosenBranch};
use super::normalize::query_words;
use super::parse::{Parsed, parse};
use super::paste::{Paste, looks_like_error};
use super::policy::{
    self, ANSWER_CANDIDATES, Claim, EVIDENCE_CHARS, EVIDENCE_LINES, LONG_PASTE_LINES, MAX_EVIDENCE,
    MOST_ENTRIES_PER_SIGNATURE, SHORT_PASTE_LINES, SHORT_PASTE_QUERY_LINES, TEXT_CANDIDATES,
    TEXT_EVIDENCE_LINES,
};
use super::triage::{Triage, triage};
use super::versions::{self, VersionCheck};
use crate::kb::SignatureMatch;
use crate::search::{Analysed, Hit, QueryTerms, SearchError, SearchIndex, SearchQuery};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first match is the answer: evidence strong enough to be right nearly always
    /// (see `policy::verdict`).
    Matched,
    /// The evidence supports some entries, not firmly enough to call one the answer:
    /// candidates worth a look.
    Possible,
    /// No entry fits: `matches` holds at most low-confidence leads, and when there
    /// are none `closest` holds the nearest entries by text.
    NoMatch,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Matched => "matched",
            Verdict::Possible => "possible",
            Verdict::NoMatch => "no_match",
        }
    }

    pub fn parse(text: &str) -> Option<Verdict> {
        match text {
            "matched" => Some(Verdict::Matched),
            "possible" => Some(Verdict::Possible),
            "no_match" => Some(Verdict::NoMatch),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvidenceKind {
    /// A strong signature of the entry fired on this line.
    Signature,
    /// A weak signature (a wrapper or generic code) fired on this line.
    WeakSignature,
    /// Words of this line occur in the entry.
    Text,
}

/// One paste line that led to a match.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// 1-based line number in the paste.
    pub line: usize,
    /// The line, cleaned of prefixes.
    pub text: String,
    pub kind: EvidenceKind,
    /// The signature that fired, as the entry writes it.
    pub signature: Option<String>,
    /// For text evidence, the shared words (analysed form).
    pub terms: Vec<String>,
    /// Byte range of `text` the signature matched.
    pub span: Option<(usize, usize)>,
}

impl Evidence {
    /// The line split around the matched span: (before, matched, after).
    pub fn parts(&self) -> (&str, &str, &str) {
        let split = self.span.and_then(|(a, b)| {
            Some((
                self.text.get(..a)?,
                self.text.get(a..b)?,
                self.text.get(b..)?,
            ))
        });
        split.unwrap_or((&self.text, "", ""))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    pub slug: String,
    pub score: f32,
    pub confidence: Confidence,
    /// Share of the paste's vocabulary the entry explains, 0..=1.
    pub coverage: f32,
    pub evidence: Vec<Evidence>,
    /// The entry's branch (cause) the paste selects, if the entry has branches and
    /// one fits.
    pub branch: Option<ChosenBranch>,
    /// The paste's releases of the packages the entry's version ranges name.
    pub versions: Vec<VersionCheck>,
}

#[derive(Debug, Clone)]
pub struct Diagnosis {
    pub verdict: Verdict,
    /// Ranked candidates, best first; with `no_match`, low-confidence leads or none.
    pub matches: Vec<Match>,
    /// When no entry is supported at all: the nearest by full text, for the reader.
    pub closest: Vec<Hit>,
    pub parsed: Parsed,
    /// What happened, from parsing alone: first failure, own frame, consequences,
    /// exits, environment.
    pub triage: Triage,
    pub lines: usize,
    pub distinct_lines: usize,
    pub truncated: bool,
    /// The paste shows no failure: no exception, no exit and no line that looks like
    /// an error. It asks something in words.
    pub question: bool,
}

/// A signature that fired: which one, on which line (index into `Paste::lines`), and
/// the byte range it covered within that line.
#[derive(Clone, Copy)]
struct Fired {
    signature: usize,
    weak: bool,
    line: usize,
    span: (usize, usize),
}

/// An entry (its position in the knowledge base) with some claim on the paste.
struct Candidate {
    entry: usize,
    claim: Claim,
    /// Its signatures that fired: a range of `Candidates::fired`.
    fired: std::ops::Range<usize>,
}

/// Every candidate, by entry, and the signatures that fired.
struct Candidates {
    list: Vec<Candidate>,
    /// Each candidate's together, by signature.
    fired: Vec<Fired>,
}

impl Candidates {
    /// The candidates of the signatures fired (`matches`, by entry, then signature,
    /// each with whether it fired on a root-cause line), of the full-text hits and of
    /// the closest phrases (entry, rank relative to the best, each), and of the entries
    /// a signal exit (`by_exit`) or a release (`by_release`) in the paste names.
    fn new(
        matches: impl IntoIterator<Item = (usize, Fired, bool)>,
        text: &[(usize, f32)],
        phrases: &[(usize, f32)],
        by_exit: &[usize],
        by_release: &[usize],
    ) -> Candidates {
        let mut list: Vec<Candidate> = Vec::new();
        let mut fired = Vec::new();
        for (entry, f, on_root) in matches {
            if list.last().is_none_or(|c| c.entry != entry) {
                debug_assert!(list.last().is_none_or(|c| c.entry < entry));
                let at = fired.len();
                list.push(Candidate {
                    entry,
                    claim: Claim::default(),
                    fired: at..at,
                });
            }
            let c = list.last_mut().expect("pushed above");
            if f.weak {
                c.claim.weak += 1;
            } else {
                c.claim.strong += 1;
            }
            c.claim.on_root |= on_root;
            fired.push(f);
            c.fired.end = fired.len();
        }
        let by_exit: Vec<(usize, f32)> = by_exit.iter().map(|&e| (e, 0.0)).collect();
        let by_release: Vec<(usize, f32)> = by_release.iter().map(|&e| (e, 0.0)).collect();
        for (hits, source) in [
            (text, 0),
            (phrases, 1),
            (&by_exit[..], 2),
            (&by_release[..], 3),
        ] {
            for &(entry, rank) in hits {
                let at = match list.binary_search_by_key(&entry, |c| c.entry) {
                    Ok(at) => at,
                    Err(at) => {
                        let empty = fired.len()..fired.len();
                        let claim = Claim::default();
                        list.insert(
                            at,
                            Candidate {
                                entry,
                                claim,
                                fired: empty,
                            },
                        );
                        at
                    }
                };
                let claim = &mut list[at].claim;
                match source {
                    0 => claim.text_rank = rank,
                    1 => claim.phrase_rank = rank,
                    // An exit one of the entry's branches names, or an affected
                    // release, weighs as a weak signature; the exit also tells the
                    // entry about the signal from a wrapper's.
                    2 => {
                        claim.weak += 1;
                        claim.exit_named = true;
                    }
                    _ => claim.weak += 1,
                }
            }
        }
        Candidates { list, fired }
    }

    fn get(&self, entry: usize) -> &Candidate {
        let at = self
            .list
            .binary_search_by_key(&entry, |c| c.entry)
            .expect("a candidate");
        &self.list[at]
    }

    /// The signatures of `c` that fired, strong ones first.
    fn fired(&self, c: &Candidate) -> impl Iterator<Item = &Fired> {
        let fired = &self.fired[c.fired.clone()];
        let strong = fired.iter().filter(|f| !f.weak);
        strong.chain(fired.iter().filter(|f| f.weak))
    }
}

/// The paste as the stages read it: its cleaned lines joined, where each starts, and
/// what parsing found.
struct Reading<'p> {
    paste: &'p Paste,
    text: String,
    starts: Vec<usize>,
    parsed: Parsed,
    lines: LineWords<'p>,
}

impl<'p> Reading<'p> {
    fn new(paste: &'p Paste) -> Reading<'p> {
        let (text, starts) = paste.joined();
        let parsed = parse(paste, &text, &starts);
        Reading {
            paste,
            parsed,
            lines: LineWords::new(paste),
            text,
            starts,
        }
    }

    /// The message an entry must explain to be the answer: the root-cause exception's
    /// type and message; without a Python exception, in a paste that never names
    /// anything of distributed training (a Rust or Go panic, an npm or Docker
    /// failure), its first error lines, or its first line when none looks like an
    /// error. `None` for a paste of the field without an exception (a question in
    /// words, a log), or when the only exception is a launcher's wrapper.
    fn error_message(&self) -> Option<String> {
        if let Some(root) = self.parsed.root_exception() {
            return (!root.wrapper).then(|| format!("{} {}", root.kind, root.message));
        }
        if policy::FIELD_WORDS.is_match(&self.text) {
            return None;
        }
        let lines = || {
            (self.paste.lines.iter())
                .map(|l| l.text.trim())
                .filter(|t| !t.is_empty())
        };
        let errors: Vec<&str> = lines()
            .filter(|t| looks_like_error(t))
            .take(policy::ERROR_LINES_EXPLAINED)
            .collect();
        if errors.is_empty() {
            lines().next().map(str::to_string)
        } else {
            Some(errors.join(" "))
        }
    }

    /// A signature match as fired: on which line, where in it, and whether on the
    /// root-cause exception's lines.
    fn fired(&self, m: &SignatureMatch) -> (Fired, bool) {
        let line = self
            .starts
            .partition_point(|&s| s <= m.start)
            .saturating_sub(1);
        let line_start = self.starts[line];
        let line_end = line_start + self.paste.lines[line].text.len();
        let fired = Fired {
            signature: m.signature,
            weak: m.weak,
            line,
            span: (m.start - line_start, m.end.min(line_end) - line_start),
        };
        // Without an exception, the lines any signature fires on are all the paste says
        // of its failure: they stand for the root cause. With one, only a strong
        // signature on its lines does (a launcher's wrapper follows it closely).
        let on_root = match self.parsed.root_exception() {
            Some(_) => !m.weak && root_line_range(&self.parsed).contains(&line),
            None => true,
        };
        (fired, on_root)
    }
}

/// What the knowledge base says of a paste before it is judged.
struct Signals<'a> {
    /// Signatures that fired, ordered by entry and signature.
    signatures: Vec<SignatureMatch>,
    /// The text searched, and its analysis.
    query: TextQuery,
    analysed: &'a Analysed,
    /// Entries by full-text rank, and by closest phrase, each relative to the best.
    text: Vec<(usize, f32)>,
    phrases: Vec<(usize, f32)>,
}

impl<'a> Signals<'a> {
    fn gather(
        index: &SearchIndex,
        reading: &Reading,
        query: TextQuery,
        analysed: &'a Analysed,
    ) -> Result<Signals<'a>, SearchError> {
        let relative = |ranked: &[(usize, f32)]| -> Vec<(usize, f32)> {
            let top = ranked.first().map_or(0.0, |h| h.1).max(f32::EPSILON);
            let best = ranked.iter().take(TEXT_CANDIDATES);
            best.map(|&(entry, score)| (entry, score / top)).collect()
        };
        let signatures = index.kb().signatures();
        let mut signatures = signatures.matches_within(&reading.text, MOST_ENTRIES_PER_SIGNATURE);
        // How many entries each signature text (where it fired) speaks for: literal
        // signatures that too many share are left out above, regexes here.
        let mut entries_at: FxHashMap<(usize, usize), usize> = FxHashMap::default();
        for m in &signatures {
            *entries_at.entry((m.start, m.end)).or_default() += 1;
        }
        signatures.retain(|m| entries_at[&(m.start, m.end)] <= MOST_ENTRIES_PER_SIGNATURE);
        Ok(Signals {
            signatures,
            text: relative(&index.rank(analysed, TEXT_CANDIDATES)?),
            phrases: relative(&index.match_phrases(analysed)?),
            query,
            analysed,
        })
    }
}

/// A candidate scored: (entry, score, vocabulary share).
type Scored = (usize, f32, f32);

/// The best `wanted` candidates, best first (ties: lower entry first). The vocabulary
/// share, the costly part, is worked out only for candidates that can still reach them.
fn rank(
    index: &SearchIndex,
    candidates: &Candidates,
    terms: &QueryTerms,
    wanted: usize,
) -> Vec<Scored> {
    let mut partial: Vec<(usize, f32)> = (candidates.list.iter())
        .map(|c| (c.entry, c.claim.partial_score()))
        .collect();
    partial.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut scored: Vec<Scored> = Vec::with_capacity(wanted + 1);
    for (entry, without_coverage) in partial {
        if scored.len() >= wanted && without_coverage + policy::COVERAGE < scored[wanted - 1].1 {
            break;
        }
        let coverage = index.coverage(terms, entry);
        let score = candidates.get(entry).claim.score(coverage);
        let at = scored.partition_point(|s| s.1 > score || (s.1 == score && s.0 < entry));
        scored.insert(at, (entry, score, coverage));
        scored.truncate(wanted);
    }
    scored
}

/// Whether any entry is supported: the best of the top `ANSWER_CANDIDATES` that the
/// evidence supports moves first; if none is, false.
fn supported(
    index: &SearchIndex,
    candidates: &Candidates,
    reading: &Reading,
    question: bool,
    ranked: &mut Vec<Scored>,
) -> Result<bool, SearchError> {
    let root_text = reading
        .error_message()
        .map(|message| index.analyse(&query_words(&message)));
    let root_terms = root_text
        .as_ref()
        .map(|t| index.query_terms(t))
        .transpose()?;
    for position in 0..ranked.len().min(ANSWER_CANDIDATES) {
        let (entry, _, coverage) = ranked[position];
        let claim = &candidates.get(entry).claim;
        let explained = match &root_terms {
            Some(terms) if claim.strong == 0 => Some(index.explains(terms, entry)?),
            _ => None,
        };
        if policy::supports(claim, coverage, explained, question) {
            let chosen = ranked.remove(position);
            ranked.insert(0, chosen);
            return Ok(true);
        }
    }
    Ok(false)
}

pub(super) fn diagnose(
    index: &SearchIndex,
    paste: &Paste,
    limit: usize,
) -> Result<Diagnosis, SearchError> {
    let kb = index.kb();
    let reading = Reading::new(paste);
    let query = text_query(paste, &reading.lines, &reading.parsed);
    let analysed = index.analyse(&query.text);
    let signals = Signals::gather(index, &reading, query, &analysed)?;
    let triage = triage(paste, &reading.text, &reading.starts, &reading.parsed);
    let by_exit = branch::named_by_exits(kb, &triage);
    let by_release = versions::named_by_versions(kb, &reading.parsed.versions);
    let candidates = Candidates::new(
        signals.signatures.iter().map(|m| {
            let (f, on_root) = reading.fired(m);
            (m.entry, f, on_root)
        }),
        &signals.text,
        &signals.phrases,
        &by_exit,
        &by_release,
    );
    let terms = index.query_terms(signals.analysed)?;
    let mut ranked = rank(index, &candidates, &terms, limit.max(ANSWER_CANDIDATES) + 1);
    let question = reading.parsed.exceptions.is_empty()
        && triage.exits.is_empty()
        && !paste.lines.iter().any(|l| looks_like_error(&l.text));
    let supported = supported(index, &candidates, &reading, question, &mut ranked)?;

    // Each paste line's number, made only if some match has branches.
    let numbers: OnceCell<Vec<usize>> = OnceCell::new();
    let mut matches = Vec::new();
    // Analysed only if some match has no signature to show.
    let evidence_lines = OnceCell::new();
    let evidence_lines = || {
        evidence_lines.get_or_init(|| {
            EvidenceLines::new(index, &reading.lines, &signals.query, signals.analysed)
        })
    };
    if supported {
        let runner_up = ranked
            .get(1)
            .map(|s| (s.1, candidates.get(s.0).claim.strong > 0));
        for (rank, &(entry, score, coverage)) in ranked.iter().take(limit).enumerate() {
            let c = candidates.get(entry);
            let lead = (rank == 0).then_some(policy::Lead {
                score,
                coverage,
                runner_up,
            });
            let confidence = policy::confidence(&c.claim, lead);
            let shared = || index.shared_terms(&terms, entry);
            let entry = &kb.entries()[entry];
            let evidence = evidence(paste, evidence_lines, candidates.fired(c), entry, shared);
            let branch = (!entry.branches.is_empty())
                .then(|| {
                    let numbers =
                        numbers.get_or_init(|| paste.lines.iter().map(|l| l.number).collect());
                    branch::choose(entry, &reading.text, &reading.starts, numbers, &triage)
                })
                .flatten();
            matches.push(Match {
                slug: entry.slug.clone(),
                score,
                confidence,
                coverage,
                evidence,
                branch,
                versions: versions::checks(entry, &reading.parsed.versions),
            });
        }
    }
    let verdict = policy::verdict(matches.first().map(|m| m.confidence));
    let closest = if matches.is_empty() {
        // Shown to the reader, so with snippets this time.
        let found = index.search(&SearchQuery::new(&signals.query.text, None, limit))?;
        std::sync::Arc::unwrap_or_clone(found).hits
    } else {
        Vec::new()
    };
    Ok(Diagnosis {
        verdict,
        matches,
        closest,
        triage,
        parsed: reading.parsed,
        question,
        lines: paste.total_lines,
        distinct_lines: paste.lines.len(),
        truncated: paste.truncated,
    })
}

/// Lines (indices into `Paste::lines`) of the root-cause exception and its message.
fn root_line_range(parsed: &Parsed) -> std::ops::Range<usize> {
    match parsed.root_exception() {
        Some(e) => e.line_index..e.line_index + 4,
        None => 0..0,
    }
}

/// The text searched: the root-cause exception first, then the other exceptions, then
/// the rest of a short paste (a question, prose around a log) or the error-looking
/// lines of a long one, then a few frame names. Run-specific numbers and paths are
/// dropped; the search keeps only the first `MAX_QUERY_TERMS` words, so the order is
/// the priority.
fn text_query(paste: &Paste, lines: &LineWords, parsed: &Parsed) -> TextQuery {
    // Each part with the paste line it is (if it is one).
    let mut parts: Vec<(Option<usize>, String)> = Vec::new();
    let mut used = vec![false; paste.lines.len()];
    let mut add_exception = |e: &super::parse::Exception, parts: &mut Vec<_>| {
        parts.push((None, query_words(&format!("{} {}", e.kind, e.message))));
        if let Some(u) = used.get_mut(e.line_index) {
            *u = true;
        }
    };
    if let Some(root) = parsed.root_exception() {
        add_exception(root, &mut parts);
    }
    for (i, e) in parsed.exceptions.iter().enumerate() {
        if Some(i) != parsed.root && !e.wrapper && parts.len() < 4 {
            add_exception(e, &mut parts);
        }
    }
    // A short paste is all message; of a long log, only a few error-looking lines
    // beyond the exceptions (the query must stay about the failure, and cheap).
    let short = paste.lines.len() <= SHORT_PASTE_LINES;
    let budget = if short {
        SHORT_PASTE_QUERY_LINES
    } else {
        LONG_PASTE_LINES
    };
    for (i, line) in paste.lines.iter().enumerate() {
        let t = line.text.trim();
        if used[i] || t.starts_with("File \"") || t.contains("NCCL INFO") {
            continue;
        }
        if short || lines.errorish(i) {
            parts.push((Some(i), lines.query_words(i).to_string()));
        }
        if parts.len() > budget {
            break;
        }
    }
    // Frames are the weakest evidence: the innermost few, after everything else. A
    // traceback cut before its exception line has nothing better.
    const PLUMBING: [&str; 7] = [
        "<module>",
        "main",
        "forward",
        "_call_impl",
        "__call__",
        "wrapper",
        "_wrapped_call_impl",
    ];
    let frames = match parsed.root_exception() {
        Some(root) => &root.frames,
        None => &parsed.dangling_frames,
    };
    for frame in frames.iter().rev().take(4) {
        if !PLUMBING.contains(&frame.function.as_str()) {
            let module = frame.file.trim_end_matches(".py");
            parts.push((
                None,
                query_words(&format!("{module} {}", frame.function).replace('_', " ")),
            ));
        }
    }
    let mut query = TextQuery::default();
    for (line, part) in parts {
        if !query.text.is_empty() {
            query.text.push('\n');
        }
        let start = query.text.len();
        query.text.push_str(&part);
        if let Some(line) = line {
            query.lines.push((line, start..query.text.len()));
        }
    }
    query
}

/// One empty cell per line of `paste`.
fn unknown<T>(paste: &Paste) -> Vec<OnceCell<T>> {
    paste.lines.iter().map(|_| OnceCell::new()).collect()
}

/// The text searched, and where in it each paste line it holds is.
#[derive(Default)]
struct TextQuery {
    text: String,
    /// (index into `Paste::lines`, byte range in `text`).
    lines: Vec<(usize, std::ops::Range<usize>)>,
}

/// What the query and the evidence both read of each paste line, worked out when first
/// asked and once: whether it looks like an error, and its words without run-specific
/// details.
struct LineWords<'a> {
    paste: &'a Paste,
    errorish: Vec<OnceCell<bool>>,
    query_words: Vec<OnceCell<String>>,
}

impl<'a> LineWords<'a> {
    fn new(paste: &'a Paste) -> LineWords<'a> {
        LineWords {
            paste,
            errorish: unknown(paste),
            query_words: unknown(paste),
        }
    }

    fn errorish(&self, line: usize) -> bool {
        *self.errorish[line].get_or_init(|| looks_like_error(&self.paste.lines[line].text))
    }

    fn query_words(&self, line: usize) -> &str {
        self.query_words[line].get_or_init(|| query_words(&self.paste.lines[line].text))
    }
}

/// The lines text evidence is looked for in (all of a short paste, the error-looking
/// lines of a long one, at most `EVIDENCE_LINES`), each analysed once, with a hash of
/// each word: every match without a signature looks for its terms on every line, and
/// comparing hashes first spares comparing strings that differ.
struct EvidenceLines<'a> {
    /// (index into `Paste::lines`, the range of its words in `words` and `hashes`).
    lines: Vec<(usize, std::ops::Range<usize>)>,
    /// Borrowed from the query's analysis for the lines it holds, analysed here for
    /// the others.
    words: Vec<Cow<'a, str>>,
    hashes: Vec<u64>,
}

impl<'a> EvidenceLines<'a> {
    /// A line the query holds takes its words from the query's analysis, which has
    /// them already; the others are analysed.
    fn new(
        index: &SearchIndex,
        lines: &LineWords,
        query: &TextQuery,
        analysed: &'a Analysed,
    ) -> EvidenceLines<'a> {
        let mut in_query = vec![None; lines.paste.lines.len()];
        for (line, range) in &query.lines {
            in_query[*line] = Some(range.clone());
        }
        let short = lines.paste.lines.len() <= SHORT_PASTE_LINES;
        let mut out = EvidenceLines {
            lines: Vec::new(),
            words: Vec::new(),
            hashes: Vec::new(),
        };
        for i in (0..lines.paste.lines.len())
            .filter(|&i| short || lines.errorish(i))
            .take(EVIDENCE_LINES)
        {
            let start = out.words.len();
            match in_query[i]
                .clone()
                .and_then(|range| analysed.words_in(range))
            {
                Some(words) => out.words.extend(words.map(Cow::Borrowed)),
                None => out.words.extend(
                    index
                        .words(lines.query_words(i))
                        .into_iter()
                        .map(Cow::Owned),
                ),
            }
            debug_assert_eq!(
                out.words[start..],
                index.words(lines.query_words(i)),
                "the words of line {i}",
            );
            out.hashes
                .extend(out.words[start..].iter().map(|w| word_hash(w)));
            out.lines.push((i, start..out.words.len()));
        }
        out
    }

    /// Each line with those of `terms` (each with its `word_hash`) it holds, in the
    /// order of `terms`.
    ///
    /// Each line's words are read once per 64 terms: a word is compared with the terms
    /// only if the bit its hash picks is set for one of them (the top six bits of a
    /// hash pick one of 64), so most words cost a shift and a test. Comparing every
    /// word with every term was a twentieth of a new diagnosis.
    fn sharing<'t>(
        &self,
        terms: &'t [(&'t str, u64)],
    ) -> impl Iterator<Item = (usize, Vec<&'t str>)> + use<'_, 't> {
        let bit = |hash: u64| 1u64 << (hash >> 58);
        let filters: Vec<u64> = terms
            .chunks(64)
            .map(|chunk| {
                chunk
                    .iter()
                    .fold(0, |filter, (_, hash)| filter | bit(*hash))
            })
            .collect();
        self.lines.iter().map(move |(i, range)| {
            let hashes = &self.hashes[range.clone()];
            let words = &self.words[range.clone()];
            let mut shared = Vec::new();
            for (chunk, &filter) in terms.chunks(64).zip(&filters) {
                // Bit k: the chunk's term k is on the line.
                let mut held = 0u64;
                for (&hash, word) in hashes.iter().zip(words) {
                    if filter & bit(hash) == 0 {
                        continue;
                    }
                    for (k, (term, term_hash)) in chunk.iter().enumerate() {
                        if *term_hash == hash && word.as_ref() == *term {
                            held |= 1 << k;
                        }
                    }
                }
                shared.extend(
                    chunk
                        .iter()
                        .enumerate()
                        .filter(|&(k, _)| held >> k & 1 == 1)
                        .map(|(_, (term, _))| *term),
                );
            }
            (*i, shared)
        })
    }
}

fn word_hash(word: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(word)
}

fn evidence<'a, 'f>(
    paste: &Paste,
    evidence_lines: impl FnOnce() -> &'a EvidenceLines<'a>,
    fired: impl Iterator<Item = &'f Fired>,
    entry: &crate::kb::Entry,
    matched_terms: impl FnOnce() -> Vec<String>,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    let mut signature_lines = Vec::new();
    for fired in fired {
        if out.len() >= MAX_EVIDENCE {
            break;
        }
        let kind = match fired.weak {
            false => EvidenceKind::Signature,
            true => EvidenceKind::WeakSignature,
        };
        // A line shows once, with the first signature that fired on it.
        let Some(l) = paste.lines.get(fired.line) else {
            continue;
        };
        if signature_lines.contains(&fired.line) {
            continue;
        }
        signature_lines.push(fired.line);
        let (text, span) = clip_around(&l.text, fired.span);
        out.push(Evidence {
            line: l.number,
            text,
            kind,
            signature: Some(entry.signatures[fired.signature].as_str().to_string()),
            terms: Vec::new(),
            span: Some(span),
        });
    }
    // No signature: show the lines that share the most of the entry's rare words.
    let matched_terms = if out.is_empty() {
        matched_terms()
    } else {
        Vec::new()
    };
    if !matched_terms.is_empty() {
        let wanted: Vec<(&str, u64)> = matched_terms
            .iter()
            .take(12)
            .map(|t| (t.as_str(), word_hash(t)))
            .collect();
        let mut scored: Vec<(usize, usize, Vec<String>)> = Vec::new();
        for (i, shared) in evidence_lines().sharing(&wanted) {
            if !shared.is_empty() && !signature_lines.contains(&i) {
                let shared: Vec<String> = shared.into_iter().map(str::to_string).collect();
                scored.push((shared.len(), i, shared));
            }
        }
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, i, terms) in scored.into_iter().take(TEXT_EVIDENCE_LINES) {
            let l = &paste.lines[i];
            out.push(Evidence {
                line: l.number,
                text: clip(&l.text),
                kind: EvidenceKind::Text,
                signature: None,
                terms,
                span: None,
            });
        }
    }
    out.sort_by_key(|e| e.line);
    out
}

/// The line, shortened around the matched span if it is long; the span moved to match.
fn clip_around(text: &str, span: (usize, usize)) -> (String, (usize, usize)) {
    if text.chars().count() <= EVIDENCE_CHARS {
        return (text.to_string(), span);
    }
    // Keep some context before the match, then as much as fits.
    let mut start = span.0.saturating_sub(80);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + EVIDENCE_CHARS * 3).min(text.len()).max(span.1);
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let piece: String = text[start..end]
        .chars()
        .take(EVIDENCE_CHARS.max(span.1 - start))
        .collect();
    let prefix = if start > 0 { "…" } else { "" };
    let shift = prefix.len();
    let span = (
        span.0 - start + shift,
        (span.1 - start + shift).min(piece.len() + shift),
    );
    (format!("{prefix}{piece}"), span)
}

fn clip(text: &str) -> String {
    super::clip(text.trim(), EVIDENCE_CHARS)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn candidates_join_signatures_text_hits_and_phrases_by_entry() {
        let fired = |signature, weak, line| Fired {
            signature,
            weak,
            line,
            span: (0, 1),
        };
        // Entry 2: a weak signature, then a strong one on the root cause; entry 7: weak
        // only; entry 4 is a text hit and entry 9 a closest phrase, with no signature.
        let matches = [
            (2, fired(0, true, 5), false),
            (2, fired(1, false, 9), true),
            (7, fired(0, true, 5), false),
        ];
        let candidates = Candidates::new(
            matches,
            &[(4, 1.0), (2, 0.5)],
            &[(9, 1.0), (4, 0.25)],
            &[],
            &[],
        );
        let entries: Vec<usize> = candidates.list.iter().map(|c| c.entry).collect();
        assert_eq!(entries, [2, 4, 7, 9]);
        let two = candidates.get(2);
        assert_eq!(
            (two.claim.strong, two.claim.weak, two.claim.on_root),
            (1, 1, true)
        );
        assert_eq!(two.claim.text_rank, 0.5);
        let lines: Vec<usize> = candidates.fired(two).map(|f| f.line).collect();
        assert_eq!(lines, [9, 5], "strong signatures first");
        let four = candidates.get(4);
        assert_eq!((four.claim.strong, four.claim.weak), (0, 0));
        assert_eq!((four.claim.text_rank, four.claim.phrase_rank), (1.0, 0.25));
        assert_eq!(candidates.fired(four).count(), 0);
        let seven = candidates.get(7);
        assert_eq!(
            (seven.claim.weak, seven.claim.on_root, seven.claim.text_rank),
            (1, false, 0.0)
        );
        assert_eq!(candidates.get(9).claim.phrase_rank, 1.0);
    }

    #[test]
    fn a_signal_exit_under_a_launcher_box_leads_with_the_entry_about_the_signal() {
        use std::sync::Arc;

        use crate::kb::Kb;

        // The box fires the wrapper entry's weak signatures as much as the bus-error
        // entry's and reads like the wrapper entry; only what the signal means tells
        // them apart.
        let kb = Kb::load(std::path::Path::new("kb")).expect("the kb loads");
        let index = SearchIndex::build(Arc::new(kb)).expect("an index");
        let paste = "\
E1105 09:12:44.902000 5120 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -7) local_rank: 1 (pid: 5189) of binary: /usr/bin/python3
Traceback (most recent call last):
  File \"/usr/local/bin/torchrun\", line 8, in <module>
    sys.exit(main())
  File \"/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py\", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : -7 (pid: 5189)
  error_file: <N/A>
  traceback : Signal 7 (SIGBUS) received by PID 5189
============================================================
";
        let d = diagnose(&index, &Paste::from_text(paste), 5).expect("a diagnosis");
        let slugs: Vec<&str> = d.matches.iter().map(|m| m.slug.as_str()).collect();
        assert_eq!(
            slugs.first(),
            Some(&"dataloader-bus-error-shm"),
            "{slugs:?}"
        );
        assert!(slugs.contains(&"torchrun-childfailederror"), "{slugs:?}");
    }

    #[test]
    fn a_signature_that_many_entries_share_counts_for_none_of_them() {
        use std::sync::Arc;

        use crate::kb::{Kb, Signature, SignatureKind};

        // The real entries, and 200 more made from them whose one signature is a
        // launcher's wrapper (weak) or a message of the paste (strong), each text
        // quoted by more than `MOST_ENTRIES_PER_SIGNATURE` entries.
        let real = Kb::load(std::path::Path::new("kb")).expect("the kb loads");
        let mut entries = real.entries().to_vec();
        for i in 0..200 {
            let mut entry = real.entries()[i % real.len()].clone();
            entry.slug = format!("copy-{i}");
            let (text, weak) = if i % 2 == 0 {
                (
                    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                    true,
                )
            } else {
                ("Watchdog caught collective operation timeout", false)
            };
            entry.signatures = vec![Signature {
                kind: SignatureKind::Literal(text.into()),
                weak,
            }];
            entries.push(entry);
        }
        let index = SearchIndex::build(Arc::new(Kb::from_entries(entries))).expect("an index");
        let watchdog =
            std::fs::read_to_string("tests/browser/nccl-watchdog-timeout.log").expect("the paste");
        let d = diagnose(&index, &Paste::from_text(&watchdog), 5).expect("a diagnosis");
        assert_eq!(d.verdict, Verdict::Matched);
        assert_eq!(
            d.matches[0].slug, "nccl-watchdog-timeout",
            "found by its own signatures"
        );
        for m in &d.matches {
            assert!(
                !m.slug.starts_with("copy-") || m.evidence.iter().all(|e| e.signature.is_none()),
                "{} claimed by a shared signature",
                m.slug
            );
        }
    }

    /// Lines of words (from a small vocabulary, so lines share words), as
    /// `EvidenceLines::new` lays them out.
    fn evidence_lines(lines: &[Vec<String>]) -> EvidenceLines<'static> {
        let mut out = EvidenceLines {
            lines: Vec::new(),
            words: Vec::new(),
            hashes: Vec::new(),
        };
        for (i, line) in lines.iter().enumerate() {
            let start = out.words.len();
            out.words.extend(line.iter().cloned().map(Cow::Owned));
            out.hashes.extend(line.iter().map(|w| word_hash(w)));
            out.lines.push((i * 2, start..out.words.len()));
        }
        out
    }

    /// What `sharing` must give: every term compared with every word of a line.
    fn every_pair<'t>(
        evidence: &EvidenceLines,
        terms: &'t [(&'t str, u64)],
    ) -> Vec<(usize, Vec<&'t str>)> {
        evidence
            .lines
            .iter()
            .map(|(i, range)| {
                let words = &evidence.words[range.clone()];
                let shared = terms
                    .iter()
                    .filter(|(term, _)| words.iter().any(|w| w.as_ref() == *term))
                    .map(|(term, _)| *term)
                    .collect();
                (*i, shared)
            })
            .collect()
    }

    #[test]
    fn lines_share_terms_in_the_order_of_the_terms() {
        let evidence = evidence_lines(&[
            vec!["nccl".into(), "timeout".into(), "rank".into()],
            vec!["cuda".into(), "error".into()],
            vec!["rank".into(), "nccl".into(), "rank".into()],
        ]);
        let terms: Vec<(&str, u64)> = ["rank", "nccl", "oom"]
            .iter()
            .map(|t| (*t, word_hash(t)))
            .collect();
        let shared: Vec<_> = evidence.sharing(&terms).collect();
        assert_eq!(
            shared,
            vec![
                (0, vec!["rank", "nccl"]),
                (2, vec![]),
                (4, vec!["rank", "nccl"]),
            ]
        );
    }

    proptest! {
        /// The same lines and terms as comparing every pair, for any number of terms
        /// (past 64 too), with repeated terms and terms no line holds.
        #[test]
        fn sharing_is_every_pair_compared(
            lines in prop::collection::vec(prop::collection::vec(0u32..150, 0..30), 0..12),
            terms in prop::collection::vec(0u32..200, 0..140),
        ) {
            let lines: Vec<Vec<String>> = lines
                .iter()
                .map(|l| l.iter().map(|w| format!("w{w}")).collect())
                .collect();
            let evidence = evidence_lines(&lines);
            let terms: Vec<String> = terms.iter().map(|t| format!("w{t}")).collect();
            let terms: Vec<(&str, u64)> =
                terms.iter().map(|t| (t.as_str(), word_hash(t))).collect();
            let fast: Vec<_> = evidence.sharing(&terms).collect();
            prop_assert_eq!(fast, every_pair(&evidence, &terms));
        }
    }
}
