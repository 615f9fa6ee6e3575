//! §7: the clock-step simulation, which steps are hazardous, and whether
//! the essay's sentence holds.

use std::fmt::Write as _;

use crate::adr::evidence::model::{ClockData, ClockRow, Evidence};

/// The essay's sentence the clock experiment tests.
pub const ESSAY_SENTENCE: &str = "A step backwards is the dangerous direction: it makes the \
    server’s elapsed-time measurement shorter than real time and can cause a reassignment \
    before the holder’s deadline.";

/// The smallest grace fraction from which a scenario has no violation at every larger one.
fn clean_from(c: &ClockData, scenario: &str) -> Option<f64> {
    let mut rows: Vec<&ClockRow> = c.rows.iter().filter(|r| r.scenario == scenario).collect();
    rows.sort_by(|a, b| a.grace_fraction.total_cmp(&b.grace_fraction));
    let mut first = None;
    for r in rows.iter().rev() {
        if r.violations == 0 {
            first = Some(r.grace_fraction);
        } else {
            break;
        }
    }
    first
}

/// §7: the clock-step simulation and the essay.
pub(crate) fn clock_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(
        md,
        "## 7. Clock steps: which are hazardous, and the essay\n"
    );
    let Some(c) = ev.clocks.get("clock") else {
        md.push_str(&ev.absent("clock", "clock.json"));
        return;
    };
    let at = |s: &str, f: f64| {
        c.rows
            .iter()
            .find(|r| r.scenario == s && (r.grace_fraction - f).abs() < 1e-9)
    };
    let step_ms = c.params.step_ns as f64 / 1e6;
    let _ = writeln!(
        md,
        "A deterministic simulation over the real `LockTable` and the SDK's deadline arithmetic \
         (seed {}, lease {} ms, client margin {}, bound θ + 2ρD + q = {:.3} ms, steps of {} \
         ms): violations = cases where the client still believes it holds the grant after the \
         server reassigned it. Sources: {}, {}.\n",
        c.seed,
        c.params.lease_ns / 1_000_000,
        c.params.margin,
        c.bound_ms,
        step_ms,
        ev.link("clock/clock.json", "clock/clock.json"),
        ev.link("clock/clock.csv", "clock/clock.csv")
    );
    let _ = writeln!(
        md,
        "| scenario | cases | violations at grace 0 | at grace = bound | max overrun at bound (µs) | no violation from grace = |\n|---|---:|---:|---:|---:|---|"
    );
    let mut names: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !names.contains(&r.scenario.as_str()) {
            names.push(&r.scenario);
        }
    }
    for s in &names {
        let z = at(s, 0.0);
        let b = at(s, 1.0);
        let _ = writeln!(
            md,
            "| {s} | {} | {} | {} | {} | {} |",
            b.or(z).map_or(0, |r| r.cases),
            z.map_or("—".into(), |r| r.violations.to_string()),
            b.map_or("—".into(), |r| r.violations.to_string()),
            b.map_or("—".into(), |r| format!("{:.1}", r.max_overrun_us)),
            clean_from(c, s).map_or("none in the sweep".into(), |f| format!(
                "{f} × bound ({:.1} ms)",
                f * c.bound_ms
            )),
        );
    }
    let v = |s: &str| at(s, 1.0).map_or(0, |r| r.violations);
    let _ = writeln!(
        md,
        "\n**Hazardous steps** (violations at grace = bound): server clock **{}** (forward {} \
         vs backward {}), client clock **{}** (forward {} vs backward {}). A forward server \
         step makes the server's measured interval longer than real time, so it reassigns \
         early; a backward client step stretches the client's belief.\n",
        c.findings.server_hazardous_step,
        v("server-step-forward"),
        v("server-step-backward"),
        c.findings.client_hazardous_step,
        v("client-step-forward"),
        v("client-step-backward"),
    );
    let _ = writeln!(
        md,
        "**The essay** (\"Lease safety margins under clock drift\") says: *“{ESSAY_SENTENCE}”* \
         — the simulation {}. {}\n",
        if c.findings.agrees_with_essay_on_server_step {
            "agrees"
        } else {
            "**disagrees**"
        },
        if c.findings.agrees_with_essay_on_server_step {
            "A backward server step produced more violations than a forward one.".to_string()
        } else {
            format!(
                "On the server's clock a backward step makes the elapsed time *shorter* than \
                 real time, so the server reassigns *later* (safe: {} violation(s) at grace = \
                 bound), and a forward step is the one that reassigns before the holder's \
                 deadline ({} violation(s)). The essay's mechanism is right for the client's \
                 clock, whose backward step produced {} violation(s). A step needs grace of \
                 about bound + step: the step scenarios are clean only from {} × bound.",
                v("server-step-backward"),
                v("server-step-forward"),
                v("client-step-backward"),
                ["server-step-forward", "client-step-backward"]
                    .iter()
                    .filter_map(|s| clean_from(c, s))
                    .fold(f64::NAN, f64::max)
            )
        }
    );
    margin_run(md, ev);
}

/// The clock run with ADR-006's client margin, then the figure.
fn margin_run(md: &mut String, ev: &Evidence) {
    match ev.clocks.get("clock-margin") {
        Some(cm) => {
            let total: u64 = cm.rows.iter().map(|r| r.violations).sum();
            let cases: u64 = cm.rows.iter().map(|r| r.cases).sum();
            let _ = writeln!(
                md,
                "With ADR-006's client margin {} ({}): {total} violation(s) in {cases} cases \
                 over every scenario and grace, including grace 0 — the margin gives {:.0} ms \
                 of slack on a {} ms lease, far more than a {} ms step.\n",
                cm.params.margin,
                ev.link("clock-margin/clock.csv", "clock-margin/clock.csv"),
                cm.params.margin * cm.params.lease_ns as f64 / 1e6,
                cm.params.lease_ns / 1_000_000,
                cm.params.step_ns as f64 / 1e6
            );
        }
        None => md.push_str(&ev.absent("clock-margin", "clock.json")),
    }
    md.push_str(&ev.figure(
        "clock/clock",
        "Violation rate vs grace / bound, per scenario (margin 0)",
    ));
    md.push('\n');
}
