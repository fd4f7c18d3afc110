//! Full-text search over the knowledge base: a tantivy index built in RAM from a `Kb`,
//! one reader for the life of the index, a fresh searcher per query. Queries are never
//! parsed as syntax: any string is analysed into terms, so stray `(`, `:` or `-` cannot fail.

pub mod analysis;
mod phrases;
mod schema;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tantivy::collector::TopDocs;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::tokenizer::{PreTokenizedString, TextAnalyzer, TokenStream};
use tantivy::{
    DocAddress, DocSet, Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term,
};

use crate::kb::{Entry, Kb};
use phrases::{Passages, PhraseIndex};
use schema::{Fields, Part, PartFields};

/// Largest number of hits one query may ask for.
pub const MAX_LIMIT: usize = 100;
/// Only the first this-many words of a query are used: enough for a question or the
/// error messages of a log, and it bounds the cost of a query built from a paste.
const MAX_QUERY_TERMS: usize = 160;
/// Longest word sequence tried as an exact phrase.
const MAX_PHRASE_TERMS: usize = 16;
const SNIPPET_CHARS: usize = 220;
/// How much the parts other than the best one add to a term's score.
const TIE_BREAKER: f32 = 0.1;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("search index error: {0}")]
    Index(#[from] tantivy::TantivyError),
    #[error("search index read error: {0}")]
    Io(#[from] std::io::Error),
}

/// A validated search request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub text: String,
    pub tag: Option<String>,
    pub limit: usize,
}

impl SearchQuery {
    /// Trims the text, drops an empty tag and clamps the limit into `1..=MAX_LIMIT`.
    pub fn new(text: &str, tag: Option<&str>, limit: usize) -> SearchQuery {
        SearchQuery {
            text: text.trim().to_string(),
            tag: tag
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty()),
            limit: limit.clamp(1, MAX_LIMIT),
        }
    }
}

/// One search result: which entry, how well it matched, and a highlighted excerpt.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Hit {
    pub slug: String,
    pub score: f32,
    /// The excerpt as plain text.
    pub snippet: String,
    /// The same excerpt HTML-escaped, with matches wrapped in `<mark>`.
    pub snippet_html: String,
}

/// The knowledge base together with its full-text index.
pub struct SearchIndex {
    kb: Arc<Kb>,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Where each entry's document is; the index never changes after it is built.
    addresses: HashMap<String, DocAddress>,
    describing: PhraseIndex,
    quoting: PhraseIndex,
}

/// A text's distinct analysed terms and their weights (see `SearchIndex::query_terms`).
#[derive(Debug, Clone, Default)]
pub struct QueryTerms {
    terms: Vec<String>,
    weights: Vec<f32>,
    /// Whether any entry uses the term at all.
    known: Vec<bool>,
}

/// How much of a text's vocabulary one entry shares (see `SearchIndex::term_match`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TermMatch {
    /// Idf-weighted share of the text's distinct terms that occur in the entry, 0..=1.
    pub coverage: f32,
    /// The terms found in the entry, rarest first (analysed form: lowercased, stemmed).
    pub matched: Vec<String>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("entries", &self.kb.len())
            .finish()
    }
}

