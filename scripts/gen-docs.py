#!/usr/bin/env python3
"""Rewrites the generated blocks of README.md and docs/*.md from data/reference/.

A block is everything between

    <!-- generated: NAME (scripts/gen-docs.py) -->
    <!-- end generated: NAME -->

and NAME says which generator below writes it. Every measured number in a
block is read from a CSV or JSON file of the committed evidence pack
(data/reference/, written by `bench adr`) or of another committed run under
data/ (data/http-client/, written by `bench peer`); none is typed here. One block,
`toolchain`, reads Cargo.toml instead. Links in a block are relative to the
file the block sits in.

    python3 scripts/gen-docs.py           # rewrite the blocks in place
    python3 scripts/gen-docs.py --check   # exit 1 naming every block that is not current
                                          # (and first checks its own verdicts: self_test)

Python 3.11 standard library only; never reads parquet.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics
import sys
import tomllib
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "data" / "reference"

BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[a-z0-9-]+) \(scripts/gen-docs\.py\) -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- end generated: (?P=name) -->)",
    re.S,
)
OPEN = re.compile(r"<!-- generated: ([a-z0-9-]+) \(scripts/gen-docs\.py\) -->")

# ADR-006 §6.5's five triggers, as `bench triggers` names them.
TRIGGERS = [
    ("rtt_p99_vs_margin", "corrected p99 heartbeat RTT over min(lease, session TTL) × margin / 3"),
    ("margin_dominant_limiter", "the margin is the dominant throughput limiter"),
    ("d4_unsatisfiable", "the window just before a heartbeat ≤ the worst-case rail hop (D4)"),
    ("fenced_out_with_client_check", "a fence-out of a client that believed it held the lease"),
    ("autopilot_throttling", "a move off CPU throttling makes the margin reducible"),
]
# The order `bench adr` ranks verdicts in for a headline: the worst wins.
VERDICT_RANK = {"fired": 3, "insufficient_data": 2, "ok": 1, "not_evaluated": 0}


class Missing(Exception):
    """An input file of the pack is absent."""


# ---------------------------------------------------------------- reading


def read_json(rel: str):
    path = PACK / rel
    if not path.is_file():
        raise Missing(f"data/reference/{rel}")
    return json.loads(path.read_text())


def read_csv(rel: str) -> list[dict[str, str]]:
    path = PACK / rel
    if not path.is_file():
        raise Missing(f"data/reference/{rel}")
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def read_run(rel: str, name: str):
    """`name` (JSON or CSV) of a committed run `data/<rel>/` outside the pack."""
    path = ROOT / "data" / rel / name
    if not path.is_file():
        raise Missing(f"data/{rel}/{name}")
    if name.endswith(".json"):
        return json.loads(path.read_text())
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def num(v: str | float | int | None) -> float:
    if v is None or v == "":
        return math.nan
    return float(v)


# ---------------------------------------------------------------- formatting


def f(v: float, digits: int = 1) -> str:
    """A number with `digits` decimals and thousands separators; `–` for NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:,.{digits}f}"


def pct(v: float, digits: int = 1) -> str:
    return "–" if math.isnan(v) else f"{100 * v:.{digits}f} %"


def ms_from_us(v: float, digits: int = 1) -> str:
    return f(num(v) / 1000.0, digits)


def ttl_label(lease_ms: float) -> str:
    s = lease_ms / 1000.0
    return f"{s:g}s"


def duration(seconds: float) -> str:
    seconds = round(seconds)
    m, s = divmod(seconds, 60)
    if m >= 120:
        h, m = divmod(m, 60)
        return f"{h} h {m} min"
    return f"{m} min {s} s" if m else f"{s} s"


def stamp(iso: str) -> datetime:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")


def link(here: Path, rel_to_root: str, text: str | None = None) -> str:
    """A Markdown link from the file `here` to `rel_to_root` (a repo path)."""
    target = os.path.relpath(ROOT / rel_to_root, here.parent)
    return f"[{text or rel_to_root}]({target})"


def table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    align = align or ["l"] * len(header)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def t975(df: int) -> float:
    """Two-sided 95 % Student t quantile, the table `bench` itself uses."""
    t = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
    return t[df - 1] if 1 <= df <= 30 else 1.96


def spread(values: list[float]) -> tuple[float, float, float, tuple[float, float] | None]:
    """Median, min, max and the 95 % t-interval of the mean (None below 2 values)."""
    v = sorted(values)
    ci = None
    if len(v) >= 2:
        mean = statistics.fmean(v)
        half = t975(len(v) - 1) * statistics.stdev(v) / math.sqrt(len(v))
        ci = (mean - half, mean + half)
    return statistics.median(v), v[0], v[-1], ci


def source(here: Path, *rels: str) -> str:
    return "Source: " + ", ".join(link(here, r) for r in rels) + " (written by `bench adr`)."


# ---------------------------------------------------------------- the blocks


def step(name: str) -> dict:
    for s in read_json("adr-manifest.json")["steps"]:
        if s["name"] == name:
            return s
    raise Missing(f"step {name} in data/reference/adr-manifest.json")


def run_line(rel_manifest: str, m: dict | None = None) -> str:
    """Build, commit and machine of one step, from its manifest.json."""
    m = m if m is not None else read_json(rel_manifest)
    mach = m.get("machine") or {}
    ver = m.get("versions") or {}
    return (
        f"{ver.get('profile', '?')} build, {ver.get('rustc', '?')}, git commit "
        f"`{m.get('git_commit', '?')}`; machine: {mach.get('cpus', '?')} CPUs "
        f"({mach.get('cpu_model', '?')}), {mach.get('os_arch', '?')}, kernel "
        f"{mach.get('kernel', '?')}, memory {mach.get('mem_total', '?')}"
    )


def load_line(steps: list) -> str:
    """How busy the machine was over each step (`machine_load` of the step's
    manifest.json), or that the manifests say nothing."""
    parts = []
    for st in steps:
        name = st.get("name", "?")
        try:
            m = read_json(f"{name}/manifest.json")
        except (OSError, ValueError):
            m = {}
        busy = (m.get("machine_load") or {}).get("busy_cores")
        if busy is not None:
            parts.append(f"{name} {busy:.2f}")
    if not parts:
        return "The manifests record no load figure, so nothing here says how busy the machine was."
    return (
        "Machine busy over each step (mean busy CPUs, every process counted, the step's own "
        "among them; `machine_load` of its manifest.json): " + ", ".join(parts) + "."
    )


