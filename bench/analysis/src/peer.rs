//! `bench peer`'s analysis, pure over its rows: the plan ([`PeerPlan`]),
//! `peer.csv`, the ratios
//! (fencepost ÷ etcd, taken per repeat between interleaved neighbours;
//! median, min–max and a 95 % t-interval of the mean over repeats) and the
//! verdicts against the targets. The report crate draws and writes them.
//!
//! A verdict against a target ratio is given only where the interval
//! decides it: `met` when its low end is at or above the target, `not met`
//! when its high end is below, else `not resolved at N repeats`
//! (docs/measurement.md: a decision only where intervals separate).
//!
//! A run with `--http-client sdk,hyper-legacy` also drives every lock-server
//! with hyper's pooled client; [`client_ratios`] weighs the SDK's own client
//! against it per client CPU-second.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

pub use crate::peer_plan::PeerPlan;
use bench_core::peer::{PeerHttpClient, PeerOp, Sample};

/// The `peer.csv` columns, in file order.
pub const PEER_COLUMNS: [&str; 18] = [
    "system",
    "store",
    "op",
    "conc",
    "ops_per_s",
    "p50_us",
    "p99_us",
    "repeat",
    "order",
    "ops",
    "errors",
    "seconds",
    "cpu_server_s",
    "cpu_store_s",
    "cpu_bench_s",
    "client",
    "store_tx",
    "store_writes",
];

/// The `client` of an etcd row (`etcd-client`, over tonic's gRPC); a
/// fencepost row's is a [`PeerHttpClient`] (`sdk` or `hyper-legacy`).
pub const ETCD_CLIENT: &str = "etcd-client";

/// The `system` of a Redis row.
pub const REDIS: &str = "redis";

/// The `client` of a Redis row (the `redis` crate, one multiplexed
/// connection per client task).
pub const REDIS_CLIENT: &str = "redis-rs";

/// The ratio the issue asks fencepost to reach over etcd at 16 clients
/// (none for the floor, which is each server's own reference).
pub fn target_ratio(op: PeerOp) -> Option<f64> {
    match op {
        PeerOp::Heartbeat => Some(2.0),
        PeerOp::Grant => Some(1.5),
        PeerOp::Floor | PeerOp::Fsync => None,
    }
}

/// The concurrency at which the targets are judged.
pub const TARGET_CONCURRENCY: usize = 16;

/// One measurement: a row of `peer.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRow {
    /// `fencepost` or `etcd`.
    pub system: String,
    /// `sqlite`, `postgres`, or `bbolt` (etcd).
    pub store: String,
    /// `heartbeat` or `grant`.
    pub op: PeerOp,
    /// Concurrent clients.
    pub conc: usize,
    /// Successful operations per second over the window.
    pub ops_per_s: f64,
    /// Median latency of a successful operation, µs.
    pub p50_us: u64,
    /// 99th percentile latency, µs.
    pub p99_us: u64,
    /// The repeat, from 1.
    pub repeat: u32,
    /// Position of this system within its (repeat, op, conc) group (seeded order).
    pub order: u32,
    /// Successful operations in the window.
    pub ops: u64,
    /// Failed or timed-out operations in the window.
    pub errors: u64,
    /// Window length, s.
    pub seconds: f64,
    /// CPU seconds of the server process (lock-server or etcd) over the window.
    pub cpu_server_s: Option<f64>,
    /// CPU seconds of the PostgreSQL backends serving the lock-server (postgres store only).
    pub cpu_store_s: Option<f64>,
    /// CPU seconds of the bench (the driver) over the window.
    pub cpu_bench_s: Option<f64>,
    /// The client library that drove the system: `sdk` or `hyper-legacy`
    /// (fencepost, `--http-client`), `etcd-client` (etcd).
    pub client: String,
    /// Store flushes in the window, from the server's own counters:
    /// `lock_store_transactions_total` (one fsync each) for fencepost,
    /// `etcd_disk_wal_fsync_duration_seconds_count` for etcd.
    pub store_tx: Option<u64>,
    /// Store writes in the window (`lock_store_writes_total`; fencepost only).
    pub store_writes: Option<u64>,
}

