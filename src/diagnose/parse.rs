//! What a paste says: the exceptions in it (type, message, frames), which one is the
//! root cause rather than a wrapper, the rank torchrun blamed first, error codes and
//! versions.

use std::sync::LazyLock;

use memchr::memmem;
use regex::Regex;

use super::paste::Paste;

/// Exception types that only report that something else failed.
const WRAPPERS: [&str; 6] = [
    "ChildFailedError",
    "ProcessRaisedException",
    "ProcessExitedException",
    "CalledProcessError",
    "WorkerGroupFailureException",
    "RendezvousGracefulExitError",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// File name without directories (`distributed.py`).
    pub file: String,
    /// The path as printed (`/opt/conda/lib/python3.10/site-packages/torch/...`).
    pub path: String,
    /// Line number in the file.
    pub line: u32,
    pub function: String,
}

impl Frame {
    /// Whether the frame is in installed or standard-library code rather than the
    /// user's own: a `site-packages` or `dist-packages` folder, the Python library
    /// folder, or frozen and generated code (`<frozen runpy>`, `<string>`).
    pub fn is_library(&self) -> bool {
        let path = self.path.replace('\\', "/");
        path.contains("site-packages/")
            || path.contains("dist-packages/")
            || path.starts_with('<')
            || LIBRARY_DIR.is_match(&path)
    }
}

/// The standard library's folder: `/usr/lib/python3.10/`, `.../lib/python3.11/`.
static LIBRARY_DIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|/)lib(?:64)?/python\d(?:\.\d+)?/").unwrap());

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// Type as printed, without its module (`DistBackendError`).
    pub kind: String,
    /// Fully qualified type when printed with its module.
    pub qualified: String,
    pub message: String,
    /// Index into `Paste::lines` of the line that names the exception.
    pub line_index: usize,
    /// Paste line number (1-based).
    pub line: usize,
    pub rank: Option<u32>,
    /// Wrapper exceptions report another failure (`ChildFailedError`).
    pub wrapper: bool,
    /// Innermost call last, as Python prints them.
    pub frames: Vec<Frame>,
}

/// torchrun's "Root Cause (first observed failure)" block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootCause {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub exitcode: Option<i32>,
    pub host: Option<String>,
    /// When it failed, as torchrun prints it (`2024-05-01_10:00:00`).
    pub time: Option<String>,
    /// The block's traceback field when it holds more than the "To enable traceback" hint.
    pub traceback: Option<String>,
}

/// Everything understood about a paste.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub exceptions: Vec<Exception>,
    /// Index into `exceptions` of the root cause.
    pub root: Option<usize>,
    pub first_failure: Option<RootCause>,
    /// Frames of a traceback that was cut before its exception line.
    pub dangling_frames: Vec<Frame>,
    /// NCCL and CUDA error codes (`ncclInvalidUsage`, `CUDA error: out of memory`).
    pub error_codes: Vec<String>,
    /// Versions mentioned (`NCCL 2.18.1`, `torch 2.1.0`, `CUDA 12.1`, `Python 3.10`).
    pub versions: Vec<String>,
}

impl Parsed {
    pub fn root_exception(&self) -> Option<&Exception> {
        self.root.map(|i| &self.exceptions[i])
    }
}