def commits_line(steps: list) -> str:
    """Which git commit and kernel each step's manifest.json records, when
    the steps do not share one (a step re-run into an existing pack), and
    how long the steps ran (the sum of `seconds` of adr-manifest.json)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for st in steps:
        name = st.get("name", "?")
        try:
            sm = read_json(f"{name}/manifest.json")
        except (Missing, OSError, ValueError):
            continue
        key = (sm.get("git_commit") or "?", (sm.get("machine") or {}).get("kernel") or "?")
        groups.setdefault(key, []).append(name)
    ran = sum(num(st.get("seconds")) for st in steps if st.get("seconds") is not None)
    out = f"The steps themselves ran {duration(ran)} (the sum of their `seconds`). "
    if len(groups) > 1:
        out += (
            "The steps do not share one build: "
            + "; ".join(f"{', '.join(names)} at git commit `{c}`, kernel {k}" for (c, k), names in groups.items())
            + " (each step's manifest.json). "
        )
    return out


def gen_pack_run(here: Path) -> str:
    """One paragraph: what wrote the pack, when, how long, on what."""
    m = read_json("adr-manifest.json")
    steps = m["steps"]
    took = (stamp(m["finished_at"]) - stamp(m["started_at"])).total_seconds()
    status: dict[str, int] = {}
    for s in steps:
        status[s["status"]] = status.get(s["status"], 0) + 1
    counts = ", ".join(f"{n} {k}" for k, n in sorted(status.items()))
    plan = "the quick plan (`--quick`)" if m.get("quick") else "the full plan"
    return (
        f"The committed pack was written by `{m['command']}` ({plan}, seed {m['seed']} for "
        f"every step), from {m['started_at']} to {m['finished_at']} ({duration(took)}); "
        f"{len(steps)} steps: {counts}. {run_line('sweep/manifest.json')[0].upper()}"
        f"{run_line('sweep/manifest.json')[1:]} (from `sweep/manifest.json`). "
        f"{commits_line(steps)}{load_line(m.get('steps') or [])} "
        f"{source(here, 'data/reference/adr-manifest.json', 'data/reference/sweep/manifest.json')}"
    )


def gen_pack_decision(here: Path) -> str:
    """The pack's decision and its status, as its document's first screen states them."""
    text = (PACK / "adr-006-evidence.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    try:
        at = lines.index("## Decision")
    except ValueError:
        raise SystemExit("data/reference/adr-006-evidence.md has no '## Decision' section")
    first = next(l for l in lines[at + 1:] if l.strip())
    # The document's links, relative to data/reference/, as links from here:
    # its own anchors into it, its sibling files (adr-006-revision.md, ...) beside it.
    doc = os.path.relpath(ROOT / "data/reference/adr-006-evidence.md", here.parent)

    def rebase(m: re.Match) -> str:
        target = m.group(1)
        if target.startswith("#"):
            return f"]({doc}{target})"
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("/"):
            return m.group(0)
        return f"]({os.path.relpath(PACK / target, here.parent)})"

    first = re.sub(r"\]\(([^)\s]+)\)", rebase, first)
    blocked = [l[2:] for l in lines[at + 1:] if l.startswith("- **Blocked by**")]
    if blocked:
        first += " " + " ".join(b.rstrip(".") + "." for b in blocked)
    return (
        f"Its decision, as the document states it: {first} "
        f"{source(here, 'data/reference/adr-006-evidence.md')}"
    )


def gen_pack_steps(here: Path) -> str:
    """The plan and what ran: one row per step of adr-manifest.json."""
    m = read_json("adr-manifest.json")
    rows = []
    for s in m["steps"]:
        report = f"data/reference/{s['name']}/report.md"
        out = link(here, report, f"{s['name']}/") if (ROOT / report).is_file() else f"{s['name']}/"
        cmd = " ".join([s["program"], *s["args"]])
        rows.append([out, s["title"], s["status"] + (f" ({s['unavailable']})" if s.get("unavailable") else ""),
                     str(s["exit_code"]), f(s["seconds"], 0), f"`{cmd}`"])
    return (
        table(["step", "what it measures", "status", "exit", "seconds", "command"], rows,
              ["l", "l", "l", "r", "r", "l"])
        + "\n\n" + source(here, "data/reference/adr-manifest.json")
    )


def trigger_rows() -> tuple[list[list[str]], int, list[str]]:
    """Headline verdict and counts per trigger over every results table of the pack."""
    steps = [s["name"] for s in read_json("adr-manifest.json")["steps"]
             if (PACK / s["name"] / "triggers.json").is_file()]
    verdicts: dict[str, list[str]] = {t: [] for t, _ in TRIGGERS}
    cells: set[tuple[str, str]] = set()
    for name in steps:
        for t in read_json(f"{name}/triggers.json"):
            verdicts.setdefault(t["trigger"], []).append(t["verdict"])
            cells.add((name, t["cell"]))
    rows = []
    for i, (t, what) in enumerate(TRIGGERS, 1):
        v = verdicts.get(t, [])
        head = max(v, key=lambda x: VERDICT_RANK.get(x, -1)) if v else "not in the pack"
        counts = " / ".join(str(v.count(k)) for k in ("fired", "ok", "insufficient_data", "not_evaluated"))
        rows.append([str(i), f"`{t}`: {what}", f"**{head}**" if head == "fired" else head, counts])
    return rows, len(cells), steps


def gen_pack_triggers(here: Path) -> str:
    rows, n, steps = trigger_rows()
    srcs = [f"data/reference/{s}/triggers.json" for s in steps]
    return (
        table(["#", "ADR-006 §6.5 trigger", "headline (the worst cell)", "fired / ok / insufficient_data / not_evaluated"],
              rows, ["r", "l", "l", "l"])
        + f"\n\nOver {n} cells of the pack's results tables ({', '.join(f'`{s}`' for s in steps)}); "
        "a headline is the worst verdict of any cell (fired > insufficient_data > ok > not_evaluated). "
        + source(here, *srcs)
    )


def gen_sweep_summary(here: Path) -> str:
    """The reference sweep per (TTL, margin), over its repeats (summary.csv)."""
    rows = []
    for r in read_csv("sweep/summary.csv"):
        n = int(r["n_repeats"])
        rows.append([
            ttl_label(num(r["lease_ms"])), f(num(r["margin"]), 2), str(n),
            f"{f(num(r['throughput_median']))} [{f(num(r['throughput_ci95_lo']))}, {f(num(r['throughput_ci95_hi']))}]",
            pct(num(r["abandonment_median"])),
            f"{ms_from_us(r['hb_rtt_corrected_p99_us'])} / {ms_from_us(r['hb_rtt_corrected_p999_us'])}",
            r["hb_corrected_count"],
            f"{f(num(r['m_min']), 3)} [{f(num(r['m_min_ci95_lo']), 3)}, {f(num(r['m_min_ci95_hi']), 3)}] {r['m_min_verdict']}",
            f"{r['trigger1_fired']} / {r['trigger3_fired']} / {r['trigger4_fired']} of {n}",
        ])
    m = read_json("sweep/manifest.json")
    g = m.get("grid_flags") or {}
    return (
        table(["TTL", "margin", "repeats", "payouts/s median [95 %]", "abandoned (median)",
               "pooled corrected p99 / p99.9 ms", "samples", "m_min [95 %]", "triggers 1 / 3 / 4 fired"],
              rows, ["l", "r", "r", "l", "r", "l", "r", "l", "l"])
        + f"\n\nGrid: `--ttl {','.join(g.get('--ttl', []))}`, margins "
        f"{', '.join(f'{x:g}' for x in g.get('--margin', []))}, `--repeat {g.get('--repeat', 1)}`, seed {m['seed']}. "
        + source(here, "data/reference/sweep/summary.csv", "data/reference/sweep/manifest.json")
    )


def freeze_ms(server_pause: str) -> float:
    """The freeze length of a `--server-pause EVERY:FOR` condition, in ms (for ordering rows)."""
    m = re.fullmatch(r"\s*[0-9.]+m?s:([0-9.]+)(ms|s)\s*", server_pause)
    if not m:
        return math.inf
    return float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)


def gen_freeze(here: Path) -> str:
    """The freeze sweep: the counts `bench` recorded per repeat, one row per
    (TTL, margin, heartbeat divisor, freeze length). No rate, no verdict: those
    are the evidence document's (its section 4)."""
    by: dict[tuple, list[dict]] = {}
    for r in read_csv("freeze/results.csv"):
        key = (num(r["lease_ms"]), num(r["margin"]), int(r["heartbeat_divisor"]), r["server_pause"])
        by.setdefault(key, []).append(r)
    rows = []
    for key in sorted(by, key=lambda k: (k[0], k[1], k[2], freeze_ms(k[3]))):
        lease, margin, k, pause = key
        rs = sorted(by[key], key=lambda r: int(r["repeat"]))

        def per_repeat(col: str) -> str:
            return ", ".join(r[col] for r in rs)

        opened = sorted({f"{r['idle_sessions']} + {r['workers']}" for r in rs})
        rows.append([
            ttl_label(lease), f(margin, 2), f"U/{k}", f"`{pause}`", str(len(rs)),
            opened[0] if len(opened) == 1 else ", ".join(f"{r['idle_sessions']} + {r['workers']}" for r in rs),
            per_repeat("server_pauses"), per_repeat("session_lost_deadline"), per_repeat("hb_gaps_over_window"),
        ])
    evidence = os.path.relpath(ROOT / "data/reference/adr-006-evidence.md", here.parent)
    return (
        table(["TTL", "margin", "heartbeat period", "server pause (every:for)", "repeats",
               "idle sessions + workers", "freezes (`server_pauses`)",
               "lost at the deadline (`session_lost_deadline`)", "gaps over the window (`hb_gaps_over_window`)"],
              rows, ["l", "r", "l", "l", "r", "l", "l", "l", "l"])
        + "\n\nEach count column lists the repeats in order (`repeat` 0, 1, …) as the results table "
        "records them; the SDK heartbeats every U/k, U = min(lease, session TTL) × (1 − margin). What a row amounts to, "
        "sessions lost per exposure (one freeze × one session open) against `--tolerance-lost-per-freeze`, "
        f"and its verdict are `bench adr`'s: [section 4 of the evidence document]({evidence}#4-the-freeze-condition). "
        + source(here, "data/reference/freeze/results.csv")
    )


def gen_adaptive(here: Path) -> str:
    """The adaptive policy against fixed 0.30, per TTL (both summary.csv files)."""
    fixed = {(num(r["lease_ms"]), round(num(r["margin"]), 4)): r for r in read_csv("sweep/summary.csv")}
    rows = []
    for r in read_csv("adaptive/summary.csv"):
        lease = num(r["lease_ms"])
        f30 = fixed.get((lease, 0.3))
        a, b = num(r["throughput_median"]), num(f30["throughput_median"]) if f30 else math.nan
        rows.append([
            ttl_label(lease), f"`{r['margin_policy']}`", r["n_repeats"], f(num(r["margin_effective_mean"]), 3),
            f"{f(a)} [{f(num(r['throughput_ci95_lo']))}, {f(num(r['throughput_ci95_hi']))}]",
            pct(num(r["abandonment_median"])),
            f"{f(b)} [{f(num(f30['throughput_ci95_lo']))}, {f(num(f30['throughput_ci95_hi']))}]" if f30 else "–",
            f"{a / b:.2f}×" if f30 else "–",
        ])
    return (
        table(["TTL", "policy", "repeats", "margin used (mean)", "adaptive payouts/s median [95 %]",
               "adaptive abandoned", "fixed 0.30 payouts/s median [95 %]", "adaptive ÷ fixed 0.30 (medians)"],
              rows, ["l", "l", "r", "r", "l", "r", "l", "r"])
        + "\n\n" + source(here, "data/reference/adaptive/summary.csv", "data/reference/sweep/summary.csv")
    )


def gen_projection(here: Path) -> str:
    """The production projection of the reference sweep (projection.csv)."""
    rs = read_csv("sweep/projection.csv")
    r0 = rs[0]
    rows = []
    for r in rs:
        m = f(num(r["margin"]), 2)
        rows.append([
            f"**{m}**" if r["production_margin"] == "true" else m,
            f(num(r["trigger1_budget_ms"]), 0), r["trigger1_verdict"],
            f(num(r["trigger3_window_ms"]), 0), f"**{r['trigger3_verdict']}**" if r["trigger3_verdict"] == "fired" else r["trigger3_verdict"],
            f"{f(num(r['headroom_ms']), 0)} [{f(num(r['headroom_ci95_lo_ms']), 0)}]",
        ])
    return (
        f"Production: lease {f(num(r0['lease_ms']), 0)} ms, session TTL {f(num(r0['session_ttl_ms']), 0)} ms, "
        f"rail read timeout {f(num(r0['rail_read_timeout_ms']), 0)} ms, worst-case hop {f(num(r0['worst_case_hop_ms']), 0)} ms. "
        f"Network: the corrected heartbeat RTT of {r0['cells_pooled']} cells pooled ({f(num(r0['rtt_samples']), 0)} samples), "
        f"p50 {ms_from_us(r0['rtt_corrected_p50_us'], 2)} ms, p99 {ms_from_us(r0['rtt_corrected_p99_us'], 2)} ms, "
        f"p99.9 {ms_from_us(r0['rtt_corrected_p999_us'], 2)} ms; the smallest margin whose trigger-1 budget covers that p99.9 "
        f"is {f(num(r0['min_margin']), 4)} [{f(num(r0['min_margin_ci95_lo']), 4)}, {f(num(r0['min_margin_ci95_hi']), 4)}] "
        f"({r0['min_margin_verdict']}).\n\n"
        + table(["margin", "trigger 1 budget ms", "trigger 1", "trigger 3 window ms", "trigger 3",
                 "headroom ms [pessimistic]"], rows, ["r", "r", "l", "r", "l", "r"])
        + "\n\nThe margin in bold is the one in force (`--projection-margin`). "
        + source(here, "data/reference/sweep/projection.csv")
    )


