//! The one place that knows the index's field names: every logical field of an entry is
//! indexed three times, once per analyzer, so queries can weigh exact words, identifier
//! parts and Chinese character grams differently. There is no catch-all field: in how
//! many entries a term occurs is counted over the parts' postings (see `GlobalStats`),
//! which halves the indexing work.

use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};

use super::analysis;

/// Which analyzer a term came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    Words = 0,
    Ident = 1,
    Gram = 2,
}

impl FieldKind {
    pub fn field(self, fields: &PartFields) -> Field {
        match self {
            FieldKind::Words => fields.words,
            FieldKind::Ident => fields.ident,
            FieldKind::Gram => fields.gram,
        }
    }
}

/// The parts of an entry that are searched, each with its weight in ranking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Title,
    Signatures,
    Symptoms,
    Summary,
    Tags,
    Body,
    /// The Chinese characters of the Chinese body (see `analysis::chinese_runs`).
    BodyZh,
    Examples,
}

impl Part {
    pub const ALL: [Part; 8] = [
        Part::Title,
        Part::Signatures,
        Part::Symptoms,
        Part::Summary,
        Part::Tags,
        Part::Body,
        Part::BodyZh,
        Part::Examples,
    ];

    fn name(self) -> &'static str {
        match self {
            Part::Title => "title",
            Part::Signatures => "signatures",
            Part::Symptoms => "symptoms",
            Part::Summary => "summary",
            Part::Tags => "tags",
            Part::Body => "body",
            Part::BodyZh => "body_zh",
            Part::Examples => "examples",
        }
    }

    /// Titles and signatures outrank the body: a query that names the problem or
    /// quotes its error text should land on that entry first.
    pub fn boost(self) -> f32 {
        match self {
            Part::Title => 4.0,
            Part::Signatures => 4.0,
            Part::Symptoms => 2.5,
            Part::Summary => 2.0,
            Part::Tags => 1.5,
            Part::Body => 1.0,
            Part::BodyZh => 1.0,
            Part::Examples => 0.5,
        }
    }
}

/// Name of the fast field holding each document's entry: its position in the
/// knowledge base's entries.
pub const ENTRY: &str = "entry";

/// Options for a text field analysed by `tokenizer`, recording `record`.
pub fn indexed_text(tokenizer: &str, record: IndexRecordOption) -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(tokenizer)
            .set_index_option(record),
    )
}

/// The three fields of one part.
#[derive(Clone, Copy, Debug)]
pub struct PartFields {
    pub words: Field,
    pub ident: Field,
    pub gram: Field,
}

impl PartFields {
    /// Which analyzer's terms `field` holds, if it is one of these three.
    pub fn kind_of(&self, field: Field) -> Option<FieldKind> {
        [FieldKind::Words, FieldKind::Ident, FieldKind::Gram]
            .into_iter()
            .find(|kind| kind.field(self) == field)
    }
}

#[derive(Clone, Debug)]
pub struct Fields {
    pub schema: Schema,
    /// The entry's position in the knowledge base (see `ENTRY`).
    pub entry: Field,
    parts: Vec<(Part, PartFields)>,
}

impl Fields {
    pub fn new() -> Fields {
        let mut builder = Schema::builder();
        let entry = builder.add_u64_field(ENTRY, FAST);
        let text = |tokenizer| indexed_text(tokenizer, IndexRecordOption::WithFreqsAndPositions);
        // Identifier parts are never looked up as phrases, so they need no positions.
        let counted = |tokenizer| indexed_text(tokenizer, IndexRecordOption::WithFreqs);
        let parts = Part::ALL
            .iter()
            .map(|&part| {
                let name = part.name();
                let fields = PartFields {
                    words: builder.add_text_field(name, text(analysis::WORDS)),
                    ident: builder
                        .add_text_field(&format!("{name}_ident"), counted(analysis::IDENT)),
                    gram: builder.add_text_field(&format!("{name}_gram"), text(analysis::GRAM)),
                };
                (part, fields)
            })
            .collect();
        Fields {
            schema: builder.build(),
            entry,
            parts,
        }
    }

    /// The fields of every part that hold the same analyzer's terms as `field`, or
    /// `None` when `field` is not a part's field.
    pub fn same_kind(&self, field: Field) -> Option<Vec<Field>> {
        let kind = self.parts.iter().find_map(|(_, f)| f.kind_of(field))?;
        Some(self.parts.iter().map(|(_, f)| kind.field(f)).collect())
    }

    pub fn parts(&self) -> impl Iterator<Item = (Part, PartFields)> + '_ {
        self.parts.iter().copied()
    }
}

impl Default for Fields {
    fn default() -> Self {
        Fields::new()
    }
}
