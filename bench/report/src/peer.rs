//! `bench peer`'s report: the report section, the printed summary and the
//! throughput plot, pure over the rows the analysis holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use bench_analysis::peer::{
    PeerPlan, PeerRow, REDIS, Spread, TARGET_CONCURRENCY, client_ratios, client_verdict,
    cpu_ratios, cpu_us_per_op, fmt_opt, groups, ratios, ratios_over, target_ratio,
};
use bench_analysis::peer_limits::{
    CEILING_CONCURRENCY, FLOOR_TARGET, GRANTS_PER_FSYNC_TARGET, ceiling_rows, floor_ratios,
};
use bench_core::peer::PeerOp;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plots::{self, DrawError, FONT, Plot, PlotError, color};

fn interval(s: &Spread) -> String {
    s.ci95
        .map_or_else(|| "-".into(), |(lo, hi)| format!("{lo:.2}–{hi:.2}"))
}

/// A ratio's three table cells: `median× | min–max | 95 % CI`.
fn spread_columns(s: &Spread) -> String {
    format!(
        "{:.2}× | {:.2}–{:.2} | {}",
        s.median,
        s.min,
        s.max,
        interval(s)
    )
}

/// The report section (`report.md` of the peer run).
pub fn render(plan: &PeerPlan, rows: &[PeerRow]) -> String {
    let mut t = String::new();
    intro(&mut t, plan);
    ratios_section(&mut t, rows);
    redis_ratios_section(&mut t, rows);
    floor_section(&mut t, rows);
    ceiling_section(&mut t, rows);
    client_section(&mut t, rows);
    per_system_section(&mut t, rows);
    cpu_ratio_section(&mut t, rows);
    every_measurement(&mut t, rows);
    t
}

/// The title, the plan and how the systems are driven.
fn intro(t: &mut String, plan: &PeerPlan) {
    let _ = writeln!(
        t,
        "# bench peer: fencepost vs etcd (and Redis) on one machine\n"
    );
    let _ = writeln!(
        t,
        "Seed {} · {} repeat(s) · {:.1} s measured after {:.1} s warm-up per measurement · \
         concurrency {:?} · build {}.\n",
        plan.seed,
        plan.repeats,
        plan.duration_s,
        plan.warmup_s,
        plan.concurrency,
        if cfg!(debug_assertions) {
            "debug (the driver is slower than a release build; compare ratios, not absolutes)"
        } else {
            "release"
        }
    );
    let _ = writeln!(
        t,
        "One driver, closed loop, each client its own connection and session/lease: fencepost \
         over HTTP/1.1 keep-alive with the SDK's own client, etcd over gRPC (`etcd-client`). heartbeat = L2 vs one \
         LeaseKeepAlive on the client's stream; grant = L4 + L6 vs \
         `txn(create_revision == 0 → put with lease)` + `txn(create_revision == token → delete)`. \
         Same durability on every side: the lock-server's SQLite runs in WAL mode with \
         `synchronous=FULL` (an fdatasync per transaction), PostgreSQL commits every write \
         before the reply (`synchronous_commit` as configured, default on), and the lock-server \
         group-commits concurrent writes into one transaction on both; etcd fsyncs its raft WAL \
         before it acknowledges (batching concurrent writes into one fsync). \
         Within each repeat the systems of one (op, concurrency) run back to back in a seeded \
         order, so each ratio compares neighbours in time; absolute numbers move with \
         whatever else the machine runs, so only the within-run ratios are meant to be compared \
         (the machine is in `manifest.json`).\n"
    );
    if !plan.redis_stores.is_empty() || plan.redis_url.is_some() {
        let _ = writeln!(
            t,
            "Redis (the `redis` crate, one connection per client) runs the redis backend's own \
             scripts: heartbeat = the renew (compare-owner `PEXPIRE`) of the client's key; grant = \
             the acquire (`SET key owner NX PX` + `INCR` of the key's fencing counter, returning \
             the token) + the compare-owner `DEL`; floor = `PING`. Its store is the \
             redis-server's persistence: `aof-always` fsyncs the append-only file before every \
             reply (the durability the others give a grant), `aof-everysec` once a second, \
             `memory` never (a restart forgets every key and fencing counter). On `aof-always` \
             the renew is a write too (`PEXPIRE`), so every heartbeat waits for an fsync, where \
             the lock-server's L2 and etcd's keep-alive write nothing to disk.\n"
        );
    }
    for s in &plan.skipped {
        let _ = writeln!(t, "Skipped: {s}.\n");
    }
}

