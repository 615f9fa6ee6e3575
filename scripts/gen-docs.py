#!/usr/bin/env python3
"""Rewrites the generated blocks of README.md and docs/*.md from data/.

A block is everything between

    <!-- generated: NAME (scripts/gen-docs.py) -->
    <!-- end generated: NAME -->

and NAME says which generator below writes it. Every measured number in a
block is read from a CSV or JSON file of the committed evidence pack
(data/reference/, written by `bench adr`) or of another committed run under
data/ (data/http-client/, written by `bench peer`); none is typed here. One block,
`toolchain`, reads Cargo.toml instead. Links in a block are relative to the
file the block sits in.

This script only reads and formats: every number it prints is either a cell
of those files as is, or that cell converted (µs to ms, a fraction to %) and
rounded. Whatever is computed or decided from them — a median, a min–max, a
95 % interval, a ratio taken within a repeat, a verdict against a target, a
trigger headline, an extrapolation — it reads from data/docs-facts.json, which
`bench docs` computes with the bench's own functions (the ones that write the
runs' reports: bench-analysis's statistics, its trigger catalogue and verdict
ranking, its performance targets). Regenerate that file first when a run
under data/ changes:

    bench docs                            # rewrite data/docs-facts.json
    bench docs --check                    # exit 1 when it is not current (CI)
    python3 scripts/gen-docs.py           # rewrite the blocks in place
    python3 scripts/gen-docs.py --check   # exit 1 naming every block that is not current

Python 3.11 standard library only; never reads parquet.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import sys
import tomllib
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

# What `bench docs` computed and decided from the runs under data/.
FACTS = ROOT / "data" / "docs-facts.json"
_facts: dict | None = None


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


def facts(section: str):
    """One section of data/docs-facts.json (`bench docs`), or Missing naming why it is absent."""
    global _facts
    if _facts is None:
        if not FACTS.is_file():
            raise Missing("data/docs-facts.json (written by `bench docs`)")
        _facts = json.loads(FACTS.read_text())
    v = _facts.get(section)
    if v is None:
        raise Missing(f"section {section} of data/docs-facts.json")
    if isinstance(v, dict) and "unavailable" in v:
        raise Missing(v["unavailable"].removesuffix(" is missing"))
    return v


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


def mm(sp: dict | None, digits: int = 2, suffix: str = "") -> str:
    """A spread of data/docs-facts.json as `median (min–max)`, `–` for none."""
    if not sp:
        return "–"
    d = digits
    return f"{sp['median']:,.{d}f}{suffix} ({sp['min']:,.{d}f}–{sp['max']:,.{d}f})"


def ci95(sp: dict | None, digits: int = 2) -> str:
    """A spread's 95 % t-interval of the mean as `lo–hi`, `–` without one."""
    if not sp or not sp.get("ci95"):
        return "–"
    lo, hi = sp["ci95"]
    return f"{lo:.{digits}f}–{hi:.{digits}f}"


def minmax(sp: dict, digits: int = 2) -> str:
    return f"{sp['min']:.{digits}f}–{sp['max']:.{digits}f}"


def bold_not_met(verdict: str) -> str:
    return "**not met**" if verdict == "not met" else verdict





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
    ran = facts("pack_run")["steps_seconds"]
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
    pr = facts("pack_run")
    took = pr["took_s"]
    counts = ", ".join(f"{x['steps']} {x['status']}" for x in pr["statuses"])
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


# The columns of the trigger counts, as the evidence document's §3 lays them out.
COUNT_ORDER = ("fired", "ok", "insufficient_data", "not_evaluated")


