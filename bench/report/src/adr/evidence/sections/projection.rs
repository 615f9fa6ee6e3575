//! §6: the production projection, the bench's own and the arithmetic of
//! triggers 1 and 3 at production's configuration for a range of margins.

use std::fmt::Write as _;

use bench_analysis::production_rtt::PRODUCTION_RTT_JSON;

use crate::adr::evidence::conditions::{PRODUCTION_LEASE_MS, PRODUCTION_SESSION_MS};
use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::format::ms;
use crate::adr::evidence::model::Evidence;
use crate::adr::revision::{self, ADR_DIVISOR, ADR_MARGIN, Outcome};

/// §6: the production projection.
pub(crate) fn projection_section(md: &mut String, ev: &Evidence, d: &Derived) {
    let _ = writeln!(md, "## 6. Production projection\n");
    match ev.sweeps.get("sweep").and_then(|s| s.projection.as_ref()) {
        Some(t) => {
            let _ = writeln!(
                md,
                "The bench's own projection, one row per margin with every column: {} ({} rows).\n",
                ev.link("sweep/projection.csv", "sweep/projection.csv"),
                t.rows.len()
            );
        }
        None => {
            let _ = writeln!(
                md,
                "`sweep/projection.csv`: **not measured in this pack** (`bench sweep` of this \
                 build does not write it; later builds do). The arithmetic below applies the \
                 sweep's measured corrected RTTs, unscaled, to production's configuration \
                 instead.\n"
            );
        }
    }
    let Some(p) = d.inputs.conditions.iter().find(|c| c.binding) else {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    };
    let network = match &ev.production_rtt {
        Some(r) => format!(
            "network **measured in production** ({}: {}, {} samples, {} above the largest \
             bucket): corrected p50 ≤ {} ms, p99 (interval end) ≤ {} ms, read at the \
             buckets' upper bounds, so each is at most one bucket above the truth",
            ev.link(PRODUCTION_RTT_JSON, PRODUCTION_RTT_JSON),
            r.describe(),
            r.samples(),
            r.above_top(),
            ms(p.p50_ms),
            ms(p.p99_ms)
        ),
        None => format!(
            "network from the sweep: corrected p50 {} ms, p99 (interval end) {} ms, the worst \
             over its cells",
            ms(p.p50_ms),
            ms(p.p99_ms)
        ),
    };
    let k = d.revision.divisor.unwrap_or(ADR_DIVISOR);
    let _ = writeln!(
        md,
        "Production: lease {} ms, session {} ms (usable base {:.0} ms), worst-case hop {:.0} ms \
         (rail read timeout 5 s + 2 s); {network}. The same rules as [§11](#11-the-derivation), \
         at U/{ADR_DIVISOR} (ADR-006) and U/{k} (proposed):\n",
        PRODUCTION_LEASE_MS, PRODUCTION_SESSION_MS, p.base_ms, p.hop_ms,
    );
    let _ = writeln!(
        md,
        "| margin | trigger 1 budget (ms) | trigger 1 | D4 (ADR-006's form): U (ms) | D4 (sawtooth) slack at U/{ADR_DIVISOR} (ms) | refuses | slack at U/{k} (ms) | refuses |\n|---:|---:|---|---:|---:|---:|---:|---:|"
    );
    let tol = &d.tol;
    for m in revision::margin_grid() {
        let t1 = revision::trigger1(p, m);
        let s3 = revision::sawtooth(p.base_ms, p.hop_ms, p.p50_ms, m, ADR_DIVISOR);
        let sk = revision::sawtooth(p.base_ms, p.hop_ms, p.p50_ms, m, k);
        let refuses = |x: f64| {
            let t = format!("{:.2} %", x * 100.0);
            if x > tol.d4_refusal {
                format!("**{t}**")
            } else {
                t
            }
        };
        let _ = writeln!(
            md,
            "| {m:.2} | {:.0} | {} | {:.0} | {:.1} | {} | {:.1} | {} |",
            fencepost_api::buckets::trigger1_budget(p.base_ms, m),
            if t1.outcome == Outcome::Pass {
                "pass".to_owned()
            } else {
                format!("**{}**", t1.outcome.word())
            },
            s3.usable_ms,
            s3.slack_ms,
            refuses(s3.refusal),
            sk.slack_ms,
            refuses(sk.refusal),
        );
    }
    let budget = fencepost_api::buckets::trigger1_budget(p.base_ms, ADR_MARGIN);
    let s3 = revision::sawtooth(p.base_ms, p.hop_ms, p.p50_ms, ADR_MARGIN, ADR_DIVISOR);
    let _ = writeln!(
        md,
        "\nAt ADR-006's margin {ADR_MARGIN:.2}, trigger 1's production budget ({budget:.0} ms) \
         is {}× the measured p99 ({} ms), while the sawtooth leaves {:.0} ms − p50 {} ms just \
         before a heartbeat against a {:.0} ms hop (slack {:.1} ms): in production the binding \
         constraint is D4, set by the session TTL ({PRODUCTION_SESSION_MS} ms < lease \
         {PRODUCTION_LEASE_MS} ms), not the network.\n",
        {
            // Whole below 10× would print a 0.3× ratio as "0×".
            let r = budget / p.p99_ms.max(1e-9);
            if r >= 10.0 {
                format!("{r:.0}")
            } else {
                format!("{r:.2}")
            }
        },
        ms(p.p99_ms),
        s3.bottom_ms,
        ms(p.p50_ms),
        p.hop_ms,
        s3.slack_ms,
    );
}
