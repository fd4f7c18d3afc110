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
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
NO_COLOR=1 RUST_LOG=errbook=info ./target/release/errbook serve --kb "$kb" --addr "127.0.0.1:$port" \
    >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 6000); do
    grep -q "listening on" "$work/server.log" && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.05
done
sleep 1
python3 - "$work" "$paste" <<'PY'
import json, sys, urllib.parse
work, paste = sys.argv[1], sys.argv[2]
with open("benches/load/queries.txt", encoding="utf-8") as f, open(f"{work}/queries.enc", "w") as out:
    for line in f:
        if line.strip():
            out.write(urllib.parse.quote(line.strip()) + "\n")
with open(paste, encoding="utf-8") as f, open(f"{work}/paste.json", "w") as out:
    json.dump({"text": f.read()}, out)
PY
export QUERIES="$work/queries.enc" PASTE_JSON="$work/paste.json"
ENTRY=$(basename "$(find "$kb" -name '*.md' ! -name README.md -print -quit)" .md)
export ENTRY
rss_mb() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$server/status"; }

echo "errbook: $kb; wrk 2 threads, $connections connections, $duration, mixed requests"
echo "RSS before: $(rss_mb) MB"
wrk -t2 -c"$connections" -d"$duration" --timeout 30s --latency -s benches/load/mixed.lua \
    "http://127.0.0.1:$port" >"$work/wrk.txt" &
load=$!
samples=""
while kill -0 "$load" 2>/dev/null; do
    sleep 5
    kill -0 "$load" 2>/dev/null && samples="$samples $(rss_mb)"
done
wait "$load"
echo "RSS every 5 s (MB):$samples"
echo "RSS after: $(rss_mb) MB"
echo
echo "| route | requests/s | p50 | p90 | p99 | errors |"
echo "|---|---|---|---|---|---|"
awk -v name="mixed: 40% search, 20% diagnose, 40% pages" -f scripts/wrk-row.awk "$work/wrk.txt"
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null && echo "healthz after the run: 200"
kill -TERM "$server"
status=0
wait "$server" || status=$?
echo "server exit status after SIGTERM: $status"
