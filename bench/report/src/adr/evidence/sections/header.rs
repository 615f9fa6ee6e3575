//! The head of the document: the title and the decision (the first screen,
//! [`header`]), then how to read the numbers with a glossary and the
//! ADR-006 rules the document tests ([`guide`]), and, after the questions,
//! the plan and what ran ([`plan_section`]), read from `adr-manifest.json`.

use std::fmt::Write as _;

use bench_analysis::pool::REPS;
use bench_analysis::summary::MIN_SAMPLES_P999;

use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::format::{ms, sig3};
use crate::adr::evidence::model::Evidence;
use crate::adr::pack::{ADR_MANIFEST, Program, REVISION_MD};
use crate::adr::revision::{
    self, ADR_DIVISOR, ADR_MARGIN, Check, DIVISORS, How, Outcome, Pair, Rule, Tolerances,
};

/// How many of the tightest rules "what would change this decision" lists.
const SLACK_LINES: usize = 4;

/// The file stem of the decision figure, at the pack's root.
pub const DECISION_PLOT: &str = "adr-decision";

/// The `bench adr` flags that set the tolerances, in the order the
/// document lists them: lost per freeze exposure, the freeze production
/// must ride through, D4's refusals per heartbeat period.
pub const TOLERANCE_FLAGS: [&str; 3] = [
    "--tolerance-lost-per-freeze",
    "--tolerance-freeze",
    "--tolerance-d4-refusal",
];

/// A short tag for the condition a check was judged on.
pub(crate) fn tag(condition: &str) -> &'static str {
    if condition.contains("CPU quota") {
        "quota"
    } else if condition.contains("freezes") {
        "freezes"
    } else {
        "network"
    }
}

/// A check in a few words: `D4 (sawtooth), quota`.
pub(crate) fn short(c: &Check) -> String {
    match c.rule {
        Rule::RideThrough => c.rule.short().to_owned(),
        _ => format!("{} ({})", c.rule.short(), tag(&c.condition)),
    }
}

/// The cell of the per-(margin, divisor) table: the outcome, and the rule
/// that decides it with its limit ÷ now: for a pass the tightest rule (the
/// first to fail), otherwise the worst failing one.
pub(crate) fn pair_cell(p: &Pair) -> String {
    let o = p.outcome();
    let Some(c) = p.binding() else {
        return o.word().to_owned();
    };
    match o {
        Outcome::Pass => format!("pass (tightest: {} {:.3}×)", short(c), c.ratio),
        other => format!("**{}**: {} {:.3}×", other.word(), short(c), c.ratio),
    }
}

/// The tolerances in force, one line, with their flags.
pub(crate) fn tolerances_line(d: &Derived) -> String {
    let t: &Tolerances = &d.tol;
    let freeze = match (t.freeze_ms, d.revision.freeze_tolerance_ms) {
        (Some(f), _) => format!("{f:.0} ms (set)"),
        (None, Some(f)) => format!(
            "{f:.0} ms in absolute time (the longest freeze the pack's freeze cells injected)"
        ),
        (None, None) => "— (no freeze cells in this pack)".to_owned(),
    };
    format!(
        "**Tolerances** (`bench adr` flags, also with `--render-only`): sessions lost per \
         freeze ≤ {:.2} % of exposures (freezes × sessions open; `{}`), a verdict from {} \
         exposures (3 ÷ tolerance), else insufficient data; the longest freeze production must \
         ride through: {freeze} (`{}`); D4 refusals ≤ {:.2} % of each heartbeat period (`{}`); \
         trigger 1 at production's budget, on ≥ {} corrected samples.",
        t.lost_per_exposure * 100.0,
        TOLERANCE_FLAGS[0],
        t.min_exposures(),
        TOLERANCE_FLAGS[1],
        t.d4_refusal * 100.0,
        TOLERANCE_FLAGS[2],
        revision::MIN_SAMPLES_BINDING
    )
}

