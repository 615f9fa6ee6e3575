//! §6: the production projection, the bench's own and the arithmetic of
//! triggers 1 and 3 at production's configuration for a range of margins.

use std::fmt::Write as _;

use bench_analysis::production_rtt::PRODUCTION_RTT_JSON;
use bench_analysis::triggers::D4Window;

use crate::adr::evidence::conditions::{PRODUCTION_LEASE_MS, PRODUCTION_SESSION_MS};
use crate::adr::evidence::format::ms;
use crate::adr::evidence::model::Evidence;
use crate::adr::revision::{ADR_MARGIN, Condition};

/// §6: the production projection.
pub(crate) fn projection_section(md: &mut String, ev: &Evidence, conditions: &[Condition]) {
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
                 build does not write it; issue 13 adds it). The arithmetic below applies the \
                 sweep's measured corrected RTTs, unscaled, to production's configuration \
                 instead.\n"
            );
        }
    }
    let Some(p) = conditions.iter().find(|c| c.name.starts_with("production")) else {
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
    let _ = writeln!(
        md,
        "Production: lease {} ms, session {} ms (usable base {:.0} ms), worst-case hop {:.0} ms \
         (rail read timeout 5 s + 2 s); {network}. Heartbeat period U/3 (the SDK's).\n",
        PRODUCTION_LEASE_MS, PRODUCTION_SESSION_MS, p.base_ms, p.hop_ms,
    );
    let _ = writeln!(
        md,
        "| margin | trigger 1 budget (ms) | p99 within? | usable U (ms) | left before a heartbeat (ms) | D4 refuses in (of each period) | trigger 3 |\n|---:|---:|---|---:|---:|---:|---|"
    );
    for m in [0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50] {
        let usable = p.base_ms * (1.0 - m);
        let period = usable / 3.0;
        let w = D4Window {
            usable_ms: usable,
            period_ms: period,
            rtt_ms: p.p50_ms,
            before_heartbeat_ms: usable - period - p.p50_ms,
            hop_ms: p.hop_ms,
        };
        let budget = p.base_ms * m / 3.0;
        let _ = writeln!(
            md,
            "| {m:.2} | {budget:.0} | {} | {usable:.0} | {:.0} | {:.1} % | {} |",
            if p.p99_ms <= budget { "yes" } else { "**no**" },
            w.before_heartbeat_ms,
            w.refusal_fraction() * 100.0,
            if w.before_heartbeat_ms <= w.hop_ms {
                "**fires**"
            } else {
                "ok"
            }
        );
    }
    let budget = p.base_ms * ADR_MARGIN / 3.0;
    let usable = p.base_ms * (1.0 - ADR_MARGIN);
    let before = usable * 2.0 / 3.0 - p.p50_ms;
    let _ = writeln!(
        md,
        "\nAt ADR-006's margin {ADR_MARGIN:.2}, trigger 1's production budget ({budget:.0} ms) \
         is {}× the measured p99 ({} ms), while D4 leaves {before:.0} ms just before a \
         heartbeat against a {:.0} ms hop: {}.\n",
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
        p.hop_ms,
        match (p.p99_ms > budget, before <= p.hop_ms) {
            (false, true) => format!(
                "trigger 3 fires and trigger 1 does not — in production the binding constraint \
                 is D4, set by the session TTL ({PRODUCTION_SESSION_MS} ms < lease \
                 {PRODUCTION_LEASE_MS} ms), not the network"
            ),
            (true, true) => "both trigger 1 and trigger 3 fire".to_string(),
            (true, false) => "trigger 1 fires: the network binds".to_string(),
            (false, false) => "neither trigger 1 nor trigger 3 fires".to_string(),
        },
    );
}