impl PeerRow {
    /// The row of one measurement.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        system: &str,
        store: &str,
        client: &str,
        op: PeerOp,
        conc: usize,
        repeat: u32,
        order: u32,
        sample: &Sample,
        cpu: (Option<f64>, Option<f64>, Option<f64>),
        flushes: (Option<u64>, Option<u64>),
    ) -> Self {
        PeerRow {
            system: system.into(),
            store: store.into(),
            op,
            conc,
            ops_per_s: sample.ops_per_s(),
            p50_us: sample.latency.value_at_quantile(0.50),
            p99_us: sample.latency.value_at_quantile(0.99),
            repeat,
            order,
            ops: sample.ops,
            errors: sample.errors,
            seconds: sample.seconds,
            cpu_server_s: cpu.0,
            cpu_store_s: cpu.1,
            cpu_bench_s: cpu.2,
            client: client.into(),
            store_tx: flushes.0,
            store_writes: flushes.1,
        }
    }

    /// `system/store`, and the client when it is not the system's own
    /// (`fencepost/sqlite hyper-legacy`): [`label`].
    pub fn label(&self) -> String {
        label(&self.system, &self.store, &self.client)
    }

    /// Driven by the system's own client: the SDK's for fencepost.
    pub fn is_native(&self) -> bool {
        is_native(&self.system, &self.client)
    }
}

/// Whether `client` is `system`'s own: every etcd row, and fencepost driven
/// by the SDK's client (what every fencepost ÷ etcd ratio is taken with).
pub fn is_native(system: &str, client: &str) -> bool {
    system != "fencepost" || client == PeerHttpClient::Sdk.as_str()
}

/// How a measured system is named in the report and the progress lines:
/// `system/store`, and the client when it is not the system's own.
pub fn label(system: &str, store: &str, client: &str) -> String {
    if is_native(system, client) {
        format!("{system}/{store}")
    } else {
        format!("{system}/{store} {client}")
    }
}

/// `v` with `digits` decimals, or `-` when absent.
pub fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// Writes `peer.csv` (every row so far) into `dir`, through a temporary file
/// renamed into place; the error is the OS error of the write or the rename.
pub fn write_csv(dir: &Path, rows: &[PeerRow]) -> std::io::Result<()> {
    let mut t = PEER_COLUMNS.join(",");
    t.push('\n');
    let opt = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.4}"));
    for r in rows {
        let _ = writeln!(
            t,
            "{},{},{},{},{:.1},{},{},{},{},{},{},{:.4},{},{},{},{},{},{}",
            r.system,
            r.store,
            r.op.as_str(),
            r.conc,
            r.ops_per_s,
            r.p50_us,
            r.p99_us,
            r.repeat,
            r.order,
            r.ops,
            r.errors,
            r.seconds,
            opt(r.cpu_server_s),
            opt(r.cpu_store_s),
            opt(r.cpu_bench_s),
            r.client,
            r.store_tx.map_or_else(String::new, |v| v.to_string()),
            r.store_writes.map_or_else(String::new, |v| v.to_string()),
        );
    }
    let tmp = dir.join("peer.csv.tmp");
    std::fs::write(&tmp, t)?;
    std::fs::rename(&tmp, dir.join("peer.csv"))?;
    Ok(())
}

/// Median, min, max and a 95 % t-interval of the mean of some repeats
/// (`t` from [`crate::stats::t975`], the one table every interval uses).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// How many values.
    pub n: usize,
    /// Their median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// 95 % t-interval of the mean (`None` below 2 values).
    pub ci95: Option<(f64, f64)>,
}

impl Spread {
    /// The spread of `values` (`None` when empty).
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let ci95 = (n >= 2).then(|| {
            let mean = v.iter().sum::<f64>() / n as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let half = crate::stats::t975(n - 1) * (var / n as f64).sqrt();
            (mean - half, mean + half)
        });
        Some(Spread {
            n,
            median,
            min: v[0],
            max: v[n - 1],
            ci95,
        })
    }

    /// The verdict of "at least `target`" from the interval (see the module doc).
    pub fn verdict(&self, target: f64) -> String {
        match self.ci95 {
            Some((lo, _)) if lo >= target => "met".into(),
            Some((_, hi)) if hi < target => "not met".into(),
            Some(_) => format!("not resolved at {} repeats", self.n),
            None if self.median >= target => "met (1 repeat, no interval)".into(),
            None => "not met (1 repeat, no interval)".into(),
        }
    }
}

