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

/// Copies `text` to `out` with each detail written by `put`; a path's file name is
/// rewritten the same way after `put` has written the path.
fn rewrite(text: &str, out: &mut String, put: fn(&Detail, &mut String)) {
    let mut copied = 0;
    for m in DETAILS.find_iter(text) {
        out.push_str(&text[copied..m.start()]);
        let detail = Detail::of(m.as_str());
        put(&detail, out);
        if let Detail::Path(file) = detail {
            rewrite(file, out, put);
        }
        copied = m.end();
    }
    out.push_str(&text[copied..]);
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

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

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
