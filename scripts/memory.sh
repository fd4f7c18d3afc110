#!/usr/bin/env bash
# Resident memory of `errbook serve` (default --cache-mb) idle and under load, for
# sizing memory requests and limits (deploy/kubernetes/base/deployment.yaml).
#
#   scripts/memory.sh [--bin BINARY] [--kb DIR] [--cap MB] [--big-secs S] [SCENARIO...]
#
# The server holds the binary's built-in entries and, with --kb, a team's folder on
# top (by default an empty one).
#
# Scenarios, run in order on one server (default: mixed varied big1):
#   mixed   benches/load/mixed.lua at 256 connections for 60 s (searches, diagnoses
#           and pages, every request new)
#   varied  every kb example paste (0.1-5 KB), each made new, at 64 connections, 60 s
#   bigN    a 1 MB paste (the largest body the API takes), each made new, at N
#           connections for 30 s (--big-secs)
# Prints resident memory 5 s after ready, every 5 s under load, and 20 s after each
# scenario. A watchdog kills the server past --cap MB (default 6000), so that a run
# cannot take the machine's memory.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

binary=./target/release/errbook
team_kb=
cap=6000
big_secs=30
scenarios=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) binary=$2; shift 2 ;;
        --kb) team_kb=$2; shift 2 ;;
        --cap) cap=$2; shift 2 ;;
        --big-secs) big_secs=$2; shift 2 ;;
        -h | --help) sed -n 2,19p "$0"; exit 0 ;;
        *) scenarios+=("$1"); shift ;;
    esac
done
[ ${#scenarios[@]} -gt 0 ] || scenarios=(mixed varied big1)
command -v wrk >/dev/null 2>&1 || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$binary" ] || { echo "no binary at $binary (cargo build --release, or --bin)" >&2; exit 1; }

work=$(mktemp -d)
server=
watchdog=
trap 'kill "$watchdog" 2>/dev/null || true; kill -9 "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -z "$team_kb" ]; then
    team_kb=$work/team-kb
    mkdir "$team_kb"
fi
start_errbook "$team_kb" "$work/server.log" "$binary" --index-cache "$work/cache"
echo "$binary: ready in $(grep -o 'ready_ms=[0-9]*' "$work/server.log" | cut -d= -f2) ms"
# Whether the server runs (a killed one stays a zombie, without memory, until reaped).
alive() { grep -q VmRSS "/proc/$server/status" 2>/dev/null; }
(
    while alive; do
        if [ "$(awk '/VmRSS/ { print int($2 / 1024) }' "/proc/$server/status")" -gt "$cap" ]; then
            echo "watchdog: resident memory over $cap MB, killing the server"
            kill -9 "$server"
            break
        fi
        sleep 0.1
    done
) &
watchdog=$!
sleep 5
echo "idle, 5 s after ready: $(rss_mb "$server") MB"
write_load_inputs "$work" tests/browser/nccl-watchdog-timeout.log kb
# About 1 MB of different logs in one paste: every example paste and test log in turn.
python3 - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
texts = [json.loads(line)["text"] for line in open(f"{work}/pastes.jsonl", encoding="utf-8")]
for path in sorted(glob.glob("tests/browser/*.log")) + sorted(glob.glob("tests/pastes/*.txt")):
    texts.append(open(path, encoding="utf-8", errors="replace").read())
parts, size, i = [], 0, 0
while size < 1_000_000:
    part = texts[i % len(texts)] + f"\nstep {i} done\n"
    parts.append(part)
    size += len(part.encode())
    i += 1
text = "".join(parts)
while len(json.dumps({"text": text}).encode()) > 1_040_000:
    text = text[:-1000]
json.dump({"text": text}, open(f"{work}/big.json", "w"))
PY

load() { # NAME WRK-ARGS...
    local name=$1 samples="" pid
    shift
    wrk "$@" >"$work/wrk.txt" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        if ! alive; then
            echo "$name: the server is gone; samples every 5 s (MB):$samples"
            kill "$pid"
            exit 1
        fi
        kill -0 "$pid" 2>/dev/null && samples="$samples $(rss_mb "$server")"
    done
    wait "$pid" || true
    echo "$name: every 5 s (MB):$samples"
    grep -E "Requests/sec|Non-2xx|Socket errors" "$work/wrk.txt" | sed 's/^ */    /'
    sleep 20
    echo "    20 s later: $(rss_mb "$server") MB"
}
url="http://127.0.0.1:$port"
for scenario in "${scenarios[@]}"; do
    case $scenario in
        mixed) load "mixed, 256 connections, 60 s" \
            -t2 -c256 -d60s --timeout 30s -s benches/load/mixed.lua "$url" ;;
        varied) load "varied diagnoses, 64 connections, 60 s" \
            -t2 -c64 -d60s --timeout 30s -s benches/load/diagnose-many.lua "$url" ;;
        big[0-9]*) PASTE_JSON="$work/big.json" UNIQUE=1 load "1 MB pastes, ${scenario#big} connections, $big_secs s" \
            -t1 -c"${scenario#big}" -d"${big_secs}s" --timeout 30s -s benches/load/diagnose.lua "$url" ;;
        *) echo "unknown scenario $scenario" >&2; exit 2 ;;
    esac
done
echo "peak: $(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$server/status") MB"
kill -TERM "$server"
wait "$server" || true