/// (pattern capturing the version, what it is the version of).
const VERSION_PATTERNS: [(&str, &str); 12] = [
    (r"(?i)\bNCCL(?: version|==|-)? ?v?(\d+\.\d+\.\d+)", "NCCL"),
    (r"\bnvidia-nccl-cu1\d(?:==| +)(\d+\.\d+\.\d+)", "NCCL"),
    (
        r"\btorch(?:==|-| version:? ?| )v?(\d+\.\d+(?:\.\d+)?)",
        "torch",
    ),
    (
        r"\b(?:PyTorch|pytorch) (?:version:? )?v?(\d+\.\d+(?:\.\d+)?)",
        "torch",
    ),
    (r"\bCUDA (?:[Vv]ersion:? ?)?(\d+\.\d+)\b", "CUDA"),
    // ASCII digits: the version is cut after the second (a digit of another script
    // could be three bytes long).
    (r"\+cu([0-9]{3})\b", "CUDA build cu"),
    (r"python(3\.\d+)", "Python"),
    (
        r"(?i)\bdeepspeed(?:==| version:? ?| |-| info:? version=)v?(\d+\.\d+\.\d+)",
        "DeepSpeed",
    ),
    (
        r"\b[Aa]ccelerate`?(?:==| version:? ?| |-)v?(\d+\.\d+\.\d+)",
        "Accelerate",
    ),
    (
        r"\btransformers`?(?:==| version:? ?| |-)v?(\d+\.\d+\.\d+)",
        "transformers",
    ),
    (
        r"(?i)\b(?:pytorch[-_]lightning|lightning)`?(?:==| version:? ?| |-)v?(\d+\.\d+\.\d+)",
        "Lightning",
    ),
    (r"(?i)\bdriver version:? *(\d+\.\d+(?:\.\d+)?)", "driver"),
];

static EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*(?P<qual>(?:[A-Za-z_][\w]*\.)*(?P<kind>[A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt|Failure)|KeyboardInterrupt|SystemExit|StopIteration))(?::\s?(?P<msg>.*))?$",
    )
    .unwrap()
});
static CPP_THROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"terminate called after throwing an instance of '(?:[\w:]+::)?(?P<kind>\w+)'")
        .unwrap()
});
static CPP_WHAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*what\(\):\s*(?P<msg>.*)$").unwrap());
static FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>[\w<>.]+)"#).unwrap()
});
static FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?P<key>rank|host|exitcode|traceback|time)\s*:\s*(?P<value>.*)$").unwrap()
});
static CODES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:nccl[A-Z][A-Za-z]+|cudaError\w+|CUDA error: [a-z][a-z -]+[a-z]|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+)").unwrap()
});
static VERSIONS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    VERSION_PATTERNS
        .into_iter()
        .map(|(p, name)| (Regex::new(p).unwrap(), name))
        .collect()
});

/// Which of the patterns found anywhere in a line (bits of a `Found` mask).
const CPP_THROW_AT: u32 = 0;
const CODES_AT: u32 = 1;
const VERSIONS_AT: u32 = 2;

/// A bit per pattern of `CPP_THROW_AT`, `CODES_AT`, `VERSIONS_AT` and on.
type Found = u16;
const _: () = assert!(VERSIONS_AT as usize + VERSION_PATTERNS.len() <= Found::BITS as usize);

/// Which lines the patterns that may match anywhere in a line match: each searched
/// once over the whole paste, where its literal prefilter skips the lines without
/// it (most lines match none), and only those lines run it again for what it
/// captures. None of them can match a line break, so every match lies within one
/// line. (The patterns anchored at a line's start are quick to try on every line.)
fn found_on_lines(text: &str, starts: &[usize]) -> Vec<Found> {
    let mut found = vec![0; starts.len()];
    for (re, at) in anywhere_patterns() {
        for m in re.find_iter(text) {
            let line = starts.partition_point(|&s| s <= m.start()) - 1;
            found[line] |= 1 << at;
        }
    }
    found
}

/// The patterns that may match anywhere in a line, each with its bit in `Found`.
fn anywhere_patterns() -> impl Iterator<Item = (&'static Regex, u32)> {
    [(&*CPP_THROW, CPP_THROW_AT), (&*CODES, CODES_AT)]
        .into_iter()
        .chain(
            (VERSIONS_AT..)
                .zip(VERSIONS.iter())
                .map(|(at, (re, _))| (re, at)),
        )
}

/// The lines that start a traceback and torchrun's root-cause block, found by a
/// vectorised substring search (they are looked for on every line).
static TRACEBACK_START: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new("Traceback (most recent call last)"));
static ROOT_CAUSE_START: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new("Root Cause (first observed failure)"));

