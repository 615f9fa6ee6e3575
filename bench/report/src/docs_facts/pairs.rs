//! The facts of the interleaved pairs the scripts under `scripts/` recorded
//! in `data/peer-limits/`: wrk on the heartbeat and `/healthz`
//! (`wrk-pairs.csv`), one client's grants on PostgreSQL alone, through the
//! lock-server and on etcd (`pg-floor.csv`), and the A/B runs of changes
//! (`ab/*.csv`). Every ratio is taken within a pair.

use std::path::Path;

use bench_analysis::peer::Spread;
use bench_analysis::targets::{ONE_CLIENT_GRANT_TARGET, ab_verdict};
use serde_json::{Map, Value, json};

use super::input::{FactsError, Row, file, read_table, spread_of};

/// heartbeat ÷ healthz of `wrk-pairs.csv`, over its pairs.
pub(super) fn peer_wrk(data: &Path) -> Result<Value, FactsError> {
    let t = read_table(data, "peer-limits/wrk-pairs.csv")?;
    let v: Vec<f64> = Row::all(&t).map(|r| r.num("ratio")).collect();
    Ok(json!({ "ratio": spread_of(&v) }))
}

/// `pg-floor.csv`: the ratios within each pair, one grant's transaction hop
/// by hop (ms), and the lock-server's store transaction over PostgreSQL's own.
pub(super) fn pg_floor(data: &Path) -> Result<Value, FactsError> {
    let rel = "peer-limits/pg-floor.csv";
    let t = read_table(data, rel)?;
    if t.rows.is_empty() {
        return Err(FactsError::Bad {
            file: format!("data/{rel}"),
            what: "no pairs".into(),
        });
    }
    let col = |c: &str| Row::all(&t).map(|r| r.num(c)).collect::<Vec<f64>>();
    let over = |a: &str, b: &str| {
        let (a, b) = (col(a), col(b));
        spread_of(&a.iter().zip(&b).map(|(a, b)| a / b).collect::<Vec<_>>())
    };
    // One grant is two transactions (L4, L6): pgbench's ms per transaction.
    let per_tx = |c: &str| {
        col(c)
            .iter()
            .map(|g| 1000.0 / (2.0 * g))
            .collect::<Vec<f64>>()
    };
    let pg_one = per_tx("pgbench_fenced_one_grants_per_s");
    let store = col("split_store_commit_ms");
    let store_over: Vec<f64> = store.iter().zip(&pg_one).map(|(s, p)| s / p).collect();
    Ok(json!({
        "target": ONE_CLIENT_GRANT_TARGET,
        "ratios": {
            "fencepost_over_etcd": over("fencepost_postgres_grants_per_s", "etcd_grants_per_s"),
            "floor_over_etcd": over("pgbench_fenced_one_grants_per_s", "etcd_grants_per_s"),
            "fencepost_over_floor": over(
                "fencepost_postgres_grants_per_s",
                "pgbench_fenced_one_grants_per_s"
            ),
        },
        "hops_ms": {
            "pg_fenced_tx": spread_of(&per_tx("pgbench_fenced_grants_per_s")),
            "pg_one_statement": spread_of(&pg_one),
            "store_commit": spread_of(&store),
            "server_l4": spread_of(&col("split_server_l4_ms")),
            "client_l4": spread_of(&col("split_client_l4_ms")),
        },
        "store_over_pg_one_statement": spread_of(&store_over),
    }))
}

/// The columns whose B ÷ A decides an A/B run, the first present.
const AB_MEASURES: [&str; 2] = ["heartbeat_per_s", "grants_per_s"];

/// Every A/B run of `ab/`: per numeric column, A's and B's values and B ÷ A
/// within each pair that has both builds, and the run's verdict.
pub(super) fn ab_runs(data: &Path) -> Result<Value, FactsError> {
    let (dir, name) = file(data, "peer-limits/ab");
    let mut stems: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|_| FactsError::Missing(format!("{name}/")))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".csv").map(str::to_owned))
        .collect();
    stems.sort();
    let mut out = Map::new();
    for stem in stems {
        out.insert(
            stem.clone(),
            ab_run(data, &format!("peer-limits/ab/{stem}.csv"))?,
        );
    }
    Ok(Value::Object(out))
}

/// One A/B run ([`ab_runs`]).
fn ab_run(data: &Path, rel: &str) -> Result<Value, FactsError> {
    let t = read_table(data, rel)?;
    let mut pairs: Vec<(String, Option<Row>, Option<Row>)> = Vec::new();
    for r in Row::all(&t) {
        let pair = r.text("pair").to_string();
        let i = match pairs.iter().position(|p| p.0 == pair) {
            Some(i) => i,
            None => {
                pairs.push((pair, None, None));
                pairs.len() - 1
            }
        };
        match r.text("build") {
            "a" => pairs[i].1 = Some(r),
            "b" => pairs[i].2 = Some(r),
            _ => {}
        }
    }
    let both: Vec<(Row, Row)> = pairs
        .into_iter()
        .filter_map(|(_, a, b)| Some((a?, b?)))
        .collect();
    if both.is_empty() {
        return Err(FactsError::Bad {
            file: format!("data/{rel}"),
            what: "no pairs with both builds".into(),
        });
    }
    let (mut a_of, mut b_of, mut ratio) = (Map::new(), Map::new(), Map::new());
    let mut measure = None;
    for c in t.header.iter().filter(|c| *c != "pair" && *c != "build") {
        let a: Vec<f64> = both.iter().map(|(a, _)| a.num(c)).collect();
        let b: Vec<f64> = both.iter().map(|(_, b)| b.num(c)).collect();
        let r: Vec<f64> = a.iter().zip(&b).map(|(a, b)| b / a).collect();
        if measure.is_none() && AB_MEASURES.contains(&c.as_str()) {
            measure = Spread::of(&r).map(|s| (c.clone(), s));
        }
        a_of.insert(c.clone(), spread_of(&a));
        b_of.insert(c.clone(), spread_of(&b));
        ratio.insert(c.clone(), spread_of(&r));
    }
    Ok(json!({
        "pairs": both.len(),
        "measure": measure.as_ref().map(|m| m.0.clone()),
        "verdict": measure.as_ref().map(|m| ab_verdict(&m.1)),
        "a": a_of,
        "b": b_of,
        "b_over_a": ratio,
    }))
}
