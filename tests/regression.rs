//! The answers errbook gives, pinned: every example paste of the shipped entries, the
//! labelled real pastes beside the repository (`../shared/eval/dev`) and the pastes in
//! `tests/pastes/` are diagnosed, and each one's verdict, top three (with confidence)
//! and evidence lines are compared with `tests/pastes/snapshots.tsv`. A change to
//! ranking shows here as a diff to explain.
//!
//! Bless a change with `ERRBOOK_BLESS=1 cargo test --test regression`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use errbook::diagnose::{Diagnoser, Diagnosis};
use errbook::kb::Kb;
use errbook::search::SearchIndex;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (case id, paste text) for every paste of the corpus, in a fixed order.
fn corpus(kb: &Kb) -> Vec<(String, String)> {
    let mut cases = Vec::new();
    for entry in kb.entries() {
        for (n, example) in entry.examples.iter().enumerate() {
            cases.push((format!("kb/{}#{}", entry.slug, n + 1), example.clone()));
        }
    }
    let mut add_folder = |prefix: &str, dir: &Path| {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|f| f.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .collect();
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
            cases.push((format!("{prefix}/{name}"), text));
        }
    };
    add_folder("pastes", &root().join("tests/pastes"));
    let dev = root().join("../shared/eval/dev");
    if dev.join("manifest.tsv").exists() {
        add_folder("dev", &dev);
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{} is missing; under CI=true the regression corpus must be whole",
            dev.display()
        );
        eprintln!("{} not present: its pastes are left out", dev.display());
    }
    cases
}

/// One line of the snapshot: verdict, the top three as `slug:confidence`, and the
/// evidence lines of each as `line:kind`.
fn describe(d: &Diagnosis) -> String {
    let mut out = format!("{:?}", d.verdict);
    for m in d.matches.iter().take(3) {
        write!(out, "\t{}:{}", m.slug, m.confidence.as_str()).unwrap();
        let lines: Vec<String> = m
            .evidence
            .iter()
            .map(|e| format!("{}:{:?}", e.line, e.kind))
            .collect();
        write!(out, " [{}]", lines.join(" ")).unwrap();
    }
    out
}

#[test]
fn every_paste_of_the_corpus_is_answered_as_pinned() {
    let kb = Kb::load(&root().join("kb")).unwrap();
    let cases = corpus(&kb);
    let diagnoser = Diagnoser::new(Arc::new(SearchIndex::build(Arc::new(kb)).unwrap()));
    let snapshot_path = root().join("tests/pastes/snapshots.tsv");
    let mut now = String::new();
    for (id, text) in &cases {
        let d = diagnoser.diagnose_text(text, 5).unwrap();
        writeln!(now, "{id}\t{}", describe(&d)).unwrap();
    }
    if std::env::var_os("ERRBOOK_BLESS").is_some() {
        std::fs::write(&snapshot_path, &now).unwrap();
        return;
    }
    let pinned = std::fs::read_to_string(&snapshot_path).unwrap_or_default();
    let pinned: std::collections::HashMap<&str, &str> =
        pinned.lines().filter_map(|l| l.split_once('\t')).collect();
    let mut differences = Vec::new();
    for line in now.lines() {
        let (id, answer) = line.split_once('\t').unwrap();
        match pinned.get(id) {
            Some(was) if *was == answer => {}
            Some(was) => differences.push(format!("{id}\n  was: {was}\n  now: {answer}")),
            None => differences.push(format!("{id}\n  new: {answer}")),
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} answers differ from tests/pastes/snapshots.tsv (bless with \
         ERRBOOK_BLESS=1 once each is explained):\n{}",
        differences.len(),
        cases.len(),
        differences.join("\n")
    );
}
