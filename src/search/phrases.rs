//! Indexes of short passages, one document each. `describing` holds the phrases that
//! describe an entry (symptoms, titles, summaries): a question is compared with each on
//! its own, so a long entry body cannot win on incidental words. `quoting` holds the
//! lines that quote an entry's errors (signatures, example lines, body lines): an error
//! message is explained by an entry only if one passage holds most of its words.

use rustc_hash::FxHashMap;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema};
use tantivy::{DocSet, Index, Searcher, TERMINATED, TantivyDocument, Term};

use super::analysis::Segmenter;
use super::schema::{ENTRY, PartFields, indexed_text};
use super::scoring::{self, Analysed, Scorer, Scoring};
use super::{
    CacheBudget, CacheStats, SearchError, analysis, entries_by_ordinal, register_analyzers,
    register_analyzers_with, searcher, write_once,
};
use crate::kb::{Entry, Kb};

/// Phrase documents looked at per query.
const PHRASE_HITS: usize = 64;
/// Indexing memory of a phrase index's one writing thread.
const PHRASE_BUDGET: usize = 200_000_000;
/// Longest line kept as a passage, in bytes.
const MAX_PASSAGE: usize = 600;

/// Which passages of an entry an index holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Passages {
    /// Symptoms, titles and summaries; analysed as words, identifier parts and grams.
    Describing,
    /// Signatures, example lines and body lines; analysed as words only.
    Quoting,
}

impl Passages {
    pub fn name(self) -> &'static str {
        match self {
            Passages::Describing => "describing",
            Passages::Quoting => "quoting",
        }
    }

    fn of(self, entry: &Entry) -> Vec<String> {
        match self {
            Passages::Describing => entry
                .symptoms
                .iter()
                .chain([
                    &entry.title,
                    &entry.title_zh,
                    &entry.summary,
                    &entry.summary_zh,
                ])
                .cloned()
                .collect(),
            Passages::Quoting => {
                let mut lines: Vec<String> = entry
                    .signatures
                    .iter()
                    .map(|s| s.searchable_text())
                    .collect();
                lines.extend(
                    entry
                        .examples
                        .iter()
                        .flat_map(|e| e.lines())
                        .map(str::to_string),
                );
                lines.extend(entry.body.text.lines().map(str::to_string));
                lines.retain(|l| !l.trim().is_empty() && l.len() <= MAX_PASSAGE);
                lines.sort_unstable();
                lines.dedup();
                lines
            }
        }
    }
}

/// The champion lists of an index of `passages` over `entries`: as long per entry as
/// the main index's.
fn champions(passages: usize, entries: usize) -> usize {
    let per_entry = passages.div_ceil(entries.max(1)).max(1);
    scoring::CHAMPIONS.saturating_mul(per_entry)
}

/// BM25 statistics over two phrase indexes with the same schema.
struct Combined {
    own: Searcher,
    other: Searcher,
}

impl Bm25StatisticsProvider for Combined {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        Ok(self.own.total_num_tokens(field)? + self.other.total_num_tokens(field)?)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(Bm25StatisticsProvider::total_num_docs(&self.own)?
            + Bm25StatisticsProvider::total_num_docs(&self.other)?)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.own.doc_freq(term)? + self.other.doc_freq(term)?)
    }
}

pub struct PhraseIndex {
    scorer: Scorer,
    fields: PartFields,
    /// The passages of each entry, by ordinal.
    passages_of: Vec<Vec<u32>>,
    /// The entry (position in the knowledge base) of each passage, by ordinal.
    entry_of: Vec<usize>,
}

impl PhraseIndex {
    /// The schema of a phrase index of `passages`, with its entry field and text fields.
    pub fn schema(passages: Passages) -> (Schema, Field, PartFields) {
        let mut builder = Schema::builder();
        let entry = builder.add_u64_field(ENTRY, FAST);
        let indexed = |tokenizer| indexed_text(tokenizer, IndexRecordOption::WithFreqsAndPositions);
        let mut fields = PartFields {
            words: builder.add_text_field("phrase", indexed(analysis::WORDS)),
            ident: builder.add_text_field(
                "phrase_ident",
                indexed_text(analysis::IDENT, IndexRecordOption::WithFreqs),
            ),
            gram: builder.add_text_field("phrase_gram", indexed(analysis::GRAM)),
        };
        if passages == Passages::Quoting {
            // Only words are indexed: identifier parts and grams are looked up as words.
            fields.ident = fields.words;
            fields.gram = fields.words;
        }
        (builder.build(), entry, fields)
    }