def gen_peer(here: Path) -> str:
    """fencepost ÷ etcd per (store, op, clients), ratios taken inside each repeat."""
    rows = read_csv("peer/peer.csv")
    etcd = {(r["op"], r["conc"], r["repeat"]): num(r["ops_per_s"]) for r in rows if r["system"] == "etcd"}
    keys = sorted({(r["store"], r["op"], int(r["conc"])) for r in rows if r["system"] == "fencepost"},
                  key=lambda k: (k[1] != "heartbeat", k[2], k[0]))
    out = []
    for store, op, conc in keys:
        mine = [r for r in rows if r["system"] == "fencepost" and r["store"] == store
                and r["op"] == op and int(r["conc"]) == conc]
        ratios = [num(r["ops_per_s"]) / etcd[(op, r["conc"], r["repeat"])] for r in mine
                  if (op, r["conc"], r["repeat"]) in etcd]
        fp = statistics.median(num(r["ops_per_s"]) for r in mine)
        et = statistics.median(etcd[(op, r["conc"], r["repeat"])] for r in mine if (op, r["conc"], r["repeat"]) in etcd)
        med, lo, hi, ci = spread(ratios)
        out.append([op, store, str(conc), str(len(ratios)), f(fp, 0), f(et, 0), f"**{med:.2f}×**",
                    f"{lo:.2f}–{hi:.2f}", f"{ci[0]:.2f}–{ci[1]:.2f}" if ci else "–"])
    m = read_json("peer/manifest.json")
    c = m["config"]
    return (
        table(["op", "fencepost store", "clients", "repeats", "fencepost ops/s (median)", "etcd ops/s (median)",
               "fencepost ÷ etcd (median)", "min–max", "95 % t-interval of the mean"],
              out, ["l", "l", "r", "r", "r", "r", "r", "l", "l"])
        + f"\n\n`bench peer`, seed {m['seed']}, {c['repeats']} repeats of {c['duration_s']:g} s measured after "
        f"{c['warmup_s']:g} s of warm-up per measurement, {', '.join(str(x) for x in c['concurrency'])} clients; "
        f"{run_line('peer/manifest.json')}. "
        + source(here, "data/reference/peer/peer.csv", "data/reference/peer/manifest.json")
        + " The verdicts against the targets are in " + link(here, "data/reference/peer/report.md") + "."
    )


def gen_pause(here: Path) -> str:
    rows = []
    for name in ("pause", "pause-uc03"):
        p = read_json(f"{name}/pause.json")
        take = [x["takeover_after_s"] * 1000 for x in p["paused"] if x.get("takeover_after_s") is not None]
        rows.append([
            link(here, f"data/reference/{name}/report.md", name), "on" if p["client_check"] else "**off** (UC-03)",
            p["config"].get("backend", "fencepost"), str(p["pauses"]),
            f"{p['fenced_out']} ({p['fenced_out_fence1']} / {p['fenced_out_fence2']})",
            str(p["duplicate_attempted"]), f"{p['paid']} / {p['payouts']}", str(p["paid_twice"]), str(p["stale_paid"]),
            "ok" if p["ledger_ok"] else "**broken**", "met" if p["expectation_met"] else "**not met**",
            f"{f(min(take), 0)}–{f(max(take), 0)}" if take else "–",
        ])
    return (
        table(["run", "client check", "backend", "pauses", "fenced out (fence 1 / 2)", "duplicates", "paid / seeded",
               "paid twice", "stale paid", "ledger", "expectation", "taken over after ms (min–max)"],
              rows, ["l", "l", "l", "r", "l", "r", "l", "r", "r", "l", "l", "l"])
        + "\n\n" + source(here, "data/reference/pause/pause.json", "data/reference/pause-uc03/pause.json")
    )


def gen_clock(here: Path) -> str:
    rows = read_csv("clock/clock.csv")
    fracs = []
    for r in rows:
        if r["grace_fraction"] not in fracs:
            fracs.append(r["grace_fraction"])
    by: dict[str, dict[str, str]] = {}
    for r in rows:
        by.setdefault(r["scenario"], {})[r["grace_fraction"]] = r["violations"]
    cases = rows[0]["cases"]
    bound = f(num(rows[0]["bound_ms"]), 0)
    body = [[f"`{s}`", *[v.get(x, "–") for x in fracs]] for s, v in by.items()]
    marg = read_csv("clock-margin/clock.csv")
    mj = read_json("clock-margin/clock.json")
    total = sum(int(r["violations"]) for r in marg)
    ncases = sum(int(r["cases"]) for r in marg)
    margin = mj["params"]["margin"]
    return (
        f"Violations (the client still believes it holds a grant the server reassigned) out of {cases} cases per point, "
        f"by the server's grace as a fraction of the bound θ + 2ρD + q = {bound} ms, client margin 0:\n\n"
        + table(["scenario", *[f"{x} × bound" for x in fracs]], body, ["l", *["r"] * len(fracs)])
        + f"\n\nWith client margin {margin}: {total} violations in {ncases} cases over every scenario and grace. "
        + source(here, "data/reference/clock/clock.csv", "data/reference/clock-margin/clock.csv")
    )


def gen_throttle(here: Path) -> str:
    t = read_json("throttle/throttle.json")
    trig = {(x["trigger"], x["cell"]): x for x in read_json("throttle/triggers.json")}
    rows = []
    for run in t["runs"]:
        r = run["row"]
        t1 = trig.get(("rtt_p99_vs_margin", r["cell"]), {})
        t5 = trig.get(("autopilot_throttling", r["cell"]), {})
        rows.append([
            f"`{r['cell']}`", str(r["workers"]), ms_from_us(r["hb_rtt_p99_us"], 2),
            f"{ms_from_us(r['hb_rtt_corrected_p50_us'], 2)} / {ms_from_us(r['hb_rtt_corrected_p99_us'], 2)} "
            f"[{ms_from_us(r['hb_rtt_corrected_p99_lo_us'], 2)}, {ms_from_us(r['hb_rtt_corrected_p99_hi_us'], 2)}]",
            ms_from_us(r["hb_tick_lag_p99_us"], 2), f(r["hb_corrected_count"], 0), f(r["throughput_per_s"], 1),
            f(r["cpu_workers_s"], 2), f(num(t5.get("observed")), 3), t1.get("verdict", "–"), t5.get("verdict", "–"),
        ])
    q = t["quota"]
    r0 = t["runs"][0]["row"]
    return (
        table(["run", "worker processes", "raw p99 ms", "corrected p50 / p99 [95 %] ms", "tick lag p99 ms",
               "corrected samples", "payouts/s", "worker CPU s", "margin needed", "trigger 1", "trigger 5"],
              rows, ["l", "r", "r", "l", "r", "r", "r", "r", "r", "l", "l"])
        + f"\n\nQuota {q['quota_us']} µs per {q['period_us']} µs; TTL {ttl_label(r0['lease_ms'])} (session "
        f"{f(r0['session_ttl_ms'], 0)} ms), {f(r0['duration_s'], 1)} s per run, seed {r0['seed']}, "
        f"{r0.get('build_profile', '?')} build. "
        + source(here, "data/reference/throttle/throttle.json", "data/reference/throttle/triggers.json")
    )


def gen_chaos(here: Path) -> str:
    c = read_json("chaos/chaos.json")
    cfg = c["config"]
    counters = [
        ("runs", c["runs"]), ("operations checked", c["operations_checked"]),
        ("indeterminate (killed mid-operation)", c["indeterminate"]),
        ("paid twice", c["paid_twice"]), ("stale paid", c["stale_paid"]),
        ("token regressions", c["token_regressions"]), ("history violations", c["history_violations"]),
        ("trigger-4 events (fence-outs of believed-held submits)", c["trigger4_events"]),
        ("fence refusals (ledger)", c["fenced_out"]), ("payouts paid", c["paid"]),
        ("fault kinds exercised", c["fault_kinds_exercised"]), ("overlapping fault pairs", c["overlaps"]),
    ]
    faults = sorted(c["faults"].items())
    return (
        table(["counter", "value"], [[k, f(v, 0)] for k, v in counters], ["l", "r"])
        + "\n\n"
        + table(["fault", "applied"], [[f"`{k}`", str(v)] for k, v in faults], ["l", "r"])
        + f"\n\n`--runs {cfg['runs']} --seed {cfg['seed']}`, runtime {cfg['runtime']}, lease {cfg['ttl_ms']} ms, "
        f"{cfg['workers']} worker processes, {cfg['duration_ms']} ms per run, {f(c['elapsed_s'], 0)} s in all. "
        + source(here, "data/reference/chaos/chaos.json")
    )


def gen_chaos_replicas(here: Path) -> str:
    """`experiments chaos --replicas 3` over PostgreSQL (data/chaos-replicas/)."""
    return gen_chaos_run(here, "chaos-replicas")


def gen_chaos_docker(here: Path) -> str:
    """`experiments chaos --runtime docker` (data/chaos-docker/)."""
    return gen_chaos_run(here, "chaos-docker")


def gen_chaos_docker_replicas(here: Path) -> str:
    """`experiments chaos --runtime docker --replicas 3` (data/chaos-docker-replicas/)."""
    return gen_chaos_run(here, "chaos-docker-replicas")