/// One fencepost store's ratio over etcd for one (op, conc).
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    /// The fencepost store.
    pub store: String,
    /// The operation.
    pub op: PeerOp,
    /// Concurrent clients.
    pub conc: usize,
    /// fencepost ops/s ÷ etcd ops/s, one per repeat that measured both.
    pub spread: Spread,
    /// Those ratios, in repeat order (a target judged repeat by repeat,
    /// [`crate::targets::over_repeats`]).
    pub values: Vec<f64>,
}

/// The ratios over etcd, per (store, op, conc), each taken within a
/// repeat, with fencepost driven by the SDK's own client (what an SDK user gets).
pub fn ratios(rows: &[PeerRow]) -> Vec<Ratio> {
    ratios_over(rows, "etcd", None)
}

/// The same over another system (`redis`), on one of its stores when it
/// was measured on several (`aof-always`); `None` takes every row of it (one
/// store).
pub fn ratios_over(rows: &[PeerRow], system: &str, store: Option<&str>) -> Vec<Ratio> {
    let other: BTreeMap<(PeerOp, usize, u32), f64> = rows
        .iter()
        .filter(|r| r.system == system && store.is_none_or(|s| r.store == s))
        .map(|r| ((r.op, r.conc, r.repeat), r.ops_per_s))
        .collect();
    let mut per: BTreeMap<(String, PeerOp, usize), Vec<f64>> = BTreeMap::new();
    // The fsync ceiling is a directory's, not a system's: no ratio between them.
    for r in rows
        .iter()
        .filter(|r| r.system == "fencepost" && r.is_native() && r.op != PeerOp::Fsync)
    {
        if let Some(&e) = other.get(&(r.op, r.conc, r.repeat))
            && e > 0.0
        {
            per.entry((r.store.clone(), r.op, r.conc))
                .or_default()
                .push(r.ops_per_s / e);
        }
    }
    per.into_iter()
        .filter_map(|((store, op, conc), v)| {
            Spread::of(&v).map(|spread| Ratio {
                store,
                op,
                conc,
                spread,
                values: v,
            })
        })
        .collect()
}

/// CPU per operation, etcd ÷ fencepost, per (store, op, conc): of the
/// service (the lock-server plus the PostgreSQL backends serving it, vs the
/// etcd process) and of the client (this driver's CPU while it drove each
/// system), each taken within a repeat. On a box where the driver shares the
/// cores, ops/s is bound by their sum; these say which side sets the ratio.
pub fn cpu_ratios(rows: &[PeerRow]) -> Vec<(Ratio, Option<Spread>)> {
    let per_op = |r: &PeerRow, f: fn(&PeerRow) -> Option<f64>| {
        (r.ops > 0)
            .then_some(())
            .and(f(r))
            .map(|s| s / r.ops as f64)
    };
    let service = |r: &PeerRow| r.cpu_server_s.map(|s| s + r.cpu_store_s.unwrap_or(0.0));
    let etcd: BTreeMap<(PeerOp, usize, u32), &PeerRow> = rows
        .iter()
        .filter(|r| r.system == "etcd")
        .map(|r| ((r.op, r.conc, r.repeat), r))
        .collect();
    // Per (store, op, conc): the service ratios and the client ratios.
    type Samples = (Vec<f64>, Vec<f64>);
    let mut per: BTreeMap<(String, PeerOp, usize), Samples> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.system == "fencepost" && r.is_native() && r.op != PeerOp::Fsync)
    {
        let Some(e) = etcd.get(&(r.op, r.conc, r.repeat)) else {
            continue;
        };
        let slot = per.entry((r.store.clone(), r.op, r.conc)).or_default();
        if let (Some(a), Some(b)) = (per_op(e, service), per_op(r, service))
            && b > 0.0
        {
            slot.0.push(a / b);
        }
        if let (Some(a), Some(b)) = (per_op(e, |r| r.cpu_bench_s), per_op(r, |r| r.cpu_bench_s))
            && b > 0.0
        {
            slot.1.push(a / b);
        }
    }
    per.into_iter()
        .filter_map(|((store, op, conc), (svc, drv))| {
            Spread::of(&svc).map(|spread| {
                (
                    Ratio {
                        store,
                        op,
                        conc,
                        spread,
                        values: svc,
                    },
                    Spread::of(&drv),
                )
            })
        })
        .collect()
}

