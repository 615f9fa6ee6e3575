//! The proposed revision of ADR-006 §6.2 (the margin and the heartbeat
//! divisor) and §6.5 (the trigger thresholds), derived from measured
//! conditions — never typed in. Pure: values in, verdicts out.
//!
//! Every rule is evaluated per (margin m, divisor k), with U = min(lease,
//! session TTL) × (1 − m) and the heartbeat period U / k, and has one
//! definition here:
//!
//! - **trigger 1** ([`trigger1`]): corrected p99 (upper end of its 95 %
//!   interval) ≤ base × m / 3; the margin it needs is [`margin_needed`] =
//!   3 × p99 / base, the only definition of "margin needed";
//! - **D4, ADR-006's form** ([`d4_adr`]): base × (1 − m) > hop, §6.5
//!   trigger 3 as the ADR writes it;
//! - **D4, sawtooth form** ([`d4_sawtooth`]): the remaining lease falls to
//!   U − U/k before a heartbeat's reply; D4 refuses for max(0, min(period,
//!   hop + p50 − (U − U/k))) of each period, which must stay within
//!   [`Tolerances::d4_refusal`];
//! - **ride-through** ([`ride_through`]): production's largest freeze ridden
//!   through, predicted (U − U/k − RTT at production's U) and corrected by
//!   the lab's measured ÷ predicted ratio ([`freeze`]), must reach the freeze
//!   tolerance.
//!
//! Binding are the production-shaped conditions only: production under the
//! measured network, production under a CPU quota (absolute times), and
//! production under freezes (absolute freeze lengths, ratios for leases).
//! The scaled TTLs are reported: their network is not scaled with the lease.
//!
//! The proposal ([`derive`]): keep ADR-006's (0.30, 3) if every binding rule
//! passes; else margin 0.30 with the smallest divisor that passes; else the
//! grid margin closest to 0.30 (ties to the larger) with its smallest
//! divisor; else none, with the table of failing pairs.

pub mod freeze;

use serde::Serialize;

pub use crate::adr::verdict::{Outcome, Tolerances};

use freeze::{FreezeCell, Measured, RatioFrom};

/// ADR-006's margin today (D1).
pub const ADR_MARGIN: f64 = 0.30;
/// ADR-006's heartbeat divisor today (period = U / 3).
pub const ADR_DIVISOR: u32 = 3;
/// The divisors the derivation searches.
pub const DIVISORS: std::ops::RangeInclusive<u32> = 2..=6;
/// Corrected samples a p99 needs (100 beyond its rank) before trigger 1 is
/// judged; fewer is "insufficient data".
pub const MIN_SAMPLES_BINDING: u64 = 10_000;

/// The margins the derivation searches: 0.10 … 0.50 in steps of 0.05.
pub fn margin_grid() -> Vec<f64> {
    (2..=10)
        .map(|i| (i as f64 * 0.05 * 100.0).round() / 100.0)
        .collect()
}

/// The rules, each with one definition (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Rule {
    /// Corrected p99 ≤ base × m / 3.
    Trigger1,
    /// base × (1 − m) > hop.
    D4Adr,
    /// Refusal duty at the bottom of the sawtooth ≤ tolerance.
    D4Sawtooth,
    /// Production's largest freeze ridden through ≥ the freeze tolerance.
    RideThrough,
}

impl Rule {
    /// Its name in the document.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Trigger1 => "trigger 1",
            Rule::D4Adr => "D4 (ADR-006's form)",
            Rule::D4Sawtooth => "D4 (sawtooth)",
            Rule::RideThrough => "ride-through",
        }
    }

    /// Its name in a table cell.
    pub fn short(self) -> &'static str {
        match self {
            Rule::Trigger1 => "trigger 1",
            Rule::D4Adr => "D4 ADR",
            Rule::D4Sawtooth => "D4 saw",
            Rule::RideThrough => "ride-through",
        }
    }
}

