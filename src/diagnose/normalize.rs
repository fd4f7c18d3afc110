//! Normalisation: the parts of a message that differ between two runs of the same
//! problem (numbers, hex addresses, paths, hosts, ports, PIDs, ranks, shapes, device
//! indices, durations) become placeholders, so two pastes of one problem look alike.

use std::sync::LazyLock;

use regex::Regex;

/// Every run-specific detail, as one pattern so a message is scanned once. At each
/// position the alternatives are tried in this order (the regex crate's leftmost-first
/// semantics), which is what applying them one after another would give: a path comes
/// before the numbers in it, and a long hex string before the number it starts with.
static DETAILS: LazyLock<Regex> = LazyLock::new(|| {
    let alternatives = [
        // Paths keep their file name: /opt/conda/lib/python3.10/site-packages/torch/x.py -> <path>/x.py
        r#"(?:\b[A-Za-z]:)?(?:[\\/][\w.+@~-]+)+[\\/][\w.+-]+"#,
        r"\b0x[0-9a-fA-F]+\b",
        r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b",
        r"\b[0-9a-f]{12,}\b",
        r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b",
    ];
    Regex::new(&alternatives.join("|")).unwrap()
});

/// What a match of `DETAILS` is, told from its text: only a path holds a separator,
/// only hex starts with `0x`, only an address has three dots, and a run of twelve or
/// more hex digits is hex wherever the number pattern could also have matched it.
enum Detail<'a> {
    /// A path, with its file name (not yet normalised).
    Path(&'a str),
    Hex,
    Ip,
    Number,
}

impl<'a> Detail<'a> {
    fn of(found: &'a str) -> Detail<'a> {
        if let Some(slash) = found.rfind(['/', '\\']) {
            Detail::Path(&found[slash + 1..])
        } else if found.starts_with("0x") {
            Detail::Hex
        } else if found.bytes().filter(|&b| b == b'.').count() >= 3 {
            Detail::Ip
        } else if found.len() >= 12
            && found
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            Detail::Hex
        } else {
            Detail::Number
        }
    }
}

/// Calls `each` with where every detail of `text` starts and ends, in order: by hand
/// for ASCII text, else with `DETAILS`.
fn details(text: &str, each: &mut impl FnMut(usize, usize)) {
    if text.is_ascii() {
        ascii::details(text.as_bytes(), each);
    } else {
        for m in DETAILS.find_iter(text) {
            each(m.start(), m.end());
        }
    }
}

/// Copies `text` to `out` with each detail written by `put`; a path's file name is
/// rewritten the same way after `put` has written the path.
fn rewrite(text: &str, out: &mut String, put: fn(&Detail, &mut String)) {
    let mut copied = 0;
    let mut each = |start: usize, end: usize| {
        out.push_str(&text[copied..start]);
        let detail = Detail::of(&text[start..end]);
        put(&detail, out);
        if let Detail::Path(file) = detail {
            rewrite(file, out, put);
        }
        copied = end;
    };
    details(text, &mut each);
    out.push_str(&text[copied..]);
}

/// `DETAILS` for ASCII text, by hand: where Unicode cannot occur, a word character is
/// `[A-Za-z0-9_]` and each alternative is a few loops over bytes, about a tenth of the
/// regex's cost (most log lines are ASCII). Same matches as the regex's leftmost-first
/// search, which the property tests check.
mod ascii {
    // What each byte can be, as bits: one table lookup per byte.
    const WORD: u8 = 1;
    const SEPARATOR: u8 = 2;
    const DIGIT: u8 = 4;
    /// `[0-9a-f]`
    const LOWER_HEX: u8 = 8;
    /// `[0-9a-fA-F]`
    const HEX: u8 = 16;
    /// `[\w.+@~-]`: a path's segment.
    const SEGMENT: u8 = 32;
    /// `[\w.+-]`: a path's last segment.
    const LAST: u8 = 64;

