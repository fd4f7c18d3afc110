//! Every weight, threshold and rule that decides an answer, in one place: how the
//! evidence for an entry adds up to a score, when that evidence is enough to call the
//! entry the answer, and how sure the answer is. The stages in `rank.rs` gather the
//! evidence; only this module judges it.

use std::sync::LazyLock;

use regex::Regex;

use super::rank::{Confidence, Verdict};

/// Candidates considered for the answer, best-scored first: a candidate with a weaker
/// claim cannot hide a well-supported one just below it.
pub const ANSWER_CANDIDATES: usize = 3;
/// Entries taken from full-text search, and from the closest describing phrases.
pub const TEXT_CANDIDATES: usize = 10;

/// A paste this short is all message (a question, one traceback): all of it is queried.
pub const SHORT_PASTE_LINES: usize = 40;
/// Error-looking lines of a long paste added to the full-text query.
pub const LONG_PASTE_LINES: usize = 16;
/// Lines of a short paste queried (the words past them are not read).
pub const SHORT_PASTE_QUERY_LINES: usize = 60;
/// Paste lines searched for text evidence.
pub const EVIDENCE_LINES: usize = 200;
/// Most evidence lines shown per match.
pub const MAX_EVIDENCE: usize = 6;
/// Lines shown as text evidence when no signature fired.
pub const TEXT_EVIDENCE_LINES: usize = 3;
/// Longest evidence line shown, in characters.
pub const EVIDENCE_CHARS: usize = 400;

/// Each strong signature that fired (an error message or code that names the
/// problem): it outweighs any amount of text similarity.
pub const STRONG: f32 = 10.0;
/// Strong signatures counted at most.
pub const STRONG_COUNTED: usize = 3;
/// Each weak signature that fired (a launcher's wrapper, a generic code).
pub const WEAK: f32 = 3.0;
/// Weak signatures counted at most.
pub const WEAK_COUNTED: usize = 2;
/// A signature text that fires for more entries than this names no one problem (a
/// launcher's wrapper that half of a large knowledge base quotes): it counts for none
/// of them, and they must be found by their other evidence.
pub const MOST_ENTRIES_PER_SIGNATURE: usize = 64;
/// A signal exit (from the triage) that one of the entry's branches names, once,
/// beyond the weak signatures' cap. A launcher's box fires weak signatures in the
/// wrapper's entry and in the entry about the signal alike, and reads like the
/// wrapper's entry; what the signal means must outweigh that closeness of text (exit
/// -7 is a bus error, whatever launcher reported it).
pub const EXIT_NAMED: f32 = TEXT_RANK;
/// A signature on the root-cause exception's lines, once.
pub const ON_ROOT_CAUSE: f32 = 5.0;
/// Full-text rank of the paste's messages, relative to the best entry's (0..=1).
pub const TEXT_RANK: f32 = 6.0;
/// Closest describing phrase (symptom, title, summary), relative to the best (0..=1).
pub const PHRASE_RANK: f32 = 6.0;
/// Share of the paste's query vocabulary the entry holds (0..=1).
pub const COVERAGE: f32 = 4.0;

/// Without a strong signature, an entry offered for a paste with an exception must
/// explain this share of the root-cause exception's words in one of its passages (its
/// type included: an exception type no entry mentions weighs as much as the rarest
/// word). An error the entry does not explain is not its problem, however similar
/// the rest of the log looks.
pub const ROOT_MESSAGE_COVERAGE: f32 = 0.6;
/// The same with a weak signature on its side.
pub const ROOT_MESSAGE_COVERAGE_WEAK: f32 = 0.35;
/// Words of (distributed) training. A log without a Python exception and without any of
/// these (an npm, Docker or cargo failure, a Go panic) is held to its first error
/// lines as to a root-cause exception: an entry must explain them.
pub static FIELD_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)torch|cuda|nccl|gpu|\brank|distributed|deepspeed|accelerate|fsdp|\bddp\b|world_size|megatron|horovod|\bmpi|infiniband|train|epoch|\bloss\b|\bamp\b|fp16|bf16|huggingface|transformers|wandb|sigkill|显存|显卡|多卡|单卡|一块卡|卡住|多机|分布式|并行|训练",
    )
    .expect("a valid pattern")
});
/// Error lines of such a log that stand for its message.
pub const ERROR_LINES_EXPLAINED: usize = 1;
/// Without any signature or exception (a question in words), an entry must be at
/// least this close to the best by full text or by its closest phrase...
pub const TEXT_ONLY_RANK: f32 = 0.8;
/// ...and share this much of the vocabulary.
pub const TEXT_ONLY_COVERAGE: f32 = 0.1;