/// One environment the margin must cover, in ms.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Condition {
    /// What it is, e.g. `TTL 1s, net delay …`.
    pub name: String,
    /// Where its numbers come from (a results file, relative to the pack).
    pub source: String,
    /// min(lease, session TTL).
    pub base_ms: f64,
    /// The worst-case hop D4 requires.
    pub hop_ms: f64,
    /// Corrected heartbeat RTT median of the condition's pooled cells.
    pub p50_ms: f64,
    /// Their corrected p99, upper end of its 95 % interval.
    pub p99_ms: f64,
    /// The p99 itself and the lower end of its interval, for the tables.
    pub p99_point_ms: (f64, f64),
    /// Corrected samples pooled behind its percentiles.
    pub samples: u64,
    /// Of those, heartbeats that timed out (right-censored).
    pub censored: u64,
    /// Cells pooled.
    pub cells: usize,
    /// Whether the proposal must satisfy it (production-shaped).
    pub binding: bool,
}

/// Production under freezes: what the ride-through rule projects onto.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FreezeInputs {
    /// Where the freeze cells come from (a results file).
    pub source: String,
    /// Every freeze setting, repeats summed.
    pub cells: Vec<FreezeCell>,
    /// Production's min(lease, session TTL), ms.
    pub production_base_ms: f64,
    /// The RTT production's prediction subtracts (the production network's
    /// corrected p99, interval end), ms.
    pub production_rtt_ms: f64,
}

/// Everything the derivation reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Inputs {
    /// The RTT conditions, scaled (reported) and production (binding).
    pub conditions: Vec<Condition>,
    /// The freeze condition, if the pack has freeze cells.
    pub freezes: Option<FreezeInputs>,
}

impl Inputs {
    /// The freeze tolerance in force: the flag's, else the longest freeze
    /// the pack injected.
    pub fn freeze_tolerance_ms(&self, tol: &Tolerances) -> Option<f64> {
        tol.freeze_ms.or_else(|| {
            self.freezes
                .as_ref()?
                .cells
                .iter()
                .map(|c| c.freeze_ms)
                .max_by(f64::total_cmp)
        })
    }
}

/// One rule judged on one condition at one (m, k).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// The rule.
    pub rule: Rule,
    /// The condition it was judged on.
    pub condition: String,
    /// Its verdict.
    pub outcome: Outcome,
    /// Limit ÷ now, ≥ 1 passes; the smallest binds first.
    pub ratio: f64,
    /// The arithmetic, with the numbers.
    pub text: String,
    /// What would make it fail (or, failing, pass): the limit and the value now.
    pub change: String,
}

/// The one definition of the margin trigger 1 needs: 3 × p99 / base.
pub fn margin_needed(p99_ms: f64, base_ms: f64) -> f64 {
    fencepost_api::buckets::TRIGGER1_DIVISOR * p99_ms / base_ms.max(1e-9)
}

/// Trigger 1 on `c` at margin `m`.
pub fn trigger1(c: &Condition, m: f64) -> Check {
    let budget = fencepost_api::buckets::trigger1_budget(c.base_ms, m);
    let outcome = if c.samples < MIN_SAMPLES_BINDING {
        Outcome::Insufficient
    } else if c.p99_ms <= budget {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    Check {
        rule: Rule::Trigger1,
        condition: c.name.clone(),
        outcome,
        ratio: budget / c.p99_ms.max(1e-9),
        text: format!(
            "p99 {:.1} ms vs {:.0} × {m:.2} / 3 = {budget:.0} ms (margin needed 3 × p99 / base = \
             {:.3}; {} samples)",
            c.p99_ms,
            c.base_ms,
            margin_needed(c.p99_ms, c.base_ms),
            c.samples
        ),
        change: format!(
            "fails once the corrected p99 exceeds {budget:.0} ms (now {:.1} ms)",
            c.p99_ms
        ),
    }
}

/// D4 as ADR-006 §6.5 trigger 3 writes it, on `c` at margin `m`.
pub fn d4_adr(c: &Condition, m: f64) -> Check {
    let usable = c.base_ms * (1.0 - m);
    Check {
        rule: Rule::D4Adr,
        condition: c.name.clone(),
        outcome: if usable > c.hop_ms {
            Outcome::Pass
        } else {
            Outcome::Fail
        },
        ratio: usable / c.hop_ms.max(1e-9),
        text: format!(
            "{:.0} × (1 − {m:.2}) = {usable:.0} ms vs hop {:.0} ms",
            c.base_ms, c.hop_ms
        ),
        change: format!(
            "fails once the hop reaches {usable:.0} ms (now {:.0} ms)",
            c.hop_ms
        ),
    }
}

/// The sawtooth at (m, k): where the remaining lease bottoms out and what
/// D4 refuses there.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Sawtooth {
    /// U, ms.
    pub usable_ms: f64,
    /// U / k, ms.
    pub period_ms: f64,
    /// U − U/k: the remaining lease just before a heartbeat, ms.
    pub bottom_ms: f64,
    /// U − U/k − p50 − hop, ms (negative: D4 refuses part of each period).
    pub slack_ms: f64,
    /// max(0, min(period, hop + p50 − (U − U/k))) / period.
    pub refusal: f64,
}

