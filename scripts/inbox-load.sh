#!/usr/bin/env bash
# The inbox's store under load: answers' latency with capture off and on (SQLite, and
# PostgreSQL when a URL is given), and the writes per second the store takes.
#
#   scripts/inbox-load.sh [--postgres URL] [--duration 10s] [--connections 32]
#
# For each store, starts the release `errbook serve --capture`, runs wrk (2 threads)
# against POST /api/v1/diagnose with a failure errbook does not know, every request
# new: first each a new group (inserts), then all one group (updates of one row).
# Capture off runs first and again last. Prints a Markdown table: requests/s, latency percentiles, and the writes the store
# took (from /healthz: written, dropped) per second of the run. `.ci/postgres` starts
# a throwaway PostgreSQL and prints its URL.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

postgres=
duration=10s
connections=32
while [ $# -gt 0 ]; do
    case "$1" in
        --postgres) postgres=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v wrk >/dev/null 2>&1 || { echo "wrk is not installed (Debian: apt-get install wrk)" >&2; exit 1; }

cargo build --release --quiet
work=$(mktemp -d)
server=
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 -c 'import json, sys; json.dump({"text": open(sys.argv[1]).read()}, open(sys.argv[2], "w"))' \
    benches/load/unknown.log "$work/paste.json"
export PASTE_JSON="$work/paste.json"
seconds=${duration%s}

store_field() { # FIELD: /healthz's store.FIELD
    python3 -c 'import json, sys, urllib.request
print(json.load(urllib.request.urlopen(sys.argv[1]))["store"][sys.argv[2]])' \
        "http://127.0.0.1:$port/healthz" "$1"
}

run() { # NAME GROUPS: one wrk run, with the store's writes during it
    local written dropped out="$work/wrk-$RANDOM.txt"
    GROUPS=$2 wrk -t2 -c"$connections" -d2s -s benches/load/capture.lua "http://127.0.0.1:$port" >/dev/null
    sleep 1
    written=$(store_field written)
    dropped=$(store_field dropped)
    GROUPS=$2 wrk -t2 -c"$connections" -d"$duration" --latency -s benches/load/capture.lua \
        "http://127.0.0.1:$port" >"$out"
    sleep 2 # the queue drains
    local w=$(( $(store_field written) - written )) d=$(( $(store_field dropped) - dropped ))
    printf '%s | %s/s | %s dropped |\n' \
        "$(awk -v name="$1" -f scripts/wrk-row.awk "$out" | sed 's/ |$//')" \
        "$(( w / seconds ))" "$d"
}

echo "wrk: 2 threads, $connections connections, $duration a run; a failure errbook does not know, every request new"
echo
echo "| store | requests/s | p50 | p90 | p99 | errors | store writes | dropped |"
echo "|---|---|---|---|---|---|---|---|"
# Off first and last: the two show how far the machine's noise goes.
for store in off sqlite ${postgres:+postgres} off; do
    case $store in
        off) args=(--store "$work/off.db") ;;
        sqlite) args=(--store "$work/inbox.db" --capture) ;;
        postgres) args=(--store "$postgres" --capture) ;;
    esac
    start_errbook kb "$work/server-$store.log" ./target/release/errbook "${args[@]}"
    run "capture $store, a new group each" new
    run "capture $store, one group" same
    kill "$server"; wait "$server" 2>/dev/null || true
done
