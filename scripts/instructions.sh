#!/usr/bin/env bash
# Instructions one new diagnosis takes, counted by valgrind (apt: valgrind): exact and
# the same on a busy machine, where timings are not. Compare two commits with it.
#
#   scripts/instructions.sh [PASTE] [KB]
#
# Runs examples/diagnose-loop.rs with 20 and with 120 rounds; the difference over 100
# leaves out loading and indexing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt install valgrind)" >&2; exit 1; }
cargo build --release --example diagnose-loop >&2
count() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        ./target/release/examples/diagnose-loop "$1" "${@:2}" 2>&1 |
        awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
}
low=$(count 20 "$@")
high=$(count 120 "$@")
echo "instructions per new diagnosis: $(((high - low) / 100))"
