//! Ranking: signatures fired (strong ones most, on the root-cause line more), then
//! full-text similarity of the paste's error messages, then the share of the paste's
//! vocabulary an entry explains. Decides `no_match` from that evidence.

use std::borrow::Cow;
use std::cell::OnceCell;

use serde::Serialize;

use super::normalize::query_words;
use super::parse::{Parsed, parse};
use super::paste::{Paste, looks_like_error};
use crate::kb::{FiredSignatures, SharedHit, SignatureMatch};
use crate::search::{Analysed, Hit, SearchError, SearchIndex, SearchQuery};

/// Candidates considered for the answer, best-scored first.
const ANSWER_CANDIDATES: usize = 3;
/// Candidates taken from full-text search.
const TEXT_CANDIDATES: usize = 10;
/// A paste this short is all message (a question, one traceback): all of it is queried.
const SHORT_PASTE_LINES: usize = 40;
/// Error-looking lines of a long paste added to the full-text query.
const LONG_PASTE_LINES: usize = 16;
/// Paste lines searched for text evidence.
const EVIDENCE_LINES: usize = 200;
/// Most evidence lines shown per match.
const MAX_EVIDENCE: usize = 6;
/// Longest evidence line shown, in characters.
const EVIDENCE_CHARS: usize = 400;

// Weights. A strong signature outweighs any amount of text similarity.
const STRONG: f32 = 10.0;
const WEAK: f32 = 3.0;
const ON_ROOT_CAUSE: f32 = 5.0;
const TEXT_RANK: f32 = 6.0;
const COVERAGE: f32 = 4.0;
const PHRASE_RANK: f32 = 6.0;
/// Without a strong signature, an entry offered for a paste with an exception must
/// explain this share of the root-cause exception's words (its type included: an
/// exception type no entry mentions weighs as much as the rarest word).
const ROOT_MESSAGE_COVERAGE: f32 = 0.6;
/// The same with a weak signature on its side.
const ROOT_MESSAGE_COVERAGE_WEAK: f32 = 0.35;
/// Without any signature or exception (a question in words), an entry must be among
/// the best by full text or by its closest phrase, and share this much vocabulary.
const TEXT_ONLY_COVERAGE: f32 = 0.1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Matched,
    NoMatch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A strong signature of the entry fired on this line.
    Signature,
    /// A weak signature (a wrapper or generic code) fired on this line.
    WeakSignature,
    /// Words of this line occur in the entry.
    Text,
}

/// One paste line that led to a match.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Match {
    pub slug: String,
    pub score: f32,
    pub confidence: Confidence,
    /// Share of the paste's vocabulary the entry explains, 0..=1.
    pub coverage: f32,
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    pub verdict: Verdict,
    /// Ranked answers; empty when the verdict is `no_match`.
    pub matches: Vec<Match>,
    /// With `no_match`: the nearest entries by full text, for the reader to judge.
    pub closest: Vec<Hit>,
    pub parsed: Parsed,
    pub lines: usize,
    pub distinct_lines: usize,
    pub truncated: bool,
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

#[derive(Default)]
struct Candidate {
    /// Its signatures that fired: a range of `Candidates::fired`.
    fired: std::ops::Range<usize>,
    strong: usize,
    weak: usize,
    on_root: bool,
    text_rank: f32,
    /// Best symptom/title phrase score relative to the best entry's, 0..=1.
    phrase_rank: f32,
}

impl Candidate {
    /// Counts one more of its signatures, fired on a root-cause line or not.
    fn count(&mut self, weak: bool, on_root: bool) {
        if weak {
            self.weak += 1;
        } else {
            self.strong += 1;
            self.on_root |= on_root;
        }
    }

    /// Its score but the vocabulary share (at most `COVERAGE`).
    fn partial_score(&self) -> f32 {
        STRONG * self.strong.min(3) as f32
            + WEAK * self.weak.min(2) as f32
            + if self.on_root { ON_ROOT_CAUSE } else { 0.0 }
            + TEXT_RANK * self.text_rank
            + PHRASE_RANK * self.phrase_rank
    }
}

/// Entries with some claim on the paste, by entry (its position in the knowledge
/// base), and the signatures that fired. Each is a few numbers, not a map entry with
/// lists of its own.
struct Candidates {
    by_entry: Vec<(usize, Candidate)>,
    /// Each candidate's together, by signature.
    fired: Vec<Fired>,
}