def gen_pack_triggers(here: Path) -> str:
    """The five triggers over the pack's cells, as §3 of the evidence document counts them."""
    t = facts("pack_triggers")
    rows = []
    for i, x in enumerate(t["triggers"], 1):
        head = x["headline"] or "no cells"
        rows.append([str(i), f"`{x['id']}`: {x['adr_trigger']}", f"**{head}**" if head == "fired" else head,
                     " / ".join(str(x["counts"][v]) for v in COUNT_ORDER)])
    left_out = "; ".join(
        f"`{x['id']}` leaves out the cells of {', '.join(f'`{s}`' for s in x['not_imposed_on'])} (not imposed on freezes)"
        for x in t["triggers"] if x["not_imposed_on"])
    srcs = [f"data/reference/{s}/triggers.json" for s in t["steps"]]
    evidence = os.path.relpath(ROOT / "data/reference/adr-006-evidence.md", here.parent)
    return (
        table(["#", "ADR-006 §6.5 trigger", "headline (the worst cell)", " / ".join(COUNT_ORDER)],
              rows, ["r", "l", "l", "l"])
        + f"\n\nOver {t['cells']} cells of the pack's results tables ({', '.join(f'`{s}`' for s in t['steps'])})"
        + (f"; {left_out}" if left_out else "")
        + f"; a headline is the worst verdict of any cell ({' > '.join(t['worst_first'])}), as "
        f"[section 3 of the evidence document]({evidence}#3-the-five-adr-006-65-triggers) counts them. "
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
    ad = facts("adaptive")
    fixed = {(num(r["lease_ms"]), round(num(r["margin"]), 4)): r for r in read_csv("sweep/summary.csv")}
    rows = []
    for r, x in zip(read_csv("adaptive/summary.csv"), ad["rows"]):
        lease = num(r["lease_ms"])
        f30 = fixed.get((lease, round(ad["fixed_margin"], 4)))
        a, b = num(r["throughput_median"]), num(f30["throughput_median"]) if f30 else math.nan
        rows.append([
            ttl_label(lease), f"`{r['margin_policy']}`", r["n_repeats"], f(num(r["margin_effective_mean"]), 3),
            f"{f(a)} [{f(num(r['throughput_ci95_lo']))}, {f(num(r['throughput_ci95_hi']))}]",
            pct(num(r["abandonment_median"])),
            f"{f(b)} [{f(num(f30['throughput_ci95_lo']))}, {f(num(f30['throughput_ci95_hi']))}]" if f30 else "–",
            f"{x['over_fixed']:.2f}×" if x["over_fixed"] is not None else "–",
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
    out = []
    for x in facts("peer"):
        r = x["ratio"]
        out.append([x["op"], x["store"], str(x["conc"]), str(r["n"]), f(x["fencepost_ops_median"], 0),
                    f(x["etcd_ops_median"], 0), f"**{r['median']:.2f}×**", minmax(r), ci95(r)])
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
        take = facts("pause")[name]["takeover_ms"]
        rows.append([
            link(here, f"data/reference/{name}/report.md", name), "on" if p["client_check"] else "**off** (UC-03)",
            p["config"].get("backend", "fencepost"), str(p["pauses"]),
            f"{p['fenced_out']} ({p['fenced_out_fence1']} / {p['fenced_out_fence2']})",
            str(p["duplicate_attempted"]), f"{p['paid']} / {p['payouts']}", str(p["paid_twice"]), str(p["stale_paid"]),
            "ok" if p["ledger_ok"] else "**broken**", "met" if p["expectation_met"] else "**not met**",
            f"{f(take[0], 0)}–{f(take[1], 0)}" if take else "–",
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
    mj = read_json("clock-margin/clock.json")
    cm = facts("clock")
    total, ncases = cm["margin_violations"], cm["margin_cases"]
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
        ("history violations (rules 4–9)", c["history_violations"]),
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
    m = read_run("peer-limits", "manifest.json")
    out = []
    for x in facts("peer_ceiling"):
        out.append([x["label"], str(x["conc"]), str(x["grants_per_fsync"]["n"]), mm(x["grants_per_s"], 0),
                    mm(x["fsync_per_s"], 0), mm(x["grants_per_fsync"]), mm(x["writes_per_tx"]),
                    mm(x["of_ceiling"]), mm(x["free_share"])])
    return (
        table(["system", "clients", "repeats", "grants/s", "fsyncs/s of its directory", "grants per flush",
               "writes per transaction", "share of the ceiling",
               "share a free store would reach (½ floor requests/s ÷ ceiling)"],
              out, ["l", "r", "r", "r", "r", "r", "r", "r", "r"])
        + "\n\nMedian (min–max) over repeats. " + peer_run_line(here, m)
    )


def gen_peer_wrk(here: Path) -> str:
    """wrk on L2 and /healthz in interleaved pairs, and the profiles (data/peer-limits/)."""
    pairs = read_run("peer-limits", "wrk-pairs.csv")
    sp = facts("peer_wrk")["ratio"]
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
        + f"\n\nMedian {mm(sp)} over {sp['n']} interleaved pairs.\n\n"
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
    pf = facts("peer_pg_floor")
    cols = [("pgbench_grants_per_s", "PostgreSQL alone, autocommitted"),
            ("pgbench_fenced_grants_per_s", "PostgreSQL alone, the leader's fenced transactions"),
            ("pgbench_fenced_one_grants_per_s", "PostgreSQL alone, the leader's one-statement writes"),
            ("fencepost_postgres_grants_per_s", "fencepost/postgres (lock-server, SDK client)"),
            ("etcd_grants_per_s", "etcd/bbolt")]
    rows = [[r["pair"]] + [f(num(r[c]), 0) for c, _ in cols] for r in recs]
    ratio = lambda k: f"**{pf['ratios'][k]['median']:.2f}×** ({minmax(pf['ratios'][k])})"
    ratios = [
        [f"fencepost/postgres ÷ etcd (target ≥ {pf['target']:.1f})", ratio("fencepost_over_etcd")],
        ["PostgreSQL's floor for the leader's one-statement writes ÷ etcd", ratio("floor_over_etcd")],
        ["fencepost/postgres ÷ that floor", ratio("fencepost_over_floor")],
    ]
    ms = lambda k: mm(pf["hops_ms"][k], 3)
    hops = [
        ["PostgreSQL alone: one of the leader's pipelined fenced transactions (pgbench)", ms("pg_fenced_tx")],
        ["PostgreSQL alone: one of the leader's one-statement writes (pgbench), what L4 and L6 send",
         ms("pg_one_statement")],
        ["the lock-server's store transaction (`lock_store_commit_duration_seconds`)", ms("store_commit")],
        ["the lock-server's L4 answer, store transaction included (`lock_grant_duration_seconds`)",
         ms("server_l4")],
        ["the client's L4 round trip (Python `http.client`, keep-alive)", ms("client_l4")],
    ]
    so = pf["store_over_pg_one_statement"]
    return (
        table(["pair"] + [f"{w} grants/s" for _, w in cols], rows, ["r"] * (1 + len(cols)))
        + "\n\n"
        + table(["ratio within each pair", "median (min–max)"], ratios, ["l", "r"])
        + "\n\n"
        + table(["one grant's transaction, hop by hop (means over each pair's window)", "ms, median (min–max)"],
                hops, ["l", "r"])
        + f"\n\nThe lock-server's store transaction ÷ PostgreSQL's own one-statement write, within each pair: "
        f"**{so['median']:.2f}×** ({minmax(so)}).\n\n"
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
        first, _ = read_ab_pairs(rel)
        ab = facts("peer_ab")[name]
        sp = ab["b_over_a"]["heartbeat_per_s"]
        rows.append([what, str(ab["pairs"]), f"**{sp['median']:.3f}×** ({minmax(sp, 3)})",
                     mm(ab["a"]["heartbeat_over_healthz"]), mm(ab["b"]["heartbeat_over_healthz"]), ab["verdict"]])
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
        first, _ = read_ab_pairs(rel)
        ab = facts("peer_ab")[name]
        g, tx = ab["b_over_a"]["grants_per_s"], ab["b_over_a"]["store_commit_ms"]
        rows.append([what, str(ab["pairs"]), f"**{g['median']:.3f}×** ({minmax(g, 3)})",
                     mm(tx, 3, "×"), ab["verdict"]])
        rels.append((rel, first))
    return (
        table(["change (B, against A)", "pairs", "B ÷ A grants/s, median (min–max)",
               "B ÷ A store transaction time", "verdict"], rows, ["l", "r", "r", "r", "l"])
        + "\n\nFrom each file: "
        + "; ".join(f"{link(here, rel, Path(rel).name)}: {first}" for rel, first in rels)
        + "."
    )


def gen_peer_targets(here: Path) -> str:
    """The performance targets, each with its measured value and a verdict, from the runs below it."""
    out = []
    for x in facts("peer_targets"):
        verdict = bold_not_met(x["verdict"])
        if x.get("bound_by_requests"):
            verdict += f"; a store that cost nothing would reach {mm(x['bound_by_requests'])} (the requests bound it)"
        out.append([x["target"], x["system"], mm(x["measured"]), verdict])
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
    m = read_run("peer-limits", "manifest.json")
    out = []
    for x in facts("peer_floor"):
        r = x["ratio"]
        out.append([x["label"], str(x["conc"]), str(r["n"]), f(x["heartbeat_ops_median"], 0),
                    f(x["floor_ops_median"], 0), f"**{r['median']:.2f}**", minmax(r), ci95(r)])
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
    m = read_run("http-client", "manifest.json")
    c = m["config"]
    out = []
    for x in facts("http_client"):
        cpu, ops = x["per_client_cpu"], x["throughput"]
        out.append([x["op"], x["store"], str(x["conc"]), str(cpu["n"]), f(num(x["sdk_cpu_us_per_op"]), 1),
                    f(num(x["hyper_cpu_us_per_op"]), 1), f"**{cpu['median']:.2f}×**", minmax(cpu), ci95(cpu),
                    mm(ops, 2, "×"), x["verdict"]])
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
    runs = [(d.name, None, read_run(f"sessions/{d.name}", "manifest.json"))
            for d in sorted(p for p in base.iterdir() if p.is_dir())]
    if not runs:
        raise Missing("data/sessions/*/results.csv")
    out = []
    for x in facts("sessions"):
        out.append([
            f(x["idle_sessions"], 0), str(x["runs"]), mm(x["corrected_samples"], 0), mm(x["heartbeats_per_s"], 0),
            mm(x["corrected_p50_ms"], 2), mm(x["corrected_p99_ms"], 1), mm(x["timeouts"], 0),
            mm(x["sessions_lost"], 0), mm(x["lock_server_cores"], 2), mm(x["bench_cores"], 2),
            mm(x["lock_server_rss_peak_mib"], 1), str(x["duplicates"]),
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


def gen_peer_sessions(here: Path) -> str:
    """Cost against live sessions, fencepost's sessions against etcd's leases (data/peer-sessions/)."""
    m = read_run("peer-sessions", "manifest.json")
    ps = facts("peer_sessions")
    out = []
    for x in ps["rows"]:
        p99 = mm(x["p99_ms"]) if x["enough_samples"] else f"insufficient data ({x['min_samples']:,} samples)"
        raw = mm(x["p99_raw_ms"]) if x["enough_samples"] else "–"
        out.append([f"{x['sessions']:,}", x["label"], str(x["repeats"]), p99, raw, mm(x["achieved"], 3),
                    mm(x["cpu_per_1k"], 4), mm(x["rss_per_1k_mib"]), mm(x["driver_cores"]),
                    f"{x['failures']:,}", "; ".join(x["bound_by"]) or "–"])
    body = table(["sessions", "system", "repeats", "heartbeat p99 ms", "raw p99 ms", "achieved ÷ scheduled",
                  "server CPU-s/s per 1,000 sessions", "server RSS MiB per 1,000 sessions", "driver cores",
                  "failed ticks", "bound by"], out, ["r", "l", "r", "r", "r", "r", "r", "r", "r", "r", "l"])
    # The target: p99 at 10,000 ÷ p99 at 100, within each repeat.
    sc = ps["scale"]
    ratio_rows = [[x["label"], str(x["repeats"]), mm(x["ratio"]) + ("×" if x["ratio"] else ""),
                   f"≤ {sc['target']:g}×" if x["fencepost"] else "–",
                   x["verdict"] if x["fencepost"] else x["verdict"] + " (no target)"]
                  for x in sc["rows"]]
    body += "\n\n" + table(["system", "repeats", f"p99 at {sc['at']:,} ÷ p99 at {sc['base']}", "target", "verdict"],
                            ratio_rows, ["l", "r", "r", "r", "l"])
    # The counts not reached: CPU and RSS on the least-squares line through the reached rows.
    opt = lambda v, d: "–" if v is None else f(v, d)
    ex_rows = [[x["label"], f"{x['sessions']:,}", opt(x["cpu_cores"], 2), opt(x["cpu_per_1k"], 4),
                opt(x["rss_mib"], 2), opt(x["rss_mib_per_1k"], 2),
                "–" if x["fitted_rows"] is None else f"{x['fitted_rows']} rows up to {x['fitted_up_to']:,} sessions"]
               for x in ps["extrapolated"]]
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
    runs = [(d.name, None, read_run(f"tls/{d.name}", "manifest.json"))
            for d in sorted(p for p in base.iterdir() if p.is_dir())]
    if not runs:
        raise Missing("data/tls/*/results.csv")
    t = facts("tls")
    label = {"none": "plain HTTP", "tls": "TLS"}
    out = []
    for x in t["transports"]:
        out.append([
            label[x["tls"]], str(x["runs"]), mm(x["raw_p50_ms"], 2), mm(x["raw_p99_ms"], 2),
            mm(x["corrected_p50_ms"], 2), mm(x["corrected_p99_ms"], 2), mm(x["heartbeats_per_s"], 0),
            mm(x["payouts_per_s"], 1), mm(x["timeouts"], 0), str(x["duplicates"]),
        ])
    first = runs[0][2]
    argv = " ".join(a for a in ["bench"] + first["argv"][1:])
    argv = re.sub(r"--out \S+", "--out DIR", argv)
    argv = re.sub(r"--seed \d+", "--seed S", argv)
    seeds = sorted({m["seed"] for _, _, m in runs})
    order = ", ".join(name for name, _, _ in sorted(runs, key=lambda x: x[2]["started_at"]))
    loads = t["busy_cores"] or [math.nan, math.nan]
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


NO_DATA = "no data committed"


def pause_cell(run: dict | None) -> str:
    """What the fences and the ledger check saw in one pause run, or that it is not committed."""
    if run is None:
        return NO_DATA
    if not run["backend_matches"]:
        raise Missing(f"data/reference/{run['file']} for this service (it ran another backend)")
    fences = (f"fences off, nothing to fence" if run["rail_fences"] == "off"
              else f"fenced out {run['fenced_out']} (fence 1 / 2: {run['fenced_out_fence1']} / {run['fenced_out_fence2']})")
    twice = run["paid_twice"]
    out = (f"{fences}; paid twice {'**' + str(twice) + '**' if twice else twice}, stale paid {run['stale_paid']}, "
           f"ledger {'ok' if run['ledger_ok'] else '**broken**'}")
    if run["schedule_differs"]:
        out += f" (not the reference run's schedule: {', '.join(run['schedule_differs'])} differ)"
    return out


def gen_lock_services(here: Path) -> str:
    """One row per lock service: lease, token, exchange RTT, the margin trigger 1 derives, the pauses."""
    ls = facts("lock_services")
    prod = ls["production"]
    base_s = min(prod["lease_ms"], prod["session_ttl_ms"]) / 1000.0
    rows = []
    for x in ls["rows"]:
        ex = x["exchanges"]
        if ex:
            rtt = "; ".join(
                f"`{e['label']}`: {mm(scaled(e['p50_us'], 1e-3), 2)} / {mm(scaled(e['p99_us'], 1e-3), 2)} "
                f"({e['conc']} client{'' if e['conc'] == 1 else 's'}, {e['repeats']} repeats, {e['samples']:,} exchanges, {e['errors']} errors)"
                for e in ex)
            margin = "; ".join(f"`{e['label']}`: {mm(e['margin_needed'], 5)}, ≤ {prod['margin']:.2f} {e['within_margin']}"
                               for e in ex)
        else:
            rtt, margin = NO_DATA, NO_DATA
        rows.append([f"**{x['service']}**", x["lease"], x["token"], rtt, margin,
                     pause_cell(x["pause_check_off"]), pause_cell(x["pause_check_on"])])
    dirs = ", ".join(f"`{d}`" for d in ("pause", "pause-uc03", "pause-SERVICE", "pause-SERVICE-uc03"))
    return (
        table(["lock service", "what plays the lease", "what plays the token",
               "heartbeat-equivalent exchange p50 / p99 ms, median (min–max) over repeats",
               f"margin trigger 1 needs for that p99 at production (3 × p99 ÷ {base_s:g} s)",
               "worker frozen past its lease, client check off", "the same, client check on"],
              rows, ["l", "l", "l", "l", "l", "l", "l"])
        + f"\n\nThe exchange is `bench peer`'s heartbeat row of each service (L2, one LeaseKeepAlive, the "
        "compare-owner `PEXPIRE` script), closed loop, at the fewest clients the run measured, one entry per "
        "store it ran on (fencepost's SQLite and PostgreSQL; Redis without persistence, `memory`, and with its "
        "append-only file fsynced before every reply, `aof-always`, where the renew waits for the fsync). "
        f"The margin is ADR-006's trigger-1 rule solved for the margin at production "
        f"(lease {prod['lease_ms'] / 1000:g} s, session TTL {prod['session_ttl_ms'] / 1000:g} s), per repeat, "
        f"judged repeat by repeat against the margin in force ({prod['margin']:.2f}). The pauses are "
        f"`experiments pause` runs ({dirs} under data/reference/), the same schedule on every service; a "
        "double payment where the service has no token is that lock's documented consequence, not a fault of the "
        f"bench. Rows marked \"{NO_DATA}\" have no such file under data/reference/ yet. "
        + "Source: " + link(here, "data/reference/peer/peer.csv") + ", the pause runs' `pause.json`, and "
        + link(here, "data/docs-facts.json") + " (`lock_services`, written by `bench docs`)."
    )


def scaled(sp: dict | None, k: float) -> dict | None:
    """A spread of data/docs-facts.json with every value multiplied by `k` (µs to ms)."""
    if not sp:
        return sp
    return {**sp, "median": sp["median"] * k, "min": sp["min"] * k, "max": sp["max"] * k}


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
    "lock-services": gen_lock_services,
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