/// The sawtooth of `base`, `hop`, `p50` at (m, k).
pub fn sawtooth(base_ms: f64, hop_ms: f64, p50_ms: f64, m: f64, k: u32) -> Sawtooth {
    let usable = base_ms * (1.0 - m);
    let period = usable / f64::from(k);
    let bottom = usable - period;
    let short = (hop_ms + p50_ms - bottom).clamp(0.0, period);
    Sawtooth {
        usable_ms: usable,
        period_ms: period,
        bottom_ms: bottom,
        slack_ms: bottom - p50_ms - hop_ms,
        refusal: short / period.max(1e-9),
    }
}

/// D4 in its sawtooth form on `c` at (m, k).
pub fn d4_sawtooth(c: &Condition, m: f64, k: u32, tol: &Tolerances) -> Check {
    let s = sawtooth(c.base_ms, c.hop_ms, c.p50_ms, m, k);
    Check {
        rule: Rule::D4Sawtooth,
        condition: c.name.clone(),
        outcome: if s.refusal <= tol.d4_refusal {
            Outcome::Pass
        } else {
            Outcome::Fail
        },
        ratio: (s.bottom_ms - c.p50_ms + tol.d4_refusal * s.period_ms) / c.hop_ms.max(1e-9),
        text: format!(
            "U − U/{k} = {:.0} − {:.0} = {:.0} ms, − p50 {:.1} − hop {:.0} = slack {:.1} ms; \
             refuses {:.2} % of each period (tolerance {:.2} %)",
            s.usable_ms,
            s.period_ms,
            s.bottom_ms,
            c.p50_ms,
            c.hop_ms,
            s.slack_ms,
            s.refusal * 100.0,
            tol.d4_refusal * 100.0
        ),
        change: format!(
            "fails once hop + p50 exceeds {:.0} ms (now {:.0} + {:.1} ms)",
            s.bottom_ms + tol.d4_refusal * s.period_ms,
            c.hop_ms,
            c.p50_ms
        ),
    }
}

/// Production's ride-through at (m, k): the prediction at production's U,
/// corrected by the lab's measured ÷ predicted ratio, against the freeze
/// tolerance. `None` without freeze cells.
pub fn ride_through(
    inputs: &Inputs,
    measured: &[Measured],
    tol: &Tolerances,
    m: f64,
    k: u32,
) -> Option<Check> {
    let f = inputs.freezes.as_ref()?;
    let need = inputs.freeze_tolerance_ms(tol)?;
    let predicted = freeze::predicted_ride_ms(f.production_base_ms, m, k, f.production_rtt_ms);
    let condition = format!("production under freezes of {need:.0} ms");
    let Some(ratio) = freeze::ratio_for(measured, m, k) else {
        let any_short = measured
            .iter()
            .any(|x| matches!(x.stopped_at, Some((_, Outcome::Insufficient))));
        return Some(Check {
            rule: Rule::RideThrough,
            condition,
            outcome: if any_short {
                Outcome::Insufficient
            } else {
                Outcome::Fail
            },
            ratio: 0.0,
            text: "no lab (margin, divisor) rode through its shortest freeze: no measured ratio \
                   corrects the prediction"
                .into(),
            change: "passes once a lab (margin, divisor) rides through a freeze with enough \
                     exposures"
                .into(),
        });
    };
    let projected = predicted * ratio.value();
    let from = match ratio {
        RatioFrom::Same(r) => format!("measured ÷ predicted {r:.2} at ({m:.2}, U/{k})"),
        RatioFrom::Worst(r, wm, wk) => format!(
            "{}: the worst measured ÷ predicted, {r:.2} at ({wm:.2}, U/{wk})",
            match measured
                .iter()
                .find(|x| (x.margin - m).abs() < 1e-9 && x.divisor == k)
                .and_then(|x| x.stopped_at)
            {
                Some((f, _)) => format!(
                    "the lab rode through no freeze at ({m:.2}, U/{k}) (stopped at {f:.0} ms)"
                ),
                None => format!("({m:.2}, U/{k}) not run in the lab"),
            }
        ),
    };
    Some(Check {
        rule: Rule::RideThrough,
        condition,
        outcome: if projected >= need {
            Outcome::Pass
        } else {
            Outcome::Fail
        },
        ratio: projected / need.max(1e-9),
        text: format!("predicted {predicted:.0} ms × {from} = {projected:.0} ms vs {need:.0} ms"),
        change: format!(
            "fails once production must ride through freezes longer than {projected:.0} ms \
             (the projected ride-through; now {need:.0} ms)"
        ),
    })
}