impl Candidates {
    /// The candidates of the signatures fired (`matches`, by entry, then signature),
    /// of the full-text hits and of the closest phrases (entry, rank relative to the
    /// best, each).
    fn new(
        matches: impl IntoIterator<Item = (usize, Fired, bool)>,
        text: &[(usize, f32)],
        phrases: &[(usize, f32)],
    ) -> Candidates {
        let matches = matches.into_iter();
        let mut by_entry: Vec<(usize, Candidate)> =
            Vec::with_capacity(matches.size_hint().0 + text.len() + phrases.len());
        let mut fired = Vec::with_capacity(matches.size_hint().0);
        for (entry, f, on_root) in matches {
            if by_entry.last().is_none_or(|(e, _)| *e != entry) {
                debug_assert!(by_entry.last().is_none_or(|(e, _)| *e < entry));
                let at = fired.len();
                by_entry.push((
                    entry,
                    Candidate {
                        fired: at..at,
                        ..Candidate::default()
                    },
                ));
            }
            let c = &mut by_entry.last_mut().expect("pushed above").1;
            c.count(f.weak, on_root);
            fired.push(f);
            c.fired.end = fired.len();
        }
        let signed = by_entry.len();
        for (list, is_text) in [(text, true), (phrases, false)] {
            for &(entry, rank) in list {
                let at = match by_entry[..signed].binary_search_by_key(&entry, |c| c.0) {
                    Ok(at) => at,
                    Err(_) => match by_entry[signed..].iter().position(|c| c.0 == entry) {
                        Some(at) => signed + at,
                        None => {
                            by_entry.push((entry, Candidate::default()));
                            by_entry.len() - 1
                        }
                    },
                };
                let c = &mut by_entry[at].1;
                if is_text {
                    c.text_rank = rank;
                } else {
                    c.phrase_rank = rank;
                }
            }
        }
        by_entry.sort_by_key(|c| c.0);
        Candidates { by_entry, fired }
    }

    /// Adds entry `entry`, which only signatures `matches` (by signature) claim.
    fn admit(&mut self, entry: usize, matches: impl IntoIterator<Item = (Fired, bool)>) {
        let Err(at) = self.by_entry.binary_search_by_key(&entry, |c| c.0) else {
            return;
        };
        let start = self.fired.len();
        let mut c = Candidate::default();
        for (f, on_root) in matches {
            c.count(f.weak, on_root);
            self.fired.push(f);
        }
        c.fired = start..self.fired.len();
        self.by_entry.insert(at, (entry, c));
    }

    fn get(&self, entry: usize) -> &Candidate {
        let at = self
            .by_entry
            .binary_search_by_key(&entry, |c| c.0)
            .expect("a candidate");
        &self.by_entry[at].1
    }

    /// The signatures of `c` that fired, strong ones first.
    fn fired(&self, c: &Candidate) -> impl Iterator<Item = &Fired> {
        let fired = &self.fired[c.fired.clone()];
        let strong = fired.iter().filter(|f| !f.weak);
        strong.chain(fired.iter().filter(|f| f.weak))
    }
}

pub(super) fn diagnose(
    index: &SearchIndex,
    paste: &Paste,
    limit: usize,
) -> Result<Diagnosis, SearchError> {
    diagnose_sharing(index, paste, limit, true)
}

