//! Fresh searches, in a loop, for counting instructions: the load scripts' 32 queries
//! (`benches/load/queries.txt`), each round adding a different word no entry holds, so
//! no answer comes from the cache (term scores stay cached, as in a running server).
//!
//!     cargo run --release --example search-loop -- ROUNDS [KB]
//!
//! `scripts/instructions.sh --search` runs it under valgrind, counting the instructions
//! of the rounds alone.
use std::path::Path;
use std::sync::Arc;

use errbook::kb::Kb;
use errbook::search::{SearchIndex, SearchQuery};

/// The server's allocator, so that the counts match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(rounds) = args.get(1).and_then(|n| n.parse::<usize>().ok()) else {
        eprintln!("usage: search-loop ROUNDS [KB]");
        std::process::exit(2);
    };
    let kb = args.get(2).map_or("kb", String::as_str);
    let queries: Vec<String> = std::fs::read_to_string("benches/load/queries.txt")
        .unwrap_or_else(|e| {
            eprintln!("cannot read benches/load/queries.txt: {e}");
            std::process::exit(1);
        })
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let kb = Kb::load(Path::new(kb)).unwrap_or_else(|e| {
        eprintln!("cannot load the kb: {e}");
        std::process::exit(1);
    });
    let index = SearchIndex::build(Arc::new(kb)).unwrap();
    // Term scores and dictionaries are loaded here, outside the rounds.
    for query in &queries {
        index.search(&SearchQuery::new(query, None, 10)).unwrap();
    }
    for round in 0..rounds {
        let round: Vec<SearchQuery> = queries
            .iter()
            .map(|q| SearchQuery::new(&format!("{q} n{round}"), None, 10))
            .collect();
        one_round(&index, &round);
    }
}

/// One new search of each query: what the script counts (callgrind collects inside
/// this function only, by its name).
#[inline(never)]
fn one_round(index: &SearchIndex, queries: &[SearchQuery]) {
    for query in queries {
        std::hint::black_box(index.search(query).unwrap());
    }
}
