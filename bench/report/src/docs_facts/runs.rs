//! The facts of the runs that compare a few settings over repeated runs:
//! one bench process holding idle sessions (`data/sessions/`), plain HTTP
//! against TLS (`data/tls/`), and the cost of live sessions against etcd's
//! leases (`data/peer-sessions/`, with the extrapolation to the counts no
//! repeat reached and the scale target's verdict).

use std::collections::BTreeSet;
use std::path::Path;

use bench_analysis::peer_sessions::{
    MIN_P99_SAMPLES, SCALE_AT, SCALE_BASE, SCALE_TARGET, SessionRow, read_csv, scale_ratios,
    summaries,
};
use bench_analysis::peer_sessions_fit::extrapolate;
use bench_core::error::Chain;
use serde_json::{Value, json};

use super::input::{FactsError, Row, file, read_json, read_table, spread, spread_of};
use crate::adr::evidence::Table;

/// The first row of each run's `results.csv` under `data/<dir>/`, with the
/// run's `manifest.json`, in the order of the runs' names.
fn run_rows(data: &Path, dir: &str) -> Result<Vec<(Table, Value)>, FactsError> {
    let (base, name) = file(data, dir);
    let mut names: Vec<String> = std::fs::read_dir(&base)
        .map_err(|_| FactsError::Missing(format!("{name}/")))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    let runs = names
        .iter()
        .map(|n| {
            Ok((
                read_table(data, &format!("{dir}/{n}/results.csv"))?,
                read_json(data, &format!("{dir}/{n}/manifest.json"))?,
            ))
        })
        .collect::<Result<Vec<_>, FactsError>>()?;
    if runs.is_empty() {
        return Err(FactsError::Missing(format!("{name}/*/results.csv")));
    }
    Ok(runs)
}

/// The spread over `rows` of a figure of each (NaN where a cell is absent).
fn over(rows: &[Row], f: impl Fn(&Row) -> f64) -> Value {
    spread_of(&rows.iter().map(f).collect::<Vec<_>>())
}

/// `duplicate_attempted + paid_twice` summed over `rows`.
fn duplicates(rows: &[Row]) -> u64 {
    rows.iter()
        .map(|r| r.num("duplicate_attempted") + r.num("paid_twice"))
        .filter(|v| !v.is_nan())
        .sum::<f64>() as u64
}

/// Per count of idle sessions: the runs' figures, median (min–max).
pub(super) fn sessions(data: &Path) -> Result<Value, FactsError> {
    let runs = run_rows(data, "sessions")?;
    let first: Vec<Row> = runs
        .iter()
        .filter_map(|(t, _)| Row::all(t).next())
        .collect();
    let counts: BTreeSet<u64> = first
        .iter()
        .map(|r| r.num("idle_sessions") as u64)
        .collect();
    let out: Vec<Value> = counts
        .into_iter()
        .map(|n| {
            let rs: Vec<Row> = first
                .iter()
                .filter(|r| r.num("idle_sessions") as u64 == n)
                .map(|r| Row { table: r.table, cells: r.cells })
                .collect();
            let per_s = |r: &Row, c: &str| r.num(c) / r.num("duration_s");
            json!({
                "idle_sessions": n,
                "runs": rs.len(),
                "corrected_samples": over(&rs, |r| r.num("hb_corrected_count")),
                "heartbeats_per_s": over(&rs, |r| per_s(r, "hb_attempts")),
                "corrected_p50_ms": over(&rs, |r| r.num("hb_rtt_corrected_p50_us") / 1e3),
                "corrected_p99_ms": over(&rs, |r| r.num("hb_rtt_corrected_p99_us") / 1e3),
                "timeouts": over(&rs, |r| r.num("hb_timeouts")),
                "sessions_lost": over(&rs, |r| r.num("session_lost")),
                "lock_server_cores": over(&rs, |r| per_s(r, "cpu_lock_server_s")),
                "bench_cores": over(&rs, |r| per_s(r, "cpu_bench_s")),
                "lock_server_rss_peak_mib": over(&rs, |r| r.num("lock_server_rss_peak_kb") / 1024.0),
                "duplicates": duplicates(&rs),
            })
        })
        .collect();
    Ok(Value::Array(out))
}

