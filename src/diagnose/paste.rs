//! From raw pasted text to clean lines: ANSI colours, timestamps, rank and launcher
//! prefixes and glog headers stripped; lines a terminal wrapped joined again; repeated
//! lines (the same traceback from every rank) kept once. Bounded in memory, linear in size.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::io::BufRead;
use std::sync::LazyLock;

use regex::Regex;
use rustc_hash::{FxHashMap, FxHashSet};

/// Most lines kept from the start of one paste; past this only error-looking lines
/// are kept.
const MAX_LINES: usize = 20_000;
/// Past this many times [`MAX_LINES`] read, kept or not, only error-looking lines are
/// kept too: a log that repeats itself (numbers aside, as a training loop's lines do)
/// keeps few of them and would otherwise be read closely to its end.
const MAX_READ_FACTOR: usize = 5;
/// Error-looking lines kept past [`MAX_LINES`]: the last ones of the paste.
const MAX_ERROR_LINES: usize = 20_000;
/// Most text kept from the start of a paste, in bytes.
const MAX_HEAD_BYTES: usize = 8 << 20;
/// Most text kept in the last error lines, in bytes.
const MAX_TAIL_BYTES: usize = 4 << 20;
/// Longest line kept, in bytes; the rest of a longer line is cut.
const MAX_LINE_BYTES: usize = 8 * 1024;
/// Most bytes of one line read from a stream before the rest of it is skipped: more
/// than [`MAX_LINE_BYTES`], so that prefixes and colours cleaned off still leave it.
const MAX_READ_LINE_BYTES: usize = MAX_LINE_BYTES * 4;
/// Lines of one rank kept whole after its `Traceback (most recent call last):`, past
/// [`MAX_LINES`]: the frames and the message that do not look like errors themselves.
const TRACEBACK_LINES: usize = 48;
/// The last lines of a log past [`MAX_LINES`] that nothing else kept: how it ended.
const LAST_LINES: usize = 64;

/// The lines of `text`: they end at `\n`, `\r\n`, or a lone `\r` (a progress bar
/// redrawn in place writes `\r` and no `\n` for hours). A break at the very end does
/// not start another line.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(end) = memchr::memchr2(b'\n', b'\r', rest.as_bytes()) else {
            return Some(std::mem::take(&mut rest));
        };
        let line = &rest[..end];
        let skip = if rest[end..].starts_with("\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + skip..];
        Some(line)
    })
}

/// One cleaned line of the paste.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// 1-based line number in the text as pasted (the first line of a joined line).
    pub number: usize,
    /// The rank the line came from, when a `[rank3]:`-style prefix said so.
    pub rank: Option<u32>,
    /// Every rank below 64 that printed this line, numbers aside (bit `r` for rank `r`):
    /// its own and those of the copies folded into it.
    pub ranks: u64,
    /// The line without prefixes and colours.
    pub text: String,
    /// Whether the last raw line was at least a terminal's width (`WRAP_WIDTH`
    /// characters): only such a line can have been wrapped.
    wide: bool,
    /// Number of the last raw line glued into this one.
    last: usize,
}

/// A paste, cleaned: the validated input to diagnosis.
#[derive(Debug, Clone, Default)]
pub struct Paste {
    /// Distinct cleaned lines in paste order.
    pub lines: Vec<Line>,
    /// Lines in the text as pasted.
    pub total_lines: usize,
    /// Lines dropped because they repeated an earlier one (after normalisation).
    pub duplicate_lines: usize,
    /// True when the paste was too large and ordinary lines were dropped.
    pub truncated: bool,
    /// NCCL's collective sequence numbers as each rank printed them, read before
    /// repeated lines fold (the ranks' lines differ only in these numbers).
    pub sequence: Vec<Sequence>,
    /// How many collectives each rank still had outstanding when its heartbeat monitor
    /// fired, as each rank printed it.
    pub outstanding: Vec<Outstanding>,
}

/// Collectives a rank had enqueued and not completed when its heartbeat monitor fired
/// (`[PG 0 Rank 3] Heartbeat monitor timed out! ... workMetaList_.size()=103`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outstanding {
    pub rank: u32,
    /// The process group, when the line names it.
    pub group: Option<u32>,
    pub count: u64,
    /// 1-based line in the paste.
    pub line: usize,
}

/// One collective sequence number a rank printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequence {
    pub rank: u32,
    /// The process group, when the line names it (`[PG ID 1 PG GUID 1 Rank 3]`).
    pub group: Option<u32>,
    /// `true`: the collective the rank timed out waiting in (`WorkNCCL(SeqNum=N`,
    /// `Timeout at NCCL work: N`); `false`: the last one it enqueued (`last enqueued
    /// NCCL work: N`).
    pub waiting: bool,
    pub seq: u64,
    /// 1-based line in the paste.
    pub line: usize,
}

/// Most sequence numbers (and queue lengths) kept from one paste.
const MAX_SEQUENCE: usize = 256;

static SEQ_RANK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[(?:PG (?:ID )?(\d+)[^\]]*?)?Rank (\d+)\]").unwrap());
static SEQ_WAITING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:\bSeqNum=|Timeout at NCCL work: |by watchdog at work: |at work sequence id: )(\d+)",
    )
    .unwrap()
});
static SEQ_ENQUEUED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[Ll]ast enqueued (?:NCCL )?work: (\d+)").unwrap());

/// The rank a ProcessGroupNCCL line names (`[PG 0 Rank 3]`), else `rank` from its
/// prefix, with the process group when the line names it.
fn rank_and_group(rank: Option<u32>, text: &str) -> Option<(u32, Option<u32>)> {
    let tag = SEQ_RANK.captures(text);
    let group = tag.as_ref().and_then(|c| c.get(1)?.as_str().parse().ok());
    let rank = (tag.as_ref()).and_then(|c| c[2].parse().ok()).or(rank)?;
    Some((rank, group))
}

static OUTSTANDING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"workMetaList_\.size\(\)\s*=\s*(\d+)").unwrap());

