//! Query scoring over a tantivy index without tantivy's per-query machinery.
//!
//! A query is planned once into weighted single terms and exact phrases. Each single
//! term's BM25 contribution to every document ("impacts": the best part's boosted
//! score plus a little for the others) is read once from the index's postings and
//! field norms with tantivy's own `Bm25Weight`, then cached for the life of the index.
//! Scoring a query is then a sum over a few short lists. Phrases, which need
//! positions, still run as tantivy phrase queries.
//!
//! Why: for a knowledge base of hundreds of entries, building a tantivy query (a term
//! lookup, a BM25 weight and a scorer per term and field: 21 fields per word) costs
//! milliseconds while the scoring itself costs microseconds. The cached impacts make
//! that setup a hash lookup per term, and the scores come out the same.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Arc;

use rustc_hash::FxHashMap;
use tantivy::postings::Postings;
use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, BoostQuery, DisjunctionMaxQuery,
    EnableScoring, Occur, PhraseQuery, Query,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::Token;
use tantivy::{DocSet, Index, Searcher, SegmentReader, TERMINATED, Term};

use super::analysis;
use super::schema::{FieldKind, PartFields};
use super::{CacheStats, SearchError};

/// Only the first this-many words of a query are used: enough for a question or the
/// error messages of a log, and it bounds the cost of a query built from a paste.
pub const MAX_QUERY_TERMS: usize = 160;
/// Longest word sequence tried as an exact phrase.
const MAX_PHRASE_TERMS: usize = 16;
/// A text of more identifier parts than this is long (a paste, not a question): its
/// stop words are left out of its plan (see `QueryPlan::new`).
const LONG_QUERY_WORDS: usize = 32;
/// How much the parts other than the best one add to a term's score.
const TIE_BREAKER: f32 = 0.1;
/// Weights of the three kinds of term: whole words count most; identifier parts and
/// Chinese grams overlap with words and with each other, so they count less.
const WORD_WEIGHT: f32 = 1.0;
const WORD_PHRASE_WEIGHT: f32 = 2.0;
const IDENT_WEIGHT: f32 = 0.4;
const GRAM_WEIGHT: f32 = 0.8;
const CACHE_SHARDS: usize = 8;
/// The champion list of a term (see `Scoring::Champions`): its highest impacts in
/// this many documents (per entry: an index of passages gets as many per entry as it
/// has passages per entry). A knowledge base of no more entries scores exactly.
pub const CHAMPIONS: usize = 4096;

/// How a ranking adds up its terms' scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scoring {
    /// Every impact: search, where a reader compares the whole list.
    Exact,
    /// Each term's champion list: diagnosis, where signatures and the paste's
    /// structure carry most of the answer and a long paste holds many common words.
    /// Each term adds to the documents it scores highest in, at most `champions` of
    /// them: exactly `Exact` while no term is held by more documents than that (any
    /// knowledge base of up to `CHAMPIONS` entries); in a larger one, a common word no
    /// longer adds its small share to most documents, which was most of the cost of
    /// ranking a long paste. Documents that score only by many such shares can rank
    /// lower than they should.
    Champions,
}

/// Terms with their positions in the text, as analyzers produce them.
pub type Positioned = Vec<(usize, String)>;

/// What a query text scores with in one index: each distinct term once, and the word
/// sequences that also score as exact phrases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryPlan<'a> {
    pub terms: Vec<PlannedTerm<'a>>,
    /// (analyzer, positioned terms, weight).
    pub phrases: Vec<(FieldKind, Positioned, f32)>,
}

/// A term of a plan, with the impacts looked up to plan it (so scoring does not look
/// them up again).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTerm<'a> {
    pub kind: FieldKind,
    /// The term, as the analysed text holds it.
    pub text: &'a str,
    pub weight: f32,
    /// The term's impacts in the index planned for: never empty.
    pub impacts: Impacts,
}

/// A text analysed once by all three analyzers, to be planned against several indexes.
#[derive(Debug, Clone, Default)]
pub struct Analysed {
    /// The words analyzer's terms, at most `MAX_QUERY_TERMS`.
    words: Terms,
    /// The same from the identifier-parts analyzer.
    idents: Terms,
    /// Chinese runs as grams (see `analysis::gram_query_terms`).
    pub grams: Vec<Vec<String>>,
    /// Where in `words` each distinct word is first, sorted as strings: a text is
    /// planned against several indexes, and sorted once.
    distinct_words: Vec<usize>,
    /// The same for `idents`.
    distinct_idents: Vec<usize>,
    /// Where in the text each of `words` starts (a byte offset).
    word_starts: Vec<usize>,
}

/// An analyzer's terms with their positions, kept in one string: a long query holds
/// hundreds, and this makes them one allocation rather than one each.
#[derive(Debug, Clone, Default)]
struct Terms {
    text: String,
    /// (position, end of the term in `text`); each term starts where the one before
    /// it ends.
    terms: Vec<(usize, usize)>,
}

impl Terms {
    fn push(&mut self, position: usize, term: &str) {
        self.text.push_str(term);
        self.terms.push((position, self.text.len()));
    }

    fn len(&self) -> usize {
        self.terms.len()
    }

    fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    fn get(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |before| self.terms[before].1);
        &self.text[start..self.terms[i].1]
    }

    /// (position, term), in order.
    fn iter(&self) -> impl Iterator<Item = (usize, &str)> {
        (0..self.len()).map(|i| (self.terms[i].0, self.get(i)))
    }
}

impl Analysed {
    /// Analyses `text` with `index`'s registered analyzers.
    pub fn new(index: &Index, text: &str) -> Analysed {
        let analyze = |name: &str, each: &mut dyn FnMut(&Token)| {
            if let Some(mut analyzer) = index.tokenizers().get(name) {
                analysis::analyze_first(&mut analyzer, text, MAX_QUERY_TERMS, each);
            }
        };
        let (mut words, mut word_starts, mut idents) =
            (Terms::default(), Vec::new(), Terms::default());
        analyze(analysis::WORDS, &mut |t| {
            words.push(t.position, &t.text);
            word_starts.push(t.offset_from);
        });
        analyze(analysis::IDENT, &mut |t| idents.push(t.position, &t.text));
        Analysed {
            distinct_words: distinct(&words),
            distinct_idents: distinct(&idents),
            words,
            idents,
            grams: analysis::gram_query_terms(text),
            word_starts,
        }
    }

    /// The words of the piece `range` of the text, as analysing the piece alone gives
    /// them, for a piece between line breaks (no word spans one). `None` when the text
    /// was cut at `MAX_QUERY_TERMS` words before the end of the piece.
    pub fn words_in(
        &self,
        range: std::ops::Range<usize>,
    ) -> Option<impl Iterator<Item = &str> + '_> {
        let cut = self.words.len() >= MAX_QUERY_TERMS;
        if cut && self.word_starts.last().is_none_or(|&last| last < range.end) {
            return None;
        }
        let first = self.word_starts.partition_point(|&s| s < range.start);
        let end = self.word_starts.partition_point(|&s| s < range.end);
        Some((first..end).map(|i| self.words.get(i)))
    }

    /// Each word once, sorted as strings.
    pub fn distinct_words(&self) -> impl Iterator<Item = &str> {
        self.distinct_words.iter().map(|&i| self.words.get(i))
    }

    /// Each identifier part once, sorted as strings.
    pub fn distinct_idents(&self) -> impl Iterator<Item = &str> {
        self.distinct_idents.iter().map(|&i| self.idents.get(i))
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.idents.is_empty() && self.grams.is_empty()
    }
}

