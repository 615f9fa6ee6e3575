//! `experiments throttle` (ADR-006's Autopilot case): the bench's workload —
//! N SDK payout workers, here each in its own `experiments worker` process —
//! run twice against one lock-server and rail-stub: unthrottled, then with the
//! worker processes in a cgroup limited to `--quota` of a core. It compares
//! the heartbeat RTT distributions, abandonment, and ADR-006 §6.5's verdicts
//! (`bench::triggers::evaluate_row`) on the two results rows, and writes them
//! in the bench's layout (`results.csv`/`.parquet`, `hgrm/`, `triggers.json`)
//! so `bench report` can read the directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bench::rail::RailClient;
use bench::results::CellRow;
use bench::runner::{D4_EXTRA, PRODUCTION_LEASE, PRODUCTION_SESSION_TTL, scale_latency};
use bench::triggers::{TriggerResult, evaluate, markdown_table, write_triggers};
use fencepost_api::latency::LatencySpec;
use fencepost_api::ledger_check::check_ledger;
use fencepost_sdk::Histogram;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::cgroup::{CgroupError, CpuCgroup, QuotaSpec};
use crate::cli::ThrottleArgs;
use crate::output::RunDir;
use crate::pause::{PRODUCTION_RAIL_READ_TIMEOUT, WorkerChild, start_services};
use crate::worker_proc::{TallySnapshot, WorkerLine};

/// Exit code when cgroups cannot be written.
pub const EXIT_NO_CGROUP: i32 = 4;
/// The bench's default rail latency, in production time (scaled with the TTL).
pub const PRODUCTION_RAIL_LATENCY: &str = "lognormal:p50=40ms,p99=400ms";
/// Payouts seeded per worker process per run.
const PAYOUTS_PER_WORKER: u64 = 20_000;

/// One run's numbers beside its results row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThrottleRun {
    /// `unthrottled` or `throttled`.
    pub name: String,
    /// The bench results row (cell id `throttle=…`).
    pub row: CellRow,
    /// The workers' client-side counts.
    pub tally: TallySnapshot,
    /// `cpu.stat` of the group after the run (throttled run only).
    pub cgroup_stat: Option<String>,
}

/// `throttle.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThrottleResult {
    /// The quota.
    pub quota: QuotaSpec,
    /// The group's path and interface.
    pub cgroup: String,
    /// Both runs.
    pub runs: Vec<ThrottleRun>,
    /// §6.5 verdicts on both rows.
    pub triggers: Vec<TriggerResult>,
    /// The seed.
    pub seed: u64,
}

/// `experiments throttle`: exit 0, 1 on failure, 4 when no cgroup can be written.
pub fn main(args: &ThrottleArgs) -> i32 {
    let group = match CpuCgroup::create(
        &format!("fencepost-throttle-{}", std::process::id()),
        args.quota,
    ) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{}", skip_message(&e));
            return EXIT_NO_CGROUP;
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = rt.block_on(run(args, &group));
    drop(group);
    match outcome {
        Ok((r, dir)) => {
            for run in &r.runs {
                let row = &run.row;
                println!(
                    "{:<12} hb p50 {:>7.2} ms p99 {:>8.2} ms max {:>8.2} ms | paid {:>6} ({:.1}/s) | abandoned {} | lost {} | fenced {}",
                    run.name,
                    row.hb_rtt_p50_us as f64 / 1e3,
                    row.hb_rtt_p99_us as f64 / 1e3,
                    row.hb_rtt_max_us as f64 / 1e3,
                    row.payouts_paid,
                    row.throughput_per_s,
                    row.abandoned_insufficient_lease,
                    row.lock_lost,
                    row.fenced_out
                );
            }
            for t in r.triggers.iter().filter(|t| t.fired) {
                println!("§6.5 fired on {}: {} — {}", t.cell, t.trigger, t.detail);
            }
            println!("results: {}", dir.display());
            0
        }
        Err(e) => {
            eprintln!("experiments throttle: {e:#}");
            1
        }
    }
}

/// The message printed when the experiment cannot run here.
pub fn skip_message(e: &CgroupError) -> String {
    format!("experiments throttle: skipped, no CPU quota can be applied: {e}")
}

