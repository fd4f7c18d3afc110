//! The one place that knows the index's field names: every logical field of an entry is
//! indexed three times, once per analyzer, so queries can weigh exact words, identifier
//! parts and Chinese character grams differently.

use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};

use super::analysis;

/// The parts of an entry that are searched, each with its weight in ranking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Title,
    Signatures,
    Symptoms,
    Summary,
    Tags,
    Body,
    Examples,
}

impl Part {
    pub const ALL: [Part; 7] = [
        Part::Title,
        Part::Signatures,
        Part::Symptoms,
        Part::Summary,
        Part::Tags,
        Part::Body,
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

#[derive(Clone, Debug)]
pub struct Fields {
    pub schema: Schema,
    /// The entry's position in the knowledge base (see `ENTRY`).
    pub entry: Field,
    /// Every part's text once more, per analyzer, only to count in how many entries a
    /// term occurs at all (see `GlobalStats`).
    pub all: PartFields,
    parts: Vec<(Part, PartFields)>,
}

impl Fields {
    pub fn new() -> Fields {
        let mut builder = Schema::builder();
        let entry = builder.add_u64_field(ENTRY, FAST);
        let text = |tokenizer| indexed_text(tokenizer, IndexRecordOption::WithFreqsAndPositions);
        let counted = |tokenizer| indexed_text(tokenizer, IndexRecordOption::Basic);
        let all = PartFields {
            words: builder.add_text_field("all", counted(analysis::WORDS)),
            ident: builder.add_text_field("all_ident", counted(analysis::IDENT)),
            gram: builder.add_text_field("all_gram", counted(analysis::GRAM)),
        };
        let parts = Part::ALL
            .iter()
            .map(|&part| {
                let name = part.name();
                let fields = PartFields {
                    words: builder.add_text_field(name, text(analysis::WORDS)),
                    ident: builder.add_text_field(&format!("{name}_ident"), text(analysis::IDENT)),
                    gram: builder.add_text_field(&format!("{name}_gram"), text(analysis::GRAM)),
                };
                (part, fields)
            })
            .collect();
        Fields {
            schema: builder.build(),
            entry,
            all,
            parts,
        }
    }

    /// The catch-all field that counts documents for a part field's terms.
    pub fn all_for(&self, field: Field) -> Field {
        let all = self.all;
        self.parts
            .iter()
            .find_map(|(_, f)| {
                if f.words == field {
                    Some(all.words)
                } else if f.ident == field {
                    Some(all.ident)
                } else if f.gram == field {
                    Some(all.gram)
                } else {
                    None
                }
            })
            .unwrap_or(field)
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
