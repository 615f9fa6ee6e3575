#!/usr/bin/env python3
"""Checks docs/reference/ against the binaries it documents.

    scripts/check-reference.py target/debug

1. Runs `--help` of lock-server, rail-stub, bench and experiments in the given
   directory, and `--help` of every subcommand their help lists (`bench run`,
   `experiments pause`, ...). Every long flag (`--foo`) those texts print must
   be mentioned in docs/reference/configuration.md.
2. Starts lock-server (`--store memory:`, and once more on a throwaway SQLite
   file, whose store counters only a durable store exports) and rail-stub
   (`--ledger memory`) on 127.0.0.1 port 0, scrapes each `/metrics`, and every
   metric family (`# TYPE name ...`) must be mentioned in
   docs/reference/observability.md.

Exit 0 when everything is documented, 1 when something is missing (each
missing flag or family is listed with where it came from), 2 on bad usage or
when a binary cannot be run. Every child process is stopped before exiting,
also on Ctrl-C. Python 3.11, standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BINARIES = ["lock-server", "rail-stub", "bench", "experiments"]
REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "reference"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
START_TIMEOUT_S = 20.0
HELP_TIMEOUT_S = 30.0

_children: list[subprocess.Popen] = []


class Unusable(Exception):
    """A binary could not be run or did not start."""


def stop_children() -> None:
    """SIGTERM every child still running, then SIGKILL what does not exit."""
    while _children:
        child = _children.pop()
        if child.poll() is not None:
            continue
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=5)


def _on_signal(signum, _frame):
    stop_children()
    sys.exit(128 + signum)


def child_env() -> dict[str, str]:
    """The environment without the services' own variables, so that only the
    flags given here configure the children."""
    return {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("LOCK_") or k.startswith("RAIL_"))
    }


def help_text(binary: Path, args: list[str]) -> str:
    cmd = [str(binary), *args, "--help"]
    try:
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=HELP_TIMEOUT_S,
            env=child_env(),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unusable(f"cannot run {' '.join(cmd)}: {e}") from e
    if out.returncode != 0:
        raise Unusable(
            f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()[:300]}"
        )
    return out.stdout


def subcommands(text: str) -> list[str]:
    """The names in a clap help's `Commands:` section, `help` left out."""
    names: list[str] = []
    in_section = False
    for line in text.splitlines():
        if line.strip() == "Commands:":
            in_section = True
            continue
        if in_section:
            if not line.startswith("  ") or not line.strip():
                break
            name = line.split()[0]
            if name != "help":
                names.append(name)
    return names


def collect_flags(bindir: Path) -> dict[str, set[str]]:
    """Every long flag, mapped to the help texts (`bench run --help`) printing it."""
    flags: dict[str, set[str]] = {}
    for name in BINARIES:
        binary = bindir / name
        if not binary.is_file():
            raise Unusable(f"{binary} does not exist")
        top = help_text(binary, [])
        texts = {name: top}
        for sub in subcommands(top):
            texts[f"{name} {sub}"] = help_text(binary, [sub])
        for where, text in texts.items():
            for flag in FLAG.findall(text):
                flags.setdefault(flag, set()).add(f"{where} --help")
    return flags


def start(binary: Path, args: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    """Starts a service and returns it with the base URL of its
    `listening on http://IP:PORT` line."""
    stderr = open(log, "wb")
    try:
        child = subprocess.Popen(
            [str(binary), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=child_env(),
        )
    except OSError as e:
        raise Unusable(f"cannot start {binary}: {e}") from e
    finally:
        stderr.close()
    _children.append(child)
    sel = selectors.DefaultSelector()
    sel.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT_S
    buf = b""
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(child.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            m = re.search(rb"listening on (https?://\S+)", buf)
            if m:
                return child, m.group(1).decode()
    finally:
        sel.close()
    tail = log.read_text(errors="replace")[-500:]
    raise Unusable(
        f"{binary.name} {' '.join(args)} did not print `listening on` within "
        f"{START_TIMEOUT_S:.0f} s (exit {child.poll()}); stderr: {tail}"
    )


def metric_families(url: str) -> set[str]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        line.split()[2]
        for line in text.splitlines()
        if line.startswith("# TYPE ") and len(line.split()) >= 4
    }


def collect_metrics(bindir: Path, scratch: Path) -> dict[str, set[str]]:
    """Every metric family the services export, mapped to who exported it."""
    runs = [
        ("lock-server", ["--store", "memory:", "--listen", "127.0.0.1:0"]),
        (
            "lock-server",
            [
                "--store",
                f"sqlite:{scratch / 'lock.sqlite'}",
                "--listen",
                "127.0.0.1:0",
            ],
        ),
        ("rail-stub", ["--ledger", "memory", "--listen", "127.0.0.1:0"]),
    ]
    families: dict[str, set[str]] = {}
    for i, (name, args) in enumerate(runs):
        child, url = start(bindir / name, args, scratch / f"{name}-{i}.log")
        try:
            for family in metric_families(url):
                families.setdefault(family, set()).add(f"{name} {' '.join(args[:2])}")
        except OSError as e:
            raise Unusable(f"cannot scrape {url}/metrics: {e}") from e
        finally:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=5)
            _children.remove(child)
    return families


def mentioned(token: str, text: str) -> bool:
    """`token` appears in `text` as a whole word (not as part of a longer name)."""
    return re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", text) is not None


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Fail when a flag or metric of the binaries is missing from docs/reference/."
    )
    parser.add_argument(
        "bindir",
        type=Path,
        help="directory holding lock-server, rail-stub, bench and experiments (e.g. target/debug)",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    config_doc = (DOCS / "configuration.md").read_text(encoding="utf-8")
    obs_doc = (DOCS / "observability.md").read_text(encoding="utf-8")
    try:
        flags = collect_flags(args.bindir)
        with tempfile.TemporaryDirectory(prefix="check-reference-") as scratch:
            families = collect_metrics(args.bindir, Path(scratch))
    except Unusable as e:
        print(f"check-reference: {e}", file=sys.stderr)
        return 2
    finally:
        stop_children()

    missing_flags = sorted(f for f in flags if not mentioned(f, config_doc))
    missing_metrics = sorted(m for m in families if not mentioned(m, obs_doc))
    print(
        f"check-reference: {len(flags)} long flags from the --help of "
        f"{', '.join(BINARIES)} and their subcommands; "
        f"{len(families)} metric families from lock-server and rail-stub"
    )
    for f in missing_flags:
        print(
            f"missing from docs/reference/configuration.md: {f} "
            f"(in {', '.join(sorted(flags[f]))})"
        )
    for m in missing_metrics:
        print(
            f"missing from docs/reference/observability.md: {m} "
            f"(from {', '.join(sorted(families[m]))})"
        )
    if missing_flags or missing_metrics:
        print(
            f"check-reference: FAILED: {len(missing_flags)} flag(s) and "
            f"{len(missing_metrics)} metric family(ies) undocumented"
        )
        return 1
    print("check-reference: ok, every flag and metric family is documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
