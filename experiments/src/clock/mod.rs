//! `experiments clock` (T-043): a deterministic simulation — no real sleeps —
//! of one client and one server, each with its own clock, against the
//! server's grace. It drives the real code through the `Clock` seam:
//! the server side is `lock_server::core::LockTable` (the state machine the
//! lock-server serves) reading a [`FakeClock`]; the client side is the SDK's
//! deadline arithmetic `fencepost_sdk::lease::{client_deadline, remaining}`
//! reading another [`FakeClock`]. Nothing here re-implements HELD/GRACE/FREE
//! or the deadline; the simulation only decides what each clock reads at
//! each true instant.
//!
//! ## The model
//!
//! True time `t` (ns). Each clock reads
//! `floor((phase + t·(1 + r) + step·[t ≥ t_step]) / tick) · tick`: its own
//! origin (`phase`), a rate error `r` with `|r| ≤ ρ` (server fast, client
//! slow: the opposite directions of the essay's worst case), a tick of `q/2`
//! (so both together quantise by `q`) and optionally one step.
//!
//! One acquire: the client sends at `t_send`; the server receives at
//! `t_recv = t_send + d1` and grants (its lease starts at its reading then);
//! the reply arrives at `t_reply = t_recv + d2`. The server reassigns at the
//! first true instant its `LockTable` says FREE (another session's acquire
//! then succeeds, and is performed). A **violation** is a case where the
//! client, from `t_reply` on, still believes it holds the grant
//! (`remaining(now, deadline) > 0` on its clock) at a true instant at or after
//! that reassignment; the overrun is by how much.
//!
//! ## Where θ enters
//!
//! Monotonic intervals are offset-free: the two clocks' origins never meet in
//! any comparison, so a constant offset between them cannot matter. What can
//! matter is *when* the client takes the reading its deadline starts from,
//! relative to the server's start (its receipt). The SDK takes it before the
//! send (D2), i.e. `d1` *earlier* than the server's start: an error in the
//! safe direction (scenario `sdk-d2`). The essay's θ is the case where the
//! client's start reading can be up to θ *late* — the essay's own "reads its
//! clock on receipt", a reply-arrival deadline (ADR-006 §6.1 trap 1), or a
//! start instant carried across clocks with a synchronisation error. The
//! `offset` scenario models exactly that: the client's start reading is taken
//! at `t_recv + ε`, `ε` uniform in `[−θ, +θ]`. With it, `θ + 2ρD + q` is the
//! worst case to first order, and the sweep shows where it separates zero
//! from non-zero.
//!
//! The step scenarios add one step of `--step` on one side, at a uniform
//! instant inside the lease, on top of the `offset` scenario.

pub mod report;
pub mod sim;

use std::time::Duration;

use crate::output::{RunDir, RunDirError, exit_code};
use crate::plots::PlotError;

pub use sim::{CaseOutcome, ClockResult, Findings, Scenario, SimParams, SweepRow, findings, sweep};

/// Why `experiments clock` failed (exit 1): only its output can.
#[derive(Debug, thiserror::Error)]
pub enum ClockError {
    /// The output directory could not be made or written; [`RunDirError`] says what to do.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// The plot could not be drawn; [`PlotError`] says what to do.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// One `experiments clock` run: the simulation's inputs, its sweep and
/// seed, where it writes. The command line builds it.
#[derive(Clone, Debug)]
pub struct ClockRun {
    /// The simulation's inputs.
    pub params: SimParams,
    /// Seeded cases per (scenario, grace fraction).
    pub cases: u64,
    /// Grace as fractions of the bound.
    pub fractions: Vec<f64>,
    /// The seed; random if absent (printed and recorded).
    pub seed: Option<u64>,
    /// Results directory; default data/runs/<timestamp>-clock/.
    pub out: Option<std::path::PathBuf>,
}

/// Runs `experiments clock`.
pub fn run(args: &ClockRun) -> Result<(ClockResult, std::path::PathBuf), ClockError> {
    let seed = args.seed.unwrap_or_else(rand::random);
    let p = args.params.clone();
    let config = serde_json::json!({
        "params": &p, "cases": args.cases, "fractions": &args.fractions, "seed": seed,
    });
    let run_dir = RunDir::create("clock", args.out.as_deref(), seed, &config)?;
    let rows = sweep(&p, &Scenario::ALL, &args.fractions, args.cases, seed);
    let f = findings(&rows);
    let bound = p.bound();
    let result = ClockResult {
        bound_ms: bound.as_secs_f64() * 1e3,
        bound_terms_ms: [
            p.theta_ns as f64 / 1e6,
            fencepost_api::grace::drift_term(p.drift_ppm, Duration::from_nanos(p.lease_ns))
                .as_secs_f64()
                * 1e3,
            p.quantum_ns as f64 / 1e6,
        ],
        scenarios: Scenario::ALL
            .iter()
            .map(|s| (s.name().to_string(), s.describe().to_string()))
            .collect(),
        rows,
        findings: f,
        params: p,
        seed,
    };
    run_dir.write_json("clock.json", &result)?;
    let mut csv = String::from(
        "scenario,grace_fraction,grace_ms,bound_ms,cases,violations,violation_rate,max_overrun_us\n",
    );
    for r in &result.rows {
        csv.push_str(&format!(
            "{},{},{:.6},{:.6},{},{},{:.6},{:.3}\n",
            r.scenario,
            r.grace_fraction,
            r.grace_ms,
            r.bound_ms,
            r.cases,
            r.violations,
            r.violation_rate,
            r.max_overrun_us
        ));
    }
    run_dir.write("clock.csv", csv)?;
    let series: Vec<crate::plots::ClockSeries> = Scenario::ALL
        .iter()
        .map(|s| crate::plots::ClockSeries {
            label: s.name().into(),
            points: result
                .rows
                .iter()
                .filter(|r| r.scenario == s.name())
                .map(|r| (r.grace_fraction, r.violation_rate))
                .collect(),
        })
        .collect();
    crate::plots::clock(
        &run_dir.dir,
        &series,
        format!(
            "clock: D = {} ms, θ = {} ms, ρ = {} ppm, q = {} ms, step {} ms, margin {}; bound {:.3} ms; {} cases/point",
            result.params.lease_ns / 1_000_000,
            result.params.theta_ns as f64 / 1e6,
            result.params.drift_ppm,
            result.params.quantum_ns as f64 / 1e6,
            result.params.step_ns as f64 / 1e6,
            result.params.margin,
            result.bound_ms,
            args.cases
        ),
    )?;
    let section = report::report_section(&result, args.cases);
    let dir = run_dir.finish(&section)?;
    Ok((result, dir))
}

/// `experiments clock`: runs and prints the table; exit 0, or 1 on failure.
pub fn main(args: &ClockRun) -> i32 {
    exit_code("clock", run(args), |(r, dir)| {
        print!("{}", report::summary(&r, &dir));
        0
    })
}