/// The outstanding collectives `text` (of `rank`, by its prefix) names, added to `out`
/// once per rank and group.
fn note_outstanding(rank: Option<u32>, text: &str, line: usize, out: &mut Vec<Outstanding>) {
    if out.len() >= MAX_SEQUENCE || !text.contains("workMetaList_") {
        return;
    }
    let Some(count) = (OUTSTANDING.captures(text)).and_then(|c| c[1].parse().ok()) else {
        return;
    };
    let Some((rank, group)) = rank_and_group(rank, text) else {
        return;
    };
    if !out.iter().any(|o| o.rank == rank && o.group == group) {
        out.push(Outstanding {
            rank,
            group,
            count,
            line,
        });
    }
}

/// The sequence numbers `text` (of `rank`, by its prefix) names, added to `out`.
fn note_sequence(rank: Option<u32>, text: &str, line: usize, out: &mut Vec<Sequence>) {
    let named = ["SeqNum=", "work: ", "sequence id: "];
    if out.len() >= MAX_SEQUENCE || !named.iter().any(|n| text.contains(n)) {
        return;
    }
    let found: Vec<(bool, u64)> = [(true, &*SEQ_WAITING), (false, &*SEQ_ENQUEUED)]
        .into_iter()
        .filter_map(|(waiting, re)| Some((waiting, re.captures(text)?[1].parse().ok()?)))
        .collect();
    if found.is_empty() {
        return;
    }
    let Some((rank, group)) = rank_and_group(rank, text) else {
        return;
    };
    for (waiting, seq) in found {
        let sequence = Sequence {
            rank,
            group,
            waiting,
            seq,
            line,
        };
        let same = |s: &Sequence| Sequence { line, ..*s } == sequence;
        if !out.iter().any(same) {
            out.push(sequence);
        }
    }
}

impl Paste {
    pub fn from_text(text: &str) -> Paste {
        let mut builder = Builder::default();
        for line in lines(text) {
            builder.push(line);
        }
        builder.finish()
    }

    /// Reads a log as it comes, so a 100 MB file never sits in memory whole: a line is
    /// cut while it is read (a gigabyte without a line break costs
    /// [`MAX_READ_LINE_BYTES`]), and lines end as in [`lines`]. Invalid UTF-8 is
    /// decoded lossily.
    pub fn from_reader(mut reader: impl BufRead) -> std::io::Result<Paste> {
        let mut builder = PasteBuilder::default();
        let mut splitter = LineSplitter::default();
        loop {
            let buf = match reader.fill_buf() {
                Ok([]) => break,
                Ok(buf) => buf,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            let read = buf.len();
            builder.feed(&mut splitter, buf);
            reader.consume(read);
        }
        splitter.finish(|line| builder.push(line));
        Ok(builder.finish())
    }

    /// The cleaned lines joined by newlines, with the byte offset where each starts.
    pub fn joined(&self) -> (String, Vec<usize>) {
        let mut text = String::with_capacity(self.lines.iter().map(|l| l.text.len() + 1).sum());
        let mut starts = Vec::with_capacity(self.lines.len());
        for line in &self.lines {
            starts.push(text.len());
            text.push_str(&line.text);
            text.push('\n');
        }
        (text, starts)
    }

    pub fn is_empty(&self) -> bool {
        self.lines.iter().all(|l| l.text.trim().is_empty())
    }
}

/// Cuts bytes into lines as they arrive, however the reads split them: lines end as in
/// [`lines`], and a line is cut at [`MAX_READ_LINE_BYTES`] while it is read, so a
/// gigabyte without a line break costs no more memory than that.
#[derive(Default)]
pub struct LineSplitter {
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// Whether a line has begun (an empty line before a break is still a line).
    open: bool,
    /// The last line ended with `\r`: a `\n` first in the next read belongs to it.
    after_cr: bool,
}

impl LineSplitter {
    /// Calls `each` with every line that `bytes` ends, without its line break.
    pub fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(&[u8])) {
        self.feed_at(bytes, |line, _| each(line));
    }

    /// [`LineSplitter::feed`], also giving where in `bytes` each line starts when it is
    /// there whole (not begun in an earlier read).
    fn feed_at(&mut self, bytes: &[u8], mut each: impl FnMut(&[u8], Option<usize>)) {
        let mut rest = bytes;
        if rest.is_empty() {
            return;
        }
        if self.after_cr && rest[0] == b'\n' {
            rest = &rest[1..];
        }
        self.after_cr = false;
        while !rest.is_empty() {
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.extend(rest);
                break;
            };
            if self.open {
                self.extend(&rest[..end]);
                each(&self.line, None);
                self.line.clear();
                self.open = false;
            } else {
                // The whole line is in this read: no copy.
                let at = bytes.len() - rest.len();
                each(&rest[..end.min(MAX_READ_LINE_BYTES)], Some(at));
            }
            let ended_by_cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if ended_by_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
    }

    /// Calls `each` with the last line, when the stream ended without a line break.
    pub fn finish(&mut self, each: impl FnOnce(&[u8])) {
        if std::mem::take(&mut self.open) {
            each(&self.line);
            self.line.clear();
        }
        self.after_cr = false;
    }

    /// Adds `piece` to the line begun, up to the longest line read.
    fn extend(&mut self, piece: &[u8]) {
        let room = MAX_READ_LINE_BYTES.saturating_sub(self.line.len());
        self.line.extend_from_slice(&piece[..piece.len().min(room)]);
        self.open = true;
    }
}

/// A paste built as a log comes, within the same budgets as [`Paste::from_reader`],
/// from one stream or several (a job's standard output and error, each cut into lines
/// by its own [`LineSplitter`]).
#[derive(Default)]
pub struct PasteBuilder {
    builder: Builder,
    /// The read being fed, lowercased, and where [`SKIM`] found something in it.
    lower: Vec<u8>,
    hits: Vec<usize>,
}

impl PasteBuilder {
    /// Adds one line, given without its line break; invalid UTF-8 is decoded lossily.
    pub fn push(&mut self, line: &[u8]) {
        self.builder.push_bytes(line);
    }