/// Reads `paste`, given as `Paste::joined` gives it too (`text`, `starts`).
pub fn parse(paste: &Paste, text: &str, starts: &[usize]) -> Parsed {
    let found_on = found_on_lines(text, starts);
    let mut parsed = Parsed::default();
    let mut frames: Vec<Frame> = Vec::new();
    let lines = &paste.lines;
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let text = line.text.as_str();
        let found = |at: u32| found_on[i] & (1 << at) != 0;
        if TRACEBACK_START.find(text.as_bytes()).is_some() {
            frames.clear();
        } else if let Some((path, number, function)) = frame(text) {
            let file = path.rsplit(['/', '\\']).next().unwrap_or(path).to_string();
            frames.push(Frame {
                file,
                path: path.to_string(),
                line: number.parse().unwrap_or(0),
                function: function.to_string(),
            });
        } else if let Some((qualified, kind, message)) = exception(text) {
            if !kind.ends_with("Warning") {
                let mut message = message.unwrap_or("").trim().to_string();
                // A message that continues on the next lines (state_dict key lists,
                // multi-line NCCL errors) is part of the exception.
                let mut j = i + 1;
                while j < lines.len() && j <= i + 3 && is_continuation(&lines[j].text) {
                    if !message.is_empty() {
                        message.push(' ');
                    }
                    message.push_str(lines[j].text.trim());
                    j += 1;
                }
                push_exception(&mut parsed, kind, qualified, message, i, line, &frames);
                frames.clear();
            }
        } else if found(CPP_THROW_AT)
            && let Some(caps) = CPP_THROW.captures(text)
        {
            let kind = caps["kind"].to_string();
            let message = lines
                .get(i + 1)
                .and_then(|next| CPP_WHAT.captures(&next.text))
                .map(|c| c["msg"].trim().to_string())
                .unwrap_or_default();
            push_exception(&mut parsed, &kind, &kind, message, i, line, &[]);
        } else if ROOT_CAUSE_START.find(text.as_bytes()).is_some() {
            parsed.first_failure = Some(root_cause_block(&lines[i + 1..]));
        }
        if found(CODES_AT) {
            for m in CODES.find_iter(text) {
                push_unique(&mut parsed.error_codes, m.as_str().trim().to_string());
            }
        }
        for (at, (re, name)) in (VERSIONS_AT..).zip(VERSIONS.iter()) {
            if !found(at) {
                continue;
            }
            for m in re.find_iter(text) {
                let digits = version_number(m.as_str());
                let version = if *name == "CUDA build cu" {
                    format!("CUDA {}.{}", &digits[..2], &digits[2..])
                } else {
                    format!("{name} {digits}")
                };
                push_unique(&mut parsed.versions, version);
            }
        }
        i += 1;
    }
    parsed.dangling_frames = frames;
    parsed.root = choose_root(&parsed);
    parsed
}

/// `\s` in ASCII, vertical tab included.
const ASCII_SPACE: [char; 6] = ['\t', '\n', '\x0b', '\x0c', '\r', ' '];

/// What the groups `first` and `second` of `re` capture in `text`.
fn two_groups<'t>(
    re: &Regex,
    text: &'t str,
    first: &str,
    second: &str,
) -> Option<(&'t str, &'t str)> {
    let caps = re.captures(text)?;
    Some((caps.name(first)?.as_str(), caps.name(second)?.as_str()))
}

/// A Python traceback's frame line: (path, line number, function), as `FRAME`
/// captures them.
fn frame(text: &str) -> Option<(&str, &str, &str)> {
    if text.is_ascii() {
        ascii_frame(text)
    } else {
        frame_by_regex(text)
    }
}

/// `FRAME`'s captures: for text that is not ASCII, and what tests hold `ascii_frame` to.
fn frame_by_regex(text: &str) -> Option<(&str, &str, &str)> {
    let caps = FRAME.captures(text)?;
    Some((
        caps.name("path")?.as_str(),
        caps.name("line")?.as_str(),
        caps.name("func")?.as_str(),
    ))
}