/// The SDK's HTTP client against hyper's pooled client
/// (`hyper_util::client::legacy::Client`) on one (store, op, conc): each
/// ratio is SDK ÷ hyper, taken within a repeat between interleaved
/// neighbours on the same lock-server.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRatio {
    /// The fencepost store.
    pub store: String,
    /// The operation.
    pub op: PeerOp,
    /// Concurrent clients.
    pub conc: usize,
    /// Operations per CPU-second of the client (this driver, `cpu_bench_s`),
    /// SDK ÷ hyper: above 1 the SDK's client costs less CPU per operation.
    pub per_client_cpu: Spread,
    /// ops/s, SDK ÷ hyper.
    pub throughput: Spread,
}

/// [`ClientRatio`]s of a run that drove fencepost with both clients
/// (`--http-client sdk,hyper-legacy`); empty otherwise.
pub fn client_ratios(rows: &[PeerRow]) -> Vec<ClientRatio> {
    let per_cpu = |r: &PeerRow| r.cpu_bench_s.filter(|s| *s > 0.0).map(|s| r.ops as f64 / s);
    let hyper: BTreeMap<(&str, PeerOp, usize, u32), &PeerRow> = rows
        .iter()
        .filter(|r| r.system == "fencepost" && r.client == PeerHttpClient::HyperLegacy.as_str())
        .map(|r| ((r.store.as_str(), r.op, r.conc, r.repeat), r))
        .collect();
    type Samples = (Vec<f64>, Vec<f64>);
    let mut per: BTreeMap<(String, PeerOp, usize), Samples> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.system == "fencepost" && r.client == PeerHttpClient::Sdk.as_str())
    {
        let Some(h) = hyper.get(&(r.store.as_str(), r.op, r.conc, r.repeat)) else {
            continue;
        };
        let slot = per.entry((r.store.clone(), r.op, r.conc)).or_default();
        if let (Some(a), Some(b)) = (per_cpu(r), per_cpu(h))
            && b > 0.0
        {
            slot.0.push(a / b);
        }
        if h.ops_per_s > 0.0 {
            slot.1.push(r.ops_per_s / h.ops_per_s);
        }
    }
    per.into_iter()
        .filter_map(|((store, op, conc), (cpu, ops))| {
            Some(ClientRatio {
                store,
                op,
                conc,
                per_client_cpu: Spread::of(&cpu)?,
                throughput: Spread::of(&ops)?,
            })
        })
        .collect()
}

/// Which client an SDK ÷ hyper spread says is better: only where the 95 %
/// interval excludes 1 (one repeat decides nothing).
pub fn client_verdict(s: &Spread) -> String {
    match s.ci95 {
        Some((lo, _)) if lo > 1.0 => "the SDK's client is measurably better".into(),
        Some((_, hi)) if hi < 1.0 => "hyper's pooled client is measurably better".into(),
        Some(_) => format!("not resolved at {} repeats", s.n),
        None => "not resolved (1 repeat, no interval)".into(),
    }
}

/// Rows grouped by (op, system/store, conc), in a stable order.
pub fn groups(rows: &[PeerRow]) -> BTreeMap<(PeerOp, String, usize), Vec<&PeerRow>> {
    let mut g: BTreeMap<(PeerOp, String, usize), Vec<&PeerRow>> = BTreeMap::new();
    for r in rows {
        g.entry((r.op, r.label(), r.conc)).or_default().push(r);
    }
    g
}

/// The median of some optional per-op CPU costs, µs of CPU per operation.
pub fn cpu_us_per_op(rows: &[&PeerRow], f: fn(&PeerRow) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.ops > 0)
        .filter_map(|r| f(r).map(|s| s * 1e6 / r.ops as f64))
        .collect();
    Spread::of(&v).map(|s| s.median)
}

/// The analysis tests' row: `ops_s` ops/s over 4 s by the system's own client,
/// 1 s of server and 0.5 s of driver CPU, no store counters.
#[cfg(test)]
pub(crate) fn test_row(
    system: &str,
    store: &str,
    op: PeerOp,
    conc: usize,
    repeat: u32,
    ops_s: f64,
) -> PeerRow {
    let client = if system == "etcd" {
        ETCD_CLIENT
    } else {
        PeerHttpClient::Sdk.as_str()
    };
    test_row_with(system, store, client, op, conc, repeat, ops_s)
}

