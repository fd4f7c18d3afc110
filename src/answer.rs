//! The JSON of answers, one shape for every edge: the API's responses, the MCP tools'
//! structured content and `errbook search|diagnose --json`. Domain types stay plain
//! Rust; these are built from them, with each entry's texts escaped once.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::diagnose;
use crate::kb::{Branch, Entry, Kb};
use crate::search::{Found, Hit, SearchQuery};

/// An entry's texts that every search hit and diagnosis match repeats, escaped as JSON
/// once per knowledge base rather than once per answer.
#[derive(Debug)]
pub struct EntryJson {
    title: Box<RawValue>,
    title_zh: Box<RawValue>,
    summary: Box<RawValue>,
}

impl EntryJson {
    fn new(entry: &Entry) -> EntryJson {
        EntryJson {
            title: raw(&entry.title),
            title_zh: raw(&entry.title_zh),
            summary: raw(&entry.summary),
        }
    }
}

/// A score to three decimals, written the same by every JSON writer (an `f32` widened
/// to `f64` prints as `39.115570068359375`).
fn rounded(score: f32) -> f64 {
    (f64::from(score) * 1000.0).round() / 1000.0
}

/// Bytes an entry's escaped texts take in an answer.
fn texts_len(texts: [&RawValue; 3]) -> usize {
    texts.iter().map(|t| t.get().len()).sum()
}

fn raw(text: &str) -> Box<RawValue> {
    let json = serde_json::to_string(text).expect("a string always serialises");
    RawValue::from_string(json).expect("a JSON string is valid JSON")
}

/// Each entry's [`EntryJson`], by position in one knowledge base, written the first
/// time an answer holds the entry.
#[derive(Debug)]
pub struct EntryTexts(Box<[OnceLock<EntryJson>]>);

impl EntryTexts {
    pub fn new(kb: &Kb) -> EntryTexts {
        EntryTexts((0..kb.len()).map(|_| OnceLock::new()).collect())
    }
}

/// What answers are written from: the knowledge base, its entries' texts as JSON, and
/// where entry pages live.
#[derive(Clone, Copy)]
pub struct Answers<'a> {
    pub kb: &'a Kb,
    pub texts: &'a EntryTexts,
    /// Prepended to `/entries/{slug}`: the server's public URL, or empty for relative
    /// links.
    pub base: &'a str,
}

impl<'a> Answers<'a> {
    /// The entry with `slug` and its texts as JSON.
    fn entry(&self, slug: &str) -> Option<(&'a Entry, &'a EntryJson)> {
        let position = self.kb.position(slug)?;
        let entry = &self.kb.entries()[position];
        let json = self
            .texts
            .0
            .get(position)?
            .get_or_init(|| EntryJson::new(entry));
        Some((entry, json))
    }

    /// The URL of an entry's page.
    pub fn entry_url(&self, slug: &str) -> String {
        format!("{}/entries/{slug}", self.base)
    }

