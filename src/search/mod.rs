//! Full-text search over the knowledge base: a tantivy index built in RAM from a `Kb`,
//! scored through cached term impacts (see `scoring`). Queries are never parsed as
//! syntax: any string is analysed into terms, so stray `(`, `:` or `-` cannot fail.

pub mod analysis;
mod lookup;
mod phrases;
mod schema;
mod scoring;
mod snippet;
mod store;

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tantivy::indexer::UserOperation;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption, Schema};
use tantivy::{
    DocSet, Index, IndexReader, ReloadPolicy, Searcher, TERMINATED, TantivyDocument, Term,
};

use crate::kb::{Entry, Kb};
use analysis::Segmenter;
pub use lookup::QueryTerms;
use phrases::{Passages, PhraseIndex};
use schema::FieldKind;
use schema::{ENTRY, Fields, Part};
pub use scoring::Analysed;
pub use scoring::MAX_QUERY_TERMS;
use scoring::{QueryPlan, Scorer, Scoring};
use snippet::Highlighter;
pub use store::IndexStore;

/// Largest number of hits one query may ask for.
pub const MAX_LIMIT: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("search index error: {0}")]
    Index(#[from] tantivy::TantivyError),
    #[error("search index read error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the {0} index was written with another schema")]
    Schema(&'static str),
}

/// A validated search request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SearchQuery {
    pub text: String,
    pub tag: Option<String>,
    pub limit: usize,
    /// Hits skipped before the first one returned: `limit` hits from the `offset`-th on
    /// (0-based) are one page of the whole ranking.
    pub offset: usize,
}

impl SearchQuery {
    /// Trims the text, drops an empty tag and clamps the limit into `1..=MAX_LIMIT`;
    /// the first hits (see [`SearchQuery::from`] for later ones).
    pub fn new(text: &str, tag: Option<&str>, limit: usize) -> SearchQuery {
        SearchQuery {
            text: text.trim().to_string(),
            tag: tag
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty()),
            limit: limit.clamp(1, MAX_LIMIT),
            offset: 0,
        }
    }

    /// The same query's hits from the `offset`-th on (0-based).
    pub fn from(self, offset: usize) -> SearchQuery {
        SearchQuery { offset, ..self }
    }
}

/// The answer to a search: one page of hits, and how many there are in all.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// Up to `limit` hits, from the query's `offset` on, best first.
    pub hits: Vec<Hit>,
    /// Entries the query finds in all (with its tag, if any).
    pub total: usize,
}

/// One search result: which entry, how well it matched, and a highlighted excerpt.
#[derive(Debug, Clone)]
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
    scorer: Scorer,
    /// The entry (position in `kb.entries()`) of each document ordinal.
    entry_of: Vec<usize>,
    /// The document ordinal of each entry.
    ordinal_of: Vec<u32>,
    describing: PhraseIndex,
    quoting: PhraseIndex,
    /// Answers to recent searches. The index never changes once built, so a cached
    /// answer stays right; people search the same errors over and over.
    answers: SearchCache,
}

/// Memory, in bytes, that the caches over one knowledge base may hold together: the
/// term impacts of the three indexes, recent diagnoses and recent searches. Each cache
/// weighs what it holds in bytes and forgets the least used past its share, so varied
/// traffic (every paste with words of its own) cannot grow memory past the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheBudget(u64);

/// The budget set for this process (`serve --cache-mb`), or 0 to size it by the
/// knowledge base.
static CACHE_BYTES: AtomicU64 = AtomicU64::new(0);

impl CacheBudget {
    /// The budget of a knowledge base of up to 8,192 entries.
    pub const DEFAULT_BYTES: u64 = 64 << 20;
    /// The budget per entry of a larger one: room for its common words' impacts.
    pub const PER_ENTRY_BYTES: u64 = 8 << 10;

