#!/usr/bin/env python3
"""Checks every relative link in README.md and docs/**/*.md.

A link is Markdown's `[text](path)`, `[text](path#anchor)`, `[text](#anchor)`
or `![alt](path)`, outside code blocks and code spans. The path must exist
inside the repository; an anchor into a Markdown file must be the GitHub
slug of one of its headings (lower case, punctuation and symbols dropped,
spaces to hyphens, `-1`, `-2`, ... for repeats). `http://`, `https://` and
`mailto:` links are not followed; any other scheme, an absolute path or a
path that leaves the repository is reported as broken.

scripts/check-links.allow lists repository paths that may be missing for
now (pages another branch adds); a listed page that exists is checked like
any other, and the script says its entry can go.

    python3 scripts/check-links.py     # exit 0: every link resolves; 1: lists the broken ones

Python 3.11 standard library only.
"""
from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
ALLOW = ROOT / "scripts" / "check-links.allow"

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def sources() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def allowed() -> set[str]:
    if not ALLOW.is_file():
        return set()
    out = set()
    for line in ALLOW.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(line)
    return out


def strip_code_spans(line: str) -> str:
    """The line with every `code span` blanked (same length, so columns hold)."""
    return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks, with code spans blanked."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def rendered(heading: str) -> str:
    """A heading's text as GitHub renders it (markup gone, code kept)."""
    parts = re.split(r"(`+[^`]*`+)", heading)
    out = []
    for p in parts:
        if p.startswith("`"):
            out.append(p.strip("`"))
            continue
        p = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", p)  # links keep their text
        p = re.sub(r"<[^>]+>", "", p)  # inline HTML
        p = p.replace("*", "")
        p = re.sub(r"(?<![\w])_+|_+(?![\w])", "", p)  # _emphasis_, not snake_case
        out.append(p)
    return "".join(out)


def slug(heading: str) -> str:
    keep = []
    for ch in rendered(heading).strip().lower():
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LN" or cat in ("Mn", "Mc"):
            keep.append(ch)
        elif ch == " ":
            keep.append("-")
    return "".join(keep)


_anchor_cache: dict[Path, set[str]] = {}


def anchors(path: Path) -> set[str]:
    if path not in _anchor_cache:
        seen: dict[str, int] = {}
        out: set[str] = set()
        for _, line in prose_lines(path.read_text()):
            for m in HTML_ID.finditer(line):
                out.add(m.group(1))
            h = HEADING.match(line)
            if not h:
                continue
            s = slug(h.group(2))
            if s in seen:
                seen[s] += 1
                out.add(f"{s}-{seen[s]}")
            else:
                seen[s] = 0
                out.add(s)
        _anchor_cache[path] = out
    return _anchor_cache[path]


def check(path: Path, allow: set[str], used_allow: set[str]) -> list[str]:
    broken = []
    rel_src = path.relative_to(ROOT)
    text = path.read_text()
    for n, line in prose_lines(text):
        for m in LINK.finditer(strip_code_spans(line)):
            target = m.group(2)
            where = f"{rel_src}:{n}: ({target})"
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            if SCHEME.match(target):
                broken.append(f"{where}: a link outside the repository")
                continue
            file_part, _, anchor = target.partition("#")
            file_part = unquote(file_part)
            if file_part.startswith("/"):
                broken.append(f"{where}: an absolute path; links are relative to the file")
                continue
            dest = (path.parent / file_part).resolve() if file_part else path
            try:
                rel_dest = dest.relative_to(ROOT).as_posix()
            except ValueError:
                broken.append(f"{where}: leaves the repository")
                continue
            if not dest.exists():
                if rel_dest in allow:
                    used_allow.add(rel_dest)
                    continue
                broken.append(f"{where}: {rel_dest} does not exist")
                continue
            if anchor and dest.is_file() and dest.suffix == ".md":
                if unquote(anchor).lower() not in anchors(dest):
                    broken.append(f"{where}: {rel_dest} has no heading with the anchor #{anchor}")
    return broken


def main() -> int:
    allow = allowed()
    used_allow: set[str] = set()
    broken: list[str] = []
    files = sources()
    for path in files:
        broken += check(path, allow, used_allow)
    for entry in sorted(allow):
        if (ROOT / entry).exists():
            print(f"check-links: {entry} exists now; its line in scripts/check-links.allow can go", file=sys.stderr)
    if used_allow:
        print(f"check-links: {len(used_allow)} page(s) of scripts/check-links.allow linked but not here yet: "
              + ", ".join(sorted(used_allow)), file=sys.stderr)
    for b in broken:
        print(f"check-links: broken: {b}", file=sys.stderr)
    if broken:
        print(f"check-links: {len(broken)} broken link(s) in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check-links: every relative link in {len(files)} files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
