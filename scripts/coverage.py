#!/usr/bin/env python3
"""Coverage and top-1 over every survey's held-out (or sample) folder together.

    python3 scripts/coverage.py [heldout|sample]

Runs `errbook eval --verbose` on each `eval/<survey>/heldout` and
`eval/<survey>/<area>/heldout` folder (the binary: $ERRBOOK_BIN, else
target/release/errbook) and prints the share of reports an entry covers and top-1
on the covered ones, by language and by kind (pasted errors, questions in words),
and how the reports no entry covers are answered (`matched` is a confident wrong answer).
"""

import collections
import csv
import os
import subprocess
import sys
from pathlib import Path

# The verdict each confidence of a first answer gets (src/diagnose/policy.rs).
VERDICT = {"high": "matched", "medium": "possible"}

ROOT = Path(__file__).resolve().parent.parent
BIN = os.environ.get("ERRBOOK_BIN", str(ROOT / "target/release/errbook"))


def firsts(folder):
    """file -> (first answer, its confidence) as `errbook eval --verbose` printed them."""
    out = subprocess.run(
        [BIN, "eval", "--verbose", str(folder)],
        capture_output=True, text=True, check=True,
    ).stdout
    top = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[0].endswith(".txt") and fields[2] == "top":
            top[fields[0]] = (fields[3], fields[5])
    return top


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "heldout"
    folders = sorted(ROOT.glob(f"eval/*/{which}")) + sorted(ROOT.glob(f"eval/survey*/*/{which}"))
    count = collections.Counter()
    for folder in folders:
        top = firsts(folder)
        with open(folder / "manifest.tsv") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                expected = [e.strip() for e in row["expected"].split(",")]
                lang = row.get("lang") or "en"
                count["reports"] += 1
                count["reports " + lang] += 1
                first, confidence = top.get(row["file"], (None, "-"))
                if expected == ["none"]:
                    count["uncovered " + VERDICT.get(confidence, "no answer")] += 1
                    continue
                kind = "questions" if row["kind"] == "question" else "pastes"
                right = first in expected
                for part in ("all", lang, kind):
                    count["covered " + part] += 1
                    count["right " + part] += right
    reports, covered = count["reports"], count["covered all"]
    print(f"{which}: {len(folders)} folders, {reports} reports "
          f"({count['reports en']} English, {count['reports zh']} Chinese)")
    print(f"coverage: {covered} of {reports} = {covered / reports:.3f}")
    uncovered = reports - covered
    if uncovered:
        print(f"uncovered: {uncovered}; " + ", ".join(
            f"{v} {count['uncovered ' + v]}" for v in ("no answer", "possible", "matched")))
    for part in ("all", "en", "zh", "pastes", "questions"):
        n = count["covered " + part]
        if n:
            print(f"top-1 on covered, {part}: {count['right ' + part]} of {n} = "
                  f"{count['right ' + part] / n:.3f}")


if __name__ == "__main__":
    main()