    /// Sets the budget of every knowledge base built from now on; `None` sizes it by
    /// the knowledge base.
    pub fn set(bytes: Option<u64>) {
        CACHE_BYTES.store(bytes.unwrap_or(0), Ordering::Relaxed);
    }

    /// The budget for a knowledge base of `entries`.
    pub fn for_entries(entries: usize) -> CacheBudget {
        match CACHE_BYTES.load(Ordering::Relaxed) {
            0 => CacheBudget(
                Self::DEFAULT_BYTES.max(Self::PER_ENTRY_BYTES.saturating_mul(entries as u64)),
            ),
            set => CacheBudget(set),
        }
    }

    /// The main index's term impacts: what diagnosis and search read most.
    pub fn main_terms(self) -> u64 {
        self.0 / 2
    }

    /// Each passage index's term impacts (champion lists only).
    pub fn passage_terms(self) -> u64 {
        self.0 / 8
    }

    /// Recent diagnoses (see `Diagnoser`).
    pub fn diagnoses(self) -> u64 {
        self.0 * 3 / 16
    }

    /// Recent searches.
    pub fn searches(self) -> u64 {
        self.0 / 16
    }
}

/// How often a cache answered from memory (`hits`) and how often the work was done
/// (`misses`), since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
}

impl std::ops::Add for CacheStats {
    type Output = CacheStats;

    fn add(self, other: CacheStats) -> CacheStats {
        CacheStats {
            hits: self.hits + other.hits,
            misses: self.misses + other.misses,
        }
    }
}

impl<K, V, W, H, L> From<&quick_cache::sync::Cache<K, V, W, H, L>> for CacheStats
where
    K: Eq + std::hash::Hash,
    V: Clone,
    W: quick_cache::Weighter<K, V> + Clone,
    H: std::hash::BuildHasher + Clone,
    L: quick_cache::Lifecycle<K, V> + Clone,
{
    fn from(cache: &quick_cache::sync::Cache<K, V, W, H, L>) -> CacheStats {
        CacheStats {
            hits: cache.hits(),
            misses: cache.misses(),
        }
    }
}

/// Recent searches, weighed in bytes.
type SearchCache = quick_cache::sync::Cache<SearchQuery, Arc<Found>, SearchWeight>;

#[derive(Clone)]
struct SearchWeight;

impl quick_cache::Weighter<SearchQuery, Arc<Found>> for SearchWeight {
    fn weight(&self, query: &SearchQuery, found: &Arc<Found>) -> u64 {
        let hits: usize = std::mem::size_of::<Found>()
            + found
                .hits
                .iter()
                .map(|h| {
                    std::mem::size_of::<Hit>()
                        + h.slug.len()
                        + h.snippet.len()
                        + h.snippet_html.len()
                })
                .sum::<usize>();
        (std::mem::size_of::<SearchQuery>()
            + query.text.len()
            + query.tag.as_ref().map_or(0, String::len)
            + hits
            + scoring::CACHE_SLOT_BYTES) as u64
    }
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("entries", &self.kb.len())
            .finish()
    }
}

impl SearchIndex {
    /// Indexes every entry of `kb` in RAM: the main index and the two phrase indexes
    /// are built at the same time, on all cores.
    pub fn build(kb: Arc<Kb>) -> Result<SearchIndex, SearchError> {
        let written = Written::write(&kb, &|_, schema| Ok(Index::create_in_ram(schema)))?;
        SearchIndex::open(kb, written)
    }

