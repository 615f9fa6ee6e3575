"""Writes analysis.ipynb (kept as a script so the notebook's source is reviewable).

    python3 notebooks/make_notebook.py
"""
from pathlib import Path

import nbformat as nbf

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
    md("""# fencepost — analysis of a results directory

Reads what `bench sweep` wrote (`results.parquet`, `triggers.json`, `manifest.json`)
and answers the ADR-006 question per TTL: how much throughput each margin costs,
and where the §6.5 triggers fire. Set `FENCEPOST_RUN` to a results directory; by
default the newest one under `data/runs/`, and on a fresh clone, where `data/runs/`
has none, the committed reference sweep `data/reference/sweep` (the first cell says
which it read). Every column is described in `data/README.md`.

Needs: `pip install pandas pyarrow matplotlib`. CI runs it against the reference
sweep `data/reference/sweep` (scripts/run-notebooks.sh)."""),
    code("""import json, os, pathlib
import pandas as pd
import matplotlib.pyplot as plt

root = pathlib.Path.cwd()
if root.name == "notebooks":
    root = root.parent
RUN = os.environ.get("FENCEPOST_RUN")
if RUN is not None:
    print("reading FENCEPOST_RUN:")
else:
    runs = sorted((root / "data" / "runs").glob("*/results.parquet"), key=lambda p: p.stat().st_mtime)
    if runs:
        RUN = runs[-1].parent
        print("reading the newest results directory under data/runs/:")
    else:
        RUN = root / "data" / "reference" / "sweep"
        print("data/runs/ has no results yet, so this reads the committed reference sweep,")
        print("data/reference/sweep (make your own with `cargo run --release -p bench -- sweep ...`):")
RUN = pathlib.Path(RUN)
df = pd.read_parquet(RUN / "results.parquet")
manifest = json.loads((RUN / "manifest.json").read_text())
print(RUN, "| seed", manifest["seed"], "|", manifest["git_commit"], "|", len(df), "cells")"""),
    md("## The table\nCounts (paid, fenced_out, duplicates) come from the rail's ledger, never from the workers."),
    code("""cols = ["cell", "margin", "lease_ms", "session_ttl_ms", "throughput_per_s", "payouts_paid",
        "abandoned_insufficient_lease", "attempts", "lock_lost", "fenced_out", "duplicate_attempted",
        "hb_rtt_p50_us", "hb_rtt_p99_us", "ledger_ok"]
df[cols].sort_values(["lease_ms", "margin"])"""),
    md("## Must-be-zero counters\nAny non-zero here is a finding, not noise."),
    code("""bad = df[(df.duplicate_attempted > 0) | (df.paid_twice > 0) | (df.stale_paid > 0) | ~df.ledger_ok
         | ((df.fenced_out > 0) & df.client_check)]
print("cells violating a must-be-zero counter:", len(bad))
bad[["cell", "duplicate_attempted", "paid_twice", "stale_paid", "fenced_out", "ledger_ok"]]"""),
    md("## Throughput and abandonment against the margin, per TTL"),
    code("""df["abandon_pct"] = 100 * df.abandoned_insufficient_lease / df.attempts.clip(lower=1)
fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
for lease, g in df.sort_values("margin").groupby("lease_ms"):
    a.plot(g.margin, g.throughput_per_s, marker="o", label=f"TTL {lease} ms")
    b.plot(g.margin, g.abandon_pct, marker="o", label=f"TTL {lease} ms")
a.set(xlabel="margin", ylabel="payouts/s", title="throughput")
b.set(xlabel="margin", ylabel="% of attempts", title="abandoned: insufficient lease")
a.legend(); b.legend(); plt.tight_layout(); plt.show()"""),
    md("""## The D4 window: why large margins fall off a cliff

A handle needs both its own and its session's deadline ahead, so the usable window
is `min(lease, session TTL) × (1 − margin)`; just before a heartbeat (period = a third
of it) two thirds of that are left. Where that drops below the worst-case rail hop
(`rail.read.timeout + 2 s`, scaled), `ensure_time_for` refuses part of every period."""),
    code("""df["window_ms"] = df[["lease_ms", "session_ttl_ms"]].min(axis=1) * (1 - df.margin_effective)
df["window_before_hb_ms"] = df.window_ms * 2 / 3
df[["cell", "window_ms", "window_before_hb_ms", "worst_case_hop_ms", "abandon_pct"]].sort_values("cell")"""),
    md("## ADR-006 §6.5 triggers (as `bench triggers` evaluated them)"),
    code("""trig = pd.DataFrame(json.loads((RUN / "triggers.json").read_text()))
trig.pivot(index="cell", columns="trigger", values="fired")"""),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"analysis-{i:02d}"  # stable ids: regenerating gives the same file
nbf.write(nb, Path(__file__).with_name("analysis.ipynb"))