async fn run(args: &ThrottleArgs, group: &CpuCgroup) -> anyhow::Result<(ThrottleResult, PathBuf)> {
    let seed = args.seed.unwrap_or_else(rand::random);
    let scale = args.ttl.as_secs_f64() / PRODUCTION_LEASE.as_secs_f64();
    let session_ttl = PRODUCTION_SESSION_TTL
        .mul_f64(scale)
        .max(Duration::from_millis(100));
    let latency = scale_latency(
        PRODUCTION_RAIL_LATENCY
            .parse::<LatencySpec>()
            .map_err(|e| anyhow::anyhow!("{e}"))?,
        scale,
    );
    let rail_read_timeout = PRODUCTION_RAIL_READ_TIMEOUT.mul_f64(scale);
    let worst_case_hop = (PRODUCTION_RAIL_READ_TIMEOUT + D4_EXTRA).mul_f64(scale);
    let config = serde_json::json!({
        "quota": args.quota, "cgroup": group.dir(), "cgroup_version": group.version,
        "ttl_ms": args.ttl.as_millis() as u64, "session_ttl_ms": session_ttl.as_millis() as u64,
        "duration_ms": args.duration.as_millis() as u64, "workers": args.workers, "margin": args.margin,
        "rail_latency": latency.to_string(), "rail_read_timeout_ms": rail_read_timeout.as_millis() as u64,
        "worst_case_hop_ms": worst_case_hop.as_millis() as u64, "seed": seed,
    });
    let run_dir = RunDir::create("throttle", args.out.as_deref(), seed, &config)?;
    let dir = run_dir.dir.clone();
    let (lock, rail_child) =
        start_services(&dir, args.ttl, session_ttl, &latency.to_string(), seed).await?;
    let rail = RailClient::new(&rail_child.url(), rail_read_timeout);
    let common = vec![
        "--lock-url".to_string(),
        lock.url(),
        "--rail-url".into(),
        rail_child.url(),
        "--lease".into(),
        fencepost_api::format_duration(args.ttl),
        "--session-ttl".into(),
        fencepost_api::format_duration(session_ttl),
        "--margin".into(),
        args.margin.to_string(),
        "--rail-read-timeout".into(),
        format!("{}us", rail_read_timeout.as_micros()),
        "--worst-case-hop".into(),
        format!("{}us", worst_case_hop.as_micros()),
        "--acquire-budget".into(),
        format!("{}us", (args.ttl / 4).as_micros()),
        "--prefix".into(),
        "thr".into(),
        "--seed".into(),
        seed.to_string(),
        "--duration".into(),
        fencepost_api::format_duration(args.duration),
    ];
    let mut runs = Vec::new();
    let mut histograms = Vec::new();
    for (name, throttled) in [("unthrottled", false), ("throttled", true)] {
        println!(
            "run {name}: {} worker processes for {:?}",
            args.workers, args.duration
        );
        let (mut row, tally, h) =
            run_one(args, &dir, name, &rail, &common, throttled.then_some(group)).await?;
        row.run_id = format!("throttle-{seed}");
        row.session_ttl_ms = session_ttl.as_millis() as u64;
        row.seed = seed;
        row.rail_latency = latency.to_string();
        row.rail_p50_ms = latency.p50().as_secs_f64() * 1e3;
        row.rail_p99_ms = latency.p99().as_secs_f64() * 1e3;
        row.rail_read_timeout_ms = rail_read_timeout.as_millis() as u64;
        row.worst_case_hop_ms = worst_case_hop.as_millis() as u64;
        bench::hist::save_histogram(&dir, &row.cell, &h)?;
        histograms.push((row.cell.clone(), h));
        runs.push(ThrottleRun {
            name: name.into(),
            row,
            tally,
            cgroup_stat: throttled.then(|| group.stat()),
        });
    }
    drop((lock, rail_child));
    let rows: Vec<CellRow> = runs.iter().map(|r| r.row.clone()).collect();
    bench::results::write_results(&dir, &rows)?;
    let triggers = evaluate(&rows);
    write_triggers(&dir, &triggers)?;
    let cdfs: Vec<crate::plots::Cdf> = histograms
        .iter()
        .map(|(cell, h)| crate::plots::Cdf {
            label: format!("{cell} ({} heartbeats)", h.len()),
            points: cdf_points(h),
        })
        .collect();
    crate::plots::rtt_cdfs(
        &dir,
        &cdfs,
        format!(
            "throttle: heartbeat RTT, quota {} vs none (TTL {:?})",
            args.quota, args.ttl
        ),
    )?;
    let result = ThrottleResult {
        quota: args.quota,
        cgroup: format!("{} ({:?})", group.dir().display(), group.version),
        runs,
        triggers,
        seed,
    };
    run_dir.write_json("throttle.json", &result)?;
    let section = report_section(&result);
    let dir = run_dir.finish(&section)?;
    Ok((result, dir))
}

/// `(ms, cumulative fraction)` points of `h` (µs).
fn cdf_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points = vec![(h.lowest_equivalent(h.min()) as f64 / 1000.0, 0.0)];
    points.extend(h.iter_recorded().map(|v| {
        (
            h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0,
            v.quantile(),
        )
    }));
    points
}