    /// Like `build`, but keeps the built indexes in `store` (if any) and, when the store
    /// already holds those of the same files (read by the same errbook binary), opens
    /// them instead of building them. Any trouble with the store (a full disk, a
    /// read-only folder, a damaged index) is logged and the indexes are built in RAM as
    /// `build` does: the store can make a start slower, never wrong.
    pub fn build_in(kb: Arc<Kb>, store: Option<&IndexStore>) -> Result<SearchIndex, SearchError> {
        let Some((store, key)) = store.and_then(|store| Some((store, store.key(&kb)?))) else {
            return SearchIndex::build(kb);
        };
        if let Some(written) = store.open(&key) {
            match SearchIndex::open(kb.clone(), written) {
                Ok(index) => {
                    tracing::info!(store = %store.root().join(&key).display(), "opened the stored indexes");
                    return Ok(index);
                }
                Err(err) => {
                    tracing::warn!(key = %key, "discarding stored indexes that do not open: {err}");
                    store.discard(&key);
                }
            }
        }
        match store.write(&key, |create| Written::write(&kb, create)) {
            Ok(()) => {
                if let Some(written) = store.open(&key) {
                    tracing::info!(store = %store.root().join(&key).display(), "built and stored the indexes");
                    return SearchIndex::open(kb, written);
                }
                tracing::warn!(key = %key, "the indexes just stored do not open; building in RAM");
            }
            Err(err) => {
                tracing::warn!(store = %store.root().display(), "cannot store the indexes, building in RAM: {err}")
            }
        }
        SearchIndex::build(kb)
    }

    /// The search index over written (or stored) indexes of `kb`.
    fn open(kb: Arc<Kb>, written: Written) -> Result<SearchIndex, SearchError> {
        let t0 = std::time::Instant::now();
        let budget = CacheBudget::for_entries(kb.len());
        let main = MainIndex::open(written.main, budget)?;
        let quoting = PhraseIndex::open(written.quoting, Passages::Quoting, kb.len(), budget)?;
        let describing =
            PhraseIndex::open(written.describing, Passages::Describing, kb.len(), budget)?
                .on_background(&quoting, budget);
        tracing::debug!(ms = t0.elapsed().as_millis() as u64, "indexes opened");
        let MainIndex {
            index,
            scorer,
            entry_of,
        } = main;
        let mut ordinal_of = vec![0; kb.len()];
        for (ordinal, &entry) in entry_of.iter().enumerate() {
            if let Some(slot) = ordinal_of.get_mut(entry) {
                *slot = ordinal as u32;
            }
        }
        Ok(SearchIndex {
            kb,
            index,
            scorer,
            entry_of,
            ordinal_of,
            describing,
            quoting,
            answers: SearchCache::with_weighter(4096, budget.searches(), SearchWeight),
        })
    }

    pub fn kb(&self) -> &Kb {
        &self.kb
    }

    /// One page of ranked hits for `query`, with snippets, and how many there are in
    /// all. An empty query lists the tag's entries (without a tag, the first entries). Shared with the cache
    /// of answers, so neither a new nor a repeated search copies the hits.
    pub fn search(&self, query: &SearchQuery) -> Result<Arc<Found>, SearchError> {
        if let Some(found) = self.answers.get(query) {
            return Ok(found);
        }
        let found = Arc::new(self.search_uncached(query)?);
        self.answers.insert(query.clone(), found.clone());
        Ok(found)
    }

    fn search_uncached(&self, query: &SearchQuery) -> Result<Found, SearchError> {
        let analysed = self.analyse(&query.text);
        let plan = self.scorer.plan(&analysed)?;
        let wanted = query.offset.saturating_add(query.limit);
        let (ranked, total) = if query.text.is_empty() && query.tag.is_none() {
            // Neither words nor a tag: the first entries, as a tag alone lists its own.
            let all = self.kb.len();
            ((0..all.min(wanted)).map(|e| (e, 1.0)).collect(), all)
        } else {
            self.ranked(
                plan.as_ref(),
                query.tag.as_deref(),
                wanted,
                Scoring::Exact,
                true,
            )?
        };
        let highlighter = match &plan {
            Some(plan) => self.highlighter(plan)?,
            None => None,
        };
        // Snippets, the costly part, only for the page asked for.
        let hits = (ranked.into_iter().skip(query.offset))
            .map(|(position, score)| {
                let entry = &self.kb.entries()[position];
                let (snippet, snippet_html) = excerpt(highlighter.as_ref(), entry);
                Hit {
                    slug: entry.slug.clone(),
                    score,
                    snippet,
                    snippet_html,
                }
            })
            .collect();
        Ok(Found { hits, total })
    }

