//! Arbitrary bytes as a pasted log: cleaning, parsing and normalising must never panic,
//! and the cheap invariants below must hold.
#![no_main]

use errbook::diagnose::{Paste, looks_like_error, normalize, parse, query_words};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let paste = Paste::from_text(&text);
    let read = Paste::from_reader(data).expect("reading from a byte slice cannot fail");

    // `str::lines` and `read_until(b'\n')` split alike when there is no '\r'.
    if !text.contains('\r') {
        assert_eq!(
            paste.total_lines, read.total_lines,
            "from_text and from_reader disagree on total_lines"
        );
        assert_eq!(
            paste.lines.len(),
            read.lines.len(),
            "from_text and from_reader disagree on the number of cleaned lines"
        );
    }

    for p in [&paste, &read] {
        let parsed = parse(p);
        let _ = parsed.root_exception();
        let _ = p.joined();
        let _ = p.is_empty();
        for line in &p.lines {
            let once = normalize(&line.text);
            let twice = normalize(&once);
            assert_eq!(twice, once, "normalize is not idempotent on {:?}", line.text);
            let _ = query_words(&line.text);
            let _ = looks_like_error(&line.text);
        }
    }
    let _ = looks_like_error(&text);
});
