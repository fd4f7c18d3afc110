//! All entries' signatures compiled into one multi-pattern matcher. Literal signatures
//! and the literal prefixes (or suffixes) every regex needs go into one Aho-Corasick
//! automaton; one pass over a text finds the literals that fire and the few regexes
//! worth running, instead of running every regex of every entry. A regex that cannot
//! match a line break then runs only on the lines where its literals were found, so its
//! cost follows those lines, not the length of the paste.

use std::collections::HashMap;
use std::hash::BuildHasher;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};
use regex_syntax::hir::{Class, Hir, HirKind};
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

/// Shortest literal accepted as a regex's prefilter: shorter ones fire everywhere.
const MIN_PREFILTER_LEN: usize = 3;
/// Longest piece of a literal the automaton looks for; a literal signature's hit is
/// then checked against the whole literal. The automaton's size follows the total
/// length of its patterns, and a short piece is as selective as the whole.
const MAX_NEEDLE: usize = 16;
/// Most distinct needles compiled into a DFA (see `SignatureSet::new`).
const MAX_DFA_NEEDLES: usize = 5_000;
/// Past this many literal hits for one regex, it runs over the whole text once instead
/// of line by line.
const MAX_LINE_SEARCHES: usize = 256;

/// Distinct needles checked as written past which a group looks a hit up by length and
/// hash instead of comparing each (see `RunLookup`).
const MANY_NEEDLES: usize = 16;

use super::{Entry, LazyRegex, Matcher, SignatureKind};

/// Which signature fired, and where in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignatureMatch {
    /// Index of the entry in the slice the set was built from.
    pub entry: usize,
    /// Index of the signature within that entry.
    pub signature: usize,
    /// The signature is weak (see `Signature::weak`): the caller need not look it up.
    pub weak: bool,
    /// Byte range of the first occurrence.
    pub start: usize,
    pub end: usize,
}

/// What an Aho-Corasick pattern stands for. The automaton ignores ASCII case; a hit on
/// a pattern whose case matters counts only if the bytes are as written.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    /// A literal signature: (entry, signature, weak). Case matters.
    Literal(usize, usize, bool),
    /// A literal the regex at this index cannot match without.
    Prefilter { regex: usize, exact: bool },
    /// A character that Unicode case folding maps to an ASCII letter (the Kelvin sign,
    /// the long s): a case-insensitive regex may match it where its literals, compared
    /// ignoring ASCII case only, were not found.
    Folding,
}

/// The patterns (indices into `patterns` and `needles`) behind one automaton pattern,
/// ordered so that equal needles are next to each other: a hit is checked against
/// each distinct needle once, however many signatures share it.
#[derive(Debug, Clone, Default)]
struct Group {
    ids: Vec<usize>,
    /// The runs of equal needles in `ids`.
    runs: Vec<Run>,
    /// Every pattern is a literal signature: once all have fired, later hits of the
    /// group add nothing.
    literals_only: bool,
    /// For a group of more than `MANY_NEEDLES` distinct needles that count only as
    /// written (a real error message that many signatures extend, say).
    lookup: Option<RunLookup>,
}

/// How a hit finds its runs in a group of many needles: a lookup per needle length,
/// not a comparison per needle.
#[derive(Debug, Clone)]
struct RunLookup {
    /// The runs checked as written, by needle length, each length's sorted by the hash
    /// of the needle.
    by_length: Vec<(usize, HashedRuns)>,
    /// The runs that also hold patterns a hit fires as found (a case-insensitive
    /// regex's literal, a folding character).
    unchecked: Vec<u32>,
}

/// Runs (indices into `Group::runs`) by the hash of their needle, sorted.
type HashedRuns = Vec<(u64, u32)>;

/// A run of equal needles in a group: `ids[start..end]`, its literal signatures first
/// (`ids[start..literals]`), then the regexes' literals and folding characters.
#[derive(Debug, Clone, Copy)]
struct Run {
    start: u32,
    literals: u32,
    end: u32,
}

/// The literal signature `patterns[id]` (one of a run's first, see `Run`), fired at
/// `start..end`.
fn literal_at(patterns: &[Pattern], id: usize, start: usize, end: usize) -> SignatureMatch {
    let Pattern::Literal(entry, signature, weak) = patterns[id] else {
        unreachable!("a run's literal signatures come first");
    };
    SignatureMatch {
        entry,
        signature,
        weak,
        start,
        end,
    }
}