impl SearchIndex {
    /// Indexes every entry of `kb` in RAM.
    pub fn build(kb: Arc<Kb>) -> Result<SearchIndex, SearchError> {
        analysis::warm_up();
        let fields = Fields::new();
        let index = Index::create_in_ram(fields.schema.clone());
        register_analyzers(&index);

        let mut writer = index.writer_with_num_threads::<TantivyDocument>(1, 50_000_000)?;
        let mut analyzers = Analyzers::new();
        for entry in kb.entries() {
            writer.add_document(document(&fields, &mut analyzers, entry))?;
        }
        writer.commit()?;
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let mut addresses = HashMap::with_capacity(kb.len());
        let searcher = reader.searcher();
        for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
            for doc_id in segment.doc_ids_alive() {
                let address = DocAddress::new(segment_ord as u32, doc_id);
                let doc: TantivyDocument = searcher.doc(address)?;
                if let Some(slug) = doc.get_first(fields.slug).and_then(|v| v.as_str()) {
                    addresses.insert(slug.to_string(), address);
                }
            }
        }
        let describing = PhraseIndex::build(&kb, Passages::Describing)?;
        let quoting = PhraseIndex::build(&kb, Passages::Quoting)?;
        Ok(SearchIndex {
            kb,
            index,
            reader,
            fields,
            addresses,
            describing,
            quoting,
        })
    }

    pub fn kb(&self) -> &Kb {
        &self.kb
    }

    /// Ranked hits for `query`. An empty query lists the tag's entries (or nothing).
    pub fn search(&self, query: &SearchQuery) -> Result<Vec<Hit>, SearchError> {
        self.run(query, true)
    }

    /// Like `search`, without snippets (empty): for ranking only.
    pub fn rank(&self, query: &SearchQuery) -> Result<Vec<Hit>, SearchError> {
        self.run(query, false)
    }

    fn run(&self, query: &SearchQuery, with_snippets: bool) -> Result<Vec<Hit>, SearchError> {
        let text_query = self.text_query(&query.text);
        let filtered: Box<dyn Query> = match (&query.tag, text_query) {
            (None, None) => return Ok(Vec::new()),
            (None, Some(q)) => q,
            (Some(tag), q) => {
                let tag_term = Term::from_field_text(self.fields.tag, tag);
                let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(
                    Occur::Must,
                    Box::new(TermQuery::new(tag_term, IndexRecordOption::Basic)),
                )];
                clauses.push((Occur::Must, q.unwrap_or_else(|| Box::new(AllQuery))));
                Box::new(BooleanQuery::new(clauses))
            }
        };

        let searcher = self.reader.searcher();
        let stats = GlobalStats {
            searcher: &searcher,
            fields: &self.fields,
        };
        let top = searcher.search_with_statistics_provider(
            &filtered,
            &TopDocs::with_limit(query.limit).order_by_score(),
            &stats,
        )?;

        let generators = if with_snippets {
            self.snippet_generators(&searcher, &*filtered)?
        } else {
            Vec::new()
        };

        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let Some(slug) = doc.get_first(self.fields.slug).and_then(|v| v.as_str()) else {
                continue;
            };
            let Some(entry) = self.kb.get(slug) else {
                continue;
            };
            let (snippet, snippet_html) = if with_snippets {
                snippet(&generators, entry)
            } else {
                (String::new(), String::new())
            };
            hits.push(Hit {
                slug: slug.to_string(),
                score,
                snippet,
                snippet_html,
            });
        }
        Ok(hits)
    }

    /// The distinct terms of `text` with their idf across the knowledge base (a term no
    /// entry uses weighs as much as the rarest), for `term_match` against many entries.
    pub fn query_terms(&self, text: &str) -> Result<QueryTerms, SearchError> {
        let terms = self.distinct_terms(text);
        let searcher = self.reader.searcher();
        let n = Bm25StatisticsProvider::total_num_docs(&searcher)? as f32;
        let mut weights = Vec::with_capacity(terms.len());
        let mut known = Vec::with_capacity(terms.len());
        for term in &terms {
            let df = searcher.doc_freq(&Term::from_field_text(self.fields.all.words, term))? as f32;
            weights.push((1.0 + (n - df.max(1.0) + 0.5) / (df.max(1.0) + 0.5)).ln());
            known.push(df > 0.0);
        }
        Ok(QueryTerms {
            terms,
            weights,
            known,
        })
    }

    /// How much of a text's vocabulary (`query_terms`) the entry `slug` shares, so
    /// sharing only common words scores low.
    pub fn term_match(&self, query: &QueryTerms, slug: &str) -> Result<TermMatch, SearchError> {
        let Some(&address) = self.addresses.get(slug) else {
            return Ok(TermMatch::default());
        };
        let searcher = self.reader.searcher();
        let segment = searcher.segment_reader(address.segment_ord);
        let inverted = segment.inverted_index(self.fields.all.words)?;
        let total: f32 = query.weights.iter().sum();
        let mut found = 0.0;
        let mut matched: Vec<(f32, &str)> = Vec::new();
        for ((term, &weight), &known) in query.terms.iter().zip(&query.weights).zip(&query.known) {
            if !known {
                continue;
            }
            let t = Term::from_field_text(self.fields.all.words, term);
            // `seek` may only move forward: a list may already start past the target.
            if let Some(mut postings) = inverted.read_postings(&t, IndexRecordOption::Basic)?
                && postings.doc() <= address.doc_id
                && postings.seek(address.doc_id) == address.doc_id
            {
                found += weight;
                matched.push((weight, term));
            }
        }
        matched.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        Ok(TermMatch {
            coverage: if total > 0.0 { found / total } else { 0.0 },
            matched: matched.into_iter().map(|(_, t)| t.to_string()).collect(),
        })
    }

    /// Entries whose closest symptom, title or summary phrase matches `text`, with that
    /// phrase's score, best first.
    pub fn match_phrases(&self, text: &str) -> Result<Vec<(String, f32)>, SearchError> {
        self.describing.best(text, &self.quoting)
    }

    /// How completely one passage of entry `slug` (a signature, an example line, a body
    /// line, a symptom) holds the words of `text`: the idf-weighted share of `text`'s
    /// distinct terms found in the best passage, 0..=1. Words scattered over a long
    /// entry do not count; a message the entry quotes does.
    /// `query` is `query_terms(text)`, computed once for several entries.
    pub fn explains(&self, query: &QueryTerms, text: &str, slug: &str) -> Result<f32, SearchError> {
        let total: f32 = query.weights.iter().sum();
        if total <= 0.0 {
            return Ok(0.0);
        }
        let mut best = 0.0f32;
        for passage in self.quoting.passages(text, slug)? {
            let words: BTreeSet<String> = self.words(&passage).into_iter().collect();
            let found: f32 = query
                .terms
                .iter()
                .zip(&query.weights)
                .filter(|(t, _)| words.contains(*t))
                .map(|(_, w)| w)
                .sum();
            best = best.max(found / total);
        }
        Ok(best)
    }

    fn distinct_terms(&self, text: &str) -> Vec<String> {
        let mut terms: Vec<String> = self
            .analyze(analysis::WORDS, text)
            .into_iter()
            .map(|(_, t)| t)
            .filter(|t| t.chars().count() > 1 || t.chars().any(analysis::is_cjk))
            .collect();
        terms.sort();
        terms.dedup();
        terms
    }

    /// The analysed terms of `text` (lowercased, stemmed words), in order.
    pub fn words(&self, text: &str) -> Vec<String> {
        let Some(mut analyzer) = self.index.tokenizers().get(analysis::WORDS) else {
            return Vec::new();
        };
        analysis::analyze(&mut analyzer, text)
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// The scoring query for free text, or `None` when the text has no searchable term.
    fn text_query(&self, text: &str) -> Option<Box<dyn Query>> {
        let parts: Vec<(f32, PartFields)> = self
            .fields
            .parts()
            .map(|(part, fields)| (part.boost(), fields))
            .collect();
        let searcher = self.reader.searcher();
        let all = self.fields.all;
        let known = |field_kind: FieldKind, term: &str| {
            let field = match field_kind {
                FieldKind::Words => all.words,
                FieldKind::Ident => all.ident,
                FieldKind::Gram => all.gram,
            };
            searcher
                .doc_freq(&Term::from_field_text(field, term))
                .map_or(true, |df| df > 0)
        };
        terms_query(&self.index, &parts, text, &known)
    }

    /// One snippet generator per analyzer, highlighting the query's terms from every
    /// part (a Chinese term found in a symptom is highlighted wherever it is quoted).
    fn snippet_generators(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
    ) -> Result<Vec<SnippetGenerator>, SearchError> {
        let all = self.fields.all;
        let mut generators = Vec::with_capacity(3);
        for (field, analyzer) in [
            (all.words, analysis::WORDS),
            (all.ident, analysis::IDENT),
            (all.gram, analysis::GRAM),
        ] {
            let mut texts = BTreeSet::new();
            query.query_terms(&mut |term, _| {
                if self.fields.all_for(term.field()) == field
                    && let Some(text) = term.value().as_str()
                {
                    texts.insert(text.to_string());
                }
            });
            let mut terms = BTreeMap::new();
            for text in texts {
                let doc_freq = searcher.doc_freq(&Term::from_field_text(field, &text))?;
                if doc_freq > 0 {
                    terms.insert(text, 1.0 / (1.0 + doc_freq as f32));
                }
            }
            let Some(tokenizer) = self.index.tokenizers().get(analyzer) else {
                continue;
            };
            generators.push(SnippetGenerator::new(
                terms,
                tokenizer,
                field,
                SNIPPET_CHARS,
            ));
        }
        Ok(generators)
    }

    fn analyze(&self, analyzer: &str, text: &str) -> Vec<(usize, String)> {
        let Some(mut analyzer) = self.index.tokenizers().get(analyzer) else {
            return Vec::new();
        };
        let mut terms = analysis::analyze(&mut analyzer, text);
        terms.truncate(MAX_QUERY_TERMS);
        terms
    }
}

