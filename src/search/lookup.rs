//! What diagnosis asks of the indexes, and nothing else: text hits (`rank`), phrase
//! hits (`match_phrases`), and how much of a paste's vocabulary an entry holds
//! (`coverage`, `explains`, `shared_terms`), over a text analysed once (`analyse`,
//! `query_terms`). Signature hits come from the `Kb` itself
//! (`Signatures::matches_within`). Entries are named by their position in
//! `kb().entries()`.
//!
//! Each fast path below has its simple reference in a test: champion lists against
//! every impact (`scoring`), the streaming analyzers against tantivy's (`analysis`).

use super::scoring::{Analysed, Impacts, Scoring};
use super::{FieldKind, SearchError, SearchIndex, analysis};

/// A text's distinct analysed terms and their weights (see `SearchIndex::query_terms`).
#[derive(Debug, Clone, Default)]
pub struct QueryTerms<'a> {
    terms: Vec<&'a str>,
    weights: Vec<f32>,
    /// Each term's impacts: which documents hold it.
    impacts: Vec<Impacts>,
}

impl SearchIndex {
    /// The best `limit` entries for an analysed text, as (position in `kb().entries()`,
    /// score): the ranking of `search`, without snippets, and scored from champion
    /// lists (see `Scoring::Champions`): the same as `search`'s up to `CHAMPIONS`
    /// entries, and a long paste's many common words cost little in a larger kb.
    pub fn rank(&self, text: &Analysed, limit: usize) -> Result<Vec<(usize, f32)>, SearchError> {
        let plan = self.scorer.plan(text)?;
        Ok(self
            .ranked(plan.as_ref(), None, limit, Scoring::Champions, false)?
            .0)
    }

    /// `text` analysed once, for `rank`, `match_phrases`, `query_terms` and `explains`.
    pub fn analyse(&self, text: &str) -> Analysed {
        Analysed::new(&self.index, text)
    }

    /// The distinct terms of `text` with their idf across the knowledge base (a term no
    /// entry uses weighs as much as the rarest), for `coverage` and `shared_terms` against
    /// many entries.
    pub fn query_terms<'a>(&self, text: &'a Analysed) -> Result<QueryTerms<'a>, SearchError> {
        let terms: Vec<&str> = text
            .distinct_words()
            .filter(|t| t.chars().nth(1).is_some() || t.chars().any(analysis::is_cjk))
            .collect();
        let n = self.scorer.num_docs() as f32;
        let mut weights = Vec::with_capacity(terms.len());
        let mut impacts = Vec::with_capacity(terms.len());
        for &term in &terms {
            let held = self.scorer.impacts(FieldKind::Words, term)?;
            let df = held.len() as f32;
            weights.push((1.0 + (n - df.max(1.0) + 0.5) / (df.max(1.0) + 0.5)).ln());
            impacts.push(held);
        }
        Ok(QueryTerms {
            terms,
            weights,
            impacts,
        })
    }

    /// How much of a text's vocabulary (`query_terms`) entry number `entry` (its
    /// position in `kb().entries()`) shares, so
    /// sharing only common words scores low: the idf-weighted share of the text's
    /// distinct terms that occur in the entry, 0..=1.
    pub fn coverage(&self, query: &QueryTerms, entry: usize) -> f32 {
        let total: f32 = query.weights.iter().sum();
        if total <= 0.0 {
            return 0.0;
        }
        let found: f32 = self.shared(query, entry).map(|(_, weight)| weight).sum();
        found / total
    }

    /// The terms of `query` that occur in entry number `entry`, rarest first (analysed
    /// form: lowercased, stemmed).
    pub fn shared_terms(&self, query: &QueryTerms, entry: usize) -> Vec<String> {
        let mut shared: Vec<(&str, f32)> = self.shared(query, entry).collect();
        shared.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        shared.into_iter().map(|(t, _)| t.to_string()).collect()
    }

    /// (term, weight) of the terms of `query` that occur in entry number `entry`.
    fn shared<'q>(
        &self,
        query: &'q QueryTerms,
        entry: usize,
    ) -> impl Iterator<Item = (&'q str, f32)> + 'q {
        let ordinal = self.ordinal_of.get(entry).copied();
        query
            .terms
            .iter()
            .zip(&query.weights)
            .zip(&query.impacts)
            .filter(move |(_, held)| ordinal.is_some_and(|o| held.holds(o)))
            .map(|((&term, &weight), _)| (term, weight))
    }

    /// Entries whose closest symptom, title or summary phrase matches `text`, with that
    /// phrase's score, best first.
    /// (position in `kb().entries()`, score).
    pub fn match_phrases(&self, text: &Analysed) -> Result<Vec<(usize, f32)>, SearchError> {
        self.describing.best(text)
    }

    /// How completely one passage of entry number `entry` (a signature, an example line, a body
    /// line) holds the words of a text: the idf-weighted share of the text's distinct
    /// terms found in the entry's best passage, 0..=1. Words scattered over a long entry
    /// do not count; a message the entry quotes does. `query` is `query_terms(text)`,
    /// computed once for several entries. The cost grows with the entry's passages,
    /// not with the knowledge base.
    pub fn explains(&self, query: &QueryTerms, entry: usize) -> Result<f32, SearchError> {
        let total: f32 = query.weights.iter().sum();
        let passages = self.quoting.passages_of(entry);
        if total <= 0.0 || passages.is_empty() {
            return Ok(0.0);
        }
        let (first, last) = (passages[0], passages[passages.len() - 1]);
        let mut found = vec![0.0f32; passages.len()];
        for (term, weight) in query.terms.iter().zip(&query.weights) {
            for ordinal in self.quoting.holding_in(term, first, last)? {
                if let Ok(k) = passages.binary_search(&ordinal) {
                    found[k] += weight;
                }
            }
        }
        let best = found.into_iter().fold(0.0f32, f32::max);
        Ok(best / total)
    }

    /// The analysed terms of `text` (lowercased, stemmed words), in order.
    pub fn words(&self, text: &str) -> Vec<String> {
        let Some(mut analyzer) = self.index.tokenizers().get(analysis::WORDS) else {
            return Vec::new();
        };
        let mut words = Vec::new();
        analysis::analyze_first(&mut analyzer, text, usize::MAX, |t| {
            words.push(t.text.clone())
        });
        words
    }
}
