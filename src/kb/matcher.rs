//! A compiled signature regex. Entries join two pieces of evidence by a long gap:
//! `(?s)Caught \w+ in replica \d+.{0,6000}?trainer\.py`. Spelled out, that gap is
//! thousands of automaton states for each `.` (a Unicode character is a small
//! automaton of its own), megabytes per regex and more per thread that runs it. So a
//! pattern whose top level has such a gap is matched as its parts instead: the first
//! part, then the next starting within the gap's reach of where it ended.

use regex::Regex;
use regex_syntax::ast::{self, Ast, ClassSetItem, RepetitionKind, RepetitionRange};

/// Gaps up to this many characters stay inside one regex.
const LONGEST_INLINE_GAP: u32 = 99;

/// A signature regex, ready to run.
#[derive(Debug)]
pub struct Matcher {
    /// The parts, in order; one when the pattern has no long gap.
    parts: Vec<Regex>,
    /// What may lie between part `i` and part `i + 1`.
    gaps: Vec<Gap>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gap {
    /// Fewest and most characters.
    min: usize,
    max: usize,
    /// Whether line breaks may be among them (`(?s).`), or not (`.` or `[^\n]`).
    line_breaks: bool,
}

/// For one later part: the position last asked about and the first match found at or
/// after it (`None` when there was none).
type Remembered = Option<(usize, Option<(usize, usize)>)>;

/// A match: where it starts and ends, and each named group's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub start: usize,
    pub end: usize,
    pub groups: Vec<(String, String)>,
}

impl Matcher {
    /// Compiles `source`, split at its long gaps when it has any.
    pub fn new(source: &str) -> Result<Matcher, regex::Error> {
        let (parts, gaps) = split(source).unwrap_or_else(|| (vec![source.to_string()], vec![]));
        let parts = parts
            .iter()
            .map(|part| Regex::new(part))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Matcher { parts, gaps })
    }

    /// The first match that starts at `start` or later (the text before `start` still
    /// counts for anchors and word boundaries).
    pub fn find_at(&self, text: &str, start: usize) -> Option<(usize, usize)> {
        self.search(text, start, false).map(|f| (f.start, f.end))
    }

    pub fn find(&self, text: &str) -> Option<(usize, usize)> {
        self.find_at(text, 0)
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.find(text).is_some()
    }

    /// The first match, with its named groups.
    pub fn captures(&self, text: &str) -> Option<Found> {
        self.search(text, 0, true)
    }

    fn search(&self, text: &str, start: usize, groups: bool) -> Option<Found> {
        let [first, rest @ ..] = self.parts.as_slice() else {
            return None;
        };
        if rest.is_empty() {
            return if groups {
                let caps = first.captures_at(text, start)?;
                let whole = caps.get(0)?;
                Some(Found {
                    start: whole.start(),
                    end: whole.end(),
                    groups: named(first, &caps),
                })
            } else {
                let m = first.find_at(text, start)?;
                Some(Found {
                    start: m.start(),
                    end: m.end(),
                    groups: Vec::new(),
                })
            };
        }
        // The first match of each later part at or after a position, remembered: the
        // positions asked about mostly grow, so each part scans the text about once.
        let mut next: Vec<Remembered> = vec![None; rest.len()];
        let mut from = start;
        while let Some(head) = first.find_at(text, from) {
            if let Some(spans) = self.follow(text, (head.start(), head.end()), &mut next) {
                let end = spans.last().map_or(head.end(), |s| s.1);
                let mut found = Found {
                    start: head.start(),
                    end,
                    groups: Vec::new(),
                };
                if groups {
                    let all = std::iter::once((head.start(), head.end())).chain(spans);
                    for (part, (s, _)) in self.parts.iter().zip(all) {
                        if let Some(caps) = part.captures_at(text, s) {
                            found.groups.extend(named(part, &caps));
                        }
                    }
                }
                return Some(found);
            }
            // A match of the first part that starts inside this one may still lead on.
            from = head.start() + text[head.start()..].chars().next()?.len_utf8();
        }
        None
    }

    /// The spans of the later parts that follow `head` within their gaps, or `None`.
    fn follow(
        &self,
        text: &str,
        head: (usize, usize),
        next: &mut [Remembered],
    ) -> Option<Vec<(usize, usize)>> {
        let mut spans = Vec::with_capacity(self.gaps.len());
        let mut end = head.1;
        for ((part, gap), remembered) in self.parts[1..].iter().zip(&self.gaps).zip(next) {
            let at = advance(text, end, gap.min)?;
            let m = match *remembered {
                Some((asked, found)) if asked <= at && found.is_none_or(|(s, _)| s >= at) => found,
                _ => {
                    let found = part.find_at(text, at).map(|m| (m.start(), m.end()));
                    *remembered = Some((at, found));
                    found
                }
            }?;
            let between = &text[end..m.0];
            if !gap.line_breaks && between.contains('\n') {
                return None;
            }
            if between.len() > gap.max && between.chars().count() > gap.max {
                return None;
            }
            spans.push(m);
            end = m.1;
        }
        Some(spans)
    }
}