fn register_analyzers(index: &Index) {
    let tokenizers = index.tokenizers();
    tokenizers.register(analysis::WORDS, analysis::words_analyzer());
    tokenizers.register(analysis::IDENT, analysis::ident_analyzer());
    tokenizers.register(analysis::GRAM, analysis::gram_analyzer());
}

/// BM25 statistics with one idf per term across all parts of all entries. Per-field idf
/// would call `torch` rare because it occurs in only one title, letting a common word
/// outrank the rare one that names the problem; length normalisation stays per field.
struct GlobalStats<'a> {
    searcher: &'a Searcher,
    fields: &'a Fields,
}

impl Bm25StatisticsProvider for GlobalStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searcher.total_num_tokens(field)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Bm25StatisticsProvider::total_num_docs(self.searcher)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let all = self.fields.all_for(term.field());
        match term.value().as_str() {
            Some(text) if all != term.field() => {
                self.searcher.doc_freq(&Term::from_field_text(all, text))
            }
            _ => self.searcher.doc_freq(term),
        }
    }
}

/// The three analyzers, built once for indexing.
struct Analyzers {
    words: TextAnalyzer,
    ident: TextAnalyzer,
    gram: TextAnalyzer,
}

impl Analyzers {
    fn new() -> Self {
        Analyzers {
            words: analysis::words_analyzer(),
            ident: analysis::ident_analyzer(),
            gram: analysis::gram_analyzer(),
        }
    }
}

