#!/usr/bin/env bash
# Side by side, in one run: errbook's search against `tantivy-cli serve` holding the
# same entries, on this machine, with the same 32 queries and the same wrk settings.
#
#   cargo install tantivy-cli      # once; puts `tantivy` in ~/.cargo/bin
#   scripts/compare-tantivy.sh [--kb DIR] [--duration 10s] [--connections 32]
#
# tantivy-cli gets each entry as one document: slug, titles, summaries, symptoms,
# signatures and the Markdown body, all indexed with its default tokenizer and stored
# (its answer carries the stored documents; errbook's carries snippets). Each server
# runs alone while it is measured. Prints a Markdown table and errbook's ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

kb=kb
duration=10s
connections=32
while [ $# -gt 0 ]; do
    case "$1" in
        --kb) kb=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
tantivy=${TANTIVY:-tantivy}
for tool in wrk "$tantivy"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "$tool is not installed (wrk: apt-get install wrk; tantivy: cargo install tantivy-cli)" >&2
        exit 1
    fi
done

cargo build --release --quiet
work=$(mktemp -d)
server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # url
    for _ in $(seq 1 6000); do
        curl -fs -o /dev/null "$1" && return 0
        kill -0 "$server" 2>/dev/null || { echo "server died" >&2; exit 1; }
        sleep 0.05
    done
    echo "timed out waiting for $1" >&2
    exit 1
}

# errbook first; its entry API also exports the documents tantivy-cli indexes.
port=$(free_port)
ERRBOOK_NO_BUILTIN=1 ./target/release/errbook serve --kb "$kb" --addr "127.0.0.1:$port" >"$work/errbook.log" 2>&1 &
server=$!
wait_for "http://127.0.0.1:$port/healthz"
python3 - "$port" "$work" <<'PY'
import json, sys, urllib.parse, urllib.request
port, work = sys.argv[1], sys.argv[2]
api = f"http://127.0.0.1:{port}/api/v1"
slugs = [e["slug"] for e in json.load(urllib.request.urlopen(f"{api}/entries"))["entries"]]
with open(f"{work}/docs.json", "w", encoding="utf-8") as out:
    for slug in slugs:
        e = json.load(urllib.request.urlopen(f"{api}/entries/{slug}"))
        doc = {
            "slug": slug,
            "title": f'{e["title"]} {e["title_zh"]}',
            "summary": f'{e["summary"]} {e["summary_zh"]}',
            "symptoms": " ".join(e["symptoms"]),
            "signatures": " ".join(e["signatures"]),
            "body": e["markdown"],
        }
        out.write(json.dumps(doc, ensure_ascii=False) + "\n")
text = {"indexing": {"record": "position", "fieldnorms": True, "tokenizer": "default"},
        "stored": True, "fast": False}
raw = {"indexing": {"record": "basic", "fieldnorms": True, "tokenizer": "raw"},
       "stored": True, "fast": False}
schema = [{"name": "slug", "type": "text", "options": raw}] + [
    {"name": name, "type": "text", "options": text}
    for name in ["title", "summary", "symptoms", "signatures", "body"]
]
meta = {"index_settings": {"docstore_compression": "lz4", "docstore_blocksize": 16384},
        "segments": [], "schema": schema, "opstamp": 0}
import os
os.makedirs(f"{work}/index")
with open(f"{work}/index/meta.json", "w") as f:
    json.dump(meta, f)
# The same queries for both; tantivy's query syntax characters become spaces.
syntax = set('+-&|!(){}[]^"~*?:\\/')
with open("benches/load/queries.txt", encoding="utf-8") as f, \
        open(f"{work}/errbook.enc", "w") as ours, open(f"{work}/tantivy.enc", "w") as theirs:
    for line in f:
        q = line.strip()
        if q:
            ours.write(urllib.parse.quote(q) + "\n")
            plain = "".join(" " if c in syntax else c for c in q).strip()
            theirs.write(urllib.parse.quote(plain) + "\n")
PY
entries=$(wc -l <"$work/docs.json")

run() { # name url
    local out="$work/run.txt"
    wrk -t2 -c"$connections" -d2s -s benches/load/search.lua "$2" >/dev/null # warm-up
    wrk -t2 -c"$connections" -d"$duration" --latency -s benches/load/search.lua "$2" >"$out"
    awk -v name="$1" -f scripts/wrk-row.awk "$out" | tee -a "$work/table.md"
}

echo "$entries entries from $kb; wrk: 2 threads, $connections connections, $duration per run"
echo
echo "| server | requests/s | p50 | p90 | p99 | errors |"
echo "|---|---|---|---|---|---|"
QUERIES="$work/errbook.enc" run "errbook, queries repeated (answer cache)" "http://127.0.0.1:$port"
QUERIES="$work/errbook.enc" UNIQUE=1 run "errbook, every query new" "http://127.0.0.1:$port"
kill "$server"
wait "$server" 2>/dev/null || true

"$tantivy" index -i "$work/index" -f "$work/docs.json" >"$work/tantivy-index.log" 2>&1
port=$(free_port)
"$tantivy" serve -i "$work/index" --host 127.0.0.1 -p "$port" >"$work/tantivy.log" 2>&1 &
server=$!
wait_for "http://127.0.0.1:$port/api/?q=nccl"
QUERIES="$work/tantivy.enc" SEARCH_PATH="/api/?nhits=10&q=" \
    run "tantivy-cli serve (no snippets, no cache)" "http://127.0.0.1:$port"

echo
awk -F'|' '{ gsub(/ /, "", $3); rps[NR] = $3 }
    END { printf "errbook / tantivy-cli: %.2fx with repeated queries, %.2fx with every query new\n",
          rps[1] / rps[3], rps[2] / rps[3] }' "$work/table.md"
