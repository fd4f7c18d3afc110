//! `errbook eval DIR`: diagnosis scored against labelled pastes, side by side with a
//! plain full-text baseline (the raw paste as a search query over the same entries).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use errbook::diagnose::{Diagnoser, Verdict};
use errbook::kb::Kb;
use errbook::search::{SearchIndex, SearchQuery};

struct Case {
    file: String,
    expected: Vec<String>,
    kind: String,
    /// `en` or `zh`: the manifest's fifth column, or whether the paste has Chinese.
    lang: Option<String>,
}

#[derive(Default, Clone, Copy)]
struct Score {
    cases: usize,
    top1: usize,
    top3: usize,
    reciprocal: f64,
    none_cases: usize,
    none_rejected: usize,
    /// Uncovered cases not answered `matched` (`possible` or `no_match`).
    none_unmatched: usize,
}

/// What one answer was: its ranked slugs, whether it was `no_match`, and whether
/// `matched`.
struct Answer<'a> {
    ranked: &'a [String],
    rejected: bool,
    matched: bool,
}

impl Score {
    fn add(&mut self, expected: &[String], answer: &Answer) {
        let Answer {
            ranked,
            rejected,
            matched,
        } = *answer;
        if expected.iter().any(|e| e == "none") {
            self.none_cases += 1;
            self.none_rejected += usize::from(rejected);
            self.none_unmatched += usize::from(!matched);
            return;
        }
        self.cases += 1;
        if let Some(pos) = ranked.iter().position(|s| expected.contains(s)) {
            if pos == 0 {
                self.top1 += 1;
            }
            if pos < 3 {
                self.top3 += 1;
            }
            self.reciprocal += 1.0 / (pos as f64 + 1.0);
        }
    }

    fn row(&self) -> String {
        let share = |n: usize, d: usize| {
            if d == 0 {
                "-".to_string()
            } else {
                format!("{:.3}", n as f64 / d as f64)
            }
        };
        format!(
            "top-1 {}  top-3 {}  MRR {}  none->no_match {} ({} of {}), not matched {}",
            share(self.top1, self.cases),
            share(self.top3, self.cases),
            if self.cases == 0 {
                "-".into()
            } else {
                format!("{:.3}", self.reciprocal / self.cases as f64)
            },
            share(self.none_rejected, self.none_cases),
            self.none_rejected,
            self.none_cases,
            self.none_unmatched
        )
    }
}

/// How often each kind of answer was right: by verdict and the top match's
/// confidence, (answers, right ones). An answer is right when its top match is one
/// of the expected entries; `no_match` is right when none was expected.
#[derive(Default)]
struct Reliability(BTreeMap<(&'static str, &'static str), (usize, usize)>);

impl Reliability {
    fn add(&mut self, verdict: &'static str, confidence: &'static str, right: bool) {
        let cell = self.0.entry((verdict, confidence)).or_default();
        cell.0 += 1;
        cell.1 += usize::from(right);
    }

    fn print(&self) {
        say!("reliability (verdict, confidence: answers, right, share right):");
        for ((verdict, confidence), (n, right)) in &self.0 {
            say!(
                "  {verdict:<9} {confidence:<7} {n:>4} {right:>4}  {:.3}",
                *right as f64 / *n as f64
            );
        }
    }
}