async fn run_one(
    args: &ThrottleArgs,
    dir: &Path,
    name: &str,
    rail: &RailClient,
    common: &[String],
    group: Option<&CpuCgroup>,
) -> anyhow::Result<(CellRow, TallySnapshot, Histogram<u64>)> {
    let before = check_ledger(&rail.ledger().await?);
    let created = rail
        .seed_backlog(PAYOUTS_PER_WORKER * u64::from(args.workers), "thr")
        .await?;
    let first: u64 = created.first_number("thr")?;
    let run_dir = dir.join(name);
    std::fs::create_dir_all(&run_dir)?;
    let t0 = Instant::now();
    let mut children = Vec::new();
    for i in 0..u64::from(args.workers) {
        let mut a = common.to_vec();
        a.extend([
            "--idx".into(),
            i.to_string(),
            "--first".into(),
            (first + i * PAYOUTS_PER_WORKER).to_string(),
            "--count".into(),
            PAYOUTS_PER_WORKER.to_string(),
            "--hist-dir".into(),
            run_dir.display().to_string(),
        ]);
        let child = WorkerChild::spawn(&a, &run_dir.join(format!("worker-{i}.log")), t0)?;
        if let Some(g) = group {
            g.add(child.pid as u32)?;
        }
        children.push(child);
    }
    let mut tally = TallySnapshot::default();
    let mut renewals = 0;
    let limit = args.duration + Duration::from_secs(120);
    for c in &mut children {
        loop {
            match c.next(limit).await? {
                (
                    _,
                    WorkerLine::Done {
                        tally: t,
                        renewals: r,
                    },
                ) => {
                    tally.add(&t);
                    renewals += r;
                    break;
                }
                _ => continue,
            }
        }
    }
    let elapsed = t0.elapsed();
    for c in &mut children {
        let _ = tokio::time::timeout(Duration::from_secs(10), c.child.wait()).await;
    }
    let after = check_ledger(&rail.ledger().await?);
    let mut h = bench::hist::new_histogram();
    for i in 0..args.workers {
        h.add(bench::hist::load_histogram(&run_dir, &format!("w{i}"))?)?;
    }
    let rtt = bench::hist::summarize(&h);
    let paid = after.paid - before.paid;
    let cell = match group {
        Some(_) => format!("throttle={:.0}%", args.quota.fraction() * 100.0),
        None => "throttle=none".into(),
    };
    let row = CellRow {
        run_id: String::new(),
        margin: args.margin,
        margin_policy: "fixed".into(),
        lease_ms: args.ttl.as_millis() as u64,
        session_ttl_ms: 0,
        workers: args.workers,
        duration_s: elapsed.as_secs_f64(),
        rail_p50_ms: 0.0,
        rail_p99_ms: 0.0,
        hb_count: rtt.count,
        hb_rtt_p50_us: rtt.p50,
        hb_rtt_p90_us: rtt.p90,
        hb_rtt_p99_us: rtt.p99,
        hb_rtt_p999_us: rtt.p999,
        hb_rtt_max_us: rtt.max,
        payouts_paid: paid,
        throughput_per_s: paid as f64 / args.duration.as_secs_f64(),
        abandoned_insufficient_lease: tally.abandoned_insufficient_lease,
        lock_lost: tally.lock_lost,
        renewals,
        fenced_out: after.fenced_out_total - before.fenced_out_total,
        duplicate_attempted: after.duplicate_attempted - before.duplicate_attempted,
        usable_lease_fraction: tally.usable_lease_fraction,
        cell,
        seed: 0,
        net_delay: "none".into(),
        server_pause: "none".into(),
        rail_latency: String::new(),
        rail_read_timeout_ms: 0,
        worst_case_hop_ms: 0,
        client_check: true,
        acquire_failed: tally.acquire_failed,
        abandoned_lost: tally.abandoned_lost,
        attempts: tally.attempts,
        paid_twice: after.paid_twice - before.paid_twice,
        stale_paid: after.stale_paid - before.stale_paid,
        ledger_ok: after.holds(),
        margin_effective: args.margin,
        hb_rtt_mean_us: rtt.mean,
    };
    Ok((row, tally, h))
}

/// The `report.md` section.
pub fn report_section(r: &ThrottleResult) -> String {
    let mut s = format!(
        "## Throttle experiment (ADR-006's Autopilot case)\n\nThe same workload twice: worker processes \
         unthrottled, then in cgroup `{}` limited to {}. Seed {}.\n\n\
         | run | workers | hb p50 ms | hb p99 ms | hb max ms | paid | payouts/s | abandoned (D4) | lock lost | abandoned lost | fenced_out | ledger ok |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        r.cgroup, r.quota, r.seed
    );
    for run in &r.runs {
        let w = &run.row;
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {} | {:.1} | {} | {} | {} | {} | {} |\n",
            w.cell,
            w.workers,
            w.hb_rtt_p50_us as f64 / 1e3,
            w.hb_rtt_p99_us as f64 / 1e3,
            w.hb_rtt_max_us as f64 / 1e3,
            w.payouts_paid,
            w.throughput_per_s,
            w.abandoned_insufficient_lease,
            w.lock_lost,
            w.abandoned_lost,
            w.fenced_out,
            w.ledger_ok
        ));
    }
    s.push_str("\nADR-006 §6.5 verdicts on both rows:\n\n");
    s.push_str(&markdown_table(&r.triggers));
    s.push_str("\n![heartbeat RTT](throttle_rtt.svg)\n\nData: throttle.json, results.csv, hgrm/, triggers.json.\n");
    s
}
