//! Normalisation: the parts of a message that differ between two runs of the same
//! problem (numbers, hex addresses, paths, hosts, ports, PIDs, ranks, shapes, device
//! indices, durations) become placeholders, so two pastes of one problem look alike.

use std::sync::LazyLock;

use regex::Regex;

/// Placeholders, in the order they are applied.
static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Paths keep their file name: /opt/conda/lib/python3.10/site-packages/torch/x.py -> <path>/x.py
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
    .map(|(p, r)| (Regex::new(p).unwrap(), r))
    .collect()
});

/// The message with run-specific details replaced by placeholders. Idempotent.
pub fn normalize(text: &str) -> String {
    let mut out = text.trim().to_string();
    for (re, replacement) in RULES.iter() {
        if re.is_match(&out) {
            out = re.replace_all(&out, *replacement).into_owned();
        }
    }
    out
}

/// The message with placeholders removed entirely: what a full-text query should see.
pub fn query_words(text: &str) -> String {
    normalize(text)
        .replace("<path>/", " ")
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

        /// Text shaped like log messages: words, numbers, hex, paths, addresses and
        /// punctuation, so the rules fire and overlap.
        fn loggy() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                "[a-zA-Z_]{1,12}",
                "[0-9]{1,8}",
                "[0-9]{1,3}\\.[0-9]{1,4}(e-[0-9])?",
                "0x[0-9a-fA-F]{1,12}",
                "[0-9a-f]{10,16}",
                "([A-Z]:)?([/\\\\][a-z0-9._+@~-]{1,6}){1,4}",
                "[0-9]{1,3}(\\.[0-9]{1,3}){3}(:[0-9]{1,5})?",
                "[ :;,()=<>\\[\\]/\\\\.-]{1,3}",
                "\\PC{1,4}",
            ];
            prop::collection::vec(piece, 0..24).prop_map(|parts| parts.concat())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

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