def gen_chaos_run(here: Path, name: str) -> str:
    """The counters, faults and coverage of one recorded chaos run (data/NAME/)."""
    c = read_run(name, "chaos.json")
    m = read_run(name, "manifest.json")
    cfg = c["config"]
    counters = [
        ("runs", c["runs"]), ("operations checked", c["operations_checked"]),
        ("indeterminate (killed mid-operation)", c["indeterminate"]),
        ("paid twice", c["paid_twice"]), ("stale paid", c["stale_paid"]),
        ("token regressions", c["token_regressions"]),
        ("history violations (rules 4–6)", c["history_violations"]),
        ("of which grants overlapping in the lock's time (rule 6)", c.get("grant_overlaps", 0)),
        ("epochs taken by two replicas", c.get("epoch_conflicts", 0)),
        # Absent from runs made before the breach audit existed: not measured, not 0.
        ("writes a deposed epoch committed (the store's breach audit)", c.get("epoch_breaches")),
        ("trigger-4 events (fence-outs of believed-held submits)", c["trigger4_events"]),
        ("fence refusals (ledger)", c["fenced_out"]), ("payouts paid", c["paid"]),
        ("overlapping fault pairs", c["overlaps"]),
    ]
    faults = sorted(c["faults"].items())
    cov = sorted(c.get("coverage", {}).items())
    runs = c["runs"]
    return (
        table(["counter", "value"], [[k, f(v, 0)] for k, v in counters], ["l", "r"])
        + "\n\n"
        + table(["fault", "applied"], [[f"`{k}`", str(v)] for k, v in faults], ["l", "r"])
        + "\n\n"
        + table(
            ["guarded situation", f"runs with it (of {runs})", "occurrences"],
            [[f"`{k}`", str(v["runs"]), f(v["occurrences"], 0)] for k, v in cov],
            ["l", "r", "r"],
        )
        + f"\n\n`--runtime {cfg['runtime']} --replicas {cfg['replicas']} --runs {cfg['runs']} --seed {cfg['seed']}`"
        + (f", PostgreSQL in a container per run ({cfg['images']['postgres']})"
           if (cfg.get("images") or {}).get("postgres") else "")
        + f", leader lease {cfg['leader_lease_ms']} ms, PostgreSQL restarts "
        f"{'drawn' if cfg.get('pg_restart') else 'not drawn'}, "
        f"lease {cfg['ttl_ms']} ms, {cfg['workers']} worker processes, {cfg['duration_ms']} ms per run, "
        f"{f(c['elapsed_s'], 0)} s in all, {m['versions']['profile']} build, commit {m.get('git_commit', 'unknown')}. Source: "
        + ", ".join(link(here, f"data/{name}/{n}") for n in ("chaos.json", "manifest.json"))
        + " (written by `experiments chaos`)."
    )


def peer_label(r: dict) -> str:
    """`system/store`, and the client when it is not the system's own (as bench peer labels rows)."""
    own = "etcd-client" if r["system"] == "etcd" else "sdk"
    return f"{r['system']}/{r['store']}" + ("" if r["client"] == own else f" {r['client']}")


def peer_run_line(here: Path, m: dict) -> str:
    c = m["config"]
    return (
        f"`bench peer --ops {','.join(c['ops'])}`, seed {m['seed']}, {c['repeats']} repeats of "
        f"{c['duration_s']:g} s after {c['warmup_s']:g} s of warm-up per measurement, "
        f"{', '.join(str(x) for x in c['concurrency'])} clients; {run_line('', m)}. Source: "
        + ", ".join(link(here, f"data/peer-limits/{n}") for n in ("peer.csv", "manifest.json"))
        + " (written by `bench peer`). The verdicts are in " + link(here, "data/peer-limits/report.md") + "."
    )


def gen_peer_ceiling(here: Path) -> str:
    """Grants against the store directory's fsync ceiling (data/peer-limits/)."""
    rows = read_run("peer-limits", "peer.csv")
    m = read_run("peer-limits", "manifest.json")
    out = []
    for (lab, conc), st in ceiling_stats(rows).items():
        per, of, fsy, gs, wtx, free = (st[k] for k in ("per", "of", "fsy", "gs", "wtx", "free"))
        mm = lambda v, d: f"{statistics.median(v):,.{d}f} ({min(v):,.{d}f}–{max(v):,.{d}f})"
        out.append([lab, str(conc), str(len(per)), mm(gs, 0), mm(fsy, 0), mm(per, 2),
                    mm(wtx, 2) if wtx else "–", mm(of, 2), mm(free, 2) if free else "–"])
    return (
        table(["system", "clients", "repeats", "grants/s", "fsyncs/s of its directory", "grants per flush",
               "writes per transaction", "share of the ceiling",
               "share a free store would reach (½ floor requests/s ÷ ceiling)"],
              out, ["l", "r", "r", "r", "r", "r", "r", "r", "r"])
        + "\n\nMedian (min–max) over repeats. " + peer_run_line(here, m)
    )


def ceiling_stats(rows: list[dict]) -> dict[tuple[str, int], dict[str, list[float]]]:
    """Per (system, clients) of a `bench peer` run, over its repeats: grants per flush (`per`), share of the
    fsync ceiling (`of`), fsyncs/s (`fsy`), grants/s (`gs`), writes per transaction (`wtx`) and the share a
    store that cost nothing would reach (`free`)."""
    fs = {(f"{r['system']}/{r['store']}", r["repeat"]): num(r["ops_per_s"]) for r in rows if r["op"] == "fsync"}
    floor = {(peer_label(r), r["conc"], r["repeat"]): num(r["ops_per_s"]) for r in rows if r["op"] == "floor"}
    keys = sorted({(peer_label(r), int(r["conc"])) for r in rows if r["op"] == "grant"}, key=lambda k: (k[1], k[0]))
    stats = {}
    for lab, conc in keys:
        per, of, fsy, gs, wtx, free = [], [], [], [], [], []
        for r in rows:
            if r["op"] != "grant" or peer_label(r) != lab or int(r["conc"]) != conc:
                continue
            f_ = fs.get((f"{r['system']}/{r['store']}", r["repeat"]))
            tx = int(r["store_tx"]) if r.get("store_tx") else 0
            if not f_ or tx <= 0:
                continue
            g = int(r["ops"]) / tx
            per.append(g); fsy.append(f_); gs.append(num(r["ops_per_s"])); of.append(num(r["ops_per_s"]) / (f_ * g))
            if r.get("store_writes"):
                wtx.append(int(r["store_writes"]) / tx)
            # A grant is two requests (L4, L6): with a store that cost nothing,
            # grants/s could reach at most half the floor's requests/s.
            fl = floor.get((lab, r["conc"], r["repeat"]))
            if fl:
                free.append(min(1.0, fl / 2 / (f_ * g)))
        if per:
            stats[(lab, conc)] = {"per": per, "of": of, "fsy": fsy, "gs": gs, "wtx": wtx, "free": free}
    return stats


def gen_peer_wrk(here: Path) -> str:
    """wrk on L2 and /healthz in interleaved pairs, and the profiles (data/peer-limits/)."""
    pairs = read_run("peer-limits", "wrk-pairs.csv")
    ratios = [num(r["ratio"]) for r in pairs]
    med, lo, hi, _ = spread(ratios)
    rows = [[r["pair"], f(num(r["heartbeat_per_s"]), 0), f(num(r["healthz_per_s"]), 0), f"{num(r['ratio']):.2f}"]
            for r in pairs]
    shares = []
    for name in ("heartbeat", "healthz"):
        path = ROOT / "data" / "peer-limits" / f"profile-{name}.txt"
        if not path.is_file():
            raise Missing(f"data/peer-limits/profile-{name}.txt")
        dso = {}
        for line in path.read_text().splitlines()[1:6]:
            parts = line.split()
            if len(parts) == 2 and parts[0].endswith("%"):
                dso[parts[1]] = parts[0]
        shares.append([name, dso.get("lock-server", "–"), dso.get("libc.so.6", "–"), dso.get("[kernel.kallsyms]", "–")])
    return (
        table(["pair", "heartbeat requests/s", "healthz requests/s", "heartbeat ÷ healthz"], rows, ["r", "r", "r", "r"])
        + f"\n\nMedian {med:.2f} ({lo:.2f}–{hi:.2f}) over {len(ratios)} interleaved pairs.\n\n"
        + table(["profiled load", "lock-server code", "libc", "kernel"], shares, ["l", "r", "r", "r"])
        + "\n\nShare of the lock-server process's CPU samples (perf, software clock) under each load. "
        "`scripts/profile-heartbeat.sh` (release lock-server on `memory:`, `wrk -t1 -c16`). Source: "
        + ", ".join(link(here, f"data/peer-limits/{n}") for n in ("wrk-pairs.csv", "profile-heartbeat.txt", "profile-healthz.txt"))
        + "."
    )


def gen_peer_grant_profile(here: Path) -> str:
    """Where the CPU of 64 clients' grants goes (data/peer-limits/profile-grants.txt)."""
    rel = "data/peer-limits/profile-grants.txt"
    path = ROOT / rel
    if not path.is_file():
        raise Missing(rel)
    sections: dict[str, list[tuple[str, str]]] = {}
    runs, current = [], None
    for line in path.read_text().splitlines():
        if line.startswith("# ["):
            runs.append(line[2:].strip())
        elif line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current and line.strip():
            share, _, what = line.strip().partition("  ")
            sections[current].append((share, what.strip()))
    procs = sections.get("share of all samples by process", [])[:6]
    if not procs:
        raise Missing(f"{rel}: no share by process")
    objs = sections.get("lock-server: by shared object (share of all samples)", [])[:4]
    syms = sections.get("lock-server: top symbols (share of all samples)", [])[:5]
    loads = "; ".join(f"`{r}`" for r in runs)
    return (
        table(["process (all samples of the run)", "share"],
              [[("idle (`swapper`)" if w == "swapper" else f"`{w}`"), s] for s, w in procs], ["l", "r"])
        + "\n\n"
        + table(["lock-server: shared object", "share of all samples"], [[f"`{w}`", s] for s, w in objs], ["l", "r"])
        + "\n\n"
        + table(["lock-server: hottest symbols", "share of all samples"],
                [[f"`{' '.join(w.split()[1:])[:90]}` ({w.split()[0]})", s] for s, w in syms], ["l", "r"])
        + f"\n\n`scripts/profile-grants.sh`: one `bench peer --ops grant --concurrency 64` (every store, etcd beside them) under a system-wide perf profile (software clock); its measurements: {loads}. "
        + f"Source: {link(here, rel)}."
    )