/// fencepost ÷ redis per (store, op, conc), one table per redis store; no
/// target (the performance targets are set against etcd).
fn redis_ratios_section(t: &mut String, rows: &[PeerRow]) {
    let stores: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.system == REDIS)
        .map(|r| r.store.as_str())
        .collect();
    for store in stores {
        let _ = writeln!(
            t,
            "## Ratios: fencepost ÷ redis/{store} (ops/s, per repeat)\n\n\
             Taken within each repeat like the ratios over etcd; no target is set against Redis.\n"
        );
        let _ = writeln!(
            t,
            "| store | op | conc | median | min–max | 95 % CI |\n|---|---|---:|---:|---:|---:|"
        );
        for r in ratios_over(rows, REDIS, Some(store)) {
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} |",
                r.store,
                r.op.as_str(),
                r.conc,
                spread_columns(&r.spread)
            );
        }
        t.push('\n');
    }
}

/// fencepost ÷ etcd per (store, op, conc), with the target's verdict.
fn ratios_section(t: &mut String, rows: &[PeerRow]) {
    let _ = writeln!(
        t,
        "## Ratios: fencepost ÷ etcd (ops/s, per repeat)\n\n\
         Median and min–max over repeats; 95 % interval: t on the mean of the per-repeat \
         ratios. The verdict against the performance target (heartbeat ≥ 2×, grant ≥ 1.5×, at \
         {TARGET_CONCURRENCY} clients) is given only where the interval decides it.\n"
    );
    let _ = writeln!(
        t,
        "| store | op | conc | median | min–max | 95 % CI | target | verdict |\n|---|---|---:|---:|---:|---:|---:|---|"
    );
    for r in ratios(rows) {
        let (tgt, verdict) = match target_ratio(r.op) {
            Some(target) if r.conc == TARGET_CONCURRENCY => {
                (format!("{target}×"), r.spread.verdict(target))
            }
            _ => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {tgt} | {verdict} |",
            r.store,
            r.op.as_str(),
            r.conc,
            spread_columns(&r.spread),
        );
    }
    t.push('\n');
}

/// Throughput, latency and CPU per system, median of repeats.
fn per_system_section(t: &mut String, rows: &[PeerRow]) {
    let _ = writeln!(
        t,
        "## Throughput, latency and CPU per system (median of repeats)\n\n\
         CPU is per operation, µs: the server process (lock-server, etcd or redis-server), the PostgreSQL \
         backends serving the lock-server (postgres only), and this driver.\n"
    );
    let _ = writeln!(
        t,
        "| op | system | conc | ops/s | min–max | p50 ms | p99 ms | server CPU µs/op | store CPU µs/op | driver CPU µs/op | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for ((op, label, conc), g) in groups(rows) {
        let ops: Vec<f64> = g.iter().map(|r| r.ops_per_s).collect();
        let Some(s) = Spread::of(&ops) else { continue };
        let med = |f: fn(&PeerRow) -> f64| {
            Spread::of(&g.iter().map(|r| f(r)).collect::<Vec<_>>()).map_or(0.0, |s| s.median)
        };
        let _ = writeln!(
            t,
            "| {} | {label} | {conc} | {:.0} | {:.0}–{:.0} | {:.2} | {:.2} | {} | {} | {} | {} |",
            op.as_str(),
            s.median,
            s.min,
            s.max,
            med(|r| r.p50_us as f64) / 1e3,
            med(|r| r.p99_us as f64) / 1e3,
            fmt_opt(cpu_us_per_op(&g, |r| r.cpu_server_s), 1),
            fmt_opt(cpu_us_per_op(&g, |r| r.cpu_store_s), 1),
            fmt_opt(cpu_us_per_op(&g, |r| r.cpu_bench_s), 1),
            g.iter().map(|r| r.errors).sum::<u64>(),
        );
    }
}

