//! The conditions the proposed revision is derived from, read off the
//! evidence: each TTL of the sweep (scaled), production (the sweep's RTTs
//! projected onto 30 s / 15 s and a 7 s hop, or, with a
//! `production-rtt.json` in the pack, the distribution measured in
//! production), each TTL under the server pause, and production under a CPU
//! quota.

use bench_analysis::production_rtt::{PRODUCTION_RTT_JSON, ProductionRtt};
use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;

use bench_analysis::pool::Pooled;

use crate::adr::evidence::model::{Evidence, SweepData};
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
    let ci = Pooled::from_histogram(h.clone()).quantile(0.99);
    let p99_hi = ci.map_or(h.value_at_quantile(0.99), |c| c.hi_us);
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
        p99_point_ms: ci.map_or((0.0, 0.0), |c| (ms(c.value_us), ms(c.lo_us))),
        stall_ms: None,
        samples: p.samples(),
        // Buckets of a fleet's histogram: timeouts are not told apart.
        censored: 0,
        lost: 0,
        cells: 1,
        binding: true,
        rtt_rule: true,
    }
}

/// Without a sweep: only a production distribution measured there, if any.
fn measured_only(ev: &Evidence) -> Vec<Condition> {
    ev.production_rtt.iter().map(measured_production).collect()
}

/// The transport a condition's cells reached the lock-server over (the
/// `tls` column, issue 28): `plain HTTP`, `TLS`, or both where they differ.
fn transport_of(rows: &[&CellRow]) -> &'static str {
    let tls = rows.iter().filter(|r| r.tls == "tls").count();
    match tls {
        0 => "plain HTTP",
        n if n == rows.len() => "TLS",
        _ => "plain HTTP and TLS",
    }
}

/// The load of a condition's cells and the transport they ran over, as a
/// name suffix: ` [16 workers + 100 idle sessions, plain HTTP]`; a range
/// where the cells differ.
fn load_of(rows: &[&CellRow]) -> String {
    let range = |v: Vec<u32>| {
        let (lo, hi) = (v.iter().min().copied(), v.iter().max().copied());
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
            (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
            _ => "0".to_owned(),
        }
    };
    if rows.is_empty() {
        return String::new();
    }
    let workers = range(rows.iter().map(|r| r.workers).collect());
    let idle: Vec<u32> = rows.iter().map(|r| r.idle_sessions).collect();
    let transport = transport_of(rows);
    if idle.iter().all(|n| *n == 0) {
        format!(" [{workers} workers, {transport}]")
    } else {
        format!(
            " [{workers} workers + {} idle sessions, {transport}]",
            range(idle)
        )
    }
}

/// The conditions the revision derives from (see [`crate::adr::revision`]).
pub fn conditions(ev: &Evidence) -> Vec<Condition> {
    let mut out = Vec::new();
    // Every condition pools its cells' histograms (bench_analysis::pool):
    // p50 of the pool, p99 at the upper end of its 95 % interval, the
    // stall at the p99.9's upper end, samples = the pool's.
    let of = |name: String,
              source: String,
              step: &SweepData,
              rows: &[&CellRow],
              stall: bool,
              rtt_rule: bool| {
        let p = step.pooled(rows.iter().copied());
        // The load the condition was measured under is part of its name:
        // idle sessions load the lock-server (docs/measurement.md).
        let name = format!("{name}{}", load_of(rows));
        let ms = |us: u64| us as f64 / 1e3;
        let h = &p.corrected;
        let hi = |q: f64| p.quantile(q).map_or(0.0, |c| ms(c.hi_us.max(c.value_us)));
        let p99 = p.quantile(0.99);
        Condition {
            name,
            source,
            base_ms: rows
                .iter()
                .map(|r| r.lease_ms.min(r.session_ttl_ms))
                .min()
                .unwrap_or(0) as f64,
            hop_ms: rows.iter().map(|r| r.worst_case_hop_ms).max().unwrap_or(0) as f64,
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: hi(0.99),
            p99_point_ms: p99.map_or((0.0, 0.0), |c| (ms(c.value_us), ms(c.lo_us))),
            stall_ms: stall.then(|| hi(0.999)),
            samples: p.count(),
            censored: rows.iter().map(|r| r.hb_timeouts).sum(),
            lost: rows.iter().map(|r| r.session_lost).sum(),
            cells: p.cells,
            binding: true,
            rtt_rule,
        }
    };
    let fixed = ev.fixed_rows();
    let Some(sweep) = ev.sweeps.get("sweep") else {
        return measured_only(ev);
    };
    let mut ttls: Vec<u64> = fixed.iter().map(|r| r.lease_ms).collect();
    ttls.sort_unstable();
    ttls.dedup();
    let delay = fixed.first().map_or(String::new(), |r| r.net_delay.clone());
    for t in &ttls {
        let rows: Vec<&CellRow> = fixed.iter().copied().filter(|r| r.lease_ms == *t).collect();
        out.push(of(
            format!("TTL {} (sweep, net delay {delay}; scaled)", human_ms(*t)),
            "sweep/results.csv".into(),
            sweep,
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
            sweep,
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
                s,
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
                s,
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
