//! `experiments throttle` (ADR-006's Autopilot case): the bench's workload —
//! N SDK payout workers, here each in its own `experiments worker` process —
//! run twice against one lock-server and rail-stub: unthrottled, then with the
//! worker processes in a cgroup limited to `--quota` of a core. It compares
//! the heartbeat RTT distributions, abandonment, and ADR-006 §6.5's verdicts
//! (`bench_analysis::triggers::evaluate`) on the two results rows, and writes them
//! in the bench's layout (`results.csv`/`.parquet`, `hgrm/`, `triggers.json`)
//! so `bench report` and `bench triggers` can read the directory.
//!
//! The two rows are a *pair* (column `cpu_quota`: `none`, then the quota), the
//! input of trigger 5 (`autopilot_throttling`): the margin each run needs so
//! that trigger 1 stays quiet, and whether it is reducible without the
//! throttling. Only a release build's figures count (a debug build's
//! heartbeat tail is its own): from a debug build trigger 5 says
//! `not_evaluated`, and the experiment warns.
//!
//! Both runs are cells of the bench's cell driver on one
//! [`bench_driver::cell::Stack`]: the [`bench_driver::cell::Steady`] load, worker processes
//! through [`bench_driver::worker_process::ProcessSpawner`] (whose spawn hook moves each one
//! into the cgroup for the throttled run), and the results row from
//! `bench_driver::row::cell_row` — throughput over the measured window.
//!
//! `throttle.json` stays lean: the distributions are the HDR histograms of
//! `hgrm/` (lossless at their precision, what the plot and the evidence pack
//! read), and the workers' per-submit `believed_held` records (one per payout,
//! 147,470 in the reference pack) are left out: their count is the row's
//! `believed_held_submits` and their join with the fence-outs its
//! `fenced_out_believed_held`. [`lean_json`] converts a file written with them.

use std::path::{Path, PathBuf};

use bench_analysis::frame::TableError;
use bench_analysis::results::CellRow;
use bench_analysis::triggers::{
    AUTOPILOT_THROTTLING, TriggerResult, UNTHROTTLED, evaluate, markdown_table, write_triggers,
};
use bench_core::timebase::{PRODUCTION_RAIL_LATENCY, TimeBase};
use bench_driver::cell::plan::PlanInputs;
use bench_driver::cell::{
    CellError, CellPlan, Hooks, Runtime, Spawn, Stack, StackError, Steady, measure,
};
use bench_driver::worker::TallySnapshot;
use fencepost_api::latency::LatencySpecError;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::cgroup::{CgroupError, CpuCgroup, QuotaSpec};
use crate::output::{RunDir, RunDirError, block_on, exit_code};
use crate::plots::PlotError;
use bench_driver::worker_process::ProcessSpawner;

/// What `experiments throttle` is asked (the command line's flags; see
/// `crate::cli::ThrottleArgs` for each one's meaning and default).
#[derive(Clone, Debug)]
pub struct ThrottleInputs {
    /// CPU quota of the throttled worker processes.
    pub quota: QuotaSpec,
    /// Lease TTL of every acquire.
    pub ttl: std::time::Duration,
    /// How long each of the two runs lasts.
    pub duration: std::time::Duration,
    /// Worker processes.
    pub workers: u32,
    /// The client margin.
    pub margin: f64,
    /// The seed; random if absent.
    pub seed: Option<u64>,
    /// Results directory.
    pub out: Option<PathBuf>,
}

/// Exit code when cgroups cannot be written.
pub const EXIT_NO_CGROUP: i32 = 4;
/// Payouts seeded per worker process per run.
const PAYOUTS_PER_WORKER: u64 = 20_000;
/// The R7 prefix of the backlog.
const PAYOUT_PREFIX: &str = "thr";