/// CPU per operation, etcd ÷ fencepost: service and client.
fn cpu_ratio_section(t: &mut String, rows: &[PeerRow]) {
    let _ = writeln!(
        t,
        "\n## Where the ratio comes from: CPU per operation, etcd ÷ fencepost\n\n\
         Above 1× fencepost spends less. Service: the lock-server plus the PostgreSQL \
         backends serving it, vs the etcd process. Client: this driver (the SDK's \
         HTTP/1.1 client, `fencepost_sdk::http`, for fencepost; `etcd-client`/tonic for etcd). When the cores are saturated ops/s follow \
         the sum of both, so a client library that costs more than the service caps the \
         ops/s ratio below the service's CPU ratio. Median (min–max) over repeats.\n"
    );
    let _ = writeln!(
        t,
        "| store | op | conc | service | client |\n|---|---|---:|---:|---:|"
    );
    let cell = |s: &Spread| format!("{:.2}× ({:.2}–{:.2})", s.median, s.min, s.max);
    for (r, drv) in cpu_ratios(rows) {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} |",
            r.store,
            r.op.as_str(),
            r.conc,
            cell(&r.spread),
            drv.as_ref().map_or_else(|| "-".into(), cell),
        );
    }
}

/// The plot, then every row of `peer.csv`.
fn every_measurement(t: &mut String, rows: &[PeerRow]) {
    let _ = writeln!(
        t,
        "\n![throughput](peer_throughput.png)\n\n## Every measurement (`peer.csv`)\n"
    );
    let _ = writeln!(
        t,
        "| repeat | order | op | system | conc | ops/s | p50 ms | p99 ms | errors | server CPU s | store CPU s | driver CPU s |\n|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {} | {} | {} | {} |",
            r.repeat,
            r.order,
            r.op.as_str(),
            r.label(),
            r.conc,
            r.ops_per_s,
            r.p50_us as f64 / 1e3,
            r.p99_us as f64 / 1e3,
            r.errors,
            fmt_opt(r.cpu_server_s, 2),
            fmt_opt(r.cpu_store_s, 2),
            fmt_opt(r.cpu_bench_s, 2),
        );
    }
}

/// The SDK's HTTP client against hyper's pooled client, when the run drove
/// fencepost with both (`--http-client sdk,hyper-legacy`).
fn client_section(t: &mut String, rows: &[PeerRow]) {
    let all = client_ratios(rows);
    if all.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "## The SDK's HTTP client vs hyper's pooled client (SDK ÷ hyper, per repeat)\n\n\
         The same lock-server driven by the SDK's own client (`fencepost_sdk::http`) and by \
         `hyper_util::client::legacy::Client` (hyper's general pooled client, no redirect or \
         proxy layers), each client task on one keep-alive connection with `TCP_NODELAY`, \
         interleaved within each repeat. Per client CPU-second: operations ÷ this driver's CPU \
         seconds over the window; above 1× the SDK's client spends less CPU per operation. \
         The verdict is given only where the 95 % interval (t on the mean of the per-repeat \
         ratios) excludes 1.\n"
    );
    let _ = writeln!(
        t,
        "| store | op | conc | ops per client CPU-s: median | min–max | 95 % CI | ops/s: median | min–max | verdict |\n|---|---|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in all {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {:.2}× | {:.2}–{:.2} | {} |",
            r.store,
            r.op.as_str(),
            r.conc,
            spread_columns(&r.per_client_cpu),
            r.throughput.median,
            r.throughput.min,
            r.throughput.max,
            client_verdict(&r.per_client_cpu),
        );
    }
    t.push('\n');
}

/// Heartbeat ÷ floor per system: how much of a heartbeat's
/// throughput the server's own work costs, beside the bare round trip of
/// the same client to the same server.
fn floor_section(t: &mut String, rows: &[PeerRow]) {
    let all = floor_ratios(rows);
    if all.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "## Heartbeat ÷ floor (ops/s, per repeat)\n\n\
         The floor is the cheapest request each server answers through the same client and \
         connection: fencepost's `GET /healthz`, etcd's serializable `Range` of a missing key, Redis's `PING`. \
         1.0 would be a heartbeat that costs the server nothing beyond the round trip. Target \
         (fencepost, {TARGET_CONCURRENCY} clients): ≥ {FLOOR_TARGET}, given only where the \
         interval decides it.\n"
    );
    let _ = writeln!(
        t,
        "| system | conc | median | min–max | 95 % CI | target | verdict |\n|---|---:|---:|---:|---:|---:|---|"
    );
    for r in &all {
        let (tgt, verdict) = if r.fencepost && r.conc == TARGET_CONCURRENCY {
            (format!("{FLOOR_TARGET}"), r.spread.verdict(FLOOR_TARGET))
        } else {
            ("-".into(), "-".into())
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {tgt} | {verdict} |",
            r.label,
            r.conc,
            spread_columns(&r.spread),
        );
    }
    t.push('\n');
}

