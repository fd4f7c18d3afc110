//! Search-side costs over the shipped kb: normalising a message, ranking an analysed
//! text, a full search with snippets (its answer cache emptied each time, so the work
//! is real), analysing the entries' text, and building the index from them.
//! Run: `cargo bench --bench search`.

use std::path::Path;
use std::sync::{Arc, LazyLock};

use errbook::diagnose::normalize;
use errbook::kb::Kb;
use errbook::search::{SearchIndex, SearchQuery, analysis};
use tantivy::tokenizer::TokenStream;

/// The allocator the errbook binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    divan::main();
}

static KB: LazyLock<Arc<Kb>> = LazyLock::new(|| {
    Arc::new(Kb::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("kb")).expect("kb loads"))
});

static INDEX: LazyLock<SearchIndex> = LazyLock::new(|| {
    let index = SearchIndex::build(KB.clone()).unwrap();
    // The dictionary and the term cache warm, as on a running server.
    for q in QUERIES {
        index.search(&SearchQuery::new(q, None, 10)).unwrap();
    }
    index
});

const QUERIES: [&str; 4] = [
    "ncclInvalidUsage",
    "training hangs at the end of the epoch",
    "显存不均衡",
    "RuntimeError: Expected to have finished reduction in the prior iteration",
];

const MESSAGE: &str = "[rank3]:[E1104 09:42:17.318204512 ProcessGroupNCCL.cpp:607] [Rank 3] \
    Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5213, OpType=ALLREDUCE, \
    NumelIn=25557032, NumelOut=25557032, Timeout(ms)=600000) ran for 600047 milliseconds \
    before timing out. at 0x7f3a2c1d4e10 in /tmp/torchelastic_abc123/none_xyz/attempt_0";

#[divan::bench]
fn normalise() -> String {
    normalize(divan::black_box(MESSAGE))
}

#[divan::bench(args = QUERIES)]
fn rank(query: &str) -> usize {
    let analysed = INDEX.analyse(query);
    INDEX.rank(&analysed, 10).unwrap().len()
}

/// A search as the API runs it, snippets included, without the answer cache.
#[divan::bench(args = QUERIES)]
fn search(bencher: divan::Bencher, query: &str) {
    let query = SearchQuery::new(query, None, 10);
    bencher.bench(|| {
        INDEX.forget_answers();
        INDEX.search(&query).unwrap().hits.len()
    });
}

/// A search answered from the cache: a query someone asked before.
#[divan::bench(args = QUERIES)]
fn search_repeated(query: &str) -> usize {
    INDEX
        .search(&SearchQuery::new(query, None, 10))
        .unwrap()
        .hits
        .len()
}

/// Each analyzer over the text of every entry (title, summaries, symptoms, body and
/// examples), as indexing runs it: terms counted, not kept.
#[divan::bench(args = [analysis::WORDS, analysis::IDENT, analysis::GRAM])]
fn analyse(bencher: divan::Bencher, analyzer: &str) {
    let texts: Vec<&str> = KB
        .entries()
        .iter()
        .flat_map(|e| {
            [
                &e.title,
                &e.title_zh,
                &e.summary,
                &e.summary_zh,
                &e.body.text,
            ]
            .into_iter()
            .chain(&e.symptoms)
            .chain(&e.examples)
            .map(String::as_str)
        })
        .collect();
    let mut analyzer = match analyzer {
        analysis::WORDS => analysis::words_analyzer(),
        analysis::IDENT => analysis::ident_analyzer(),
        _ => analysis::gram_analyzer(),
    };
    analysis::warm_up();
    bencher
        .counter(divan::counter::BytesCount::new(
            texts.iter().map(|t| t.len()).sum::<usize>(),
        ))
        .bench_local(|| {
            let mut terms = 0;
            for text in &texts {
                let mut stream = analyzer.token_stream(text);
                while stream.advance() {
                    terms += 1;
                }
            }
            terms
        });
}

/// Indexing the loaded entries: the main index and both phrase indexes.
#[divan::bench(sample_count = 20)]
fn index_build() -> SearchIndex {
    SearchIndex::build(KB.clone()).unwrap()
}
