//! Performance targets judged over repeats (or interleaved pairs) one by
//! one, as docs/bench.md's table of targets states them: met in every
//! repeat, met by the median only (naming how many repeats missed), or not
//! met. This is a count over the repeats, not an interval: the intervals'
//! verdicts are [`crate::peer::Spread::verdict`] and
//! [`crate::peer_sessions::at_most_verdict`]. And the rule of the interleaved
//! A/B runs of a change: kept only when B beat A in every pair.

use crate::peer::Spread;
use crate::stats::median;

/// One client's grants on PostgreSQL against etcd's: at least as many.
pub const ONE_CLIENT_GRANT_TARGET: f64 = 1.0;

/// Which side of its target a value must be on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The value must be ≥ the target.
    AtLeast,
    /// The value must be ≤ the target.
    AtMost,
}

/// What [`over_repeats`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Met {
    /// Every repeat meets the target (how many repeats).
    All(usize),
    /// The median does, `missed` of `of` repeats do not.
    Median {
        /// Repeats that miss it.
        missed: usize,
        /// Repeats in all.
        of: usize,
    },
    /// The median does not (or there are no repeats).
    Not,
}

impl Met {
    /// In words: `met in all 3`, `median met; not in 1 of 3`, `not met`.
    pub fn words(self) -> String {
        match self {
            Met::All(n) => format!("met in all {n}"),
            Met::Median { missed, of } => format!("median met; not in {missed} of {of}"),
            Met::Not => "not met".into(),
        }
    }
}

/// A target over repeats or pairs, each value judged on its own.
pub fn over_repeats(values: &[f64], target: f64, bound: Bound) -> Met {
    let ok = |x: f64| match bound {
        Bound::AtLeast => x >= target,
        Bound::AtMost => x <= target,
    };
    if values.is_empty() {
        return Met::Not;
    }
    if values.iter().all(|&x| ok(x)) {
        return Met::All(values.len());
    }
    if ok(median(values)) {
        return Met::Median {
            missed: values.iter().filter(|&&x| !ok(x)).count(),
            of: values.len(),
        };
    }
    Met::Not
}

/// An interleaved A/B run of a change, from B ÷ A of its measure in each
/// pair: kept only when B was faster in every pair.
pub fn ab_verdict(b_over_a: &Spread) -> &'static str {
    if b_over_a.min > 1.0 {
        "kept: every pair faster"
    } else {
        "dropped: not shown in every pair"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_met_in_all_by_the_median_or_not() {
        let cases: [(&[f64], f64, Bound, &str); 7] = [
            (&[0.95, 0.91, 1.2], 0.9, Bound::AtLeast, "met in all 3"),
            (
                &[0.95, 0.85, 1.2],
                0.9,
                Bound::AtLeast,
                "median met; not in 1 of 3",
            ),
            (&[0.80, 0.85, 0.95], 0.9, Bound::AtLeast, "not met"),
            (
                &[1.9, 2.1, 1.0],
                2.0,
                Bound::AtMost,
                "median met; not in 1 of 3",
            ),
            (&[2.5, 2.1, 1.0], 2.0, Bound::AtMost, "not met"),
            (&[0.7, 1.2], 2.0, Bound::AtMost, "met in all 2"),
            (&[], 2.0, Bound::AtMost, "not met"),
        ];
        for (values, target, bound, want) in cases {
            assert_eq!(
                over_repeats(values, target, bound).words(),
                want,
                "{values:?} {bound:?} {target}"
            );
        }
        // The target itself meets it, from either side.
        assert_eq!(over_repeats(&[0.9], 0.9, Bound::AtLeast), Met::All(1));
        assert_eq!(over_repeats(&[2.0], 2.0, Bound::AtMost), Met::All(1));
    }

    #[test]
    fn a_change_is_kept_only_when_every_pair_is_faster() {
        let all = Spread::of(&[1.01, 1.2, 1.05]).unwrap();
        let one_slower = Spread::of(&[0.99, 1.2, 1.3]).unwrap();
        let tie = Spread::of(&[1.0, 1.2]).unwrap();
        assert_eq!(ab_verdict(&all), "kept: every pair faster");
        assert_eq!(ab_verdict(&one_slower), "dropped: not shown in every pair");
        assert_eq!(ab_verdict(&tie), "dropped: not shown in every pair");
    }
}
