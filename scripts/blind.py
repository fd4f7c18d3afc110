#!/usr/bin/env python3
"""Blinds and scores the errbook-against-assistant comparison (eval/assistant/PROMPTS.md).

    python3 scripts/blind.py [DIR]            # errbook/, memory/[, tools/] -> blind/CASE.{A,B,C}.txt, key.tsv
    python3 scripts/blind.py --score [DIR]    # grades.tsv + key.tsv -> counts per source

DIR is a round's directory, eval/assistant by default (eval/assistant/round4 is another).

sample.tsv: case, tracker file, label (`none`: no entry answers it), source URL.
grades.tsv: case, resolution, resolution_found, grade_A, grade_B, grade_C, note.
"""
import csv
import random
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DIRS = [a for a in sys.argv[1:] if not a.startswith("--")]
ROOT = REPO / DIRS[0] if DIRS else REPO / "eval" / "assistant"
SOURCES = tuple(s for s in ("errbook", "memory", "tools") if (ROOT / s).is_dir())


def cases():
    with open(ROOT / "sample.tsv") as f:
        return [row[0] for row in csv.reader(f, delimiter="\t") if row]


def blind():
    rng = random.Random(39)
    (ROOT / "blind").mkdir(exist_ok=True)
    with open(ROOT / "key.tsv", "w") as key:
        for case in cases():
            order = list(SOURCES)
            rng.shuffle(order)
            for letter, source in zip("ABC", order):
                text = (ROOT / source / case).read_text()
                (ROOT / "blind" / f"{case}.{letter}.txt").write_text(text)
            key.write("\t".join([case, *order]) + "\n")


def score():
    with open(ROOT / "key.tsv") as f:
        key = {row[0]: row[1:] for row in csv.reader(f, delimiter="\t") if row}
    with open(ROOT / "sample.tsv") as f:
        covered = {row[0]: row[2] != "none" for row in csv.reader(f, delimiter="\t") if row}
    counts = {(s, c): Counter() for s in SOURCES for c in (True, False)}
    with open(ROOT / "grades.tsv") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and r[0] in key]
    for row in rows:
        case, grades = row[0], [g.strip() for g in row[3 : 3 + len(SOURCES)]]
        for source, grade in zip(key[case], grades):
            counts[(source, covered[case])][grade] += 1
    print("| source | reports | right | partly | wrong | abstain |")
    print("|---|---|---|---|---|---|")
    for source in SOURCES:
        for label, which in (("covered", [True]), ("not covered", [False]), ("all", [True, False])):
            c = sum((counts[(source, w)] for w in which), Counter())
            n = sum(c.values())
            print(f"| {source} ({label}) | {n} | {c['right']} | {c['partly']} | {c['wrong']} | {c['abstain']} |")


if __name__ == "__main__":
    score() if "--score" in sys.argv else blind()