/// `FRAME` on ASCII text, by hand, without the regex's captures (the property test
/// `ascii_frame_lines_read_as_the_regex_reads_them` keeps the two the same).
/// Each part is a run that must end where the next literal begins (the path at the
/// first quote, the line number at the comma), so no choice is ever taken back.
fn ascii_frame(text: &str) -> Option<(&str, &str, &str)> {
    let rest = text
        .trim_start_matches(ASCII_SPACE)
        .strip_prefix("File \"")?;
    let path_len = rest.find('"').filter(|&n| n > 0)?;
    let (path, rest) = rest.split_at(path_len);
    let rest = rest.strip_prefix("\", line ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (number, rest) = rest.split_at(digits);
    let rest = rest.strip_prefix(", in ")?;
    let func_len = rest
        .bytes()
        .take_while(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'<' | b'>' | b'.'))
        .count();
    (func_len > 0).then(|| (path, number, &rest[..func_len]))
}

/// An exception line: (qualified name, kind, message if any), as `EXCEPTION`
/// captures them.
fn exception(text: &str) -> Option<(&str, &str, Option<&str>)> {
    if text.is_ascii() {
        ascii_exception(text)
    } else {
        exception_by_regex(text)
    }
}

/// `EXCEPTION`'s captures: for text that is not ASCII, and what tests hold
/// `ascii_exception` to.
fn exception_by_regex(text: &str) -> Option<(&str, &str, Option<&str>)> {
    let caps = EXCEPTION.captures(text)?;
    Some((
        caps.name("qual")?.as_str(),
        caps.name("kind")?.as_str(),
        caps.name("msg").map(|m| m.as_str()),
    ))
}

/// `EXCEPTION` on ASCII text, by hand (the regex, tried on every line, was a quarter
/// of parsing): dotted identifiers, the last of them a kind, then the end of the line
/// or a colon, one optional space and the message. Identifiers cannot hold a dot, so
/// the name splits one way only, and nothing is taken back.
fn ascii_exception(text: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = text.trim_start_matches(ASCII_SPACE);
    let bytes = rest.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut end = 0;
    let kind_start = loop {
        let start = end;
        if !bytes
            .get(start)
            .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
        {
            return None;
        }
        end = start
            + 1
            + bytes[start + 1..]
                .iter()
                .take_while(|&&b| is_word(b))
                .count();
        if bytes.get(end) == Some(&b'.') {
            end += 1;
        } else {
            break start;
        }
    };
    let kind = &rest[kind_start..end];
    let named = kind.as_bytes()[0].is_ascii_uppercase()
        && ["Error", "Exception", "Exit", "Interrupt", "Failure"]
            .iter()
            .any(|suffix| kind.len() > suffix.len() && kind.ends_with(suffix));
    if !named && !["KeyboardInterrupt", "SystemExit", "StopIteration"].contains(&kind) {
        return None;
    }
    let after = &rest[end..];
    if after.is_empty() {
        return Some((&rest[..end], kind, None));
    }
    let message = after.strip_prefix(':')?;
    let message = message
        .strip_prefix(ASCII_SPACE.as_slice())
        .unwrap_or(message);
    // `.*$` stops at a line break, and `$` is the end of the text.
    (!message.contains('\n')).then_some((&rest[..end], kind, Some(message)))
}

/// A field of torchrun's root-cause block: (key, value), as `FIELD` captures them.
fn field(text: &str) -> Option<(&str, &str)> {
    if text.is_ascii() {
        ascii_field(text)
    } else {
        field_by_regex(text)
    }
}

/// `FIELD`'s captures: for text that is not ASCII, and what tests hold `ascii_field` to.
fn field_by_regex(text: &str) -> Option<(&str, &str)> {
    two_groups(&FIELD, text, "key", "value")
}

