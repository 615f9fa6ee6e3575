//! The head of the document: the title and the decision (the first screen,
//! [`header`]), then how to read the numbers with a glossary and the
//! ADR-006 rules the document tests ([`guide`]), and, after the questions,
//! the plan and what ran ([`plan_section`]), read from `adr-manifest.json`.

use std::fmt::Write as _;

use bench_analysis::pool::REPS;
use bench_analysis::summary::MIN_SAMPLES_P999;

use crate::adr::evidence::format::{ms, sig3};
use crate::adr::evidence::model::Evidence;
use crate::adr::pack::{ADR_MANIFEST, Program};
use crate::adr::revision::{
    self, ADR_DIVISOR, ADR_MARGIN, Condition, MIN_SAMPLES_BINDING, MIN_SAMPLES_STALL,
};

/// How many of the tightest rules "what would change this decision" lists.
const SLACK_LINES: usize = 5;

/// The title and the decision: the proposed §6.2/§6.5 text, the binding
/// numbers with their intervals and sample counts, and what would change it.
pub(crate) fn header(md: &mut String, ev: &Evidence, conditions: &[Condition]) {
    let _ = writeln!(md, "# ADR-006 evidence pack\n");
    let r = revision::derive(conditions);
    let binding: Vec<&Condition> = conditions.iter().filter(|c| c.binding).collect();
    let fewest = binding.iter().map(|c| c.samples).min().unwrap_or(0);
    let _ = writeln!(
        md,
        "Is ADR-006's client margin ({ADR_MARGIN:.2}) with a heartbeat every third of the usable \
         lease supported by measurement? Every number here is computed by `bench adr` from the \
         files of this directory ([terms](#how-to-read-this)).\n"
    );
    // The floors, met: what "not provisional" rests on.
    let floors_met = || {
        let stall = binding
            .iter()
            .filter(|c| c.stall_ms.is_some())
            .map(|c| c.samples)
            .min();
        format!(
            "**Not provisional**: every binding condition's p99 rests on at least \
             {MIN_SAMPLES_BINDING} corrected samples (fewest: {fewest}){}",
            stall.map_or(String::new(), |n| format!(
                ", and every p99.9 used (a stall) on at least {MIN_SAMPLES_STALL}, 1,000 beyond \
                 its rank (fewest: {n})"
            ))
        )
    };
    match (r.margin, r.divisor) {
        (Some(m), Some(k)) => {
            let status = if r.provisional {
                let short = binding
                    .iter()
                    .filter(|c| c.short_of_samples())
                    .min_by(|a, b| {
                        (a.samples as f64 / a.sample_floor() as f64)
                            .total_cmp(&(b.samples as f64 / b.sample_floor() as f64))
                    });
                match short {
                    Some(c) => format!(
                        "**Provisional**: {} rests on {} corrected samples, fewer than the {} \
                         its {} needs.",
                        c.name,
                        c.samples,
                        c.sample_floor(),
                        if c.stall_ms.is_some() {
                            "p99.9 (its stall)"
                        } else {
                            "p99"
                        }
                    ),
                    None => "**Provisional**: no binding condition was measured.".to_owned(),
                }
            } else {
                format!("{}.", floors_met())
            };
            let _ = writeln!(
                md,
                "## Decision\n\n**Margin {m:.2}, heartbeat period U/{k}.** {status}\n"
            );
            let _ = writeln!(
                md,
                "- **§6.2 D1.** deadline = t_send + lease × (1 − margin); default margin \
                 **{m:.2}** ({}).",
                if (m - ADR_MARGIN).abs() < 1e-9 {
                    "unchanged"
                } else {
                    "was 0.30"
                }
            );
            let _ = writeln!(
                md,
                "- **§6.2 heartbeat.** period = min(session TTL, shortest live lease) × (1 − \
                 margin) / **{k}** ({}).",
                if k == ADR_DIVISOR {
                    "unchanged".to_string()
                } else {
                    format!(
                        "was / 3, which fails {} of {} binding conditions",
                        r.adr_failures.len(),
                        binding.len()
                    )
                }
            );
            let _ = writeln!(
                md,
                "- **§6.5 row 1.** corrected p99 heartbeat RTT, on ≥ {MIN_SAMPLES_BINDING} \
                 samples, exceeds min(lease, session TTL) × margin / 3 → raise the margin or \
                 shorten the period."
            );
            let _ = writeln!(
                md,
                "- **§6.5 row 3.** a TTL changes → recheck min(lease, session TTL) × (1 − \
                 margin) × (1 − 1/{k}) − p50 RTT > worst-case rail hop (the window just before \
                 a heartbeat).\n"
            );
        }
        _ => {
            let floors = if r.provisional {
                "**Provisional** as well: some binding condition is short of its sample floor."
                    .to_owned()
            } else {
                format!(
                    "{}: this is a finding, not a shortage of data.",
                    floors_met()
                )
            };
            let _ = writeln!(
                md,
                "## Decision\n\n**None can be derived.** No (margin, divisor) pair satisfies every \
                 binding condition; [the derivation](#11-the-derivation) has the reasoning. \
                 {floors}\n"
            );
            // The conditions that no pair of the grid satisfies, with why at ADR-006's pair.
            let grid = revision::margin_grid();
            for c in &binding {
                let blocks = revision::DIVISORS
                    .clone()
                    .all(|k| grid.iter().all(|&m| revision::violation(c, m, k).is_some()));
                if blocks {
                    // At the most frequent heartbeat, where D4 has the most room: the
                    // rule left is the one no pair can meet.
                    let why = revision::violation(c, ADR_MARGIN, *revision::DIVISORS.end())
                        .unwrap_or_default();
                    let _ = writeln!(md, "- **Blocked by** {}: {why}.", c.name);
                }
            }
            md.push('\n');
        }
    }
    if !binding.is_empty() {
        let _ = writeln!(
            md,
            "| binding condition | cells | samples | p50 (ms) | p99 [95 %] (ms) |\n|---|---:|---:|---:|---|"
        );
        for c in &binding {
            // More than 1 % of the samples timed out: the p99 is censored.
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
        md.push('\n');
    }
    if let (Some(m), Some(k)) = (r.margin, r.divisor) {
        let _ = writeln!(
            md,
            "**What would change this decision** (the tightest rules at ({m:.2}, U/{k}); limit ÷ \
             now in brackets):\n"
        );
        for s in revision::slack(conditions, m, k).iter().take(SLACK_LINES) {
            let _ = writeln!(
                md,
                "- {}: {} if {} [{}×]",
                s.condition,
                s.rule,
                s.text,
                sig3(s.ratio)
            );
        }
        let _ = writeln!(
            md,
            "- a production RTT distribution (`bench adr --rtt-from prometheus:URL`) whose p99 \
             breaks the production condition's trigger-1 budget.\n"
        );
    } else if !binding.is_empty() {
        let _ = writeln!(
            md,
            "**What stands in the way** (the tightest rules at ADR-006's ({ADR_MARGIN:.2}, \
             U/{ADR_DIVISOR}); limit ÷ now in brackets, below 1 fails):\n"
        );
        for s in revision::slack(conditions, ADR_MARGIN, ADR_DIVISOR)
            .iter()
            .take(SLACK_LINES)
        {
            let _ = writeln!(
                md,
                "- {}: {} holds if {} [{}×]",
                s.condition,
                s.rule,
                s.text,
                sig3(s.ratio)
            );
        }
        md.push('\n');
    }
    if !ev.problems.is_empty() {
        let _ = writeln!(md, "**Unreadable files:**\n");
        for (f, e) in &ev.problems {
            let _ = writeln!(md, "- `{f}`: {e}");
        }
        md.push('\n');
    }
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
            "one environment the margin must cover: a scaled TTL, production (30 s lease, 15 s \
             session, 7 s hop) under the measured RTTs, the server pause, the CPU quota",
        ),
        (
            "binding",
            "a condition the proposal must satisfy; trigger 1 binds only on production-shaped \
             conditions",
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
                "3 × p99.9 / min(lease, session TTL): the smallest margin whose trigger-1 budget \
                 covers the p99.9 (ok from {MIN_SAMPLES_P999} samples)"
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
        for (label, key) in [
            ("git commit", "git_commit"),
            ("machine", "machine"),
            ("versions", "versions"),
        ] {
            if let Some(v) = s.get(key) {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let _ = writeln!(md, "- {label}: `{}`", text.replace('|', "\\|"));
            }
        }
        md.push('\n');
    }
    let _ = writeln!(
        md,
        "| step | what it measures | status | seconds | machine busy (cores) | command |\n\
         |---|---|---|---:|---:|---|"
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
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {:.0} | {busy} | `{prog} {}` |",
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