/// `text` analysed once, ready to be added to several fields.
fn pre_tokenized(analyzer: &mut TextAnalyzer, text: &str) -> PreTokenizedString {
    let mut tokens = Vec::new();
    analyzer
        .token_stream(text)
        .process(&mut |t| tokens.push(t.clone()));
    PreTokenizedString {
        text: text.to_string(),
        tokens,
    }
}

fn document(fields: &Fields, analyzers: &mut Analyzers, entry: &Entry) -> TantivyDocument {
    let mut doc = TantivyDocument::default();
    doc.add_text(fields.slug, &entry.slug);
    for tag in &entry.tags {
        doc.add_text(fields.tag, tag);
    }
    for (part, f) in fields.parts() {
        let texts: Vec<String> = match part {
            Part::Title => vec![entry.title.clone(), entry.title_zh.clone()],
            Part::Signatures => entry
                .signatures
                .iter()
                .map(|s| s.searchable_text())
                .collect(),
            Part::Symptoms => entry.symptoms.clone(),
            Part::Summary => vec![entry.summary.clone(), entry.summary_zh.clone()],
            Part::Tags => vec![entry.tags.join(" ")],
            Part::Body => vec![entry.text.clone()],
            Part::Examples => entry.examples.clone(),
        };
        // Each text is analysed once per analyzer and indexed in its part's field and in
        // the catch-all field.
        for text in &texts {
            for (analyzer, field, all) in [
                (&mut analyzers.words, f.words, fields.all.words),
                (&mut analyzers.ident, f.ident, fields.all.ident),
                (&mut analyzers.gram, f.gram, fields.all.gram),
            ] {
                let tokens = pre_tokenized(analyzer, text);
                doc.add_pre_tokenized_text(all, tokens.clone());
                doc.add_pre_tokenized_text(field, tokens);
            }
        }
    }
    doc
}