/// `FIELD` on ASCII text, by hand (capturing the value with the regex scanned the rest
/// of the line once more): one of the keys, a colon between spaces, the rest.
fn ascii_field(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start_matches(ASCII_SPACE);
    let key = ["rank", "host", "exitcode", "traceback", "time"]
        .into_iter()
        .find(|key| rest.starts_with(key))?;
    let value = rest[key.len()..]
        .trim_start_matches(ASCII_SPACE)
        .strip_prefix(':')?
        .trim_start_matches(ASCII_SPACE);
    // `.*$` stops at a line break, and `$` is the end of the text.
    (!value.contains('\n')).then_some((key, value))
}

/// The version in a match of one of `VERSION_PATTERNS`: what the pattern captures. Each
/// ends with its group, digits and dots, after a character that is neither, so the
/// group is the match's longest such tail; finding it so saves running the regex
/// again for its captures.
fn version_number(found: &str) -> &str {
    let start = found
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_numeric() || c == '.'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    &found[start..]
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if list.len() < 16 && !list.contains(&item) {
        list.push(item);
    }
}

fn push_exception(
    parsed: &mut Parsed,
    kind: &str,
    qualified: &str,
    message: String,
    index: usize,
    line: &super::paste::Line,
    frames: &[Frame],
) {
    let duplicate = parsed
        .exceptions
        .iter()
        .any(|e| e.kind == kind && e.message == message);
    if duplicate || parsed.exceptions.len() >= 64 {
        return;
    }
    parsed.exceptions.push(Exception {
        wrapper: WRAPPERS.contains(&kind),
        kind: kind.to_string(),
        qualified: qualified.to_string(),
        message,
        line_index: index,
        line: line.number,
        rank: line.rank,
        frames: frames.to_vec(),
    });
}

/// Indented or lowercase-led lines right after an exception continue its message.
fn is_continuation(text: &str) -> bool {
    let trimmed = text.trim_start();
    !trimmed.is_empty()
        && (text.starts_with('\t') || text.starts_with("    "))
        && !trimmed.starts_with("File \"")
        && exception(text).is_none()
}

fn root_cause_block(lines: &[super::paste::Line]) -> RootCause {
    let mut root = RootCause::default();
    for line in lines.iter().take(12) {
        let Some((key, value)) = field(&line.text) else {
            if line.text.starts_with("====") {
                break;
            }
            continue;
        };
        let value = value.trim();
        match key {
            "rank" => {
                // "3 (local_rank: 3)"
                let mut numbers = value
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<u32>().ok());
                root.rank = numbers.next().flatten();
                root.local_rank = numbers.next().flatten();
            }
            "exitcode" => {
                root.exitcode = value.split_whitespace().next().and_then(|s| s.parse().ok());
            }
            "host" => root.host = Some(value.to_string()),
            "time" => root.time = Some(value.to_string()),
            "traceback" if !value.starts_with("To enable traceback") => {
                root.traceback = Some(value.to_string());
            }
            _ => {}
        }
    }
    root
}