    /// Adds the lines that `bytes`, the next read of a stream, ends (`lines` cuts that
    /// stream). Past the line budget, a line in which one search of the whole read
    /// found nothing error-looking is only counted and remembered among the last ones:
    /// neither decoded nor cleaned, which is most of a long log.
    pub fn feed(&mut self, lines: &mut LineSplitter, bytes: &[u8]) {
        let PasteBuilder {
            builder,
            lower,
            hits,
        } = self;
        let Some(skim) = SKIM.as_ref().filter(|_| builder.head_full()) else {
            lines.feed(bytes, |line| builder.push_bytes(line));
            return;
        };
        skim.find(bytes, lower, hits);
        let ascii = bytes.is_ascii();
        let mut next = 0;
        lines.feed_at(bytes, |line, at| {
            let plain = at.is_some_and(|start| {
                while hits.get(next).is_some_and(|&hit| hit < start) {
                    next += 1;
                }
                let clear = hits.get(next).is_none_or(|&hit| hit >= start + line.len());
                clear && (ascii || line.is_ascii())
            });
            if plain && builder.skimming() {
                builder.skim(line);
            } else {
                builder.push_bytes(line);
            }
        });
    }

    pub fn finish(self) -> Paste {
        self.builder.finish()
    }
}

/// One lowercase part of each ASCII word of [`ERRORISH_WORDS`], chosen to be rare in training logs and not to start with a letter that fills them.
/// A line of ASCII text whose lowercase holds none of them does not look like an error:
/// the pattern's case folding reaches ASCII letters only from ASCII and from two other
/// characters (the Kelvin sign and the long s), which are not ASCII.
const ERROR_PARTS: [&str; 16] = [
    "rro", "xce", "ceb", "fai", "fat", "sser", "kil", "gna", "meo", "med o", "warn", "bor", "nie",
    "fus", "ncc", "cud",
];

/// The one search over a whole read (SIMD, Teddy) that finds the lines worth a closer
/// look; none where the CPU has no packed searcher, and then every line gets one.
static SKIM: LazyLock<Option<Skim>> = LazyLock::new(|| {
    Some(Skim {
        parts: aho_corasick::packed::Searcher::new(ERROR_PARTS)?,
        root_cause: memchr::memmem::Finder::new(ROOT_CAUSE_BLOCK.as_bytes()),
    })
});

struct Skim {
    parts: aho_corasick::packed::Searcher,
    root_cause: memchr::memmem::Finder<'static>,
}

impl Skim {
    /// Where in `bytes` a part of an error word, or torchrun's root-cause line,
    /// starts, ascending, into `hits`.
    fn find(&self, bytes: &[u8], lower: &mut Vec<u8>, hits: &mut Vec<usize>) {
        hits.clear();
        lower.clear();
        lower.extend(bytes.iter().map(u8::to_ascii_lowercase));
        hits.extend(self.parts.find_iter(lower.as_slice()).map(|m| m.start()));
        let before = hits.len();
        hits.extend(self.root_cause.find_iter(bytes));
        if hits.len() > before {
            hits.sort_unstable();
        }
    }
}

#[derive(Default)]
struct Builder {
    /// The first [`MAX_LINES`] distinct lines.
    lines: Vec<Line>,
    /// After those, the last [`MAX_ERROR_LINES`] error-looking ones (a long log's
    /// final traceback is what matters), each with its dedup hash.
    tail: VecDeque<(u64, Line)>,
    /// Bytes of text in `lines` and in `tail`.
    head_bytes: usize,
    tail_bytes: usize,
    /// Hashes of the dedup keys of the lines kept (64 bits: a collision between two
    /// different lines of one paste is not a practical concern). They are seeded
    /// hashes already, so the set hashes them again with FxHash, one multiplication.
    seen: FxHashSet<u64>,
    /// The dedup hash's seed, random per paste so that no line can be crafted to
    /// collide with another.
    seed: Seed,
    /// Scratch space for dedup keys.
    key: Vec<u8>,
    total: usize,
    duplicates: usize,
    truncated: bool,
    /// The dedup hash of each line in `lines`.
    hashes: Vec<u64>,
    /// For each kept line's dedup hash, the ranks that printed it (see `Line::ranks`).
    rank_masks: FxHashMap<u64, u64>,
    /// Lines still to keep whole, the fields of torchrun's `Root Cause` block: they
    /// repeat, numbers aside, the blocks of the ranks stopped after it.
    block_lines: usize,
    /// The ranks (`None`: lines without a rank prefix) whose traceback is still being
    /// read, each with its lines left to keep ([`TRACEBACK_LINES`]).
    tracebacks: Vec<(Option<u32>, usize)>,
    /// Past the budget, the last [`LAST_LINES`] lines dropped, as read (cut) with their
    /// numbers; cleaned only at the end. Their strings are reused.
    last: VecDeque<(usize, Vec<u8>)>,
    /// A budget of lines below [`MAX_LINES`], for tests.
    max_lines: Option<usize>,
    /// See [`Paste::sequence`].
    sequence: Vec<Sequence>,
    /// See [`Paste::outstanding`].
    outstanding: Vec<Outstanding>,
}

/// torchrun's record of the rank that failed first, and its field lines after it.
const ROOT_CAUSE_BLOCK: &str = "Root Cause (first observed failure)";
const ROOT_CAUSE_FIELDS: usize = 8;

struct Seed(u64);

impl Default for Seed {
    fn default() -> Seed {
        Seed(RandomState::new().hash_one(0u8))
    }
}