/// Every binding rule at (m, k).
pub fn checks(
    inputs: &Inputs,
    measured: &[Measured],
    tol: &Tolerances,
    m: f64,
    k: u32,
) -> Vec<Check> {
    let mut out = Vec::new();
    for c in inputs.conditions.iter().filter(|c| c.binding) {
        out.push(trigger1(c, m));
        out.push(d4_adr(c, m));
        out.push(d4_sawtooth(c, m, k, tol));
    }
    out.extend(ride_through(inputs, measured, tol, m, k));
    out
}

/// One (margin, divisor) with its binding checks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pair {
    /// Margin.
    pub margin: f64,
    /// Divisor.
    pub divisor: u32,
    /// Every binding rule's check.
    pub checks: Vec<Check>,
}

impl Pair {
    /// Fail if any fails, else insufficient data if any is, else pass.
    pub fn outcome(&self) -> Outcome {
        let any = |o| self.checks.iter().any(|c| c.outcome == o);
        if self.checks.is_empty() || any(Outcome::Insufficient) && !any(Outcome::Fail) {
            Outcome::Insufficient
        } else if any(Outcome::Fail) {
            Outcome::Fail
        } else {
            Outcome::Pass
        }
    }

    /// The rule that decides it: the tightest failing (or insufficient)
    /// check, else the tightest passing one.
    pub fn binding(&self) -> Option<&Check> {
        let o = self.outcome();
        self.checks
            .iter()
            .filter(|c| o == Outcome::Pass || c.outcome == o)
            .min_by(|a, b| a.ratio.total_cmp(&b.ratio))
    }
}

/// How the proposal was picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum How {
    /// ADR-006's (0.30, 3) passes every binding rule.
    KeepAdr,
    /// Margin 0.30 with the smallest divisor that passes.
    NewDivisor,
    /// The passing grid margin closest to 0.30 with its smallest divisor.
    NearestMargin,
    /// No pair passes.
    None,
}

/// The derivation's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Revision {
    /// The proposed margin.
    pub margin: Option<f64>,
    /// The proposed heartbeat divisor.
    pub divisor: Option<u32>,
    /// How it was picked.
    pub how: How,
    /// Every (margin, divisor) of the grid, margins outer.
    pub grid: Vec<Pair>,
    /// The lab's freeze cells, measured per (TTL, margin, divisor).
    pub measured: Vec<Measured>,
    /// The freeze tolerance in force, ms.
    pub freeze_tolerance_ms: Option<f64>,
}

impl Revision {
    /// The pair at (m, k) of the grid.
    pub fn pair(&self, m: f64, k: u32) -> Option<&Pair> {
        self.grid
            .iter()
            .find(|p| (p.margin - m).abs() < 1e-9 && p.divisor == k)
    }
}

