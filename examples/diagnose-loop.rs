//! Fresh diagnoses of one paste, in a loop, for counting instructions: each round
//! appends a different line, so no answer comes from a cache.
//!
//!     cargo run --release --example diagnose-loop -- ROUNDS [PASTE] [KB]
//!
//! `scripts/instructions.sh` runs it under valgrind, counting the instructions of the
//! rounds alone: what one new diagnosis takes, which, unlike a time, does not depend on
//! what else the machine runs.
use std::path::Path;
use std::sync::Arc;

use errbook::diagnose::{Diagnoser, Paste};
use errbook::kb::Kb;
use errbook::search::SearchIndex;

/// The server's allocator, so that the counts match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(rounds) = args.get(1).and_then(|n| n.parse::<usize>().ok()) else {
        eprintln!("usage: diagnose-loop ROUNDS [PASTE] [KB]");
        std::process::exit(2);
    };
    let paste = args
        .get(2)
        .map_or("tests/browser/nccl-watchdog-timeout.log", String::as_str);
    let kb = args.get(3).map_or("kb", String::as_str);
    let text = std::fs::read_to_string(paste).unwrap_or_else(|e| {
        eprintln!("cannot read {paste}: {e}");
        std::process::exit(1);
    });
    let kb = Kb::load(Path::new(kb)).unwrap_or_else(|e| {
        eprintln!("cannot load the kb: {e}");
        std::process::exit(1);
    });
    let diagnoser = Diagnoser::new(Arc::new(SearchIndex::build(Arc::new(kb)).unwrap()));
    // Lazily built matchers and dictionaries are built here, outside the rounds.
    diagnoser
        .diagnose_text("warm up 显存 ncclInvalidUsage", 3)
        .unwrap();
    diagnoser.diagnose(&Paste::from_text(&text), 5).unwrap();
    for round in 0..rounds {
        one_round(&diagnoser, &format!("{text}\nstep {round} done"));
    }
}

/// One new diagnosis, from reading the paste to the answer: what the script counts
/// (callgrind collects inside this function only, by its name).
#[inline(never)]
fn one_round(diagnoser: &Diagnoser, text: &str) {
    std::hint::black_box(diagnoser.diagnose(&Paste::from_text(text), 5).unwrap());
}
