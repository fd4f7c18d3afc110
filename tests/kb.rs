//! The shipped knowledge base: every catalog problem present, bilingual, self-testing,
//! and findable the way engineers search for it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use errbook::kb::{Entry, Kb};
use errbook::search::{SearchIndex, SearchQuery};

fn kb_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kb")
}

fn index() -> &'static SearchIndex {
    static INDEX: OnceLock<SearchIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        let kb = Kb::load(&kb_dir()).unwrap_or_else(|e| panic!("kb/ is invalid:\n{e}"));
        SearchIndex::build(Arc::new(kb)).unwrap()
    })
}

fn kb() -> &'static Kb {
    index().kb()
}

/// (slug, seed prefixes) from tests/catalog.tsv.
fn catalog() -> Vec<(String, Vec<String>)> {
    let text = include_str!("catalog.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (slug, seeds) = l.split_once('\t').expect("slug<TAB>seeds");
            let seeds = seeds
                .split(',')
                .filter(|s| *s != "-")
                .map(str::to_string)
                .collect();
            (slug.to_string(), seeds)
        })
        .collect()
}

fn has_cjk(s: &str) -> bool {
    s.chars().any(errbook::search::analysis::is_cjk)
}

#[test]
fn every_catalog_slug_has_an_entry() {
    let missing: Vec<_> = catalog()
        .into_iter()
        .filter(|(slug, _)| kb().get(slug).is_none())
        .map(|(slug, _)| slug)
        .collect();
    assert!(
        missing.is_empty(),
        "catalog slugs missing from kb/: {missing:?}"
    );
}

/// The catalog's own list (shipped beside the repository) must not have grown past ours.
#[test]
fn catalog_copy_is_current_when_the_shared_catalog_is_present() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/kb-catalog.md");
    let Ok(text) = std::fs::read_to_string(&shared) else {
        return;
    };
    let ours: Vec<String> = catalog().into_iter().map(|(s, _)| s).collect();
    for line in text.lines() {
        let Some(slug) = line
            .strip_prefix("| ")
            .and_then(|rest| rest.split(" |").next())
        else {
            continue;
        };
        let is_slug = !slug.is_empty()
            && slug != "slug"
            && slug
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if is_slug {
            assert!(
                ours.contains(&slug.to_string()),
                "tests/catalog.tsv lacks `{slug}`"
            );
        }
    }
}

#[test]
fn catalog_entries_cite_their_seed_documents() {
    for (slug, seeds) in catalog() {
        let Some(entry) = kb().get(&slug) else {
            continue;
        };
        for seed in seeds {
            assert!(
                entry
                    .sources
                    .iter()
                    .any(|s| s.contains(&format!("{seed}_")) && s.contains(".txt")),
                "{slug} does not cite seed {seed}: {:?}",
                entry.sources
            );
        }
    }
}

#[test]
fn the_knowledge_base_goes_beyond_the_catalog() {
    assert!(kb().len() >= 60, "only {} entries", kb().len());
}

fn check_entry(e: &Entry) -> Vec<String> {
    let mut problems = Vec::new();
    if !has_cjk(&e.title_zh) {
        problems.push("title_zh has no Chinese".to_string());
    }
    if !has_cjk(&e.summary_zh) {
        problems.push("summary_zh has no Chinese".to_string());
    }
    if !e.symptoms.iter().any(|s| has_cjk(s)) {
        problems.push("no Chinese symptom phrase".to_string());
    }
    if e.symptoms.iter().filter(|s| !has_cjk(s)).count() < 2 {
        problems.push("fewer than two English symptom phrases".to_string());
    }
    if e.examples.len() < 2 {
        problems.push(format!("{} example(s), want at least 2", e.examples.len()));
    }
    if e.sources.is_empty() {
        problems.push("no sources".to_string());
    }
    if !e.body.markdown.contains("```") {
        problems.push("body has no code block (error text, command or code)".to_string());
    }
    match &e.body_zh {
        None => problems.push("no Chinese body".to_string()),
        Some(zh) => {
            for line in untranslated(&zh.markdown) {
                problems.push(format!("Chinese body line reads as English: {line}"));
            }
        }
    }
    problems
}

