//! Splitting a file into YAML front matter and Markdown body, and the raw, serde-shaped
//! front matter before validation turns it into an `Entry`.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// The front matter exactly as authors write it. Unknown fields are rejected so that a
/// misspelt key is an error rather than silently ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FrontMatter {
    pub slug: Spanned<String>,
    pub title: Spanned<String>,
    pub title_zh: Spanned<String>,
    pub summary: Spanned<String>,
    pub summary_zh: Spanned<String>,
    pub tags: Vec<Spanned<String>>,
    pub signatures: Vec<Spanned<SignatureSpec>>,
    pub symptoms: Vec<Spanned<String>>,
    #[serde(default)]
    pub examples: Vec<Spanned<String>>,
    #[serde(default)]
    pub related: Vec<Spanned<String>>,
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default)]
    pub branches: Vec<Spanned<BranchSpec>>,
    #[serde(default)]
    pub versions: Vec<Spanned<VersionSpec>>,
}

/// Releases of one package the problem affects, and the one that fixes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct VersionSpec {
    pub package: String,
    /// A PEP 440 range: `>=2.19.0, <2.19.4`.
    pub affected: String,
    #[serde(default)]
    pub fixed: Option<String>,
}

/// One cause of the entry's symptom: what in a paste selects it, and its own fix.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BranchSpec {
    pub id: String,
    pub title: String,
    pub title_zh: String,
    /// Fragments or regexes (as signatures) any of which in the paste selects the
    /// branch; a regex's named groups fill the fix's `{name|...}` placeholders.
    #[serde(default)]
    pub when: Vec<SignatureSpec>,
    /// Exit codes (`-9`, `137`) or signal names (`SIGKILL`) that select the branch.
    #[serde(default)]
    pub exits: Vec<String>,
    /// Facts of the triage that select the branch when the paste shows them (`behind`).
    #[serde(default)]
    pub facts: Vec<String>,
    /// Regexes that only fill placeholders from the paste (their named groups), once
    /// the branch is selected.
    #[serde(default)]
    pub values: Vec<String>,
    pub fix: String,
    pub fix_zh: String,
}

/// A signature is a literal fragment, `{literal: '...'}` or `{regex: '...'}`; the
/// mapping forms may add `weak: true`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum SignatureSpec {
    Literal(String),
    Pattern(RegexSpec),
    Fragment(LiteralSpec),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RegexSpec {
    pub regex: String,
    #[serde(default)]
    pub weak: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LiteralSpec {
    pub literal: String,
    #[serde(default)]
    pub weak: bool,
}

/// A file cut in two: the YAML between the `---` fences and the Markdown after them.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Split<'a> {
    pub yaml: &'a str,
    /// 1-based line of the file on which the YAML starts.
    pub yaml_line: usize,
    pub body: &'a str,
    /// 1-based line of the file on which the body starts.
    pub body_line: usize,
}

/// Cuts `text` at its front matter fences. The error says what is wrong with the fences.
pub(super) fn split(text: &str) -> Result<Split<'_>, &'static str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err("file must start with a `---` line opening the YAML front matter");
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    for (index, line) in lines.enumerate() {
        if line.trim_end() == "---" {
            return Ok(Split {
                yaml: &text[yaml_start..offset],
                yaml_line: 2,
                body: &text[offset + line.len()..],
                body_line: index + 3,
            });
        }
        offset += line.len();
    }
    Err("front matter is not closed: add a `---` line after it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_yaml_and_body_with_line_numbers() {
        let s = split("---\na: 1\nb: 2\n---\n\n## Symptom\n").unwrap();
        assert_eq!(s.yaml, "a: 1\nb: 2\n");
        assert_eq!(s.yaml_line, 2);
        assert_eq!(s.body, "\n## Symptom\n");
        assert_eq!(s.body_line, 5);
    }

    #[test]
    fn accepts_crlf_and_bom() {
        let s = split("\u{feff}---\r\na: 1\r\n---\r\nbody").unwrap();
        assert_eq!(s.yaml, "a: 1\r\n");
        assert_eq!(s.body, "body");
    }

    #[test]
    fn rejects_missing_fences() {
        assert!(split("# just markdown\n").is_err());
        assert!(split("---\na: 1\n").is_err());
    }
}