/// The exception that explains the failure: from the rank torchrun saw fail first when
/// it says so, otherwise the first non-wrapper exception (in a chain, the original
/// one comes first: "During handling of the above exception...").
fn choose_root(parsed: &Parsed) -> Option<usize> {
    let real = |e: &&Exception| !e.wrapper && e.kind != "KeyboardInterrupt";
    if let Some(first) = &parsed.first_failure
        && let Some(rank) = first.rank
    {
        if let Some(i) = (parsed.exceptions.iter()).position(|e| e.rank == Some(rank) && real(&e)) {
            return Some(i);
        }
        // Killed by a signal without a word of its own (SIGKILL from the OOM killer):
        // the other ranks' exceptions (a peer that closed its connection) follow
        // from it and explain nothing.
        if first.exitcode.is_some_and(|c| c < 0) {
            return None;
        }
    }
    parsed
        .exceptions
        .iter()
        .position(|e| real(&e))
        .or(if parsed.exceptions.is_empty() {
            None
        } else {
            Some(0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Parsed {
        let paste = Paste::from_text(text);
        let (text, starts) = paste.joined();
        parse(&paste, &text, &starts)
    }

    #[test]
    fn reads_exception_type_message_and_frames() {
        let p = parsed(
            "Traceback (most recent call last):\n  File \"/x/train.py\", line 10, in <module>\n    main()\n  File \"/opt/torch/nn/parallel/distributed.py\", line 655, in __init__\n    x\ntorch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1191, invalid usage",
        );
        let e = p.root_exception().unwrap();
        assert_eq!(e.kind, "DistBackendError");
        assert_eq!(e.qualified, "torch.distributed.DistBackendError");
        assert!(e.message.starts_with("NCCL error in"));
        assert_eq!(e.frames.len(), 2);
        assert_eq!(
            e.frames[1],
            Frame {
                file: "distributed.py".into(),
                path: "/opt/torch/nn/parallel/distributed.py".into(),
                line: 655,
                function: "__init__".into()
            }
        );
        assert_eq!(e.line, 6);
    }

    #[test]
    fn root_cause_beats_wrappers() {
        let p = parsed(
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError: \ntrain.py FAILED",
        );
        assert_eq!(p.exceptions.len(), 2);
        assert!(p.exceptions[1].wrapper);
        assert_eq!(p.root_exception().unwrap().kind, "RuntimeError");
    }

    #[test]
    fn chained_exceptions_keep_the_original_as_root() {
        let p = parsed(
            "KeyError: 'LOCAL_RANK'\n\nDuring handling of the above exception, another exception occurred:\n\nValueError: could not start",
        );
        assert_eq!(p.root_exception().unwrap().kind, "KeyError");
    }

    #[test]
    fn torchrun_root_cause_block_picks_the_rank_that_failed_first() {
        let text = "\
[rank1]: ValueError: rank one complained later
[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  time      : 2024-05-19_16:39:58
  host      : node-7
  rank      : 3 (local_rank: 3)
  exitcode  : -6 (pid: 78970)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 78970
============================================================";
        let p = parsed(text);
        let first = p.first_failure.clone().unwrap();
        assert_eq!(first.rank, Some(3));
        assert_eq!(first.local_rank, Some(3));
        assert_eq!(first.exitcode, Some(-6));
        assert_eq!(
            first.traceback.as_deref(),
            Some("Signal 6 (SIGABRT) received by PID 78970")
        );
        assert_eq!(p.root_exception().unwrap().rank, Some(3));
        assert!(
            p.error_codes
                .contains(&"CUDA error: an illegal memory access was encountered".to_string())
        );
    }

    #[test]
    fn process_raised_exception_is_a_wrapper() {
        let p = parsed(
            "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process 0 terminated with the following error:\nTraceback (most recent call last):\nTypeError: main() takes 1 positional argument but 2 were given",
        );
        assert_eq!(p.root_exception().unwrap().kind, "TypeError");
    }

    #[test]
    fn cpp_exceptions_are_read() {
        let p = parsed(
            "terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  [PG 0 Rank 1] Watchdog caught collective operation timeout",
        );
        let e = p.root_exception().unwrap();
        assert_eq!(e.kind, "DistBackendError");
        assert!(e.message.contains("Watchdog caught"));
    }

    #[test]
    fn finds_codes_and_versions() {
        let p = parsed(
            "ncclInvalidUsage: This usually reflects invalid usage, NCCL version 2.18.1\n/opt/conda/lib/python3.10/site-packages/torch\ntorch 2.1.0+cu121",
        );
        assert_eq!(p.error_codes, ["ncclInvalidUsage"]);
        for v in ["NCCL 2.18.1", "Python 3.10", "torch 2.1.0", "CUDA 12.1"] {
            assert!(
                p.versions.contains(&v.to_string()),
                "{v} in {:?}",
                p.versions
            );
        }
    }

    #[test]
    fn versions_in_other_scripts_digits_are_read_without_panicking() {
        let p = parsed("torch 2.1.0+cu११८ NCCL version ٢.١٨.١\nRuntimeError: x");
        assert_eq!(p.versions, ["NCCL ٢.١٨.١", "torch 2.1.0"]);
        let p = parsed("torch 2.1.0+cu118 python3.10");
        assert_eq!(p.versions, ["torch 2.1.0", "CUDA 11.8", "Python 3.10"]);
    }

    #[test]
    fn warnings_are_not_exceptions() {
        let p = parsed("UserWarning: something deprecated\nRuntimeError: real");
        assert_eq!(p.exceptions.len(), 1);
    }

    #[test]
    fn exception_lines_give_their_name_kind_and_message() {
        for (line, expected) in [
            (
                "torch.distributed.DistBackendError: NCCL error in: x",
                Some((
                    "torch.distributed.DistBackendError",
                    "DistBackendError",
                    Some("NCCL error in: x"),
                )),
            ),
            (
                "  RuntimeError",
                Some(("RuntimeError", "RuntimeError", None)),
            ),
            (
                "ValueError:x",
                Some(("ValueError", "ValueError", Some("x"))),
            ),
            (
                "ValueError:  x",
                Some(("ValueError", "ValueError", Some(" x"))),
            ),
            (
                "ValueError:\nx",
                Some(("ValueError", "ValueError", Some("x"))),
            ),
            (
                "StopIteration",
                Some(("StopIteration", "StopIteration", None)),
            ),
            (
                "a.b_c.SystemExit: 1",
                Some(("a.b_c.SystemExit", "SystemExit", Some("1"))),
            ),
            ("UserWarning: old", None),
            ("Error: x", None),
            ("valueError: x", None),
            ("ValueError x", None),
            ("ValueError: \nx", None),
            ("ValueError\n", None),
            ("a..ValueError", None),
            ("a.ValueError.: x", None),
            ("2.ValueError", None),
            ("ValueErrors: x", None),
            (
                "ZeroDivisionError: 除零",
                Some(("ZeroDivisionError", "ZeroDivisionError", Some("除零"))),
            ),
        ] {
            assert_eq!(exception(line), expected, "{line:?}");
            assert_eq!(exception_by_regex(line), expected, "{line:?}");
        }
    }

    #[test]
    fn root_cause_fields_give_their_key_and_value() {
        for (line, expected) in [
            (
                "  rank      : 3 (local_rank: 3)",
                Some(("rank", "3 (local_rank: 3)")),
            ),
            ("host: node-1\r", Some(("host", "node-1\r"))),
            ("exitcode :", Some(("exitcode", ""))),
            (
                "traceback : To enable traceback see: https://x",
                Some(("traceback", "To enable traceback see: https://x")),
            ),
            ("  rank      : ３", Some(("rank", "３"))),
            ("ranks : 3", None),
            ("time : 2024-01-01", Some(("time", "2024-01-01"))),
            ("timeout : 30", None),
            ("x rank : 3", None),
            ("rank :\n 3", Some(("rank", "3"))),
            ("rank : 3\nhost: a", None),
        ] {
            assert_eq!(field(line), expected, "{line:?}");
            assert_eq!(field_by_regex(line), expected, "{line:?}");
        }
    }

    #[test]
    fn frame_lines_give_their_path_line_and_function() {
        for (line, expected) in [
            (
                r#"  File "/opt/conda/lib/python3.10/site-packages/torch/nn/parallel/distributed.py", line 1156, in forward"#,
                Some((
                    "/opt/conda/lib/python3.10/site-packages/torch/nn/parallel/distributed.py",
                    "1156",
                    "forward",
                )),
            ),
            (
                "\x0b\tFile \"train.py\", line 3, in <module>",
                Some(("train.py", "3", "<module>")),
            ),
            (
                r#"File "a.py", line 12, in Model.step extra"#,
                Some(("a.py", "12", "Model.step")),
            ),
            (
                r#"File "训练.py", line 7, in 主函数"#,
                Some(("训练.py", "7", "主函数")),
            ),
            (r#"File "", line 1, in f"#, None),
            (r#"File "a.py", line x, in f"#, None),
            (r#"File "a.py", line 3, in -f"#, None),
            (r#"File "a.py", line 3"#, None),
            (r#"x File "a.py", line 3, in f"#, None),
        ] {
            assert_eq!(frame(line), expected, "{line:?}");
            assert_eq!(frame_by_regex(line), expected, "{line:?}");
        }
    }

    mod found {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn ascii_root_cause_fields_read_as_the_regex_reads_them(
                line in "[ \t\x0b]{0,2}(rank|host|exitcode|traceback|time|ranks|hos)?[ \t\n]{0,2}:?[ \t\n]{0,2}[a-z0-9 :()\n]{0,8}"
            ) {
                prop_assert_eq!(field(&line), field_by_regex(&line), "{:?}", line);
            }

            #[test]
            fn ascii_exception_lines_read_as_the_regex_reads_them(
                line in "[ \t\x0b\n]{0,2}([a-zA-Z_0-9]{0,3}[.]{0,2}){0,3}(Value|X|x|_|Keyboard|System|Stop)?(Error|Exception|Exit|Interrupt|Failure|Iteration|Warning|rror)?[a-z0-9.]{0,2}(:[ \t\n\x0c]{0,2})?[a-z :\n]{0,6}"
            ) {
                prop_assert_eq!(exception(&line), exception_by_regex(&line), "{:?}", line);
            }

            #[test]
            fn ascii_frame_lines_read_as_the_regex_reads_them(
                line in "[ \t\x0b]{0,2}(File)?( ?\"[a-z/. \"]{0,8}\")?(, line )?[0-9a]{0,3}(, in )?[a-z_<>. -]{0,8}"
            ) {
                prop_assert_eq!(frame(&line), frame_by_regex(&line), "{:?}", line);
            }
        }

        /// Lines built from pieces that each pattern matches, pieces that nearly match,
        /// and filler, so that patterns meet line ends, repeats and each other.
        fn log_lines() -> impl Strategy<Value = Vec<String>> {
            let piece = prop::sample::select(vec![
                "torch 2.1.0",
                "torch==2.3",
                "PyTorch version: 2.4.1",
                "CUDA 12.1",
                "CUDA Version: 12.4",
                "+cu118",
                "+cu1",
                "python3.10",
                "NCCL version 2.18.1",
                "deepspeed==0.14.0",
                "accelerate 0.30.1",
                "ncclInvalidUsage",
                "nccl",
                "cudaErrorLaunchFailure",
                "CUDA error: out of memory",
                "CUBLAS_STATUS_ALLOC_FAILED",
                "terminate called after throwing an instance of 'c10::Error'",
                "terminate called after throwing an instance of",
                "'std::bad_alloc'",
                "rank",
                "x",
                "_",
                "3",
                " ",
                ": ",
                "/usr/lib/",
            ]);
            let line = prop::collection::vec(piece, 1..6).prop_map(|p| p.concat());
            prop::collection::vec(line, 1..8)
        }

        proptest! {
            #[test]
            fn a_versions_tail_is_what_its_pattern_captures(lines in log_lines()) {
                for line in &lines {
                    for (re, _) in VERSIONS.iter() {
                        for caps in re.captures_iter(line) {
                            prop_assert_eq!(version_number(&caps[0]), &caps[1], "{} on {:?}", re.as_str(), line);
                        }
                    }
                }
            }

            #[test]
            fn one_search_of_the_paste_flags_the_lines_each_pattern_matches(lines in log_lines()) {
                let mut text = String::new();
                let mut starts = Vec::new();
                for line in &lines {
                    starts.push(text.len());
                    text.push_str(line);
                    text.push('\n');
                }
                let found = found_on_lines(&text, &starts);
                for (re, at) in anywhere_patterns() {
                    for (line, flags) in lines.iter().zip(&found) {
                        prop_assert_eq!(flags & (1 << at) != 0, re.is_match(line), "{} on {:?}", re.as_str(), line);
                    }
                }
            }
        }
    }
}
