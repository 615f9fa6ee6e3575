//! The clock experiment's words, as pure functions of its result: the
//! `report.md` section and the table `main` prints.

use std::path::Path;

use crate::clock::sim::{ClockResult, at};

/// The `report.md` section.
pub fn report_section(r: &ClockResult, cases: u64) -> String {
    let mut s = format!(
        "## Clock experiment (T-043)\n\nSimulated client and server clocks (no real sleeps) over the server's \
         `LockTable` and the SDK's `lease::client_deadline`, {cases} seeded cases per point, seed {}. \
         Bound θ + 2ρD + q = {:.3} + {:.3} + {:.3} = {:.3} ms; client margin {}.\n\n",
        r.seed,
        r.bound_terms_ms[0],
        r.bound_terms_ms[1],
        r.bound_terms_ms[2],
        r.bound_ms,
        r.params.margin
    );
    let fractions: Vec<f64> = {
        let mut f: Vec<f64> = r.rows.iter().map(|x| x.grace_fraction).collect();
        f.dedup();
        f.sort_by(f64::total_cmp);
        f.dedup();
        f
    };
    s.push_str("Violations (client believes after the server reassigned) per grace / bound:\n\n| scenario |");
    for f in &fractions {
        s.push_str(&format!(" {f} |"));
    }
    s.push_str(" max overrun at 1.0 (µs) |\n|---|");
    for _ in &fractions {
        s.push_str("---|");
    }
    s.push_str("---|\n");
    for (name, _) in &r.scenarios {
        s.push_str(&format!("| {name} |"));
        for f in &fractions {
            let v = at(&r.rows, name, *f).map(|x| x.violations).unwrap_or(0);
            s.push_str(&format!(" {v} |"));
        }
        let o = at(&r.rows, name, 1.0)
            .map(|x| x.max_overrun_us)
            .unwrap_or(0.0);
        s.push_str(&format!(" {o:.1} |\n"));
    }
    s.push_str("\nScenarios:\n\n");
    for (name, d) in &r.scenarios {
        s.push_str(&format!("- `{name}`: {d}\n"));
    }
    s.push_str("\nFindings:\n\n");
    for line in &r.findings.summary {
        s.push_str(&format!("- {line}\n"));
    }
    s.push_str("\n![violation rate vs grace](clock.svg)\n\nData: clock.json, clock.csv.\n");
    s
}

/// The table `experiments clock` prints at the end.
pub fn summary(r: &ClockResult, dir: &Path) -> String {
    let mut s = format!(
        "bound θ + 2ρD + q = {:.3} ms\n{:<22} {:>8} {:>6} {:>10} {:>14}\n",
        r.bound_ms, "scenario", "grace/M", "cases", "violations", "max overrun µs"
    );
    for row in &r.rows {
        s.push_str(&format!(
            "{:<22} {:>8} {:>6} {:>10} {:>14.1}\n",
            row.scenario, row.grace_fraction, row.cases, row.violations, row.max_overrun_us
        ));
    }
    for line in &r.findings.summary {
        s.push_str(&format!("- {line}\n"));
    }
    s.push_str(&format!("results: {}\n", dir.display()));
    s
}