/// The byte offset `chars` characters past `at`, if the text is that long.
fn advance(text: &str, at: usize, chars: usize) -> Option<usize> {
    if chars == 0 {
        return Some(at);
    }
    text[at..]
        .char_indices()
        .nth(chars - 1)
        .map(|(i, c)| at + i + c.len_utf8())
}

fn named(regex: &Regex, caps: &regex::Captures<'_>) -> Vec<(String, String)> {
    regex
        .capture_names()
        .flatten()
        .filter_map(|name| Some((name.to_string(), caps.name(name)?.as_str().to_string())))
        .collect()
}

/// `source` cut at its long gaps: the parts, each with the pattern's leading flags,
/// and the gaps between them. `None` when it has none, or when its shape is not one
/// this can cut safely (flags set midway, a gap first or last, an alternation at the
/// top).
fn split(source: &str) -> Option<(Vec<String>, Vec<Gap>)> {
    let ast = ast::parse::Parser::new().parse(source).ok()?;
    let Ast::Concat(concat) = &ast else {
        return None;
    };
    let items = &concat.asts;
    let flags_end = items
        .iter()
        .position(|item| !matches!(item, Ast::Flags(_)))?;
    let prefix: String = items[..flags_end]
        .iter()
        .map(|item| &source[item.span().start.offset..item.span().end.offset])
        .collect();
    let dot_all = items[..flags_end].iter().any(|item| match item {
        Ast::Flags(set) => flag_on(&set.flags, ast::Flag::DotMatchesNewLine),
        _ => false,
    });
    let mut parts = Vec::new();
    let mut gaps = Vec::new();
    let mut part_start: Option<usize> = None;
    let mut part_end = 0;
    for item in &items[flags_end..] {
        if matches!(item, Ast::Flags(_)) {
            return None;
        }
        if let Some(gap) = long_gap(item, dot_all) {
            let start = part_start.take()?;
            parts.push(format!("{prefix}{}", &source[start..part_end]));
            gaps.push(gap);
            continue;
        }
        let span = item.span();
        part_start.get_or_insert(span.start.offset);
        part_end = span.end.offset;
    }
    if gaps.is_empty() {
        return None;
    }
    let start = part_start?;
    parts.push(format!("{prefix}{}", &source[start..part_end]));
    Some((parts, gaps))
}

/// Whether a flag group turns `flag` on.
fn flag_on(flags: &ast::Flags, flag: ast::Flag) -> bool {
    let mut on = true;
    let mut found = false;
    for item in &flags.items {
        match item.kind {
            ast::FlagsItemKind::Negation => on = false,
            ast::FlagsItemKind::Flag(f) if f == flag => found = on,
            ast::FlagsItemKind::Flag(_) => {}
        }
    }
    found
}