/// Prose lines of a Chinese body (outside code blocks and inline code) that hold a run
/// of eight English words and no Chinese: a sentence left untranslated.
fn untranslated(markdown: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || has_cjk(line) {
            continue;
        }
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut run = 0;
        let mut longest = 0;
        for word in prose.split_whitespace() {
            if word
                .chars()
                .all(|c| c.is_ascii_alphabetic() || ",.;:'()".contains(c))
            {
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
        if longest >= 8 {
            found.push(line);
        }
    }
    found
}

#[test]
fn every_entry_is_bilingual_and_complete() {
    let mut report = Vec::new();
    for e in kb().entries() {
        for p in check_entry(e) {
            report.push(format!("{}: {p}", e.slug));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

fn first_hits(q: &str, n: usize) -> Vec<String> {
    index()
        .search(&SearchQuery::new(q, None, n))
        .unwrap()
        .hits
        .iter()
        .map(|h| h.slug.clone())
        .collect()
}

fn check_search(q: &str, expected: &str, within: usize) {
    let hits = first_hits(q, within);
    assert!(
        hits.iter().any(|h| h == expected),
        "{q:?} should find {expected} in the first {within}, got {hits:?}"
    );
}

#[test]
fn chinese_searches_land_on_their_entries() {
    // Uneven memory has two causes: both entries come first, the launcher decides.
    for slug in [
        "gpu0-extra-memory-torch-load",
        "dataparallel-gpu0-memory-imbalance",
    ] {
        check_search("显存不均衡", slug, 2);
    }
    check_search("DDP 显存不均衡", "gpu0-extra-memory-torch-load", 1);
    check_search(
        "DataParallel 显存不均衡",
        "dataparallel-gpu0-memory-imbalance",
        1,
    );
    check_search("全黑图", "black-images-fp16-vae", 1);
    check_search("显存不足", "cuda-out-of-memory", 1);
    check_search("多卡训练卡住", "hang-end-of-epoch-uneven-batches", 5);
    let nccl = first_hits("报错 NCCL", 3);
    assert!(
        nccl.iter()
            .all(|s| kb().get(s).unwrap().tags.iter().any(|t| t == "nccl")),
        "报错 NCCL -> {nccl:?}"
    );
}

#[test]
fn english_symptom_searches_land_on_their_entries() {
    check_search(
        "hangs at the end of the first epoch",
        "hang-end-of-epoch-uneven-batches",
        1,
    );
    check_search(
        "GPU 0 uses more memory than the others",
        "gpu0-extra-memory-torch-load",
        1,
    );
    check_search(
        "what is the difference between rank and local_rank",
        "ddp-concepts-rank-world-size",
        1,
    );
    check_search(
        "job dies when I close the ssh session",
        "sighup-signalexception",
        3,
    );
}

#[test]
fn error_strings_land_on_their_entries() {
    check_search("ncclInvalidUsage", "ncclinvalidusage-device-mismatch", 1);
    check_search(
        "Output 0 of SliceBackward0",
        "view-modified-inplace-torch-1-10",
        1,
    );
    check_search(
        "torch.distributed.DistBackendError Watchdog caught collective operation timeout",
        "nccl-watchdog-timeout",
        1,
    );
    check_search(
        "sampler option is mutually exclusive with shuffle",
        "distributed-sampler-shuffle-conflict",
        1,
    );
    check_search("Duplicate GPU detected", "nccl-duplicate-gpu-detected", 1);
    check_search(
        "environment variable RANK expected, but not set",
        "env-rank-not-set",
        1,
    );
}

#[test]
fn every_example_holds_its_own_signatures_only_and_every_regex_compiles() {
    let kb = Kb::load(&kb_dir()).unwrap();
    let problems: Vec<String> = kb
        .example_problems()
        .into_iter()
        .chain(kb.compile_regexes())
        .map(|p| p.to_string())
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_example_diagnoses_to_its_own_entry() {
    let diagnoser = errbook::diagnose::Diagnoser::new(Arc::new(
        SearchIndex::build(Arc::new(Kb::load(&kb_dir()).unwrap())).unwrap(),
    ));
    let problems = diagnoser.check_examples().unwrap();
    let report: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// A watchdog timeout where rank 3 stopped one collective short selects the "rank
/// behind" cause and names the rank and both sequence numbers in its fix.
#[test]
fn a_branch_is_chosen_by_the_paste_and_its_fix_speaks_of_it() {
    use errbook::diagnose::Diagnoser;
    use errbook::kb::Branch;

    let paste = "\
[rank0]:[E1104 09:42:17.318204512 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8190, OpType=ALLGATHER, NumelIn=1024, NumelOut=8192, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.
[rank5]:[E1104 09:42:18.002114870 ProcessGroupNCCL.cpp:1389] [PG 0 (default_pg) Rank 5] Received a dump signal due to a collective timeout from rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: 8189, last completed NCCL work: 8189.
";
    let kb = Kb::load(&kb_dir()).unwrap();
    let diagnoser = Diagnoser::new(Arc::new(SearchIndex::build(Arc::new(kb)).unwrap()));
    let d = diagnoser.diagnose_text(paste, 3).unwrap();
    let top = &d.matches[0];
    assert_eq!(top.slug, "nccl-watchdog-timeout");
    let chosen = top.branch.as_ref().expect("a branch");
    let entry = diagnoser.index().kb().get(&top.slug).unwrap();
    let branch = &entry.branches[chosen.index];
    assert_eq!(branch.id, "rank-behind");
    assert_eq!(chosen.lines, [2]);
    let fix = Branch::filled(&branch.fix, &chosen.values);
    assert!(
        fix.starts_with(
            "Rank 5 last enqueued collective 8189, while the ranks that timed out were \
             waiting in collective SeqNum 8190."
        ),
        "{fix}"
    );
}