pub fn run(kb: Kb, dir: &Path, verbose: bool) -> anyhow::Result<ExitCode> {
    let manifest = dir.join("manifest.tsv");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 {
            anyhow::bail!(
                "{}:{}: expected columns file, expected, kind, source",
                manifest.display(),
                n + 1
            );
        }
        cases.push(Case {
            file: cols[0].to_string(),
            expected: cols[1].split(',').map(|s| s.trim().to_string()).collect(),
            kind: cols[2].to_string(),
            lang: cols.get(4).map(|l| l.trim().to_string()),
        });
    }

    let index = Arc::new(SearchIndex::build(Arc::new(kb))?);
    let diagnoser = Diagnoser::new(index.clone());

    let mut ours = Score::default();
    let mut baseline = Score::default();
    let mut by_kind: BTreeMap<String, (Score, Score)> = BTreeMap::new();
    let mut by_lang: BTreeMap<String, (Score, Score)> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut reliability = Reliability::default();
    for case in &cases {
        let path = dir.join(&case.file);
        let paste =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let paste = String::from_utf8_lossy(&paste);
        let d = diagnoser.diagnose_text(&paste, 5)?;
        let ranked: Vec<String> = d.matches.iter().map(|m| m.slug.clone()).collect();
        let rejected = d.verdict == Verdict::NoMatch;
        let plain: Vec<String> = index
            .search(&SearchQuery::new(&paste, None, 5))?
            .hits
            .iter()
            .map(|h| h.slug.clone())
            .collect();
        let answer = Answer {
            ranked: &ranked,
            rejected,
            matched: d.verdict == Verdict::Matched,
        };
        // Plain search has no verdicts: any hit counts as an answer.
        let plain_answer = Answer {
            ranked: &plain,
            rejected: plain.is_empty(),
            matched: !plain.is_empty(),
        };
        let lang = case.lang.clone().unwrap_or_else(|| {
            let chinese = paste
                .chars()
                .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
            if chinese { "zh" } else { "en" }.to_string()
        });
        for (score, plain_score) in [
            (&mut ours, &mut baseline),
            {
                let k = by_kind.entry(case.kind.clone()).or_default();
                (&mut k.0, &mut k.1)
            },
            {
                let l = by_lang.entry(lang).or_default();
                (&mut l.0, &mut l.1)
            },
        ] {
            score.add(&case.expected, &answer);
            plain_score.add(&case.expected, &plain_answer);
        }

        if verbose {
            let top = d.matches.first();
            say!(
                "{:<50} {:<10} top {:<40} confidence {:<6} coverage {:.2}  signature {}",
                case.file,
                case.kind,
                top.map_or("no_match", |m| m.slug.as_str()),
                top.map_or("-", |m| m.confidence.as_str()),
                top.map_or(0.0, |m| m.coverage),
                top.is_some_and(|m| m.evidence.iter().any(|e| e.signature.is_some()))
            );
        }
        let none = case.expected.iter().any(|e| e == "none");
        let right = if none {
            rejected
        } else {
            ranked.first().is_some_and(|s| case.expected.contains(s))
        };
        reliability.add(
            d.verdict.as_str(),
            d.matches.first().map_or("-", |m| m.confidence.as_str()),
            right,
        );
        if !right {
            let got = if rejected {
                format!(
                    "no_match (closest {})",
                    d.closest.first().map_or("-", |h| h.slug.as_str())
                )
            } else {
                let m = &d.matches[0];
                format!("{} ({}, {:.1})", m.slug, m.confidence.as_str(), m.score)
            };
            misses.push(format!(
                "  {}  expected {}  got {}",
                case.file,
                case.expected.join("|"),
                got
            ));
        }
    }

    say!("{} cases from {}", cases.len(), manifest.display());
    say!("errbook diagnose : {}", ours.row());
    say!("full-text only   : {}", baseline.row());
    print_groups("kind", &by_kind);
    print_groups("language", &by_lang);
    let covered = ours.cases as f64 / (ours.cases + ours.none_cases).max(1) as f64;
    say!(
        "coverage: {} of {} cases have an answering entry ({covered:.3})",
        ours.cases,
        ours.cases + ours.none_cases
    );
    reliability.print();
    if misses.is_empty() {
        say!("misses: none");
    } else {
        say!("misses ({}):", misses.len());
        for m in &misses {
            say!("{m}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Scores by group (kind, language), diagnosis beside plain full-text search.
fn print_groups(by: &str, groups: &BTreeMap<String, (Score, Score)>) {
    say!("by {by} (diagnose | full-text):");
    for (name, (a, b)) in groups {
        say!(
            "  {name:<10} {} cases: {} | {}",
            a.cases + a.none_cases,
            a.row(),
            b.row()
        );
    }
}
