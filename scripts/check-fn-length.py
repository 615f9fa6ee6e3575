#!/usr/bin/env python3
"""Fail when a function in a crate's `src/` tree runs over the line limit.

    scripts/check-fn-length.py          # every function over 120 lines, then the verdict
    scripts/check-fn-length.py 80       # another limit (to see what comes next)

A long function is a sequence of steps without names: split it into steps
named for what they do, by concept, not to fit the cap. A function's length
is counted from its `fn` line to its closing brace (the braces are matched
outside strings, character literals and line comments). Only tracked `.rs`
files under a `src/` directory count; integration tests (`tests/`) are not
held to it.

Exit status: 0 when no function is over the limit, 1 when one is (each is
listed with its file, line and length).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 120
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
STRING = re.compile(r'"([^"\\]|\\.)*"')
CHAR = re.compile(r"'(\\.|[^\\'])'")


def code(line: str) -> str:
    """`line` without strings, character literals and a trailing comment."""
    return CHAR.sub("", STRING.sub("", line)).split("//")[0]


def lengths(lines: list[str]):
    """(name, first line, length) of every function with a body in `lines`."""
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for j in range(i, len(lines)):
            c = code(lines[j])
            if not opened and c.rstrip().endswith(";"):
                break  # a declaration without a body (a trait's)
            depth += c.count("{") - c.count("}")
            opened = opened or "{" in c
            if opened and depth <= 0:
                yield m.group(6), i + 1, j - i + 1
                break


def main(argv: list[str]) -> int:
    limit = int(argv[1]) if len(argv) > 1 else LIMIT
    files = subprocess.run(
        ["git", "ls-files", "*.rs"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    over = []
    for f in files:
        if "/src/" not in "/" + f:
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        over += [(n, f, at, name) for name, at, n in lengths(lines) if n > limit]
    for n, f, at, name in sorted(over, reverse=True):
        print(f"over {limit} lines: {f}:{at} {name} ({n})")
    if over:
        print(f"check-fn-length: FAILED ({len(over)} function(s) over {limit} lines)")
        return 1
    print(f"check-fn-length: ok (no function in src/ over {limit} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