/// Derives the proposal (see the module doc for the rule).
pub fn derive(inputs: &Inputs, tol: &Tolerances) -> Revision {
    let measured = inputs
        .freezes
        .as_ref()
        .map(|f| freeze::measure(&f.cells, tol))
        .unwrap_or_default();
    let grid: Vec<Pair> = margin_grid()
        .into_iter()
        .flat_map(|m| DIVISORS.map(move |k| (m, k)))
        .map(|(m, k)| Pair {
            margin: m,
            divisor: k,
            checks: checks(inputs, &measured, tol, m, k),
        })
        .collect();
    let passes = |p: &&Pair| p.outcome() == Outcome::Pass;
    let at = |m: f64| move |p: &&Pair| (p.margin - m).abs() < 1e-9;
    let (pick, how) = if grid
        .iter()
        .filter(at(ADR_MARGIN))
        .any(|p| p.divisor == ADR_DIVISOR && passes(&p))
    {
        (Some((ADR_MARGIN, ADR_DIVISOR)), How::KeepAdr)
    } else if let Some(p) = grid.iter().filter(at(ADR_MARGIN)).find(passes) {
        (Some((p.margin, p.divisor)), How::NewDivisor)
    } else {
        let close = |m: f64| ((m - ADR_MARGIN).abs() * 1e6).round();
        let best = grid.iter().filter(passes).min_by(|a, b| {
            close(a.margin)
                .total_cmp(&close(b.margin))
                .then(b.margin.total_cmp(&a.margin))
                .then(a.divisor.cmp(&b.divisor))
        });
        match best {
            Some(p) => (Some((p.margin, p.divisor)), How::NearestMargin),
            None => (None, How::None),
        }
    };
    Revision {
        margin: pick.map(|p| p.0),
        divisor: pick.map(|p| p.1),
        how,
        grid,
        measured,
        freeze_tolerance_ms: inputs.freeze_tolerance_ms(tol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prod(name: &str, p50: f64, p99: f64) -> Condition {
        Condition {
            name: name.into(),
            source: String::new(),
            base_ms: 15_000.0,
            hop_ms: 7_000.0,
            p50_ms: p50,
            p99_ms: p99,
            p99_point_ms: (p99, p99),
            samples: 20_000,
            censored: 0,
            cells: 1,
            binding: true,
        }
    }

    /// ADR-006's own numbers: at (0.30, 3) the bottom of the sawtooth is
    /// 15 × 0.7 × 2/3 = 7.000 s, exactly the hop, so the slack is −p50; at
    /// k = 4 it is 7,875 ms − p50 − 7,000.
    #[test]
    fn the_sawtooth_leaves_adr_006_no_slack_at_u3_and_passes_at_u4() {
        let s = sawtooth(15_000.0, 7_000.0, 0.0, 0.30, 3);
        assert!((s.bottom_ms - 7_000.0).abs() < 1e-6, "{s:?}");
        assert!(s.slack_ms.abs() < 1e-6);
        let c = prod("production", 43.6, 175.0);
        let tol = Tolerances::default();
        let at3 = d4_sawtooth(&c, 0.30, 3, &tol);
        assert_eq!(at3.outcome, Outcome::Fail, "{}", at3.text);
        assert!(at3.text.contains("slack -43.6 ms"), "{}", at3.text);
        let at4 = d4_sawtooth(&c, 0.30, 4, &tol);
        assert_eq!(at4.outcome, Outcome::Pass);
        assert!(at4.text.contains("7875"), "{}", at4.text);
        // ADR-006's form sees none of it: 10,500 > 7,000.
        assert_eq!(d4_adr(&c, 0.30).outcome, Outcome::Pass);
        // Within the refusal tolerance: 6 ms of a 3,500 ms period.
        let net = prod("network", 6.0, 48.0);
        assert_eq!(d4_sawtooth(&net, 0.30, 3, &tol).outcome, Outcome::Pass);
        let strict = Tolerances {
            d4_refusal: 0.001,
            ..tol
        };
        assert_eq!(d4_sawtooth(&net, 0.30, 3, &strict).outcome, Outcome::Fail);
    }

    /// Trigger 1's verdict and its text read the same definition of the
    /// margin needed, and too few samples are insufficient data.
    #[test]
    fn trigger_1_uses_the_one_margin_needed_and_needs_its_samples() {
        let c = prod("production", 6.0, 600.0);
        assert!((margin_needed(c.p99_ms, c.base_ms) - 0.12).abs() < 1e-12);
        assert_eq!(trigger1(&c, 0.10).outcome, Outcome::Fail);
        assert_eq!(trigger1(&c, 0.15).outcome, Outcome::Pass);
        assert!(trigger1(&c, 0.15).text.contains("0.120"));
        let few = Condition {
            samples: MIN_SAMPLES_BINDING - 1,
            ..c
        };
        assert_eq!(trigger1(&few, 0.5).outcome, Outcome::Insufficient);
    }

    fn freezes(cells: Vec<FreezeCell>) -> Option<FreezeInputs> {
        Some(FreezeInputs {
            source: String::new(),
            cells,
            production_base_ms: 15_000.0,
            production_rtt_ms: 50.0,
        })
    }

    fn fcell(m: f64, lost: u64) -> FreezeCell {
        FreezeCell {
            base_ms: 1_000.0,
            margin: m,
            divisor: 3,
            freeze_ms: 400.0,
            lost,
            exposures: 30_000,
            estimated: false,
            from_gaps: false,
            cells: 3,
            rtt_ms: 50.0,
        }
    }

    /// One margin's freeze cells censored (many sessions lost), another's
    /// not: the uncensored one is measured and derives the proposal;
    /// pooled, 20,002 of 60,000 would have failed both.
    #[test]
    fn a_censored_margin_does_not_block_an_uncensored_one() {
        let inputs = Inputs {
            conditions: vec![prod("network", 2.0, 40.0)],
            freezes: freezes(vec![fcell(0.2, 2), fcell(0.4, 20_000)]),
        };
        let tol = Tolerances::default();
        let r = derive(&inputs, &tol);
        assert_eq!(r.freeze_tolerance_ms, Some(400.0));
        let m = |mg: f64| r.measured.iter().find(|x| x.margin == mg).unwrap();
        assert_eq!(m(0.2).ridden_ms, Some(400.0));
        assert_eq!(m(0.4).ridden_ms, None);
        assert_eq!((r.margin, r.divisor), (Some(0.30), Some(3)), "{:?}", r.grid);
        assert_eq!(r.how, How::KeepAdr);
        // Only the censored margin: no measured ratio, every pair fails.
        let only = Inputs {
            freezes: freezes(vec![fcell(0.4, 20_000)]),
            ..inputs.clone()
        };
        let r = derive(&only, &tol);
        assert_eq!(r.how, How::None);
        // Too few exposures anywhere: insufficient data, never a pass.
        let short = Inputs {
            freezes: freezes(vec![FreezeCell {
                exposures: 100,
                ..fcell(0.2, 0)
            }]),
            ..inputs
        };
        let r = derive(&short, &tol);
        assert_eq!(r.pair(0.3, 3).unwrap().outcome(), Outcome::Insufficient);
        assert_eq!(r.margin, None);
    }

    /// The order of the pick: (0.30, 3), else 0.30 with the smallest
    /// divisor, else the nearest margin (ties to the larger).
    #[test]
    fn the_pick_keeps_the_margin_before_moving_it() {
        let tol = Tolerances::default();
        let quota = Inputs {
            conditions: vec![prod("quota", 43.6, 175.0)],
            freezes: None,
        };
        let r = derive(&quota, &tol);
        assert_eq!(
            (r.margin, r.divisor, r.how),
            (Some(0.30), Some(4), How::NewDivisor)
        );
        // A tail needing 0.33 (p99 1,650 ms): 0.35 is the nearest passing margin.
        let tail = Inputs {
            conditions: vec![Condition {
                hop_ms: 3_000.0,
                ..prod("tail", 2.0, 1_650.0)
            }],
            freezes: None,
        };
        let r = derive(&tail, &tol);
        assert_eq!((r.margin, r.how), (Some(0.35), How::NearestMargin));
        let none = derive(&Inputs::default(), &tol);
        assert_eq!(none.how, How::None, "no binding condition, no pass");
    }
}