    /// Forgets the cached search answers only (term scores stay): the next search does
    /// all its work, as a query nobody asked before would.
    pub fn forget_answers(&self) {
        self.answers.clear();
    }

    /// The main index's cache of term impacts.
    pub fn term_cache_stats(&self) -> CacheStats {
        self.scorer.cache_stats()
    }

    /// The two passage indexes' caches of term impacts, together.
    pub fn passage_cache_stats(&self) -> CacheStats {
        self.describing.cache_stats() + self.quoting.cache_stats()
    }

    /// The cache of recent search answers.
    pub fn search_cache_stats(&self) -> CacheStats {
        CacheStats::from(&self.answers)
    }

    /// Forgets the cached answers and term scores; later queries read the index again. Results do
    /// not change: this exists to measure the cost of a cold cache.
    pub fn clear_cache(&self) {
        self.answers.clear();
        self.scorer.clear_cache();
        self.describing.clear_cache();
        self.quoting.clear_cache();
    }

    /// The best `limit` entries for `plan` among those with `tag` (by tag alone without
    /// a plan), and, when `count` asks, how many it finds in all (else 0).
    fn ranked(
        &self,
        plan: Option<&QueryPlan>,
        tag: Option<&str>,
        limit: usize,
        scoring: Scoring,
        count: bool,
    ) -> Result<(Vec<(usize, f32)>, usize), SearchError> {
        let has_tag = |entry: usize| match tag {
            Some(tag) => self.kb.entries()[entry].tags.iter().any(|t| t == tag),
            None => true,
        };
        Ok(match plan {
            Some(plan) => {
                let keep = |ordinal: u32| has_tag(self.entry_of[ordinal as usize]);
                let keep: Option<&dyn Fn(u32) -> bool> = tag.map(|_| &keep as _);
                let (top, total) = if count {
                    self.scorer.top_counted(plan, scoring, limit, keep)?
                } else {
                    (self.scorer.top_by(plan, scoring, limit, keep)?, 0)
                };
                let top = (top.into_iter())
                    .map(|(ordinal, score)| (self.entry_of[ordinal as usize], score))
                    .collect();
                (top, total)
            }
            None if tag.is_some() => {
                let tagged = (0..self.kb.len()).filter(|&e| has_tag(e));
                let total = if count { tagged.clone().count() } else { 0 };
                (tagged.take(limit).map(|e| (e, 1.0)).collect(), total)
            }
            None => (Vec::new(), 0),
        })
    }

    /// The query's terms from every analyzer, weighed by how many entries hold them,
    /// to mark in excerpts (a Chinese term found in a symptom is marked wherever it is
    /// quoted).
    fn highlighter(&self, plan: &QueryPlan) -> Result<Option<Highlighter>, SearchError> {
        let mut terms = Vec::new();
        for kind in [FieldKind::Words, FieldKind::Ident, FieldKind::Gram] {
            for text in plan.highlight_terms(kind) {
                terms.push((text, self.scorer.impacts(kind, text)?.len()));
            }
        }
        Ok(Highlighter::new(terms))
    }
}

/// The index of whole entries, one document each, before it joins the phrase indexes.
struct MainIndex {
    index: Index,
    scorer: Scorer,
    entry_of: Vec<usize>,
}

/// Creates an empty tantivy index with `schema`, named `name` (`MAIN` or a `Passages` name):
/// in RAM, or in a folder of an `IndexStore`.
pub type CreateIndex<'a> = dyn Fn(&str, Schema) -> Result<Index, SearchError> + Sync + 'a;

/// The main index's name (the phrase indexes are named by `Passages::name`), which is
/// also its folder in a store.
const MAIN: &str = "main";