impl<'a> QueryPlan<'a> {
    /// Plans an analysed text, `impacts` giving each term's impacts in the index planned
    /// for. Terms no document holds (no impacts) are left out, and so are phrases
    /// holding one. `None` when the text has no term at all.
    pub fn new(
        text: &'a Analysed,
        impacts: &dyn Fn(FieldKind, &str) -> Result<Impacts, SearchError>,
    ) -> Result<Option<QueryPlan<'a>>, SearchError> {
        if text.is_empty() {
            return Ok(None);
        }
        let mut plan = QueryPlan::default();
        let push = |terms: &mut Vec<PlannedTerm<'a>>,
                    kind: FieldKind,
                    term: &'a str,
                    weight: f32|
         -> Result<bool, SearchError> {
            let impacts = impacts(kind, term)?;
            let known = !impacts.is_empty();
            if known {
                terms.push(PlannedTerm {
                    kind,
                    text: term,
                    weight,
                    impacts,
                });
            }
            Ok(known)
        };
        let mut all_known = true;
        for term in text.distinct_words() {
            all_known &= push(&mut plan.terms, FieldKind::Words, term, WORD_WEIGHT)?;
        }
        // Identifier parts keep stop words (the `is` of `is_initialized`). In a question
        // they count ("uses more memory than the others"), but in a long text (a paste)
        // its `the` and `of` find nothing worth finding: in a short passage they scored
        // as much as a content word, and at 100,000 entries each was a long list to add
        // up. There they are looked for only when the text has nothing else.
        let long = text.idents.len() > LONG_QUERY_WORDS;
        let mut stop_words = Vec::new();
        for term in text.distinct_idents() {
            if long && analysis::is_stop_word(term) {
                stop_words.push(term);
            } else {
                push(&mut plan.terms, FieldKind::Ident, term, IDENT_WEIGHT)?;
            }
        }
        if all_known && (2..=MAX_PHRASE_TERMS).contains(&text.words.len()) {
            // The words in order: an error string typed as written ranks its entry first.
            let words = text.words.iter().map(|(p, w)| (p, w.to_string())).collect();
            plan.phrases
                .push((FieldKind::Words, words, WORD_PHRASE_WEIGHT));
        }
        for run in &text.grams {
            if let [gram] = run.as_slice() {
                push(&mut plan.terms, FieldKind::Gram, gram, GRAM_WEIGHT)?;
                continue;
            }
            let mut known = true;
            for gram in run {
                known = known && !impacts(FieldKind::Gram, gram)?.is_empty();
            }
            if known && !run.is_empty() {
                let positioned = run.iter().cloned().enumerate().collect();
                plan.phrases
                    .push((FieldKind::Gram, positioned, GRAM_WEIGHT));
            }
        }
        if plan.terms.is_empty() && plan.phrases.is_empty() {
            for term in stop_words {
                push(&mut plan.terms, FieldKind::Ident, term, IDENT_WEIGHT)?;
            }
        }
        Ok(Some(plan))
    }

    /// Every term the plan looks for, by analyzer, but stop words: what a snippet
    /// should highlight. (A query of nothing but stop words looks for them as
    /// identifier parts; marked, they would mark every `then` and `other` in a body.)
    pub fn highlight_terms(&self, kind: FieldKind) -> BTreeSet<&str> {
        let singles = self.terms.iter().filter(|t| t.kind == kind).map(|t| t.text);
        let in_phrases = self
            .phrases
            .iter()
            .filter(|p| p.0 == kind)
            .flat_map(|p| p.1.iter().map(|(_, t)| t.as_str()));
        singles
            .chain(in_phrases)
            .filter(|t| !analysis::is_stop_word(t))
            .collect()
    }
}

/// Where each distinct term is first in `terms`, sorted as strings.
fn distinct(terms: &Terms) -> Vec<usize> {
    // A long text repeats its words: each is kept once (its first place) by hashing,
    // then only the distinct ones are sorted, with each term's first eight bytes as an
    // integer ahead of it so that most comparisons are of integers.
    let mut first: FxHashMap<&str, usize> = FxHashMap::default();
    first.reserve(terms.len());
    for at in 0..terms.len() {
        first.entry(terms.get(at)).or_insert(at);
    }
    let mut order: Vec<(u64, &str, usize)> = first
        .into_iter()
        .map(|(term, at)| (leading_bytes(term), term, at))
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, _, at)| at).collect()
}

/// The first eight bytes of `term` as a big-endian integer (zeros past its end): one
/// term's is smaller than another's only if the term sorts first.
fn leading_bytes(term: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let n = term.len().min(8);
    bytes[..n].copy_from_slice(&term.as_bytes()[..n]);
    u64::from_be_bytes(bytes)
}

/// One document's share of one term's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impact {
    /// The document's ordinal: its position over all segments (see `Scorer::segments`).
    pub doc: u32,
    pub score: f32,
}

/// A term's impacts, by ordinal (derefs to all of them), with its champions.
pub type Impacts = Arc<TermImpacts>;

/// Every impact of a term, by ordinal, and its champion list: the highest few.
#[derive(Debug, PartialEq)]
pub struct TermImpacts {
    all: Box<[Impact]>,
    /// The term's `champions` highest impacts (ties: lower ordinal), by ordinal; `None`
    /// when it has no more than that, so its champions are all of them.
    champions: Option<Box<[Impact]>>,
}

impl TermImpacts {
    /// `all` (by ordinal) with the best `champions` of them set aside.
    pub fn new(all: Vec<Impact>, champions: usize) -> TermImpacts {
        let champions = (all.len() > champions).then(|| {
            let mut best = all.clone();
            if champions > 0 {
                best.select_nth_unstable_by(champions - 1, |a, b| {
                    b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc))
                });
            }
            best.truncate(champions);
            best.sort_unstable_by_key(|i| i.doc);
            best.into_boxed_slice()
        });
        TermImpacts {
            all: all.into_boxed_slice(),
            champions,
        }
    }

    /// Only the best `champions` of `all` (by ordinal), as if they were all the term's
    /// impacts, for a scorer that never adds up more (see `Scorer::champions_only`).
    pub fn champions_only(mut all: Vec<Impact>, champions: usize) -> TermImpacts {
        if champions > 0 && all.len() > champions {
            // The same choice as `new`'s.
            all.select_nth_unstable_by(champions - 1, |a, b| {
                b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc))
            });
            all.truncate(champions);
            all.sort_unstable_by_key(|i| i.doc);
        }
        TermImpacts::new(all, usize::MAX)
    }

    /// Whether the document at `ordinal` holds the term.
    pub fn holds(&self, ordinal: u32) -> bool {
        self.all.binary_search_by_key(&ordinal, |i| i.doc).is_ok()
    }

    /// The term's highest impacts, by ordinal (all of them for a term few documents
    /// hold).
    pub fn champions(&self) -> &[Impact] {
        self.champions.as_deref().unwrap_or(&self.all)
    }

    /// The impacts `scoring` adds up: all of them, or the champions.
    pub fn list(&self, scoring: Scoring) -> &[Impact] {
        match scoring {
            Scoring::Exact => &self.all,
            Scoring::Champions => self.champions(),
        }
    }

    /// What the term costs in memory, in bytes: the struct and its impacts (the
    /// champions' copies included).
    fn bytes(&self) -> usize {
        let impacts = self.all.len() + self.champions.as_ref().map_or(0, |c| c.len());
        std::mem::size_of::<TermImpacts>() + impacts * std::mem::size_of::<Impact>()
    }
}

