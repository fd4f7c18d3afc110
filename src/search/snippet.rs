//! Search-result excerpts: the densest spot of a query's terms in an entry, with the
//! words that matched marked.
//!
//! The query's analysed terms (lowercase words and their stems, identifier parts,
//! Chinese words and characters) nearly always occur verbatim in the text they came
//! from, as the start of the word they were made of. So an excerpt is found with one
//! multi-pattern scan of the raw text rather than by analysing it again: a term counts where it starts a word or an
//! identifier part (`Invalid` in `ncclInvalidUsage`), and the mark covers the rest of
//! that word or part (`hang` marks `hangs`). Chinese terms count anywhere. A stem that
//! is not a prefix of its word (`timing` stems to `time`) is not marked there.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind, packed};

/// Longest excerpt, in bytes.
pub const SNIPPET_CHARS: usize = 220;

/// Occurrences looked at in one text: enough to find the densest spot of a long body.
const MAX_OCCURRENCES: usize = 256;

/// A query's terms, ready to find in texts.
pub struct Highlighter {
    /// Each term as written in lowercase, capitalised and in capitals: a
    /// case-sensitive searcher can skip ahead with SIMD, which an
    /// ASCII-case-insensitive one cannot (3-4 times faster over a body).
    spellings: Spellings,
    /// The term each spelling spells.
    term_of: Vec<usize>,
    /// Each term's weight: rarer terms (in fewer entries) make a better excerpt.
    weights: Vec<f32>,
}

/// An excerpt as plain text (whitespace collapsed) and as HTML with `<mark>`s.
#[derive(Debug, PartialEq)]
pub struct Snippet {
    pub plain: String,
    pub html: String,
}

/// One term found in a text: the bytes to mark and which term it was.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Occurrence {
    start: usize,
    end: usize,
    term: usize,
}

