//! Which of an entry's branches (causes of the same symptom) a paste selects, the
//! paste lines that selected it, and the values its fix names.

use memchr::memmem;

use super::triage::Triage;

use crate::kb::{Entry, Kb, Matcher, SignatureKind};

/// The branch a paste selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenBranch {
    /// Index into the entry's `branches`.
    pub index: usize,
    /// 1-based paste lines that selected it.
    pub lines: Vec<usize>,
    /// (placeholder name, value) from the paste, for `Branch::filled`.
    pub values: Vec<(String, String)>,
}

/// Entries (positions in `kb`) one of whose branches names a signal the paste's
/// process died of, ascending. A plain exit code (1: "it raised") names no cause.
pub fn named_by_exits(kb: &Kb, triage: &Triage) -> Vec<usize> {
    if triage.exits.iter().all(|e| e.signal.is_none()) {
        return Vec::new();
    }
    (kb.entries().iter().enumerate())
        .filter(|(_, e)| {
            e.branches.iter().any(|b| {
                b.exits.iter().any(|spec| {
                    (triage.exits.iter())
                        .filter(|e| e.signal.is_some())
                        .any(|exit| spec.names(exit.code, exit.signal))
                })
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// The first of `entry`'s branches that `text` (the paste's lines joined, each starting
/// at `starts`, numbered `numbers`) selects by a `when` fragment, or by an exit or a
/// fact (`behind`, `behind_seq`) the triage found.
pub fn choose(
    entry: &Entry,
    text: &str,
    starts: &[usize],
    numbers: &[usize],
    triage: &Triage,
) -> Option<ChosenBranch> {
    let line_at = |at: usize| numbers[starts.partition_point(|&s| s <= at) - 1];
    for (index, branch) in entry.branches.iter().enumerate() {
        let mut lines = Vec::new();
        let mut values = Vec::new();
        for when in &branch.when {
            match when {
                SignatureKind::Literal(fragment) => {
                    if let Some(at) = memmem::find(text.as_bytes(), fragment.as_bytes()) {
                        lines.push(line_at(at));
                    }
                }
                SignatureKind::Regex(re) => {
                    let Ok(re) = re.compiled() else { continue };
                    if let Some(at) = capture(re, text, &mut values) {
                        lines.push(line_at(at));
                    }
                }
            }
        }
        for exit in &triage.exits {
            if branch
                .exits
                .iter()
                .any(|spec| spec.names(exit.code, exit.signal))
            {
                lines.push(exit.line);
            }
        }
        if let Some(behind) = &triage.behind
            && (branch.facts.iter())
                .any(|f| f == "behind" || (f == "behind_seq" && behind.seq.is_some()))
        {
            lines.push(behind.line);
        }
        if lines.is_empty() {
            continue;
        }
        lines.sort_unstable();
        lines.dedup();
        for re in &branch.values {
            let Ok(re) = re.compiled() else { continue };
            capture(re, text, &mut values);
        }
        if let Some(rank) = triage.first_failure.as_ref().and_then(|f| f.rank) {
            values.push(("rank".into(), rank.to_string()));
        }
        if let Some(behind) = &triage.behind {
            values.push(("behind".into(), behind.ranks_text()));
            if let Some((last, waited)) = behind.seq {
                values.push(("behind_seq".into(), last.to_string()));
                values.push(("waiting_seq".into(), waited.to_string()));
            }
        }
        if let Some(exit) = triage.exits.first() {
            values.push(("exit_code".into(), exit.code.to_string()));
            if let Some(signal) = exit.signal {
                values.push(("signal".into(), signal.to_string()));
            }
        }
        return Some(ChosenBranch {
            index,
            lines,
            values,
        });
    }
    None
}

/// Where `re` first matches `text`, with each named group it captured added to
/// `values` (the first value of a name wins).
fn capture(re: &Matcher, text: &str, values: &mut Vec<(String, String)>) -> Option<usize> {
    let found = re.captures(text)?;
    for (name, value) in found.groups {
        if !values.iter().any(|(n, _)| *n == name) {
            values.push((name, value));
        }
    }
    Some(found.start)
}