/// The query for `text` over `parts` (boost, fields): each term (or phrase) scores by its
/// best part plus a little for the others, so a common word repeated in every part
/// cannot outweigh a rare word matched once: the entry that matches more of the query
/// wins. `None` when the text has no searchable term.
/// Which analyzer a term came from.
#[derive(Clone, Copy)]
enum FieldKind {
    Words,
    Ident,
    Gram,
}

fn terms_query(
    index: &Index,
    parts: &[(f32, PartFields)],
    text: &str,
    known: &dyn Fn(FieldKind, &str) -> bool,
) -> Option<Box<dyn Query>> {
    let analyze = |name: &str| {
        let Some(mut analyzer) = index.tokenizers().get(name) else {
            return Vec::new();
        };
        let mut terms = analysis::analyze(&mut analyzer, text);
        terms.truncate(MAX_QUERY_TERMS);
        terms
    };
    let words = analyze(analysis::WORDS);
    let idents = analyze(analysis::IDENT);
    let grams = analysis::gram_query_terms(text);
    if words.is_empty() && idents.is_empty() && grams.is_empty() {
        return None;
    }

    let best_part = |make: &dyn Fn(&PartFields) -> Box<dyn Query>, weight: f32| {
        let disjuncts = parts
            .iter()
            .map(|(boost, fields)| {
                Box::new(BoostQuery::new(make(fields), weight * boost)) as Box<dyn Query>
            })
            .collect();
        (
            Occur::Should,
            Box::new(DisjunctionMaxQuery::with_tie_breaker(
                disjuncts,
                TIE_BREAKER,
            )) as Box<dyn Query>,
        )
    };

    // Terms no entry uses cannot score: no clause for them (the costly part of a query
    // is building each clause).
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut all_known = true;
    for term in unique_terms(&words) {
        if !known(FieldKind::Words, term) {
            all_known = false;
            continue;
        }
        clauses.push(best_part(&|f| term_query(f.words, term), 1.0));
    }
    if all_known && (2..=MAX_PHRASE_TERMS).contains(&words.len()) {
        // The words in order: an error string typed as written ranks its entry first.
        clauses.push(best_part(&|f| phrase_query(f.words, &words), 2.0));
    }
    for term in unique_terms(&idents) {
        if known(FieldKind::Ident, term) {
            clauses.push(best_part(&|f| term_query(f.ident, term), 0.4));
        }
    }
    for run in &grams {
        if !run.iter().all(|g| known(FieldKind::Gram, g)) {
            continue;
        }
        if run.len() == 1 {
            clauses.push(best_part(&|f| term_query(f.gram, &run[0]), 0.8));
        } else {
            let positioned: Vec<(usize, String)> = run.iter().cloned().enumerate().collect();
            clauses.push(best_part(&|f| phrase_query(f.gram, &positioned), 0.8));
        }
    }
    Some(Box::new(BooleanQuery::new(clauses)))
}

fn unique_terms(terms: &[(usize, String)]) -> BTreeSet<&str> {
    terms.iter().map(|(_, t)| t.as_str()).collect()
}

fn term_query(field: Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::WithFreqs,
    ))
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

/// The best excerpt for this query: the body first, then the summaries and symptoms
/// (where Chinese phrasing lives); within each, exact words before identifier parts
/// before Chinese grams. The summary when nothing matched. Returns (plain text, HTML).
fn snippet(generators: &[SnippetGenerator], entry: &Entry) -> (String, String) {
    let extra = format!(
        "{} {} {}",
        entry.summary,
        entry.summary_zh,
        entry.symptoms.join(" · ")
    );
    for text in [entry.text.as_str(), extra.as_str()] {
        for generator in generators {
            let mut snippet = generator.snippet(text);
            if !snippet.highlighted().is_empty() {
                snippet.set_snippet_prefix_postfix("<mark>", "</mark>");
                let plain = snippet
                    .fragment()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                return (plain, snippet.to_html().replace('\n', " "));
            }
        }
    }
    (entry.summary.clone(), escape_html(&entry.summary))
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}
