//! Indexes of short passages, one document each. `describing` holds the phrases that
//! describe an entry (symptoms, titles, summaries): a question is compared with each on
//! its own, so a long entry body cannot win on incidental words. `quoting` holds the
//! lines that quote an entry's errors (signatures, example lines, body lines): an error
//! message is explained by an entry only if one passage holds most of its words.

use std::collections::HashMap;

use tantivy::collector::TopDocs;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, STORED, STRING, Schema, Value};
use tantivy::{Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term};

use super::schema::{PartFields, indexed_text};
use super::{SearchError, analysis, register_analyzers, terms_query};
use crate::kb::{Entry, Kb};

/// Phrase documents looked at per query.
const PHRASE_HITS: usize = 64;
/// Passages of one entry looked at when checking that it explains a message.
const PASSAGE_HITS: usize = 8;
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
                lines.extend(entry.text.lines().map(str::to_string));
                lines.retain(|l| !l.trim().is_empty() && l.len() <= MAX_PASSAGE);
                lines.sort_unstable();
                lines.dedup();
                lines
            }
        }
    }
}

/// BM25 statistics over two phrase indexes with the same schema.
struct Combined<'a> {
    own: &'a Searcher,
    other: &'a Searcher,
}

impl Bm25StatisticsProvider for Combined<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        Ok(self.own.total_num_tokens(field)? + self.other.total_num_tokens(field)?)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(Bm25StatisticsProvider::total_num_docs(self.own)?
            + Bm25StatisticsProvider::total_num_docs(self.other)?)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.own.doc_freq(term)? + self.other.doc_freq(term)?)
    }
}

pub struct PhraseIndex {
    index: Index,
    reader: IndexReader,
    slug: Field,
    /// The passage as written.
    text: Field,
    fields: PartFields,
    passages: Passages,
}

impl PhraseIndex {
    pub fn build(kb: &Kb, passages: Passages) -> Result<PhraseIndex, SearchError> {
        let mut builder = Schema::builder();
        let slug = builder.add_text_field("slug", STRING | STORED);
        let text = builder.add_text_field("text", STORED);
        let indexed = |tokenizer| indexed_text(tokenizer, IndexRecordOption::WithFreqsAndPositions);
        let fields = PartFields {
            words: builder.add_text_field("phrase", indexed(analysis::WORDS)),
            ident: builder.add_text_field("phrase_ident", indexed(analysis::IDENT)),
            gram: builder.add_text_field("phrase_gram", indexed(analysis::GRAM)),
        };
        let index = Index::create_in_ram(builder.build());
        register_analyzers(&index);
        let mut writer = index.writer_with_num_threads::<TantivyDocument>(1, 15_000_000)?;
        for entry in kb.entries() {
            for passage in passages.of(entry) {
                let mut doc = TantivyDocument::default();
                doc.add_text(slug, &entry.slug);
                doc.add_text(fields.words, &passage);
                if passages == Passages::Describing {
                    doc.add_text(fields.ident, &passage);
                    doc.add_text(fields.gram, &passage);
                }
                doc.add_text(text, passage);
                writer.add_document(doc)?;
            }
        }
        writer.commit()?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(PhraseIndex {
            index,
            reader,
            slug,
            text,
            fields,
            passages,
        })
    }

    fn query(&self, text: &str) -> Option<Box<dyn Query>> {
        let mut fields = self.fields;
        if self.passages == Passages::Quoting {
            // Only words are indexed: identifier parts and grams would match nothing.
            fields.ident = fields.words;
            fields.gram = fields.words;
        }
        terms_query(&self.index, &[(1.0, fields)], text, &|_, _| true)
    }

    /// Entries whose best passage matches `text`, with that passage's score, best first.
    /// Word rarity is judged over `background`'s passages too: a word that every error
    /// quote uses is common even if few symptom phrases happen to use it.
    pub fn best(
        &self,
        text: &str,
        background: &PhraseIndex,
    ) -> Result<Vec<(String, f32)>, SearchError> {
        let Some(query) = self.query(text) else {
            return Ok(Vec::new());
        };
        let searcher = self.reader.searcher();
        let stats = Combined {
            own: &searcher,
            other: &background.reader.searcher(),
        };
        let top = searcher.search_with_statistics_provider(
            &query,
            &TopDocs::with_limit(PHRASE_HITS).order_by_score(),
            &stats,
        )?;
        let mut best: HashMap<String, f32> = HashMap::new();
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            if let Some(slug) = doc.get_first(self.slug).and_then(|v| v.as_str()) {
                let entry = best.entry(slug.to_string()).or_insert(0.0);
                *entry = entry.max(score);
            }
        }
        let mut ranked: Vec<(String, f32)> = best.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(ranked)
    }

    /// The passages of entry `slug` closest to `text`, as written.
    pub fn passages(&self, text: &str, slug: &str) -> Result<Vec<String>, SearchError> {
        let Some(terms) = self.query(text) else {
            return Ok(Vec::new());
        };
        let of_entry: Box<dyn Query> = Box::new(TermQuery::new(
            Term::from_field_text(self.slug, slug),
            IndexRecordOption::Basic,
        ));
        let query = BooleanQuery::new(vec![(Occur::Must, of_entry), (Occur::Must, terms)]);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(PASSAGE_HITS).order_by_score())?;
        let mut out = Vec::with_capacity(top.len());
        for (_, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            if let Some(text) = doc.get_first(self.text).and_then(|v| v.as_str()) {
                out.push(text.to_string());
            }
        }
        Ok(out)
    }
}