/// [`test_row`] driven by `client`.
#[cfg(test)]
pub(crate) fn test_row_with(
    system: &str,
    store: &str,
    client: &str,
    op: PeerOp,
    conc: usize,
    repeat: u32,
    ops_s: f64,
) -> PeerRow {
    let sample = Sample {
        ops: (ops_s * 4.0) as u64,
        errors: 0,
        seconds: 4.0,
        latency: bench_core::hist::new_histogram(),
        first_error: None,
    };
    PeerRow::new(
        system,
        store,
        client,
        op,
        conc,
        repeat,
        0,
        &sample,
        (Some(1.0), None, Some(0.5)),
        (None, None),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::{test_row as row, test_row_with as row_with};

    #[test]
    fn a_spread_takes_the_one_t_table_beyond_thirty_degrees_of_freedom() {
        // 41 values, 40 degrees of freedom: t = 1.96 + 2.4 / 40, as every interval.
        let v: Vec<f64> = (0..41).map(f64::from).collect();
        let (lo, hi) = Spread::of(&v).unwrap().ci95.unwrap();
        let i = crate::stats::Interval::of(&v, f64::NEG_INFINITY, f64::INFINITY);
        assert!((lo - i.lo).abs() < 1e-12 && (hi - i.hi).abs() < 1e-12);
        // The sample variance of 0..=40 is 143.5.
        let half = crate::stats::t975(40) * (143.5_f64 / 41.0).sqrt();
        assert!((hi - 20.0 - half).abs() < 1e-9, "{hi} vs {}", 20.0 + half);
    }

    #[test]
    fn cpu_ratios_compare_service_and_client_cpu_per_operation() {
        let mut f = row("fencepost", "postgres", PeerOp::Grant, 16, 1, 10_000.0);
        let mut e = row("etcd", "bbolt", PeerOp::Grant, 16, 1, 5_000.0);
        (f.ops, e.ops) = (40_000, 20_000);
        // fencepost: 1 s lock-server + 1 s PostgreSQL for 40k ops = 50 µs/op;
        // etcd: 5 s for 20k = 250 µs/op → 5×. Client: 4 s/40k vs 1 s/20k → 0.5×.
        (f.cpu_server_s, f.cpu_store_s, f.cpu_bench_s) = (Some(1.0), Some(1.0), Some(4.0));
        (e.cpu_server_s, e.cpu_store_s, e.cpu_bench_s) = (Some(5.0), None, Some(1.0));
        let r = cpu_ratios(&[f, e]);
        assert_eq!(r.len(), 1);
        assert!(
            (r[0].0.spread.median - 5.0).abs() < 1e-9,
            "{:?}",
            r[0].0.spread
        );
        assert!((r[0].1.unwrap().median - 0.5).abs() < 1e-9);
    }

    #[test]
    fn ratios_are_taken_within_each_repeat_never_across() {
        let rows = vec![
            row("fencepost", "sqlite", PeerOp::Heartbeat, 16, 1, 40_000.0),
            row("etcd", "bbolt", PeerOp::Heartbeat, 16, 1, 20_000.0),
            // A slow repeat for both: the ratio stays 2 even though the levels moved.
            row("fencepost", "sqlite", PeerOp::Heartbeat, 16, 2, 20_000.0),
            row("etcd", "bbolt", PeerOp::Heartbeat, 16, 2, 10_000.0),
            row("fencepost", "sqlite", PeerOp::Heartbeat, 16, 3, 30_000.0),
            row("etcd", "bbolt", PeerOp::Heartbeat, 16, 3, 15_000.0),
        ];
        let r = ratios(&rows);
        assert_eq!(r.len(), 1);
        let s = r[0].spread;
        assert_eq!((s.n, s.median, s.min, s.max), (3, 2.0, 2.0, 2.0));
        let (lo, hi) = s.ci95.unwrap();
        assert!((lo - 2.0).abs() < 1e-9 && (hi - 2.0).abs() < 1e-9);
        assert_eq!(s.verdict(2.0), "met");
    }

    #[test]
    fn ratios_over_redis_take_one_of_its_stores_and_leave_etcd_out() {
        let redis = |store, ops| row_with(REDIS, store, REDIS_CLIENT, PeerOp::Grant, 16, 1, ops);
        let rows = vec![
            row("fencepost", "sqlite", PeerOp::Grant, 16, 1, 6_000.0),
            row("etcd", "bbolt", PeerOp::Grant, 16, 1, 2_000.0),
            redis("aof-always", 3_000.0),
            redis("memory", 12_000.0),
        ];
        let over = |store| ratios_over(&rows, REDIS, Some(store))[0].spread.median;
        assert_eq!((over("aof-always"), over("memory")), (2.0, 0.5));
        assert_eq!(ratios(&rows)[0].spread.median, 3.0, "over etcd, as before");
        assert!(rows[2].is_native(), "the redis crate is Redis's own client");
    }

    #[test]
    fn a_verdict_needs_the_interval_to_decide() {
        let wide = Spread::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(wide.median, 2.0);
        // mean 2, s = 1, t(2) = 4.303: 2 ± 2.48.
        let (lo, hi) = wide.ci95.unwrap();
        assert!((lo - (2.0 - 4.303 / 3f64.sqrt())).abs() < 1e-9, "{lo}");
        assert!((hi - (2.0 + 4.303 / 3f64.sqrt())).abs() < 1e-9, "{hi}");
        assert_eq!(wide.verdict(1.5), "not resolved at 3 repeats");
        let low = Spread::of(&[0.50, 0.52, 0.51]).unwrap();
        assert_eq!(low.verdict(1.5), "not met");
        assert_eq!(
            Spread::of(&[2.5]).unwrap().verdict(2.0),
            "met (1 repeat, no interval)"
        );
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn the_csv_has_every_column_and_empty_cells_for_missing_cpu() {
        let dir = std::env::temp_dir().join(format!("peer-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rows = vec![row("etcd", "bbolt", PeerOp::Grant, 1, 1, 100.0)];
        write_csv(&dir, &rows).unwrap();
        let text = std::fs::read_to_string(dir.join("peer.csv")).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap(), PEER_COLUMNS.join(","));
        let fields: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(fields.len(), PEER_COLUMNS.len());
        assert_eq!(&fields[..4], ["etcd", "bbolt", "grant", "1"]);
        assert_eq!(fields[4], "100.0");
        assert_eq!(fields[13], "", "no store CPU for etcd");
        assert_eq!(fields[15], ETCD_CLIENT);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// hyper's rows never enter fencepost ÷ etcd (that ratio is what an SDK
    /// user gets); SDK ÷ hyper is taken per repeat on ops per client
    /// CPU-second, and decided only where its interval excludes 1.
    #[test]
    fn the_client_comparison_pairs_the_two_clients_within_each_repeat() {
        let mut rows = Vec::new();
        for (repeat, sdk_cpu, hyper_cpu) in [(1, 1.0, 2.0), (2, 1.1, 2.0), (3, 0.9, 2.0)] {
            let mut a = row(
                "fencepost",
                "sqlite",
                PeerOp::Heartbeat,
                16,
                repeat,
                100_000.0,
            );
            let mut b = row_with(
                "fencepost",
                "sqlite",
                PeerHttpClient::HyperLegacy.as_str(),
                PeerOp::Heartbeat,
                16,
                repeat,
                50_000.0,
            );
            (a.cpu_bench_s, b.cpu_bench_s) = (Some(sdk_cpu), Some(hyper_cpu));
            rows.extend([
                a,
                b,
                row("etcd", "bbolt", PeerOp::Heartbeat, 16, repeat, 25_000.0),
            ]);
        }
        let fe = ratios(&rows);
        assert_eq!(fe.len(), 1);
        assert_eq!(fe[0].spread.median, 4.0, "the SDK's rows only: 100k ÷ 25k");
        let c = client_ratios(&rows);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].throughput.median, 2.0);
        // (400k ops / 1.0 s) ÷ (200k / 2.0 s) = 4; repeats 2 and 3 give 3.64 and 4.44.
        assert!((c[0].per_client_cpu.median - 4.0).abs() < 1e-9);
        assert_eq!(
            client_verdict(&c[0].per_client_cpu),
            "the SDK's client is measurably better"
        );
        assert_eq!(
            client_verdict(&Spread::of(&[0.9, 1.1, 1.0]).unwrap()),
            "not resolved at 3 repeats"
        );
        assert_eq!(
            client_verdict(&Spread::of(&[0.5, 0.52, 0.51]).unwrap()),
            "hyper's pooled client is measurably better"
        );
        assert_eq!(rows[1].label(), "fencepost/sqlite hyper-legacy");
        assert_eq!(rows[0].label(), "fencepost/sqlite");
        assert!(
            client_ratios(&rows[..1]).is_empty(),
            "one client: no comparison"
        );
    }
}