/// The three tantivy indexes behind a `SearchIndex`, written and committed.
pub struct Written {
    main: Index,
    quoting: Index,
    describing: Index,
}

impl Written {
    /// Writes the three indexes of `kb` into indexes `create` makes, at the same time.
    pub fn write(kb: &Kb, create: &CreateIndex<'_>) -> Result<Written, SearchError> {
        let t0 = std::time::Instant::now();
        let segmenter = Segmenter::for_texts(texts(kb));
        tracing::debug!(
            ms = t0.elapsed().as_millis() as u64,
            ?segmenter,
            "segmenter ready"
        );
        let phrases = |passages: Passages| {
            let index = create(passages.name(), PhraseIndex::schema(passages).0)?;
            PhraseIndex::write(kb, passages, &index, &segmenter)?;
            Ok::<_, SearchError>(index)
        };
        let (main, quoting, describing) = std::thread::scope(|scope| {
            let quoting = scope.spawn(|| phrases(Passages::Quoting));
            let describing = scope.spawn(|| phrases(Passages::Describing));
            let main = create(MAIN, Fields::new().schema)
                .and_then(|index| MainIndex::write(kb, &index, &segmenter).map(|()| index));
            tracing::debug!(ms = t0.elapsed().as_millis() as u64, "main index written");
            let join = |handle: std::thread::ScopedJoinHandle<'_, _>| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            };
            (main, join(quoting), join(describing))
        });
        tracing::debug!(
            ms = t0.elapsed().as_millis() as u64,
            "phrase indexes written"
        );
        Ok(Written {
            main: main?,
            quoting: quoting?,
            describing: describing?,
        })
    }

    /// Opened from their folders under `dir`.
    pub fn open_in(dir: &Path) -> Result<Written, SearchError> {
        let open = |name: &str| Index::open_in_dir(dir.join(name));
        Ok(Written {
            main: open(MAIN)?,
            quoting: open(Passages::Quoting.name())?,
            describing: open(Passages::Describing.name())?,
        })
    }
}

impl MainIndex {
    fn write(kb: &Kb, index: &Index, segmenter: &Segmenter) -> Result<(), SearchError> {
        register_analyzers_with(index, segmenter);
        let fields = Fields::new();
        write_once(
            index,
            indexing_threads(),
            MAIN_BUDGET_PER_THREAD,
            kb.entries()
                .iter()
                .enumerate()
                .map(|(position, entry)| document(&fields, position, entry)),
        )
    }

    fn open(index: Index, budget: CacheBudget) -> Result<MainIndex, SearchError> {
        let fields = Fields::new();
        if index.schema() != fields.schema {
            return Err(SearchError::Schema(MAIN));
        }
        register_analyzers(&index);
        let searcher = searcher(&index)?;
        tracing::debug!(
            segments = searcher.segment_readers().len(),
            "main index opened"
        );
        let entry_of = entries_by_ordinal(&searcher)?;
        let parts = fields
            .parts()
            .map(|(part, fields)| (part.boost(), fields))
            .collect();
        let stats = GlobalStats::new(searcher.clone(), fields);
        Ok(MainIndex {
            index,
            scorer: Scorer::new(searcher, Box::new(stats), parts, budget.main_terms()),
            entry_of,
        })
    }
}

/// Indexing memory of each thread writing the main index: a segment is written each
/// time a thread's arena fills, so a large kb makes a few large segments.
const MAIN_BUDGET_PER_THREAD: usize = 100_000_000;
/// Documents handed to the indexing threads at a time.
const BATCH: usize = 512;

