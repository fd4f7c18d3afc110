//! All entries' signatures compiled into one multi-pattern matcher: literals in an
//! Aho-Corasick automaton, regexes in a `RegexSet`. One pass over a text finds every
//! signature of every entry that fires, instead of a loop of regexes per entry.

use aho_corasick::{AhoCorasick, MatchKind};
use regex::{Regex, RegexSet, RegexSetBuilder};

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

#[derive(Debug, Clone)]
pub struct SignatureSet {
    literals: Option<AhoCorasick>,
    /// (entry, signature) for each literal pattern id.
    literal_ids: Vec<(usize, usize)>,
    regexes: Option<RegexSet>,
    regex_list: Vec<Regex>,
    regex_ids: Vec<(usize, usize)>,
}

impl SignatureSet {
    pub fn new(entries: &[Entry]) -> SignatureSet {
        let mut literal_patterns = Vec::new();
        let mut literal_ids = Vec::new();
        let mut regex_list = Vec::new();
        let mut regex_ids = Vec::new();
        for (e, entry) in entries.iter().enumerate() {
            for (s, sig) in entry.signatures.iter().enumerate() {
                match &sig.kind {
                    SignatureKind::Literal(text) => {
                        literal_patterns.push(text.clone());
                        literal_ids.push((e, s));
                    }
                    SignatureKind::Regex(re) => {
                        regex_list.push(re.clone());
                        regex_ids.push((e, s));
                    }
                }
            }
        }
        // Every pattern here compiled alone during validation, so the combined
        // automata build too; `ok()` only guards against size limits.
        let literals = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&literal_patterns)
            .ok();
        // Unicode classes (`\w`, `\S`) make big automata: raise the default size limit.
        let regexes = RegexSetBuilder::new(regex_list.iter().map(Regex::as_str))
            .size_limit(256 << 20)
            .dfa_size_limit(64 << 20)
            .build()
            .ok();
        SignatureSet {
            literals,
            literal_ids,
            regexes,
            regex_list,
            regex_ids,
        }
    }

    /// Every signature that fires on `text`, each once (its first occurrence), ordered by
    /// entry and signature.
    pub fn matches(&self, text: &str) -> Vec<SignatureMatch> {
        let mut found = Vec::new();
        if let Some(ac) = &self.literals {
            let mut seen = vec![false; self.literal_ids.len()];
            for m in ac.find_overlapping_iter(text) {
                let id = m.pattern().as_usize();
                if !seen[id] {
                    seen[id] = true;
                    let (entry, signature) = self.literal_ids[id];
                    found.push(SignatureMatch {
                        entry,
                        signature,
                        start: m.start(),
                        end: m.end(),
                    });
                }
            }
        }
        let matched_regexes: Vec<usize> = match &self.regexes {
            Some(set) => set.matches(text).into_iter().collect(),
            // Only if the combined set exceeded its size limit: fall back to one by one.
            None => (0..self.regex_list.len())
                .filter(|&i| self.regex_list[i].is_match(text))
                .collect(),
        };
        for id in matched_regexes {
            if let Some(m) = self.regex_list[id].find(text) {
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
    fn nothing_fires_on_unrelated_text() {
        let entries = vec![entry("a", vec![Signature::literal("ncclInvalidUsage")])];
        assert!(
            SignatureSet::new(&entries)
                .matches("KeyError: 'labels'")
                .is_empty()
        );
    }
}