def read_commented_csv(rel: str) -> tuple[str, list[dict]]:
    """A CSV under the repository whose first line may be a `#` comment
    (what the run compared, written by the script that made it): that line,
    and the rows."""
    path = ROOT / rel
    if not path.is_file():
        raise Missing(rel)
    lines = path.read_text().splitlines()
    first = lines[0].lstrip("# ") if lines and lines[0].startswith("#") else ""
    return first, list(csv.DictReader(l for l in lines if not l.startswith("#")))


def gen_peer_pg_floor(here: Path) -> str:
    """One client's grants: PostgreSQL's own floor, the lock-server on it, etcd (data/peer-limits/pg-floor.csv)."""
    rel = "data/peer-limits/pg-floor.csv"
    first, recs = read_commented_csv(rel)
    if not recs:
        raise Missing(f"{rel}: no pairs")
    cols = [("pgbench_grants_per_s", "PostgreSQL alone, autocommitted"),
            ("pgbench_fenced_grants_per_s", "PostgreSQL alone, the leader's fenced transactions"),
            ("pgbench_fenced_one_grants_per_s", "PostgreSQL alone, the leader's one-statement writes"),
            ("fencepost_postgres_grants_per_s", "fencepost/postgres (lock-server, SDK client)"),
            ("etcd_grants_per_s", "etcd/bbolt")]
    rows = [[r["pair"]] + [f(num(r[c]), 0) for c, _ in cols] for r in recs]
    def ratio(a, b):
        m, lo, hi, _ = spread([num(r[a]) / num(r[b]) for r in recs])
        return f"**{m:.2f}×** ({lo:.2f}–{hi:.2f})"
    ratios = [
        ["fencepost/postgres ÷ etcd (target ≥ 1.0)", ratio("fencepost_postgres_grants_per_s", "etcd_grants_per_s")],
        ["PostgreSQL's floor for the leader's one-statement writes ÷ etcd",
         ratio("pgbench_fenced_one_grants_per_s", "etcd_grants_per_s")],
        ["fencepost/postgres ÷ that floor",
         ratio("fencepost_postgres_grants_per_s", "pgbench_fenced_one_grants_per_s")],
    ]
    def ms(values):
        m, lo, hi, _ = spread(values)
        return f"{m:.3f} ({lo:.3f}–{hi:.3f})"
    # One grant is two transactions (L4, L6): pgbench's ms per fenced one.
    pg_tx = [1000 / (2 * num(r["pgbench_fenced_grants_per_s"])) for r in recs]
    pg_one = [1000 / (2 * num(r["pgbench_fenced_one_grants_per_s"])) for r in recs]
    hops = [
        ["PostgreSQL alone: one of the leader's pipelined fenced transactions (pgbench)", ms(pg_tx)],
        ["PostgreSQL alone: one of the leader's one-statement writes (pgbench), what L4 and L6 send", ms(pg_one)],
        ["the lock-server's store transaction (`lock_store_commit_duration_seconds`)",
         ms([num(r["split_store_commit_ms"]) for r in recs])],
        ["the lock-server's L4 answer, store transaction included (`lock_grant_duration_seconds`)",
         ms([num(r["split_server_l4_ms"]) for r in recs])],
        ["the client's L4 round trip (Python `http.client`, keep-alive)",
         ms([num(r["split_client_l4_ms"]) for r in recs])],
    ]
    store_over_pg = spread([num(r["split_store_commit_ms"]) / t for r, t in zip(recs, pg_one)])
    return (
        table(["pair"] + [f"{w} grants/s" for _, w in cols], rows, ["r"] * (1 + len(cols)))
        + "\n\n"
        + table(["ratio within each pair", "median (min–max)"], ratios, ["l", "r"])
        + "\n\n"
        + table(["one grant's transaction, hop by hop (means over each pair's window)", "ms, median (min–max)"],
                hops, ["l", "r"])
        + f"\n\nThe lock-server's store transaction ÷ PostgreSQL's own one-statement write, within each pair: "
        f"**{store_over_pg[0]:.2f}×** ({store_over_pg[1]:.2f}–{store_over_pg[2]:.2f}).\n\n"
        f"From its file: {first}. Source: {link(here, rel)}."
    )


def read_ab_pairs(rel: str) -> tuple[str, list[dict[str, dict]]]:
    """An interleaved A/B run's CSV (`pair`, `build` = a or b, …): what it
    compared (its first line), and each pair's rows by build, for the pairs
    that have both."""
    first, recs = read_commented_csv(rel)
    by: dict[str, dict[str, dict]] = {}
    for r in recs:
        by.setdefault(r["pair"], {})[r["build"]] = r
    pairs = [p for p in by.values() if "a" in p and "b" in p]
    if not pairs:
        raise Missing(f"{rel}: no pairs with both builds")
    return first, pairs


def gen_peer_ab(here: Path) -> str:
    """Interleaved A/B runs of heartbeat-path changes (data/peer-limits/ab/)."""
    runs = [("server-path", "the server's L2 path, same `{}` body"),
            ("no-body", "the server's path and no heartbeat body (the SDK's L2 now)"),
            ("reply-in-place", "one table lookup and the reply written in place, on top")]
    rows, rels = [], []
    for name, what in runs:
        rel = f"data/peer-limits/ab/{name}.csv"
        first, pairs = read_ab_pairs(rel)
        speed = [num(p["b"]["heartbeat_per_s"]) / num(p["a"]["heartbeat_per_s"]) for p in pairs]
        ratio = {b: [num(p[b]["heartbeat_over_healthz"]) for p in pairs] for b in "ab"}
        sm, slo, shi, _ = spread(speed)
        verdict = "kept: every pair faster" if slo > 1 else "dropped: not shown in every pair"
        def mmm(v):
            m, lo, hi, _ = spread(v)
            return f"{m:.2f} ({lo:.2f}–{hi:.2f})"
        rows.append([what, str(len(pairs)), f"**{sm:.3f}×** ({slo:.3f}–{shi:.3f})",
                     mmm(ratio["a"]), mmm(ratio["b"]), verdict])
        rels.append((rel, first))
    return (
        table(["change (B against A)", "pairs", "B ÷ A heartbeats/s", "A heartbeat ÷ healthz", "B heartbeat ÷ healthz", "verdict"],
              rows, ["l", "r", "r", "r", "r", "l"])
        + "\n\nMedian (min–max) over interleaved pairs in one run each (`scripts/ab-heartbeat.sh`: both builds "
        "serving at once on `memory:`, `wrk -t1 -c16` for 4 s per load, the order alternating by pair); a change is "
        "kept only when B is faster in every pair. What each run compared, from its file: "
        + "; ".join(f"{link(here, rel, Path(rel).name)}: {first}" for rel, first in rels)
        + "."
    )


def gen_peer_ab_grants(here: Path) -> str:
    """Interleaved A/B runs of changes to one client's grant on PostgreSQL (data/peer-limits/ab/)."""
    runs = [("prepared-fence", "the fence and the breach audit prepared once per connection, not planned per transaction"),
            ("one-wakeup", "on top: only COMMIT's answer wakes the drain task, not each statement's"),
            ("one-statement", "on top, instead: a leader's lone grant, renewal or release as one fenced, audited statement")]
    rows, rels = [], []
    for name, what in runs:
        rel = f"data/peer-limits/ab/{name}.csv"
        first, pairs = read_ab_pairs(rel)
        def ratio(col):
            return spread([num(p["b"][col]) / num(p["a"][col]) for p in pairs])
        g, tx = ratio("grants_per_s"), ratio("store_commit_ms")
        verdict = "kept: every pair faster" if g[1] > 1 else "dropped: not shown in every pair"
        rows.append([what, str(len(pairs)), f"**{g[0]:.3f}×** ({g[1]:.3f}–{g[2]:.3f})",
                     f"{tx[0]:.3f}× ({tx[1]:.3f}–{tx[2]:.3f})", verdict])
        rels.append((rel, first))
    return (
        table(["change (B, against A)", "pairs", "B ÷ A grants/s, median (min–max)",
               "B ÷ A store transaction time", "verdict"], rows, ["l", "r", "r", "r", "l"])
        + "\n\nFrom each file: "
        + "; ".join(f"{link(here, rel, Path(rel).name)}: {first}" for rel, first in rels)
        + "."
    )


def heartbeat_floor_pairs(rows: list[dict]) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """(heartbeat ops/s, floor ops/s) of each repeat, by (system, clients), from a `bench peer` run."""
    floor = {(peer_label(r), r["conc"], r["repeat"]): num(r["ops_per_s"]) for r in rows if r["op"] == "floor"}
    keys = sorted({(peer_label(r), int(r["conc"])) for r in rows if r["op"] == "heartbeat"},
                  key=lambda k: (k[1], k[0]))
    out = {}
    for lab, conc in keys:
        pairs = [(num(r["ops_per_s"]), floor[(lab, r["conc"], r["repeat"])]) for r in rows
                 if r["op"] == "heartbeat" and peer_label(r) == lab and int(r["conc"]) == conc
                 and (lab, r["conc"], r["repeat"]) in floor]
        if pairs:
            out[(lab, conc)] = pairs
    return out


def target_verdict(values: list[float], target: float, most: bool = False) -> str:
    """A performance target over repeats (or pairs): met in all of them, met by the median only, or not met;
    `most` makes it an upper bound."""
    ok = (lambda x: x <= target) if most else (lambda x: x >= target)
    if all(ok(x) for x in values):
        return f"met in all {len(values)}"
    if ok(statistics.median(values)):
        return f"median met; not in {sum(not ok(x) for x in values)} of {len(values)}"
    return "**not met**"


def self_test() -> None:
    """The verdicts' own checks (run by --check): each case must give its verdict, or the docs would say
    "met" where a run did not."""
    cases = [
        (([0.95, 0.91, 1.2], 0.9, False), "met in all 3"),
        (([0.95, 0.85, 1.2], 0.9, False), "median met; not in 1 of 3"),
        (([0.80, 0.85, 0.95], 0.9, False), "**not met**"),
        (([1.9, 2.1, 1.0], 2.0, True), "median met; not in 1 of 3"),
        (([2.5, 2.1, 1.0], 2.0, True), "**not met**"),
        (([0.7, 1.2], 2.0, True), "met in all 2"),
    ]
    for (values, target, most), want in cases:
        got = target_verdict(values, target, most)
        if got != want:
            raise AssertionError(f"target_verdict({values}, {target}, most={most}) = {got!r}, not {want!r}")