impl std::ops::Deref for TermImpacts {
    type Target = [Impact];

    fn deref(&self) -> &[Impact] {
        &self.all
    }
}

/// Impacts by term, over the three analyzers; weighed by their length.
type TermCache = quick_cache::sync::Cache<TermKey, Impacts, ImpactsWeight>;

/// What a cached list holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Listed {
    /// One analyzer's term: its impacts and champions.
    Term(FieldKind),
    /// A word and the identifier part spelled the same, weighed and added together
    /// (see `Scorer::lists`): the lists of both that the scoring adds up.
    Twins(Scoring),
}

/// A cached list: what it holds and the term's text.
#[derive(Clone, PartialEq, Eq, Hash)]
struct TermKey {
    kind: Listed,
    text: Box<str>,
}

/// A `TermKey` to look up without copying the text; hashes as the key does.
#[derive(Hash)]
struct TermRef<'a> {
    kind: Listed,
    text: &'a str,
}

impl quick_cache::Equivalent<TermKey> for TermRef<'_> {
    fn equivalent(&self, key: &TermKey) -> bool {
        self.kind == key.kind && *self.text == *key.text
    }
}

#[derive(Clone)]
struct ImpactsWeight;

impl quick_cache::Weighter<TermKey, Impacts> for ImpactsWeight {
    /// In bytes: the term's impacts, its key and text, and the cache's own bookkeeping,
    /// so that many terms no entry holds (a log's own words) are counted at what they
    /// cost.
    fn weight(&self, term: &TermKey, impacts: &Impacts) -> u64 {
        (impacts.bytes() + std::mem::size_of::<TermKey>() + term.text.len() + CACHE_SLOT_BYTES)
            as u64
    }
}

/// What a cached item costs beside its key and value: the `Arc`'s counts,
/// allocations rounded up to their size class, and the cache's slot and table.
pub(super) const CACHE_SLOT_BYTES: usize = 96;

/// One cache for the three analyzers, so the budget goes where the queries are: an
/// English paste holds as many identifier parts as words and no grams, a Chinese
/// question mostly grams. `bytes` is its share of the `CacheBudget`. The cache is split
/// into `CACHE_SHARDS` shards, a fixed count rather than one per core, so that each
/// shard's budget holds a term held by every document on any machine.
fn term_cache(bytes: u64) -> TermCache {
    let options = quick_cache::OptionsBuilder::new()
        .estimated_items_capacity(32 << 10)
        .weight_capacity(bytes)
        .shards(CACHE_SHARDS)
        .build()
        .expect("valid cache options");
    TermCache::with_options(
        options,
        ImpactsWeight,
        Default::default(),
        Default::default(),
    )
}

/// Scores query plans against one index: its parts (boost, fields), its BM25
/// statistics, and the cache of term impacts.
pub struct Scorer {
    searcher: Searcher,
    stats: Box<dyn Bm25StatisticsProvider + Send + Sync>,
    parts: Vec<(f32, PartFields)>,
    /// The ordinal of each segment's first document.
    bases: Vec<u32>,
    num_docs: usize,
    /// How many of a term's impacts its champion list holds (see `Scoring::Champions`).
    champions: usize,
    /// Whether it keeps only each term's champions (see `champions_only`).
    only_champions: bool,
    cache: TermCache,
}

impl Scorer {
    /// `searcher` must be of an index that no longer changes.
    pub fn new(
        searcher: Searcher,
        stats: Box<dyn Bm25StatisticsProvider + Send + Sync>,
        parts: Vec<(f32, PartFields)>,
        cache_bytes: u64,
    ) -> Scorer {
        let mut bases = Vec::with_capacity(searcher.segment_readers().len());
        let mut num_docs = 0u32;
        for segment in searcher.segment_readers() {
            bases.push(num_docs);
            num_docs += segment.max_doc();
        }
        Scorer {
            searcher,
            stats,
            parts,
            bases,
            num_docs: num_docs as usize,
            champions: CHAMPIONS,
            only_champions: false,
            cache: term_cache(cache_bytes),
        }
    }

    /// The same scorer with champion lists of `champions` impacts per term (for an
    /// index of several documents per entry, that many times `CHAMPIONS`).
    pub fn with_champions(self, champions: usize) -> Scorer {
        Scorer { champions, ..self }
    }

    /// The same scorer keeping only each term's champion list, for an index that is
    /// only ever ranked with `Scoring::Champions`: its scores are the same, and a
    /// common word's cached impacts a tenth of the size at 100,000 entries (a describing
    /// passage index's word held by 500,000 passages keeps 40,960), so the term cache
    /// holds the words of many more pastes. Its terms' other impacts are not known:
    /// `Scoring::Exact`, `TermImpacts::holds` and a term's length (its document count)
    /// see only the champions.
    pub fn champions_only(self) -> Scorer {
        Scorer {
            only_champions: true,
            ..self
        }
    }

    /// Number of document ordinals: scores are indexed by ordinal.
    pub fn num_docs(&self) -> usize {
        self.num_docs
    }