impl Highlighter {
    /// `terms` as (text, number of entries holding it). Terms no entry holds, and
    /// one-letter ASCII terms, are left out; a text given more than once (by several
    /// analyzers) counts as its rarest. `None` when nothing is left.
    pub fn new<'a>(terms: impl IntoIterator<Item = (&'a str, usize)>) -> Option<Highlighter> {
        let mut texts: Vec<&str> = Vec::new();
        let mut counts: Vec<usize> = Vec::new();
        for (text, entries) in terms {
            if entries == 0 || text.len() < 2 {
                continue;
            }
            match texts.iter().position(|t| *t == text) {
                Some(seen) => counts[seen] = counts[seen].min(entries),
                None => {
                    texts.push(text);
                    counts.push(entries);
                }
            }
        }
        let weights = counts.iter().map(|&n| 1.0 / (1.0 + n as f32)).collect();
        if texts.is_empty() {
            return None;
        }
        let mut spellings = Vec::new();
        let mut term_of = Vec::new();
        for (term, text) in texts.iter().enumerate() {
            let mut capitalised = text.to_string();
            if let Some(first) = capitalised.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            for spelling in [text.to_string(), capitalised, text.to_ascii_uppercase()] {
                if !spellings.contains(&spelling) {
                    spellings.push(spelling);
                    term_of.push(term);
                }
            }
        }
        let spellings = Spellings::new(&spellings)?;
        Some(Highlighter {
            spellings,
            term_of,
            weights,
        })
    }

    /// The best excerpt of `text`: the window of at most [`SNIPPET_CHARS`] bytes whose
    /// distinct terms weigh the most (the first such window on a tie). `None` when no
    /// term occurs.
    pub fn snippet(&self, text: &str) -> Option<Snippet> {
        let found = self.occurrences(text);
        let (first, last) = self.densest(&found)?;
        let (start, end) = frame(text, found[first].start, found[last].end);
        let marks = found[first..=last]
            .iter()
            .filter(|o| o.start >= start && o.end <= end);
        Some(render(text, start, end, marks))
    }

    /// The terms' occurrences in `text`, in order, up to `MAX_OCCURRENCES`; or fewer:
    /// the scan stops at the first window that holds every term (no window can weigh
    /// more, and of equal ones the first wins), so a body need not be read to its end.
    fn occurrences(&self, text: &str) -> Vec<Occurrence> {
        self.occurrences_until(text, true)
    }

    /// `occurrences`, without stopping at a window that holds every term unless
    /// `stop_early` (for tests: the answer must be the same).
    fn occurrences_until(&self, text: &str, stop_early: bool) -> Vec<Occurrence> {
        let bytes = text.as_bytes();
        let kept = |m: aho_corasick::Match| {
            let (start, end) = (m.start(), m.end());
            let first = bytes[start];
            if !first.is_ascii_alphanumeric() {
                // Chinese (or other non-ASCII) terms count wherever they occur.
                return Some((start, end, self.term_of[m.pattern().as_usize()]));
            }
            let starts_a_part = start == 0 || {
                let before = bytes[start - 1];
                !before.is_ascii_alphanumeric()
                    || before.is_ascii_lowercase() && first.is_ascii_uppercase()
                    || before.is_ascii_digit() != first.is_ascii_digit()
            };
            if !starts_a_part {
                return None;
            }
            // The rest of the word or identifier part: `hang` marks `hangs`,
            // `invalid` marks `Invalid` in `ncclInvalidUsage`.
            let last = bytes[end - 1];
            let rest = bytes[end..]
                .iter()
                .take_while(|b| {
                    if last.is_ascii_digit() {
                        b.is_ascii_digit()
                    } else {
                        b.is_ascii_lowercase()
                    }
                })
                .count();
            Some((start, end + rest, self.term_of[m.pattern().as_usize()]))
        };
        let mut found: Vec<Occurrence> = Vec::with_capacity(MAX_OCCURRENCES);
        // The first occurrence whose window may still grow, and the terms of the
        // occurrences from it on (`held` of them distinct).
        let mut open = 0;
        let mut counts = vec![0u16; self.weights.len()];
        let mut held = 0;
        for m in self.spellings.find_iter(text) {
            let Some((start, end, term)) = kept(m) else {
                continue;
            };
            // Each window this occurrence does not fit in is complete.
            while open < found.len() && end - found[open].start > SNIPPET_CHARS {
                let first = found[open];
                if stop_early && held == counts.len() && first.end - first.start <= SNIPPET_CHARS {
                    return found;
                }
                counts[first.term] -= 1;
                if counts[first.term] == 0 {
                    held -= 1;
                }
                open += 1;
            }
            if counts[term] == 0 {
                held += 1;
            }
            counts[term] += 1;
            found.push(Occurrence { start, end, term });
            if found.len() == MAX_OCCURRENCES {
                break;
            }
        }
        found
    }

    /// The first and last occurrence of the best window: for each occurrence, the
    /// window from it up to the first occurrence that ends too far from it.
    ///
    /// One pass: that first occurrence too far only moves on as the window's start
    /// does (a later start is no earlier), so each occurrence joins the window once and
    /// leaves it once, with a count per term.
    fn densest(&self, found: &[Occurrence]) -> Option<(usize, usize)> {
        let mut best: Option<(f32, usize, usize)> = None;
        let mut counts = vec![0u32; self.weights.len()];
        // The window of `first` is `found[first..next]`.
        let mut next = 0;
        for first in 0..found.len() {
            next = next.max(first);
            while next < found.len() && found[next].end - found[first].start <= SNIPPET_CHARS {
                counts[found[next].term] += 1;
                next += 1;
            }
            // Added in the terms' order, so that windows holding the same terms weigh
            // exactly the same, whatever order the terms come in.
            let weight: f32 = (0..counts.len())
                .filter(|&term| counts[term] > 0)
                .map(|term| self.weights[term])
                .sum();
            if best.is_none_or(|(w, _, _)| weight > w) {
                best = Some((weight, first, next.saturating_sub(1).max(first)));
            }
            if next > first {
                counts[found[first].term] -= 1;
            }
        }
        best.map(|(_, first, last)| (first, last))
    }
}

/// The spellings of a query's terms, found leftmost-longest (of two spellings found
/// at one place, the longer; then on from its end).
enum Spellings {
    /// SIMD (Teddy) alone, when the machine has it and there are few spellings (up to
    /// 64): most queries. It is built in a few microseconds, where an automaton took
    /// a fifth of a new search to build.
    Packed(packed::Searcher),
    /// An automaton, whose prefilter finds the candidates (a DFA would cost more to
    /// build than it saves).
    Automaton(AhoCorasick),
}

impl Spellings {
    fn new(spellings: &[String]) -> Option<Spellings> {
        Spellings::packed(spellings).or_else(|| Spellings::automaton(spellings))
    }