impl Group {
    /// `ids` sorted by needle, each run of equal needles with its literal signatures first.
    fn new(ids: Vec<usize>, patterns: &[Pattern], needles: &[Vec<u8>]) -> Group {
        let literal = |id: usize| matches!(patterns[id], Pattern::Literal(..));
        let mut runs: Vec<Run> = Vec::new();
        for (k, &id) in ids.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if needles[ids[run.start as usize]] == needles[id] => run.end += 1,
                _ => runs.push(Run {
                    start: k as u32,
                    literals: k as u32,
                    end: k as u32 + 1,
                }),
            }
            let run = runs.last_mut().expect("pushed above");
            if literal(id) {
                debug_assert_eq!(run.literals, k as u32, "a run's literal signatures first");
                run.literals += 1;
            }
        }
        let literals_only = ids.iter().all(|&id| literal(id));
        let checked = |id: usize| {
            matches!(
                patterns[id],
                Pattern::Literal(..) | Pattern::Prefilter { exact: true, .. }
            )
        };
        let mut group = Group {
            ids,
            runs,
            literals_only,
            lookup: None,
        };
        let ids_of = |run: &Run| &group.ids[run.start as usize..run.end as usize];
        let checked_runs = group
            .runs
            .iter()
            .filter(|run| ids_of(run).iter().any(|&id| checked(id)))
            .count();
        if checked_runs > MANY_NEEDLES {
            let mut by_length: std::collections::BTreeMap<usize, HashedRuns> = Default::default();
            let mut unchecked = Vec::new();
            for (r, run) in group.runs.iter().enumerate() {
                let ids = ids_of(run);
                if ids.iter().any(|&id| checked(id)) {
                    let needle = &needles[ids[0]];
                    by_length
                        .entry(needle.len())
                        .or_default()
                        .push((FxBuildHasher.hash_one(needle.as_slice()), r as u32));
                }
                if ids.iter().any(|&id| !checked(id)) {
                    unchecked.push(r as u32);
                }
            }
            let mut by_length: Vec<(usize, HashedRuns)> = by_length.into_iter().collect();
            for (_, runs) in &mut by_length {
                runs.sort_unstable();
            }
            group.lookup = Some(RunLookup {
                by_length,
                unchecked,
            });
        }
        group
    }

    /// Sets `runs` to the runs a hit at `start` of `text` may fire, each with whether
    /// its needle is there as written (`None`: not checked yet). One buffer serves
    /// every hit of a text.
    fn runs_at(
        &self,
        text: &[u8],
        start: usize,
        needles: &[Vec<u8>],
        runs: &mut Vec<(u32, Option<bool>)>,
    ) {
        runs.clear();
        let Some(lookup) = &self.lookup else {
            runs.extend((0..self.runs.len() as u32).map(|r| (r, None)));
            return;
        };
        let rest = &text[start..];
        for (length, table) in &lookup.by_length {
            let Some(piece) = rest.get(..*length) else {
                break;
            };
            let hash = FxBuildHasher.hash_one(piece);
            let first = table.partition_point(|&(h, _)| h < hash);
            for &(_, r) in table[first..].iter().take_while(|&&(h, _)| h == hash) {
                let run = self.runs[r as usize];
                if needles[self.ids[run.start as usize]] == piece {
                    runs.push((r, Some(true)));
                }
            }
        }
        for &r in &lookup.unchecked {
            if !runs.iter().any(|&(found, _)| found == r) {
                runs.push((r, Some(false)));
            }
        }
    }
}

/// Characters that fold to ASCII letters under Unicode simple case folding.
const FOLDING: [&str; 2] = ["\u{212A}", "\u{017F}"];

/// The literals one of which every match of a regex holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Prefilter {
    literals: Vec<Vec<u8>>,
    /// The regex ignores case: its literals are compared ignoring ASCII case.
    ignore_case: bool,
}

#[derive(Debug, Clone)]
struct RegexSignature {
    regex: LazyRegex,
    entry: usize,
    signature: usize,
    weak: bool,
    /// It matches no line break, so every match lies within one line.
    line_local: bool,
    /// It has no usable literal: it runs on every text.
    unfiltered: bool,
    ignore_case: bool,
}

