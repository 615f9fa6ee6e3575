//! The freeze (server-pause) half of the revision: sessions lost per freeze
//! exposure for one setting (TTL, margin, divisor, freeze length), the
//! largest freeze a (margin, divisor) was measured to ride through, and the
//! prediction it is held against.
//!
//! A setting is never pooled with another: cells of different margins or
//! divisors have different usable windows, so one share over them would judge
//! each by the others' losses. Only the repeats of one setting are summed.

use serde::Serialize;

use crate::adr::verdict::{Outcome, Tolerances};

/// The cells of one freeze setting, their repeats summed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FreezeCell {
    /// min(lease, session TTL) of the cells, ms.
    pub base_ms: f64,
    /// Client margin.
    pub margin: f64,
    /// Heartbeat divisor k (period U / k).
    pub divisor: u32,
    /// How long each freeze lasted, ms (the FOR of `EVERY:FOR`).
    pub freeze_ms: f64,
    /// Sessions lost at their deadline under the freezes.
    pub lost: u64,
    /// Freezes × sessions open: the chances a session had to be lost.
    pub exposures: u64,
    /// Whether the freezes were estimated (floor(duration / EVERY)) because
    /// the table predates the `server_pauses` column.
    pub estimated: bool,
    /// Whether `lost` counts heartbeat gaps longer than the window
    /// (`hb_gaps_over_window`) rather than `session_lost_deadline`.
    pub from_gaps: bool,
    /// Repeats summed.
    pub cells: usize,
    /// The RTT the prediction subtracts, ms (the same TTL's non-freeze corrected p99).
    pub rtt_ms: f64,
}

impl FreezeCell {
    /// Lost ÷ exposures.
    pub fn share(&self) -> f64 {
        self.lost as f64 / self.exposures.max(1) as f64
    }

    /// Within tolerance, beyond it, or too few exposures to tell.
    pub fn outcome(&self, tol: &Tolerances) -> Outcome {
        if self.exposures < tol.min_exposures() {
            Outcome::Insufficient
        } else if self.share() <= tol.lost_per_exposure {
            Outcome::Pass
        } else {
            Outcome::Fail
        }
    }

    /// The predicted largest freeze ridden through at this cell's setting.
    pub fn predicted_ms(&self) -> f64 {
        predicted_ride_ms(self.base_ms, self.margin, self.divisor, self.rtt_ms)
    }
}

/// The largest freeze a session rides through, predicted: the time left at
/// the bottom of the sawtooth, less one RTT for the heartbeat that follows
/// the freeze: U − U/k − RTT, U = base × (1 − m).
pub fn predicted_ride_ms(base_ms: f64, m: f64, k: u32, rtt_ms: f64) -> f64 {
    let usable = base_ms * (1.0 - m);
    usable - usable / f64::from(k) - rtt_ms
}

/// What the freeze cells of one (TTL, margin, divisor) measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// min(lease, session TTL), ms.
    pub base_ms: f64,
    /// Client margin.
    pub margin: f64,
    /// Heartbeat divisor.
    pub divisor: u32,
    /// Predicted largest freeze ridden through, ms.
    pub predicted_ms: f64,
    /// The largest freeze length within tolerance with enough exposures,
    /// every shorter one within tolerance too; `None` if the shortest is not.
    pub ridden_ms: Option<f64>,
    /// The shortest freeze length that was not ridden through, and why.
    pub stopped_at: Option<(f64, Outcome)>,
}

impl Measured {
    /// Measured ÷ predicted, where a freeze was ridden through.
    pub fn ratio(&self) -> Option<f64> {
        self.ridden_ms
            .map(|r| r / self.predicted_ms.max(1e-9))
            .filter(|r| r.is_finite())
    }
}

/// Every (TTL, margin, divisor) of `cells`, measured: never pooled over
/// margins or divisors.
pub fn measure(cells: &[FreezeCell], tol: &Tolerances) -> Vec<Measured> {
    let mut keys: Vec<(f64, f64, u32)> = cells
        .iter()
        .map(|c| (c.base_ms, c.margin, c.divisor))
        .collect();
    keys.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.total_cmp(&b.1))
            .then(a.2.cmp(&b.2))
    });
    keys.dedup();
    keys.into_iter()
        .map(|(base, m, k)| {
            let mut mine: Vec<&FreezeCell> = cells
                .iter()
                .filter(|c| c.base_ms == base && c.margin == m && c.divisor == k)
                .collect();
            mine.sort_by(|a, b| a.freeze_ms.total_cmp(&b.freeze_ms));
            let mut ridden_ms = None;
            let mut stopped_at = None;
            for c in &mine {
                match c.outcome(tol) {
                    Outcome::Pass => ridden_ms = Some(c.freeze_ms),
                    other => {
                        stopped_at = Some((c.freeze_ms, other));
                        break;
                    }
                }
            }
            Measured {
                base_ms: base,
                margin: m,
                divisor: k,
                predicted_ms: mine.first().map_or(0.0, |c| c.predicted_ms()),
                ridden_ms,
                stopped_at,
            }
        })
        .collect()
}