/// The D4 zero-slack fact at ADR-006's own numbers, from the production condition.
pub(crate) fn d4_fact(d: &Derived) -> Option<String> {
    let c = d.inputs.conditions.iter().find(|c| c.binding)?;
    let at3 = revision::sawtooth(c.base_ms, c.hop_ms, 0.0, ADR_MARGIN, ADR_DIVISOR);
    let at4 = revision::sawtooth(c.base_ms, c.hop_ms, 0.0, ADR_MARGIN, ADR_DIVISOR + 1);
    let gap = at3.bottom_ms - c.hop_ms;
    let versus = if gap.abs() < 0.5 {
        format!(
            "exactly the {:.0} ms hop: zero slack before any RTT",
            c.hop_ms
        )
    } else {
        format!(
            "{gap:+.0} ms from the {:.0} ms hop before any RTT",
            c.hop_ms
        )
    };
    Some(format!(
        "**D4 at ADR-006's own numbers.** Session {:.0} s, margin {ADR_MARGIN:.2}, heartbeat \
         U/{ADR_DIVISOR}: the bottom of the sawtooth is {:.0} × {:.2} × {}/{ADR_DIVISOR} = \
         {:.3} s, {versus}; at U/{} it is {:.0} ms − RTT.",
        c.base_ms / 1e3,
        c.base_ms,
        1.0 - ADR_MARGIN,
        ADR_DIVISOR - 1,
        at3.bottom_ms / 1e3,
        ADR_DIVISOR + 1,
        at4.bottom_ms
    ))
}

/// The title and the decision: the proposed §6.2/§6.5 text, the tolerances,
/// the per-(margin, divisor) table, the D4 fact, the binding numbers with
/// their intervals and sample counts, what would change it, the figure.
pub(crate) fn header(md: &mut String, ev: &Evidence, d: &Derived) {
    let _ = writeln!(md, "# ADR-006 evidence pack\n");
    let r = &d.revision;
    let _ = writeln!(
        md,
        "Does measurement support ADR-006's client margin ({ADR_MARGIN:.2}) with a heartbeat \
         every third of the usable lease? Every number is computed by `bench adr` from the files \
         of this directory ([terms](#how-to-read-this)).\n"
    );
    let _ = writeln!(md, "## Decision\n");
    let adr = r.pair(ADR_MARGIN, ADR_DIVISOR);
    let adr_why = adr
        .and_then(Pair::binding)
        .filter(|c| c.outcome != Outcome::Pass)
        .map(|c| format!("{} on {}: {}", c.rule.name(), c.condition, c.text));
    match (r.margin, r.divisor) {
        (Some(m), Some(k)) => {
            let how = match r.how {
                How::KeepAdr => "ADR-006's pair passes every binding rule: keep it".to_owned(),
                How::NewDivisor => format!(
                    "ADR-006's (0.30, U/3) fails {}; margin 0.30 passes with U/{k}",
                    adr_why.clone().unwrap_or_default()
                ),
                _ => format!(
                    "no divisor makes 0.30 pass; {m:.2} is the passing margin closest to it"
                ),
            };
            let _ = writeln!(
                md,
                "**Margin {m:.2}, heartbeat period U/{k}** (ADR-006: {ADR_MARGIN:.2}, \
                 U/{ADR_DIVISOR}). {how}. The rows to change: {}.\n",
                ev.link(REVISION_MD, REVISION_MD)
            );
            let p = d.inputs.conditions.iter().find(|c| c.binding);
            let _ = writeln!(
                md,
                "- **§6.2** margin **{m:.2}** ({}); heartbeat period U / **{k}** ({}).",
                if (m - ADR_MARGIN).abs() < 1e-9 {
                    "unchanged"
                } else {
                    "was 0.30"
                },
                if k == ADR_DIVISOR {
                    "unchanged"
                } else {
                    "was U / 3"
                }
            );
            let _ = writeln!(
                md,
                "- **§6.5 (1)** corrected p99 > min(lease, session TTL) × margin / 3 (= {} ms at \
                 production); **(3)** hop + p50 > U − U/{k} (= {} ms at production) for more \
                 than {:.2} % of each heartbeat period; freezes longer than {} to ride through.\n",
                p.map_or("—".into(), |c| format!(
                    "{:.0}",
                    fencepost_api::buckets::trigger1_budget(c.base_ms, m)
                )),
                p.map_or("—".into(), |c| format!(
                    "{:.0}",
                    revision::sawtooth(c.base_ms, c.hop_ms, 0.0, m, k).bottom_ms
                )),
                d.tol.d4_refusal * 100.0,
                r.freeze_tolerance_ms
                    .map_or("(not measured)".into(), |f| format!("{f:.0} ms"))
            );
        }
        _ => {
            let _ = writeln!(
                md,
                "**None can be derived**: every (margin, divisor) of the grid fails a binding \
                 rule or lacks data — the table below names each pair's. ADR-006's (0.30, U/3): \
                 {}.\n",
                adr_why.unwrap_or_else(|| "insufficient data".into())
            );
        }
    }
    if let Some(f) = d4_fact(d) {
        let _ = writeln!(md, "{f}\n");
    }
    let _ = writeln!(md, "{}\n", tolerances_line(d));
    decision_table(md, d);
    binding_numbers(md, d);
    if let (Some(m), Some(k)) = (r.margin, r.divisor) {
        let _ = writeln!(
            md,
            "**What would change this decision** (the tightest rules at ({m:.2}, U/{k}); limit ÷ \
             now in brackets):\n"
        );
        let mut checks: Vec<&Check> = r
            .pair(m, k)
            .map_or(Vec::new(), |p| p.checks.iter().collect());
        checks.sort_by(|a, b| a.ratio.total_cmp(&b.ratio));
        for c in checks.iter().take(SLACK_LINES) {
            let _ = writeln!(
                md,
                "- {}: {} {} [{}×]",
                c.condition,
                c.rule.name(),
                c.change,
                sig3(c.ratio)
            );
        }
        let _ = writeln!(
            md,
            "- a production RTT distribution (`bench adr --rtt-from prometheus:URL`) in place \
             of the lab's.\n"
        );
    }
    md.push_str(&ev.figure(
        DECISION_PLOT,
        "Each (margin, divisor) against the binding rules; ADR-006's point and the proposal marked",
    ));
    md.push('\n');
    unreadable(md, ev);
}

