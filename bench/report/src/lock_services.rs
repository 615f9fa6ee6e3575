//! The per-lock-service table: for each lock service the bench drives
//! (fencepost, etcd, redis, redlock), what plays the lease and the fencing
//! token, the measured heartbeat-equivalent exchange (the `bench peer`
//! heartbeat rows of the reference pack: L2, LeaseKeepAlive, the redis
//! compare-owner `PEXPIRE`), the margin ADR-006's trigger-1 arithmetic
//! derives from that exchange's p99 at the production configuration
//! ([`margin_for`] over `min(lease, session TTL)` of [`Production`]), and
//! what the fences and the ledger check saw when a worker was frozen in its
//! critical section (`experiments pause`, client check on and off).
//!
//! Inputs, all in the reference pack (`data/reference/`): `peer/peer.csv`,
//! and per service two pause runs: `pause/` and `pause-uc03/` for fencepost
//! (the pack's own steps), `pause-<service>/` and `pause-<service>-uc03/`
//! for the others. A service whose file is absent gets `null` there (the
//! table says "no data committed"); nothing is invented for it. The same
//! facts feed `docs-facts.json` (`bench docs`) and the evidence document
//! (`bench adr`).

use std::collections::BTreeSet;
use std::path::Path;

use bench_analysis::peer::{PeerRow, Spread};
use bench_analysis::projection::Production;
use bench_analysis::summary::margin_for;
use bench_analysis::targets::{Bound, over_repeats};
use bench_core::peer::PeerOp;
use serde_json::{Value, json};

use bench_analysis::peer_csv::read_peer_csv;
use bench_core::error::Chain;

/// One lock service of the table: its name (the `backend` of a pause run,
/// the `system` of a `bench peer` row), and what plays the lease and the token.
pub struct Service {
    /// `fencepost`, `etcd`, `redis` or `redlock`.
    pub name: &'static str,
    /// What plays the lease, and what renews it.
    pub lease: &'static str,
    /// What plays the fencing token the rail checks.
    pub token: &'static str,
}

/// The services, in the table's order.
pub const SERVICES: [Service; 4] = [
    Service {
        name: "fencepost",
        lease: "the lock-server's grant on a session, kept alive by L2 heartbeats; the server \
                keeps a lapsed grant in grace before it reassigns it",
        token: "the lock-server's per-lock token, strictly increasing, stored before the grant \
                is answered",
    },
    Service {
        name: "etcd",
        lease: "an etcd lease (whole seconds) the key is attached to, kept alive by \
                LeaseKeepAlive; no grace",
        token: "the key's create revision (Raft-ordered, strictly increasing per key)",
    },
    Service {
        name: "redis",
        lease: "the key's `PX` expiry on one redis-server, renewed by a compare-owner `PEXPIRE` \
                script; no grace",
        token: "an `INCR` of the key's fencing counter in the acquire script (lost with the \
                counter when a redis-server restarts without persistence)",
    },
    Service {
        name: "redlock",
        lease: "the same key on N independent redis-servers, held while a majority answered and \
                the validity time (TTL − elapsed − drift) lasts",
        token: "none: the algorithm has no fencing token, so the rail runs with its fences off",
    },
];

/// The pause runs' directories for `service`: (client check on, off).
pub fn pause_dirs(service: &str) -> (String, String) {
    if service == "fencepost" {
        ("pause".into(), "pause-uc03".into())
    } else {
        (format!("pause-{service}"), format!("pause-{service}-uc03"))
    }
}

/// A spread as the facts write it: `{"n", "median", "min", "max", "ci95":
/// [lo, hi] | null}`, `null` for none.
pub fn spread_json(s: Option<Spread>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => json!({
            "n": s.n,
            "median": s.median,
            "min": s.min,
            "max": s.max,
            "ci95": s.ci95.map(|(lo, hi)| json!([lo, hi])),
        }),
    }
}

/// The spread of `values` as [`spread_json`] writes it.
fn spread_of(values: &[f64]) -> Value {
    spread_json(Spread::of(values))
}