/// `diagnose`, with a text that many literal signatures hold taken as one shared hit
/// (see `SignatureSet::fire`) or as a match each: the same diagnosis either way.
fn diagnose_sharing(
    index: &SearchIndex,
    paste: &Paste,
    limit: usize,
    share: bool,
) -> Result<Diagnosis, SearchError> {
    let kb = index.kb();
    let (text, starts) = paste.joined();
    let parsed = parse(paste, &text, &starts);
    let line_of = |offset: usize| starts.partition_point(|&s| s <= offset).saturating_sub(1);
    let root_lines = root_line_range(&parsed);

    let signatures = kb.signatures().fire(&text, share);
    // A signature that fired, where (and whether on a root-cause line).
    let fired = |m: &SignatureMatch| {
        let line = line_of(m.start);
        let line_start = starts[line];
        let line_end = line_start + paste.lines[line].text.len();
        let fired = Fired {
            signature: m.signature,
            weak: m.weak,
            line,
            span: (m.start - line_start, m.end.min(line_end) - line_start),
        };
        (fired, root_lines.contains(&line))
    };

    let lines = LineWords::new(paste);
    let query = text_query(paste, &lines, &parsed);
    let analysed = index.analyse(&query.text);
    let relative = |ranked: &[(usize, f32)]| -> Vec<(usize, f32)> {
        let top = ranked.first().map_or(0.0, |h| h.1).max(f32::EPSILON);
        let best = ranked.iter().take(TEXT_CANDIDATES);
        best.map(|&(entry, score)| (entry, score / top)).collect()
    };
    let hits = relative(&index.rank(&analysed, TEXT_CANDIDATES)?);
    let phrases = relative(&index.match_phrases(&analysed)?);

    // A wrapper's message that thousands of entries quote (a shared hit) makes each of
    // them a candidate. Those with another claim too (another signature, a text hit, a
    // phrase) are candidates with all their signatures now; the rest, scored by shared
    // hits alone, only once the scores below reach them: few ever do.
    let FiredSignatures {
        single: mut matches,
        shared,
    } = signatures;
    let mut claimed: Vec<usize> = Vec::new();
    if !shared.is_empty() {
        claimed.extend(matches.iter().map(|m| m.entry));
        claimed.extend(hits.iter().chain(&phrases).map(|h| h.0));
        claimed.sort_unstable();
        claimed.dedup();
        for hit in &shared {
            matches.extend(claimed.iter().flat_map(|&entry| hit.matches_of(entry)));
        }
        matches.sort_by_key(|m| (m.entry, m.signature));
    }
    let mut candidates = Candidates::new(
        matches.iter().map(|m| {
            let (f, on_root) = fired(m);
            (m.entry, f, on_root)
        }),
        &hits,
        &phrases,
    );

    let query_terms = index.query_terms(&analysed)?;
    // Every score but the vocabulary share (at most `COVERAGE`), best first: only the
    // best `wanted` are needed, so the share is computed for candidates that can
    // still reach them. A weak wrapper signature shared by thousands of entries makes
    // thousands of candidates in a large knowledge base.
    let wanted = limit.max(ANSWER_CANDIDATES) + 1;
    let mut partial: Vec<(usize, f32)> = (candidates.by_entry.iter())
        .map(|(entry, c)| (*entry, c.partial_score()))
        .collect();
    let on_root: Vec<bool> = (shared.iter())
        .map(|hit| root_lines.contains(&line_of(hit.start)))
        .collect();
    // (entry, score, vocabulary share), best first.
    let mut scored: Vec<(usize, f32, f32)> = Vec::with_capacity(wanted + 1);
    // Adds `partial` to `scored` best first until no later one can reach the best
    // `wanted` (true then).
    let add_best_first = |partial: &mut Vec<(usize, f32)>, scored: &mut Vec<(usize, f32, f32)>| {
        // Only the head in order as a rule (the rest once the loop gets there).
        let best_first =
            |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let head = (4 * wanted).min(partial.len());
        if head < partial.len() {
            partial.select_nth_unstable_by(head, best_first);
        }
        partial[..head].sort_by(best_first);
        for i in 0..partial.len() {
            if i == head {
                partial[head..].sort_by(best_first);
            }
            let (entry, without_coverage) = partial[i];
            if scored.len() >= wanted && without_coverage + COVERAGE < scored[wanted - 1].1 {
                return true;
            }
            let coverage = index.coverage(&query_terms, &kb.entries()[entry].slug);
            let score = without_coverage + COVERAGE * coverage;
            let at = scored.partition_point(|s| s.1 > score || (s.1 == score && s.0 < entry));
            scored.insert(at, (entry, score, coverage));
            scored.truncate(wanted);
        }
        false
    };
    // The entries only shared hits name score at most `bound`, so every candidate
    // above it comes before them all. Often those settle the head, and the thousands
    // of shared-only entries need not be scored one by one; otherwise they are, and
    // join the candidates not above the bound, in the same order as all together.
    match shared_only_bound(&shared, &on_root) {
        None => {
            add_best_first(&mut partial, &mut scored);
        }
        Some(bound) => {
            let (mut above, mut rest): (Vec<_>, Vec<_>) =
                partial.into_iter().partition(|&(_, score)| score > bound);
            let settled = add_best_first(&mut above, &mut scored)
                || (scored.len() >= wanted && bound + COVERAGE < scored[wanted - 1].1);
            if !settled {
                rest.extend(shared_only(&shared, &on_root, &claimed));
                add_best_first(&mut rest, &mut scored);
            }
        }
    }

    // The candidates scored by shared hits alone that made the head (every other entry
    // there is claimed, and a candidate already).
    for &(entry, ..) in &scored {
        if shared.is_empty() || claimed.binary_search(&entry).is_ok() {
            continue;
        }
        let mut matches: Vec<SignatureMatch> = shared
            .iter()
            .flat_map(|hit| hit.matches_of(entry))
            .collect();
        if !matches.is_empty() {
            matches.sort_by_key(|m| m.signature);
            candidates.admit(entry, matches.iter().map(fired));
        }
    }

    let root_text = parsed
        .root_exception()
        .filter(|e| !e.wrapper)
        .map(|e| index.analyse(&query_words(&format!("{} {}", e.kind, e.message))));
    let root_terms = root_text
        .as_ref()
        .map(|t| index.query_terms(t))
        .transpose()?;
    // The answer is the best-scored candidate that the evidence supports; among the
    // top few, so a candidate with a weaker claim cannot hide a well-supported one.
    let mut answer = None;
    for (position, (entry, _, coverage)) in scored.iter().enumerate().take(ANSWER_CANDIDATES) {
        let c = candidates.get(*entry);
        let answerable = if c.strong > 0 {
            true
        } else if let Some(root_terms) = &root_terms {
            // An error the entry does not explain is not its problem, however similar
            // the rest of the log looks.
            let explained = index.explains(root_terms, &kb.entries()[*entry].slug)?;
            let needed = if c.weak == 0 {
                ROOT_MESSAGE_COVERAGE
            } else {
                ROOT_MESSAGE_COVERAGE_WEAK
            };
            explained >= needed
        } else {
            c.weak > 0
                || ((c.text_rank >= 0.8 || c.phrase_rank >= 0.8) && *coverage >= TEXT_ONLY_COVERAGE)
        };
        if answerable {
            answer = Some(position);
            break;
        }
    }
    let verdict = match answer {
        Some(position) => {
            let chosen = scored.remove(position);
            scored.insert(0, chosen);
            Verdict::Matched
        }
        None => Verdict::NoMatch,
    };

    let mut matches = Vec::new();
    // Analysed only if some match has no signature to show.
    let evidence_lines = OnceCell::new();
    let evidence_lines =
        || evidence_lines.get_or_init(|| EvidenceLines::new(index, &lines, &query, &analysed));
    if verdict == Verdict::Matched {
        let second = scored.get(1).map(|s| (s.1, candidates.get(s.0).strong > 0));
        for (rank, (entry, score, coverage)) in scored.iter().take(limit).enumerate() {
            let c = candidates.get(*entry);
            let confidence = if rank == 0 {
                top_confidence(c, *score, *coverage, second)
            } else if c.strong > 0 {
                Confidence::Medium
            } else {
                Confidence::Low
            };
            let entry = &kb.entries()[*entry];
            let shared = || index.shared_terms(&query_terms, &entry.slug);
            let evidence = evidence(paste, evidence_lines, candidates.fired(c), entry, shared);
            matches.push(Match {
                slug: entry.slug.clone(),
                score: *score,
                confidence,
                coverage: *coverage,
                evidence,
            });
        }
    }
    let closest = if verdict == Verdict::NoMatch {
        // Shown to the reader, so with snippets this time.
        std::sync::Arc::unwrap_or_clone(index.search(&SearchQuery::new(
            &query.text,
            None,
            limit,
        ))?)
    } else {
        Vec::new()
    };
    Ok(Diagnosis {
        verdict,
        matches,
        closest,
        parsed,
        lines: paste.total_lines,
        distinct_lines: paste.lines.len(),
        truncated: paste.truncated,
    })
}

