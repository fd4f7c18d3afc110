//! Share links for answers: `/diagnose?p=<paste>`, where the paste travels in the URL
//! itself, deflated and base64url-encoded. errbook stores nothing, so a link works as
//! long as the knowledge base does, for anyone who can reach the server, and opening it
//! diagnoses the paste again.
//!
//! A long log would make a link no chat accepts; past [`MAX_LINK_CHARS`] the link keeps
//! the lines the answer rests on (evidence, root cause) and the error lines around them.

use std::io::{Read, Write};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

use crate::diagnose::{Diagnosis, Paste, looks_like_error};

/// Longest encoded paste a link carries (about 4 KB of typical log text fits whole
/// in a tenth of this).
pub const MAX_LINK_CHARS: usize = 12_000;
/// What every link's path starts with.
const PREFIX: &str = "/diagnose?p=";
/// Largest paste a link may unpack to. Deflate packs a repetitive log a
/// hundredfold, so without this bound a link of a few kilobytes would make the server
/// diagnose and show a mebibyte; a longer paste's link is condensed to fit.
const MAX_UNPACKED: usize = 64 * 1024;
/// Lines of context kept around each line the answer rests on.
const CONTEXT: usize = 3;

/// A link's paste, as the answer page shows it.
pub struct Link {
    /// `/diagnose?p=…`
    pub path: String,
    /// Lines kept and lines in the paste, when the link holds only part of it.
    pub condensed: Option<(usize, usize)>,
}

/// The share link's path for `text`, whole.
pub fn path(text: &str) -> String {
    format!("{PREFIX}{}", encode(text))
}

/// The packed paste of a share link's path (what follows `p=`).
pub fn packed(path: &str) -> &str {
    path.strip_prefix(PREFIX).unwrap_or(path)
}

/// The share link's path of a paste already packed.
pub fn packed_path(packed: &str) -> String {
    format!("{PREFIX}{packed}")
}