#[derive(Debug, Clone)]
pub struct SignatureSet {
    /// Each distinct needle (first `MAX_NEEDLE` bytes, ASCII case folded) once: a weak
    /// literal shared by thousands of entries is one automaton pattern, not thousands
    /// (the automaton's build time grows with the matches per pattern squared).
    automaton: Option<AhoCorasick>,
    /// The patterns behind each automaton pattern.
    groups: Vec<Group>,
    patterns: Vec<Pattern>,
    /// What a hit on each pattern is checked against, as written: a literal signature
    /// whole (the automaton only holds its first `MAX_NEEDLE` bytes).
    needles: Vec<Vec<u8>>,
    regexes: Vec<RegexSignature>,
    /// The regexes with no usable literal, which run on every text.
    unfiltered: Vec<usize>,
}

impl SignatureSet {
    pub fn new<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> SignatureSet {
        let mut needles: Vec<Vec<u8>> = Vec::new();
        let mut patterns = Vec::new();
        let mut regexes = Vec::new();
        for (e, entry) in entries.into_iter().enumerate() {
            for (s, sig) in entry.signatures.iter().enumerate() {
                match &sig.kind {
                    SignatureKind::Literal(text) => {
                        needles.push(text.as_bytes().to_vec());
                        patterns.push(Pattern::Literal(e, s, sig.weak));
                    }
                    SignatureKind::Regex(re) => {
                        let id = regexes.len();
                        // Parsed once, for both questions asked of it.
                        let hir = regex_syntax::parse(re.as_str()).ok();
                        let prefilter = prefilter(re.as_str(), hir.as_ref());
                        let ignore_case = prefilter.as_ref().is_some_and(|p| p.ignore_case);
                        for literal in prefilter.iter().flat_map(|p| &p.literals) {
                            // Any piece of a required literal is required too.
                            needles.push(literal[..literal.len().min(MAX_NEEDLE)].to_vec());
                            patterns.push(Pattern::Prefilter {
                                regex: id,
                                exact: !ignore_case,
                            });
                        }
                        regexes.push(RegexSignature {
                            regex: re.clone(),
                            entry: e,
                            signature: s,
                            weak: sig.weak,
                            line_local: hir.as_ref().is_some_and(|h| !holds_line_break(h)),
                            unfiltered: prefilter.is_none(),
                            ignore_case,
                        });
                    }
                }
            }
        }
        for c in FOLDING {
            needles.push(c.as_bytes().to_vec());
            patterns.push(Pattern::Folding);
        }
        // Each distinct key (the automaton's patterns, in order) and the needles
        // behind it.
        let mut group_of: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (id, needle) in needles.iter().enumerate() {
            let key = needle[..needle.len().min(MAX_NEEDLE)].to_ascii_lowercase();
            let group = *group_of.entry(key).or_insert_with_key(|key| {
                keys.push(key.clone());
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[group].push(id);
        }
        let groups: Vec<Group> = groups
            .into_iter()
            .map(|mut ids| {
                // Equal needles next to each other, each run's literal signatures first.
                let other = |id: usize| !matches!(patterns[id], Pattern::Literal(..));
                ids.sort_by(|&a, &b| {
                    (needles[a].cmp(&needles[b]))
                        .then(other(a).cmp(&other(b)))
                        .then(a.cmp(&b))
                });
                Group::new(ids, &patterns, &needles)
            })
            .collect();
        // A DFA scans fastest, but its build time and memory grow with the patterns
        // times the alphabet: past `MAX_DFA_NEEDLES`, a contiguous NFA (a few times
        // slower to scan, a tenth of the memory).
        let kind = if keys.len() <= MAX_DFA_NEEDLES {
            AhoCorasickKind::DFA
        } else {
            AhoCorasickKind::ContiguousNFA
        };
        // Every needle is a plain byte string; building only fails past size limits,
        // and then every regex simply runs unfiltered.
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .kind(Some(kind))
            .build(&keys)
            .ok();
        if automaton.is_none() {
            for r in &mut regexes {
                r.unfiltered = true;
            }
        }
        let unfiltered = (0..regexes.len())
            .filter(|&i| regexes[i].unfiltered)
            .collect();
        SignatureSet {
            automaton,
            groups,
            patterns,
            needles,
            regexes,
            unfiltered,
        }
    }

    /// Every signature that fires on `text`, each once (its first occurrence), ordered by
    /// entry and signature.
    pub fn matches(&self, text: &str) -> Vec<SignatureMatch> {
        self.matches_within(text, usize::MAX)
    }

    /// `matches`, leaving out the literal signatures of a needle that more than
    /// `most_per_needle` of them share (a wrapper's message that thousands of entries
    /// quote), which then cost nothing to leave out.
    pub fn matches_within(&self, text: &str, most_per_needle: usize) -> Vec<SignatureMatch> {
        // Work here follows what the text holds, not the size of the set: a knowledge
        // base of 100,000 entries costs a paste no more than one of 60, past the scan.
        let mut found = Vec::new();
        // The runs (group, run) whose literal signatures fired: all of a run's fire at
        // its first hit as written (thousands, for a message that many entries quote).
        let mut runs_fired: FxHashSet<(usize, u32)> = FxHashSet::default();
        // The regexes worth running, with where their literals were found (`None` once
        // they must search the whole text).
        let mut wanted: FxHashMap<usize, Option<Vec<usize>>> = FxHashMap::default();
        let mut folding = false;
        if let Some(ac) = &self.automaton {
            // Literal signatures fired, by group: a literals-only group whose every
            // signature fired is settled, and its later hits add nothing.
            let mut fired: FxHashMap<usize, usize> = FxHashMap::default();
            let mut runs = Vec::new();
            for m in ac.find_overlapping_iter(text) {
                let g = m.pattern().as_usize();
                let group = &self.groups[g];
                if group.literals_only && fired.get(&g) == Some(&group.ids.len()) {
                    continue;
                }
                group.runs_at(text.as_bytes(), m.start(), &self.needles, &mut runs);
                for &(r, mut written) in &runs {
                    let run = group.runs[r as usize];
                    let ids = &group.ids[run.start as usize..run.end as usize];
                    let needle = &self.needles[ids[0]];
                    // Whether the text holds the run's needle as written, once per run.
                    let mut as_written = || {
                        *written
                            .get_or_insert_with(|| text.as_bytes()[m.start()..].starts_with(needle))
                    };
                    let (literals, others) = ids.split_at((run.literals - run.start) as usize);
                    // A run's literal signatures all fire at its first hit as written, and
                    // only then: a wrapper's message that thousands of entries quote, seen
                    // again on every rank's lines, is not walked again.
                    let fires =
                        !literals.is_empty() && !runs_fired.contains(&(g, r)) && as_written();
                    if fires {
                        let (start, end) = (m.start(), m.start() + needle.len());
                        if literals.len() <= most_per_needle {
                            let at = |&id| literal_at(&self.patterns, id, start, end);
                            found.extend(literals.iter().map(at));
                        }
                        runs_fired.insert((g, r));
                        *fired.entry(g).or_default() += literals.len();
                    }
                    for &id in others {
                        match self.patterns[id] {
                            Pattern::Prefilter { regex, exact } if !exact || as_written() => {
                                let line_local = self.regexes[regex].line_local;
                                let hits = wanted
                                    .entry(regex)
                                    .or_insert_with(|| line_local.then(Vec::new));
                                if let Some(list) = hits {
                                    if list.len() < MAX_LINE_SEARCHES {
                                        list.push(m.start());
                                    } else {
                                        *hits = None;
                                    }
                                }
                            }
                            Pattern::Folding => folding = true,
                            Pattern::Prefilter { .. } | Pattern::Literal(..) => {}
                        }
                    }
                }
            }
        }
        for &id in &self.unfiltered {
            wanted.insert(id, None);
        }
        if folding {
            for (id, r) in self.regexes.iter().enumerate() {
                if r.ignore_case {
                    wanted.insert(id, None);
                }
            }
        }
        for (id, hits) in &mut wanted {
            let r = &self.regexes[*id];
            let Ok(regex) = r.regex.compiled() else {
                // `errbook check` reports it; a paste is still diagnosed without it.
                continue;
            };
            let m = match hits {
                Some(lines) => find_on_lines(regex, text, lines),
                None => regex.find(text),
            };
            if let Some((start, end)) = m {
                found.push(SignatureMatch {
                    entry: r.entry,
                    signature: r.signature,
                    weak: r.weak,
                    start,
                    end,
                });
            }
        }
        found.sort_by_key(|m| (m.entry, m.signature));
        found
    }
}

/// The first match of a regex that cannot match a line break, looking only at the
/// lines holding `hits` (byte offsets of its literals): every match holds one of its
/// literals, so lies on such a line. Each line is searched with the text before it as
/// context and its line break after it, so anchors and word boundaries behave as they
/// do on the whole text.
fn find_on_lines(regex: &Matcher, text: &str, hits: &mut [usize]) -> Option<(usize, usize)> {
    hits.sort_unstable();
    let bytes = text.as_bytes();
    let mut searched_to = 0;
    for &hit in hits.iter() {
        if hit < searched_to {
            continue;
        }
        // Bytes, not chars: a suffix literal may start inside a character. Either way a
        // line starts and ends on a character boundary.
        let start = bytes[..hit]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let end = bytes[hit..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |i| hit + i + 1);
        if let Some(m) = regex.find_at(&text[..end], start) {
            return Some(m);
        }
        searched_to = end;
    }
    None
}

/// Whether no match of `pattern` can hold a line break: no literal or class in it
/// contains one. (When it does not parse, it is treated as able to.)
fn holds_line_break(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => false,
        HirKind::Literal(literal) => literal.0.contains(&b'\n'),
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .any(|r| r.start() <= '\n' && '\n' <= r.end()),
        HirKind::Class(Class::Bytes(class)) => class
            .ranges()
            .iter()
            .any(|r| r.start() <= b'\n' && b'\n' <= r.end()),
        HirKind::Repetition(repetition) => holds_line_break(&repetition.sub),
        HirKind::Capture(capture) => holds_line_break(&capture.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(holds_line_break),
    }
}

/// The literals that select the texts worth running `pattern` on. A pattern that
/// ignores case as a whole (a leading `(?i)`) gets its literals as written, compared
/// ignoring ASCII case: its case-folded literals would be too many to be useful.
/// `hir` is `pattern` parsed (`None` if it does not parse).
fn prefilter(pattern: &str, hir: Option<&Hir>) -> Option<Prefilter> {
    if let Some(rest) = pattern.strip_prefix("(?i)")
        && !sets_case_flag(rest)
        && let Some(literals) = regex_syntax::parse(rest)
            .ok()
            .and_then(|h| required_literals(&h))
        && literals.iter().all(|l| {
            String::from_utf8_lossy(l)
                .chars()
                .all(|c| c.is_ascii() || !has_case(c))
        })
    {
        return Some(Prefilter {
            literals,
            ignore_case: true,
        });
    }
    Some(Prefilter {
        literals: required_literals(hir?)?,
        ignore_case: false,
    })
}

/// Whether a flag group in `pattern` may change case sensitivity (conservatively: an
/// escaped `(` followed by `?` counts too).
fn sets_case_flag(pattern: &str) -> bool {
    pattern.match_indices("(?").any(|(i, _)| {
        pattern[i + 2..]
            .chars()
            .take_while(|&c| c != ':' && c != ')')
            .any(|c| c == 'i')
    })
}

fn has_case(c: char) -> bool {
    c.is_lowercase() || c.is_uppercase()
}

/// Literals one of which must occur in any text the regex matches, chosen among its
/// possible prefixes, its possible suffixes, and the possible prefixes of each tail of
/// the sequence it is (every match holds a match of each tail). The set whose shortest
/// literal is longest wins. `None` when no set is finite with literals long enough to
/// be selective.
fn required_literals(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let extract = |hir: &Hir, kind: ExtractKind| -> Option<Vec<Vec<u8>>> {
        let mut seq: Seq = Extractor::new()
            .kind(kind.clone())
            .limit_total(64)
            .extract(hir);
        match kind {
            ExtractKind::Suffix => seq.optimize_for_suffix_by_preference(),
            _ => seq.optimize_for_prefix_by_preference(),
        }
        let literals = seq.literals()?;
        let selective = !literals.is_empty()
            && literals
                .iter()
                .all(|l| l.as_bytes().len() >= MIN_PREFILTER_LEN);
        selective.then(|| literals.iter().map(|l| l.as_bytes().to_vec()).collect())
    };
    let mut pieces = hir;
    while let HirKind::Capture(capture) = pieces.kind() {
        pieces = &capture.sub;
    }
    let mut candidates = vec![
        extract(hir, ExtractKind::Prefix),
        extract(hir, ExtractKind::Suffix),
    ];
    if let HirKind::Concat(subs) = pieces.kind() {
        // Every match holds a match of each tail of the sequence.
        candidates.extend(
            (1..subs.len()).map(|i| extract(&Hir::concat(subs[i..].to_vec()), ExtractKind::Prefix)),
        );
    }
    let shortest = |literals: &Vec<Vec<u8>>| literals.iter().map(Vec::len).min().unwrap_or(0);
    candidates.into_iter().flatten().max_by(|a, b| {
        shortest(a)
            .cmp(&shortest(b))
            .then_with(|| b.len().cmp(&a.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::Signature;

    fn entry(slug: &str, signatures: Vec<Signature>) -> Entry {
        Entry {
            slug: slug.into(),
            title: String::new(),
            title_zh: String::new(),
            summary: String::new(),
            summary_zh: String::new(),
            tags: vec![],
            signatures,
            symptoms: vec![],
            examples: vec![],
            example_lines: vec![],
            related: vec![],
            sources: vec![],
            branches: vec![],
            branch_lines: vec![],
            versions: vec![],
            body: crate::kb::Body::new(crate::kb::Lang::En, "", std::path::Path::new(""), 1),
            body_zh: None,
            path: Default::default(),
            unwritten: vec![],
        }
    }

    fn regex(p: &str) -> Signature {
        Signature {
            kind: SignatureKind::Regex(LazyRegex::new(p).unwrap()),
            weak: false,
        }
    }

    #[test]
    fn finds_literals_and_regexes_of_every_entry_once() {
        let entries = vec![
            entry(
                "a",
                vec![
                    Signature::literal("ncclInvalidUsage"),
                    regex(r"rank \d+ and rank \d+"),
                ],
            ),
            entry(
                "b",
                vec![Signature::literal("Invalid"), regex(r"SeqNum=\d+")],
            ),
        ];
        let set = SignatureSet::new(&entries);
        let text =
            "ncclInvalidUsage: Duplicate GPU detected : rank 1 and rank 0; ncclInvalidUsage again";
        let found = set.matches(text);
        let ids: Vec<_> = found.iter().map(|m| (m.entry, m.signature)).collect();
        assert_eq!(ids, [(0, 0), (0, 1), (1, 0)]);
        assert_eq!(&text[found[1].start..found[1].end], "rank 1 and rank 0");
        assert_eq!(found[0].start, 0, "first occurrence");
    }

    fn literals(pattern: &str) -> Option<(Vec<String>, bool)> {
        prefilter(pattern, regex_syntax::parse(pattern).ok().as_ref()).map(|p| {
            let mut l: Vec<String> = p
                .literals
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect();
            l.sort();
            (l, p.ignore_case)
        })
    }

    #[test]
    fn regexes_are_prefiltered_by_their_literals() {
        let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            literals(r"Duplicate GPU detected : rank \d+"),
            Some((strs(&["Duplicate GPU detected : rank "]), false))
        );
        // No prefix: the suffix is required instead.
        assert_eq!(
            literals(r"\S*ProcessGroupNCCL\.cpp"),
            Some((strs(&["ProcessGroupNCCL.cpp"]), false))
        );
        // Neither: a piece in the middle that every match holds.
        assert_eq!(
            literals(r"\d+ of (gpus|devices) \w+"),
            Some((strs(&["devices ", "gpus "]), false))
        );
        // Case-insensitive patterns keep their literals as written, compared ignoring
        // ASCII case; the set whose shortest literal is longest wins.
        assert_eq!(
            literals(r"(?i)\b(2|two) gpus?\b[^\n]{0,40}(hangs?|stuck)"),
            Some((strs(&["2 gpu", "2 gpus", "two gpu", "two gpus"]), true))
        );
        assert_eq!(
            literals(r"(?i)\b(2|two)[ -]?gpus?\b[^\n]{0,40}(hangs?|stuck)"),
            Some((strs(&["hang", "hangs", "stuck"]), true))
        );
        assert_eq!(literals(r"\d+\s+\w+"), None);
        let entries = vec![
            entry("a", vec![regex(r"\d+\s+\w+")]),
            entry("b", vec![regex(r"rank (\d+)")]),
        ];
        let set = SignatureSet::new(&entries);
        let unfiltered: Vec<bool> = set.regexes.iter().map(|r| r.unfiltered).collect();
        assert_eq!(unfiltered, [true, false]);
        let found = set.matches("rank 3 of 8");
        assert_eq!(found.iter().map(|m| m.entry).collect::<Vec<_>>(), [0, 1]);
    }

    /// The entries whose signatures fire on `text`.
    fn fired(set: &SignatureSet, text: &str) -> Vec<usize> {
        set.matches(text).iter().map(|m| m.entry).collect()
    }

    #[test]
    fn a_long_literal_fires_only_when_all_of_it_is_there() {
        let long = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError";
        let entries = vec![
            entry("a", vec![Signature::literal(long)]),
            entry(
                "b",
                vec![regex(r"torch\.distributed\.elastic\.rendezvous\.\w+Error")],
            ),
        ];
        let set = SignatureSet::new(&entries);
        let text = format!("x\n{long}: boom");
        let m = set.matches(&text);
        assert_eq!(m.len(), 1);
        assert_eq!(
            &text[m[0].start..m[0].end],
            long,
            "the whole literal is the match"
        );
        // The same first 16 bytes, a different ending: neither fires.
        assert!(
            fired(
                &set,
                "torch.distributed.elastic.multiprocessing.errors.Other"
            )
            .is_empty()
        );
        assert_eq!(
            fired(
                &set,
                "torch.distributed.elastic.rendezvous.RendezvousClosedError"
            ),
            [1]
        );
    }

    #[test]
    fn case_insensitive_regexes_fire_in_any_case_and_literals_keep_theirs() {
        let entries = vec![
            entry("a", vec![regex(r"(?i)training (hangs|is stuck) after")]),
            entry("b", vec![Signature::literal("CUDA error")]),
        ];
        let set = SignatureSet::new(&entries);
        let fired = |text: &str| fired(&set, text);
        assert_eq!(fired("TRAINING IS STUCK AFTER epoch 1"), [0]);
        assert_eq!(
            fired("Training Hangs After the first step; CUDA error"),
            [0, 1]
        );
        // A literal signature is matched as written.
        assert_eq!(fired("cuda error"), Vec::<usize>::new());
        // Unicode case folding maps the Kelvin sign to `k`: still found.
        let entries = vec![entry("k", vec![regex(r"(?i)kernel (panic|crash)")])];
        let set = SignatureSet::new(&entries);
        assert_eq!(set.matches("\u{212A}ernel panic").len(), 1);
    }

    #[test]
    fn line_local_regexes_match_as_on_the_whole_text() {
        let entries = vec![
            entry("word", vec![regex(r"\brank \d+ failed\b")]),
            entry("start", vec![regex(r"^Traceback \(most recent")]),
            entry("across", vec![regex(r"timed out\s+on rank \d+")]),
        ];
        let set = SignatureSet::new(&entries);
        let fired = |text: &str| fired(&set, text);
        // A word boundary before the line's literal sees the previous line's end.
        assert_eq!(fired("ok\nrank 3 failed\n"), [0]);
        assert_eq!(fired("xrank 3 failed"), Vec::<usize>::new());
        // `^` is the start of the text, not of a line.
        assert_eq!(fired("Traceback (most recent call last):"), [1]);
        assert_eq!(
            fired("log\nTraceback (most recent call last):"),
            Vec::<usize>::new()
        );
        // `\s` can cross a line break, so that regex searches the whole text.
        assert_eq!(fired("collective timed out\non rank 2"), [2]);
        let text = "a\nb\nrank 12 failed here\n";
        let m = set.matches(text)[0];
        assert_eq!(&text[m.start..m.end], "rank 12 failed");
        let local = |p: &str| !holds_line_break(&regex_syntax::parse(p).unwrap());
        assert!(local(r"rank \d+ [^\n]{0,9}x"));
        assert!(!local(r"a\s+b"));
        assert!(!local(r"(?s)a.b"));
    }

    #[test]
    fn nothing_fires_on_unrelated_text() {
        let entries = vec![entry("a", vec![Signature::literal("ncclInvalidUsage")])];
        assert!(
            SignatureSet::new(&entries)
                .matches("KeyError: 'labels'")
                .is_empty()
        );
    }

    #[test]
    fn a_literal_shared_by_many_entries_fires_for_each_as_written() {
        // Thousands of entries sharing a wrapper literal are one automaton pattern; a
        // literal that differs only in case, or past the needle's length, is in the
        // same group and must still be checked on its own.
        let mut entries: Vec<Entry> = (0..2_000)
            .map(|i| {
                entry(
                    &format!("e{i}"),
                    vec![Signature::literal("ChildFailedError")],
                )
            })
            .collect();
        entries.push(entry("lower", vec![Signature::literal("childfailederror")]));
        entries.push(entry(
            "longer",
            vec![Signature::literal("ChildFailedError: worker 3")],
        ));
        let set = SignatureSet::new(&entries);
        let text = "x\nChildFailedError: worker 1\nChildFailedError: worker 3\n";
        let found = set.matches(text);
        assert_eq!(found.len(), 2_001);
        assert!(
            found[..2_000].iter().all(|m| m.start == 2),
            "first occurrence"
        );
        let longer = found.last().unwrap();
        assert_eq!(longer.entry, 2_001);
        assert_eq!(
            &text[longer.start..longer.end],
            "ChildFailedError: worker 3"
        );
        let lower = set.matches("childfailederror");
        assert_eq!(lower.len(), 1);
        assert_eq!(lower[0].entry, 2_000);
    }

    #[test]
    fn a_needle_too_many_signatures_share_can_be_left_out() {
        let mut entries: Vec<Entry> = (0..100)
            .map(|i| {
                entry(
                    &format!("e{i}"),
                    vec![Signature::literal("ChildFailedError")],
                )
            })
            .collect();
        entries.push(entry("own", vec![Signature::literal("ncclInvalidUsage")]));
        let set = SignatureSet::new(&entries);
        let text = "ChildFailedError\nncclInvalidUsage\n";
        assert_eq!(set.matches(text).len(), 101);
        let within = set.matches_within(text, 64);
        assert_eq!(within.len(), 1);
        assert_eq!(within[0].entry, 100);
    }

    #[test]
    fn many_messages_extending_one_error_fire_only_where_written_whole() {
        // Hundreds of literals that extend one real message (past the automaton's 16
        // bytes) are looked up by length and hash at a hit; a case-sensitive regex and a
        // case-insensitive one on the same prefix share the group.
        let message = "Watchdog caught collective operation timeout";
        let mut entries: Vec<Entry> = (0..300)
            .map(|i| {
                entry(
                    &format!("e{i}"),
                    vec![Signature::literal(format!("{message} [rank {i}]"))],
                )
            })
            .collect();
        entries.push(entry("bare", vec![Signature::literal(message)]));
        entries.push(entry(
            "exact",
            vec![regex(r"Watchdog caught \w+ operation")],
        ));
        entries.push(entry(
            "any case",
            vec![regex(r"(?i)watchdog caught collective")],
        ));
        let set = SignatureSet::new(&entries);
        let text = format!("x\n[E] {message} [rank 7] after 600000 ms\n{message} [rank 250]\n");
        let found = set.matches(&text);
        let slugs: Vec<&str> = found
            .iter()
            .map(|m| entries[m.entry].slug.as_str())
            .collect();
        assert_eq!(slugs, ["e7", "e250", "bare", "exact", "any case"]);
        assert_eq!(
            &text[found[0].start..found[0].end],
            format!("{message} [rank 7]")
        );
        assert_eq!(found[2].start, 6, "first occurrence");
        // In capitals: no literal and no case-sensitive regex, only the one ignoring case.
        let upper = text.to_uppercase();
        let found = set.matches(&upper);
        assert_eq!(found.len(), 1);
        assert_eq!(entries[found[0].entry].slug, "any case");
        // The same first 16 bytes, then another message: only the regex that allows it.
        assert_eq!(
            fired(&set, "Watchdog caught collective barrier stall"),
            [302]
        );
    }
}