/// Writes `docs` into the new, empty `index` and commits, the way an index that is
/// built once and never changed wants it:
/// - documents go to the indexing threads in batches, one channel message each, rather
///   than one message (and often one thread wake-up) per document: the phrase indexes
///   hold millions of small documents at 100,000 entries;
/// - segments are not merged while the index is written: merging rewrites what was
///   just written, on the same cores, for an index that sees no deletes or updates.
///   The arena budget keeps the number of segments small instead.
pub(crate) fn write_once(
    index: &Index,
    threads: usize,
    budget_per_thread: usize,
    docs: impl Iterator<Item = TantivyDocument>,
) -> Result<(), SearchError> {
    let mut writer =
        index.writer_with_num_threads::<TantivyDocument>(threads, threads * budget_per_thread)?;
    writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
    let mut batch = Vec::with_capacity(BATCH);
    for doc in docs {
        batch.push(UserOperation::Add(doc));
        if batch.len() == BATCH {
            writer.run(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))?;
        }
    }
    if !batch.is_empty() {
        writer.run(batch)?;
    }
    writer.commit()?;
    Ok(())
}

/// Indexing threads: one per core, up to four (each writes its own segment, and
/// scoring reads every segment).
fn indexing_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// A searcher over an index that no longer changes.
fn searcher(index: &Index) -> Result<Searcher, SearchError> {
    let reader: IndexReader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    Ok(reader.searcher())
}

/// The `ENTRY` fast field of every document, by ordinal (segment after segment).
fn entries_by_ordinal(searcher: &Searcher) -> Result<Vec<usize>, SearchError> {
    let mut out = Vec::new();
    for segment in searcher.segment_readers() {
        let column = segment.fast_fields().u64(ENTRY)?;
        for doc in 0..segment.max_doc() {
            out.push(column.first(doc).unwrap_or(u64::MAX) as usize);
        }
    }
    Ok(out)
}

/// The analyzers for searching `index`: Chinese is segmented with jieba's whole
/// dictionary.
fn register_analyzers(index: &Index) {
    register_analyzers_with(index, &Segmenter::full());
}

/// The analyzers for writing `index`, segmenting Chinese with `segmenter`.
fn register_analyzers_with(index: &Index, segmenter: &Segmenter) {
    let tokenizers = index.tokenizers();
    tokenizers.register(
        analysis::WORDS,
        analysis::words_analyzer_with(segmenter.clone()),
    );
    tokenizers.register(analysis::IDENT, analysis::ident_analyzer());
    tokenizers.register(analysis::GRAM, analysis::gram_analyzer());
}

/// BM25 statistics with one idf per term across all parts of all entries. Per-field idf
/// would call `torch` rare because it occurs in only one title, letting a common word
/// outrank the rare one that names the problem; length normalisation stays per field.
struct GlobalStats {
    searcher: Searcher,
    fields: Fields,
    /// Entries holding each term looked up so far, by the term in its kind's first
    /// field: all parts share one count, which is the same for all of them. The least
    /// used are forgotten past `DOC_FREQS`.
    doc_freqs: quick_cache::sync::Cache<Term, u64>,
}

/// Most document frequencies remembered: queries bring endless new words.
const DOC_FREQS: usize = 1 << 16;

impl GlobalStats {
    fn new(searcher: Searcher, fields: Fields) -> GlobalStats {
        GlobalStats {
            searcher,
            fields,
            doc_freqs: quick_cache::sync::Cache::new(DOC_FREQS),
        }
    }

    /// In how many documents `text` occurs in any of `fields`: the union of their
    /// postings.
    fn union_doc_freq(&self, fields: &[Field], text: &str) -> tantivy::Result<u64> {
        let mut held = 0u64;
        for segment in self.searcher.segment_readers() {
            let mut seen = vec![0u64; (segment.max_doc() as usize).div_ceil(64)];
            for &field in fields {
                let term = Term::from_field_text(field, text);
                let inverted = segment.inverted_index(field)?;
                let Some(mut postings) = inverted.read_postings(&term, IndexRecordOption::Basic)?
                else {
                    continue;
                };
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    let (word, bit) = (doc as usize / 64, 1u64 << (doc % 64));
                    if seen[word] & bit == 0 {
                        seen[word] |= bit;
                        held += 1;
                    }
                    doc = postings.advance();
                }
            }
        }
        Ok(held)
    }
}

