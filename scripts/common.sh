# Shared by load.sh and soak.sh (sourced): starting the release server and writing
# the inputs the wrk scripts in benches/load/ read.

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_errbook KB LOG [BINARY [ARGS...]]: starts `BINARY serve` (by default the
# release build) with ARGS on a free port, logging to LOG, and waits until it listens;
# it serves KB alone, not the entries built into it (`ERRBOOK_NO_BUILTIN`, which a
# binary from before built-in entries ignores). Sets `server` (its PID) and `port`.
start_errbook() {
    local kb=$1 log=$2 binary=${3:-./target/release/errbook}
    shift $(($# < 3 ? $# : 3))
    port=$(free_port)
    NO_COLOR=1 RUST_LOG=errbook=info ERRBOOK_NO_BUILTIN=1 "$binary" serve --kb "$kb" \
        --addr "127.0.0.1:$port" "$@" >"$log" 2>&1 &
    server=$!
    for _ in $(seq 1 6000); do
        grep -q "listening on" "$log" && return 0
        kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.05
    done
    echo "errbook did not start" >&2
    exit 1
}

# write_load_inputs WORK PASTE KB: URL-encodes benches/load/queries.txt into
# WORK/queries.enc, wraps PASTE as WORK/paste.json, writes every example paste of the
# real entries in kb/ (184 pastes, 0.1-5 KB) as JSON, one a line, into
# WORK/pastes.jsonl, and exports QUERIES, PASTE_JSON, PASTES and ENTRY (an entry of
# KB) for the wrk scripts.
write_load_inputs() {
    python3 - "$1" "$2" <<'PY'
import glob, json, re, sys, urllib.parse
work, paste = sys.argv[1], sys.argv[2]
with open("benches/load/queries.txt", encoding="utf-8") as f, open(f"{work}/queries.enc", "w") as out:
    for line in f:
        if line.strip():
            out.write(urllib.parse.quote(line.strip()) + "\n")
with open(paste, encoding="utf-8") as f, open(f"{work}/paste.json", "w") as out:
    json.dump({"text": f.read()}, out)
# The `examples:` of each entry's front matter: block scalars (`  - |`), indented by 4.
pastes = []
for path in sorted(glob.glob("kb/**/*.md", recursive=True)):
    front = open(path, encoding="utf-8").read().split("\n---", 1)[0]
    in_examples, lines = False, None
    for line in front.split("\n"):
        if re.match(r"^[a-z_]+:", line):
            in_examples = line.startswith("examples:")
        elif in_examples and line.startswith("  - |"):
            if lines is not None:
                pastes.append("\n".join(lines))
            lines = []
            continue
        elif in_examples and lines is not None:
            lines.append(line[4:])
            continue
        if lines is not None:
            pastes.append("\n".join(lines))
            lines = None
if not pastes:
    sys.exit("no example pastes found in kb/**/*.md")
with open(f"{work}/pastes.jsonl", "w") as out:
    for text in pastes:
        out.write(json.dumps({"text": text.strip() + "\n"}, ensure_ascii=False) + "\n")
PY
    QUERIES="$1/queries.enc"
    PASTE_JSON="$1/paste.json"
    PASTES="$1/pastes.jsonl"
    ENTRY=$(basename "$(find "$3" -name '*.md' ! -name README.md -print -quit)" .md)
    export QUERIES PASTE_JSON PASTES ENTRY
}

# rss_mb PID: resident memory in MB.
rss_mb() {
    awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}
