"""Writes adr-006.ipynb (kept as a script so the notebook's source is reviewable).

    python3 notebooks/make_adr_notebook.py

The notebook loads an ADR-006 evidence pack (`bench adr --out DIR`; by default
the committed reference pack `data/reference/`, or $FENCEPOST_PACK), reproduces
the document's key plots with polars + matplotlib, and shows how to load and
slice your own run. scripts/run-notebooks.sh executes it headless in CI.
"""
from pathlib import Path

import nbformat as nbf

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
    md("""# ADR-006 evidence pack — the data behind `adr-006-evidence.md`

`bench adr` runs the evidence plan (fixed-margin sweep × TTLs under a realistic network
delay, the freeze sweep — the lock-server frozen, margins × heartbeat divisors × freeze
lengths —, the adaptive margin, the pause / clock / throttle experiments, etcd where
available) and writes one subdirectory per step plus
`adr-006-evidence.md`. This notebook reads the same files and redraws the key figures,
so every claim of the document can be checked by hand.

Set `FENCEPOST_PACK` to a pack directory; the default is the committed reference pack
`data/reference/`. Columns are described in `data/README.md`.

Needs: `pip install -r notebooks/requirements.txt` (polars, matplotlib, pyarrow)."""),
    code("""import json, os, pathlib
import polars as pl
import matplotlib.pyplot as plt

root = pathlib.Path.cwd()
if root.name == "notebooks":
    root = root.parent
PACK = pathlib.Path(os.environ.get("FENCEPOST_PACK", root / "data" / "reference"))
manifest = json.loads((PACK / "adr-manifest.json").read_text())
print("pack:", PACK)
print("regenerate with:", manifest["command"])
print("seed:", manifest["seed"], "| quick:", manifest["quick"], "| net delay:", manifest["net_delay"])
pl.DataFrame([{k: s[k] for k in ("name", "status", "seconds", "note")} for s in manifest["steps"]])"""),
    md("""## Loading a results directory

Every sweep-like step (`sweep`, `freeze`, `adaptive`, `throttle`) is a bench results
directory: `results.parquet` (or `results.csv`, same columns), `manifest.json`,
`triggers.json`, `hgrm/<cell>.*.hgrm` histograms. `load_run` works on any of them — also
on your own `bench sweep --out DIR`."""),
    code("""def load_run(run):
    \"\"\"A results directory -> (results frame, triggers frame or None, manifest dict or None).\"\"\"
    run = pathlib.Path(run)
    if (run / "results.parquet").exists():
        df = pl.read_parquet(run / "results.parquet")
    else:
        df = pl.read_csv(run / "results.csv", infer_schema_length=None)
    trig = None
    if (run / "triggers.json").exists():
        trig = pl.DataFrame(json.loads((run / "triggers.json").read_text()))
    man = json.loads((run / "manifest.json").read_text()) if (run / "manifest.json").exists() else None
    return df, trig, man

def present(step):
    d = PACK / step
    ok = (d / "results.parquet").exists() or (d / "results.csv").exists()
    if not ok:
        status = next((s for s in manifest["steps"] if s["name"] == step), None)
        print(f"{step}: not measured in this pack", "" if status is None else f"({status['status']}: {status['note']})")
    return ok

sweep, sweep_trig, sweep_man = load_run(PACK / "sweep")
print(sweep.height, "cells; git", sweep_man["git_commit"], "; build", sweep["build_profile"].unique().to_list())
sweep.select("cell", "margin", "lease_ms", "session_ttl_ms", "throughput_per_s", "payouts_paid",
             "abandoned_insufficient_lease", "attempts", "hb_corrected_count",
             "hb_rtt_corrected_p50_us", "hb_rtt_corrected_p99_us", "ledger_ok").sort("lease_ms", "margin")"""),
    md("## Must-be-zero counters\nAny non-zero here is a finding, not noise (counts are read from the rail ledger)."),
    code("""bad = sweep.filter((pl.col("duplicate_attempted") > 0) | (pl.col("paid_twice") > 0)
                   | (pl.col("stale_paid") > 0) | ~pl.col("ledger_ok")
                   | ((pl.col("fenced_out_believed_held") > 0) & pl.col("client_check")))
print("cells violating a must-be-zero counter:", bad.height)
bad.select("cell", "duplicate_attempted", "paid_twice", "stale_paid", "fenced_out_believed_held", "ledger_ok")"""),
    md("""## Throughput and abandonment per margin (document §2)

Medians over repeats when the sweep has repeats (column `repeat`). Lost work = every attempt
that did not pay; abandoned = D4 refused for insufficient lease (the margin's own cost)."""),
    code("""fixed = sweep.filter((pl.col("margin_policy") == "fixed") & (pl.col("backend") == "fencepost"))
per_margin = (fixed
    .with_columns(lost=pl.col("abandoned_insufficient_lease") + pl.col("abandoned_lost")
                       + pl.col("acquire_failed") + pl.col("lock_lost"))
    .group_by("lease_ms", "margin")
    .agg(pl.len().alias("repeats"),
         pl.col("throughput_per_s").median().alias("payouts_per_s"),
         (100 * pl.col("abandoned_insufficient_lease").sum() / pl.col("attempts").sum()).alias("abandoned_pct"),
         (100 * pl.col("lost").sum() / pl.col("attempts").sum()).alias("lost_pct"))
    .sort("lease_ms", "margin"))
fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
for (lease,), g in per_margin.group_by("lease_ms", maintain_order=True):
    a.plot(g["margin"], g["payouts_per_s"], marker="o", label=f"TTL {lease} ms")
    b.plot(g["margin"], g["abandoned_pct"], marker="o", label=f"TTL {lease} ms")
a.set(xlabel="margin", ylabel="payouts/s", title="throughput (sweep/throughput_vs_margin.svg)")
b.set(xlabel="margin", ylabel="% of attempts", title="abandoned: insufficient lease")
a.legend(); b.legend(); plt.tight_layout(); plt.show()
per_margin"""),
    md("""## Heartbeat RTT, corrected for coordinated omission (document §1)

`hgrm/<cell>.corrected.hgrm` is HdrHistogram's percentile-distribution text (µs). It is read
here without the `hdrh` package; for exact merging use the `.hdr` files (`hdrh`'s
`HdrHistogram.decode`)."""),
    code("""def read_hgrm(path):
    \"\"\"(value_ms, percentile) pairs of an .hgrm percentile distribution.\"\"\"
    pts = []
    for line in pathlib.Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) == 4 and not line.lstrip().startswith("#"):
            try:
                v, q = float(parts[0]), float(parts[1])
            except ValueError:
                continue
            pts.append((v / 1000.0, q))
    return pts

fig, ax = plt.subplots(figsize=(9, 5))
for row in fixed.filter(pl.col("margin").round(2) == 0.3).iter_rows(named=True):
    p = PACK / "sweep" / "hgrm" / f"{row['cell']}.corrected.hgrm"
    if p.exists():
        pts = read_hgrm(p)
        ax.plot([v for v, _ in pts], [q for _, q in pts], label=f"{row['cell']} (n={row['hb_corrected_count']})")
ax.set_xscale("log"); ax.set(xlabel="corrected heartbeat RTT (ms, log)", ylabel="fraction ≤", title="margin 0.30 cells (sweep/rtt_cdf.svg)")
ax.legend(); plt.show()"""),
    md("""## Trigger 1: corrected p99 against `min(lease, session TTL) × margin / 3`

Only ≥ 1,000 corrected samples can say ok (`hb_corrected_count`)."""),
    code("""t1 = fixed.with_columns(
    budget_ms=pl.min_horizontal("lease_ms", "session_ttl_ms") * pl.col("margin_effective") / 3,
    p99_ms=pl.col("hb_rtt_corrected_p99_us") / 1000,
    p99_hi_ms=pl.col("hb_rtt_corrected_p99_hi_us") / 1000,
).sort("lease_ms", "margin")
fig, ax = plt.subplots(figsize=(9, 5))
for i, ((lease,), g) in enumerate(t1.group_by("lease_ms", maintain_order=True)):
    c = f"C{i}"
    ax.plot(g["margin"], g["budget_ms"], "--", color=c, label=f"budget, TTL {lease} ms")
    ax.errorbar(g["margin"], g["p99_ms"], yerr=[g["p99_ms"] * 0, g["p99_hi_ms"] - g["p99_ms"]], fmt="o", color=c,
                label=f"corrected p99, TTL {lease} ms")
ax.set_yscale("log"); ax.set(xlabel="margin", ylabel="ms (log)", title="trigger 1 (sweep/p99_vs_budget.svg)")
ax.legend(fontsize=8); plt.show()
t1.select("cell", "hb_corrected_count", "p99_ms", "p99_hi_ms", "budget_ms")"""),
    md("## The §6.5 triggers, as `bench triggers` evaluated them (`triggers.json`)"),
    code("""if sweep_trig is not None:
    display(sweep_trig.pivot(on="trigger", index="cell", values="verdict"))"""),
    md("""## The freeze condition (document §4)

The `freeze` step freezes the lock-server for FOR every EVERY (`server_pause` = `EVERY:FOR`)
at one TTL, over margins × heartbeat divisors k (the SDK heartbeats every U/k) × freeze
lengths. Each (margin, divisor, freeze) is judged on its own: sessions lost ÷ exposures, an
exposure being one freeze × one session open (`server_pauses` × (`idle_sessions` + `workers`)),
a session lost being a gap between its acknowledged heartbeats longer than its window
(`hb_gaps_over_window`; `session_lost_deadline` where no gaps were recorded). This redraws
the document's table; the tolerance and the verdicts are the document's. A lost idle session is
reopened (`idle_reopened`), so the lost count can exceed the sessions open."""),
    code("""if present("freeze"):
    frz, _, _ = load_run(PACK / "freeze")
    frz = frz.with_columns(
        freeze_ms=pl.coalesce(
            pl.col("server_pause").str.extract(r":([0-9.]+)ms$", 1).cast(pl.Float64),
            pl.col("server_pause").str.extract(r":([0-9.]+)s$", 1).cast(pl.Float64) * 1000),
        exposures=pl.col("server_pauses") * (pl.col("idle_sessions") + pl.col("workers")),
        lost=pl.when(pl.col("hb_gap_count") > 0).then(pl.col("hb_gaps_over_window"))
               .otherwise(pl.col("session_lost_deadline")),
    ).with_columns(lost_pct=100 * pl.col("lost") / pl.col("exposures"))
    per_setting = (frz
        .group_by("lease_ms", "margin", "heartbeat_divisor", "freeze_ms")
        .agg(pl.len().alias("repeats"), pl.col("exposures").sum(), pl.col("lost").sum(),
             pl.col("hb_gap_max_us").max().alias("hb_gap_max_us"))
        .with_columns(lost_pct=100 * pl.col("lost") / pl.col("exposures"))
        .sort("lease_ms", "margin", "heartbeat_divisor", "freeze_ms"))
    # One line per (margin, divisor) over the freeze lengths (pooled repeats); the repeats
    # as unlabelled dots. Colour = margin, line style = divisor: the legend stays short.
    fig, ax = plt.subplots(figsize=(9, 5))
    margins = sorted(per_setting["margin"].unique().to_list())
    styles = {3: "-", 4: "--", 5: ":", 6: "-."}
    for (lease, margin, k), g in per_setting.group_by("lease_ms", "margin", "heartbeat_divisor", maintain_order=True):
        c = f"C{margins.index(margin) % 10}"
        ax.plot(g["freeze_ms"], g["lost_pct"], styles.get(k, "-"), marker="o", color=c,
                label=f"margin {margin:.2f}, U/{k}")
        r = frz.filter((pl.col("lease_ms") == lease) & (pl.col("margin") == margin) & (pl.col("heartbeat_divisor") == k))
        ax.plot(r["freeze_ms"], r["lost_pct"], ".", color=c, alpha=0.4, label="_nolegend_")
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set(xlabel="freeze length (ms)", ylabel="sessions lost, % of exposures (symlog)",
           title="the freeze condition (document §4; its tolerance and verdicts there)")
    ax.legend(fontsize=8, ncols=2); plt.tight_layout(); plt.show()
    display(per_setting)
    display(frz.select("cell", "heartbeat_divisor", "server_pause", "repeat", "server_pauses", "idle_sessions",
                       "workers", "session_lost_deadline", "hb_gaps_over_window", "hb_gap_p99_us",
                       "hb_gap_max_us", "fenced_out", "paid_twice", "stale_paid", "ledger_ok"))"""),
    md("## The adaptive margin (document §5)"),
    code("""for step in ["adaptive"]:
    if present(step):
        df, _, _ = load_run(PACK / step)
        display(df.select("cell", "margin_policy", "margin_effective", "server_pause", "throughput_per_s",
                          "session_lost", "lock_lost", "hb_rtt_corrected_p99_us", "hb_rtt_corrected_p999_us",
                          "fenced_out", "paid_twice", "stale_paid"))"""),
    md("""## Clock steps (document §7)

Violation rate against the server's grace, as a fraction of the essay's bound θ + 2ρD + q.
The hazardous steps are the ones whose curve stays above zero at grace = bound."""),
    code("""clock_csv = PACK / "clock" / "clock.csv"
if clock_csv.exists():
    clock = pl.read_csv(clock_csv)
    fig, ax = plt.subplots(figsize=(9, 5))
    for (scenario,), g in clock.sort("grace_fraction").group_by("scenario", maintain_order=True):
        ax.plot(g["grace_fraction"], g["violation_rate"], marker="o", label=scenario)
    ax.axvline(1.0, color="grey", ls=":")
    ax.set(xlabel="grace / (θ + 2ρD + q)", ylabel="violation rate", title="clock/clock.svg")
    ax.legend(fontsize=8); plt.show()
    display(clock.filter(pl.col("grace_fraction") == 1.0).select("scenario", "violations", "cases", "max_overrun_us"))
    findings = json.loads((PACK / "clock" / "clock.json").read_text())["findings"]
    print("hazardous server step:", findings["server_hazardous_step"],
          "| hazardous client step:", findings["client_hazardous_step"],
          "| agrees with the essay:", findings["agrees_with_essay_on_server_step"])
else:
    print("clock: not measured in this pack")"""),
    md("## Throttled vs unthrottled (trigger 5) and the fences under a frozen worker"),
    code("""if present("throttle"):
    thr, thr_trig, _ = load_run(PACK / "throttle")
    display(thr.select("cell", "cpu_quota", "hb_corrected_count", "hb_rtt_corrected_p99_us",
                       "hb_rtt_corrected_p99_lo_us", "hb_rtt_corrected_p99_hi_us", "throughput_per_s"))
for step in ["pause", "pause-uc03"]:
    p = PACK / step / "pause.json"
    if p.exists():
        r = json.loads(p.read_text())
        print(step, {k: r[k] for k in ("client_check", "pauses", "fenced_out", "duplicate_attempted",
                                       "paid", "paid_twice", "stale_paid", "ledger_ok", "expectation_met")})
    else:
        print(step, ": not measured in this pack")"""),
    md("""## Your own run

Point `load_run` at any `bench sweep`/`bench run` directory and slice it with polars. For
example, the cells of one TTL whose trigger 1 had enough samples, and their margin cost:"""),
    code("""MY_RUN = os.environ.get("FENCEPOST_RUN", PACK / "sweep")   # e.g. data/runs/2026-12-01T120000-sweep
mine, mine_trig, _ = load_run(MY_RUN)
one_ttl = mine["lease_ms"].min()
(mine.filter((pl.col("lease_ms") == one_ttl) & (pl.col("hb_corrected_count") >= 1000))
     .select("cell", "margin", "throughput_per_s",
             (100 * pl.col("abandoned_insufficient_lease") / pl.col("attempts")).alias("abandoned_pct"),
             (pl.col("hb_rtt_corrected_p99_us") / 1000).alias("p99_ms"))
     .sort("margin"))"""),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"adr-{i:02d}"  # stable ids: regenerating gives the same file
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, Path(__file__).with_name("adr-006.ipynb"))