/// The top answer is `high` with a strong signature when no rival has one, or when it
/// leads the rival by this much.
pub const HIGH_MARGIN: f32 = STRONG * 0.8;
/// Without a strong signature, `medium` takes a weak one and this much vocabulary.
/// Text alone, however close, stays `low`: on the tracker reports a first match with
/// no signature was right 2 times in 5, one with a signature 2 times in 3.
pub const MEDIUM_COVERAGE_WEAK: f32 = 0.4;

/// What the evidence says of one entry, before it is judged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Claim {
    /// Strong signatures that fired.
    pub strong: usize,
    /// Weak signatures that fired.
    pub weak: usize,
    /// A strong signature fired on a root-cause line, or any signature fired on a
    /// paste without an exception.
    pub on_root: bool,
    /// Full-text rank relative to the best entry's, 0..=1.
    pub text_rank: f32,
    /// Closest phrase's score relative to the best entry's, 0..=1.
    pub phrase_rank: f32,
    /// A signal exit in the paste is one the entry's branches name.
    pub exit_named: bool,
}

impl Claim {
    /// Its score but the vocabulary share, which adds at most [`COVERAGE`].
    pub fn partial_score(&self) -> f32 {
        STRONG * self.strong.min(STRONG_COUNTED) as f32
            + WEAK * self.weak.min(WEAK_COUNTED) as f32
            + if self.on_root { ON_ROOT_CAUSE } else { 0.0 }
            + if self.exit_named { EXIT_NAMED } else { 0.0 }
            + TEXT_RANK * self.text_rank
            + PHRASE_RANK * self.phrase_rank
    }

    /// Its whole score, with the share of the paste's vocabulary the entry holds.
    pub fn score(&self, coverage: f32) -> f32 {
        self.partial_score() + COVERAGE * coverage
    }
}

/// Whether the evidence supports calling the entry the answer. `explained`: for a
/// paste with an exception and an entry without a strong signature, the share of the
/// root-cause message that one passage of the entry explains; `coverage`: the entry's
/// share of the paste's vocabulary. A `question` in words (no error to explain) needs
/// no vocabulary share: its closest entries are what it asks about, and without a
/// signature they stay low-confidence leads, never an answer (see `confidence`).
pub fn supports(claim: &Claim, coverage: f32, explained: Option<f32>, question: bool) -> bool {
    if claim.strong > 0 {
        return true;
    }
    match explained {
        Some(explained) => {
            let needed = if claim.weak == 0 {
                ROOT_MESSAGE_COVERAGE
            } else {
                ROOT_MESSAGE_COVERAGE_WEAK
            };
            explained >= needed
        }
        None => {
            claim.weak > 0
                || ((claim.text_rank >= TEXT_ONLY_RANK || claim.phrase_rank >= TEXT_ONLY_RANK)
                    && (question || coverage >= TEXT_ONLY_COVERAGE))
        }
    }
}

/// Where the first-ranked answer stands: its score and vocabulary share, and the next
/// one's score and whether that one has a strong signature.
#[derive(Debug, Clone, Copy)]
pub struct Lead {
    pub score: f32,
    pub coverage: f32,
    pub runner_up: Option<(f32, bool)>,
}

/// How sure an answer is: the first-ranked one with its `lead`, the others without.
pub fn confidence(claim: &Claim, lead: Option<Lead>) -> Confidence {
    let Some(lead) = lead else {
        return if claim.strong > 0 {
            Confidence::Medium
        } else {
            Confidence::Low
        };
    };
    let margin = lead.runner_up.map_or(lead.score, |(s, _)| lead.score - s);
    let rival_has_signature = lead.runner_up.is_some_and(|(_, strong)| strong);
    if claim.strong > 0 && (!rival_has_signature || margin >= HIGH_MARGIN) {
        Confidence::High
    } else if claim.strong > 0 || (claim.weak > 0 && lead.coverage >= MEDIUM_COVERAGE_WEAK) {
        Confidence::Medium
    } else {
        Confidence::Low
    }
}

/// The verdict from the first supported match's confidence (`None`: none supported).
/// Only `high` is `matched`: on the labelled sets in `eval/` and the dev set it was
/// right every time (46 of 46). `medium` is `possible`, right about 3 times in 5. A
/// `low` first match is right about 1 time in 3 on real tracker reports, less often
/// than not, so it is `no_match`: its matches are leads, not answers (`errbook eval
/// DIR` prints the table).
pub fn verdict(first: Option<Confidence>) -> Verdict {
    match first {
        Some(Confidence::High) => Verdict::Matched,
        Some(Confidence::Medium) => Verdict::Possible,
        Some(Confidence::Low) | None => Verdict::NoMatch,
    }
}
