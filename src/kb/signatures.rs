//! All entries' signatures compiled into one multi-pattern matcher. Literal signatures
//! and the literal prefixes (or suffixes) every regex needs go into one Aho-Corasick
//! automaton; one pass over a text finds the literals that fire and the few regexes
//! worth running, instead of running every regex of every entry.

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};

/// Shortest literal accepted as a regex's prefilter: shorter ones fire everywhere.
const MIN_PREFILTER_LEN: usize = 3;

use super::{Entry, SignatureKind};

/// Which signature fired, and where in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignatureMatch {
    /// Index of the entry in the slice the set was built from.
    pub entry: usize,
    /// Index of the signature within that entry.
    pub signature: usize,
    /// Byte range of the first occurrence.
    pub start: usize,
    pub end: usize,
}

/// What an Aho-Corasick pattern stands for.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    /// A literal signature: (entry, signature).
    Literal(usize, usize),
    /// A literal the regex at this index cannot match without.
    Prefilter(usize),
}

#[derive(Debug, Clone)]
pub struct SignatureSet {
    automaton: Option<AhoCorasick>,
    patterns: Vec<Pattern>,
    regexes: Vec<Regex>,
    /// (entry, signature) of each regex.
    regex_ids: Vec<(usize, usize)>,
    /// Regexes with no usable literal: run on every text.
    unfiltered: Vec<usize>,
}

impl SignatureSet {
    pub fn new<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> SignatureSet {
        let mut needles: Vec<Vec<u8>> = Vec::new();
        let mut patterns = Vec::new();
        let mut regexes = Vec::new();
        let mut regex_ids = Vec::new();
        let mut unfiltered = Vec::new();
        for (e, entry) in entries.into_iter().enumerate() {
            for (s, sig) in entry.signatures.iter().enumerate() {
                match &sig.kind {
                    SignatureKind::Literal(text) => {
                        needles.push(text.as_bytes().to_vec());
                        patterns.push(Pattern::Literal(e, s));
                    }
                    SignatureKind::Regex(re) => {
                        let id = regexes.len();
                        regexes.push(re.clone());
                        regex_ids.push((e, s));
                        match required_literals(re.as_str()) {
                            Some(literals) => {
                                for literal in literals {
                                    needles.push(literal);
                                    patterns.push(Pattern::Prefilter(id));
                                }
                            }
                            None => unfiltered.push(id),
                        }
                    }
                }
            }
        }
        // Every needle is a plain byte string; building only fails past size limits,
        // and then every regex simply runs unfiltered.
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&needles)
            .ok();
        if automaton.is_none() {
            unfiltered = (0..regexes.len()).collect();
        }
        SignatureSet {
            automaton,
            patterns,
            regexes,
            regex_ids,
            unfiltered,
        }
    }

    /// Every signature that fires on `text`, each once (its first occurrence), ordered by
    /// entry and signature.
    pub fn matches(&self, text: &str) -> Vec<SignatureMatch> {
        let mut found = Vec::new();
        let mut literal_seen = vec![false; self.patterns.len()];
        let mut regex_wanted = vec![false; self.regexes.len()];
        if let Some(ac) = &self.automaton {
            for m in ac.find_overlapping_iter(text) {
                let id = m.pattern().as_usize();
                match self.patterns[id] {
                    Pattern::Literal(entry, signature) if !literal_seen[id] => {
                        literal_seen[id] = true;
                        found.push(SignatureMatch {
                            entry,
                            signature,
                            start: m.start(),
                            end: m.end(),
                        });
                    }
                    Pattern::Prefilter(regex) => regex_wanted[regex] = true,
                    Pattern::Literal(..) => {}
                }
            }
        }
        for &id in &self.unfiltered {
            regex_wanted[id] = true;
        }
        for (id, wanted) in regex_wanted.into_iter().enumerate() {
            if !wanted {
                continue;
            }
            if let Some(m) = self.regexes[id].find(text) {
                let (entry, signature) = self.regex_ids[id];
                found.push(SignatureMatch {
                    entry,
                    signature,
                    start: m.start(),
                    end: m.end(),
                });
            }
        }
        found.sort_by_key(|m| (m.entry, m.signature));
        found
    }
}

/// Literals one of which must occur in any text the regex matches: its possible
/// prefixes, or failing that its suffixes. `None` when neither is a small set of
/// strings long enough to be selective (the regex then runs on every text).
fn required_literals(pattern: &str) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::parse(pattern).ok()?;
    let literals = |kind: ExtractKind| -> Option<Vec<Vec<u8>>> {
        let mut seq: Seq = Extractor::new()
            .kind(kind.clone())
            .limit_total(64)
            .extract(&hir);
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
    literals(ExtractKind::Prefix).or_else(|| literals(ExtractKind::Suffix))
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
            markdown: String::new(),
            html: String::new(),
            text: String::new(),
            path: Default::default(),
        }
    }

    fn regex(p: &str) -> Signature {
        Signature {
            kind: SignatureKind::Regex(Regex::new(p).unwrap()),
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

    #[test]
    fn regexes_are_prefiltered_by_their_literals() {
        assert_eq!(
            required_literals(r"Duplicate GPU detected : rank \d+"),
            Some(vec![b"Duplicate GPU detected : rank ".to_vec()])
        );
        // No prefix: the suffix is required instead.
        assert_eq!(
            required_literals(r"\S*ProcessGroupNCCL\.cpp"),
            Some(vec![b"ProcessGroupNCCL.cpp".to_vec()])
        );
        assert_eq!(required_literals(r"\d+\s+\w+"), None);
        let entries = vec![
            entry("a", vec![regex(r"\d+ of \w+")]),
            entry("b", vec![regex(r"rank (\d+)")]),
        ];
        let set = SignatureSet::new(&entries);
        assert_eq!(set.unfiltered, [0]);
        let found = set.matches("rank 3 of 8");
        assert_eq!(found.iter().map(|m| m.entry).collect::<Vec<_>>(), [0, 1]);
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
}