    static CLASS: [u8; 256] = {
        let mut class = [0u8; 256];
        let mut b = 0;
        while b < 128 {
            let c = b as u8;
            let word = c.is_ascii_alphanumeric() || c == b'_';
            let mut bits = 0;
            if word {
                bits |= WORD | SEGMENT | LAST;
            }
            if c == b'/' || c == b'\\' {
                bits |= SEPARATOR;
            }
            if c.is_ascii_digit() {
                bits |= DIGIT;
            }
            if c.is_ascii_digit() || (c >= b'a' && c <= b'f') {
                bits |= LOWER_HEX;
            }
            if c.is_ascii_hexdigit() {
                bits |= HEX;
            }
            if c == b'.' || c == b'+' || c == b'-' {
                bits |= SEGMENT | LAST;
            }
            if c == b'@' || c == b'~' {
                bits |= SEGMENT;
            }
            class[b] = bits;
            b += 1;
        }
        class
    };

    fn is(t: &[u8], at: usize, class: u8) -> bool {
        t.get(at).is_some_and(|&b| CLASS[b as usize] & class != 0)
    }

    /// The end of the run of bytes from `from` in `class`.
    fn run(t: &[u8], from: usize, class: u8) -> usize {
        let mut at = from;
        while is(t, at, class) {
            at += 1;
        }
        at
    }

    /// A word boundary after a word character at `at - 1`.
    fn ends_word(t: &[u8], at: usize) -> bool {
        !is(t, at, WORD)
    }

    /// Calls `found(start, end)` for each detail, left to right, as
    /// `DETAILS.find_iter` would.
    pub(super) fn details(t: &[u8], found: &mut dyn FnMut(usize, usize)) {
        let mut i = 0;
        while i < t.len() {
            let class = CLASS[t[i] as usize];
            let end = if class & SEPARATOR != 0 {
                path(t, i)
            } else if class & WORD != 0 {
                // Past the path, every alternative starts with `\b` and a word
                // character. This is the start of a word: the scan skips whole words
                // and every match ends before a character that is not a word's. Only
                // a drive (`C:`) starts with a letter past `f`.
                let end = if class & LOWER_HEX != 0 || t.get(i + 1) == Some(&b':') {
                    at_word_start(t, i)
                } else {
                    None
                };
                if end.is_none() {
                    i = run(t, i, WORD);
                    continue;
                }
                end
            } else {
                None
            };
            match end {
                Some(end) => {
                    found(i, end);
                    i = end;
                }
                None => i += 1,
            }
        }
    }

    /// A detail starting with the word character at the start of a word at `i`.
    fn at_word_start(t: &[u8], i: usize) -> Option<usize> {
        // `(?:\b[A-Za-z]:)?` then a path.
        if t[i].is_ascii_alphabetic()
            && t.get(i + 1) == Some(&b':')
            && let Some(end) = path(t, i + 2)
        {
            return Some(end);
        }
        // `\b0x[0-9a-fA-F]+\b`
        if t[i..].starts_with(b"0x") {
            let end = run(t, i + 2, HEX);
            if end > i + 2 && ends_word(t, end) {
                return Some(end);
            }
        }
        ip(t, i)
            .or_else(|| {
                // `\b[0-9a-f]{12,}\b`
                let end = run(t, i, LOWER_HEX);
                (end - i >= 12 && ends_word(t, end)).then_some(end)
            })
            .or_else(|| number(t, i))
    }

    /// `(?:[\\/][\w.+@~-]+)+[\\/][\w.+-]+` at `i`: one or more segments, each as
    /// long as it goes (a segment cannot hold a separator), then a last one whose
    /// characters are fewer. The last separator past the first whose segment starts
    /// with one of those begins the last part (the most segments before it).
    fn path(t: &[u8], i: usize) -> Option<usize> {
        let mut last_part = None;
        let mut at = i;
        while is(t, at, SEPARATOR) && is(t, at + 1, SEGMENT) {
            if at > i && is(t, at + 1, LAST) {
                last_part = Some(at + 1);
            }
            at = run(t, at + 1, SEGMENT);
        }
        last_part.map(|from| run(t, from, LAST))
    }

    /// `\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b` at `i`: four runs of one to three
    /// digits joined by dots (a longer run leaves a digit where a dot or the boundary
    /// must be), then a port if one follows and ends a word, else the boundary.
    fn ip(t: &[u8], i: usize) -> Option<usize> {
        let mut at = i;
        for octet in 0..4 {
            if octet > 0 {
                if t.get(at) != Some(&b'.') {
                    return None;
                }
                at += 1;
            }
            let end = run(t, at, DIGIT);
            if !(1..=3).contains(&(end - at)) {
                return None;
            }
            at = end;
        }
        if t.get(at) == Some(&b':') {
            let end = run(t, at + 1, DIGIT);
            if end > at + 1 && ends_word(t, end) {
                return Some(end);
            }
        }
        ends_word(t, at).then_some(at)
    }

