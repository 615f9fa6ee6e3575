//! The facts of the committed `bench peer` runs: fencepost ÷ etcd in the
//! reference pack, heartbeat ÷ floor and the fsync ceiling
//! (`data/peer-limits/`), the performance targets with their verdicts, and
//! the SDK's HTTP client against hyper's (`data/http-client/`).

use std::path::Path;

use bench_analysis::peer::{
    PeerRow, TARGET_CONCURRENCY, client_ratios, client_verdict, cpu_us_per_op, ratios,
};
use bench_analysis::peer_csv::read_peer_csv;
use bench_analysis::peer_limits::{
    CEILING_CONCURRENCY, FLOOR_TARGET, GRANTS_PER_FSYNC_TARGET, OF_CEILING_TARGET, ceiling_rows,
    ceiling_values, floor_pairs, free_store_shares,
};
use bench_analysis::peer_sessions::{SCALE_AT, SCALE_BASE, SCALE_TARGET, scale_ratios};
use bench_analysis::stats::median;
use bench_analysis::targets::{Bound, ONE_CLIENT_GRANT_TARGET, over_repeats};
use bench_core::error::Chain;
use bench_core::peer::{PeerHttpClient, PeerOp};
use serde_json::{Value, json};

use super::input::{FactsError, Row, file, read_table, spread, spread_of};

/// The systems of the targets' table, in its order.
const SYSTEMS: [&str; 3] = ["fencepost/sqlite", "fencepost/postgres", "etcd/bbolt"];

/// The rows of `data/<dir>/peer.csv`.
pub(super) fn peer_rows(data: &Path, dir: &str) -> Result<Vec<PeerRow>, FactsError> {
    let (path, name) = file(data, &format!("{dir}/peer.csv"));
    if !path.is_file() {
        return Err(FactsError::Missing(name));
    }
    read_peer_csv(&path).map_err(|e| FactsError::Bad {
        file: name,
        what: Chain(&e).to_string(),
    })
}

