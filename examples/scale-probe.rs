//! In-process timings over a (synthetic) knowledge base: load, index build, the
//! signature matcher, then rounds of searches and diagnoses that are each new (so no
//! answer comes from a cache; term scores do stay cached between rounds).
//!
//!     cargo run --release --example scale-probe -- DIR [ROUNDS]
//!
//! With `PROBE_STORE=DIR` the indexes are kept in (and, on later runs, opened from)
//! an index cache at DIR, as the server does.
//!
//! With `PROBE_GO=FILE` it waits after the build (indexes and signature matcher) until
//! FILE exists, so a profiler can attach to the queries alone (`perf record -p PID`;
//! the first round reads every term from the postings, later ones from the cache).
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use errbook::diagnose::Diagnoser;
use errbook::kb::Kb;
use errbook::search::{IndexStore, SearchIndex, SearchQuery};

/// The server's allocator, so that timings match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    let t = Instant::now();
    let kb = Kb::load(Path::new(&args[1])).unwrap();
    eprintln!("load {:?}", t.elapsed());
    let t = Instant::now();
    let store = std::env::var_os("PROBE_STORE").map(IndexStore::new);
    let index = Arc::new(SearchIndex::build_in(Arc::new(kb), store.as_ref()).unwrap());
    eprintln!("build {:?}", t.elapsed());
    let t = Instant::now();
    index.kb().signatures();
    eprintln!("signatures {:?}", t.elapsed());
    if let Ok(go) = std::env::var("PROBE_GO") {
        eprintln!("waiting for {go}");
        while !Path::new(&go).exists() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    let rounds: usize = args.get(2).map_or(3, |s| s.parse().unwrap());
    let queries: Vec<String> = std::fs::read_to_string("benches/load/queries.txt")
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let paste = std::fs::read_to_string("tests/browser/nccl-watchdog-timeout.log").unwrap();
    let d = Diagnoser::new(index.clone());
    // Like the load scripts' run token: each run's pastes and queries carry words no
    // entry holds and no earlier run used.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos() % 100_000_000);
    for round in 0..rounds {
        let mut times = Vec::new();
        for (i, q) in queries.iter().enumerate() {
            let q = format!("{q} n{run}t{round}x{i}");
            let t = Instant::now();
            index.search(&SearchQuery::new(&q, None, 10)).unwrap();
            times.push((t.elapsed().as_secs_f64() * 1e3, q));
        }
        times.sort_by(|a, b| a.0.total_cmp(&b.0));
        eprintln!(
            "search round {round}: median {:.2} ms, max {:.2} ms ({})",
            times[times.len() / 2].0,
            times.last().unwrap().0,
            times.last().unwrap().1
        );
        let mut dt = Vec::new();
        let mut ct = Vec::new();
        let mut st = Vec::new();
        for i in 0..8 {
            let text = format!("{paste}\nstep {run}t{round}x{i} done");
            let t = Instant::now();
            let cpu = thread_cpu_ms();
            d.diagnose_text(&text, 5).unwrap();
            ct.push(thread_cpu_ms() - cpu);
            dt.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            index.kb().signatures().matches(&text);
            st.push(t.elapsed().as_secs_f64() * 1e3);
        }
        dt.sort_by(f64::total_cmp);
        ct.sort_by(f64::total_cmp);
        st.sort_by(f64::total_cmp);
        eprintln!(
            "diagnose round {round}: median {:.2} ms, max {:.2} ms, CPU median {:.2} ms (signature matching alone: median {:.2} ms)",
            dt[4], dt[7], ct[4], st[4]
        );
    }
}

/// This thread's CPU time so far, in milliseconds.
fn thread_cpu_ms() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}
