#!/usr/bin/env bash
# HTTP load on the release binary, server and load generator on this machine.
#
#   scripts/load.sh [--kb DIR] [--duration 10s] [--connections 32] [--paste FILE]
#
# Starts `errbook serve`, records start-to-ready time and idle memory, then runs wrk
# (2 threads) against: search (32 queries repeated, then every query new), diagnose
# (one real 4 KB paste as JSON, repeated, then made new each request, then new on one
# connection: the latency of one request at a time; then the 184 example pastes of the
# real entries in turn, each made new, at 32 connections and on one) and portal pages;
# prints a Markdown table: requests/s, latency percentiles, errors, and resident
# memory after the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

kb=kb
duration=10s
connections=32
paste=tests/browser/nccl-watchdog-timeout.log
while [ $# -gt 0 ]; do
    case "$1" in
        --kb) kb=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --paste) paste=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

if ! command -v wrk >/dev/null 2>&1; then
    echo "wrk is not installed (Debian: apt-get install wrk)" >&2
    exit 1
fi

cargo build --release --quiet
work=$(mktemp -d)
server=
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

start_errbook "$kb" "$work/server.log"
ready_ms=$(grep -o 'ready_ms=[0-9]*' "$work/server.log" | cut -d= -f2)
entries=$(grep -o 'entries=[0-9]*' "$work/server.log" | cut -d= -f2)
sleep 1
rss() { echo "$(rss_mb "$server") MB"; }
idle=$(rss)

write_load_inputs "$work" "$paste" "$kb"
paste_bytes=$(wc -c <"$paste")
url="http://127.0.0.1:$port"

run() { # name script (CONNS overrides the connections, for one request at a time)
    local c=${CONNS:-$connections} t=2
    [ "$c" -lt 2 ] && t=1
    local out="$work/${UNIQUE:-0}-$c-$(basename "$2").txt"
    wrk -t$t -c"$c" -d2s -s "$2" "$url" >/dev/null # warm-up
    wrk -t$t -c"$c" -d"$duration" --latency -s "$2" "$url" >"$out"
    awk -v name="$1" -f scripts/wrk-row.awk "$out"
}

echo "errbook: $entries entries from $kb, ready in ${ready_ms} ms, idle RSS $idle"
echo "wrk: 2 threads, $connections connections, $duration per route; diagnose paste $paste_bytes bytes"
echo
echo "| route | requests/s | p50 | p90 | p99 | errors |"
echo "|---|---|---|---|---|---|"
run "GET /api/v1/search (32 queries, repeated)" benches/load/search.lua
UNIQUE=1 run "GET /api/v1/search (every query new)" benches/load/search.lua
run "POST /api/v1/diagnose (one paste, repeated)" benches/load/diagnose.lua
UNIQUE=1 run "POST /api/v1/diagnose (every paste new)" benches/load/diagnose.lua
UNIQUE=1 CONNS=1 run "POST /api/v1/diagnose (every paste new, 1 connection)" benches/load/diagnose.lua
run "POST /api/v1/diagnose (184 example pastes in turn, each new)" benches/load/diagnose-many.lua
CONNS=1 run "POST /api/v1/diagnose (184 example pastes in turn, each new, 1 connection)" benches/load/diagnose-many.lua
run "GET pages (home, entry, search, entry JSON)" benches/load/page.lua
echo
echo "RSS after the runs: $(rss)"
