#!/usr/bin/env bash
# Instructions one new diagnosis takes, counted by valgrind (apt: valgrind): exact and
# the same on a busy machine, where timings are not. Compare two commits with it.
#
#   scripts/instructions.sh [PASTE] [KB]
#   scripts/instructions.sh --search [KB]
#
# Runs examples/diagnose-loop.rs under callgrind, collecting inside its rounds only
# (the function `one_round`, found by name: the build keeps symbols, in the
# `profiling` profile, whose first build takes several minutes). Loading and indexing
# are left out: they run threads whose interleaving changes their count by millions.
# With --search it counts one new search instead (examples/search-loop.rs: the load
# scripts' 32 queries, each made new, ten hits with snippets), averaged over them.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt install valgrind)" >&2; exit 1; }
example=diagnose-loop what="new diagnosis" per=1
if [ "${1:-}" = --search ]; then
    shift
    example=search-loop what="new search" per=$(grep -c . benches/load/queries.txt)
fi
cargo build --profile profiling --example "$example" >&2
rounds=100
total=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null --collect-atstart=no \
        --toggle-collect="${example//-/_}::one_round" \
        "./target/profiling/examples/$example" "$rounds" "$@" 2>&1 |
        awk '/Collected :/ { print $NF }')
echo "instructions per $what: $((total / rounds / per))"
