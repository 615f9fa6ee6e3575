//! The conditions the proposed revision is derived from, read off the
//! evidence: each TTL of the sweep (scaled), production (the sweep's RTTs
//! projected onto 30 s / 15 s and a 7 s hop, or, with a
//! `production-rtt.json` in the pack, the distribution measured in
//! production), production under a CPU quota; and the freeze cells (every step that froze the lock-server),
//! one per setting, never pooled over margins or divisors.

use bench_analysis::production_rtt::{PRODUCTION_RTT_JSON, ProductionRtt};
use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;

use bench_analysis::pool::Pooled;

use crate::adr::evidence::model::{Evidence, SweepData};
use crate::adr::revision::freeze::FreezeCell;
use crate::adr::revision::{Condition, FreezeInputs, Inputs};

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
        samples: p.samples(),
        // Buckets of a fleet's histogram: timeouts are not told apart.
        censored: 0,
        cells: 1,
        binding: true,
    }
}

/// Without a sweep: only a production distribution measured there, if any.
fn measured_only(ev: &Evidence) -> Vec<Condition> {
    ev.production_rtt.iter().map(measured_production).collect()
}

/// The transport a condition's cells reached the lock-server over (the
/// `tls` column): `plain HTTP`, `TLS`, or both where they differ.
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

/// The steps whose cells froze the lock-server, in the order they are read:
/// the freeze sweep of the current plan, and the one-condition server-pause
/// sweep of older packs.
pub const FREEZE_STEPS: [&str; 2] = ["freeze", "sweep-pause"];

/// The freeze steps of the pack and their rows.
pub fn freeze_rows(ev: &Evidence) -> Vec<(&str, &CellRow)> {
    FREEZE_STEPS
        .iter()
        .filter_map(|n| ev.sweeps.get(*n).map(|s| (*n, s)))
        .flat_map(|(n, s)| s.rows.iter().map(move |r| (n, r)))
        .collect()
}

/// `EVERY:FOR` of a `server_pause` column, in ms; `None` if it is not one.
pub fn parse_pause(spec: &str) -> Option<(f64, f64)> {
    let (every, len) = spec.split_once(':')?;
    let d = |t: &str| {
        humantime::parse_duration(t.trim())
            .ok()
            .map(|d| d.as_secs_f64() * 1e3)
    };
    Some((d(every)?, d(len)?))
}

/// The freezes a cell applied and whether they were estimated: the
/// `server_pauses` column, or floor(duration / EVERY) for a table from before it.
pub fn freezes_of(r: &CellRow) -> (u64, bool) {
    if r.server_pauses > 0 {
        return (r.server_pauses, false);
    }
    let every = parse_pause(&r.server_pause).map_or(0.0, |p| p.0);
    if every <= 0.0 {
        return (0, true);
    }
    ((r.duration_s * 1e3 / every).floor() as u64, true)
}

/// The sessions a cell lost to a freeze: gaps between acknowledged
/// heartbeats longer than the window where gaps were recorded, else the
/// sessions lost at their deadline; and which it was.
pub fn lost_of(r: &CellRow) -> (u64, bool) {
    if r.hb_gap_count > 0 {
        (r.hb_gaps_over_window, true)
    } else {
        (r.session_lost_deadline, false)
    }
}

/// The freeze cells of the pack, one per (TTL, margin, divisor, freeze
/// length), repeats summed; `rtt` gives the lab RTT each TTL's prediction
/// subtracts.
fn freeze_cells(ev: &Evidence, rtt: impl Fn(&[&CellRow]) -> f64) -> Vec<FreezeCell> {
    let mut out: Vec<FreezeCell> = Vec::new();
    let rows = freeze_rows(ev);
    for (_, r) in &rows {
        let Some((_, freeze_ms)) = parse_pause(&r.server_pause) else {
            continue;
        };
        let base = r.lease_ms.min(r.session_ttl_ms) as f64;
        let (freezes, estimated) = freezes_of(r);
        let (lost, from_gaps) = lost_of(r);
        let exposures = freezes * u64::from(r.workers + r.idle_sessions);
        let same = |c: &FreezeCell| {
            c.base_ms == base
                && c.margin == r.margin
                && c.divisor == r.heartbeat_divisor
                && c.freeze_ms == freeze_ms
        };
        if let Some(c) = out.iter_mut().find(|c| same(c)) {
            c.lost += lost;
            c.exposures += exposures;
            c.estimated |= estimated;
            c.from_gaps &= from_gaps;
            c.cells += 1;
            continue;
        }
        let ttl_rows: Vec<&CellRow> = rows
            .iter()
            .map(|(_, x)| *x)
            .filter(|x| x.lease_ms == r.lease_ms)
            .collect();
        out.push(FreezeCell {
            base_ms: base,
            margin: r.margin,
            divisor: r.heartbeat_divisor,
            freeze_ms,
            lost,
            exposures,
            estimated,
            from_gaps,
            cells: 1,
            rtt_ms: rtt(&ttl_rows),
        });
    }
    out
}

/// The conditions the revision derives from (see [`crate::adr::revision`]).
pub fn conditions(ev: &Evidence) -> Vec<Condition> {
    inputs(ev).conditions
}

