//! Diagnosis: from a pasted traceback or log to the entries that explain it, with the
//! evidence. Signatures are the strongest evidence, full-text similarity of the
//! paste's error messages comes next, and frames only break ties.

mod branch;
mod normalize;
mod parse;
mod paste;
mod policy;
mod rank;
mod request;
mod triage;
mod versions;

use std::sync::Arc;

use crate::kb::Problem;
use crate::search::{CacheBudget, CacheStats, SearchError, SearchIndex};

pub use branch::ChosenBranch;
pub use normalize::{as_pattern, normalize, query_words};
pub use parse::{Exception, Frame, Parsed, RootCause, parse};
pub use paste::{Line, LineSplitter, Paste, PasteBuilder, lines, looks_like_error};
pub use rank::{Confidence, Diagnosis, Evidence, EvidenceKind, Match, Verdict};
pub use request::{DEFAULT_MATCHES, MAX_MATCHES, Pasted, Request, RequestError};
pub use triage::{Consequence, ConsequenceKind, Exit, Fact, FirstFailure, KnownFrom, Triage};
pub use versions::VersionCheck;

/// `text` cut to `max_chars` characters, with `…` where it was cut.
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The knowledge base ready for diagnosis: its index, whose `Kb` holds the signatures.
pub struct Diagnoser {
    index: Arc<SearchIndex>,
    /// Recent answers by paste text. The index never changes once built, so an answer
    /// stays true; the same paste comes back from reloads, share links and chatbots
    /// retrying. Weighed by text size so large pastes cannot hold much memory.
    answers: quick_cache::sync::Cache<Asked, Arc<Diagnosis>, AskedWeight>,
}

/// What an answer costs in the cache beside its paste's text: its matches, evidence
/// and parsed summary.
const ANSWER_BYTES: u64 = 16 << 10;
/// Pastes larger than this are diagnosed afresh each time rather than evicting many
/// small ones.
const LARGEST_CACHED: usize = 256 << 10;

/// A cache key: the paste as sent, and how many matches were asked for.
#[derive(Clone, PartialEq, Eq)]
struct Asked {
    text: Box<str>,
    limit: usize,
}

/// `Asked` borrowed, to look the cache up without copying the paste.
struct AskedRef<'a> {
    text: &'a str,
    limit: usize,
}

impl std::hash::Hash for Asked {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        AskedRef {
            text: &self.text,
            limit: self.limit,
        }
        .hash(state)
    }
}

impl std::hash::Hash for AskedRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
        self.limit.hash(state);
    }
}

impl quick_cache::Equivalent<Asked> for AskedRef<'_> {
    fn equivalent(&self, key: &Asked) -> bool {
        self.limit == key.limit && self.text == &*key.text
    }
}

#[derive(Clone)]
struct AskedWeight;

impl quick_cache::Weighter<Asked, Arc<Diagnosis>> for AskedWeight {
    fn weight(&self, key: &Asked, _: &Arc<Diagnosis>) -> u64 {
        key.text.len() as u64 + ANSWER_BYTES
    }
}

impl std::fmt::Debug for Diagnoser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Diagnoser")
            .field("index", &self.index)
            .finish()
    }
}

impl Diagnoser {
    pub fn new(index: Arc<SearchIndex>) -> Diagnoser {
        let bytes = CacheBudget::for_entries(index.kb().len()).diagnoses();
        Diagnoser {
            index,
            answers: quick_cache::sync::Cache::with_weighter(
                (bytes / ANSWER_BYTES / 4).max(16) as usize,
                bytes,
                AskedWeight,
            ),
        }
    }

    pub fn index(&self) -> &SearchIndex {
        &self.index
    }

    /// The cache of recent answers.
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats::from(&self.answers)
    }

    /// Answers a request: pasted text from the cache of recent answers or anew, a log
    /// read line by line always anew.
    pub fn answer(&self, request: &Request) -> Result<Diagnosis, SearchError> {
        match request.pasted() {
            Pasted::Text(text) => self.diagnose_text(text, request.matches()),
            Pasted::Read(paste) => self.diagnose(paste, request.matches()),
        }
    }

    /// Diagnoses a paste: up to `limit` ranked matches, or `no_match`.
    pub fn diagnose(&self, paste: &Paste, limit: usize) -> Result<Diagnosis, SearchError> {
        rank::diagnose(&self.index, paste, limit)
    }

    /// The answer for a paste seen recently, if it is still remembered.
    fn cached(&self, text: &str, limit: usize) -> Option<Diagnosis> {
        let asked = AskedRef { text, limit };
        self.answers.get(&asked).map(|d| d.as_ref().clone())
    }

    /// Diagnoses pasted text, answering a paste seen recently from memory.
    pub fn diagnose_text(&self, text: &str, limit: usize) -> Result<Diagnosis, SearchError> {
        match self.cached(text, limit) {
            Some(d) => Ok(d),
            None => self.diagnose_new(text, limit),
        }
    }

    /// Diagnoses pasted text that `cached` did not answer, and remembers the answer.
    fn diagnose_new(&self, text: &str, limit: usize) -> Result<Diagnosis, SearchError> {
        let d = self.diagnose(&Paste::from_text(text), limit)?;
        if text.len() <= LARGEST_CACHED {
            let key = Asked {
                text: text.into(),
                limit,
            };
            self.answers.insert(key, Arc::new(d.clone()));
        }
        Ok(d)
    }

    /// Every entry's examples must diagnose to that entry first: the knowledge base
    /// tests itself. Returns a problem for each example that does not.
    pub fn check_examples(&self) -> Result<Vec<Problem>, SearchError> {
        let mut problems = Vec::new();
        for entry in self.index.kb().entries() {
            let mut selected = vec![false; entry.branches.len()];
            for (n, (example, line)) in entry.examples.iter().zip(&entry.example_lines).enumerate()
            {
                let d = self.diagnose_text(example, 3)?;
                if let Some(chosen) = d.matches.first().and_then(|m| m.branch.as_ref())
                    && d.matches[0].slug == entry.slug
                {
                    selected[chosen.index] = true;
                }
                let got = d.matches.first().map(|m| m.slug.as_str());
                if got != Some(entry.slug.as_str()) {
                    let got = got.map_or("no_match".to_string(), |s| format!("`{s}`"));
                    problems.push(Problem {
                        path: entry.path.clone(),
                        line: Some(*line),
                        message: format!("example {} diagnoses to {got}, not to this entry", n + 1),
                    });
                }
            }
            for ((branch, line), selected) in
                entry.branches.iter().zip(&entry.branch_lines).zip(selected)
            {
                if !selected {
                    problems.push(Problem {
                        path: entry.path.clone(),
                        line: Some(*line),
                        message: format!(
                            "branch `{}`: no example selects it; add one whose lines it names",
                            branch.id
                        ),
                    });
                }
            }
        }
        Ok(problems)
    }
}