/// Why `experiments throttle` failed (exit 1) once its cgroup was set up
/// (no cgroup is [`CgroupError`], exit [`EXIT_NO_CGROUP`]; a worker that
/// cannot join the group fails its cell: [`CellError::Pool`]).
#[derive(Debug, thiserror::Error)]
pub enum ThrottleError {
    /// The output directory could not be made or written; [`RunDirError`] says what to do.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// The production rail latency is not a spec: a bug (it is a constant).
    #[error(transparent)]
    Latency(#[from] LatencySpecError),
    /// The lock-server and rail-stub could not start; [`StackError`] says what to do.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// A run's cell failed (its worker processes included); its doc says what to do.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// Ctrl-C ended a run early: nothing is reported; rerun.
    #[error("run {run} was interrupted")]
    Interrupted {
        /// `unthrottled` or `throttled`.
        run: &'static str,
    },
    /// A run's histograms could not be written into the output directory; check it.
    #[error(transparent)]
    Histograms(#[from] bench_driver::cell::WriteError),
    /// `results.csv`/`.parquet` could not be written; [`TableError`] says what to do.
    #[error(transparent)]
    Results(#[from] TableError),
    /// `triggers.json` could not be written; check the output directory.
    #[error(transparent)]
    Triggers(#[from] bench_analysis::triggers::WriteError),
    /// The RTT plot could not be drawn; [`PlotError`] says what to do.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// One run's numbers beside its results row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThrottleRun {
    /// `unthrottled` or `throttled`.
    pub name: String,
    /// The bench results row (cell id `throttle=…`).
    pub row: CellRow,
    /// The workers' client-side counts, without the per-submit
    /// `believed_held` records (module doc; their count is the row's).
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
pub fn main(args: &ThrottleInputs) -> i32 {
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
    let outcome = block_on(run(args, &group));
    drop(group);
    exit_code("throttle", outcome, |(r, dir)| {
        print!("{}", summary(&r, &dir));
        0
    })
}

/// The message printed when the experiment cannot run here.
pub fn skip_message(e: &CgroupError) -> String {
    format!("experiments throttle: skipped, no CPU quota can be applied: {e}")
}

/// The cell of one run (`throttled` picks the id); both share everything else.
fn plan(args: &ThrottleInputs, seed: u64, throttled: bool) -> Result<CellPlan, LatencySpecError> {
    let tb = TimeBase::for_lease(args.ttl, true);
    let id = if throttled {
        format!("throttle={:.0}%", args.quota.fraction() * 100.0)
    } else {
        "throttle=none".into()
    };
    let mut plan = CellPlan::new(PlanInputs {
        time_base: tb,
        rail_latency: PRODUCTION_RAIL_LATENCY.parse()?,
        workers: args.workers,
        duration: args.duration,
        payouts: PAYOUTS_PER_WORKER * u64::from(args.workers),
        payout_prefix: PAYOUT_PREFIX.into(),
        seed,
        ..PlanInputs::new(id, args.ttl, tb.session_ttl(), args.margin)
    });
    plan.cpu_quota = Some(if throttled {
        args.quota.to_string()
    } else {
        UNTHROTTLED.to_owned()
    });
    Ok(plan.in_run(&format!("throttle-{seed}")))
}

async fn run(
    args: &ThrottleInputs,
    group: &CpuCgroup,
) -> Result<(ThrottleResult, PathBuf), ThrottleError> {
    let seed = args.seed.unwrap_or_else(rand::random);
    if cfg!(debug_assertions) {
        eprintln!(
            "experiments throttle: a debug build; trigger 5 will say not_evaluated \
             (build with --release for figures that count)"
        );
    }
    let plans = [plan(args, seed, false)?, plan(args, seed, true)?];
    let p = &plans[0];
    let config = serde_json::json!({
        "quota": args.quota, "cgroup": group.dir(), "cgroup_version": group.version,
        "ttl_ms": args.ttl.as_millis() as u64, "session_ttl_ms": p.session_ttl.as_millis() as u64,
        "duration_ms": args.duration.as_millis() as u64, "workers": args.workers, "margin": args.margin,
        "rail_latency": p.rail_latency.to_string(), "rail_read_timeout_ms": p.rail_read_timeout.as_millis() as u64,
        "worst_case_hop_ms": p.worst_case_hop.as_millis() as u64, "seed": seed,
    });
    let run_dir = RunDir::create("throttle", args.out.as_deref(), seed, &config)?;
    let dir = run_dir.dir.clone();
    let mut stack = Stack::start(
        &p.stack_spec(&Runtime::Process {
            store: None,
            replicas: 1,
        }),
        &dir,
    )
    .await?;
    let measured = run_both(args, &dir, &mut stack, &plans, group).await;
    stack.stop().await;
    let (runs, histograms) = measured?;
    let rows: Vec<CellRow> = runs.iter().map(|r| r.row.clone()).collect();
    bench_analysis::results::write_results(&dir, &rows)?;
    let triggers = evaluate(&rows);
    write_triggers(&dir, &triggers)?;
    let cdfs: Vec<crate::plots::Cdf> = histograms
        .iter()
        .map(|(cell, h)| crate::plots::Cdf {
            label: format!("{cell} ({} corrected samples)", h.len()),
            points: bench_core::hist::cdf_points_ms(h),
        })
        .collect();
    crate::plots::rtt_cdfs(
        &dir,
        &cdfs,
        format!(
            "throttle: heartbeat RTT (corrected), quota {} vs none (TTL {:?})",
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

/// A run's results and its histogram, per run.
type Measured = (
    Vec<ThrottleRun>,
    Vec<(String, fencepost_sdk::Histogram<u64>)>,
);

/// Measures the unthrottled, then the throttled cell on `stack`.
async fn run_both(
    args: &ThrottleInputs,
    dir: &Path,
    stack: &mut Stack,
    plans: &[CellPlan; 2],
    group: &CpuCgroup,
) -> Result<Measured, ThrottleError> {
    let mut runs = Vec::new();
    let mut histograms = Vec::new();
    let into_group = |pid: u32| group.add(pid).map_err(Into::into);
    for (plan, (name, throttled)) in plans
        .iter()
        .zip([("unthrottled", false), ("throttled", true)])
    {
        println!(
            "run {name}: {} worker processes for {:?}",
            args.workers, args.duration
        );
        let spawner = ProcessSpawner {
            dir: dir.join(name),
            t0: Instant::now(),
            on_spawn: throttled.then_some(&into_group as _),
        };
        let hooks = Hooks {
            spawn: Spawn::Remote(&spawner),
            ..Hooks::default()
        };
        let m = measure(stack, plan, &mut Steady, hooks)
            .await?
            .ok_or(ThrottleError::Interrupted { run: name })?;
        let row = bench_driver::row::cell_row(&m);
        m.save_histograms(dir)?;
        histograms.push((row.cell.clone(), m.workers.hists.corrected.clone()));
        runs.push(ThrottleRun {
            name: name.into(),
            row,
            tally: TallySnapshot {
                believed_held: Vec::new(),
                ..m.workers.tally.clone()
            },
            cgroup_stat: throttled.then(|| group.stat()),
        });
    }
    Ok((runs, histograms))
}

/// The lines `experiments throttle` prints at the end.
pub fn summary(r: &ThrottleResult, dir: &Path) -> String {
    let mut s = String::new();
    for run in &r.runs {
        let row = &run.row;
        s.push_str(&format!(
            "{:<12} hb raw p99 {:>8.2} ms corrected p50 {:>7.2} p99 {:>8.2} ms ({} samples, {} timeouts, {} sessions lost) | paid {:>6} ({:.1}/s) | abandoned {} | lost {} | fenced {} | cpu workers {:.2} s\n",
            run.name,
            row.hb_rtt_p99_us as f64 / 1e3,
            row.hb_rtt_corrected_p50_us as f64 / 1e3,
            row.hb_rtt_corrected_p99_us as f64 / 1e3,
            row.hb_corrected_count,
            row.hb_timeouts,
            row.session_lost,
            row.payouts_paid,
            row.throughput_per_s,
            row.abandoned_insufficient_lease,
            row.lock_lost,
            row.fenced_out,
            row.cpu_workers_s,
        ));
    }
    for t in r.triggers.iter().filter(|t| t.fired) {
        s.push_str(&format!(
            "§6.5 fired on {}: {} — {}\n",
            t.cell, t.trigger, t.detail
        ));
    }
    if let Some(t5) = trigger5(r) {
        s.push_str(&format!(
            "trigger 5 (autopilot_throttling): {} — {}\n",
            t5.verdict.as_str(),
            t5.detail
        ));
    }
    s.push_str(&format!("results: {}\n", dir.display()));
    s
}

/// Trigger 5's result on the pair (the same verdict on both rows; the throttled row's).
pub fn trigger5(r: &ThrottleResult) -> Option<&TriggerResult> {
    let throttled = r.runs.iter().find(|x| x.name == "throttled")?;
    r.triggers
        .iter()
        .find(|t| t.trigger == AUTOPILOT_THROTTLING && t.cell == throttled.row.cell)
}

/// The `report.md` section.
pub fn report_section(r: &ThrottleResult) -> String {
    let mut s = format!(
        "## Throttle experiment (ADR-006's Autopilot case)\n\nThe same workload twice: worker processes \
         unthrottled, then in cgroup `{}` limited to {}. Seed {}.\n\n\
         | run | workers | hb raw p99 ms | corrected p50 ms | corrected p99 ms [95 %] | corrected samples | timeouts | sessions lost | margin needed | paid | payouts/s | abandoned (D4) | lock lost | abandoned lost | fenced_out | cpu workers s | ledger ok |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        r.cgroup, r.quota, r.seed
    );
    for run in &r.runs {
        let w = &run.row;
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} [{:.2}, {:.2}] | {} | {} | {} | {:.3} | {} | {:.1} | {} | {} | {} | {} | {:.2} | {} |\n",
            w.cell,
            w.workers,
            w.hb_rtt_p99_us as f64 / 1e3,
            w.hb_rtt_corrected_p50_us as f64 / 1e3,
            w.hb_rtt_corrected_p99_us as f64 / 1e3,
            w.hb_rtt_corrected_p99_lo_us as f64 / 1e3,
            w.hb_rtt_corrected_p99_hi_us as f64 / 1e3,
            w.hb_corrected_count,
            w.hb_timeouts,
            w.session_lost,
            bench_analysis::triggers::margin_needed(w, w.hb_rtt_corrected_p99_us),
            w.payouts_paid,
            w.throughput_per_s,
            w.abandoned_insufficient_lease,
            w.lock_lost,
            w.abandoned_lost,
            w.fenced_out,
            w.cpu_workers_s,
            w.ledger_ok
        ));
    }
    if let Some(t5) = trigger5(r) {
        s.push_str(&format!(
            "\nTrigger 5 (`autopilot_throttling`, \"a move off Autopilot removes CPU-throttling \
             pauses\"): **{}** — {}\n",
            t5.verdict.as_str(),
            t5.detail
        ));
    }
    s.push_str("\nADR-006 §6.5 verdicts on both rows:\n\n");
    s.push_str(&markdown_table(&r.triggers));
    s.push_str("\n![heartbeat RTT](throttle_rtt.svg)\n\nData: throttle.json, results.csv, hgrm/, triggers.json.\n");
    s
}

/// `throttle.json` text with every run's `tally.believed_held` list emptied
/// (module doc), everything else byte for byte as it was. `Err` when the text
/// is not JSON, or when the result would differ from it in anything but those
/// lists.
pub fn lean_json(text: &str) -> Result<String, serde_json::Error> {
    const KEY: &str = "\"believed_held\": [";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let open = at + KEY.len();
        out.push_str(&rest[..open]);
        let mut depth = 1usize;
        let mut end = open;
        for (i, c) in rest[open..].char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = open + i;
                break;
            }
        }
        out.push(']');
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    let mut before: serde_json::Value = serde_json::from_str(text)?;
    let after: serde_json::Value = serde_json::from_str(&out)?;
    if let Some(runs) = before.get_mut("runs").and_then(|r| r.as_array_mut()) {
        for run in runs {
            if let Some(b) = run.pointer_mut("/tally/believed_held") {
                *b = serde_json::Value::Array(Vec::new());
            }
        }
    }
    if before != after {
        return Err(serde::de::Error::custom(
            "the lean file differs in more than the believed_held lists",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{
  "quota": {"quota_us": 10000, "period_us": 100000},
  "runs": [
    {
      "name": "unthrottled",
      "tally": {
        "attempts": 3,
        "believed_held": [
          [
            "thr-000001",
            1
          ],
          [
            "thr-000002",
            1
          ]
        ]
      }
    }
  ],
  "seed": 17
}"#;

    #[test]
    fn the_lean_file_drops_only_the_believed_held_records() {
        let lean = lean_json(FILE).unwrap();
        assert!(lean.contains("\"believed_held\": []"), "{lean}");
        assert!(lean.contains("\"attempts\": 3"), "{lean}");
        assert!(lean.ends_with("\"seed\": 17\n}"), "{lean}");
        assert_eq!(lean_json(&lean).unwrap(), lean, "idempotent");
    }

    /// Converts the committed pack's `throttle.json` in place (a one-off:
    /// `cargo test -p experiments --lib -- --ignored lean_the_reference`).
    #[test]
    #[ignore = "rewrites data/reference/throttle/throttle.json"]
    fn lean_the_reference_throttle_json() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/reference/throttle/throttle.json");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, lean_json(&text).unwrap()).unwrap();
    }
}