impl Builder {
    fn push(&mut self, raw: &str) {
        self.total += 1;
        let number = self.total;
        let raw = cut(raw, MAX_LINE_BYTES);
        let in_block = self.block_lines > 0;
        self.block_lines = self.block_lines.saturating_sub(1);
        if raw.contains(ROOT_CAUSE_BLOCK) {
            self.block_lines = ROOT_CAUSE_FIELDS;
        }
        // Past the line budget, only error-looking lines, and those of a traceback
        // being read, are worth cleaning at all.
        if self.head_full() && !in_block && self.tracebacks.is_empty() && !looks_like_error(raw) {
            self.drop_line(number, raw.as_bytes());
            return;
        }
        // Counting stops at the width: log lines are often far longer.
        let wide = raw.len() >= WRAP_WIDTH && raw.chars().nth(WRAP_WIDTH - 1).is_some();
        let (rank, text) = clean(raw);
        if text.trim().is_empty() {
            return;
        }
        let traced = self.in_traceback(rank, &text);
        note_sequence(rank, &text, number, &mut self.sequence);
        note_outstanding(rank, &text, number, &mut self.outstanding);
        // Wrapped continuation: glue to the previous line before deduplicating. A line
        // that carried a prefix (rank, timestamp) starts a record of its own, and a
        // joined line never grows past the line limit.
        let had_prefix = text.len() < raw.trim().len();
        if let Some(prev) = self.last_mut()
            && !had_prefix
            && prev.last + 1 == number
            && prev.text.len() + text.len() <= MAX_LINE_BYTES
            && is_wrapped(prev, &text)
        {
            prev.text.push_str(&text);
            prev.wide = wide;
            prev.last = number;
            // Read again whole: the wrap may have cut a number off.
            let glued = match self.tail.back() {
                Some((_, line)) => Some(line),
                None => self.lines.last(),
            };
            if let Some(line) = glued {
                note_sequence(line.rank, &line.text, line.number, &mut self.sequence);
                note_outstanding(line.rank, &line.text, line.number, &mut self.outstanding);
            }
            if self.tail.is_empty() {
                self.head_bytes += text.len();
            } else {
                self.tail_bytes += text.len();
            }
            return;
        }
        let full = self.head_full();
        if full && !looks_like_error(&text) && !in_block && !traced {
            self.drop_line(number, raw.as_bytes());
            return;
        }
        dedup_key(&text, &mut self.key);
        // xxh3, not the standard library's SipHash: every byte of the paste is hashed.
        let hash = xxhash_rust::xxh3::xxh3_64_with_seed(&self.key, self.seed.0);
        if let Some(r) = rank.filter(|&r| r < 64) {
            *self.rank_masks.entry(hash).or_default() |= 1 << r;
        }
        if !self.seen.insert(hash) && !in_block {
            self.duplicates += 1;
            return;
        }
        let line = Line {
            number,
            rank,
            ranks: 0,
            text,
            wide,
            last: number,
        };
        if !full {
            self.head_bytes += line.text.len();
            self.lines.push(line);
            self.hashes.push(hash);
            return;
        }
        // Past the budget: keep the latest error lines, forgetting the oldest (and
        // its hash, so memory stays bounded however long the log).
        self.truncated = true;
        self.tail_bytes += line.text.len();
        self.tail.push_back((hash, line));
        while self.tail.len() > MAX_ERROR_LINES || self.tail_bytes > MAX_TAIL_BYTES {
            let Some((oldest, line)) = self.tail.pop_front() else {
                break;
            };
            self.seen.remove(&oldest);
            self.rank_masks.remove(&oldest);
            self.tail_bytes -= line.text.len();
        }
    }

    /// Whether `text`, of `rank`, belongs to a traceback being read: its first line
    /// starts one (the rank's lines that follow are kept); the others count down.
    fn in_traceback(&mut self, rank: Option<u32>, text: &str) -> bool {
        if text
            .trim_start()
            .starts_with("Traceback (most recent call last)")
        {
            match self.tracebacks.iter_mut().find(|(r, _)| *r == rank) {
                Some((_, left)) => *left = TRACEBACK_LINES,
                None => self.tracebacks.push((rank, TRACEBACK_LINES)),
            }
            return true;
        }
        let Some(at) = self.tracebacks.iter().position(|(r, _)| *r == rank) else {
            return false;
        };
        self.tracebacks[at].1 -= 1;
        if self.tracebacks[at].1 == 0 {
            self.tracebacks.swap_remove(at);
        }
        true
    }

    /// A line past the budget that is not kept: remembered among the last ones.
    fn drop_line(&mut self, number: usize, raw: &[u8]) {
        self.truncated = true;
        let mut text = match self.last.len() {
            LAST_LINES => self
                .last
                .pop_front()
                .map(|(_, text)| text)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        text.clear();
        text.extend_from_slice(&raw[..raw.len().min(MAX_LINE_BYTES)]);
        self.last.push_back((number, text));
    }

    /// The last lines dropped, cleaned and deduplicated like the others, merged into
    /// the kept tail in line order.
    fn keep_last_lines(&mut self) {
        let mut kept = Vec::with_capacity(self.last.len());
        for (number, raw) in std::mem::take(&mut self.last) {
            let raw = String::from_utf8_lossy(&raw);
            let (rank, text) = clean(cut(&raw, MAX_LINE_BYTES));
            if text.trim().is_empty() {
                continue;
            }
            dedup_key(&text, &mut self.key);
            let hash = xxhash_rust::xxh3::xxh3_64_with_seed(&self.key, self.seed.0);
            if let Some(r) = rank.filter(|&r| r < 64) {
                *self.rank_masks.entry(hash).or_default() |= 1 << r;
            }
            if !self.seen.insert(hash) {
                self.duplicates += 1;
                continue;
            }
            let line = Line {
                number,
                rank,
                ranks: 0,
                text,
                wide: false,
                last: number,
            };
            kept.push((hash, line));
        }
        if kept.is_empty() {
            return;
        }
        let tail = std::mem::take(&mut self.tail);
        let mut merged = VecDeque::with_capacity(tail.len() + kept.len());
        let mut tail = tail.into_iter().peekable();
        for (hash, line) in kept {
            while let Some(earlier) = tail.next_if(|(_, l)| l.number < line.number) {
                merged.push_back(earlier);
            }
            merged.push_back((hash, line));
        }
        merged.extend(tail);
        self.tail = merged;
    }

    /// Whether the start of the paste has used its budget.
    fn head_full(&self) -> bool {
        let max = self.max_lines.unwrap_or(MAX_LINES);
        self.lines.len() >= max
            || self.total > max * MAX_READ_FACTOR
            || self.head_bytes >= MAX_HEAD_BYTES
    }

    /// Whether a line that does not look like an error would now be dropped whatever it
    /// says: past the budget, outside torchrun's root-cause block and any traceback.
    fn skimming(&self) -> bool {
        self.head_full() && self.block_lines == 0 && self.tracebacks.is_empty()
    }

    /// Adds a line known not to look like an error or to hold the root-cause line,
    /// while [`Builder::skimming`]: what `push` would do with it.
    fn skim(&mut self, raw: &[u8]) {
        self.total += 1;
        self.drop_line(self.total, raw);
    }

    fn push_bytes(&mut self, raw: &[u8]) {
        self.push(&String::from_utf8_lossy(raw));
    }

    /// The line kept last.
    fn last_mut(&mut self) -> Option<&mut Line> {
        match self.tail.back_mut() {
            Some((_, line)) => Some(line),
            None => self.lines.last_mut(),
        }
    }

    fn finish(mut self) -> Paste {
        self.keep_last_lines();
        let masks = &self.rank_masks;
        let mask = |hash: &u64| masks.get(hash).copied().unwrap_or(0);
        for (line, hash) in self.lines.iter_mut().zip(&self.hashes) {
            line.ranks = mask(hash);
        }
        self.lines
            .extend(self.tail.into_iter().map(|(hash, mut line)| {
                line.ranks = mask(&hash);
                line
            }));
        Paste {
            lines: self.lines,
            total_lines: self.total,
            duplicate_lines: self.duplicates,
            truncated: self.truncated,
            sequence: self.sequence,
            outstanding: self.outstanding,
        }
    }
}

/// Two lines are the same line when they differ only in numbers (ranks, PIDs, thread
/// indices, addresses): each run of digits or hex after `0x` counts as one `0`. The
/// key is written into `key`.
fn dedup_key(text: &str, key: &mut Vec<u8>) {
    key.clear();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Copy up to the next digit in one go.
        let run = bytes[i..]
            .iter()
            .position(u8::is_ascii_digit)
            .unwrap_or(bytes.len() - i);
        key.extend_from_slice(&bytes[i..i + run]);
        i += run;
        let Some(&b) = bytes.get(i) else {
            break;
        };
        i += 1;
        let hex = b == b'0' && bytes.get(i) == Some(&b'x');
        if hex {
            i += 1;
        }
        while bytes
            .get(i)
            .is_some_and(|n| n.is_ascii_digit() || (hex && n.is_ascii_hexdigit()))
        {
            i += 1;
        }
        key.push(b'0');
    }
}

fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

static ANSI: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)").unwrap()
});

/// Prefixes stripped from the start of a line, repeatedly, as one alternation so each
/// round is a single anchored search.
static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        "^(?:",
        // [rank3]:  [Rank 3]:  [default3]:  (torchrun --tee / --log-line-prefix-template)
        r"\[(?:[Rr]ank\s*|default)\d+\]:\s?",
        // mpirun --tag-output: [1,0]<stderr>:
        r"|\[\d+,\d+\]<std(?:out|err)>:\s?",
        // Ray workers: (pid=1234) or (RayTrainWorker pid=1234, ip=10.0.0.1)
        r"|\((?:[\w:]+\s+)?pid=\d+(?:,\s*ip=[\d.]+)?\)\s?",
        // Markdown quotes in issue text.
        r"|>\s?",
        // ISO-ish timestamps, bracketed or not: 2024-11-04 09:31:55,123 / [2024-11-04T09:31:55Z]
        r"|\[?\d{4}-\d{2}-\d{2}[ T_]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?(?:\s*[-|]\s*|\s+)",
        // glog: E1104 09:42:17.318204512 139872 ProcessGroupNCCL.cpp:607]  (bracketed or not)
        r"|\[?[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+(?:\d+\s+)?[\w./-]+:\d+\]\s?",
        // NCCL log lines: host:pid:tid [0] NCCL INFO ...
        r"|[\w.-]+:\d+:\d+ \[\d+\] ",
        // Python logging: INFO:root: / WARNING:torch.distributed.run:
        r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:",
        ")"
    ))
    .unwrap()
});

/// The rank named by a rank or mpirun prefix (`[rank3]:`, `[default3]:`, `[1,3]<stderr>:`).
fn prefix_rank(prefix: &str) -> Option<u32> {
    if !prefix.starts_with('[') {
        return None;
    }
    let inner = &prefix[1..prefix.find(']')?];
    let digits = match inner.split_once(',') {
        Some((_, rank)) if prefix.contains("<std") => rank,
        Some(_) => return None,
        None if inner.starts_with(['r', 'R', 'd']) => {
            inner.trim_start_matches(|c: char| !c.is_ascii_digit())
        }
        None => return None,
    };
    digits.parse().ok()
}

/// Strips colours and prefixes; returns the rank a prefix named, if any.
pub fn clean(raw: &str) -> (Option<u32>, String) {
    let mut text: Cow<str> = if raw.contains('\x1b') {
        ANSI.replace_all(raw, "")
    } else {
        Cow::Borrowed(raw)
    };
    if memchr::memchr2(b'\r', 0, text.as_bytes()).is_some() {
        text.to_mut().retain(|c| c != '\r' && c != '\0');
    }
    let mut rank = None;
    let mut start = 0;
    for _ in 0..8 {
        match PREFIX.find(&text[start..]) {
            Some(m) if !m.is_empty() => {
                rank = prefix_rank(m.as_str()).or(rank);
                start += m.end();
            }
            _ => break,
        }
    }
    (rank, text[start..].trim_end().to_string())
}

/// Lines that start a new record never continue a wrapped one.
static RECORD_START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^(?:\s*File "|Traceback |\s*[A-Za-z_][\w.]*(?:Error|Exception|Warning)\b|\[|\d{4}-\d{2}-\d{2}|[IWEF]\d{4} |=+$|-+$|\s*\w+\s*:\s)"#,
    )
    .unwrap()
});

/// The narrowest terminal whose wrapping is undone.
const WRAP_WIDTH: usize = 80;

/// Whether `next` is the rest of `prev`, cut by a terminal at a fixed width.
fn is_wrapped(prev: &Line, next: &str) -> bool {
    if !prev.wide || RECORD_START.is_match(next) {
        return false;
    }
    let last = prev.text.chars().last().unwrap_or(' ');
    let mut rest = next.chars();
    let first = rest.next().unwrap_or(' ');
    let second = rest.next().unwrap_or(' ');
    // Cut in the middle of a word ("Please ma" + "ke sure"), or before a word at a space
    // (" of parameters"): never a fresh sentence with a capital letter.
    let mid_word = last.is_alphanumeric() && first.is_lowercase();
    let at_space = first == ' ' && second.is_lowercase() && last.is_alphanumeric();
    mid_word || at_space
}