    /// `\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b` at `i`. Each digit run is as long as it
    /// goes (a shorter one leaves a digit before the boundary); the regex prefers the
    /// fraction and the exponent, and drops them, in that order, when the boundary
    /// does not follow.
    fn number(t: &[u8], i: usize) -> Option<usize> {
        let digits = |from: usize| {
            let end = run(t, from, DIGIT);
            (end > from).then_some(end)
        };
        let whole = digits(i)?;
        let fraction = if t.get(whole) == Some(&b'.') {
            digits(whole + 1)
        } else {
            None
        };
        let exponent = |from: usize| {
            if t.get(from) != Some(&b'e') {
                return None;
            }
            match t.get(from + 1) {
                Some(b'+' | b'-') => digits(from + 2),
                _ => digits(from + 1),
            }
        };
        let mut ends = [None; 4];
        if let Some(fraction) = fraction {
            ends[0] = exponent(fraction);
            ends[1] = Some(fraction);
        }
        ends[2] = exponent(whole);
        ends[3] = Some(whole);
        ends.into_iter().flatten().find(|&end| ends_word(t, end))
    }
}

/// The message with run-specific details replaced by placeholders. Idempotent.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    rewrite(text.trim(), &mut out, |detail, out| {
        out.push_str(match detail {
            Detail::Path(_) => "<path>/",
            Detail::Hex => "<hex>",
            Detail::Ip => "<ip>",
            Detail::Number => "<n>",
        })
    });
    out
}

/// A regex that matches `text` whatever its run's details (numbers, hex, paths, IP
/// addresses, and the placeholders of `redact`): the signature of a message seen once.
pub fn as_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut copied = 0;
    for m in crate::redact::PLACEHOLDER.find_iter(text) {
        literal_pattern(&text[copied..m.start()], &mut out);
        out.push_str(r"\S+");
        copied = m.end();
    }
    literal_pattern(&text[copied..], &mut out);
    out
}

/// `text` as a regex, its details as patterns and the rest escaped.
fn literal_pattern(text: &str, out: &mut String) {
    let mut copied = 0;
    let mut each = |start: usize, end: usize| {
        out.push_str(&regex::escape(&text[copied..start]));
        out.push_str(match Detail::of(&text[start..end]) {
            Detail::Path(_) => r"\S+",
            Detail::Hex => "(?:0x)?[0-9a-fA-F]+",
            Detail::Ip => r"\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?",
            Detail::Number => r"\d+(?:\.\d+)?",
        });
        copied = end;
    };
    details(text, &mut each);
    out.push_str(&regex::escape(&text[copied..]));
}

