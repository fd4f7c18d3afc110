#!/usr/bin/env bash
# Sustained mixed load on the release binary: searches, diagnoses and pages, every
# request different (benches/load/mixed.lua), at many connections for a long time.
#
#   scripts/soak.sh [--kb DIR] [--duration 60s] [--connections 256]
#
# Prints requests/s, latency percentiles and errors (non-2xx answers and socket
# errors), the server's resident memory every 5 s during the run, then stops the
# server with SIGTERM and reports its exit status.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

kb=kb
duration=60s
connections=256
paste=tests/browser/nccl-watchdog-timeout.log
while [ $# -gt 0 ]; do
    case "$1" in
        --kb) kb=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v wrk >/dev/null 2>&1 || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }

cargo build --release --quiet
work=$(mktemp -d)
server=
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
start_errbook "$kb" "$work/server.log"
sleep 1
write_load_inputs "$work" "$paste" "$kb"
echo "errbook: $kb; wrk 2 threads, $connections connections, $duration, mixed requests"
echo "RSS before: $(rss_mb "$server") MB"
wrk -t2 -c"$connections" -d"$duration" --timeout 30s --latency -s benches/load/mixed.lua \
    "http://127.0.0.1:$port" >"$work/wrk.txt" &
load=$!
samples=""
while kill -0 "$load" 2>/dev/null; do
    sleep 5
    kill -0 "$load" 2>/dev/null && samples="$samples $(rss_mb "$server")"
done
wait "$load"
echo "RSS every 5 s (MB):$samples"
echo "RSS after: $(rss_mb "$server") MB"
echo
echo "| route | requests/s | p50 | p90 | p99 | errors |"
echo "|---|---|---|---|---|---|"
awk -v name="mixed: 40% search, 20% diagnose, 40% pages" -f scripts/wrk-row.awk "$work/wrk.txt"
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null && echo "healthz after the run: 200"
kill -TERM "$server"
status=0
wait "$server" || status=$?
echo "server exit status after SIGTERM: $status"
