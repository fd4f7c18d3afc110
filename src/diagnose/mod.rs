//! Diagnosis: from a pasted traceback or log to the entries that explain it, with the
//! evidence. Signatures are the strongest evidence, full-text similarity of the
//! paste's error messages comes next, and frames only break ties.

mod normalize;
mod parse;
mod paste;
mod rank;

use std::sync::Arc;

use crate::kb::Problem;
use crate::search::{SearchError, SearchIndex};

pub use normalize::{normalize, query_words};
pub use parse::{Exception, Frame, Parsed, RootCause, parse};
pub use paste::{Line, Paste, looks_like_error};
pub use rank::{Confidence, Diagnosis, Evidence, EvidenceKind, Match, Verdict};

/// The knowledge base ready for diagnosis: its index, whose `Kb` holds the signatures.
pub struct Diagnoser {
    index: Arc<SearchIndex>,
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
        Diagnoser { index }
    }

    pub fn index(&self) -> &SearchIndex {
        &self.index
    }

    /// Diagnoses a paste: up to `limit` ranked matches, or `no_match`.
    pub fn diagnose(&self, paste: &Paste, limit: usize) -> Result<Diagnosis, SearchError> {
        rank::diagnose(&self.index, paste, limit)
    }

    pub fn diagnose_text(&self, text: &str, limit: usize) -> Result<Diagnosis, SearchError> {
        self.diagnose(&Paste::from_text(text), limit)
    }

    /// Every entry's examples must diagnose to that entry first: the knowledge base
    /// tests itself. Returns a problem for each example that does not.
    pub fn check_examples(&self) -> Result<Vec<Problem>, SearchError> {
        let mut problems = Vec::new();
        for entry in self.index.kb().entries() {
            for (n, (example, line)) in entry.examples.iter().zip(&entry.example_lines).enumerate()
            {
                let d = self.diagnose_text(example, 3)?;
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
        }
        Ok(problems)
    }
}