/// How production's ride-through at (m, k) was corrected from the lab.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum RatioFrom {
    /// The lab measured this (m, k): its own measured ÷ predicted.
    Same(f64),
    /// The lab did not ride through any freeze at this (m, k) (or did not run
    /// it): the worst measured ÷ predicted over the pairs that did, and where.
    Worst(f64, f64, u32),
}

impl RatioFrom {
    /// The ratio.
    pub fn value(&self) -> f64 {
        match self {
            RatioFrom::Same(r) | RatioFrom::Worst(r, _, _) => *r,
        }
    }
}

/// The ratio production's prediction at (m, k) is corrected by: the lab's at
/// the same (m, k) if it was measured (the worst over TTLs), else the worst
/// over every measured pair; `None` if no pair rode through any freeze.
pub fn ratio_for(measured: &[Measured], m: f64, k: u32) -> Option<RatioFrom> {
    let same = measured
        .iter()
        .filter(|x| (x.margin - m).abs() < 1e-9 && x.divisor == k)
        .filter_map(Measured::ratio)
        .min_by(f64::total_cmp);
    if let Some(r) = same {
        return Some(RatioFrom::Same(r));
    }
    measured
        .iter()
        .filter_map(|x| x.ratio().map(|r| (r, x.margin, x.divisor)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(r, m, k)| RatioFrom::Worst(r, m, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(m: f64, k: u32, freeze: f64, lost: u64, exposures: u64) -> FreezeCell {
        FreezeCell {
            base_ms: 1_000.0,
            margin: m,
            divisor: k,
            freeze_ms: freeze,
            lost,
            exposures,
            estimated: false,
            from_gaps: true,
            cells: 1,
            rtt_ms: 50.0,
        }
    }

    /// Each (margin, divisor) reads its own cells: 0.20 loses nothing, 0.40
    /// loses many; pooled, the share would be 5 % and both would fail.
    #[test]
    fn the_lost_share_is_per_margin_and_divisor_never_pooled() {
        let tol = Tolerances::default();
        let cells = [
            cell(0.2, 3, 400.0, 0, 10_000),
            cell(0.4, 3, 400.0, 1_000, 10_000),
            cell(0.2, 4, 400.0, 1_000, 10_000),
        ];
        let m = measure(&cells, &tol);
        assert_eq!(m.len(), 3);
        let at = |mg: f64, k: u32| {
            m.iter()
                .find(|x| x.margin == mg && x.divisor == k)
                .unwrap()
                .ridden_ms
        };
        assert_eq!(at(0.2, 3), Some(400.0));
        assert_eq!(at(0.4, 3), None);
        assert_eq!(at(0.2, 4), None, "the same margin at another divisor");
    }

    /// 2,999 exposures cannot show 0.1 %: "insufficient data", never a pass.
    #[test]
    fn too_few_exposures_give_insufficient_data() {
        let tol = Tolerances::default();
        assert_eq!(tol.min_exposures(), 3_000);
        assert_eq!(
            cell(0.3, 3, 400.0, 0, 2_999).outcome(&tol),
            Outcome::Insufficient
        );
        assert_eq!(cell(0.3, 3, 400.0, 3, 3_000).outcome(&tol), Outcome::Pass);
        assert_eq!(cell(0.3, 3, 400.0, 4, 3_000).outcome(&tol), Outcome::Fail);
        let m = measure(&[cell(0.3, 3, 300.0, 0, 100)], &tol);
        assert_eq!(m[0].ridden_ms, None);
        assert_eq!(m[0].stopped_at, Some((300.0, Outcome::Insufficient)));
    }

    /// The largest freeze ridden through stops at the first one that is not.
    #[test]
    fn the_largest_freeze_ridden_through_stops_at_the_first_failure() {
        let tol = Tolerances::default();
        let cells = [
            cell(0.3, 3, 300.0, 0, 5_000),
            cell(0.3, 3, 400.0, 1, 5_000),
            cell(0.3, 3, 500.0, 100, 5_000),
            cell(0.3, 3, 600.0, 0, 5_000),
        ];
        let m = &measure(&cells, &tol)[0];
        assert_eq!(m.ridden_ms, Some(400.0));
        assert_eq!(m.stopped_at, Some((500.0, Outcome::Fail)));
        // 700 − 233.3 − 50 = 416.7 predicted.
        assert!((m.predicted_ms - 416.67).abs() < 0.01, "{}", m.predicted_ms);
        assert_eq!(
            ratio_for(std::slice::from_ref(m), 0.3, 3).map(|r| r.value()),
            m.ratio()
        );
        assert!(matches!(
            ratio_for(std::slice::from_ref(m), 0.3, 4),
            Some(RatioFrom::Worst(_, _, 3))
        ));
    }
}
