//! §3: the five ADR-006 §6.5 triggers, headlined per binding condition
//! (from the revision's rules, at ADR-006's pair and at the proposal), then
//! counted over every cell of every results table (reported: trigger 1 is
//! not imposed on freeze cells, whose tail is the fault itself), and every
//! verdict with its numbers.

use std::fmt::Write as _;

use bench_analysis::triggers::{TRIGGERS, Trigger, TriggerResult, Verdict};

use crate::adr::evidence::conditions::FREEZE_STEPS;
use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::model::Evidence;
use crate::adr::revision::{self, ADR_DIVISOR, ADR_MARGIN, Check, Rule};

/// The plot that shows trigger `id` at work: (stem, caption).
fn trigger_plot(id: &str) -> (&'static str, &'static str) {
    match id {
        bench_analysis::triggers::RTT_P99_VS_MARGIN => {
            ("sweep/p99_vs_budget", "Corrected p99 vs trigger 1's budget")
        }
        bench_analysis::triggers::MARGIN_DOMINANT_LIMITER => {
            ("sweep/abandonment_vs_margin", "Abandonment vs margin")
        }
        bench_analysis::triggers::D4_UNSATISFIABLE => {
            ("sweep/throughput_vs_margin", "Throughput vs margin")
        }
        bench_analysis::triggers::FENCED_OUT_WITH_CLIENT_CHECK => (
            "pause-uc03/timeline",
            "UC-03 pause timeline: the fences at work",
        ),
        _ => (
            "throttle/throttle_rtt",
            "Corrected RTT CDF, throttled vs unthrottled",
        ),
    }
}

/// The headline: triggers 1, 3 and 5 on the binding conditions, from the
/// revision's rules, at ADR-006's pair and at the proposal.
fn headline(md: &mut String, d: &Derived) {
    let r = &d.revision;
    let (pm, pk) = (
        r.margin.unwrap_or(ADR_MARGIN),
        r.divisor.unwrap_or(ADR_DIVISOR),
    );
    let find = |m: f64, k: u32, rule: Rule, cond: &str| -> Option<Check> {
        r.pair(m, k)?
            .checks
            .iter()
            .find(|c| c.rule == rule && c.condition == cond)
            .cloned()
    };
    let _ = writeln!(
        md,
        "Headline, per binding condition (the revision's rules; [§11](#11-the-derivation)):\n\n\
         | # | rule | binding condition | at ADR-006 (0.30, U/3) | at the proposal ({pm:.2}, U/{pk}) | numbers at ADR-006's pair |\n|---|---|---|---|---|---|"
    );
    let binding: Vec<_> = d.inputs.conditions.iter().filter(|c| c.binding).collect();
    for (n, rule) in [
        ("1", Rule::Trigger1),
        ("3", Rule::D4Adr),
        ("3", Rule::D4Sawtooth),
    ] {
        for c in &binding {
            let a = find(ADR_MARGIN, ADR_DIVISOR, rule, &c.name);
            let p = find(pm, pk, rule, &c.name);
            let word = |x: &Option<Check>| x.as_ref().map_or("—", |x| x.outcome.word());
            let _ = writeln!(
                md,
                "| {n} | {} | {} | **{}** | {} | {} |",
                rule.name(),
                c.name,
                word(&a),
                word(&p),
                a.map_or(String::new(), |x| x.text)
            );
        }
    }
    let quota = binding.iter().find(|c| c.name.contains("CPU quota"));
    let network = binding.iter().find(|c| !c.name.contains("CPU quota"));
    if let (Some(q), Some(n)) = (quota, network) {
        let need = |c: &revision::Condition| revision::margin_needed(c.p99_ms, c.base_ms);
        let _ = writeln!(
            md,
            "| 5 | margin needed (3 × p99 / base) | production under the CPU quota vs without | \
             {:.3} vs {:.3} | reported | moving off throttled hosts lowers trigger 1's margin \
             needed from {:.3} to {:.3}; D4 (sawtooth) at (0.30, U/3): {} vs {} |",
            need(q),
            need(n),
            need(q),
            need(n),
            find(ADR_MARGIN, ADR_DIVISOR, Rule::D4Sawtooth, &q.name)
                .map_or("—", |x| x.outcome.word()),
            find(ADR_MARGIN, ADR_DIVISOR, Rule::D4Sawtooth, &n.name)
                .map_or("—", |x| x.outcome.word()),
        );
    }
    md.push('\n');
}

/// One §6.5 trigger over every cell of the pack's results tables it is
/// imposed on: what §3 counts and headlines, and `bench docs` quotes.
#[derive(Clone, Debug)]
pub struct TriggerTally<'a> {
    /// The trigger, from the catalogue.
    pub trigger: &'static Trigger,
    /// (step, verdict) of each cell it is imposed on: every cell of every
    /// results table, except trigger 1 on freeze cells ([`FREEZE_STEPS`]),
    /// whose tail is the fault itself.
    pub cells: Vec<(&'a str, &'a TriggerResult)>,
}

impl TriggerTally<'_> {
    /// The cells with verdict `v`.
    pub fn count(&self, v: Verdict) -> usize {
        self.cells.iter().filter(|(_, r)| r.verdict == v).count()
    }

    /// The headline: the worst verdict of any cell ([`Verdict::worst`]).
    pub fn headline(&self) -> Option<Verdict> {
        Verdict::worst(self.cells.iter().map(|(_, r)| r.verdict))
    }
}