    /// Writes the passages of every entry of `kb` into `index`, which has the schema
    /// of `passages`.
    pub fn write(
        kb: &Kb,
        passages: Passages,
        index: &Index,
        segmenter: &Segmenter,
    ) -> Result<(), SearchError> {
        let started = std::time::Instant::now();
        let (_, entry, fields) = PhraseIndex::schema(passages);
        register_analyzers_with(index, segmenter);
        let docs = kb.entries().iter().enumerate().flat_map(|(position, e)| {
            passages.of(e).into_iter().map(move |passage| {
                let mut doc = TantivyDocument::default();
                doc.add_u64(entry, position as u64);
                doc.add_text(fields.words, &passage);
                if passages == Passages::Describing {
                    doc.add_text(fields.ident, &passage);
                    doc.add_text(fields.gram, &passage);
                }
                doc
            })
        });
        // One thread each: the main index is written on the others at the same time.
        write_once(index, 1, PHRASE_BUDGET, docs)?;
        tracing::debug!(
            index = passages.name(),
            ms = started.elapsed().as_millis() as u64,
            "phrase index written"
        );
        Ok(())
    }

    /// The phrase index of `passages` over the written `index`, for a kb of `entries`.
    pub fn open(
        index: Index,
        passages: Passages,
        entries: usize,
        budget: CacheBudget,
    ) -> Result<PhraseIndex, SearchError> {
        let (schema, _, fields) = PhraseIndex::schema(passages);
        if index.schema() != schema {
            return Err(SearchError::Schema(passages.name()));
        }
        register_analyzers(&index);
        let searcher = searcher(&index)?;
        tracing::debug!(
            index = passages.name(),
            passages = searcher.num_docs(),
            segments = searcher.segment_readers().len(),
            "phrase index opened"
        );
        let entry_of = entries_by_ordinal(&searcher)?;
        let mut passages_of = vec![Vec::new(); entries];
        for (ordinal, &entry) in entry_of.iter().enumerate() {
            if let Some(passages) = passages_of.get_mut(entry) {
                passages.push(ordinal as u32);
            }
        }
        // Ranked from champion lists only (`best`); `explains` reads the postings.
        let scorer = Scorer::new(
            searcher.clone(),
            Box::new(searcher),
            vec![(1.0, fields)],
            budget.passage_terms(),
        )
        .with_champions(champions(entry_of.len(), entries))
        .champions_only();
        Ok(PhraseIndex {
            scorer,
            fields,
            passages_of,
            entry_of,
        })
    }

    /// The same index, judging word rarity over `background`'s passages too: a word
    /// that every error quote uses is common even if few symptom phrases use it.
    pub fn on_background(self, background: &PhraseIndex, budget: CacheBudget) -> PhraseIndex {
        let own = self.scorer.searcher().clone();
        let stats = Box::new(Combined {
            own: own.clone(),
            other: background.scorer.searcher().clone(),
        });
        let champions = champions(self.entry_of.len(), self.passages_of.len());
        PhraseIndex {
            scorer: Scorer::new(own, stats, vec![(1.0, self.fields)], budget.passage_terms())
                .with_champions(champions)
                .champions_only(),
            ..self
        }
    }

    /// Entries whose best passage matches `text`, with that passage's score, best first.
    /// Exact up to `CHAMPIONS` entries; in a larger knowledge base the passages are
    /// scored from champion lists (see `Scoring::Champions`).
    pub fn best(&self, text: &Analysed) -> Result<Vec<(usize, f32)>, SearchError> {
        let Some(plan) = self.scorer.plan(text)? else {
            return Ok(Vec::new());
        };
        let mut best: FxHashMap<usize, f32> = FxHashMap::default();
        for (ordinal, score) in self
            .scorer
            .top_by(&plan, Scoring::Champions, PHRASE_HITS, None)?
        {
            let entry = best.entry(self.entry_of[ordinal as usize]).or_insert(0.0);
            *entry = entry.max(score);
        }
        let mut ranked: Vec<(usize, f32)> = best.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(ranked)
    }

    /// The passages (ordinals, ascending) of entry `entry`.
    pub fn passages_of(&self, entry: usize) -> &[u32] {
        self.passages_of.get(entry).map_or(&[], Vec::as_slice)
    }

    /// The passages with ordinals in `first..=last` that hold the analysed word `term`,
    /// ascending. Read by seeking in the postings, so the cost does not grow with how
    /// many other passages hold the word (in a large knowledge base, millions).
    pub fn holding_in(&self, term: &str, first: u32, last: u32) -> Result<Vec<u32>, SearchError> {
        let term = Term::from_field_text(self.fields.words, term);
        let mut found = Vec::new();
        for (base, segment) in self.scorer.segments() {
            let end = base + segment.max_doc();
            if first >= end || last < base {
                continue;
            }
            let inverted = segment.inverted_index(self.fields.words)?;
            let Some(mut postings) = inverted.read_postings(&term, IndexRecordOption::Basic)?
            else {
                continue;
            };
            let start = first.saturating_sub(base);
            let mut doc = postings.doc();
            if doc < start {
                doc = postings.seek(start);
            }
            while doc != TERMINATED && base + doc <= last {
                found.push(base + doc);
                doc = postings.advance();
            }
        }
        Ok(found)
    }

    pub fn clear_cache(&self) {
        self.scorer.clear_cache();
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.scorer.cache_stats()
    }
}