def gen_peer_targets(here: Path) -> str:
    """The performance targets, each with its measured value and a verdict, from the runs below it."""
    def mm(v):
        return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"

    rows = read_run("peer-limits", "peer.csv")
    out = []
    pairs = heartbeat_floor_pairs(rows)
    for lab in ("fencepost/sqlite", "fencepost/postgres", "etcd/bbolt"):
        v = [h / fl for h, fl in pairs.get((lab, 16), [])]
        if v:
            mine = lab.startswith("fencepost")
            out.append([f"heartbeat ÷ floor, 16 clients, `bench peer`: ≥ 0.9" if mine else "the same, etcd beside it",
                        lab, mm(v), target_verdict(v, 0.9) if mine else "no target"])
    wrk = [num(r["ratio"]) for r in read_run("peer-limits", "wrk-pairs.csv")]
    out.append(["heartbeat ÷ healthz, `wrk -t1 -c16`: ≥ 0.9", "fencepost/memory", mm(wrk), target_verdict(wrk, 0.9)])
    ceil = ceiling_stats(rows)
    for lab in ("fencepost/sqlite", "fencepost/postgres"):
        st = ceil.get((lab, 64))
        if not st:
            continue
        out.append(["grants per flush, 64 clients: ≥ 8", lab, mm(st["per"]), target_verdict(st["per"], 8)])
        v = target_verdict(st["of"], 0.5)
        if st["free"] and max(st["free"]) < 0.5:
            v += f"; a store that cost nothing would reach {mm(st['free'])} (the requests bound it)"
        out.append(["grants/s ÷ (fsyncs/s × grants per flush), 64 clients: ≥ 0.5 (within 2×)", lab,
                    mm(st["of"]), v])
    _, floor_recs = read_commented_csv("data/peer-limits/pg-floor.csv")
    v = [num(r["fencepost_postgres_grants_per_s"]) / num(r["etcd_grants_per_s"]) for r in floor_recs]
    out.append(["one client's grants ÷ etcd's, interleaved pairs of `scripts/pg-floor.sh`: ≥ 1.0",
                "fencepost/postgres", mm(v), target_verdict(v, 1.0)])
    g1 = {(peer_label(r), r["repeat"]): num(r["ops_per_s"]) for r in rows if r["op"] == "grant" and r["conc"] == "1"}
    v = [g1[(lab, rep)] / g1[("etcd/bbolt", rep)] for (lab, rep) in g1
         if lab == "fencepost/postgres" and ("etcd/bbolt", rep) in g1]
    if v:
        out.append(["the same in the `bench peer` run's repeats: ≥ 1.0", "fencepost/postgres", mm(v), target_verdict(v, 1.0)])
    srows, _ = sessions_rows()
    for lab in ("fencepost/sqlite", "fencepost/postgres", "etcd/bbolt"):
        v, thin = sessions_p99_ratios(srows, lab, 100, 10_000, 1000)
        if not v:
            continue
        mine = lab.startswith("fencepost")
        out.append(["heartbeat p99 at 10,000 sessions ÷ at 100: ≤ 2" if mine else "the same, etcd beside it", lab,
                    mm(v), ("insufficient data" if thin else target_verdict(v, 2.0, most=True)) if mine else "no target"])
    return (
        table(["performance target", "system", "measured, median (min–max)", "verdict over repeats or pairs"],
              out, ["l", "l", "r", "l"])
        + "\n\nEach value is taken within one repeat or pair, as everywhere on this page; a target is met in all "
        "when every repeat meets it. The runs, and how each was measured, are in the sections below. Sources: "
        + ", ".join(link(here, r) for r in ("data/peer-limits/peer.csv", "data/peer-limits/wrk-pairs.csv",
                                             "data/peer-limits/pg-floor.csv", "data/peer-sessions/peer_sessions.csv"))
        + "."
    )


def gen_peer_floor(here: Path) -> str:
    """Heartbeat ÷ floor per system and clients (data/peer-limits/)."""
    rows = read_run("peer-limits", "peer.csv")
    m = read_run("peer-limits", "manifest.json")
    c = m["config"]

    out = []
    for (lab, conc), pairs in heartbeat_floor_pairs(rows).items():
        med, lo, hi, ci = spread([h / fl for h, fl in pairs])
        out.append([lab, str(conc), str(len(pairs)), f(statistics.median(h for h, _ in pairs), 0),
                    f(statistics.median(fl for _, fl in pairs), 0), f"**{med:.2f}**", f"{lo:.2f}–{hi:.2f}",
                    f"{ci[0]:.2f}–{ci[1]:.2f}" if ci else "–"])
    return (
        table(["system", "clients", "repeats", "heartbeat ops/s (median)", "floor ops/s (median)",
               "heartbeat ÷ floor (median)", "min–max", "95 % t-interval of the mean"],
              out, ["l", "r", "r", "r", "r", "r", "l", "l"])
        + "\n\n" + peer_run_line(here, m)
    )


def gen_failover(here: Path) -> str:
    fo = read_json("failover/failover.json")
    rows = []
    for x in fo["faults"]:
        if x.get("skipped"):
            rows.append([f"`{x['fault']}`", "skipped: " + str(x["skipped"]), "", "", "", "", ""])
            continue
        rows.append([
            f"`{x['fault']}`", f(x["at_s"], 2), f"replica {x['leader_before']} → replica {x['leader_after']}",
            f(x["time_to_leader_ms"], 0), f(x["min_throughput_per_s"], 1), f(x["below_half_s"], 1),
            "–" if x["thawed_2xx"] is None else str(x["thawed_2xx"]),
        ])
    r = fo["row"]
    zero = ", ".join(f"{k} = {v}" for k, v in fo["must_be_zero"])
    return (
        table(["fault", "at s", "leader before → after", "time to a serving leader ms", "worst 500 ms bucket, payouts/s",
               "under half the baseline, s", "2xx from the thawed leader"], rows,
              ["l", "r", "l", "r", "r", "r", "r"])
        + f"\n\nLeader lease {f(fo['leader_lease_ms'], 0)} ms; {r['workers']} workers, lease {f(r['lease_ms'], 0)} ms, "
        f"session {f(r['session_ttl_ms'], 0)} ms, seed {fo['seed']}. Baseline (median 500 ms bucket before the first "
        f"fault) {f(fo['baseline_per_s'], 1)} payouts/s. Over the window: paid {f(r['payouts_paid'], 0)} "
        f"({f(r['throughput_per_s'], 1)}/s); sessions lost {r['session_lost']} (expired {r['session_lost_expired']}, "
        f"unknown {r['session_lost_unknown']}, deadline {r['session_lost_deadline']}); handles lost while held "
        f"{r['lock_lost']}; abandoned for insufficient lease {r['abandoned_insufficient_lease']}; heartbeats "
        f"{r['hb_timeouts']} timed out and {r['hb_errors']} failed of {r['hb_attempts']}. Must be zero: {zero}. "
        + source(here, "data/reference/failover/failover.json")
    )


def gen_toolchain(here: Path) -> str:
    """The Rust the workspace needs, from Cargo.toml (not a measurement, but it drifts too)."""
    ws = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]
    return (
        f"- **Rust {ws['rust-version']} or newer** (`rust-version` in {link(here, 'Cargo.toml', 'Cargo.toml')}; "
        f"edition {ws['edition']}), with `cargo`, `rustfmt` and `clippy`."
    )


def gen_proxy_overhead(here: Path) -> str:
    m = read_json("sweep/manifest.json")
    p = m.get("proxy_overhead")
    if not p:
        return "The reference sweep's manifest records no proxy overhead."
    return (
        f"In the reference sweep ({p['samples']} interleaved heartbeats each way): direct p50 / p99 "
        f"{p['direct_p50_us']} / {p['direct_p99_us']} µs, through the zero-delay proxy "
        f"{p['proxied_p50_us']} / {p['proxied_p99_us']} µs, so the proxy adds {p['overhead_p50_us']} µs at p50 and "
        f"{p['overhead_p99_us']} µs at p99. " + source(here, "data/reference/sweep/manifest.json")
    )


def gen_http_client(here: Path) -> str:
    """The SDK's HTTP client ÷ hyper's pooled client, per (op, clients), per repeat."""
    rows = read_run("http-client", "peer.csv")
    m = read_run("http-client", "manifest.json")
    c = m["config"]

    def per_cpu(r: dict) -> float:
        cpu = num(r["cpu_bench_s"])
        return num(r["ops"]) / cpu if cpu > 0 else math.nan

    fp = [r for r in rows if r["system"] == "fencepost"]
    hyper = {(r["store"], r["op"], r["conc"], r["repeat"]): r for r in fp if r["client"] == "hyper-legacy"}
    keys = sorted({(r["store"], r["op"], int(r["conc"])) for r in fp}, key=lambda k: (k[1], k[2], k[0]))
    out = []
    for store, op, conc in keys:
        pairs = [(r, hyper[(store, op, r["conc"], r["repeat"])]) for r in fp
                 if r["client"] == "sdk" and r["store"] == store and r["op"] == op
                 and int(r["conc"]) == conc and (store, op, r["conc"], r["repeat"]) in hyper]
        if not pairs:
            continue
        cpu = [per_cpu(a) / per_cpu(b) for a, b in pairs]
        ops = [num(a["ops_per_s"]) / num(b["ops_per_s"]) for a, b in pairs]
        us = lambda rs: statistics.median(num(r["cpu_bench_s"]) * 1e6 / num(r["ops"]) for r in rs)
        med, lo, hi, ci = spread(cpu)
        omed, olo, ohi, _ = spread(ops)
        verdict = ("the SDK's client is measurably better" if ci and ci[0] > 1 else
                   "hyper's pooled client is measurably better" if ci and ci[1] < 1 else
                   f"not resolved at {len(cpu)} repeats")
        out.append([op, store, str(conc), str(len(cpu)), f(us([a for a, _ in pairs]), 1),
                    f(us([b for _, b in pairs]), 1), f"**{med:.2f}×**", f"{lo:.2f}–{hi:.2f}",
                    f"{ci[0]:.2f}–{ci[1]:.2f}" if ci else "–", f"{omed:.2f}× ({olo:.2f}–{ohi:.2f})", verdict])
    return (
        table(["op", "store", "clients", "repeats", "SDK client CPU µs/op", "hyper client CPU µs/op",
               "SDK ÷ hyper, ops per client CPU-s (median)", "min–max", "95 % t-interval",
               "SDK ÷ hyper, ops/s", "verdict"], out,
              ["l", "l", "r", "r", "r", "r", "r", "l", "l", "l", "l"])
        + f"\n\n`{' '.join(['bench'] + c['argv'][1:])}`: {c['repeats']} repeats of {c['duration_s']:g} s "
        f"measured after {c['warmup_s']:g} s of warm-up per measurement, the two clients and etcd "
        f"interleaved in a seeded order within each repeat (seed {m['seed']}); "
        f"{run_line('', m)}. Client CPU is this driver's CPU seconds over the window ÷ operations. "
        "Source: " + ", ".join(link(here, f"data/http-client/{n}") for n in ("peer.csv", "manifest.json"))
        + " (written by `bench peer`); the whole report: " + link(here, "data/http-client/report.md") + "."
    )


