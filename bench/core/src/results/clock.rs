//! `clock.json`, the clock experiment's result ([`ClockResult`]): the
//! simulation's inputs ([`SimParams`]), one [`SweepRow`] per (scenario,
//! grace fraction), and its [`Findings`]. `experiments clock` writes it,
//! the ADR evidence (`bench-report`) reads it: both with these types.

use std::time::Duration;

use fencepost_api::grace::{GraceParams, GracePolicy};
use serde::{Deserialize, Serialize};

/// The sweep's inputs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimParams {
    /// Lease D, ns.
    pub lease_ns: u64,
    /// θ_max, ns.
    pub theta_ns: u64,
    /// ρ, ppm.
    pub drift_ppm: u64,
    /// q (combined), ns.
    pub quantum_ns: u64,
    /// Step size, ns.
    pub step_ns: u64,
    /// Largest one-way delay, ns.
    pub max_delay_ns: u64,
    /// Client margin.
    pub margin: f64,
}

impl SimParams {
    /// The essay's bound `θ + 2ρD + q`, as the server's own derived-grace code computes it.
    pub fn bound(&self) -> Duration {
        GracePolicy::Derived(GraceParams {
            offset_max: Duration::from_nanos(self.theta_ns),
            drift_ppm: self.drift_ppm,
            quantum: Duration::from_nanos(self.quantum_ns),
        })
        .grace_for(Duration::from_nanos(self.lease_ns))
    }
}

/// One row of `clock.csv`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepRow {
    /// Scenario name.
    pub scenario: String,
    /// Grace / bound.
    pub grace_fraction: f64,
    /// Grace, ms.
    pub grace_ms: f64,
    /// Bound θ + 2ρD + q, ms.
    pub bound_ms: f64,
    /// Cases.
    pub cases: u64,
    /// Cases where the client believed after the reassignment.
    pub violations: u64,
    /// `violations / cases`.
    pub violation_rate: f64,
    /// Largest overrun, µs (0 with no violation).
    pub max_overrun_us: f64,
}

/// What the sweep says, in booleans and words.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Findings {
    /// `offset`: no violation at any grace ≥ bound.
    pub zero_at_or_above_bound: bool,
    /// `offset`: some violation at some grace < bound.
    pub nonzero_below_bound: bool,
    /// Which server step direction produced more violations at grace = bound.
    pub server_hazardous_step: String,
    /// Which client step direction produced more violations at grace = bound.
    pub client_hazardous_step: String,
    /// Whether the simulation agrees with the essay's "a step backwards is the dangerous direction" for the server.
    pub agrees_with_essay_on_server_step: bool,
    /// The findings in sentences.
    pub summary: Vec<String>,
}

/// `clock.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClockResult {
    /// The inputs.
    pub params: SimParams,
    /// The seed.
    pub seed: u64,
    /// Bound θ + 2ρD + q, ms.
    pub bound_ms: f64,
    /// `[θ, 2ρD, q]` in ms.
    pub bound_terms_ms: [f64; 3],
    /// Scenario descriptions.
    pub scenarios: Vec<(String, String)>,
    /// Every (scenario, fraction).
    pub rows: Vec<SweepRow>,
    /// What they say.
    pub findings: Findings,
}
