//! Search-side costs over the shipped kb: normalising a message, ranking an analysed
//! text, a full search with snippets (its answer cache emptied each time, so the work
//! is real), and building the index from the loaded entries.
//! Run: `cargo bench --bench search`.

use std::path::Path;
use std::sync::{Arc, LazyLock};

use errbook::diagnose::normalize;
use errbook::kb::Kb;
use errbook::search::{SearchIndex, SearchQuery};

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
        INDEX.search(&query).unwrap().len()
    });
}

/// A search answered from the cache: a query someone asked before.
#[divan::bench(args = QUERIES)]
fn search_repeated(query: &str) -> usize {
    INDEX
        .search(&SearchQuery::new(query, None, 10))
        .unwrap()
        .len()
}

/// Indexing the loaded entries: the main index and both phrase indexes.
#[divan::bench(sample_count = 20)]
fn index_build() -> SearchIndex {
    SearchIndex::build(KB.clone()).unwrap()
}