    pub fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    /// Each segment with the ordinal of its first document.
    pub fn segments(&self) -> impl Iterator<Item = (u32, &SegmentReader)> + '_ {
        self.bases
            .iter()
            .copied()
            .zip(self.searcher.segment_readers())
    }

    /// Plans `text` against this index (see `QueryPlan::new`).
    pub fn plan<'a>(&self, text: &'a Analysed) -> Result<Option<QueryPlan<'a>>, SearchError> {
        QueryPlan::new(text, &|kind, term| self.impacts(kind, term))
    }

    /// The term's score in each document that holds it, by ordinal.
    pub fn impacts(&self, kind: FieldKind, term: &str) -> Result<Impacts, SearchError> {
        let listed = Listed::Term(kind);
        if let Some(found) = self.cache.get(&TermRef {
            kind: listed,
            text: term,
        }) {
            return Ok(found);
        }
        let read = self.read_impacts(kind, term)?;
        let impacts = Arc::new(if self.only_champions {
            TermImpacts::champions_only(read, self.champions)
        } else {
            TermImpacts::new(read, self.champions)
        });
        // A term no entry holds is kept too: a log's own words (host names, job and
        // module names) come back with every paste of it, and a miss costs a dictionary
        // lookup per part. Its key is weighed like any other (see `ImpactsWeight`), so
        // the endless new words of queries cannot grow memory past the budget.
        let key = TermKey {
            kind: listed,
            text: term.into(),
        };
        self.cache.insert(key, impacts.clone());
        Ok(impacts)
    }

    /// Forgets every cached impact (the next queries read the postings again).
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// How often the cache of impacts answered, and how often the postings were read.
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats::from(&self.cache)
    }

    /// Reads the term's postings in every part: per document, the best part's boosted
    /// BM25 score plus `TIE_BREAKER` times the others', exactly as a disjunction-max
    /// query over the parts would score it.
    fn read_impacts(&self, kind: FieldKind, text: &str) -> Result<Vec<Impact>, SearchError> {
        // (ordinal, max, sum) for the documents that hold the term in some part so far,
        // by ordinal. A part's postings come out by ordinal too (segments in order,
        // documents ascending within each), so each part is merged in one pass.
        let mut found: Vec<(u32, f32, f32)> = Vec::new();
        let mut part: Vec<(u32, f32)> = Vec::new();
        for (boost, fields) in &self.parts {
            let field = kind.field(fields);
            let term = Term::from_field_text(field, text);
            let mut weight = None;
            part.clear();
            for (segment_ord, segment) in self.searcher.segment_readers().iter().enumerate() {
                let inverted = segment.inverted_index(field)?;
                let Some(mut postings) =
                    inverted.read_postings(&term, IndexRecordOption::WithFreqs)?
                else {
                    continue;
                };
                let weight = match &weight {
                    Some(w) => w,
                    None => weight.insert(
                        Bm25Weight::for_terms(&*self.stats, std::slice::from_ref(&term))?
                            .boost_by(*boost),
                    ),
                };
                let norms = segment.get_fieldnorms_reader(field)?;
                let base = self.bases[segment_ord];
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    let score = weight.score(norms.fieldnorm_id(doc), postings.term_freq());
                    part.push((base + doc, score));
                    doc = postings.advance();
                }
            }
            found = merge_part(found, &part);
        }
        Ok(found
            .into_iter()
            .map(|(doc, max, sum)| Impact {
                doc,
                score: max + (sum - max) * TIE_BREAKER,
            })
            .collect())
    }

    /// The plan's score for every document, by ordinal (0 where nothing matched), from
    /// every impact or each term's champion list (see `Scoring`): the plain sum that
    /// `top_by` is tested against.
    #[cfg(test)]
    pub fn scores_by(&self, plan: &QueryPlan, scoring: Scoring) -> Result<Vec<f32>, SearchError> {
        let mut scores = vec![0.0f32; self.num_docs];
        for (weight, impacts) in self.lists(plan, scoring) {
            for impact in impacts.list(scoring) {
                scores[impact.doc as usize] += weight * impact.score;
            }
        }
        for (ordinal, score) in self.phrase_scores(plan)? {
            scores[ordinal as usize] += score;
        }
        Ok(scores)
    }

    /// The best `limit` documents for `plan` among those `keep` accepts (all of them
    /// without it), best first: the plan's terms' lists (every impact, or each term's
    /// champions; see `Scoring`) and its phrases added up by document, as `top` of
    /// `scores_by` gives them.
    ///
    /// The sums go into a score per document kept by the thread (zeroed again when the
    /// ranking ends), and one pass keeps the best `limit` as it reads them.
    pub fn top_by(
        &self,
        plan: &QueryPlan,
        scoring: Scoring,
        limit: usize,
        keep: Option<&dyn Fn(u32) -> bool>,
    ) -> Result<Vec<(u32, f32)>, SearchError> {
        Ok(self.rank(plan, scoring, limit, keep, false)?.0)
    }

    /// `top_by`, and how many documents `keep` accepts score at all: the whole of which
    /// a page of search results is a part.
    pub fn top_counted(
        &self,
        plan: &QueryPlan,
        scoring: Scoring,
        limit: usize,
        keep: Option<&dyn Fn(u32) -> bool>,
    ) -> Result<(Vec<(u32, f32)>, usize), SearchError> {
        self.rank(plan, scoring, limit, keep, true)
    }

    /// `top_by`, with the documents that score counted when `count` asks (else 0):
    /// counting reads every chunk, where ranking alone skips those below the bar.
    fn rank(
        &self,
        plan: &QueryPlan,
        scoring: Scoring,
        limit: usize,
        keep: Option<&dyn Fn(u32) -> bool>,
        count: bool,
    ) -> Result<(Vec<(u32, f32)>, usize), SearchError> {
        let phrases = self.phrase_scores(plan)?;
        Ok(SUMS.with_borrow_mut(|sums| {
            let sums = Sums::new(sums, self.num_docs);
            for (weight, impacts) in self.lists(plan, scoring) {
                for impact in impacts.list(scoring) {
                    sums.0[impact.doc as usize] += weight * impact.score;
                }
            }
            for &(ordinal, score) in &phrases {
                sums.0[ordinal as usize] += score;
            }
            let mut best = Best::new(limit);
            let mut scored = 0;
            for (chunk_index, chunk) in sums.0.chunks(CHUNK).enumerate() {
                let ordinal = |i: usize| (chunk_index * CHUNK + i) as u32;
                if count {
                    scored += match keep {
                        None => chunk.iter().filter(|&&score| score > 0.0).count(),
                        Some(keep) => (chunk.iter().enumerate())
                            .filter(|&(i, &score)| score > 0.0 && keep(ordinal(i)))
                            .count(),
                    };
                }
                // Most chunks hold nothing above the bar once it is set.
                if maximum(chunk) <= best.bar {
                    continue;
                }
                for (i, &score) in chunk.iter().enumerate() {
                    if score > best.bar && keep.is_none_or(|keep| keep(ordinal(i))) {
                        best.offer(ordinal(i), score);
                    }
                }
            }
            (best.into_sorted(), scored)
        }))
    }

    /// The score of each document the plan's phrases match, by ordinal: read segment by
    /// segment in document order, as a collector would see them, without ranking them.
    fn phrase_scores(&self, plan: &QueryPlan) -> Result<Vec<(u32, f32)>, SearchError> {
        let mut scores = Vec::new();
        if plan.phrases.is_empty() {
            return Ok(scores);
        }
        let weight =
            self.phrase_query(plan)
                .weight(EnableScoring::enabled_from_statistics_provider(
                    &*self.stats,
                    &self.searcher,
                ))?;
        for (base, segment) in self.segments() {
            let alive = segment.alive_bitset();
            weight.for_each(segment, &mut |doc, score| {
                if alive.is_none_or(|alive| alive.is_alive(doc)) {
                    scores.push((base + doc, score));
                }
            })?;
        }
        Ok(scores)
    }

    /// The lists to add up for `plan`'s terms, with their weights. Most words of a text
    /// are also identifier parts spelled the same, held by much the same documents: the
    /// two are one list of both weighed impacts added by document (built once and
    /// cached), so that a document holding both is added to once. At 100,000 entries
    /// that was a third of what a paste added up. Lists shorter than `TWIN_MIN` stay
    /// apart: looking their sum up would cost more than it saves.
    fn lists(&self, plan: &QueryPlan, scoring: Scoring) -> Vec<(f32, Impacts)> {
        let long = |t: &PlannedTerm| t.impacts.list(scoring).len() >= TWIN_MIN;
        // The plan's words come first, sorted as strings (see `QueryPlan::new`).
        let words = plan
            .terms
            .iter()
            .position(|t| t.kind != FieldKind::Words)
            .unwrap_or(plan.terms.len());
        debug_assert!(plan.terms[..words].is_sorted_by_key(|t| t.text));
        // The identifier part spelled the same as each word, if any; and which parts
        // are added with their word.
        let mut twin: Vec<Option<usize>> = vec![None; words];
        let mut paired = vec![false; plan.terms.len()];
        for (i, ident) in plan.terms.iter().enumerate().skip(words) {
            if ident.kind != FieldKind::Ident || !long(ident) {
                continue;
            }
            let word = plan.terms[..words].binary_search_by_key(&ident.text, |t| t.text);
            if let Ok(w) = word
                && long(&plan.terms[w])
            {
                twin[w] = Some(i);
                paired[i] = true;
            }
        }
        let mut lists = Vec::with_capacity(plan.terms.len());
        for (i, term) in plan.terms.iter().enumerate() {
            match twin.get(i).copied().flatten() {
                Some(ident) => {
                    lists.push((1.0, self.twins(term, &plan.terms[ident], scoring)));
                }
                None if !paired[i] => lists.push((term.weight, term.impacts.clone())),
                // Added with the word spelled the same.
                None => {}
            }
        }
        lists
    }

    /// `word`'s and `ident`'s impacts (the same text), each times its weight, added by
    /// document: the lists of each that `scoring` adds up (so that the sum is what
    /// adding up the two gives). Cached like a term.
    fn twins(&self, word: &PlannedTerm, ident: &PlannedTerm, scoring: Scoring) -> Impacts {
        let kind = Listed::Twins(scoring);
        if let Some(found) = self.cache.get(&TermRef {
            kind,
            text: word.text,
        }) {
            return found;
        }
        let added = added(
            word.impacts.list(scoring),
            word.weight,
            ident.impacts.list(scoring),
            ident.weight,
        );
        // Built from the lists `scoring` adds up: its own champion list is all of it.
        let impacts = Arc::new(TermImpacts::new(added, usize::MAX));
        let key = TermKey {
            kind,
            text: word.text.into(),
        };
        self.cache.insert(key, impacts.clone());
        impacts
    }

    /// The plan's phrases as one tantivy query: each phrase scores by its best part.
    fn phrase_query(&self, plan: &QueryPlan) -> BooleanQuery {
        let clauses = plan
            .phrases
            .iter()
            .map(|(kind, terms, weight)| {
                let best =
                    self.best_part(*weight, &|fields| phrase_query(kind.field(fields), terms));
                (Occur::Should, best)
            })
            .collect();
        BooleanQuery::new(clauses)
    }

    /// `make`'s query on every part, boosted by `weight` times the part's boost, scoring
    /// by the best part plus `TIE_BREAKER` times the others.
    fn best_part(
        &self,
        weight: f32,
        make: &dyn Fn(&PartFields) -> Box<dyn Query>,
    ) -> Box<dyn Query> {
        let disjuncts = self
            .parts
            .iter()
            .map(|(boost, fields)| {
                Box::new(BoostQuery::new(make(fields), weight * boost)) as Box<dyn Query>
            })
            .collect();
        Box::new(DisjunctionMaxQuery::with_tie_breaker(
            disjuncts,
            TIE_BREAKER,
        ))
    }
}