    /// `None` without SIMD, or when Teddy declines the spellings (too many, or too
    /// many too short).
    fn packed(spellings: &[String]) -> Option<Spellings> {
        packed::Config::new()
            .match_kind(packed::MatchKind::LeftmostLongest)
            .builder()
            .extend(spellings)
            .build()
            .map(Spellings::Packed)
    }

    fn automaton(spellings: &[String]) -> Option<Spellings> {
        AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .match_kind(MatchKind::LeftmostLongest)
            .build(spellings)
            .ok()
            .map(Spellings::Automaton)
    }

    fn find_iter<'a>(&'a self, text: &'a str) -> impl Iterator<Item = aho_corasick::Match> + 'a {
        let (packed, automaton) = match self {
            Spellings::Packed(searcher) => (Some(searcher.find_iter(text)), None),
            Spellings::Automaton(automaton) => (None, Some(automaton.find_iter(text))),
        };
        packed
            .into_iter()
            .flatten()
            .chain(automaton.into_iter().flatten())
    }
}

/// The excerpt's bounds around the marked span `[from, to)`: the span centred in at
/// most [`SNIPPET_CHARS`] bytes, cut at spaces where one is near, on char boundaries.
fn frame(text: &str, from: usize, to: usize) -> (usize, usize) {
    let room = SNIPPET_CHARS.saturating_sub(to - from);
    let mut start = from.saturating_sub(room / 2);
    let mut end = (to + (room - (from - start))).min(text.len());
    // What the end could not use goes before the span.
    start = start.saturating_sub(SNIPPET_CHARS.saturating_sub(end - start));
    while !text.is_char_boundary(start) {
        start += 1;
    }
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // Whole words at the edges, unless that would cut too much.
    const NEAR: usize = 24;
    if start > 0
        && let Some(space) = text[start..from].find(char::is_whitespace)
        && space < NEAR
    {
        start += space + 1;
    }
    if end < text.len()
        && let Some(space) = text[to..end].rfind(char::is_whitespace)
        && end - (to + space) < NEAR
    {
        end = to + space;
    }
    (start, end)
}

fn render<'a>(
    text: &str,
    start: usize,
    end: usize,
    marks: impl Iterator<Item = &'a Occurrence>,
) -> Snippet {
    let mut html = String::with_capacity(end - start + 64);
    let mut at = start;
    for mark in marks {
        if mark.start < at {
            continue; // cannot happen (a mark ends where a word part ends), but cheap
        }
        push_escaped(&mut html, &text[at..mark.start]);
        html.push_str("<mark>");
        push_escaped(&mut html, &text[mark.start..mark.end]);
        html.push_str("</mark>");
        at = mark.end;
    }
    push_escaped(&mut html, &text[at..end]);
    let mut plain = String::with_capacity(end - start);
    for word in text[start..end].split_whitespace() {
        if !plain.is_empty() {
            plain.push(' ');
        }
        plain.push_str(word);
    }
    Snippet { plain, html }
}

/// What `push_escaped` writes for each byte it replaces (empty for the bytes it keeps).
const ESCAPES: [&str; 256] = {
    let mut escapes = [""; 256];
    escapes[b'&' as usize] = "&amp;";
    escapes[b'<' as usize] = "&lt;";
    escapes[b'>' as usize] = "&gt;";
    escapes[b'"' as usize] = "&quot;";
    escapes[b'\'' as usize] = "&#39;";
    escapes[b'\n' as usize] = " ";
    escapes[b'\r' as usize] = " ";
    escapes
};