/// The highest partial score (see `Candidate::partial_score`) an entry can have from
/// the shared hits `shared` alone (`None` without any): for each hit, the most
/// signatures one entry has in it and in every other hit whose list shares an entry
/// with it. (An entry in several hits is in lists that pairwise share it, so it
/// counts no more than that for any of its hits.) `on_root[i]`: whether `shared[i]`
/// fired on a root-cause line.
fn shared_only_bound(shared: &[SharedHit], on_root: &[bool]) -> Option<f32> {
    let mut bound: Option<f32> = None;
    for (i, hit) in shared.iter().enumerate() {
        let mut most = Candidate::default();
        for (j, (other, &on_root)) in shared.iter().zip(on_root).enumerate() {
            if j == i || hit.list.shares_an_entry_with(other.list) {
                let strong = other.list.most_strong() as usize;
                most.strong += strong;
                most.weak += other.list.most_weak() as usize;
                most.on_root |= on_root && strong > 0;
            }
        }
        let score = most.partial_score();
        bound = Some(bound.map_or(score, |b| b.max(score)));
    }
    bound
}

/// The partial scores (see `Candidate::partial_score`) of the entries that the shared
/// hits `shared` name and `claimed` (sorted) does not: walked together by entry.
/// `on_root[i]`: whether `shared[i]` fired on a root-cause line.
fn shared_only(shared: &[SharedHit], on_root: &[bool], claimed: &[usize]) -> Vec<(usize, f32)> {
    let mut scores = Vec::with_capacity(shared.iter().map(SharedHit::len).max().unwrap_or(0));
    // Where each hit's list is, and the claimed entries not passed yet.
    let mut at = vec![0; shared.len()];
    let mut claimed = claimed.iter().copied().peekable();
    loop {
        let next = |(hit, &i): (&SharedHit, &usize)| hit.literals.get(i).map(|l| l.entry);
        let Some(entry) = shared.iter().zip(&at).filter_map(next).min() else {
            break;
        };
        let mut c = Candidate::default();
        for ((hit, i), &on_root) in shared.iter().zip(&mut at).zip(on_root) {
            while let Some(l) = hit.literals.get(*i).filter(|l| l.entry == entry) {
                c.count(l.weak, on_root);
                *i += 1;
            }
        }
        let entry = entry as usize;
        while claimed.next_if(|&e| e < entry).is_some() {}
        if claimed.peek() != Some(&entry) {
            scores.push((entry, c.partial_score()));
        }
    }
    scores
}