    /// A search hit as JSON; `None` when the entry is not in this knowledge base.
    pub fn hit(&self, hit: &'a Hit) -> Option<SearchHit<'a>> {
        let (entry, json) = self.entry(&hit.slug)?;
        Some(SearchHit {
            title: &json.title,
            title_zh: &json.title_zh,
            url: self.entry_url(&entry.slug),
            summary: &json.summary,
            tags: &entry.tags,
            slug: &entry.slug,
            snippet: hit.snippet.clone(),
            score: rounded(hit.score),
        })
    }

    /// The answer to a search: `found` for `query`.
    pub fn search(&self, query: SearchQuery, found: &'a Found) -> SearchResponse<'a> {
        SearchResponse {
            query: query.text,
            tag: query.tag,
            total: found.total,
            offset: query.offset,
            hits: found.hits.iter().filter_map(|h| self.hit(h)).collect(),
        }
    }

    /// The answer to a diagnosis.
    pub fn diagnosis(&self, d: &'a diagnose::Diagnosis) -> DiagnoseResponse<'a> {
        let mut lines = Vec::new();
        let matches = d
            .matches
            .iter()
            .filter_map(|m| {
                let (entry, json) = self.entry(&m.slug)?;
                Some(DiagnoseMatch {
                    slug: &entry.slug,
                    title: &json.title,
                    title_zh: &json.title_zh,
                    url: self.entry_url(&entry.slug),
                    summary: &json.summary,
                    score: rounded(m.score),
                    confidence: m.confidence.into(),
                    evidence: (m.evidence.iter())
                        .map(|e| Evidence::new(e, &mut lines))
                        .collect(),
                    branch: m.branch.as_ref().map(|b| SelectedBranch::new(entry, b)),
                    versions: m.versions.iter().map(VersionCheck::from).collect(),
                })
            })
            .collect();
        lines.sort_by_key(|l: &PasteLine| l.line);
        let parsed = &d.parsed;
        DiagnoseResponse {
            verdict: d.verdict.into(),
            matches,
            lines,
            closest: d.closest.iter().filter_map(|h| self.hit(h)).collect(),
            triage: Triage::new(&d.triage, parsed.root_exception()),
            parsed: ParsedSummary {
                lines: d.lines,
                distinct_lines: d.distinct_lines,
                truncated: d.truncated,
                root_cause: parsed.root_exception().map(Exception::from),
                exceptions: parsed.exceptions.iter().map(Exception::from).collect(),
                first_failure: parsed.first_failure.as_ref().map(RootCause::from),
                dangling_frames: parsed.dangling_frames.iter().map(Frame::from).collect(),
                error_codes: parsed.error_codes.clone(),
                versions: parsed.versions.clone(),
            },
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SearchResponse<'a> {
    /// The query as searched (trimmed).
    pub query: String,
    pub tag: Option<String>,
    /// Entries the query finds in all; `hits` are those from `offset` on, at most
    /// `limit` of them. Ask for `offset` + `limit` next to page through the rest.
    pub total: usize,
    /// Hits skipped before the first of `hits` (0-based), as asked.
    pub offset: usize,
    pub hits: Vec<SearchHit<'a>>,
}

impl SearchResponse<'_> {
    /// About the bytes this takes as JSON.
    pub fn size(&self) -> usize {
        64 + self.query.len() + self.hits.iter().map(SearchHit::size).sum::<usize>()
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SearchHit<'a> {
    pub slug: &'a str,
    #[schema(value_type = String)]
    pub title: &'a RawValue,
    #[schema(value_type = String)]
    pub title_zh: &'a RawValue,
    /// The entry's page (absolute when the server knows its public URL).
    pub url: String,
    #[schema(value_type = String)]
    pub summary: &'a RawValue,
    /// An excerpt around the matched words.
    pub snippet: String,
    /// Relevance, larger is better; only the order within one answer means anything.
    pub score: f64,
    pub tags: &'a [String],
}

impl SearchHit<'_> {
    fn size(&self) -> usize {
        128 + self.slug.len() * 2
            + texts_len([self.title, self.title_zh, self.summary])
            + self.snippet.len()
            + 16 * self.tags.len()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The first match is the answer.
    Matched,
    /// Candidates worth a look; none is certain.
    Possible,
    /// No entry fits. `matches` may hold low-confidence leads (right about one time
    /// in three); without any, `closest` lists the nearest entries by text.
    NoMatch,
}

impl From<diagnose::Verdict> for Verdict {
    fn from(v: diagnose::Verdict) -> Verdict {
        match v {
            diagnose::Verdict::Matched => Verdict::Matched,
            diagnose::Verdict::Possible => Verdict::Possible,
            diagnose::Verdict::NoMatch => Verdict::NoMatch,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DiagnoseResponse<'a> {
    pub verdict: Verdict,
    pub matches: Vec<DiagnoseMatch<'a>>,
    /// The paste lines the matches' evidence points at, each once (however many
    /// matches point at it), in paste order.
    pub lines: Vec<PasteLine>,
    /// With `no_match` and no leads in `matches`: nearest entries by full text, not a
    /// diagnosis.
    pub closest: Vec<SearchHit<'a>>,
    /// What happened, from the paste alone, whatever the verdict.
    pub triage: Triage,
    pub parsed: ParsedSummary,
}

impl DiagnoseResponse<'_> {
    /// About the bytes this takes as JSON.
    pub fn size(&self) -> usize {
        let matches: usize = self.matches.iter().map(DiagnoseMatch::size).sum();
        let lines: usize = self.lines.iter().map(|l| 32 + l.text.len()).sum();
        let closest: usize = self.closest.iter().map(SearchHit::size).sum();
        1024 + matches + lines + closest
    }

    /// Cuts every text to `max_chars` characters and every list of the parsed summary
    /// and of evidence to `max_items`; true when anything was cut.
    pub fn clip(&mut self, max_chars: usize, max_items: usize) -> bool {
        let mut cut = false;
        let mut text = |s: &mut String| cut |= clip_chars(s, max_chars);
        for l in &mut self.lines {
            text(&mut l.text);
        }
        for h in &mut self.closest {
            text(&mut h.snippet);
        }
        text(&mut self.triage.summary);
        for c in &mut self.triage.consequences {
            text(&mut c.text);
        }
        let p = &mut self.parsed;
        for e in p.root_cause.iter_mut().chain(&mut p.exceptions) {
            text(&mut e.message);
            text(&mut e.qualified);
        }
        for s in p.error_codes.iter_mut().chain(&mut p.versions) {
            text(s);
        }
        if let Some(t) = p.first_failure.as_mut().and_then(|f| f.traceback.as_mut()) {
            text(t);
        }
        cut |= truncate(&mut p.exceptions, max_items);
        cut |= truncate(&mut p.dangling_frames, max_items);
        cut |= truncate(&mut p.error_codes, max_items);
        cut |= truncate(&mut p.versions, max_items);
        for e in p.root_cause.iter_mut().chain(&mut p.exceptions) {
            cut |= truncate(&mut e.frames, max_items);
        }
        for m in &mut self.matches {
            cut |= truncate(&mut m.evidence, max_items);
        }
        let cited =
            |line: usize| (self.matches.iter()).any(|m| m.evidence.iter().any(|e| e.line == line));
        self.lines.retain(|l| cited(l.line));
        // A span past a line's cut end no longer marks anything.
        for m in &mut self.matches {
            for e in &mut m.evidence {
                let len = (self.lines.iter())
                    .find(|l| l.line == e.line)
                    .map_or(0, |l| l.text.len());
                if e.span.is_some_and(|(_, end)| end > len) {
                    e.span = None;
                }
            }
        }
        cut
    }
}

/// `text` cut to `max_chars` characters, with `…` where it was cut; true when cut.
fn clip_chars(text: &mut String, max_chars: usize) -> bool {
    let clipped = diagnose::clip(text, max_chars);
    let cut = clipped.len() != text.len();
    *text = clipped;
    cut
}

fn truncate<T>(items: &mut Vec<T>, max: usize) -> bool {
    let cut = items.len() > max;
    items.truncate(max);
    cut
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DiagnoseMatch<'a> {
    pub slug: &'a str,
    #[schema(value_type = String)]
    pub title: &'a RawValue,
    #[schema(value_type = String)]
    pub title_zh: &'a RawValue,
    pub url: String,
    #[schema(value_type = String)]
    pub summary: &'a RawValue,
    /// Relevance, larger is better; only the order within one answer means anything.
    pub score: f64,
    pub confidence: Confidence,
    /// The paste lines that led to this match.
    pub evidence: Vec<Evidence>,
    /// The cause among the entry's several that this paste selects, with its own fix.
    pub branch: Option<SelectedBranch>,
    /// The paste's releases of the packages whose versions the entry says it affects.
    pub versions: Vec<VersionCheck>,
}

/// Releases of one package an entry says its problem affects.
#[derive(Debug, Serialize, ToSchema)]
pub struct Affected {
    pub package: &'static str,
    /// A PEP 440 range: `>=2.19.0, <2.19.4`.
    pub affected: String,
    /// The first release without the problem, if there is one.
    pub fixed: Option<String>,
}

impl Affected {
    /// An entry's ranges.
    pub fn of(entry: &Entry) -> Vec<Affected> {
        (entry.versions.iter())
            .map(|a| Affected {
                package: a.package,
                affected: a.range.clone(),
                fixed: a.fixed.clone(),
            })
            .collect()
    }
}

/// A release the paste shows, against the releases the entry says are affected.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionCheck {
    /// `torch`, `NCCL`, `CUDA`, `driver`, `Python`, `DeepSpeed`, `Accelerate`,
    /// `transformers` or `Lightning`.
    pub package: &'static str,
    /// The version the paste shows.
    pub found: String,
    /// The affected releases, a PEP 440 range.
    pub range: String,
    /// The first release without the problem, if there is one.
    pub fixed: Option<String>,
    pub affected: bool,
    /// The check in a sentence, for a reader.
    pub text: String,
    pub text_zh: String,
}

impl From<&diagnose::VersionCheck> for VersionCheck {
    fn from(c: &diagnose::VersionCheck) -> VersionCheck {
        VersionCheck {
            package: c.package,
            found: c.found.clone(),
            range: c.range.clone(),
            fixed: c.fixed.clone(),
            affected: c.affected,
            text: c.sentence(),
            text_zh: c.sentence_zh(),
        }
    }
}

/// One cause of an entry's symptom, selected by the paste.
#[derive(Debug, Serialize, ToSchema)]
pub struct SelectedBranch {
    pub id: String,
    pub title: String,
    pub title_zh: String,
    /// 1-based paste lines that selected it.
    pub lines: Vec<usize>,
    /// Its fix as Markdown, with the values this paste gives filled in.
    pub fix: String,
    pub fix_zh: String,
    /// The entry's other causes, to check if this one does not fit.
    pub otherwise: Vec<OtherBranch>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OtherBranch {
    pub id: String,
    pub title: String,
    pub title_zh: String,
}

impl SelectedBranch {
    fn new(entry: &Entry, chosen: &diagnose::ChosenBranch) -> SelectedBranch {
        let b = &entry.branches[chosen.index];
        SelectedBranch {
            id: b.id.clone(),
            title: b.title.clone(),
            title_zh: b.title_zh.clone(),
            lines: chosen.lines.clone(),
            fix: Branch::filled(&b.fix, &chosen.values),
            fix_zh: Branch::filled(&b.fix_zh, &chosen.values),
            otherwise: (entry.branches.iter())
                .filter(|o| o.id != b.id)
                .map(|o| OtherBranch {
                    id: o.id.clone(),
                    title: o.title.clone(),
                    title_zh: o.title_zh.clone(),
                })
                .collect(),
        }
    }
}

impl DiagnoseMatch<'_> {
    fn size(&self) -> usize {
        256 + self.slug.len()
            + texts_len([self.title, self.title_zh, self.summary])
            + 128 * self.evidence.len()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl From<diagnose::Confidence> for Confidence {
    fn from(c: diagnose::Confidence) -> Confidence {
        match c {
            diagnose::Confidence::Low => Confidence::Low,
            diagnose::Confidence::Medium => Confidence::Medium,
            diagnose::Confidence::High => Confidence::High,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A strong signature of the entry fired on this line.
    Signature,
    /// A weak signature (a wrapper or generic code) fired on this line.
    WeakSignature,
    /// Words of this line occur in the entry.
    Text,
}

/// One paste line that led to a match; its text is in the answer's `lines`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Evidence {
    /// 1-based line number in the paste.
    pub line: usize,
    pub kind: EvidenceKind,
    /// The signature that fired, as the entry writes it.
    pub signature: Option<String>,
    /// For text evidence, the shared words (analysed form).
    pub terms: Vec<String>,
    /// Byte range of the line's text (in `lines`) the signature matched.
    pub span: Option<(usize, usize)>,
}

/// A paste line that evidence points at.
#[derive(Debug, Serialize, ToSchema)]
pub struct PasteLine {
    /// 1-based line number in the paste.
    pub line: usize,
    /// The line, cleaned of prefixes (a long one cut around what matched).
    pub text: String,
}

impl Evidence {
    /// `e` as JSON, its line's text added to `lines` unless it is there already. A long
    /// line is cut around what each match's signature matched, so a second match may
    /// hold another cut of it: its span is then found in the cut listed.
    fn new(e: &diagnose::Evidence, lines: &mut Vec<PasteLine>) -> Evidence {
        let span = match lines.iter().find(|l| l.line == e.line) {
            None => {
                lines.push(PasteLine {
                    line: e.line,
                    text: e.text.clone(),
                });
                e.span
            }
            Some(listed) if listed.text == e.text => e.span,
            Some(listed) => e.span.and_then(|(start, end)| {
                let matched = e.text.get(start..end)?;
                let at = listed.text.find(matched)?;
                Some((at, at + matched.len()))
            }),
        };
        Evidence {
            line: e.line,
            kind: match e.kind {
                diagnose::EvidenceKind::Signature => EvidenceKind::Signature,
                diagnose::EvidenceKind::WeakSignature => EvidenceKind::WeakSignature,
                diagnose::EvidenceKind::Text => EvidenceKind::Text,
            },
            signature: e.signature.clone(),
            terms: e.terms.clone(),
            span,
        }
    }
}

/// What errbook understood of the paste.
#[derive(Debug, Serialize, ToSchema)]
pub struct ParsedSummary {
    /// Lines pasted.
    pub lines: usize,
    /// Lines left once repeats are dropped.
    pub distinct_lines: usize,
    /// True when the paste was too large and ordinary lines were dropped.
    pub truncated: bool,
    /// The exception that started the failure, rather than a wrapper reporting it.
    pub root_cause: Option<Exception>,
    pub exceptions: Vec<Exception>,
    /// torchrun's "Root Cause (first observed failure)" block.
    pub first_failure: Option<RootCause>,
    /// Frames of a traceback that was cut before its exception line.
    pub dangling_frames: Vec<Frame>,
    /// NCCL and CUDA error codes (`ncclInvalidUsage`, `CUDA error: out of memory`).
    pub error_codes: Vec<String>,
    /// Versions mentioned (`NCCL 2.18.1`, `torch 2.1.0`, `CUDA 12.1`).
    pub versions: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Exception {
    /// Type as printed, without its module (`DistBackendError`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Fully qualified type when printed with its module.
    pub qualified: String,
    pub message: String,
    /// Paste line number (1-based).
    pub line: usize,
    pub rank: Option<u32>,
    /// Wrapper exceptions report another failure (`ChildFailedError`).
    pub wrapper: bool,
    /// Innermost call last, as Python prints them.
    pub frames: Vec<Frame>,
}

impl From<&diagnose::Exception> for Exception {
    fn from(e: &diagnose::Exception) -> Exception {
        Exception {
            kind: e.kind.clone(),
            qualified: e.qualified.clone(),
            message: e.message.clone(),
            line: e.line,
            rank: e.rank,
            wrapper: e.wrapper,
            frames: e.frames.iter().map(Frame::from).collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Frame {
    /// File name without directories (`distributed.py`).
    pub file: String,
    pub line: u32,
    pub function: String,
}

impl From<&diagnose::Frame> for Frame {
    fn from(f: &diagnose::Frame) -> Frame {
        Frame {
            file: f.file.clone(),
            line: f.line,
            function: f.function.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RootCause {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub exitcode: Option<i32>,
    pub host: Option<String>,
    pub time: Option<String>,
    /// The block's traceback field when it holds more than the "To enable traceback" hint.
    pub traceback: Option<String>,
}

impl From<&diagnose::RootCause> for RootCause {
    fn from(r: &diagnose::RootCause) -> RootCause {
        RootCause {
            rank: r.rank,
            local_rank: r.local_rank,
            exitcode: r.exitcode,
            host: r.host.clone(),
            time: r.time.clone(),
            traceback: r.traceback.clone(),
        }
    }
}

/// What a paste says happened, matched or not.
#[derive(Debug, Serialize, ToSchema)]
pub struct Triage {
    /// In a sentence or three: who failed first with what and where, what follows from
    /// it, what the exit means. Empty when the paste says none of it.
    pub summary: String,
    pub first_failure: Option<FirstFailure>,
    /// The innermost frame of the root-cause traceback in the user's own code.
    pub user_frame: Option<UserFrame>,
    /// Errors that follow from the first failure rather than cause it.
    pub consequences: Vec<Consequence>,
    /// Exit codes and signals, with what they usually mean.
    pub exits: Vec<Exit>,
    /// Versions and environment named in the paste.
    pub environment: Vec<Fact>,
    /// Ranks that fell behind: the other ranks timed out waiting for them in a
    /// collective, and these did not.
    pub behind: Vec<u32>,
    /// When NCCL's sequence numbers showed those ranks behind: the last collective they
    /// enqueued and the later one the others timed out waiting in.
    pub behind_sequence: Option<BehindSequence>,
    /// When the heartbeat monitor's counts (`workMetaList_.size()`) showed those ranks
    /// behind: the collectives they had outstanding and the most another rank had.
    pub behind_outstanding: Option<BehindOutstanding>,
}

impl Triage {
    fn new(t: &diagnose::Triage, root: Option<&diagnose::Exception>) -> Triage {
        Triage {
            summary: t.summary(root),
            first_failure: t.first_failure.as_ref().map(|f| FirstFailure {
                rank: f.rank,
                host: f.host.clone(),
                time: f.time.clone(),
                known_from: match f.known_from {
                    diagnose::KnownFrom::RootCauseBlock => KnownFrom::RootCauseBlock,
                    diagnose::KnownFrom::FirstRankedException => KnownFrom::FirstRankedException,
                },
            }),
            user_frame: t.user_frame.as_ref().map(|f| UserFrame {
                path: f.path.clone(),
                file: f.file.clone(),
                line: f.line,
                function: f.function.clone(),
            }),
            consequences: (t.consequences.iter())
                .map(|c| Consequence {
                    line: c.line,
                    rank: c.rank,
                    kind: c.kind.as_str(),
                    why: c.kind.explanation(),
                    text: c.text.clone(),
                })
                .collect(),
            exits: (t.exits.iter())
                .map(|e| Exit {
                    line: e.line,
                    code: e.code,
                    signal: e.signal,
                    meaning: e.meaning,
                })
                .collect(),
            environment: (t.environment.iter())
                .map(|f| Fact {
                    name: f.name,
                    value: f.value.clone(),
                })
                .collect(),
            behind: t.behind.as_ref().map_or(Vec::new(), |b| b.ranks.clone()),
            behind_sequence: (t.behind.as_ref().and_then(|b| b.seq)).map(
                |(last_enqueued, waiting_in)| BehindSequence {
                    last_enqueued,
                    waiting_in,
                },
            ),
            behind_outstanding: (t.behind.as_ref().and_then(|b| b.outstanding)).map(
                |(outstanding, others)| BehindOutstanding {
                    outstanding,
                    others,
                },
            ),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BehindOutstanding {
    /// Collectives the ranks behind had enqueued and not completed.
    pub outstanding: u64,
    /// The most another rank had.
    pub others: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BehindSequence {
    /// The last collective the ranks behind enqueued (`last enqueued work`).
    pub last_enqueued: u64,
    /// The collective the ranks that timed out were waiting in (`SeqNum`).
    pub waiting_in: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FirstFailure {
    pub rank: Option<u32>,
    pub host: Option<String>,
    /// When, as the launcher printed it.
    pub time: Option<String>,
    pub known_from: KnownFrom,
}

/// How the first failure was told apart.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KnownFrom {
    /// torchrun's "Root Cause (first observed failure)" block.
    RootCauseBlock,
    /// The first exception printed with a rank prefix.
    FirstRankedException,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserFrame {
    pub path: String,
    pub file: String,
    pub line: u32,
    pub function: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Consequence {
    /// 1-based paste line.
    pub line: usize,
    pub rank: Option<u32>,
    /// `launcher_stops_survivors`, `peer_connection_lost`, `watchdog_timeout` or
    /// `launcher_summary`.
    pub kind: &'static str,
    /// Why it follows from the first failure.
    pub why: &'static str,
    pub text: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Exit {
    /// 1-based paste line.
    pub line: usize,
    /// As printed: negative for a signal under torchrun, 128 + the signal from a shell.
    pub code: i32,
    pub signal: Option<&'static str>,
    pub meaning: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Fact {
    pub name: &'static str,
    pub value: String,
}

/// `T`'s JSON Schema with every schema it refers to written in place: what an MCP
/// client reads as a tool's `outputSchema`, from the same types the OpenAPI document
/// describes.
pub fn json_schema<T: ToSchema>() -> Value {
    let mut parts = Vec::new();
    T::schemas(&mut parts);
    let parts: serde_json::Map<String, Value> = parts
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or_default()))
        .collect();
    let mut root = serde_json::to_value(T::schema()).unwrap_or_default();
    inline_refs(&mut root, &parts);
    root
}

fn inline_refs(value: &mut Value, parts: &serde_json::Map<String, Value>) {
    match value {
        Value::Object(map) => {
            let target = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
                .and_then(|name| parts.get(name));
            if let Some(target) = target {
                *value = target.clone();
                inline_refs(value, parts);
            } else {
                map.values_mut().for_each(|v| inline_refs(v, parts));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| inline_refs(v, parts)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_escaped_once_read_back_as_written() {
        for text in [
            "",
            "plain",
            "quotes \" and \\ backslashes",
            "a line break\nand a tab\t and a control \u{1}",
            "显存不足：CUDA out of memory </script> & <b>",
        ] {
            let json = raw(text);
            assert_eq!(serde_json::from_str::<String>(json.get()).unwrap(), text);
            // What serde_json would have written in the answer itself.
            assert_eq!(json.get(), serde_json::to_string(text).unwrap());
        }
    }

    #[test]
    fn the_schema_of_an_answer_refers_to_nothing_outside_it() {
        let schema = json_schema::<DiagnoseResponse>().to_string();
        assert!(!schema.contains("$ref"), "{schema}");
        for field in ["verdict", "matches", "evidence", "root_cause", "closest"] {
            assert!(schema.contains(field), "{field} missing from {schema}");
        }
    }

    #[test]
    fn a_line_cited_twice_is_listed_once_and_each_span_marks_the_text_listed() {
        let evidence = |text: &str, span| diagnose::Evidence {
            line: 7,
            text: text.to_string(),
            kind: diagnose::EvidenceKind::Signature,
            signature: Some("sig".into()),
            terms: Vec::new(),
            span,
        };
        let mut lines = Vec::new();
        // The same long line, cut around what each signature matched.
        let first = Evidence::new(&evidence("…a b MATCH c d…", Some((7, 12))), &mut lines);
        let second = Evidence::new(&evidence("…MATCH c d e f…", Some((3, 8))), &mut lines);
        let third = Evidence::new(&evidence("…x y z…", Some((3, 4))), &mut lines);
        let text = |e: &Evidence| e.span.map(|(a, b)| &lines[0].text[a..b]);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].text, "…a b MATCH c d…");
        assert_eq!(text(&first), Some("MATCH"));
        assert_eq!(text(&second), Some("MATCH"));
        // What the listed cut does not hold is marked nowhere rather than wrongly.
        assert_eq!(third.span, None);
    }

    #[test]
    fn clipping_cuts_texts_and_lists_and_says_so() {
        let mut s = "héllo wörld".to_string();
        assert!(clip_chars(&mut s, 5));
        assert_eq!(s, "héllo…");
        let mut short = "ok".to_string();
        assert!(!clip_chars(&mut short, 5));
        let mut items = vec![1, 2, 3];
        assert!(truncate(&mut items, 2));
        assert_eq!(items, [1, 2]);
        assert!(!truncate(&mut items, 2));
    }
}