def gen_sessions(here: Path) -> str:
    """One bench process holding 10,000 idle sessions vs the 16 workers alone (data/sessions/)."""
    base = ROOT / "data" / "sessions"
    if not base.is_dir():
        raise Missing("data/sessions/")
    runs = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        rows = read_run(f"sessions/{d.name}", "results.csv")
        m = read_run(f"sessions/{d.name}", "manifest.json")
        runs.append((d.name, rows[0], m))
    if not runs:
        raise Missing("data/sessions/*/results.csv")

    def mmm(vals: list[float], digits: int) -> str:
        vals = sorted(vals)
        return f"{f(statistics.median(vals), digits)} ({f(vals[0], digits)}–{f(vals[-1], digits)})"

    out = []
    for n in sorted({int(r["idle_sessions"]) for _, r, _ in runs}):
        rs = [r for _, r, _ in runs if int(r["idle_sessions"]) == n]
        dur = [num(r["duration_s"]) for r in rs]
        out.append([
            f(n, 0), str(len(rs)),
            mmm([num(r["hb_corrected_count"]) for r in rs], 0),
            mmm([num(r["hb_attempts"]) / num(r["duration_s"]) for r in rs], 0),
            mmm([num(r["hb_rtt_corrected_p50_us"]) / 1e3 for r in rs], 2),
            mmm([num(r["hb_rtt_corrected_p99_us"]) / 1e3 for r in rs], 1),
            mmm([num(r["hb_timeouts"]) for r in rs], 0),
            mmm([num(r["session_lost"]) for r in rs], 0),
            mmm([num(r["cpu_lock_server_s"]) / d for r, d in zip(rs, dur)], 2),
            mmm([num(r["cpu_bench_s"]) / d for r, d in zip(rs, dur)], 2),
            mmm([num(r["lock_server_rss_peak_kb"]) / 1024 for r in rs], 1),
            str(sum(int(r["duplicate_attempted"]) + int(r["paid_twice"]) for r in rs)),
        ])
    first = runs[0][2]
    argv = " ".join(["bench"] + first["argv"][1:])
    argv = re.sub(r"--out \S+", "--out DIR", argv)
    argv = re.sub(r"--sessions \d+", "--sessions N", argv)
    argv = re.sub(r"--seed \d+", "--seed S", argv)
    seeds = sorted({m["seed"] for _, _, m in runs})
    order = ", ".join(name for name, _, _ in sorted(runs, key=lambda x: x[2]["started_at"]))
    return (
        table(["idle sessions", "runs", "corrected samples", "heartbeats/s", "corrected p50 ms",
               "corrected p99 ms", "timeouts", "sessions lost", "lock-server CPU (cores)",
               "bench CPU (cores)", "lock-server peak RSS MiB", "duplicates"], out,
              ["r"] * 12)
        + f"\n\nMedian (min–max) over the runs of `{argv}`, seeds {', '.join(map(str, seeds))}, run in "
        f"the order {order} on one machine; {run_line('', first)}. CPU is CPU seconds over the "
        "window ÷ its length, in cores. Source: "
        + ", ".join(link(here, f"data/sessions/{name}/results.csv", f"{name}") for name, _, _ in runs)
        + " (written by `bench sweep`)."
    )


def sessions_rows() -> tuple[list[dict], dict]:
    return read_run("peer-sessions", "peer_sessions.csv"), read_run("peer-sessions", "manifest.json")


def at_most(values: list[float], target: float) -> str:
    """The verdict of "at most `target`" as `bench peer` gives it: only where the interval decides."""
    med, _, _, ci = spread(values)
    if ci is None:
        return ("met" if med <= target else "not met") + " (1 repeat, no interval)"
    if ci[1] <= target:
        return "met"
    if ci[0] > target:
        return "not met"
    return f"not resolved at {len(values)} repeats"


def sessions_p99_ratios(rows: list[dict], lab: str, base: int, at: int,
                        min_samples: int) -> tuple[list[float], tuple[int, int] | None]:
    """Corrected p99 at `at` sessions ÷ at `base`, within each repeat of a `bench peer --sessions` run, for one
    system; and the thinnest (sessions, samples) below `min_samples`, if any."""
    ratios, thin = [], None
    for rep in sorted({r["repeat"] for r in rows}):
        b = [r for r in rows if peer_label(r) == lab and r["repeat"] == rep and int(r["sessions"]) == base]
        a = [r for r in rows if peer_label(r) == lab and r["repeat"] == rep and int(r["sessions"]) == at]
        if not b or not a:
            continue
        for r in (b[0], a[0]):
            if int(r["samples"]) < min_samples and (thin is None or int(r["samples"]) < thin[1]):
                thin = (int(r["sessions"]), int(r["samples"]))
        if num(b[0]["p99_corrected_us"]) > 0:
            ratios.append(num(a[0]["p99_corrected_us"]) / num(b[0]["p99_corrected_us"]))
    return ratios, thin


def gen_peer_sessions(here: Path) -> str:
    """Cost against live sessions, fencepost's sessions against etcd's leases (data/peer-sessions/)."""
    rows, m = sessions_rows()
    min_samples = 1000
    mm = lambda v, d: "–" if not v else f"{statistics.median(v):,.{d}f} ({min(v):,.{d}f}–{max(v):,.{d}f})"
    keys = sorted({(int(r["sessions"]), peer_label(r)) for r in rows})
    out = []
    for n, lab in keys:
        g = [r for r in rows if int(r["sessions"]) == n and peer_label(r) == lab]
        thin = min(int(r["samples"]) for r in g)
        p99 = [num(r["p99_corrected_us"]) / 1e3 for r in g if int(r["samples"]) > 0]
        raw = [num(r["p99_us"]) / 1e3 for r in g if int(r["ok"]) > 0]
        ach = [num(r["hb_per_s"]) / num(r["scheduled_per_s"]) for r in g if num(r["scheduled_per_s"]) > 0]
        cpu = [(num(r["cpu_server_s"]) + (num(r["cpu_store_s"]) if r["cpu_store_s"] else 0.0)) / num(r["seconds"]) / (n / 1e3)
               for r in g if r["cpu_server_s"] and num(r["seconds"]) > 0]
        rss = [(num(r["rss_end_kb"]) - num(r["rss_base_kb"])) / 1024.0 / (n / 1e3)
               for r in g if r["rss_end_kb"] and r["rss_base_kb"]]
        drv = [num(r["cpu_bench_s"]) / num(r["seconds"]) for r in g if r["cpu_bench_s"] and num(r["seconds"]) > 0]
        bound = sorted({r["bound_by"] for r in g if r["bound_by"]})
        failed = sum(int(r["errors"]) + int(r["timeouts"]) + int(r["missed"]) + int(r["open_failed"]) for r in g)
        p99c = mm(p99, 2) if thin >= min_samples else f"insufficient data ({thin:,} samples)"
        rawc = mm(raw, 2) if thin >= min_samples else "–"
        out.append([f"{n:,}", lab, str(len(g)), p99c, rawc, mm(ach, 3), mm(cpu, 4), mm(rss, 2), mm(drv, 2),
                    f"{failed:,}", "; ".join(bound) or "–"])
    body = table(["sessions", "system", "repeats", "heartbeat p99 ms", "raw p99 ms", "achieved ÷ scheduled",
                  "server CPU-s/s per 1,000 sessions", "server RSS MiB per 1,000 sessions", "driver cores",
                  "failed ticks", "bound by"], out, ["r", "l", "r", "r", "r", "r", "r", "r", "r", "r", "l"])
    # The target: p99 at 10,000 ÷ p99 at 100, within each repeat.
    base, at, target = 100, 10_000, 2.0
    ratio_rows = []
    for lab in sorted({peer_label(r) for r in rows}):
        ratios, thin = sessions_p99_ratios(rows, lab, base, at, min_samples)
        if not ratios:
            verdict = "not measured"
        elif thin:
            verdict = f"insufficient data ({thin[1]:,} samples at {thin[0]:,} sessions)"
        else:
            verdict = at_most(ratios, target)
        tgt = f"≤ {target:g}×" if lab.startswith("fencepost") else "–"
        ratio_rows.append([lab, str(len(ratios)), mm(ratios, 2) + ("×" if ratios else ""), tgt,
                           verdict if lab.startswith("fencepost") else verdict + " (no target)"])
    body += "\n\n" + table(["system", "repeats", f"p99 at {at:,} ÷ p99 at {base}", "target", "verdict"],
                            ratio_rows, ["l", "r", "r", "r", "l"])
    # The counts not reached: CPU and RSS on the least-squares line through the reached rows.
    ex_rows = []
    counts = sorted({int(r["sessions"]) for r in rows})
    for lab in sorted({peer_label(r) for r in rows}):
        mine = [r for r in rows if peer_label(r) == lab]
        reached = [r for r in mine if not r["bound_by"]]
        cpu_pts = [(int(r["sessions"]), (num(r["cpu_server_s"]) + (num(r["cpu_store_s"]) if r["cpu_store_s"] else 0.0)) / num(r["seconds"]))
                   for r in reached if r["cpu_server_s"] and num(r["seconds"]) > 0]
        rss_pts = [(int(r["sessions"]), (num(r["rss_end_kb"]) - num(r["rss_base_kb"])) / 1024.0)
                   for r in reached if r["rss_end_kb"] and r["rss_base_kb"]]

        def fit(pts):
            if len({p[0] for p in pts}) < 2:
                return None
            mx = statistics.fmean(p[0] for p in pts)
            my = statistics.fmean(p[1] for p in pts)
            sxx = sum((p[0] - mx) ** 2 for p in pts)
            slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
            return my - slope * mx, slope, max(p[0] for p in pts)

        lc, lr = fit(cpu_pts), fit(rss_pts)
        for n in counts:
            if any(int(r["sessions"]) == n and not r["bound_by"] for r in mine):
                continue
            at_n = lambda l: "–" if l is None else f(l[0] + l[1] * n, 2)
            ex_rows.append([lab, f"{n:,}", at_n(lc), "–" if lc is None else f(lc[1] * 1e3, 4), at_n(lr),
                            "–" if lr is None else f(lr[1] * 1e3, 2),
                            "–" if lc is None else f"{len(cpu_pts)} rows up to {lc[2]:,} sessions"])
    if ex_rows:
        body += "\n\nExtrapolated on paper, not measured, to the counts no repeat reached on schedule:\n\n" + table(
            ["system", "sessions", "server CPU, cores", "slope per 1,000 sessions", "server RSS grown, MiB",
             "slope MiB per 1,000", "fitted through"], ex_rows, ["l", "r", "r", "r", "r", "r", "l"])
    c = m["config"]
    sp = c["sessions"]
    busy = (m.get("machine_load") or {}).get("busy_cores")
    body += (
        f"\n\nMedian (min–max) over repeats of `bench peer --sessions {','.join(str(x) for x in sp['counts'])}`, "
        f"seed {m['seed']}, {c['repeats']} repeats, session TTL {sp['ttl_s']:g} s at margin {sp['margin']:g} "
        f"(a heartbeat every {sp['period_s']:g} s), {sp['connections']} connections, windows of at least "
        f"{c['duration_s']:g} s and {sp['min_heartbeats']:,} scheduled heartbeats; {run_line('', m)}"
        + (f"; the machine was busy {busy:.2f} CPUs on average over the run (`machine_load`, every process "
           "counted, this run's among them)" if busy is not None else "")
        + ". Source: "
        + ", ".join(link(here, f"data/peer-sessions/{n}") for n in ("peer_sessions.csv", "manifest.json"))
        + " (written by `bench peer`); every measurement and the plot are in "
        + link(here, "data/peer-sessions/report.md") + "."
    )
    return body
