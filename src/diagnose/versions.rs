//! The releases a paste shows, held against the releases entries say a problem
//! affects: "your NCCL 2.19.3 is affected; fixed in 2.19.4".

use crate::kb::{Entry, Kb};

/// A release the paste shows of a package one of an entry's ranges names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionCheck {
    pub package: &'static str,
    /// The version as the paste shows it.
    pub found: String,
    /// The entry's range, as written.
    pub range: String,
    pub fixed: Option<String>,
    /// Whether the range holds `found`.
    pub affected: bool,
}

/// The paste's versions (`parse` writes them `"<package> <version>"`) as pairs.
fn shown(versions: &[String]) -> impl Iterator<Item = (&str, &str)> {
    versions.iter().filter_map(|v| v.split_once(' '))
}

/// What `entry`'s ranges say of the releases in `versions`, affected ones first.
pub fn checks(entry: &Entry, versions: &[String]) -> Vec<VersionCheck> {
    let mut out: Vec<VersionCheck> = Vec::new();
    for range in &entry.versions {
        for (package, found) in shown(versions) {
            let Some(affected) = range.affects(package, found) else {
                continue;
            };
            if out
                .iter()
                .any(|c| c.package == range.package && c.found == found)
            {
                continue;
            }
            out.push(VersionCheck {
                package: range.package,
                found: found.to_string(),
                range: range.range.clone(),
                fixed: range.fixed.clone(),
                affected,
            });
        }
    }
    out.sort_by_key(|c| !c.affected);
    out
}

/// Entries (positions in `kb`) whose ranges hold a release the paste shows, ascending.
pub fn named_by_versions(kb: &Kb, versions: &[String]) -> Vec<usize> {
    if versions.is_empty() {
        return Vec::new();
    }
    (kb.entries().iter().enumerate())
        .filter(|(_, e)| {
            e.versions.iter().any(|range| {
                shown(versions).any(|(package, found)| range.affects(package, found) == Some(true))
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// How a check reads, in each language: an affected release with a fix, one
/// without a fix, and a release outside the range.
const SENTENCES: [&str; 3] = [
    "your {package} {found} is affected ({range}); fixed in {fixed}",
    "your {package} {found} is affected ({range})",
    "your {package} {found} is outside the affected releases ({range}): this may not be your problem",
];
const SENTENCES_ZH: [&str; 3] = [
    "你的 {package} {found} 在受影响的版本内（{range}），{fixed} 已修复",
    "你的 {package} {found} 在受影响的版本内（{range}）",
    "你的 {package} {found} 不在受影响的版本内（{range}），这可能不是你遇到的问题",
];

impl VersionCheck {
    /// The check in a sentence: "your NCCL 2.19.3 is affected (>=2.19.0, <2.19.4);
    /// fixed in 2.19.4".
    pub fn sentence(&self) -> String {
        self.written(&SENTENCES)
    }

    pub fn sentence_zh(&self) -> String {
        self.written(&SENTENCES_ZH)
    }

    fn written(&self, sentences: &[&str; 3]) -> String {
        let template = match (&self.fixed, self.affected) {
            (Some(_), true) => sentences[0],
            (None, true) => sentences[1],
            (_, false) => sentences[2],
        };
        template
            .replace("{package}", self.package)
            .replace("{found}", &self.found)
            .replace("{range}", &self.range)
            .replace("{fixed}", self.fixed.as_deref().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::Entry;
    use std::path::Path;

    fn entry(versions: &str) -> Entry {
        let text = format!(
            "---\nslug: e\ntitle: t\ntitle_zh: t\nsummary: s\nsummary_zh: s\ntags: [x]\n\
             signatures: [\"boom\"]\nsymptoms: [\"it breaks\"]\nversions:\n{versions}---\n\
             ## Symptom\nx\n## Cause\nx\n## Fix\nx\n## Verify\nx\n"
        );
        Entry::from_file_text(Path::new("e.md"), &text).unwrap()
    }

    #[test]
    fn a_paste_release_inside_the_range_is_affected_and_says_the_fix() {
        let e = entry("  - {package: NCCL, affected: '>=2.19.0, <2.19.4', fixed: '2.19.4'}\n");
        let shown = ["torch 2.2.0".to_string(), "NCCL 2.19.3".to_string()];
        let c = checks(&e, &shown);
        assert_eq!(c.len(), 1);
        assert!(c[0].affected);
        assert_eq!(
            c[0].sentence(),
            "your NCCL 2.19.3 is affected (>=2.19.0, <2.19.4); fixed in 2.19.4"
        );
        let c = checks(&e, &["NCCL 2.20.3".to_string()]);
        assert!(!c[0].affected);
        assert!(c[0].sentence().contains("outside the affected releases"));
        assert!(checks(&e, &["torch 2.19.3".to_string()]).is_empty());
    }

    #[test]
    fn bad_ranges_are_reported_at_their_line() {
        let text = "---\nslug: e\ntitle: t\ntitle_zh: t\nsummary: s\nsummary_zh: s\ntags: [x]\n\
             signatures: [\"boom\"]\nsymptoms: [\"it breaks\"]\nversions:\n\
             \x20 - {package: tensorflow, affected: '>=2'}\n\
             \x20 - {package: torch, affected: 'soon'}\n---\n\
             ## Symptom\nx\n## Cause\nx\n## Fix\nx\n## Verify\nx\n";
        let problems = Entry::from_file_text(Path::new("e.md"), text).unwrap_err();
        let lines: Vec<_> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [Some(11), Some(12)], "{problems:?}");
        assert!(problems[0].message.contains("unknown package"));
        assert!(problems[1].message.contains("does not parse"));
    }
}