/// Lines worth keeping from a huge log even past the line budget.
pub fn looks_like_error(text: &str) -> bool {
    static ERRORISH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("(?i){}", ERRORISH_WORDS.join("|"))).unwrap());
    ERRORISH.is_match(text)
}

/// What [`looks_like_error`] looks for, in any case.
const ERRORISH_WORDS: [&str; 19] = [
    "error",
    "exception",
    "traceback",
    "failed",
    "fatal",
    "assert",
    "killed",
    "signal",
    "timeout",
    "timed out",
    "warn",
    "abort",
    "denied",
    "refused",
    "nccl",
    "cuda",
    "报错",
    "错误",
    "失败",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn check_clean(raw: &str, rank: Option<u32>, text: &str) {
        assert_eq!(clean(raw), (rank, text.to_string()), "cleaning {raw:?}");
    }

    #[test]
    fn strips_rank_launcher_and_log_prefixes() {
        check_clean("[rank3]: RuntimeError: boom", Some(3), "RuntimeError: boom");
        check_clean(
            "[default1]:  File \"train.py\", line 3",
            Some(1),
            " File \"train.py\", line 3",
        );
        check_clean(
            "[1,2]<stderr>:Traceback (most recent call last):",
            Some(2),
            "Traceback (most recent call last):",
        );
        check_clean("(pid=4242) ValueError: x", None, "ValueError: x");
        check_clean("> RuntimeError: quoted", None, "RuntimeError: quoted");
        check_clean(
            "2024-11-04 09:31:55,123 - ERROR - step failed",
            None,
            "ERROR - step failed",
        );
        check_clean("[2024-11-04 09:31:55] epoch 3", None, "epoch 3");
        check_clean(
            "[rank0]:[E1104 09:42:17.318204512 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout",
            Some(0),
            "[Rank 0] Watchdog caught collective operation timeout",
        );
        check_clean(
            "E1104 09:42:17.318204 139872 ProcessGroupNCCL.cpp:607] Watchdog",
            None,
            "Watchdog",
        );
        check_clean(
            "gpu-node07:21836:21836 [0] NCCL INFO Bootstrap : Using eth0",
            None,
            "NCCL INFO Bootstrap : Using eth0",
        );
        check_clean(
            "WARNING:torch.distributed.run:Setting OMP_NUM_THREADS",
            None,
            "Setting OMP_NUM_THREADS",
        );
    }

    #[test]
    fn strips_ansi_colours() {
        check_clean(
            "\x1b[31mRuntimeError\x1b[0m: red",
            None,
            "RuntimeError: red",
        );
    }

    #[test]
    fn joins_lines_a_terminal_wrapped() {
        let a = "RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a module parameter. Please ma";
        let b = "ke sure model parameters are not shared across multiple concurrent forward-backward passes. or try to use the same set";
        let c = " of parameters been used by different reentrant backward passes.";
        let paste = Paste::from_text(&format!("{a}\n{b}\n{c}\nnext line"));
        assert_eq!(paste.lines.len(), 2, "{paste:?}");
        assert!(
            paste.lines[0]
                .text
                .contains("Please make sure model parameters")
        );
        assert!(paste.lines[0].text.contains("same set of parameters"));
        assert_eq!(paste.lines[1].number, 4);
    }

    #[test]
    fn prefixed_lines_are_records_of_their_own() {
        // Long lines ending in a word, each with a rank prefix: not a wrapped line.
        let a = format!(
            "[rank0]: epoch 0 step 1 loss 0.4 {} sample id 21ab5a3d",
            "x".repeat(80)
        );
        let b = format!(
            "[rank1]: epoch 0 step 2 loss 0.7 {} sample id 9f3c",
            "y".repeat(80)
        );
        assert_eq!(Paste::from_text(&format!("{a}\n{b}")).lines.len(), 2);
    }

    #[test]
    fn keeps_short_or_new_record_lines_apart() {
        let paste = Paste::from_text("short line\nnext thing\n");
        assert_eq!(paste.lines.len(), 2);
        let long = "x".repeat(120);
        let paste = Paste::from_text(&format!("{long}\n  File \"a.py\", line 1, in f"));
        assert_eq!(paste.lines.len(), 2);
    }

    #[test]
    fn repeated_lines_from_every_rank_are_kept_once() {
        let text = "[rank0]: RuntimeError: boom at 0x7f00\n[rank1]: RuntimeError: boom at 0x7f88\n[rank1]: other";
        let paste = Paste::from_text(text);
        assert_eq!(paste.lines.len(), 2);
        assert_eq!(paste.duplicate_lines, 1);
        assert_eq!(paste.lines[0].rank, Some(0));
        assert_eq!(paste.lines[1].number, 3);
    }

    #[test]
    fn the_same_kernel_assertion_64_times_is_one_line() {
        let mut text = String::new();
        for t in 0..64 {
            text.push_str(&format!(
                "/pytorch/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
            ));
        }
        assert_eq!(Paste::from_text(&text).lines.len(), 1);
    }

    #[test]
    fn a_trailing_carriage_return_is_not_part_of_the_line() {
        // Found by the property test: `str::lines` keeps a lone final `\r`.
        let text = "Traceback (most recent call last):\r";
        let from_text = Paste::from_text(text);
        assert_eq!(
            from_text.lines[0].text,
            "Traceback (most recent call last):"
        );
        assert_eq!(
            from_text.lines,
            Paste::from_reader(text.as_bytes()).unwrap().lines
        );
    }

    #[test]
    fn a_progress_bar_redrawn_with_carriage_returns_is_many_lines() {
        let text = "epoch 1:  10%|#         | 1/10\repoch 1:  20%|##        | 2/10\r\
                    RuntimeError: boom\r\nnext\n";
        let paste = Paste::from_text(text);
        assert_eq!(paste.total_lines, 4);
        assert!(paste.lines.iter().any(|l| l.text == "RuntimeError: boom"));
        // A `\r\n` split across two reads is still one line end.
        for capacity in [1, 2, 3, 7, 64] {
            let streamed =
                Paste::from_reader(std::io::BufReader::with_capacity(capacity, text.as_bytes()))
                    .unwrap();
            assert_eq!(
                streamed.lines, paste.lines,
                "read {capacity} bytes at a time"
            );
            assert_eq!(streamed.total_lines, 4);
        }
    }

    /// Bytes without a line break, `len` of them, made as they are read.
    struct Endless {
        left: u64,
        buf: Vec<u8>,
    }

    impl std::io::Read for Endless {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(self.left as usize);
            out[..n].fill(b'x');
            self.left -= n as u64;
            Ok(n)
        }
    }

    impl BufRead for Endless {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            let n = (64 << 10).min(self.left as usize);
            self.buf.resize(n, b'0');
            Ok(&self.buf)
        }
        fn consume(&mut self, amount: usize) {
            self.left -= amount as u64;
        }
    }

    #[test]
    fn a_line_without_end_is_cut_while_it_is_read() {
        // 256 MiB without a line break: read through, one line kept, cut.
        let paste = Paste::from_reader(Endless {
            left: 256 << 20,
            buf: Vec::new(),
        })
        .unwrap();
        assert_eq!(paste.total_lines, 1);
        assert_eq!(paste.lines[0].text.len(), MAX_LINE_BYTES);
    }

    #[test]
    fn reader_decodes_invalid_utf8_lossily() {
        let bytes: &[u8] = b"RuntimeError: bad \xff byte\nnext\n";
        let paste = Paste::from_reader(bytes).unwrap();
        assert_eq!(paste.total_lines, 2);
        assert!(paste.lines[0].text.starts_with("RuntimeError: bad"));
    }

    /// A log generated as it is read: `lines` lines made by `line(i)`.
    struct Generated<F> {
        next: usize,
        lines: usize,
        line: F,
        pending: Vec<u8>,
        at: usize,
    }

    impl<F: FnMut(usize) -> String> std::io::Read for Generated<F> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.at == self.pending.len() {
                if self.next == self.lines {
                    return Ok(0);
                }
                self.pending = (self.line)(self.next).into_bytes();
                self.pending.push(b'\n');
                self.at = 0;
                self.next += 1;
            }
            let n = buf.len().min(self.pending.len() - self.at);
            buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn a_100_mb_log_is_read_in_bounded_memory_keeping_its_final_traceback() {
        let lines = 400_000;
        let mut bytes = 0usize;
        let log = Generated {
            next: 0,
            lines,
            pending: Vec::new(),
            at: 0,
            line: |i: usize| {
                let line = if i == lines - 1 {
                    "RuntimeError: the final failure".to_string()
                } else if i.is_multiple_of(10) {
                    // Error-looking lines, each different (a word, not a number).
                    format!(
                        "UserWarning: skipped sample {} {}",
                        word(i),
                        "w".repeat(200)
                    )
                } else {
                    format!("step {i} loss 0.5 {}", "x".repeat(240))
                };
                bytes += line.len() + 1;
                line
            },
        };
        let paste = Paste::from_reader(std::io::BufReader::new(log)).unwrap();
        assert!(bytes > 100_000_000, "{bytes} bytes");
        assert_eq!(paste.total_lines, lines);
        assert!(paste.truncated);
        assert!(paste.lines.len() <= MAX_LINES + MAX_ERROR_LINES + LAST_LINES);
        let kept: usize = paste.lines.iter().map(|l| l.text.len()).sum();
        assert!(
            kept <= MAX_HEAD_BYTES + MAX_TAIL_BYTES + (2 + LAST_LINES) * MAX_LINE_BYTES,
            "{kept} bytes kept"
        );
        let last = paste.lines.last().unwrap();
        assert_eq!(last.text, "RuntimeError: the final failure");
        assert_eq!(last.number, lines);
        assert!(paste.lines.windows(2).all(|w| w[0].number < w[1].number));
    }

    #[test]
    fn past_the_budget_each_ranks_traceback_and_the_end_are_kept() {
        let mut text = String::new();
        for i in 0..MAX_LINES {
            text.push_str(&format!("[rank0]: step {} loss {}\n", word(i), word(i + 7)));
        }
        text.push_str(
            "[rank1]:Traceback (most recent call last):\n\
             [rank0]: step between the frames\n\
             [rank1]:  File \"/job/train.py\", line 12, in <module>\n\
             [rank1]:    main()\n\
             [rank1]:  File \"/job/train.py\", line 9, in main\n\
             [rank1]:    loss = model(batch).sum()\n\
             [rank1]:RuntimeError: boom\n",
        );
        for i in 0..200 {
            text.push_str(&format!("[rank0]: after {} loss\n", word(i)));
        }
        text.push_str("shutting down the workers\n");
        let paste = Paste::from_reader(text.as_bytes()).unwrap();
        let kept = |needle: &str| paste.lines.iter().any(|l| l.text.contains(needle));
        assert!(paste.truncated);
        for frame in [
            "line 12, in <module>",
            "main()",
            "line 9, in main",
            "loss = model(batch).sum()",
            "RuntimeError: boom",
        ] {
            assert!(kept(frame), "{frame} kept");
        }
        assert!(
            !kept("step between the frames"),
            "another rank's line dropped"
        );
        // The end of the log: its last lines, not those before them.
        assert!(kept("shutting down the workers"));
        assert!(kept(&format!("after {} loss", word(199))));
        assert!(!kept(&format!("after {} loss", word(100))));
        let after = (paste.lines.iter())
            .filter(|l| l.text.starts_with("after "))
            .count();
        assert_eq!(after, LAST_LINES - 1);
        assert!(paste.lines.windows(2).all(|w| w[0].number < w[1].number));
    }

    #[test]
    fn lines_split_across_reads_and_streams_are_whole() {
        // Two streams read in pieces of every size, each cut by its own splitter, into
        // one paste: the same lines as each stream read alone.
        let out = "step one\nstep two\r\nstep three";
        let err = "Traceback (most recent call last):\r\n  File \"a.py\", line 1\nValueError: x\n";
        for size in 1..8 {
            let mut builder = PasteBuilder::default();
            let (mut a, mut b) = (LineSplitter::default(), LineSplitter::default());
            let xs: Vec<&[u8]> = out.as_bytes().chunks(size).collect();
            let ys: Vec<&[u8]> = err.as_bytes().chunks(size).collect();
            for i in 0..xs.len().max(ys.len()) {
                if let Some(x) = xs.get(i) {
                    a.feed(x, |line| builder.push(line));
                }
                if let Some(y) = ys.get(i) {
                    b.feed(y, |line| builder.push(line));
                }
            }
            a.finish(|line| builder.push(line));
            b.finish(|line| builder.push(line));
            let mut texts: Vec<String> =
                builder.finish().lines.into_iter().map(|l| l.text).collect();
            texts.sort();
            let mut alone: Vec<String> = [out, err]
                .iter()
                .flat_map(|t| Paste::from_text(t).lines)
                .map(|l| l.text)
                .collect();
            alone.sort();
            assert_eq!(texts, alone, "read {size} bytes at a time");
        }
    }

    #[test]
    fn only_two_characters_beyond_ascii_fold_to_ascii_letters() {
        // What makes a line of ASCII without any of `ERROR_PARTS` safe to skim.
        let letter = Regex::new("(?i)^[a-z]$").unwrap();
        let folding: Vec<char> = (0x80..=0x10FFFF)
            .filter_map(char::from_u32)
            .filter(|c| letter.is_match(c.encode_utf8(&mut [0; 4])))
            .collect();
        assert_eq!(folding, ['\u{17F}', '\u{212A}']);
        let words = ERRORISH_WORDS.iter().filter(|w| w.is_ascii());
        for word in words {
            let part = ERROR_PARTS.iter().filter(|p| word.contains(*p)).count();
            assert_eq!(part, 1, "{word}: one part each");
        }
        assert_eq!(
            ERROR_PARTS.len(),
            ERRORISH_WORDS.iter().filter(|w| w.is_ascii()).count()
        );
    }

    /// A distinct lowercase word for `i`.
    fn word(mut i: usize) -> String {
        let mut out = String::new();
        loop {
            out.push((b'a' + (i % 26) as u8) as char);
            i /= 26;
            if i == 0 {
                return out;
            }
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::{Builder, LineSplitter, MAX_LINE_BYTES, Paste, PasteBuilder};

        /// Lines like those of real logs: prefixes, colours, tracebacks, noise.
        fn loggy_line() -> impl Strategy<Value = String> {
            prop_oneof![
                "\\[rank[0-9]\\]: ?",
                "\\[default[0-9]\\]:",
                "[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:,]{8,12} - ",
                "\\x1b\\[[0-9;]{1,5}m",
                "Traceback \\(most recent call last\\):",
                "  File \"[a-z/]{1,20}\\.py\", line [0-9]{1,4}, in [a-z_]{1,8}",
                "[A-Z][a-zA-Z]{2,12}Error: \\PC{0,60}",
                "\\PC{0,200}",
                "[ \\t\\r]{0,4}",
            ]
        }

        fn loggy_text() -> impl Strategy<Value = String> {
            prop::collection::vec(prop::collection::vec(loggy_line(), 1..3), 0..40).prop_map(
                |lines| {
                    lines
                        .into_iter()
                        .map(|l| l.concat())
                        .collect::<Vec<_>>()
                        .join("\n")
                },
            )
        }

        /// Lines that exercise skimming: plain, error words in any case (also through
        /// the Kelvin sign and the long s), Chinese, tracebacks, the root-cause block.
        fn skim_line() -> impl Strategy<Value = String> {
            // Tracebacks and the root-cause block rare, as in a log: each keeps the
            // lines after it, and skimming waits for them.
            prop_oneof![
                8 => "[a-z ]{0,30}",
                4 => "\\[rank[0-3]\\]: step [a-z]{1,6} loss",
                8 => "[a-zA-Z ]{0,8}(eRRor|WARN|Timed Out|ncCL|CudA|Killed|aſſert|\u{212A}illed|报错|错误|失败|fused|文件)[a-z ]{0,8}",
                1 => "(\\[rank[0-3]\\]: )?Traceback \\(most recent call last\\):",
                2 => "(\\[rank[0-3]\\]: )?  File \"a.py\", line [0-9], in [a-z]{1,3}",
                1 => "Root Cause \\(first observed failure\\):",
                2 => "  exitcode  : -9",
                4 => "[^\\n\\r]{0,20}",
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            #[test]
            fn skimming_reads_as_line_by_line(
                lines in prop::collection::vec((skim_line(), prop_oneof!["\n", "\r\n", "\r"]), 0..120),
                max_lines in 0usize..8,
                chunk in 1usize..48,
            ) {
                let text: String = lines.iter().map(|(l, end)| format!("{l}{end}")).collect();
                let mut each = Builder { max_lines: Some(max_lines), ..Builder::default() };
                for line in super::super::lines(&text) {
                    each.push(line);
                }
                let expected = each.finish();
                let mut fed = PasteBuilder {
                    builder: Builder { max_lines: Some(max_lines), ..Builder::default() },
                    ..PasteBuilder::default()
                };
                let mut splitter = LineSplitter::default();
                for piece in text.as_bytes().chunks(chunk) {
                    fed.feed(&mut splitter, piece);
                }
                splitter.finish(|line| fed.push(line));
                let got = fed.finish();
                prop_assert_eq!(got.lines, expected.lines);
                prop_assert_eq!(got.total_lines, expected.total_lines);
                prop_assert_eq!(got.duplicate_lines, expected.duplicate_lines);
                prop_assert_eq!(got.truncated, expected.truncated);
            }

            #[test]
            fn any_paste_cleans_into_ordered_bounded_lines(text in loggy_text()) {
                let paste = Paste::from_text(&text);
                prop_assert_eq!(paste.total_lines, super::super::lines(&text).count());
                for line in &paste.lines {
                    prop_assert!(line.text.len() <= MAX_LINE_BYTES);
                    prop_assert!(!line.text.trim().is_empty());
                    prop_assert!(line.number >= 1 && line.number <= paste.total_lines);
                }
                prop_assert!(paste.lines.windows(2).all(|w| w[0].number < w[1].number));
                // Reading the same text as a stream gives the same lines.
                let streamed = Paste::from_reader(text.as_bytes()).unwrap();
                prop_assert_eq!(streamed.lines, paste.lines);
            }

            #[test]
            fn any_bytes_read_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
                let paste = Paste::from_reader(&bytes[..]).unwrap();
                prop_assert!(paste.lines.len() <= paste.total_lines);
            }
        }
    }
}
