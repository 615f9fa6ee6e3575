//! The conditions the proposed revision is derived from, read off the
//! evidence: each TTL of the sweep (scaled), production (the sweep's RTTs
//! projected onto 30 s / 15 s and a 7 s hop, or, with a
//! `production-rtt.json` in the pack, the distribution measured in
//! production), each TTL under the server pause, and production under a CPU
//! quota.

use bench_analysis::production_rtt::{PRODUCTION_RTT_JSON, ProductionRtt};
use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;

use crate::adr::evidence::model::Evidence;
use crate::adr::revision::Condition;

/// Production's configuration (C5 §5.1, C3 §3.8): the projection's target.
pub const PRODUCTION_LEASE_MS: u64 = 30_000;
/// Production's session TTL.
pub const PRODUCTION_SESSION_MS: u64 = 15_000;
/// Production's worst-case hop: rail read timeout 5 s + 2 s (D4).
pub const PRODUCTION_HOP_MS: u64 = 7_000;

/// Production from a distribution measured there (`bench adr --rtt-from`):
/// its p50, and its p99 at the upper end of the 95 % interval, read at the
/// buckets' upper bounds (so each is at most one bucket above the truth).
fn measured_production(p: &ProductionRtt) -> Condition {
    let h = p.histogram();
    let ms = |us: u64| us as f64 / 1e3;
    let p99_hi =
        bench_core::hist::quantile_ci95(&h, 0.99).map_or(h.value_at_quantile(0.99), |(_, hi)| hi);
    Condition {
        name: format!(
            "production {} lease / {} session, 7 s hop (measured: {}, {} samples)",
            human_ms(PRODUCTION_LEASE_MS),
            human_ms(PRODUCTION_SESSION_MS),
            p.describe(),
            p.samples()
        ),
        source: PRODUCTION_RTT_JSON.into(),
        base_ms: PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64,
        hop_ms: PRODUCTION_HOP_MS as f64,
        p50_ms: ms(h.value_at_quantile(0.5)),
        p99_ms: ms(p99_hi.max(h.value_at_quantile(0.99))),
        stall_ms: None,
        samples: p.samples(),
        binding: true,
        rtt_rule: true,
    }
}

/// The conditions the revision derives from (see [`crate::adr::revision`]).
pub fn conditions(ev: &Evidence) -> Vec<Condition> {
    let mut out = Vec::new();
    let of = |name: String, source: String, rows: &[&CellRow], stall: bool, rtt_rule: bool| {
        let f = |g: fn(&CellRow) -> u64| rows.iter().map(|r| g(r)).max().unwrap_or(0) as f64 / 1e3;
        Condition {
            name,
            source,
            base_ms: rows
                .iter()
                .map(|r| r.lease_ms.min(r.session_ttl_ms))
                .min()
                .unwrap_or(0) as f64,
            hop_ms: rows.iter().map(|r| r.worst_case_hop_ms).max().unwrap_or(0) as f64,
            p50_ms: f(|r| r.hb_rtt_corrected_p50_us),
            p99_ms: f(|r| r.hb_rtt_corrected_p99_hi_us.max(r.hb_rtt_corrected_p99_us)),
            stall_ms: stall.then(|| f(|r| r.hb_rtt_corrected_p999_us)),
            samples: rows.iter().map(|r| r.hb_corrected_count).min().unwrap_or(0),
            binding: true,
            rtt_rule,
        }
    };
    let fixed = ev.fixed_rows();
    let mut ttls: Vec<u64> = fixed.iter().map(|r| r.lease_ms).collect();
    ttls.sort_unstable();
    ttls.dedup();
    let delay = fixed.first().map_or(String::new(), |r| r.net_delay.clone());
    for t in &ttls {
        let rows: Vec<&CellRow> = fixed.iter().copied().filter(|r| r.lease_ms == *t).collect();
        out.push(of(
            format!("TTL {} (sweep, net delay {delay}; scaled)", human_ms(*t)),
            "sweep/results.csv".into(),
            &rows,
            false,
            false,
        ));
    }
    if let Some(p) = &ev.production_rtt {
        out.push(measured_production(p));
    } else if !fixed.is_empty() {
        // Production: the measured network (all sweep cells' worst corrected
        // p50 and p99 interval end), unscaled, on 30 s / 15 s and a 7 s hop.
        let mut c = of(
            format!(
                "production {} lease / {} session, 7 s hop (projected from the sweep's RTTs)",
                human_ms(PRODUCTION_LEASE_MS),
                human_ms(PRODUCTION_SESSION_MS)
            ),
            "sweep/results.csv".into(),
            &fixed,
            false,
            true,
        );
        c.base_ms = PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64;
        c.hop_ms = PRODUCTION_HOP_MS as f64;
        out.push(c);
    }
    if let Some(s) = ev.sweeps.get("sweep-pause") {
        let mut ttls: Vec<u64> = s.rows.iter().map(|r| r.lease_ms).collect();
        ttls.sort_unstable();
        ttls.dedup();
        for t in ttls {
            let rows: Vec<&CellRow> = s.rows.iter().filter(|r| r.lease_ms == t).collect();
            out.push(of(
                format!(
                    "TTL {} under server pause {}",
                    human_ms(t),
                    rows.first().map_or("", |r| r.server_pause.as_str())
                ),
                "sweep-pause/results.csv".into(),
                &rows,
                true,
                false,
            ));
        }
    }
    if let Some(s) = ev.sweeps.get("throttle") {
        let rows: Vec<&CellRow> = s
            .rows
            .iter()
            .filter(|r| {
                !r.cpu_quota.is_empty() && r.cpu_quota != bench_analysis::triggers::UNTHROTTLED
            })
            .collect();
        if !rows.is_empty() {
            // CPU throttling stalls are absolute time (the CFS period), not
            // scaled: projected onto production like the network.
            let mut c = of(
                format!(
                    "production, workers under a CPU quota ({}; projected from the throttle run)",
                    rows[0].cpu_quota
                ),
                "throttle/results.csv".into(),
                &rows,
                false,
                true,
            );
            c.base_ms = PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64;
            c.hop_ms = PRODUCTION_HOP_MS as f64;
            out.push(c);
        }
    }
    out
}