/// fencepost ÷ etcd per (store, op, clients) in the reference pack, with the
/// median ops/s of each side over the repeats the ratios were taken in.
pub(super) fn reference_peer(data: &Path) -> Result<Value, FactsError> {
    let rows = peer_rows(data, "reference/peer")?;
    let mut out: Vec<((bool, usize, String), Value)> = ratios(&rows)
        .into_iter()
        .map(|r| {
            let mine: Vec<&PeerRow> = rows
                .iter()
                .filter(|x| x.system == "fencepost" && x.is_native())
                .filter(|x| x.store == r.store && x.op == r.op && x.conc == r.conc)
                .collect();
            let etcd: Vec<f64> = mine
                .iter()
                .filter_map(|x| {
                    rows.iter()
                        .find(|e| {
                            e.system == "etcd"
                                && (e.op, e.conc, e.repeat) == (x.op, x.conc, x.repeat)
                        })
                        .map(|e| e.ops_per_s)
                })
                .collect();
            let fp: Vec<f64> = mine.iter().map(|x| x.ops_per_s).collect();
            (
                (r.op != PeerOp::Heartbeat, r.conc, r.store.clone()),
                json!({
                    "op": r.op.as_str(),
                    "store": r.store,
                    "conc": r.conc,
                    "fencepost_ops_median": median(&fp),
                    "etcd_ops_median": median(&etcd),
                    "ratio": spread(Some(r.spread)),
                }),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Value::Array(out.into_iter().map(|(_, v)| v).collect()))
}

/// Heartbeat ÷ floor per system and clients (`data/peer-limits/`).
pub(super) fn peer_floor(data: &Path) -> Result<Value, FactsError> {
    let rows = peer_rows(data, "peer-limits")?;
    let mut out: Vec<((usize, String), Value)> = floor_pairs(&rows)
        .into_iter()
        .map(|((label, _, conc), pairs)| {
            let h: Vec<f64> = pairs.iter().map(|p| p.0).collect();
            let f: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            let ratio: Vec<f64> = pairs.iter().map(|(h, f)| h / f).collect();
            (
                (conc, label.clone()),
                json!({
                    "label": label,
                    "conc": conc,
                    "heartbeat_ops_median": median(&h),
                    "floor_ops_median": median(&f),
                    "ratio": spread_of(&ratio),
                }),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Value::Array(out.into_iter().map(|(_, v)| v).collect()))
}

/// Grants against the store directory's fsync ceiling (`data/peer-limits/`).
pub(super) fn peer_ceiling(data: &Path) -> Result<Value, FactsError> {
    let rows = peer_rows(data, "peer-limits")?;
    let free = free_store_shares(&rows);
    let mut all = ceiling_rows(&rows);
    all.sort_by(|a, b| (a.conc, &a.label).cmp(&(b.conc, &b.label)));
    Ok(Value::Array(
        all.into_iter()
            .map(|r| {
                json!({
                    "label": r.label,
                    "conc": r.conc,
                    "grants_per_s": spread(Some(r.grants_per_s)),
                    "fsync_per_s": spread(Some(r.fsync_per_s)),
                    "grants_per_fsync": spread(Some(r.grants_per_fsync)),
                    "writes_per_tx": spread(r.writes_per_tx),
                    "of_ceiling": spread(Some(r.of_ceiling)),
                    "free_share": spread(free.get(&(r.label.clone(), r.conc)).copied()),
                })
            })
            .collect(),
    ))
}

/// `n` with thousands separators (`10,000`).
fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One row of the targets' table: the target, the system, the measured
/// values' spread and the verdict (`no target` beside a fencepost row).
fn target_row(target: &str, system: &str, values: &[f64], verdict: String) -> Value {
    json!({"target": target, "system": system, "measured": spread_of(values), "verdict": verdict})
}

/// Every performance target with its measured value and verdict over
/// repeats or pairs, one by one ([`over_repeats`]).
pub(super) fn peer_targets(data: &Path) -> Result<Value, FactsError> {
    let rows = peer_rows(data, "peer-limits")?;
    let mut out = Vec::new();
    let floors = floor_pairs(&rows);
    for lab in SYSTEMS {
        let fencepost = lab.starts_with("fencepost");
        let Some(pairs) = floors.get(&(lab.to_string(), fencepost, TARGET_CONCURRENCY)) else {
            continue;
        };
        let v: Vec<f64> = pairs.iter().map(|(h, f)| h / f).collect();
        out.push(if fencepost {
            target_row(
                &format!(
                    "heartbeat ÷ floor, {TARGET_CONCURRENCY} clients, `bench peer`: ≥ {FLOOR_TARGET:.1}"
                ),
                lab,
                &v,
                over_repeats(&v, FLOOR_TARGET, Bound::AtLeast).words(),
            )
        } else {
            target_row("the same, etcd beside it", lab, &v, "no target".into())
        });
    }
    let wrk = read_table(data, "peer-limits/wrk-pairs.csv")?;
    let v: Vec<f64> = Row::all(&wrk).map(|r| r.num("ratio")).collect();
    out.push(target_row(
        &format!("heartbeat ÷ healthz, `wrk -t1 -c16`: ≥ {FLOOR_TARGET:.1}"),
        "fencepost/memory",
        &v,
        over_repeats(&v, FLOOR_TARGET, Bound::AtLeast).words(),
    ));
    let ceiling = ceiling_values(&rows);
    let free = free_store_shares(&rows);
    for lab in &SYSTEMS[..2] {
        let key = (lab.to_string(), CEILING_CONCURRENCY);
        let Some(c) = ceiling.get(&key) else {
            continue;
        };
        out.push(target_row(
            &format!(
                "grants per flush, {CEILING_CONCURRENCY} clients: ≥ {GRANTS_PER_FSYNC_TARGET}"
            ),
            lab,
            &c.grants_per_fsync,
            over_repeats(&c.grants_per_fsync, GRANTS_PER_FSYNC_TARGET, Bound::AtLeast).words(),
        ));
        let mut row = target_row(
            &format!(
                "grants/s ÷ (fsyncs/s × grants per flush), {CEILING_CONCURRENCY} clients: ≥ \
                 {OF_CEILING_TARGET:.1} (within 2×)"
            ),
            lab,
            &c.of_ceiling,
            over_repeats(&c.of_ceiling, OF_CEILING_TARGET, Bound::AtLeast).words(),
        );
        // Where even a store that cost nothing could not reach the target,
        // the requests bound it, not the store.
        if let Some(f) = free.get(&key).filter(|f| f.max < OF_CEILING_TARGET) {
            row["bound_by_requests"] = spread(Some(*f));
        }
        out.push(row);
    }
    let pg = read_table(data, "peer-limits/pg-floor.csv")?;
    let v: Vec<f64> = Row::all(&pg)
        .map(|r| r.num("fencepost_postgres_grants_per_s") / r.num("etcd_grants_per_s"))
        .collect();
    out.push(target_row(
        &format!(
            "one client's grants ÷ etcd's, interleaved pairs of `scripts/pg-floor.sh`: ≥ \
             {ONE_CLIENT_GRANT_TARGET:.1}"
        ),
        "fencepost/postgres",
        &v,
        over_repeats(&v, ONE_CLIENT_GRANT_TARGET, Bound::AtLeast).words(),
    ));
    if let Some(r) = ratios(&rows)
        .into_iter()
        .find(|r| r.store == "postgres" && r.op == PeerOp::Grant && r.conc == 1)
    {
        out.push(target_row(
            &format!("the same in the `bench peer` run's repeats: ≥ {ONE_CLIENT_GRANT_TARGET:.1}"),
            "fencepost/postgres",
            &r.values,
            over_repeats(&r.values, ONE_CLIENT_GRANT_TARGET, Bound::AtLeast).words(),
        ));
    }
    out.extend(session_targets(data)?);
    Ok(Value::Array(out))
}

/// The live-sessions target's rows: the heartbeat p99 at many sessions ÷
/// at few, per system (`data/peer-sessions/`).
fn session_targets(data: &Path) -> Result<Vec<Value>, FactsError> {
    let mut out = Vec::new();
    let (sessions_dir, name) = file(data, "peer-sessions");
    let sessions =
        bench_analysis::peer_sessions::read_csv(&sessions_dir).map_err(|e| FactsError::Bad {
            file: format!("{name}/peer_sessions.csv"),
            what: Chain(&e).to_string(),
        })?;
    let scale = scale_ratios(&sessions, SCALE_BASE, SCALE_AT, SCALE_TARGET);
    for lab in SYSTEMS {
        let Some(s) = scale
            .iter()
            .find(|s| s.label == lab && !s.values.is_empty())
        else {
            continue;
        };
        out.push(if s.fencepost {
            let verdict = if s.thin.is_some() {
                "insufficient data".into()
            } else {
                over_repeats(&s.values, SCALE_TARGET, Bound::AtMost).words()
            };
            target_row(
                &format!(
                    "heartbeat p99 at {} sessions ÷ at {SCALE_BASE}: ≤ {SCALE_TARGET}",
                    thousands(SCALE_AT)
                ),
                lab,
                &s.values,
                verdict,
            )
        } else {
            target_row(
                "the same, etcd beside it",
                lab,
                &s.values,
                "no target".into(),
            )
        });
    }
    Ok(out)
}

/// The SDK's HTTP client ÷ hyper's pooled client per (op, clients)
/// (`data/http-client/`), with each side's client CPU per operation.
pub(super) fn http_client(data: &Path) -> Result<Value, FactsError> {
    let rows = peer_rows(data, "http-client")?;
    let hyper = |r: &PeerRow| {
        rows.iter().find(|h| {
            h.system == "fencepost"
                && h.client == PeerHttpClient::HyperLegacy.as_str()
                && (h.store.as_str(), h.op, h.conc, h.repeat)
                    == (r.store.as_str(), r.op, r.conc, r.repeat)
        })
    };
    let mut all = client_ratios(&rows);
    all.sort_by(|a, b| (a.op.as_str(), a.conc, &a.store).cmp(&(b.op.as_str(), b.conc, &b.store)));
    Ok(Value::Array(
        all.into_iter()
            .map(|c| {
                let sdk: Vec<&PeerRow> = rows
                    .iter()
                    .filter(|r| r.system == "fencepost" && r.client == PeerHttpClient::Sdk.as_str())
                    .filter(|r| {
                        (r.store.as_str(), r.op, r.conc) == (c.store.as_str(), c.op, c.conc)
                    })
                    .filter(|r| hyper(r).is_some())
                    .collect();
                let hyp: Vec<&PeerRow> = sdk.iter().filter_map(|r| hyper(r)).collect();
                json!({
                    "op": c.op.as_str(),
                    "store": c.store,
                    "conc": c.conc,
                    "sdk_cpu_us_per_op": cpu_us_per_op(&sdk, |r| r.cpu_bench_s),
                    "hyper_cpu_us_per_op": cpu_us_per_op(&hyp, |r| r.cpu_bench_s),
                    "per_client_cpu": spread(Some(c.per_client_cpu)),
                    "throughput": spread(Some(c.throughput)),
                    "verdict": client_verdict(&c.per_client_cpu),
                })
            })
            .collect(),
    ))
}