/// The files of the pack that could not be read, if any.
fn unreadable(md: &mut String, ev: &Evidence) {
    if ev.problems.is_empty() {
        return;
    }
    let _ = writeln!(md, "**Unreadable files:**\n");
    for (f, e) in &ev.problems {
        let _ = writeln!(md, "- `{f}`: {e}");
    }
    md.push('\n');
}

/// The per-(margin, divisor) table: rows margins, columns divisors.
fn decision_table(md: &mut String, d: &Derived) {
    let r = &d.revision;
    let ks: Vec<u32> = DIVISORS.collect();
    let _ = writeln!(
        md,
        "| margin | {} |\n|---:|{}",
        ks.iter()
            .map(|k| format!("U/{k}"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(ks.len())
    );
    for m in revision::margin_grid() {
        let cells: Vec<String> = ks
            .iter()
            .map(|&k| {
                let adr = (m - ADR_MARGIN).abs() < 1e-9 && k == ADR_DIVISOR;
                let proposed = r
                    .margin
                    .zip(r.divisor)
                    .is_some_and(|(pm, pk)| (pm - m).abs() < 1e-9 && pk == k);
                let mark = match (adr, proposed) {
                    (true, true) => " ← ADR-006, proposed",
                    (true, false) => " ← ADR-006",
                    (false, true) => " ← proposed",
                    _ => "",
                };
                r.pair(m, k)
                    .map_or("—".into(), |p| format!("{}{mark}", pair_cell(p)))
            })
            .collect();
        let _ = writeln!(md, "| {m:.2} | {} |", cells.join(" | "));
    }
    md.push('\n');
}

/// The binding conditions' numbers: samples, p50, p99 with its interval;
/// the freeze cells' exposures.
fn binding_numbers(md: &mut String, d: &Derived) {
    let binding: Vec<_> = d.inputs.conditions.iter().filter(|c| c.binding).collect();
    if binding.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "| binding condition | cells | samples | p50 (ms) | p99 [95 %] (ms) |\n|---|---:|---:|---:|---|"
    );
    for c in &binding {
        let at_least = if c.censored as f64 > 0.01 * c.samples as f64 {
            "≥ "
        } else {
            ""
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {at_least}{} [{}, {}] |",
            c.name,
            c.cells,
            c.samples,
            ms(c.p50_ms),
            ms(c.p99_point_ms.0),
            ms(c.p99_point_ms.1),
            ms(c.p99_ms),
        );
    }
    if let Some(f) = &d.inputs.freezes {
        // Each setting (TTL, margin, divisor, freeze length) is judged on
        // its own: nothing here is summed over settings whose windows differ.
        let n = f.cells.len();
        let count = |o: Outcome| f.cells.iter().filter(|c| c.outcome(&d.tol) == o).count();
        let lo = f.cells.iter().map(|c| c.exposures).min().unwrap_or(0);
        let hi = f.cells.iter().map(|c| c.exposures).max().unwrap_or(0);
        let _ = writeln!(
            md,
            "| production under freezes (projected from [the lab's freeze cells](#4-the-freeze-condition), \
             each setting judged on its own) | {} | {lo}–{hi} exposures per setting{} | — | {n} settings: \
             within tolerance {}, beyond {}, insufficient data {} |",
            f.cells.iter().map(|c| c.cells).sum::<usize>(),
            if f.cells.iter().any(|c| c.estimated) {
                " (estimated)"
            } else {
                ""
            },
            count(Outcome::Pass),
            count(Outcome::Fail),
            count(Outcome::Insufficient),
        );
    }
    md.push('\n');
}

/// How to read the numbers, the glossary, and the ADR-006 rules tested.
pub(crate) fn guide(md: &mut String) {
    let _ = writeln!(md, "## How to read this\n");
    let _ = writeln!(
        md,
        "**ADR-006 in brief** (the decision this pack tests). A payout worker holds a lock \
         while it pays through a rail; fencing tokens checked by the rail keep payments safe, \
         the lease keeps work moving. D1: the client computes its own deadline, t_send + \
         lease × (1 − margin). D2: t_send is read on a monotonic clock just before the \
         request is written. D3: `check_still_held` compares with that deadline locally. D4: \
         before an irreversible step the client needs remaining lease > the step's worst case \
         (rail read timeout + 2 s), else it abandons. D5: a failed heartbeat never extends the \
         deadline. D6: abandoning is always allowed; a later holder retries under a higher \
         token. §6.2 sets the margin (0.30) and the heartbeat period (U/3); §6.5 lists five \
         revisit triggers: (1) p99 RTT > min(lease, session TTL) × margin / 3, (2) the margin \
         dominates throughput, (3) a TTL change makes D4 unsatisfiable, (4) a fence-out traced \
         to a client that believed it held the lease, (5) a move off CPU-throttled hosts.\n"
    );
    let _ = writeln!(md, "| term | meaning |\n|---|---|");
    for (t, d) in [
        (
            "U",
            "the usable lease: min(lease, session TTL) × (1 − margin)",
        ),
        (
            "divisor k, period",
            "the SDK heartbeats every U / k (ADR-006: k = 3)",
        ),
        (
            "hop",
            "the worst-case cost of one rail call that D4 requires: rail read timeout + 2 s",
        ),
        (
            "sawtooth",
            "the remaining lease falls from U to U − U/k between heartbeats; D4 must hold at the \
             bottom of the tooth, just before a heartbeat's reply",
        ),
        (
            "corrected RTT",
            "a heartbeat's round trip measured from its scheduled send, so a late send counts \
             against it (coordinated omission); ≥ marks values that include timeouts",
        ),
        (
            "scaled cell",
            "leases, session TTLs and rail timeouts scaled by lease / 30 s; the network is not, \
             so a 1 s lease faces a network 30× harsher relative to it than production does",
        ),
        (
            "condition",
            "one environment the margin must cover: a scaled TTL (reported), production (30 s \
             lease, 15 s session, 7 s hop) under the measured RTTs, under a CPU quota, under \
             freezes of the lock-server",
        ),
        (
            "binding",
            "a condition the proposal must satisfy: the production-shaped ones, projected by \
             one rule (absolute times for the network, CPU quotas and freezes; ratios for leases)",
        ),
        (
            "margin needed",
            "3 × p99 / min(lease, session TTL): the smallest margin trigger 1 allows — the one \
             definition every table uses",
        ),
        (
            "exposure",
            "one session open during one freeze; lost share = sessions lost ÷ exposures",
        ),
        (
            "ride-through",
            "the largest freeze a session survives: predicted U − U/k − RTT, measured as the \
             largest freeze length whose lost share stays within tolerance",
        ),
        (
            "95 % interval",
            &format!(
                "of a quantile: a cluster bootstrap ({REPS} resamples of the pooled cells, each \
                 a repeat of one margin), widened to hold the order-statistic interval, so the \
                 heartbeats of one cell's stalls move together"
            ),
        ),
        (
            "m_min",
            &format!(
                "`bench report`'s floor for a scaled lease, 3 × p99.9 / min(lease, session TTL) \
                 (ok from {MIN_SAMPLES_P999} samples): not the margin needed, which reads the p99"
            ),
        ),
        (
            "M7, UC-03, V2",
            "the measurement milestone this pack is; the use case of a worker that pauses past \
             its lease (the fences must hold); the adaptive margin, deferred by ADR-006",
        ),
    ] {
        let _ = writeln!(md, "| {t} | {d} |");
    }
    md.push('\n');
}

/// The manifest and the plan: what ran, how each step ended, how long.
pub(crate) fn plan_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 12. How this pack was made\n");
    let Some(m) = &ev.manifest else {
        let _ = writeln!(
            md,
            "**No `{ADR_MANIFEST}`**: this directory was not written by `bench adr`; the plan is \
             unknown.\n"
        );
        return;
    };
    let _ = writeln!(
        md,
        "`{}` (seed {} for every step, {} plan), {} → {}. Sweeps ran under `--net-delay {}`; \
         the server-pause condition is `--server-pause {}`.\n",
        m.command,
        m.seed,
        if m.quick { "the `--quick`" } else { "the full" },
        m.started_at,
        m.finished_at.as_deref().unwrap_or("**not finished**"),
        m.net_delay,
        m.server_pause
    );
    if let Some(s) = ev.sweeps.get("sweep").and_then(|s| s.manifest.as_ref()) {
        for (label, key) in [("machine", "machine"), ("versions", "versions")] {
            if let Some(v) = s.get(key) {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let _ = writeln!(
                    md,
                    "- {label} (from `sweep/manifest.json`): `{}`",
                    text.replace('|', "\\|")
                );
            }
        }
    }
    // Each step's commit comes from its own manifest, never from another's.
    let mut commits: Vec<&str> = ev.step_build.values().map(|(c, _)| c.as_str()).collect();
    commits.sort_unstable();
    commits.dedup();
    match commits.as_slice() {
        [] => {
            let _ = writeln!(
                md,
                "- git commit: not recorded by any step's `manifest.json`"
            );
        }
        [one] => {
            let _ = writeln!(
                md,
                "- git commit: `{one}` for every step that records one (each step's own \
                 `manifest.json`)"
            );
        }
        many => {
            let _ = writeln!(
                md,
                "- git commit: **the steps ran at {} different commits** ({}): each step's own, \
                 from its `manifest.json`, is in the table below",
                many.len(),
                many.iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    md.push('\n');
    let _ = writeln!(
        md,
        "| step | what it measures | status | seconds | machine busy (cores) | commit (build) | command |\n\
         |---|---|---|---:|---:|---|---|"
    );
    for r in &m.steps {
        let prog = match r.step.program {
            Program::Bench => "bench",
            Program::Experiments => "experiments",
        };
        let status = if r.note.is_empty() {
            r.status.as_str().to_string()
        } else {
            format!("{}: {}", r.status.as_str(), r.note)
        };
        let report = format!("{}/report.md", r.step.name);
        let name = if ev.files.contains(&report) {
            format!("[`{}`]({report})", r.step.name)
        } else {
            format!("`{}`", r.step.name)
        };
        let busy = ev
            .step_load
            .get(&r.step.name)
            .and_then(|l| l.busy_cores)
            .map_or_else(|| "—".to_string(), |b| format!("{b:.2}"));
        let build = ev.step_build.get(&r.step.name).map_or_else(
            || "—".to_string(),
            |(c, p)| {
                let short: String = c.chars().take(12).collect();
                let dirty = if c.ends_with("-dirty") { "-dirty" } else { "" };
                format!("`{short}{dirty}` ({})", if p.is_empty() { "—" } else { p })
            },
        );
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {:.0} | {busy} | {build} | `{prog} {}` |",
            r.step.title,
            status,
            r.seconds,
            r.step.args.join(" ").replace('|', "\\|")
        );
    }
    md.push('\n');
    let _ = writeln!(
        md,
        "Machine busy is the mean number of busy CPUs over the step, every process on the \
         machine counted (the step's own among them), from the step's `manifest.json` \
         (`machine_load`); — where it was not recorded.\n"
    );
}
