//! Diagnosis speed on realistic multi-rank logs of growing size, over the shipped kb.
//! Run: `cargo bench --bench diagnose`.

use std::path::Path;
use std::sync::{Arc, LazyLock};

use errbook::diagnose::{Diagnoser, Paste};
use errbook::kb::Kb;
use errbook::search::SearchIndex;

/// The allocator the errbook binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    divan::main();
}

static DIAGNOSER: LazyLock<Diagnoser> = LazyLock::new(|| {
    let kb = Kb::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("kb")).expect("kb loads");
    let diagnoser = Diagnoser::new(Arc::new(SearchIndex::build(Arc::new(kb)).unwrap()));
    // Warm up the lazily loaded dictionary and caches outside the measurement.
    diagnoser
        .diagnose_text("warm up 显存 ncclInvalidUsage", 3)
        .unwrap();
    diagnoser
});

/// A 300-line multi-rank log per unit: NCCL chatter, training progress, warnings, and
/// a watchdog timeout reported by four ranks; `units` copies with varied numbers.
fn log(units: usize) -> String {
    let mut out = String::new();
    for u in 0..units {
        for rank in 0..4 {
            for ch in 0..10 {
                out.push_str(&format!(
                    "gpu-node{u}:{}:{} [{rank}] NCCL INFO Channel {ch:02}/0 : {rank}[{rank}] -> {}[{}] via P2P/IPC\n",
                    2000 + rank, 2100 + ch, (rank + 1) % 4, (rank + 1) % 4
                ));
            }
        }
        for step in 0..200 {
            out.push_str(&format!(
                "[2024-11-04 09:{:02}:{:02}] epoch {u} step {step}/1563 loss {:.4} lr 2.7e-05 grad_norm {:.3}\n",
                step / 60 % 60,
                step % 60,
                2.0 / (step + 1) as f64,
                0.5 + step as f64 / 1000.0
            ));
        }
        for rank in 0..4 {
            out.push_str(&format!("[rank{rank}]:[W1104 09:31:55.1{u}] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters in the forward pass.\n"));
        }
        for rank in 0..4 {
            out.push_str(&format!(
                "[rank{rank}]:[E1104 09:42:17.3182 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={}, OpType=ALLREDUCE, NumelIn=25557032, NumelOut=25557032, Timeout(ms)=600000) ran for {} milliseconds before timing out.\n",
                5213 + u, 600047 + rank
            ));
            for line in [
                "Traceback (most recent call last):",
                "  File \"/work/train.py\", line 402, in <module>",
                "    main()",
                "  File \"/work/train.py\", line 361, in main",
                "    loss.backward()",
                "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0.",
            ] {
                out.push_str(&format!("[rank{rank}]: {line}\n"));
            }
        }
        while out.lines().count() < 300 * (u + 1) {
            out.push_str("[rank0]: Exception raised from run at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1664 (most recent call first):\n");
        }
    }
    out
}

/// The whole diagnosis of a 300-line log (1 unit), 3,000 (10) and 30,000 (100).
#[divan::bench(args = [1, 10, 100])]
fn diagnose(bencher: divan::Bencher, units: usize) {
    let text = log(units);
    let diagnoser = &*DIAGNOSER;
    bencher
        .counter(divan::counter::BytesCount::of_str(&text))
        .bench(|| {
            diagnoser
                .diagnose(&Paste::from_text(divan::black_box(&text)), 5)
                .unwrap()
        });
}

/// The same with the term-score cache emptied before each run: the cost of a paste
/// whose every word is new to a freshly started server.
#[divan::bench(args = [1, 10])]
fn diagnose_cold(bencher: divan::Bencher, units: usize) {
    let text = log(units);
    let diagnoser = &*DIAGNOSER;
    bencher
        .counter(divan::counter::BytesCount::of_str(&text))
        .bench(|| {
            diagnoser.index().clear_cache();
            diagnoser
                .diagnose(&Paste::from_text(divan::black_box(&text)), 5)
                .unwrap()
        });
}

/// Cleaning alone: prefixes, wrapping, deduplication.
#[divan::bench(args = [1, 10, 100])]
fn parse(bencher: divan::Bencher, units: usize) {
    let text = log(units);
    bencher.bench(|| Paste::from_text(divan::black_box(&text)));
}

/// The 4 KB torchrun/NCCL paste the HTTP load test posts: the per-request cost of
/// diagnosis without HTTP and JSON, first each time afresh, then answered from the
/// cache of recent pastes.
#[divan::bench(args = [false, true])]
fn real_paste(bencher: divan::Bencher, repeated: bool) {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/nccl-watchdog-timeout.log"),
    )
    .unwrap();
    let diagnoser = &*DIAGNOSER;
    if repeated {
        bencher.bench(|| diagnoser.diagnose_text(divan::black_box(&text), 5).unwrap());
    } else {
        bencher.bench(|| {
            diagnoser
                .diagnose(&Paste::from_text(divan::black_box(&text)), 5)
                .unwrap()
        });
    }
}
