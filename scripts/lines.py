#!/usr/bin/env python3
"""Lines of Rust under src/ at a git revision, per module, with each file's unit tests
(its `#[cfg(test)] mod tests` and what follows) counted apart.

    python3 scripts/lines.py REV [--files]
"""
import subprocess
import sys


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    per_file = "--files" in sys.argv
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "--", "src"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    totals = {}
    for path in (p for p in listed if p.endswith(".rs")):
        text = subprocess.run(
            ["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
        ).stdout
        at = text.find("#[cfg(test)]\nmod tests")
        code = len((text if at < 0 else text[:at]).splitlines())
        tests = len(text.splitlines()) - code
        module = path.split("/")[1]
        total = totals.setdefault(module, [0, 0])
        total[0] += code
        total[1] += tests
        if per_file:
            print(f"{path:32} code {code:5} tests {tests:5}")
    for module, (code, tests) in sorted(totals.items()):
        print(f"{module:12} code {code:5} tests {tests:5}")


if __name__ == "__main__":
    main()