impl Bm25StatisticsProvider for GlobalStats {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searcher.total_num_tokens(field)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Bm25StatisticsProvider::total_num_docs(&self.searcher)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let value = term.value();
        let (Some(fields), Some(text)) = (self.fields.same_kind(term.field()), value.as_str())
        else {
            return self.searcher.doc_freq(term);
        };
        // Each part's weight asks for the count: the first field stands for them all.
        let key = Term::from_field_text(fields[0], text);
        if let Some(held) = self.doc_freqs.get(&key) {
            return Ok(held);
        }
        let held = self.union_doc_freq(&fields, text)?;
        // Terms no entry holds are not kept, so endless new words in queries cannot
        // crowd out the real ones.
        if held > 0 {
            self.doc_freqs.insert(key, held);
        }
        Ok(held)
    }
}

/// Every text of `kb` that the indexes analyse (passages are cut from these).
fn texts(kb: &Kb) -> impl Iterator<Item = Cow<'_, str>> {
    kb.entries().iter().flat_map(|entry| {
        Part::ALL
            .into_iter()
            .flat_map(|part| part_texts(entry, part))
    })
}

/// The texts of `entry` indexed as `part`.
fn part_texts(entry: &Entry, part: Part) -> Vec<Cow<'_, str>> {
    match part {
        Part::Title => vec![entry.title.as_str().into(), entry.title_zh.as_str().into()],
        Part::Signatures => entry
            .signatures
            .iter()
            .map(|s| s.searchable_text().into())
            .collect(),
        Part::Symptoms => borrowed(&entry.symptoms),
        Part::Summary => vec![
            entry.summary.as_str().into(),
            entry.summary_zh.as_str().into(),
        ],
        Part::Tags => vec![entry.tags.join(" ").into()],
        Part::Body => vec![entry.body.text.as_str().into()],
        Part::BodyZh => match &entry.body_zh {
            Some(zh) => vec![analysis::chinese_runs(&zh.text).into()],
            None => vec![],
        },
        Part::Examples => borrowed(&entry.examples),
    }
}

fn borrowed(texts: &[String]) -> Vec<Cow<'_, str>> {
    texts.iter().map(|t| Cow::Borrowed(t.as_str())).collect()
}

fn document(fields: &Fields, position: usize, entry: &Entry) -> TantivyDocument {
    let mut doc = TantivyDocument::default();
    doc.add_u64(fields.entry, position as u64);
    for (part, f) in fields.parts() {
        // Each field analyses its text with its own analyzer (see `schema`), on the
        // indexing threads.
        for text in part_texts(entry, part) {
            doc.add_text(f.words, &text);
            doc.add_text(f.ident, &text);
            doc.add_text(f.gram, text);
        }
    }
    doc
}

/// The best excerpt for this query: from the English body, else the Chinese one, else
/// the summaries and symptoms; the summary when no term occurs in any.
/// Returns (plain text, HTML).
fn excerpt(highlighter: Option<&Highlighter>, entry: &Entry) -> (String, String) {
    if let Some(highlighter) = highlighter {
        let extra = || {
            format!(
                "{} {} {}",
                entry.summary,
                entry.summary_zh,
                entry.symptoms.join(" · ")
            )
        };
        let zh = || entry.body_zh.as_ref().map(|zh| zh.text.as_str());
        if let Some(found) = highlighter
            .snippet(&entry.body.text)
            .or_else(|| zh().and_then(|zh| highlighter.snippet(zh)))
            .or_else(|| highlighter.snippet(&extra()))
        {
            return (found.plain, found.html);
        }
    }
    let mut html = String::new();
    snippet::push_escaped(&mut html, &entry.summary);
    (entry.summary.clone(), html)
}