/// The JSON file `rel` of `pack`, or `None` when it is absent or unreadable.
fn pack_json(pack: &Path, rel: &str) -> Option<Value> {
    let text = std::fs::read_to_string(pack.join(rel)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The table's facts from the reference pack `pack`: one row per
/// [`SERVICES`] entry.
pub fn lock_services_in(pack: &Path) -> Value {
    let prod = Production::default();
    let peer_csv = pack.join("peer").join("peer.csv");
    let peer = if peer_csv.is_file() {
        read_peer_csv(&peer_csv).map_err(|e| Chain(&e).to_string())
    } else {
        Err("peer/peer.csv is missing".to_string())
    };
    let reference = pack_json(pack, "pause/pause.json");
    let rows: Vec<Value> = SERVICES
        .iter()
        .map(|s| {
            let (on, off) = pause_dirs(s.name);
            let pause = |dir: &str| pause_run(pack, dir, s.name, reference.as_ref());
            json!({
                "service": s.name,
                "lease": s.lease,
                "token": s.token,
                "exchanges": peer.as_ref().map(|r| exchanges(r, s.name, &prod)).unwrap_or_default(),
                "pause_check_on": pause(&on),
                "pause_check_off": pause(&off),
            })
        })
        .collect();
    json!({
        "production": {
            "lease_ms": prod.lease_ms,
            "session_ttl_ms": prod.session_ttl_ms,
            "margin": prod.margin,
        },
        "peer_unavailable": peer.err(),
        "rows": rows,
    })
}

/// The heartbeat-equivalent exchange of `system` in the peer rows, one
/// entry per store it was measured on (fencepost's SQLite and PostgreSQL,
/// Redis's persistence modes), each at the fewest clients measured on it:
/// its p50 and p99 per repeat, and the margin trigger 1 needs for that p99
/// at `prod` (`3 × p99 / min(lease, session TTL)`), judged against the
/// margin in force repeat by repeat. Empty without rows of `system`.
pub fn exchanges(rows: &[PeerRow], system: &str, prod: &Production) -> Vec<Value> {
    let mine: Vec<&PeerRow> = rows
        .iter()
        .filter(|r| r.system == system && r.is_native() && r.op == PeerOp::Heartbeat)
        .collect();
    let stores: BTreeSet<&str> = mine.iter().map(|r| r.store.as_str()).collect();
    stores
        .into_iter()
        .filter_map(|store| {
            let of: Vec<&PeerRow> = mine.iter().copied().filter(|r| r.store == store).collect();
            let conc = of.iter().map(|r| r.conc).min()?;
            let at: Vec<&PeerRow> = of
                .into_iter()
                .filter(|r| r.conc == conc && r.ops > 0)
                .collect();
            exchange_at(&at, conc, prod)
        })
        .collect()
}

/// One store's exchange over the repeats `at` (one concurrency).
fn exchange_at(at: &[&PeerRow], conc: usize, prod: &Production) -> Option<Value> {
    let base_ms = prod.lease_ms.min(prod.session_ttl_ms);
    let p50: Vec<f64> = at.iter().map(|r| r.p50_us as f64).collect();
    let p99: Vec<f64> = at.iter().map(|r| r.p99_us as f64).collect();
    let margins: Vec<f64> = at.iter().map(|r| margin_for(r.p99_us, base_ms)).collect();
    Some(json!({
        "label": at.first()?.label(),
        "conc": conc,
        "repeats": at.len(),
        "samples": at.iter().map(|r| r.ops).sum::<u64>(),
        "errors": at.iter().map(|r| r.errors).sum::<u64>(),
        "p50_us": spread_of(&p50),
        "p99_us": spread_of(&p99),
        "margin_needed": spread_of(&margins),
        "within_margin": over_repeats(&margins, prod.margin, Bound::AtMost).words(),
    }))
}

/// The configuration keys that must agree for two pause runs to have had
/// the same pauses (everything but the backend and the client check).
const SCHEDULE_KEYS: [&str; 9] = [
    "ttl_ms",
    "pauses",
    "workers",
    "payouts_per_pause",
    "pause_factor",
    "margin",
    "seed",
    "rail_latency",
    "rail_read_timeout_ms",
];

/// One pause run's counts (`null` when its `pause.json` is not committed),
/// whether it ran the service it is filed under, and whether its schedule
/// is the fencepost reference run's.
fn pause_run(pack: &Path, dir: &str, service: &str, reference: Option<&Value>) -> Value {
    let rel = format!("{dir}/pause.json");
    let Some(p) = pack_json(pack, &rel) else {
        return Value::Null;
    };
    let cfg = &p["config"];
    let backend = cfg["backend"].as_str().unwrap_or("fencepost");
    let differs: Vec<&str> = reference
        .map(|r| {
            SCHEDULE_KEYS
                .into_iter()
                .filter(|k| cfg.get(*k) != r["config"].get(*k))
                .collect()
        })
        .unwrap_or_default();
    let keep = [
        "client_check",
        "pauses",
        "fenced_out",
        "fenced_out_fence1",
        "fenced_out_fence2",
        "duplicate_attempted",
        "paid",
        "payouts",
        "paid_twice",
        "stale_paid",
        "ledger_ok",
        "expectation_met",
    ];
    let mut out: serde_json::Map<String, Value> = keep
        .into_iter()
        .map(|k| (k.to_string(), p.get(k).cloned().unwrap_or(Value::Null)))
        .collect();
    out.insert("file".into(), json!(rel));
    out.insert("backend_matches".into(), json!(backend == service));
    out.insert("rail_fences".into(), rail_fences(&p));
    out.insert(
        "schedule_differs".into(),
        reference.map_or(Value::Null, |_| json!(differs)),
    );
    Value::Object(out)
}

/// Whether the rail checked tokens in a pause run, `on` or `off`: the
/// run's own record (`rail_fences`, top level or in its config, as `on`/
/// `off` or as a bool) where it has one, else `on` (every run before the
/// rail could run without fences checked them).
fn rail_fences(p: &Value) -> Value {
    let recorded = p
        .get("rail_fences")
        .filter(|v| !v.is_null())
        .or_else(|| p["config"].get("rail_fences"));
    match recorded {
        Some(Value::Bool(false)) => json!("off"),
        Some(Value::String(s)) if s == "off" => json!("off"),
        _ => json!("on"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_analysis::peer::ETCD_CLIENT;
    use bench_core::peer::Sample;

    fn row(system: &str, client: &str, conc: usize, repeat: u32, p99_us: u64) -> PeerRow {
        let mut latency = bench_core::hist::new_histogram();
        latency.saturating_record(p99_us);
        let sample = Sample {
            ops: 1_000,
            errors: 0,
            seconds: 1.0,
            latency,
            first_error: None,
        };
        let mut r = PeerRow::new(
            system,
            "bbolt",
            client,
            PeerOp::Heartbeat,
            conc,
            repeat,
            0,
            &sample,
            (None, None, None),
            (None, None),
        );
        r.p99_us = p99_us;
        r
    }

    #[test]
    fn the_margin_is_trigger_ones_arithmetic_on_the_fewest_clients_p99() {
        let prod = Production::default();
        // 15 ms p99 over min(30 s, 15 s) = 15 s: 3 × 15 / 15,000 = 0.003.
        let rows = vec![
            row("etcd", ETCD_CLIENT, 16, 1, 15_000),
            row("etcd", ETCD_CLIENT, 16, 2, 15_000),
            row("etcd", ETCD_CLIENT, 64, 1, 900_000),
        ];
        let all = exchanges(&rows, "etcd", &prod);
        assert_eq!(all.len(), 1, "one store");
        let v = &all[0];
        assert_eq!(v["conc"], 16, "the fewest clients measured");
        assert_eq!(v["repeats"], 2);
        assert!((v["margin_needed"]["median"].as_f64().unwrap() - 0.003).abs() < 1e-9);
        assert_eq!(v["within_margin"], "met in all 2");
        assert!(exchanges(&rows, "redis", &prod).is_empty(), "no rows: none");
    }

    #[test]
    fn a_p99_beyond_the_margin_in_force_is_not_met_store_by_store() {
        // 2 s p99: 3 × 2,000 / 15,000 = 0.4 > 0.30.
        let mut memory = row("redis", "redis-rs", 1, 1, 1_000);
        memory.store = "memory".into();
        let rows = vec![row("redis", "redis-rs", 1, 1, 2_000_000), memory];
        let v = exchanges(&rows, "redis", &Production::default());
        assert_eq!(v.len(), 2, "one entry per store");
        assert_eq!(v[0]["label"], "redis/bbolt");
        assert_eq!(v[0]["within_margin"], "not met");
        assert_eq!(v[1]["within_margin"], "met in all 1");
    }

    #[test]
    fn an_absent_pause_run_is_null_and_a_present_one_is_checked_against_the_reference() {
        let dir = std::env::temp_dir().join(format!("lock-services-{}", std::process::id()));
        let write = |sub: &str, backend: &str, seed: u64| {
            let d = dir.join("reference").join(sub);
            std::fs::create_dir_all(&d).unwrap();
            let p = json!({"client_check": true, "paid_twice": 0, "fenced_out": 0,
                "config": {"backend": backend, "seed": seed, "ttl_ms": 1000}});
            std::fs::write(d.join("pause.json"), p.to_string()).unwrap();
        };
        write("pause", "fencepost", 17);
        write("pause-redis", "redis", 18);
        write("pause-etcd", "fencepost", 17);
        let v = lock_services_in(&dir.join("reference"));
        std::fs::remove_dir_all(&dir).ok();
        let rows = v["rows"].as_array().unwrap();
        let by = |name: &str| rows.iter().find(|r| r["service"] == name).unwrap();
        assert_eq!(
            by("fencepost")["pause_check_on"]["schedule_differs"],
            json!([])
        );
        assert!(by("fencepost")["pause_check_off"].is_null());
        assert_eq!(
            by("redis")["pause_check_on"]["schedule_differs"],
            json!(["seed"])
        );
        assert_eq!(by("redis")["pause_check_on"]["rail_fences"], "on");
        for (recorded, reads) in [
            (json!({"config": {"rail_fences": false}}), "off"),
            (json!({"rail_fences": "off"}), "off"),
            (json!({"config": {"rail_fences": true}}), "on"),
            (json!({"config": {}}), "on"),
        ] {
            assert_eq!(rail_fences(&recorded), reads, "{recorded}");
        }
        assert_eq!(by("etcd")["pause_check_on"]["backend_matches"], false);
        assert_eq!(by("redlock")["exchanges"], json!([]));
        assert!(v["peer_unavailable"].is_string());
    }
}