/// "median (min–max)" of a spread, with `digits` decimals.
fn mmm(s: &Spread, digits: usize) -> String {
    format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max, d = digits)
}

/// Grants against the fsync ceiling: the store directory's
/// fdatasyncs/s, the grants each flush carried by the server's own
/// counters, and grants/s as a share of the ceiling they make.
fn ceiling_section(t: &mut String, rows: &[PeerRow]) {
    let all = ceiling_rows(rows);
    if all.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "## Grants against the fsync ceiling\n\n\
         The ceiling of a durable grant is the store directory's fdatasyncs/s (a loop of \
         one WAL block per flush, in that directory, once per repeat) times the grants each \
         flush carries (the window's grants ÷ the flushes the server itself counted: \
         `lock_store_transactions_total`, etcd's WAL fsyncs). A grant is two writes (L4 and \
         L6). Median (min–max) over repeats; targets at {CEILING_CONCURRENCY} clients: ≥ \
         {GRANTS_PER_FSYNC_TARGET} grants per flush, and grants/s within 2× of the ceiling \
         (≥ 0.5 of it).\n"
    );
    let _ = writeln!(
        t,
        "| system | conc | grants/s | fsyncs/s | grants per flush | writes per transaction | of the ceiling | verdict |\n|---|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &all {
        let verdict = if r.conc == CEILING_CONCURRENCY && r.label.starts_with("fencepost") {
            let per = r.grants_per_fsync.verdict(GRANTS_PER_FSYNC_TARGET);
            let of = r.of_ceiling.verdict(0.5);
            format!("≥ {GRANTS_PER_FSYNC_TARGET} per flush: {per}; within 2×: {of}")
        } else {
            "-".into()
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {verdict} |",
            r.label,
            r.conc,
            mmm(&r.grants_per_s, 0),
            mmm(&r.fsync_per_s, 0),
            mmm(&r.grants_per_fsync, 2),
            r.writes_per_tx
                .as_ref()
                .map_or_else(|| "–".into(), |w| mmm(w, 2)),
            mmm(&r.of_ceiling, 2),
        );
    }
    t.push('\n');
}

/// The printed summary: the ratios, and the verdicts at the target concurrency.
pub fn summary(plan: &PeerPlan, rows: &[PeerRow]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n{:<10} {:<10} {:>5} {:>8} {:>15} {:>15}",
        "store", "op", "conc", "median", "min–max", "95% CI"
    );
    let all = ratios(rows);
    for r in &all {
        let _ = writeln!(
            t,
            "{:<10} {:<10} {:>5} {:>7.2}× {:>15} {:>15}",
            r.store,
            r.op.as_str(),
            r.conc,
            r.spread.median,
            format!("{:.2}–{:.2}", r.spread.min, r.spread.max),
            interval(&r.spread),
        );
    }
    t.push('\n');
    for r in all.iter().filter(|r| r.conc == TARGET_CONCURRENCY) {
        let Some(target) = target_ratio(r.op) else {
            continue;
        };
        let _ = writeln!(
            t,
            "fencepost/{} {} at {TARGET_CONCURRENCY} clients: {:.2}× etcd (median of {}; {:.2}–{:.2}); target ≥ {target}×: {}",
            r.store,
            r.op.as_str(),
            r.spread.median,
            r.spread.n,
            r.spread.min,
            r.spread.max,
            r.spread.verdict(target),
        );
    }
    for r in client_ratios(rows) {
        let _ = writeln!(
            t,
            "fencepost/{} {} at {} clients: the SDK's client does {:.2}× the operations of hyper's \
             per client CPU-second (median of {}; {:.2}–{:.2}), {:.2}× the ops/s: {}",
            r.store,
            r.op.as_str(),
            r.conc,
            r.per_client_cpu.median,
            r.per_client_cpu.n,
            r.per_client_cpu.min,
            r.per_client_cpu.max,
            r.throughput.median,
            client_verdict(&r.per_client_cpu),
        );
    }
    for r in floor_ratios(rows)
        .iter()
        .filter(|r| r.conc == TARGET_CONCURRENCY)
    {
        let target = if r.fencepost {
            format!(
                "; target ≥ {FLOOR_TARGET}: {}",
                r.spread.verdict(FLOOR_TARGET)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "{} heartbeat ÷ floor at {TARGET_CONCURRENCY} clients: {:.2} (median of {}; {:.2}–{:.2}){target}",
            r.label, r.spread.median, r.spread.n, r.spread.min, r.spread.max,
        );
    }
    for r in ceiling_rows(rows)
        .iter()
        .filter(|r| r.conc == CEILING_CONCURRENCY)
    {
        let _ = writeln!(
            t,
            "{} grants at {CEILING_CONCURRENCY} clients: {} per flush, {} of the fsync ceiling ({} fsyncs/s)",
            r.label,
            mmm(&r.grants_per_fsync, 2),
            mmm(&r.of_ceiling, 2),
            mmm(&r.fsync_per_s, 0),
        );
    }
    for s in &plan.skipped {
        let _ = writeln!(t, "skipped: {s}");
    }
    t
}