/// Plain HTTP against TLS: each transport's runs, median (min–max), and how
/// busy the machine was over them (cores, the least and the most).
pub(super) fn tls(data: &Path) -> Result<Value, FactsError> {
    let runs = run_rows(data, "tls")?;
    let first: Vec<Row> = runs
        .iter()
        .filter_map(|(t, _)| Row::all(t).next())
        .collect();
    let mut out = Vec::new();
    for mode in ["none", "tls"] {
        let rs: Vec<Row> = first
            .iter()
            .filter(|r| match r.text("tls") {
                "" => mode == "none",
                m => m == mode,
            })
            .map(|r| Row {
                table: r.table,
                cells: r.cells,
            })
            .collect();
        if rs.is_empty() {
            return Err(FactsError::Missing(format!(
                "data/tls/*: a run with tls={mode}"
            )));
        }
        out.push(json!({
            "tls": mode,
            "runs": rs.len(),
            "raw_p50_ms": over(&rs, |r| r.num("hb_rtt_p50_us") / 1e3),
            "raw_p99_ms": over(&rs, |r| r.num("hb_rtt_p99_us") / 1e3),
            "corrected_p50_ms": over(&rs, |r| r.num("hb_rtt_corrected_p50_us") / 1e3),
            "corrected_p99_ms": over(&rs, |r| r.num("hb_rtt_corrected_p99_us") / 1e3),
            "heartbeats_per_s": over(&rs, |r| r.num("hb_replies") / r.num("duration_s")),
            "payouts_per_s": over(&rs, |r| r.num("throughput_per_s")),
            "timeouts": over(&rs, |r| r.num("hb_timeouts")),
            "duplicates": duplicates(&rs),
        }));
    }
    let busy: Vec<f64> = runs
        .iter()
        .filter_map(|(_, m)| {
            m.pointer("/machine_load/busy_cores")
                .and_then(Value::as_f64)
        })
        .collect();
    let range = (!busy.is_empty()).then(|| {
        json!([
            busy.iter().copied().fold(f64::INFINITY, f64::min),
            busy.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        ])
    });
    Ok(json!({"transports": out, "busy_cores": range}))
}

/// `bench peer --sessions`: per (sessions, system) the summary over repeats,
/// per system the scale ratio with its verdict (the interval's, as the run's
/// report gives it), and the extrapolation to the counts not reached.
pub(super) fn peer_sessions(data: &Path) -> Result<Value, FactsError> {
    let (dir, name) = file(data, "peer-sessions");
    if !dir.join("peer_sessions.csv").is_file() {
        return Err(FactsError::Missing(format!("{name}/peer_sessions.csv")));
    }
    let rows = read_csv(&dir).map_err(|e| FactsError::Bad {
        file: format!("{name}/peer_sessions.csv"),
        what: Chain(&e).to_string(),
    })?;
    let repeats = |label: &str, n: usize| {
        rows.iter()
            .filter(|r| r.label() == label && r.sessions == n)
            .count()
    };
    let mut all = summaries(&rows);
    all.sort_by(|a, b| (a.sessions, &a.label).cmp(&(b.sessions, &b.label)));
    let table: Vec<Value> = all
        .iter()
        .map(|s| {
            let enough = s.enough_samples();
            json!({
                "sessions": s.sessions,
                "label": s.label,
                "repeats": repeats(&s.label, s.sessions),
                "min_samples": s.min_samples,
                "enough_samples": enough,
                "p99_ms": if enough { spread(s.p99_ms) } else { Value::Null },
                "p99_raw_ms": if enough { spread(s.p99_raw_ms) } else { Value::Null },
                "achieved": spread(s.achieved),
                "cpu_per_1k": spread(s.cpu_per_1k),
                "rss_per_1k_mib": spread(s.rss_per_1k_mib),
                "driver_cores": spread(s.driver_cores),
                "failures": s.failures,
                "bound_by": s.bound_by.split(';').filter(|b| !b.is_empty()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let scale: Vec<Value> = scale_ratios(&rows, SCALE_BASE, SCALE_AT, SCALE_TARGET)
        .into_iter()
        .map(|s| {
            json!({
                "label": s.label,
                "fencepost": s.fencepost,
                "repeats": s.values.len(),
                "ratio": spread(s.spread),
                "verdict": s.verdict,
            })
        })
        .collect();
    let counts: Vec<usize> = rows
        .iter()
        .map(|r: &SessionRow| r.sessions)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let extrapolated: Vec<Value> = extrapolate(&rows, &counts)
        .into_iter()
        .map(|x| {
            json!({
                "label": x.label,
                "sessions": x.sessions,
                "cpu_cores": x.cpu_cores,
                "cpu_per_1k": x.cpu_line.map(|l| l.slope * 1e3),
                "rss_mib": x.rss_mib,
                "rss_mib_per_1k": x.rss_line.map(|l| l.slope * 1e3),
                "fitted_rows": x.cpu_line.map(|l| l.points),
                "fitted_up_to": x.cpu_line.map(|l| l.max_n),
            })
        })
        .collect();
    Ok(json!({
        "min_samples": MIN_P99_SAMPLES,
        "scale": {"base": SCALE_BASE, "at": SCALE_AT, "target": SCALE_TARGET, "rows": scale},
        "rows": table,
        "extrapolated": extrapolated,
    }))
}