fn phrase_query(field: Field, terms: &[(usize, String)]) -> Box<dyn Query> {
    let first = terms.first().map(|(p, _)| *p).unwrap_or(0);
    Box::new(PhraseQuery::new_with_offset(
        terms
            .iter()
            .map(|(p, t)| (p - first, Term::from_field_text(field, t)))
            .collect(),
    ))
}

/// Walks two lists sorted by ordinal (`ordinal_a`, `ordinal_b`) together: `each` is
/// called once per ordinal either holds, in order, with its item in each.
fn by_ordinal<A, B>(
    a: &[A],
    b: &[B],
    ordinal_a: impl Fn(&A) -> u32,
    ordinal_b: impl Fn(&B) -> u32,
    mut each: impl FnMut(Option<&A>, Option<&B>),
) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match ordinal_a(&a[i]).cmp(&ordinal_b(&b[j])) {
            std::cmp::Ordering::Less => {
                each(Some(&a[i]), None);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                each(None, Some(&b[j]));
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                each(Some(&a[i]), Some(&b[j]));
                i += 1;
                j += 1;
            }
        }
    }
    a[i..].iter().for_each(|x| each(Some(x), None));
    b[j..].iter().for_each(|y| each(None, Some(y)));
}

/// `a` times `weight_a` and `b` times `weight_b`, added by document; both by ordinal,
/// and so is the result.
fn added(a: &[Impact], weight_a: f32, b: &[Impact], weight_b: f32) -> Vec<Impact> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    by_ordinal(
        a,
        b,
        |x| x.doc,
        |y| y.doc,
        |x, y| {
            let doc = x.or(y).map_or(0, |i| i.doc);
            let score =
                x.map_or(0.0, |x| weight_a * x.score) + y.map_or(0.0, |y| weight_b * y.score);
            out.push(Impact { doc, score });
        },
    );
    out
}

/// `found` (ordinal, max, sum) with one more part's (ordinal, score) added; both by
/// ordinal, and so is the result.
fn merge_part(found: Vec<(u32, f32, f32)>, part: &[(u32, f32)]) -> Vec<(u32, f32, f32)> {
    debug_assert!(part.windows(2).all(|w| w[0].0 < w[1].0));
    let single = |&(doc, score): &(u32, f32)| (doc, score, score);
    if found.is_empty() {
        return part.iter().map(single).collect();
    }
    let mut out = Vec::with_capacity(found.len() + part.len());
    by_ordinal(
        &found,
        part,
        |f| f.0,
        |p| p.0,
        |had, new| {
            out.push(match (had, new) {
                (Some(&(doc, max, sum)), Some(&(_, score))) => (doc, max.max(score), sum + score),
                (Some(&had), None) => had,
                (None, Some(new)) => single(new),
                (None, None) => unreachable!("each ordinal is in one list or both"),
            })
        },
    );
    out
}

/// Ordinals with a positive score, best first (ties: lower ordinal first), at most
/// `limit` of them: the plain ranking `Scorer::top_by` is tested against.
#[cfg(test)]
pub fn top(scores: &[f32], limit: usize) -> Vec<(u32, f32)> {
    let better = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut found: Vec<(u32, f32)> = (scores.iter().enumerate())
        .filter(|(_, score)| **score > 0.0)
        .map(|(ordinal, &score)| (ordinal as u32, score))
        .collect();
    found.sort_by(better);
    found.truncate(limit);
    found
}

/// The best `limit` positive scores offered, ordinals offered in ascending order.
struct Best {
    limit: usize,
    /// Worst kept on top.
    kept: BinaryHeap<Reverse<u64>>,
    /// The score to beat: 0 until `limit` are kept, then the worst kept (a later tie
    /// with it has a higher ordinal, so is worse).
    bar: f32,
}

impl Best {
    fn new(limit: usize) -> Best {
        Best {
            limit,
            kept: BinaryHeap::with_capacity(limit.min(1 << 16) + 1),
            bar: if limit == 0 { f32::INFINITY } else { 0.0 },
        }
    }