def gen_tls(here: Path) -> str:
    """Plain HTTP vs TLS on the heartbeat, interleaved pairs of one seed each (data/tls/)."""
    base = ROOT / "data" / "tls"
    if not base.is_dir():
        raise Missing("data/tls/")
    runs = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        rows = read_run(f"tls/{d.name}", "results.csv")
        m = read_run(f"tls/{d.name}", "manifest.json")
        runs.append((d.name, rows[0], m))
    if not runs:
        raise Missing("data/tls/*/results.csv")

    def mmm(vals: list[float], digits: int) -> str:
        vals = sorted(vals)
        return f"{f(statistics.median(vals), digits)} ({f(vals[0], digits)}–{f(vals[-1], digits)})"

    out = []
    for mode, label in (("none", "plain HTTP"), ("tls", "TLS")):
        rs = [r for _, r, _ in runs if r.get("tls", "none") == mode]
        if not rs:
            raise Missing(f"data/tls/*: no run with tls={mode}")
        out.append([
            label, str(len(rs)),
            mmm([num(r["hb_rtt_p50_us"]) / 1e3 for r in rs], 2),
            mmm([num(r["hb_rtt_p99_us"]) / 1e3 for r in rs], 2),
            mmm([num(r["hb_rtt_corrected_p50_us"]) / 1e3 for r in rs], 2),
            mmm([num(r["hb_rtt_corrected_p99_us"]) / 1e3 for r in rs], 2),
            mmm([num(r["hb_replies"]) / num(r["duration_s"]) for r in rs], 0),
            mmm([num(r["throughput_per_s"]) for r in rs], 1),
            mmm([num(r["hb_timeouts"]) for r in rs], 0),
            str(sum(int(r["duplicate_attempted"]) + int(r["paid_twice"]) for r in rs)),
        ])
    first = runs[0][2]
    argv = " ".join(a for a in ["bench"] + first["argv"][1:])
    argv = re.sub(r"--out \S+", "--out DIR", argv)
    argv = re.sub(r"--seed \d+", "--seed S", argv)
    seeds = sorted({m["seed"] for _, _, m in runs})
    order = ", ".join(name for name, _, _ in sorted(runs, key=lambda x: x[2]["started_at"]))
    loads = sorted(num((m.get("machine_load") or {}).get("busy_cores")) for _, _, m in runs)
    busy = f"{f(loads[0], 1)}–{f(loads[-1], 1)}"
    return (
        table(["transport", "runs", "raw p50 ms", "raw p99 ms", "corrected p50 ms",
               "corrected p99 ms", "heartbeats/s", "payouts/s", "heartbeat timeouts",
               "duplicates"], out, ["l"] + ["r"] * 9)
        + f"\n\nMedian (min–max) over the runs of `{argv}` without and with `--tls`, seeds "
        f"{', '.join(map(str, seeds))} (one per pair), run in the order {order} on one machine; "
        f"{run_line('', first)}; the whole machine was busy {busy} cores over the runs (every "
        "process counted, `machine_load.busy_cores`). Heartbeats/s are the heartbeat replies over "
        "the measured window; "
        "duplicates are `duplicate_attempted + paid_twice` summed over the runs. Source: "
        + ", ".join(link(here, f"data/tls/{name}/results.csv", f"{name}") for name, _, _ in runs)
        + " (written by `bench run`)."
    )


GENERATORS = {
    "pack-run": gen_pack_run,
    "sessions": gen_sessions,
    "tls": gen_tls,
    "pack-decision": gen_pack_decision,
    "pack-steps": gen_pack_steps,
    "pack-triggers": gen_pack_triggers,
    "sweep-summary": gen_sweep_summary,
    "freeze": gen_freeze,
    "adaptive": gen_adaptive,
    "projection": gen_projection,
    "peer": gen_peer,
    "http-client": gen_http_client,
    "pause": gen_pause,
    "clock": gen_clock,
    "throttle": gen_throttle,
    "chaos": gen_chaos,
    "chaos-replicas": gen_chaos_replicas,
    "chaos-docker": gen_chaos_docker,
    "peer-floor": gen_peer_floor,
    "peer-targets": gen_peer_targets,
    "peer-ceiling": gen_peer_ceiling,
    "peer-wrk": gen_peer_wrk,
    "peer-ab": gen_peer_ab,
    "peer-ab-grants": gen_peer_ab_grants,
    "peer-grant-profile": gen_peer_grant_profile,
    "peer-pg-floor": gen_peer_pg_floor,
    "peer-sessions": gen_peer_sessions,
    "chaos-docker-replicas": gen_chaos_docker_replicas,
    "failover": gen_failover,
    "proxy-overhead": gen_proxy_overhead,
    "toolchain": gen_toolchain,
}


# ---------------------------------------------------------------- the files


def files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def render(path: Path) -> tuple[str, list[str], list[str]]:
    """The file's text with every block regenerated, the block names, and errors."""
    text = path.read_text()
    names: list[str] = []
    errors: list[str] = []
    closed = {m.start() for m in BLOCK.finditer(text)}
    for m in OPEN.finditer(text):
        if m.start() not in closed:
            errors.append(f"{path.relative_to(ROOT)}: block {m.group(1)} has no `<!-- end generated: {m.group(1)} -->`")

    def one(m: re.Match) -> str:
        name = m.group("name")
        names.append(name)
        gen = GENERATORS.get(name)
        if gen is None:
            errors.append(f"{path.relative_to(ROOT)}: no generator for block {name} (known: {', '.join(GENERATORS)})")
            return m.group(0)
        try:
            body = gen(path).rstrip("\n")
        except Missing as e:
            errors.append(f"{path.relative_to(ROOT)}: block {name}: {e} is missing")
            return m.group(0)
        return f"{m.group(1)}{body}\n{m.group(4)}"

    return BLOCK.sub(one, text), names, errors


def main(argv: list[str]) -> int:
    check = "--check" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--check"]
    if unknown:
        print(f"usage: {argv[0]} [--check]", file=sys.stderr)
        return 2
    if check:
        self_test()
    stale: list[str] = []
    errors: list[str] = []
    total = 0
    for path in files():
        old = path.read_text()
        new, names, errs = render(path)
        errors += errs
        total += len(names)
        if new == old:
            continue
        old_blocks = {m.group("name"): m.group("body") for m in BLOCK.finditer(old)}
        new_blocks = {m.group("name"): m.group("body") for m in BLOCK.finditer(new)}
        changed = [n for n in new_blocks if old_blocks.get(n) != new_blocks[n]]
        rel = path.relative_to(ROOT)
        if check:
            stale += [f"{rel}: block {n} differs from what scripts/gen-docs.py would write" for n in changed]
        else:
            path.write_text(new)
            print(f"gen-docs: {rel}: rewrote {', '.join(changed)}")
    for e in errors:
        print(f"gen-docs: {e}", file=sys.stderr)
    for s in stale:
        print(f"gen-docs: {s}", file=sys.stderr)
    if stale:
        print("gen-docs: run `python3 scripts/gen-docs.py` and commit the result", file=sys.stderr)
    if errors or stale:
        return 1
    if check:
        print(f"gen-docs: {total} generated blocks are current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