/// Everything the revision derives from: the RTT conditions (scaled TTLs,
/// reported; production under the network and under a CPU quota, binding)
/// and the freeze cells with production's projection inputs.
pub fn inputs(ev: &Evidence) -> Inputs {
    let mut out = Vec::new();
    let fixed = ev.fixed_rows();
    let Some(sweep) = ev.sweeps.get("sweep") else {
        return Inputs {
            conditions: measured_only(ev),
            freezes: None,
        };
    };
    let mut ttls: Vec<u64> = fixed.iter().map(|r| r.lease_ms).collect();
    ttls.sort_unstable();
    ttls.dedup();
    let delay = fixed.first().map_or(String::new(), |r| r.net_delay.clone());
    for t in &ttls {
        let rows: Vec<&CellRow> = fixed.iter().copied().filter(|r| r.lease_ms == *t).collect();
        out.push(pooled(
            format!("TTL {} (sweep, net delay {delay}; scaled)", human_ms(*t)),
            "sweep/results.csv".into(),
            sweep,
            &rows,
            false,
        ));
    }
    out.extend(production_condition(ev, sweep, &fixed));
    out.extend(throttled_condition(ev));
    let production_rtt_ms = out.iter().find(|c| c.binding).map_or(0.0, |c| c.p99_ms);
    Inputs {
        freezes: freeze_inputs(ev, sweep, &fixed, production_rtt_ms),
        conditions: out,
    }
}

/// A condition pooled from `rows` of `step`: p50 of the pool, p99 at the
/// upper end of its 95 % interval, the pool's samples.
fn pooled(
    name: String,
    source: String,
    step: &SweepData,
    rows: &[&CellRow],
    binding: bool,
) -> Condition {
    let p = step.pooled(rows.iter().copied());
    // The load the condition was measured under is part of its name.
    let name = format!("{name}{}", load_of(rows));
    let ms = |us: u64| us as f64 / 1e3;
    let h = &p.corrected;
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
        p99_ms: p99.map_or(0.0, |c| ms(c.hi_us.max(c.value_us))),
        p99_point_ms: p99.map_or((0.0, 0.0), |c| (ms(c.value_us), ms(c.lo_us))),
        samples: p.count(),
        censored: rows.iter().map(|r| r.hb_timeouts).sum(),
        cells: p.cells,
        binding,
    }
}

/// Production: the RTTs measured in production when the pack has them, else
/// the sweep's measured network, unscaled (absolute times), on 30 s / 15 s
/// and a 7 s hop.
fn production_condition(ev: &Evidence, sweep: &SweepData, fixed: &[&CellRow]) -> Option<Condition> {
    if let Some(p) = &ev.production_rtt {
        Some(measured_production(p))
    } else if !fixed.is_empty() {
        // Production: the measured network, unscaled (absolute times), on
        // 30 s / 15 s and a 7 s hop.
        let mut c = pooled(
            format!(
                "production {} lease / {} session, 7 s hop (projected from the sweep's RTTs)",
                human_ms(PRODUCTION_LEASE_MS),
                human_ms(PRODUCTION_SESSION_MS)
            ),
            "sweep/results.csv".into(),
            sweep,
            fixed,
            true,
        );
        c.base_ms = PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64;
        c.hop_ms = PRODUCTION_HOP_MS as f64;
        Some(c)
    } else {
        None
    }
}

/// Production with the workers under a CPU quota, from the throttle run.
fn throttled_condition(ev: &Evidence) -> Option<Condition> {
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
            let mut c = pooled(
                format!(
                    "production, workers under a CPU quota ({}; projected from the throttle run)",
                    rows[0].cpu_quota
                ),
                "throttle/results.csv".into(),
                s,
                &rows,
                true,
            );
            c.base_ms = PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64;
            c.hop_ms = PRODUCTION_HOP_MS as f64;
            return Some(c);
        }
    }
    None
}

/// The freeze cells with the lab RTT their prediction subtracts, and
/// production's base and RTT (the first binding condition's p99).
fn freeze_inputs(
    ev: &Evidence,
    sweep: &SweepData,
    fixed: &[&CellRow],
    production_rtt_ms: f64,
) -> Option<FreezeInputs> {
    // The lab RTT a freeze prediction subtracts: the corrected p99 (interval
    // end) of the same TTL's non-freeze sweep cells; without them, the
    // freeze cells' own corrected p50.
    let lab_rtt = |rows: &[&CellRow]| {
        let lease = rows.first().map_or(0, |r| r.lease_ms);
        let same: Vec<&CellRow> = fixed
            .iter()
            .copied()
            .filter(|r| r.lease_ms == lease)
            .collect();
        if same.is_empty() {
            let mut v: Vec<f64> = rows
                .iter()
                .map(|r| r.hb_rtt_corrected_p50_us as f64 / 1e3)
                .collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        } else {
            let p = sweep.pooled(same.iter().copied());
            p.quantile(0.99)
                .map_or(0.0, |c| c.hi_us.max(c.value_us) as f64 / 1e3)
        }
    };
    let cells = freeze_cells(ev, lab_rtt);
    (!cells.is_empty()).then(|| FreezeInputs {
        source: freeze_rows(ev)
            .first()
            .map_or(String::new(), |(n, _)| format!("{n}/results.csv")),
        cells,
        production_base_ms: PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64,
        production_rtt_ms,
    })
}