    /// Offers a score above the bar.
    fn offer(&mut self, ordinal: u32, score: f32) {
        let key = Reverse(rank_key(score, ordinal));
        if self.kept.len() < self.limit {
            self.kept.push(key);
        } else if let Some(mut worst) = self.kept.peek_mut() {
            *worst = key;
        }
        if self.kept.len() == self.limit
            && let Some(worst) = self.kept.peek()
        {
            self.bar = f32::from_bits((worst.0 >> 32) as u32);
        }
    }

    /// The kept scores, best first.
    fn into_sorted(self) -> Vec<(u32, f32)> {
        self.kept
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(key)| (u32::MAX - key as u32, f32::from_bits((key >> 32) as u32)))
            .collect()
    }
}

/// Scores `Scorer::top_by` rules out at once when none is above the bar.
const CHUNK: usize = 64;

/// The greatest of `scores` and 0 (a NaN counts as 0), taken in eight lanes at once,
/// which compile to SIMD maxima: the scan for the few scores above the bar reads a
/// passage index's hundreds of thousands of documents at this speed.
fn maximum(scores: &[f32]) -> f32 {
    let larger = |a: f32, b: f32| if b > a { b } else { a };
    let (lanes, rest) = scores.as_chunks::<8>();
    let mut max = [0.0f32; 8];
    for lane in lanes {
        for (max, &score) in max.iter_mut().zip(lane) {
            *max = larger(*max, score);
        }
    }
    max.into_iter()
        .chain(rest.iter().copied())
        .fold(0.0, larger)
}

/// The shortest lists of a word and of its identifier part that are added up as one
/// (see `Scorer::lists`).
const TWIN_MIN: usize = 64;

/// A positive score and its ordinal as one integer that is greater for the better of
/// the two: the higher score, or of equal scores the lower ordinal (a positive float's
/// bits order as the float does).
fn rank_key(score: f32, ordinal: u32) -> u64 {
    debug_assert!(score > 0.0);
    (u64::from(score.to_bits()) << 32) | u64::from(u32::MAX - ordinal)
}

thread_local! {
    /// A score per document for `Scorer::top_by`, zero between rankings.
    static SUMS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A ranking's sums: the thread's scores for `num_docs` documents, zeroed again when
/// the ranking ends (even by a panic), so the next one starts from zero.
struct Sums<'a>(&'a mut [f32]);