/// The message with placeholders removed entirely: what a full-text query should see.
/// Each detail becomes a space (a path keeps its file name), and placeholders already
/// in the text are removed too.
pub fn query_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    rewrite(text.trim(), &mut out, |_, out| out.push(' '));
    if !out.contains('<') {
        return out;
    }
    out.replace("<path>/", " ")
        .replace("<hex>", " ")
        .replace("<ip>", " ")
        .replace("<n>", " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_the_message_with_other_details() {
        let message =
            "Expected 4 tensors in /data/run1/x.pt at 0x7f3a9c, peer 10.0.0.5:29500 (<host-1>)";
        let pattern = Regex::new(&as_pattern(message)).unwrap();
        assert!(pattern.is_match(message));
        assert!(pattern.is_match(
            "Expected 16 tensors in /scratch/y.pt at 0xdead, peer 192.168.1.9:1234 (node-7)"
        ));
        assert!(!pattern.is_match("Expected four tensors"));
        assert_eq!(as_pattern("a.b(c)"), r"a\.b\(c\)");
    }

    fn check(input: &str, expected: &str) {
        assert_eq!(normalize(input), expected, "normalising {input:?}");
    }

    #[test]
    fn placeholders_replace_run_specific_details() {
        check(
            "CUDA out of memory. Tried to allocate 2.81 GiB (GPU 0; 23.69 GiB total capacity)",
            "CUDA out of memory. Tried to allocate <n> GiB (GPU <n>; <n> GiB total capacity)",
        );
        check(
            "WorkNCCL(SeqNum=5213, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600047 milliseconds",
            "WorkNCCL(SeqNum=<n>, OpType=ALLREDUCE, Timeout(ms)=<n>) ran for <n> milliseconds",
        );
        check(
            "File \"/opt/conda/lib/python3.10/site-packages/torch/nn/parallel/distributed.py\", line 655",
            "File \"<path>/distributed.py\", line <n>",
        );
        check(
            "connect to 10.0.3.17:29500 failed",
            "connect to <ip> failed",
        );
        check("at 0x7f3a2c00 on cuda:1", "at <hex> on cuda:<n>");
        check(
            "DataLoader worker (pid 1234) is killed",
            "DataLoader worker (pid <n>) is killed",
        );
        check(
            "expected shape [64, 3, 224, 224]",
            "expected shape [<n>, <n>, <n>, <n>]",
        );
    }

    #[test]
    fn identifiers_with_digits_stay_whole() {
        check("Output 0 of SliceBackward0", "Output <n> of SliceBackward0");
        check(
            "NCCL_P2P_DISABLE=1 ncclInvalidUsage",
            "NCCL_P2P_DISABLE=<n> ncclInvalidUsage",
        );
    }

    #[test]
    fn two_runs_of_one_problem_normalise_alike() {
        assert_eq!(
            normalize(
                "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88) ran for 1800081 milliseconds"
            ),
            normalize(
                "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7741) ran for 1800002 milliseconds"
            ),
        );
    }

    #[test]
    fn normalising_twice_changes_nothing() {
        for s in [
            "a 1.5e-3 b",
            "/x/y/z.py:12",
            "0xdeadbeef 10.1.1.1:80",
            "SeqNum=12",
        ] {
            assert_eq!(normalize(&normalize(s)), normalize(s));
        }
    }

    /// Where each detail starts and ends.
    type Spans = Vec<(usize, usize)>;

    /// The details of `text`: found by hand (ASCII) and by the regex.
    fn both_ways(text: &str) -> (Spans, Spans) {
        let mut by_hand = Vec::new();
        ascii::details(text.as_bytes(), &mut |start, end| {
            by_hand.push((start, end))
        });
        let by_regex = DETAILS
            .find_iter(text)
            .map(|m| (m.start(), m.end()))
            .collect();
        (by_hand, by_regex)
    }

    #[test]
    fn ascii_details_are_found_where_the_regex_finds_them() {
        // Each needs the regex's backtracking: a fraction or exponent given up for the
        // boundary, a port given up, a path's last part one segment back, a drive.
        for text in [
            "1.5e 1.e5 1e5x 2.5e-3 7e+ 12abc 0x1fg 0xff, 0x",
            "1.2.3.4567 1234.1.1.1 10.0.0.1:80abc 10.0.0.1:29500 1.2.3.4.5",
            "/a/b@c /a/b/@c /a/~b /a //b /a/b/ C:/x/y.py aC:/x/y \\srv\\share\\f.txt",
            "deadbeefcafe0 deadbeefcafe deadbeefcafeg abc/def/x.py x_1 _9 9_",
            "rank=3, pid 42; 3.14159 (1e-5) [64, 3] 1.5.",
        ] {
            let (by_hand, by_regex) = both_ways(text);
            assert_eq!(by_hand, by_regex, "in {text:?}");
        }
    }

    #[test]
    fn query_words_drop_placeholders() {
        assert_eq!(
            query_words("rank 3 pid 42")
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["rank", "pid"]
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::{normalize, query_words};

        /// One run-specific detail as logs write it: a count, a decimal, hex, a path,
        /// an address.
        fn detail() -> impl Strategy<Value = String> {
            prop_oneof![
                "[0-9]{1,8}",
                "[0-9]{1,3}\\.[0-9]{1,4}(e-[0-9])?",
                "0x[0-9a-fA-F]{1,12}",
                "[0-9a-f]{10,16}",
                "([A-Z]:)?([/\\\\][a-z0-9._+@~-]{1,6}){1,4}",
                "[0-9]{1,3}(\\.[0-9]{1,3}){3}(:[0-9]{1,5})?",
            ]
        }

        /// Text shaped like log messages: words, details and punctuation glued
        /// together, so the rules fire and overlap.
        fn loggy() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                1 => "[a-zA-Z_]{1,12}",
                6 => detail(),
                1 => "[ :;,()=<>\\[\\]/\\\\.-]{1,3}",
                1 => "\\PC{1,4}",
            ];
            prop::collection::vec(piece, 0..24).prop_map(|parts| parts.concat())
        }

        /// Log text whose details stand apart, as they do in real messages: words and
        /// details separated by spaces or punctuation.
        fn spaced_log_text() -> impl Strategy<Value = String> {
            let piece = prop_oneof![1 => "[a-zA-Z_]{1,12}[0-9]{0,2}", 6 => detail()];
            let gap =
                prop::sample::select(vec![" ", ", ", " (", ") ", "=", ": ", "\"", " [", "] "]);
            prop::collection::vec((piece, gap), 0..16)
                .prop_map(|parts| parts.into_iter().map(|(p, g)| p + g).collect())
        }

        /// The rules as they were first written: five regexes applied one after
        /// another, each over the previous one's output.
        fn one_rule_after_another(text: &str) -> String {
            static RULES: std::sync::LazyLock<Vec<(regex::Regex, &str)>> =
                std::sync::LazyLock::new(|| {
                    [
                        (
                            r#"(?:[A-Za-z]:)?(?:[\\/][\w.+@~-]+)+[\\/]([\w.+-]+)"#,
                            "<path>/$1",
                        ),
                        (r"\b0x[0-9a-fA-F]+\b", "<hex>"),
                        (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "<ip>"),
                        (r"\b[0-9a-f]{12,}\b", "<hex>"),
                        (r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", "<n>"),
                    ]
                    .into_iter()
                    .map(|(pattern, with)| (regex::Regex::new(pattern).unwrap(), with))
                    .collect()
                });
            let mut out = text.trim().to_string();
            for (rule, with) in RULES.iter() {
                out = rule.replace_all(&out, *with).into_owned();
            }
            out
        }

        /// ASCII text dense in what the alternatives look at: hex and exponent letters,
        /// digits, dots, separators and the characters paths may hold.
        fn ascii_log_text() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                2 => "[a-fA-FxXe0-9_]{1,14}",
                1 => "[a-zA-Z_]{1,6}",
                4 => detail(),
                2 => "[ :;,()=/\\\\.+@~e-]{1,3}",
            ];
            prop::collection::vec(piece, 0..24).prop_map(|parts| parts.concat())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn ascii_details_are_the_regexs(text in ascii_log_text()) {
                let (by_hand, by_regex) = super::both_ways(&text);
                prop_assert_eq!(by_hand, by_regex, "in {:?}", text);
            }

            #[test]
            fn printable_ascii_details_are_the_regexs(text in "[ -~]{0,80}") {
                let (by_hand, by_regex) = super::both_ways(&text);
                prop_assert_eq!(by_hand, by_regex, "in {:?}", text);
            }

            #[test]
            fn one_pass_agrees_with_the_rules_applied_in_turn(text in spaced_log_text()) {
                prop_assert_eq!(normalize(&text), one_rule_after_another(&text));
            }

            #[test]
            fn normalising_is_idempotent(text in loggy()) {
                let once = normalize(&text);
                prop_assert_eq!(normalize(&once), once);
            }

            #[test]
            fn any_text_normalises_without_panicking_and_boundedly(text in "\\PC*|.*") {
                let out = normalize(&text);
                // The largest growth is a lone digit becoming `<n>`.
                prop_assert!(out.len() <= 3 * text.trim().len(), "{out:?} from {text:?}");
                prop_assert!(query_words(&text).len() <= out.len());
            }

            #[test]
            fn log_text_normalises_boundedly(text in loggy()) {
                let out = normalize(&text);
                prop_assert!(out.len() <= 3 * text.trim().len(), "{out:?} from {text:?}");
                let words = query_words(&text);
                for placeholder in ["<n>", "<hex>", "<ip>", "<path>/"] {
                    prop_assert!(!words.contains(placeholder), "{words:?}");
                }
            }
        }
    }
}
