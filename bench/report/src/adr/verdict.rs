//! The verdict vocabulary the revision's rules share: what a rule may
//! tolerate ([`Tolerances`], set by `bench adr` flags and printed by the
//! document) and what a rule says ([`Outcome`]).

use serde::Serialize;

/// What the rules tolerate; `bench adr` flags set them and the document
/// prints them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tolerances {
    /// Sessions lost per freeze exposure (lost ÷ freezes × sessions open);
    /// default 0.1 %. A verdict needs 3 ÷ this many exposures.
    pub lost_per_exposure: f64,
    /// The longest freeze production must ride through, ms (absolute time);
    /// `None`: the longest freeze the pack's freeze cells injected.
    pub freeze_ms: Option<f64>,
    /// The share of each heartbeat period D4 may refuse; default 1 %.
    pub d4_refusal: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            lost_per_exposure: 0.001,
            freeze_ms: None,
            d4_refusal: 0.01,
        }
    }
}

impl Tolerances {
    /// Exposures a lost share needs before it is a verdict: 3 ÷ tolerance
    /// (at zero losses, the 95 % upper bound of the share is ~3 ÷ n).
    pub fn min_exposures(&self) -> u64 {
        (3.0 / self.lost_per_exposure.max(1e-12) - 1e-9).ceil() as u64
    }
}

/// A rule's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// Within its limit.
    Pass,
    /// Beyond it.
    Fail,
    /// Too few samples or exposures to tell; never a pass.
    Insufficient,
}

impl Outcome {
    /// `pass`, `fail`, `insufficient data`.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Insufficient => "insufficient data",
        }
    }
}