fn top_confidence(
    c: &Candidate,
    score: f32,
    coverage: f32,
    second: Option<(f32, bool)>,
) -> Confidence {
    let margin = second.map_or(score, |(s, _)| score - s);
    let rival_has_signature = second.is_some_and(|(_, strong)| strong);
    if c.strong > 0 && (!rival_has_signature || margin >= STRONG * 0.8) {
        Confidence::High
    } else if c.strong > 0 || coverage >= 0.6 || (c.weak > 0 && coverage >= 0.4) {
        Confidence::Medium
    } else {
        Confidence::Low
    }
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
    let budget = if short { 60 } else { LONG_PASTE_LINES };
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
        let Some(l) = paste.lines.get(fired.line) else {
            continue;
        };
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
        for (_, i, terms) in scored.into_iter().take(3) {
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
    let text = text.trim();
    if text.chars().count() <= EVIDENCE_CHARS {
        return text.to_string();
    }
    let mut out: String = text.chars().take(EVIDENCE_CHARS).collect();
    out.push('…');
    out
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
        let candidates = Candidates::new(matches, &[(4, 1.0), (2, 0.5)], &[(9, 1.0), (4, 0.25)]);
        let entries: Vec<usize> = candidates.by_entry.iter().map(|c| c.0).collect();
        assert_eq!(entries, [2, 4, 7, 9]);
        let two = candidates.get(2);
        assert_eq!((two.strong, two.weak, two.on_root), (1, 1, true));
        assert_eq!(two.text_rank, 0.5);
        let lines: Vec<usize> = candidates.fired(two).map(|f| f.line).collect();
        assert_eq!(lines, [9, 5], "strong signatures first");
        let four = candidates.get(4);
        assert_eq!((four.strong, four.weak), (0, 0));
        assert_eq!((four.text_rank, four.phrase_rank), (1.0, 0.25));
        assert_eq!(candidates.fired(four).count(), 0);
        let seven = candidates.get(7);
        assert_eq!(
            (seven.weak, seven.on_root, seven.text_rank),
            (1, false, 0.0)
        );
        assert_eq!(candidates.get(9).phrase_rank, 1.0);
    }

    #[test]
    fn signatures_shared_by_many_entries_are_scored_as_if_each_had_fired_alone() {
        use std::sync::Arc;

        use crate::kb::{Kb, Signature, SignatureKind};

        // The real entries, and 400 more made from them that share a launcher's wrapper
        // (weak), a third of them a second one, a fifth a strong message of the paste:
        // each text is held by more than `SHARED_LITERALS` entries.
        let real = Kb::load(std::path::Path::new("kb")).expect("the kb loads");
        let mut entries = real.entries().to_vec();
        for i in 0..400 {
            let mut entry = real.entries()[i % real.len()].clone();
            entry.slug = format!("shared-{i}");
            let literal = |text: &str, weak| Signature {
                kind: SignatureKind::Literal(text.into()),
                weak,
            };
            entry.signatures = vec![literal(
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                true,
            )];
            if i % 3 == 0 {
                entry.signatures.push(literal("ProcessGroupNCCL.cpp", true));
            }
            if i % 5 == 0 {
                let timeout = "Watchdog caught collective operation timeout";
                entry.signatures.push(literal(timeout, false));
            }
            entries.push(entry);
        }
        let index = SearchIndex::build(Arc::new(Kb::from_entries(entries))).expect("an index");
        let watchdog =
            std::fs::read_to_string("tests/browser/nccl-watchdog-timeout.log").expect("the paste");
        let fired = index.kb().signatures().fire(&watchdog, true);
        assert_eq!(fired.shared.len(), 3, "each text a shared hit");

        let mut pastes = vec![watchdog];
        pastes.extend(
            real.entries()
                .iter()
                .flat_map(|e| e.examples.first().cloned()),
        );
        for text in &pastes {
            let paste = Paste::from_text(text);
            for limit in [1, 5, 20] {
                let json = |shared| {
                    let d = diagnose_sharing(&index, &paste, limit, shared).expect("a diagnosis");
                    serde_json::to_value(d).expect("JSON")
                };
                assert_eq!(
                    json(true),
                    json(false),
                    "limit {limit}, paste starting {:?}",
                    clip(text)
                );
            }
        }
    }

    #[test]
    fn no_entry_scores_above_the_bound_of_the_shared_hits_alone() {
        use crate::kb::{SharedList, SharedLiteral};

        let literal = |entry, signature, weak| SharedLiteral {
            entry,
            signature,
            weak,
        };
        // Entry 3 has two weak signatures in the first list and a strong one in the
        // second; entry 8 the most strong ones of the second; entry 70 three strong ones
        // in a third list, which shares no entry with the others.
        let first = SharedList::new(vec![
            literal(1, 0, true),
            literal(3, 0, true),
            literal(3, 1, true),
            literal(5, 0, true),
        ]);
        let second = SharedList::new(vec![
            literal(3, 2, false),
            literal(8, 0, false),
            literal(8, 1, false),
            literal(9, 0, true),
        ]);
        let third = SharedList::new(vec![
            literal(70, 0, false),
            literal(70, 1, false),
            literal(70, 2, false),
        ]);
        assert!(first.shares_an_entry_with(&second) && second.shares_an_entry_with(&first));
        assert!(!third.shares_an_entry_with(&first) && !second.shares_an_entry_with(&third));
        assert_eq!((second.most_strong(), second.most_weak()), (2, 1));
        let hit = |list| SharedHit {
            list,
            literals: list.literals(),
            start: 0,
            end: 1,
        };
        let shared = [hit(&first), hit(&second), hit(&third)];
        for on_root in [[false; 3], [false, true, false], [true, true, true]] {
            let bound = shared_only_bound(&shared, &on_root).expect("a bound");
            let scores = shared_only(&shared, &on_root, &[]);
            assert_eq!(scores.len(), 6, "entries 1, 3, 5, 8, 9 and 70");
            assert!(scores.iter().all(|&(_, score)| score <= bound));
            // The first two lists together: two strong (entry 8) and weak ones two plus
            // one, counted up to two; the third alone, three strong: the bound. (All
            // three added up would be five strong and three weak, counted as three and
            // two: more than any entry has.)
            let together = 2.0 * STRONG + 2.0 * WEAK + if on_root[1] { ON_ROOT_CAUSE } else { 0.0 };
            let alone = 3.0 * STRONG + if on_root[2] { ON_ROOT_CAUSE } else { 0.0 };
            assert_eq!(bound, together.max(alone), "{on_root:?}");
            let best = scores.iter().map(|s| s.1).fold(0.0, f32::max);
            assert_eq!(best, alone, "entry 70 reaches it");
        }
        assert_eq!(
            shared_only_bound(&shared[..2], &[false, true]),
            Some(2.0 * STRONG + 2.0 * WEAK + ON_ROOT_CAUSE)
        );
        assert_eq!(shared_only_bound(&[], &[]), None);
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