pub fn encode(text: &str) -> String {
    let mut encoder = DeflateEncoder::new(Vec::new(), Compression::best());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(text.as_bytes());
    let bytes = encoder.finish().unwrap_or_default();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The paste a link carries, or why it cannot be read.
pub fn decode(packed: &str) -> Result<String, String> {
    const DAMAGED: &str = "This share link is damaged: it was probably cut off when it was \
                           copied. Ask for the link again, or paste the log on the home page.";
    if packed.len() > 4 * MAX_UNPACKED {
        return Err(DAMAGED.into());
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(packed.trim().trim_end_matches('='))
        .map_err(|_| DAMAGED.to_string())?;
    let mut out = Vec::new();
    DeflateDecoder::new(bytes.as_slice())
        .take(MAX_UNPACKED as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| DAMAGED.to_string())?;
    if out.len() > MAX_UNPACKED {
        return Err(format!(
            "This share link unpacks to more than {MAX_UNPACKED} bytes, the most errbook reads."
        ));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The share link for `text`, whose diagnosis is `diagnosis`.
pub fn link(text: &str, diagnosis: &Diagnosis) -> Link {
    let whole = path(text);
    if whole.len() <= PREFIX.len() + MAX_LINK_CHARS && text.len() <= MAX_UNPACKED {
        return Link {
            path: whole,
            condensed: None,
        };
    }
    let paste = Paste::from_text(text);
    let total = text.lines().count();
    let mut budget = MAX_LINK_CHARS * 2;
    loop {
        let (kept, lines) = condense(&paste, diagnosis, budget);
        let short = path(&kept);
        if short.len() <= PREFIX.len() + MAX_LINK_CHARS || budget < 256 {
            return Link {
                path: short,
                condensed: Some((lines, total)),
            };
        }
        budget /= 2;
    }
}

/// The cleaned lines that matter most, in paste order, within `budget` bytes: the
/// evidence and root-cause lines, then error-looking lines, each with a little context,
/// then the end of the log.
fn condense(paste: &Paste, diagnosis: &Diagnosis, budget: usize) -> (String, usize) {
    let lines = &paste.lines;
    let wanted: Vec<usize> = diagnosis
        .matches
        .iter()
        .flat_map(|m| m.evidence.iter().map(|e| e.line))
        .chain(diagnosis.parsed.root_exception().map(|e| e.line))
        .collect();
    let mut order: Vec<usize> = Vec::with_capacity(lines.len());
    let by_number = |number: usize| lines.iter().position(|l| l.number == number);
    order.extend(wanted.iter().filter_map(|&n| by_number(n)));
    let anchors = order.clone();
    for &i in &anchors {
        order.extend(i.saturating_sub(CONTEXT)..(i + CONTEXT + 1).min(lines.len()));
    }
    order.extend((0..lines.len()).filter(|&i| looks_like_error(&lines[i].text)));
    order.extend((0..lines.len()).rev());

    let mut keep = vec![false; lines.len()];
    let mut used = 0;
    for i in order {
        if keep[i] {
            continue;
        }
        let cost = lines[i].text.len() + 1;
        if used + cost > budget {
            continue;
        }
        used += cost;
        keep[i] = true;
    }
    let mut out = String::with_capacity(used);
    let mut count = 0;
    for (line, _) in lines.iter().zip(&keep).filter(|(_, k)| **k) {
        out.push_str(&line.text);
        out.push('\n');
        count += 1;
    }
    (out, count)
}

/// Whether a search query is really a pasted log: then the reader wants a diagnosis,
/// not full-text hits for hundreds of words.
pub fn looks_like_paste(q: &str) -> bool {
    let lines = q.lines().filter(|l| !l.trim().is_empty()).count();
    q.contains("Traceback (most recent call last)")
        || (q.contains("File \"") && q.contains("\", line "))
        || (lines >= 3 && looks_like_error(q))
        || (q.len() > 300 && looks_like_error(q))
}

/// A paste that went through a one-line search box, which drops line breaks: the
/// breaks put back before the places a traceback always starts a line.
pub fn unflatten(q: &str) -> String {
    if q.lines().count() > 1 {
        return q.to_string();
    }
    let mut out = String::with_capacity(q.len() + 64);
    let markers = [
        "Traceback (most recent call last)",
        "File \"",
        "[rank",
        "During handling of the above exception",
        "The above exception was the direct cause",
    ];
    let mut rest = q;
    while !rest.is_empty() {
        // Never split before the first character: every marker is searched past it.
        let skip = rest.chars().next().map_or(0, char::len_utf8);
        let next = markers
            .iter()
            .filter_map(|m| rest[skip..].find(m).map(|i| i + skip))
            .min();
        match next {
            Some(i) => {
                out.push_str(rest[..i].trim_end());
                out.push('\n');
                rest = &rest[i..];
            }
            _ => {
                out.push_str(rest);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_round_trips_any_text() {
        for text in [
            "",
            "RuntimeError: boom\n",
            "显存不足\r\n\ttab",
            &"x".repeat(50_000),
        ] {
            assert_eq!(decode(&encode(text)).unwrap(), text);
        }
    }

    #[test]
    fn a_damaged_link_is_an_error_not_a_panic() {
        let packed = encode("Traceback (most recent call last):\n  boom\n");
        for bad in [&packed[..packed.len() / 2], "!!!", "AAAA", "%%"] {
            let err = decode(bad).unwrap_err();
            assert!(err.contains("damaged"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_link_never_unpacks_past_the_paste_limit() {
        let bomb = encode(&"0".repeat(MAX_UNPACKED + 10));
        assert!(bomb.len() < 5_000, "zeros compress well");
        assert!(decode(&bomb).unwrap_err().contains("more than"));
    }

    #[test]
    fn pastes_are_told_from_queries() {
        assert!(looks_like_paste(
            "Traceback (most recent call last):   File \"train.py\", line 3, in <module>"
        ));
        assert!(looks_like_paste(
            "[rank0]: x\n[rank0]: RuntimeError: NCCL error\n[rank1]: y"
        ));
        assert!(!looks_like_paste("ncclInvalidUsage"));
        assert!(!looks_like_paste("RuntimeError: CUDA out of memory"));
        assert!(!looks_like_paste("hangs at the end of the epoch"));
        assert!(!looks_like_paste("显存不均衡"));
    }

    #[test]
    fn line_breaks_come_back_before_traceback_lines() {
        let flat = "Traceback (most recent call last):   File \"a.py\", line 1, in <module>     \
                    f()   File \"b.py\", line 2, in f RuntimeError: boom";
        assert_eq!(
            unflatten(flat),
            "Traceback (most recent call last):\nFile \"a.py\", line 1, in <module>     f()\n\
             File \"b.py\", line 2, in f RuntimeError: boom"
        );
        assert_eq!(unflatten("a\nb"), "a\nb");
        assert_eq!(unflatten("plain words"), "plain words");
    }
}