/// Every trigger of the catalogue, in ADR order, over the pack's cells.
pub fn trigger_tally(ev: &Evidence) -> Vec<TriggerTally<'_>> {
    TRIGGERS
        .iter()
        .map(|t| TriggerTally {
            trigger: t,
            cells: ev
                .sweeps
                .values()
                .flat_map(|s| s.triggers.iter().map(move |r| (s.name.as_str(), r)))
                .filter(|(_, r)| r.trigger == t.id)
                .filter(|(step, _)| !not_imposed(t.id, step))
                .collect(),
        })
        .collect()
}

/// Whether trigger `id` is left out on the cells of `step`: trigger 1 on
/// the freeze steps.
pub fn not_imposed(id: &str, step: &str) -> bool {
    id == bench_analysis::triggers::RTT_P99_VS_MARGIN && FREEZE_STEPS.contains(&step)
}

/// §3: the headline per binding condition, then every trigger's count and
/// worst cell over the results tables (reported), then every verdict.
pub(crate) fn triggers_section(md: &mut String, ev: &Evidence, d: &Derived) {
    let _ = writeln!(md, "## 3. The five ADR-006 §6.5 triggers\n");
    if ev.sweeps.is_empty() {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    }
    headline(md, d);
    let _ = writeln!(
        md,
        "Reported, per cell: each trigger evaluated (by `bench triggers`' own function) on \
         every cell of every results table of the pack at the cell's own (scaled) lease — except \
         trigger 1 on freeze cells, which is not imposed on freezes. The worst over the cells: \
         fired > insufficient_data > ok > not_evaluated.\n"
    );
    let _ = writeln!(
        md,
        "| # | ADR-006 §6.5 trigger | verdict | fired / ok / insufficient / not evaluated | worst cell: observed vs threshold | ADR action | plot |\n|---|---|---|---|---|---|---|"
    );
    for (i, tally) in trigger_tally(ev).iter().enumerate() {
        let t = tally.trigger;
        let all = &tally.cells;
        let n = |v: Verdict| tally.count(v);
        let verdict = tally.headline();
        // Worst: a fired cell with the largest observed/threshold, else the
        // evaluated cell closest to firing.
        let ratio = |r: &TriggerResult| {
            if i == 2 {
                // Trigger 3 fires when observed ≤ threshold.
                r.threshold / r.observed.max(1e-9)
            } else {
                r.observed / r.threshold.max(1e-9)
            }
        };
        let worst = all
            .iter()
            .filter(|(_, r)| r.verdict != Verdict::NotEvaluated)
            .max_by(|a, b| {
                (a.1.fired, ratio(a.1))
                    .partial_cmp(&(b.1.fired, ratio(b.1)))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        let (stem, caption) = trigger_plot(t.id);
        let plot = if ev.files.contains(&format!("{stem}.svg")) {
            format!("[{caption}]({stem}.svg)")
        } else {
            format!("`{stem}.svg` not drawn")
        };
        let _ = writeln!(
            md,
            "| {} | {} | **{}** | {} / {} / {} / {} | {} | {} | {plot} |",
            i + 1,
            t.adr_trigger,
            verdict.map_or("no cells", Verdict::as_str),
            n(Verdict::Fired),
            n(Verdict::Ok),
            n(Verdict::InsufficientData),
            n(Verdict::NotEvaluated),
            worst.map_or("—".into(), |(dir, r)| format!(
                "`{dir}/{}`: {} vs {} {} ({})",
                r.cell,
                bench_analysis::triggers::fmt_value(r.observed),
                bench_analysis::triggers::fmt_value(r.threshold),
                r.unit,
                r.verdict.as_str()
            )),
            t.action,
        );
    }
    let _ = writeln!(
        md,
        "\nEvery verdict with its numbers: [appendix A](#appendix-a-every-trigger-verdict).\n"
    );
    md.push_str(&ev.figure(
        "sweep/p99_vs_budget",
        "Trigger 1: corrected p99 (points) vs min(lease, session TTL) × margin / 3 (dashed)",
    ));
    md.push('\n');
    if !ev.sweeps.contains_key("throttle") {
        let _ = writeln!(
            md,
            "Trigger 5 (a move off Autopilot) needs the throttle pair: {}",
            ev.absent("throttle", "results table")
        );
    }
}

/// Appendix A: every trigger verdict, collapsed per step with a count line.
pub(crate) fn triggers_appendix(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## Appendix A. Every trigger verdict\n");
    if ev.sweeps.is_empty() {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    }
    for s in ev.sweeps.values() {
        let fired: Vec<&TriggerResult> = s
            .triggers
            .iter()
            .filter(|r| r.verdict != Verdict::Ok)
            .collect();
        let _ = writeln!(
            md,
            "<details><summary><code>{}</code>: {} checks, {} fired, {} not ok (source {})</summary>\n",
            s.name,
            s.triggers.len(),
            s.triggers.iter().filter(|r| r.fired).count(),
            fired.len(),
            ev.link(&format!("{}/results.csv", s.name), "results.csv")
        );
        md.push_str(&bench_analysis::triggers::markdown_table(&s.triggers));
        let _ = writeln!(md, "\n</details>\n");
    }
}
