#!/usr/bin/env bash
# Two errbook binaries side by side, in one run, on the same machine load.
#
#   scripts/ab.sh OLD_BINARY NEW_BINARY [--kb DIR] [--rounds 3] [--duration 6s] [--connections 32]
#
# Starts both (each building its indexes in RAM), then for each route runs wrk
# (2 threads, 32 connections by default; one thread for one connection) against one and then the other, ROUNDS times, so that
# whatever else the machine does falls on both alike. Routes: new searches, new
# diagnoses of the 4 KB paste, repeated searches, repeated diagnoses. Prints one
# Markdown row per run with the server's CPU time per request (less sensitive than
# requests/s to what else the machine runs), and each binary's start-to-ready time.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

[ $# -ge 2 ] || { sed -n 2,9p "$0" >&2; exit 2; }
old=$(realpath "$1")
new=$(realpath "$2")
shift 2
kb=kb
rounds=3
duration=6s
connections=32
while [ $# -gt 0 ]; do
    case "$1" in
        --kb) kb=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

start() { # BINARY NAME: starts it (building its indexes in RAM); sets port_NAME
    start_errbook "$kb" "$work/$2.log" "$1" --no-index-cache
    pids+=("$server")
    printf -v "port_$2" %s "$port"
    printf -v "pid_$2" %s "$server"
    echo "$2: $1, ready_ms=$(grep -o 'ready_ms=[0-9]*' "$work/$2.log" | cut -d= -f2)"
}
start "$old" old
start "$new" new
sleep 1

write_load_inputs "$work" tests/browser/nccl-watchdog-timeout.log "$kb"

echo
# Server CPU time (user + system, in clock ticks) so far, from /proc.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

threads=$((connections < 2 ? 1 : 2))
echo "| route | binary | requests/s | p50 | p90 | p99 | errors | server CPU per request |"
echo "|---|---|---|---|---|---|---|---|"
for route in "search new:search.lua:1" "diagnose new:diagnose.lua:1" \
    "search repeated:search.lua:0" "diagnose repeated:diagnose.lua:0"; do
    IFS=: read -r name script unique <<<"$route"
    for _ in $(seq 1 "$rounds"); do
        for which in old new; do
            port_var="port_$which"
            url="http://127.0.0.1:${!port_var}"
            out="$work/out.txt"
            UNIQUE=$unique wrk -t$threads -c$connections -d1s -s "benches/load/$script" "$url" >/dev/null
            pid_var="pid_$which"
            before=$(cpu_ticks "${!pid_var}")
            UNIQUE=$unique wrk -t$threads -c$connections -d"$duration" --latency \
                -s "benches/load/$script" "$url" >"$out"
            after=$(cpu_ticks "${!pid_var}")
            cpu=$(awk -v t=$((after - before)) -v hz="$hz" \
                '/requests in/ { printf "%.0f µs", t / hz * 1e6 / $1 }' "$out")
            awk -v name="$name | $which" -f scripts/wrk-row.awk "$out" | sed "s/ |\$/ | $cpu |/"
        done
    done
done