/// A point of the throughput plot: (concurrency, median, min, max) ops/s.
type Point = (usize, f64, f64, f64);

/// One line of the throughput plot: a system's median ops/s per concurrency,
/// with the min–max of its repeats.
struct Line {
    /// `system/store`.
    label: String,
    /// Its points, by concurrency.
    points: Vec<Point>,
}

/// The throughput plot: one panel per operation, ops/s against concurrency.
struct ThroughputPlot {
    /// Per operation, its lines.
    panels: Vec<(PeerOp, Vec<Line>)>,
}

impl Plot for ThroughputPlot {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let root = root.titled(
            "bench peer: ops/s against concurrent clients (median, min–max bars)",
            (FONT, 24),
        )?;
        let areas = root.split_evenly((1, self.panels.len().max(1)));
        for (area, (op, lines)) in areas.iter().zip(&self.panels) {
            let concs: Vec<usize> = lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.0))
                .collect();
            let x_hi = concs.iter().copied().max().unwrap_or(1) as f64 * 1.5;
            let y_hi = lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.3))
                .fold(1.0, f64::max)
                * 1.1;
            let mut chart = ChartBuilder::on(area)
                .caption(op.as_str(), (FONT, 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d((0.7f64..x_hi).log_scale(), 0f64..y_hi)?;
            chart
                .configure_mesh()
                .x_desc("concurrent clients")
                .y_desc("ops/s")
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.0}"))
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .draw()?;
            for (i, line) in lines.iter().enumerate() {
                let c = color(i);
                let pts: Vec<(f64, f64)> = line.points.iter().map(|p| (p.0 as f64, p.1)).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))?
                    .label(line.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
                chart.draw_series(
                    line.points
                        .iter()
                        .map(|p| PathElement::new(vec![(p.0 as f64, p.2), (p.0 as f64, p.3)], c)),
                )?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font((FONT, 14))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }
        Ok(())
    }
}

/// Draws `peer_throughput.svg` and `.png` into `dir`.
pub fn plot(dir: &Path, rows: &[PeerRow]) -> Result<(), PlotError> {
    let mut panels: BTreeMap<PeerOp, BTreeMap<String, Vec<Point>>> = BTreeMap::new();
    for ((op, label, conc), g) in groups(rows) {
        let v: Vec<f64> = g.iter().map(|r| r.ops_per_s).collect();
        if let Some(s) = Spread::of(&v) {
            panels
                .entry(op)
                .or_default()
                .entry(label)
                .or_default()
                .push((conc, s.median, s.min, s.max));
        }
    }
    let plot = ThroughputPlot {
        panels: panels
            .into_iter()
            .map(|(op, lines)| {
                let lines = lines
                    .into_iter()
                    .map(|(label, mut points)| {
                        points.sort_by_key(|p| p.0);
                        Line { label, points }
                    })
                    .collect();
                (op, lines)
            })
            .collect(),
    };
    plots::render(dir, "peer_throughput", &plot)?;
    Ok(())
}
