#!/usr/bin/env bash
# Start-to-ready of one or more errbook binaries, starts interleaved so that load from
# other work on the machine falls on all of them alike. Each start builds its indexes
# (`--no-index-cache`) unless --cached is given; prints every `ready_ms` and the median,
# and resident memory one second after ready.
#
#   scripts/startup.sh [--runs N] [--kb DIR] [--cached] BINARY [BINARY...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

runs=9
kb=kb
cache_args=(--no-index-cache)
binaries=()
while [ $# -gt 0 ]; do
    case $1 in
        --runs) runs=$2; shift 2 ;;
        --kb) kb=$2; shift 2 ;;
        --cached) cache_args=(); shift ;;
        -h | --help) sed -n 2,7p "$0"; exit 0 ;;
        *) binaries+=("$1"); shift ;;
    esac
done
[ ${#binaries[@]} -gt 0 ] || binaries=(./target/release/errbook)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ${#cache_args[@]} -eq 0 ]; then
    cache_args=(--index-cache "$work/cache")
fi

declare -A ready rss
for _ in $(seq 1 "$runs"); do
    for b in "${binaries[@]}"; do
        start_errbook "$kb" "$work/log" "$b" "${cache_args[@]}"
        sleep 1
        ready[$b]+="$(grep -o 'ready_ms=[0-9]*' "$work/log" | cut -d= -f2) "
        rss[$b]+="$(rss_mb "$server") "
        kill -TERM "$server"
        wait "$server" || true
    done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for b in "${binaries[@]}"; do
    echo "$b: ready_ms ${ready[$b]}-> median $(echo "${ready[$b]}" | median) ms;" \
        "RSS MB ${rss[$b]}-> median $(echo "${rss[$b]}" | median)"
done