/// Escapes `text` for HTML, newlines as spaces (an excerpt is one line).
pub fn push_escaped(out: &mut String, text: &str) {
    // The characters replaced are ASCII, so never a byte of a longer character: the
    // text between them is copied as it is.
    let mut copied = 0;
    for (at, byte) in text.bytes().enumerate() {
        let replacement = ESCAPES[usize::from(byte)];
        if replacement.is_empty() {
            continue;
        }
        out.push_str(&text[copied..at]);
        out.push_str(replacement);
        copied = at + 1;
    }
    out.push_str(&text[copied..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_found_lowercase_capitalised_and_in_capitals() {
        let h = highlighter(&["watchdog", "显存"]);
        let snippet = h
            .snippet("watchdog Watchdog WATCHDOG WatchDog 显存")
            .unwrap();
        assert_eq!(
            snippet.html,
            "<mark>watchdog</mark> <mark>Watchdog</mark> <mark>WATCHDOG</mark> WatchDog \
             <mark>显存</mark>"
        );
    }

    fn highlighter(terms: &[&str]) -> Highlighter {
        Highlighter::new(terms.iter().map(|t| (*t, 1))).unwrap()
    }

    #[test]
    fn the_densest_spot_of_a_long_body_wins() {
        let filler = "显存 filler words that say nothing. ".repeat(200);
        let body = format!(
            "{filler}first Watchdog here. {filler}watchdog timeout, watchdog again. {filler}"
        );
        let snippet = highlighter(&["watchdog", "timeout"])
            .snippet(&body)
            .unwrap();
        assert!(snippet.plain.len() <= SNIPPET_CHARS, "{}", snippet.plain);
        assert!(
            snippet
                .html
                .contains("<mark>watchdog</mark> <mark>timeout</mark>, <mark>watchdog</mark>"),
            "{}",
            snippet.html
        );
        assert!(!snippet.plain.contains("<mark>"));
        assert!(highlighter(&["absent"]).snippet(&body).is_none());
    }

    #[test]
    fn stems_mark_their_whole_word_and_only_at_word_starts() {
        let h = highlighter(&["hang", "usag", "nccl"]);
        let snippet = h
            .snippet("Training hangs; ncclInvalidUsage was changed. NCCL_DEBUG=INFO")
            .unwrap();
        assert_eq!(
            snippet.html,
            "Training <mark>hangs</mark>; <mark>nccl</mark>Invalid<mark>Usage</mark> was \
             changed. <mark>NCCL</mark>_DEBUG=INFO"
        );
    }

    #[test]
    fn chinese_terms_count_anywhere_and_html_is_escaped() {
        let snippet = highlighter(&["卡"])
            .snippet("多卡训练 <b>卡住</b> & \"hangs\"")
            .unwrap();
        assert_eq!(
            snippet.html,
            "多<mark>卡</mark>训练 &lt;b&gt;<mark>卡</mark>住&lt;/b&gt; &amp; &quot;hangs&quot;"
        );
    }

    #[test]
    fn rare_terms_choose_the_excerpt() {
        let common = "common ".repeat(20);
        let body = format!(
            "{common} {} rare here {}",
            "x ".repeat(300),
            "y ".repeat(300)
        );
        let h = Highlighter::new([("common", 50), ("rare", 1)]).unwrap();
        let snippet = h.snippet(&body).unwrap();
        assert!(
            snippet.html.contains("<mark>rare</mark>"),
            "{}",
            snippet.html
        );
    }

    #[test]
    fn the_excerpt_is_cut_at_spaces_and_char_boundaries() {
        let body = format!(
            "{} needle {}",
            "前后文字 words ".repeat(40),
            "后文 more ".repeat(40)
        );
        let snippet = highlighter(&["needle"]).snippet(&body).unwrap();
        assert!(snippet.plain.len() <= SNIPPET_CHARS);
        assert!(
            snippet.plain.len() > SNIPPET_CHARS - 30,
            "{}",
            snippet.plain
        );
        let first = snippet.plain.split(' ').next().unwrap();
        assert!(["前后文字", "words"].contains(&first), "{first}");
    }

    use proptest::prelude::{Just, prop_oneof};

    /// `Highlighter::densest` as it was first written: each window scanned anew.
    fn densest_by_rescanning(h: &Highlighter, found: &[Occurrence]) -> Option<(usize, usize)> {
        let mut best: Option<(f32, usize, usize)> = None;
        let mut seen = Vec::new();
        for first in 0..found.len() {
            seen.clear();
            let mut last = first;
            for (at, o) in found.iter().enumerate().skip(first) {
                if o.end - found[first].start > SNIPPET_CHARS {
                    break;
                }
                last = at;
                if !seen.contains(&o.term) {
                    seen.push(o.term);
                }
            }
            seen.sort_unstable();
            let weight: f32 = seen.iter().map(|&term| h.weights[term]).sum();
            if best.is_none_or(|(w, _, _)| weight > w) {
                best = Some((weight, first, last));
            }
        }
        best.map(|(_, first, last)| (first, last))
    }

    proptest::proptest! {
        /// Any text and terms: no panic, marks balanced, the plain text never longer
        /// than the excerpt the HTML shows.
        #[test]
        fn any_text_gives_a_well_formed_excerpt(
            text in "([a-zA-Z0-9_]{1,12}|[ .:/\\n]|显存|卡住|é|🙂){0,400}",
            terms in proptest::collection::vec("[a-z0-9]{2,6}|显存|卡", 1..6),
        ) {
            let h = Highlighter::new(terms.iter().map(|t| (t.as_str(), 1))).unwrap();
            if let Some(snippet) = h.snippet(&text) {
                proptest::prop_assert_eq!(
                    snippet.html.matches("<mark>").count(),
                    snippet.html.matches("</mark>").count()
                );
                proptest::prop_assert!(snippet.html.contains("<mark>"));
                proptest::prop_assert!(!snippet.plain.contains('\n'));
            }
        }
    }

    proptest::proptest! {
        /// Stopping at the first window that holds every term chooses the excerpt that
        /// reading the whole text chooses.
        #[test]
        fn stopping_early_chooses_the_same_window(
            text in "([a-z]{1,8}|[ .]{1,40}|显存){0,300}",
            terms in proptest::collection::vec(("[a-e]{2,3}|显存", 1..20usize), 1..5),
        ) {
            let h = Highlighter::new(terms.iter().map(|(t, n)| (t.as_str(), *n))).unwrap();
            let early = h.occurrences_until(&text, true);
            let all = h.occurrences_until(&text, false);
            proptest::prop_assert!(all.starts_with(&early));
            proptest::prop_assert_eq!(h.densest(&early), h.densest(&all));
        }

        /// The one-pass window is the window rescanning from each occurrence finds:
        /// occurrences in order of start, some ending exactly a window from a start,
        /// some longer than a window.
        #[test]
        fn one_pass_chooses_the_window_rescanning_chooses(
            spans in proptest::collection::vec(
                (0..80usize, prop_oneof![1..12usize, 200..230usize, Just(SNIPPET_CHARS)], 0..4usize),
                0..120,
            ),
            entries in proptest::collection::vec(1..20usize, 4),
        ) {
            let terms = ["aa", "bb", "cc", "dd"];
            let h = Highlighter::new(terms.iter().copied().zip(entries)).unwrap();
            let mut start = 0;
            let found: Vec<Occurrence> = spans
                .iter()
                .map(|&(gap, len, term)| {
                    start += gap + 1;
                    Occurrence { start, end: start + len, term }
                })
                .collect();
            proptest::prop_assert_eq!(h.densest(&found), densest_by_rescanning(&h, &found));
        }

        /// SIMD alone finds what the automaton finds, however the spellings overlap.
        #[test]
        fn the_packed_searcher_finds_what_the_automaton_finds(
            text in "([abAB]{1,6}|[ _.]|显存|卡){0,200}",
            spellings in proptest::collection::vec("[abAB]{1,4}|显存|卡|显", 1..40),
        ) {
            let mut distinct: Vec<String> = Vec::new();
            for spelling in spellings {
                if !distinct.contains(&spelling) {
                    distinct.push(spelling);
                }
            }
            let matches = |s: &Spellings| {
                s.find_iter(&text)
                    .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
                    .collect::<Vec<_>>()
            };
            let automaton = Spellings::automaton(&distinct).unwrap();
            if let Some(packed) = Spellings::packed(&distinct) {
                proptest::prop_assert_eq!(matches(&packed), matches(&automaton));
            }
        }

        /// Escaping by runs gives what escaping each character gives.
        #[test]
        fn escaping_by_runs_is_escaping_each_character(text in "([a-z &<>\"'\r\n]|é|显存|🙂){0,60}") {
            let mut expected = String::new();
            for c in text.chars() {
                match c {
                    '&' => expected.push_str("&amp;"),
                    '<' => expected.push_str("&lt;"),
                    '>' => expected.push_str("&gt;"),
                    '"' => expected.push_str("&quot;"),
                    '\'' => expected.push_str("&#39;"),
                    '\n' | '\r' => expected.push(' '),
                    _ => expected.push(c),
                }
            }
            let mut escaped = String::from("kept ");
            push_escaped(&mut escaped, &text);
            proptest::prop_assert_eq!(escaped, format!("kept {expected}"));
        }
    }

    #[test]
    fn a_query_s_spellings_are_found_with_simd_alone() {
        let h = highlighter(&["nccl", "watchdog", "timeout", "hang", "显存"]);
        if cfg!(target_arch = "x86_64") && std::arch::is_x86_feature_detected!("ssse3") {
            assert!(matches!(h.spellings, Spellings::Packed(_)));
        }
    }

    #[test]
    fn unknown_and_one_letter_terms_are_left_out() {
        assert!(Highlighter::new([("zzz", 0), ("a", 3)]).is_none());
    }
}