/// `item` as a gap when it is `.{m,n}`, `[\s\S]{m,n}` or `[^\n]{m,n}` (lazy or not) with
/// `n` past
/// [`LONGEST_INLINE_GAP`].
fn long_gap(item: &Ast, dot_all: bool) -> Option<Gap> {
    let Ast::Repetition(rep) = item else {
        return None;
    };
    let RepetitionKind::Range(RepetitionRange::Bounded(min, max)) = rep.op.kind else {
        return None;
    };
    if max <= LONGEST_INLINE_GAP {
        return None;
    }
    let line_breaks = match rep.ast.as_ref() {
        Ast::Dot(_) => dot_all,
        Ast::ClassBracketed(class) if class.negated => match &class.kind {
            ast::ClassSet::Item(ClassSetItem::Literal(lit)) if lit.c == '\n' => false,
            _ => return None,
        },
        // `[\s\S]`, `[\w\W]`, `[\d\D]`: any character.
        Ast::ClassBracketed(class) => match &class.kind {
            ast::ClassSet::Item(ClassSetItem::Union(union)) => match union.items.as_slice() {
                [ClassSetItem::Perl(a), ClassSetItem::Perl(b)]
                    if a.kind == b.kind && a.negated != b.negated =>
                {
                    true
                }
                _ => return None,
            },
            _ => return None,
        },
        _ => return None,
    };
    Some(Gap {
        min: min as usize,
        max: max as usize,
        line_breaks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(source: &str) -> Vec<String> {
        split(source).map(|(p, _)| p).unwrap_or_default()
    }

    #[test]
    fn a_long_gap_cuts_the_pattern_and_short_ones_do_not() {
        assert_eq!(
            parts(r"(?s)Caught (?P<e>\w+) in replica.{0,6000}?trainer\.py"),
            vec![r"(?s)Caught (?P<e>\w+) in replica", r"(?s)trainer\.py"]
        );
        assert_eq!(
            parts(r"(?is)\b(hangs?|stuck)\b.{0,3000}GPU0\s+GPU1.{0,1500}\b(SYS|NODE)\b"),
            vec![
                r"(?is)\b(hangs?|stuck)\b",
                r"(?is)GPU0\s+GPU1",
                r"(?is)\b(SYS|NODE)\b"
            ]
        );
        assert_eq!(
            parts(r"Failed to open libibverbs\.so[\s\S]{0,2000}?NET/Socket"),
            vec![r"Failed to open libibverbs\.so", r"NET/Socket"]
        );
        assert!(parts(r"(?s)a.{0,99}b").is_empty());
        assert!(parts(r"a[\s\d]{0,500}b").is_empty(), "not every character");
        assert!(
            parts(r"a|b.{0,500}c").is_empty(),
            "an alternation at the top"
        );
        assert!(parts(r"a.{0,500}(?i)b").is_empty(), "flags set midway");
        assert!(parts(r".{0,500}b").is_empty(), "a gap first");
        assert!(
            parts(r"(?s)a(b.{0,500}c)").is_empty(),
            "a gap inside a group"
        );
    }

    /// The parts match where the whole regex would, on texts around the edges of the
    /// gap: its length in characters, line breaks, and first parts that lead nowhere.
    #[test]
    fn parts_match_as_the_whole_pattern_does() {
        let patterns = [
            r"(?s)start.{0,120}?end",
            r"(?s)start.{0,120}end",
            r"start.{0,120}end",
            r"(?s)start[^\n]{0,120}end",
            r"(?s)\bstart\b.{0,110}\bend\b.{0,100}fin",
            r"(?s)start.{5,120}end",
            r"start[\s\S]{0,120}?end",
            r"start[\d\D]{0,120}end",
        ];
        let texts = [
            format!("start{}end", "x".repeat(120)),
            format!("start{}end", "x".repeat(121)),
            format!("start{}end", "显".repeat(120)),
            format!("start{}end", "显".repeat(121)),
            format!("start{}\n{}end", "x".repeat(10), "x".repeat(10)),
            format!("start{}start{}end", "x".repeat(200), "x".repeat(10)),
            format!("restart{}end fin", "x".repeat(10)),
            format!("start xx end {} fin", "y".repeat(100)),
            format!("start xx end {} fin", "y".repeat(101)),
            "startend".to_string(),
            "start1end".to_string(),
            "start12345end".to_string(),
            format!("start{}", "x".repeat(500)),
            format!("{}end", "x".repeat(500)),
        ];
        for pattern in patterns {
            let whole = Regex::new(pattern).unwrap();
            let cut = Matcher::new(pattern).unwrap();
            assert!(cut.parts.len() > 1, "{pattern} is cut");
            for text in &texts {
                assert_eq!(
                    cut.is_match(text),
                    whole.is_match(text),
                    "{pattern} on {text:?}"
                );
                if let (Some(m), Some(f)) = (whole.find(text), cut.find(text)) {
                    assert_eq!(m.start(), f.0, "{pattern} on {text:?}");
                }
            }
        }
    }

    #[test]
    fn named_groups_come_from_every_part() {
        let m = Matcher::new(
            r"(?s)replica (?P<replica>\d+).{0,6000}?input size (?P<size>torch\.Size\(\[[^\]]*\]\))",
        )
        .unwrap();
        let text = format!(
            "Caught ValueError in replica 1 on device 1.\n{}\nValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 256])",
            "  File \"x.py\", line 3\n".repeat(50)
        );
        let found = m.captures(&text).unwrap();
        assert_eq!(
            found.groups,
            vec![
                ("replica".to_string(), "1".to_string()),
                ("size".to_string(), "torch.Size([1, 256])".to_string())
            ]
        );
        assert_eq!(&text[found.start..found.start + 9], "replica 1");
        assert!(text[..found.end].ends_with("256])"));
    }

    /// A last part that lies beyond the gap of every first part does not match, however
    /// many first parts there are.
    #[test]
    fn a_last_part_out_of_every_reach_does_not_match() {
        let m = Matcher::new(r"(?s)\bhangs\b.{0,3000}?NCCL INFO").unwrap();
        let mut text = "hangs\n".repeat(20_000);
        text.push_str(&"x".repeat(3001));
        text.push_str("NCCL INFO at last");
        assert!(!m.is_match(&text));
        text.push_str(" and hangs, then NCCL INFO again");
        assert!(m.is_match(&text));
    }
}
