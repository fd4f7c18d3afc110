#!/usr/bin/env bash
# Hostile-client checks against a real errbook binary (see scripts/adversary.py):
# prints held/broke per attack, by its number in SECURITY.md, and exits 1 if any broke.
#   scripts/adversary.sh [--bin target/release/errbook] [--kb kb] [--only 1,2] [--quick]
exec python3 "$(dirname "$0")/adversary.py" "$@"