impl<'a> Sums<'a> {
    fn new(scores: &'a mut Vec<f32>, num_docs: usize) -> Sums<'a> {
        if scores.len() < num_docs {
            scores.resize(num_docs, 0.0);
        }
        Sums(&mut scores[..num_docs])
    }
}

impl Drop for Sums<'_> {
    fn drop(&mut self) {
        self.0.fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use tantivy::collector::TopDocs;
    use tantivy::query::TermQuery;
    use tantivy::schema::Schema;
    use tantivy::{TantivyDocument, doc};

    use super::*;
    use crate::search::schema::indexed_text;
    use crate::search::{register_analyzers, searcher};

    /// The same plan as one tantivy query: per term, the best part plus a little of
    /// the others; the phrases as `Scorer::phrase_query` builds them.
    fn tantivy_query(scorer: &Scorer, plan: &QueryPlan) -> BooleanQuery {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = plan
            .terms
            .iter()
            .map(|planned| {
                let best = scorer.best_part(planned.weight, &|fields| {
                    let term = Term::from_field_text(planned.kind.field(fields), planned.text);
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))
                });
                (Occur::Should, best)
            })
            .collect();
        clauses.push((Occur::Should, Box::new(scorer.phrase_query(plan))));
        BooleanQuery::new(clauses)
    }

    /// An index of (title, body) documents, and its scorer (titles boosted 4 times).
    fn titled_index(docs: &[(&str, &str)]) -> (Index, Scorer) {
        let mut builder = Schema::builder();
        let mut part = |name: &str| PartFields {
            words: builder.add_text_field(
                name,
                indexed_text(analysis::WORDS, IndexRecordOption::WithFreqsAndPositions),
            ),
            ident: builder.add_text_field(
                &format!("{name}_ident"),
                indexed_text(analysis::IDENT, IndexRecordOption::WithFreqsAndPositions),
            ),
            gram: builder.add_text_field(
                &format!("{name}_gram"),
                indexed_text(analysis::GRAM, IndexRecordOption::WithFreqsAndPositions),
            ),
        };
        let (title, body) = (part("title"), part("body"));
        let index = Index::create_in_ram(builder.build());
        register_analyzers(&index);
        let mut writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
        for &(t, b) in docs {
            let mut doc = TantivyDocument::default();
            for (fields, text) in [(title, t), (body, b)] {
                for field in [fields.words, fields.ident, fields.gram] {
                    doc.add_text(field, text);
                }
            }
            writer.add_document(doc).unwrap();
        }
        writer.add_document(doc!()).unwrap();
        writer.commit().unwrap();
        let searcher = searcher(&index).unwrap();
        let scorer = Scorer::new(
            searcher.clone(),
            Box::new(searcher.clone()),
            vec![(4.0, title), (1.0, body)],
            64 << 20,
        );
        (index, scorer)
    }

    #[test]
    fn cached_impacts_score_exactly_like_the_tantivy_query() {
        let (index, scorer) = titled_index(&[
            (
                "NCCL watchdog timeout",
                "a collective timed out on rank 3 after 600000 ms",
            ),
            (
                "CUDA out of memory",
                "显存不足 torch.OutOfMemoryError: CUDA out of memory",
            ),
            (
                "ncclInvalidUsage",
                "Duplicate GPU detected: rank 1 and rank 0 both on cuda:0",
            ),
            (
                "Training hangs",
                "多卡训练卡住 the job hangs at the end of the first epoch",
            ),
        ]);
        let searcher = scorer.searcher().clone();

        for text in [
            "NCCL timeout on rank 3",
            "nccl invalid usage duplicate GPU",
            "CUDA out of memory",
            "训练卡住 显存",
            "hangs at the end of the first epoch",
            "no such words anywhere",
        ] {
            let analysed = Analysed::new(&index, text);
            let Some(plan) = scorer.plan(&analysed).unwrap() else {
                continue;
            };
            let ours = scorer.scores_by(&plan, Scoring::Exact).unwrap();
            let theirs = searcher
                .search(
                    &tantivy_query(&scorer, &plan),
                    &TopDocs::with_limit(10).order_by_score(),
                )
                .unwrap();
            assert_eq!(
                ours.iter().filter(|s| **s > 0.0).count(),
                theirs.len(),
                "{text}: the same documents match"
            );
            for (score, address) in theirs {
                let mine =
                    ours[(scorer.bases[address.segment_ord as usize] + address.doc_id) as usize];
                assert!(
                    (mine - score).abs() <= 1e-4 * score,
                    "{text}: {mine} vs {score}"
                );
            }
        }
    }

    #[test]
    fn champion_lists_keep_each_terms_highest_impacts() {
        let impact = |doc, score| Impact { doc, score };
        let all = vec![
            impact(0, 1.0),
            impact(2, 3.0),
            impact(5, 2.0),
            impact(7, 3.0),
            impact(9, 0.5),
        ];
        let term = TermImpacts::new(all.clone(), 3);
        // The three highest, by ordinal; of the two at 2.0 and 3.0 ties, the lower
        // ordinal first.
        assert_eq!(
            term.champions(),
            [impact(2, 3.0), impact(5, 2.0), impact(7, 3.0)]
        );
        assert_eq!(*term, *all, "every impact is still there");
        let few = TermImpacts::new(all.clone(), 5);
        assert_eq!(
            few.champions(),
            all.as_slice(),
            "a short list is its own champions"
        );
        // Five impacts of 8 bytes.
        assert_eq!(
            few.bytes(),
            std::mem::size_of::<TermImpacts>() + 5 * 8,
            "and is not held twice"
        );
        assert!(TermImpacts::new(all, 0).champions().is_empty());
    }

    #[test]
    fn champion_scores_drop_only_a_common_words_lowest_shares() {
        // "rank" is in every document, most often in the first: with champion lists of
        // two, only the two it scores highest in get its share; "watchdog" is in one
        // document and keeps its share.
        let docs = [
            ("rank rank rank", "rank failed"),
            ("rank rank", "rank"),
            ("rank", "watchdog rank"),
            ("other", "rank of a tensor among many other words here"),
        ];
        let (index, exact) = titled_index(&docs);
        let (_, champions) = titled_index(&docs);
        let champions = champions.with_champions(2);
        let analysed = Analysed::new(&index, "rank watchdog");
        let plan = exact.plan(&analysed).unwrap().unwrap();
        let all = exact.scores_by(&plan, Scoring::Exact).unwrap();
        assert_eq!(
            exact.scores_by(&plan, Scoring::Champions).unwrap(),
            all,
            "few documents: exact"
        );
        let plan = champions.plan(&analysed).unwrap().unwrap();
        let some = champions.scores_by(&plan, Scoring::Champions).unwrap();
        assert_eq!(champions.scores_by(&plan, Scoring::Exact).unwrap(), all);
        let scored = |s: &[f32], d: usize| s[d] > 0.0;
        assert!(scored(&some, 0) && scored(&some, 1), "{some:?}");
        assert_eq!(some[3], 0.0, "its lowest share is left out: {some:?}");
        assert!(some[2] > 0.0, "watchdog still counts: {some:?}");
        assert!(some[2] < all[2], "without rank's share: {some:?} {all:?}");
        assert_eq!(some[0], all[0]);
    }

    #[test]
    fn a_scorer_of_champions_only_ranks_as_the_champion_lists_do() {
        // "rank" is in every document and "watchdog" in several; lists of two.
        let docs: Vec<(String, String)> = (0..80)
            .map(|i| {
                let body = match i % 4 {
                    0 => "rank watchdog timeout",
                    1 => "rank rank",
                    2 => "watchdog rank failed",
                    _ => "rank of many other words here",
                };
                (format!("title {i}"), body.to_string())
            })
            .collect();
        let docs: Vec<(&str, &str)> = docs.iter().map(|(t, b)| (t.as_str(), b.as_str())).collect();
        let (index, both) = titled_index(&docs);
        let (_, only) = titled_index(&docs);
        let both = both.with_champions(2);
        let only = only.with_champions(2).champions_only();
        for query in ["rank watchdog timeout failed", "watchdog timeout", "rank"] {
            let analysed = Analysed::new(&index, query);
            let plan_both = both.plan(&analysed).unwrap().unwrap();
            let plan_only = only.plan(&analysed).unwrap().unwrap();
            let scores = both.scores_by(&plan_both, Scoring::Champions).unwrap();
            assert_eq!(
                only.scores_by(&plan_only, Scoring::Champions).unwrap(),
                scores
            );
            for limit in [1, 3, 10] {
                assert_eq!(
                    only.top_by(&plan_only, Scoring::Champions, limit, None)
                        .unwrap(),
                    top(&scores, limit),
                    "{query:?} {limit}"
                );
            }
            for (b, o) in plan_both.terms.iter().zip(&plan_only.terms) {
                assert_eq!(b.impacts.champions(), o.impacts.champions());
                assert!(o.impacts.len() <= 2, "only the champions are kept");
                assert!(o.impacts.bytes() <= b.impacts.bytes());
            }
        }
    }

    #[test]
    fn a_word_and_its_identifier_part_add_up_as_one_list() {
        // "rank" and "watchdog" are in more documents than `TWIN_MIN`, "failed" in one.
        let docs: Vec<(String, String)> = (0..TWIN_MIN + 16)
            .map(|i| match i % 3 {
                0 => ("rank ".repeat(1 + i % 4), "watchdog rank".to_string()),
                1 => ("watchdog".to_string(), format!("rank {i} watchdog")),
                _ => (
                    "other".to_string(),
                    "rank of a tensor, watchdog".to_string(),
                ),
            })
            .chain([("rank".to_string(), "failed in process_group".to_string())])
            .collect();
        let docs: Vec<(&str, &str)> = docs.iter().map(|(t, b)| (t.as_str(), b.as_str())).collect();
        let (index, scorer) = titled_index(&docs);
        let scorer = scorer.with_champions(TWIN_MIN + 8);
        let analysed = Analysed::new(&index, "watchdog rank failed process_group");
        let plan = scorer.plan(&analysed).unwrap().unwrap();
        for scoring in [Scoring::Exact, Scoring::Champions] {
            // Each term's list on its own.
            let mut each = vec![0.0f32; scorer.num_docs()];
            for term in &plan.terms {
                let list = term.impacts.list(scoring);
                for i in list {
                    each[i.doc as usize] += term.weight * i.score;
                }
            }
            let lists = scorer.lists(&plan, scoring);
            let mut summed = vec![0.0f32; scorer.num_docs()];
            for (weight, impacts) in &lists {
                let list = impacts.list(scoring);
                for i in list {
                    summed[i.doc as usize] += weight * i.score;
                }
            }
            for (a, b) in each.iter().zip(&summed) {
                assert!((a - b).abs() <= 1e-5 * a.max(*b), "{each:?} {summed:?}");
            }
            // "rank" and "watchdog" are words and identifier parts: one list each; the
            // short lists of "failed" stay apart.
            assert_eq!(lists.len(), plan.terms.len() - 2, "{:?}", plan.terms);
            assert!(
                plan.terms
                    .iter()
                    .any(|t| t.text == "fail" && t.kind == FieldKind::Ident)
            );
        }
    }

    #[test]
    fn distinct_terms_are_each_first_place_in_term_order() {
        let mut terms = Terms::default();
        for (p, t) in ["rank", "timeout", "rank", "nccl", "timeout", "abort"]
            .iter()
            .enumerate()
        {
            terms.push(p, t);
        }
        assert_eq!(terms.get(1), "timeout");
        assert_eq!(terms.iter().nth(3), Some((3, "nccl")));
        assert_eq!(distinct(&terms), [5, 3, 0, 1]);
        assert!(distinct(&Terms::default()).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn distinct_terms_are_the_first_of_each_in_string_order(
            list in proptest::collection::vec("[ab\\x00é]{0,10}", 0..40)
        ) {
            let mut terms = Terms::default();
            for (p, t) in list.iter().enumerate() {
                terms.push(p, t);
            }
            let mut first: std::collections::BTreeMap<&str, usize> = Default::default();
            for (at, t) in list.iter().enumerate() {
                first.entry(t.as_str()).or_insert(at);
            }
            let expected: Vec<usize> = first.into_values().collect();
            proptest::prop_assert_eq!(distinct(&terms), expected);
        }
    }

    #[test]
    fn the_count_is_every_document_that_scores_and_is_kept() {
        let docs: Vec<(String, String)> = (0..300)
            .map(|i| {
                let body = match i % 5 {
                    0 => "rank watchdog timeout",
                    1 => "rank rank",
                    2 => "watchdog failed",
                    _ => "other words here",
                };
                (format!("title {i}"), body.to_string())
            })
            .collect();
        let docs: Vec<(&str, &str)> = docs.iter().map(|(t, b)| (t.as_str(), b.as_str())).collect();
        let (index, scorer) = titled_index(&docs);
        let even = |ordinal: u32| ordinal.is_multiple_of(2);
        for query in ["rank watchdog timeout", "watchdog", "failed"] {
            let analysed = Analysed::new(&index, query);
            let plan = scorer.plan(&analysed).unwrap().unwrap();
            let scores = scorer.scores_by(&plan, Scoring::Exact).unwrap();
            for keep in [None, Some(&even as &dyn Fn(u32) -> bool)] {
                let kept = |ordinal: u32| keep.is_none_or(|keep| keep(ordinal));
                let all: Vec<_> = top(&scores, usize::MAX)
                    .into_iter()
                    .filter(|&(ordinal, _)| kept(ordinal))
                    .collect();
                assert!(all.len() > 10, "{query:?}");
                for limit in [1, 10, all.len() + 5] {
                    let (found, count) = scorer
                        .top_counted(&plan, Scoring::Exact, limit, keep)
                        .unwrap();
                    assert_eq!(count, all.len(), "{query:?} {limit}");
                    assert_eq!(found, all[..limit.min(all.len())], "{query:?} {limit}");
                    assert_eq!(
                        found,
                        scorer.top_by(&plan, Scoring::Exact, limit, keep).unwrap()
                    );
                }
            }
        }
    }

    #[test]
    fn top_keeps_the_best_positive_scores_whatever_else_they_hold() {
        // Ties (the lower ordinal wins), zeros, and values that are no score (negative,
        // NaN) among them.
        let mut scores = vec![0.0f32; 5 * 64 + 7];
        for (i, s) in scores.iter_mut().enumerate() {
            *s = match i % 7 {
                0 => 0.0,
                1 => (i % 13) as f32 * 0.5,
                2 => 3.0,
                3 => -1.0,
                _ => (i % 5) as f32 + 0.25,
            };
        }
        scores[64 + 3] = f32::NAN;
        scores[2 * 64] = -0.0;
        scores[3 * 64 + 1] = 100.0;
        scores[4 * 64 + 9] = f32::INFINITY;
        let mut expected: Vec<(u32, f32)> = (0u32..)
            .zip(scores.iter().copied())
            .filter(|(_, s)| *s > 0.0)
            .collect();
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for limit in [0, 1, 2, 5, 40, scores.len()] {
            let want: Vec<_> = expected.iter().copied().take(limit).collect();
            assert_eq!(top(&scores, limit), want, "limit {limit}");
        }
    }

    #[test]
    fn a_term_holds_the_documents_of_its_impacts() {
        for step in [3u32, 100] {
            let all: Vec<Impact> = (0..4000u32)
                .map(|i| Impact {
                    doc: 7 + i * step,
                    score: 1.0,
                })
                .collect();
            let impacts = TermImpacts::new(all, CHAMPIONS);
            let last = 7 + 3999 * step;
            for ordinal in (0..last + 200).chain([u32::MAX]) {
                let held = ordinal >= 7 && (ordinal - 7) % step == 0 && ordinal <= last;
                assert_eq!(
                    impacts.holds(ordinal),
                    held,
                    "step {step} ordinal {ordinal}"
                );
            }
        }
        assert!(!TermImpacts::new(Vec::new(), CHAMPIONS).holds(0));
    }

    #[test]
    fn top_is_the_head_of_the_full_ranking() {
        let mut rng = 7u64;
        let scores: Vec<f32> = (0..5000)
            .map(|_| {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Few distinct values, so ties are common; some zeros.
                ((rng >> 33) % 40) as f32 / 4.0
            })
            .collect();
        let mut all: Vec<(u32, f32)> = scores
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0.0)
            .map(|(i, s)| (i as u32, *s))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for limit in [0, 1, 3, 10, 64, 4000, 10_000] {
            let expected: Vec<_> = all.iter().take(limit).copied().collect();
            assert_eq!(top(&scores, limit), expected, "limit {limit}");
        }
    }

    #[test]
    fn plans_leave_out_unknown_terms_and_phrases_holding_them() {
        let index = Index::create_in_ram(Schema::builder().build());
        register_analyzers(&index);
        let held: Impacts = Arc::new(TermImpacts::new(
            vec![Impact { doc: 0, score: 1.0 }],
            CHAMPIONS,
        ));
        let known = |_: FieldKind, t: &str| {
            Ok(if t == "zzz" {
                Arc::new(TermImpacts::new(Vec::new(), CHAMPIONS))
            } else {
                held.clone()
            })
        };
        let analyse = |text: &str| Analysed::new(&index, text);
        let text = analyse("rank timeout");
        let both = QueryPlan::new(&text, &known).unwrap().unwrap();
        assert_eq!(both.phrases.len(), 1, "both words known: also a phrase");
        assert!(both.terms.iter().all(|t| t.impacts == held));
        let text = analyse("rank zzz timeout");
        let one = QueryPlan::new(&text, &known).unwrap().unwrap();
        assert!(one.phrases.is_empty());
        assert!(!one.terms.is_empty());
        assert!(one.terms.iter().all(|t| t.text != "zzz"));
        let text = analyse(" ,.; ");
        assert!(QueryPlan::new(&text, &known).unwrap().is_none());
    }

    #[test]
    fn long_texts_look_for_stop_words_only_when_they_have_nothing_else() {
        let index = Index::create_in_ram(Schema::builder().build());
        register_analyzers(&index);
        let held = |_: FieldKind, _: &str| {
            Ok(Arc::new(TermImpacts::new(
                vec![Impact { doc: 0, score: 1.0 }],
                CHAMPIONS,
            )))
        };
        let planned = |text: &str| -> Vec<(FieldKind, String)> {
            let text = Analysed::new(&index, text);
            let plan = QueryPlan::new(&text, &held).unwrap().unwrap();
            plan.terms
                .iter()
                .map(|t| (t.kind, t.text.to_string()))
                .collect()
        };
        let question = planned("the rank of the process");
        assert!(question.iter().any(|(_, t)| t == "of"), "{question:?}");
        let paste = "the rank of the process failed with a timeout\n".repeat(8);
        let paste = planned(&paste);
        assert!(paste.iter().any(|(_, t)| t == "rank"));
        assert!(
            paste.iter().all(|(_, t)| t != "the" && t != "of"),
            "{paste:?}"
        );
        assert_eq!(
            planned("the of at"),
            [
                (FieldKind::Ident, "at".to_string()),
                (FieldKind::Ident, "of".to_string()),
                (FieldKind::Ident, "the".to_string())
            ]
        );
    }
}
