//! The proposed revision of ADR-006 §6.2 (D1's margin) and §6.5 (the
//! heartbeat divisor), derived from measured conditions — never typed in.
//!
//! Each [`Condition`] is one environment the margin must cover: a TTL of the
//! sweep under the realistic network delay, the server-pause condition, the
//! production configuration projected from the measured (unscaled) network
//! RTTs, and (not binding, reported) the CPU-throttled run. For a margin `m`
//! and heartbeat divisor `k` (period = U / k, U = min(lease, session TTL) ×
//! (1 − m), the SDK's `heartbeat_period` at k = 3) a condition is satisfied
//! when all three hold:
//!
//! 1. **trigger 1**: the corrected p99 (upper end of its 95 % interval) ≤
//!    min(lease, session TTL) × m / 3 — ADR-006 §6.5's "one third";
//! 2. **trigger 3 / D4**: U − U/k − corrected p50 > the worst-case hop (what
//!    is left just before a heartbeat's reply still covers one rail call);
//! 3. **stall** (conditions with a measured stall, the server pause): the
//!    stall (corrected p99.9) + U/k < U, so the first heartbeat after the
//!    stall is answered before the session's deadline.
//!
//! Rule 1 binds only on production-shaped conditions ([`Condition::rtt_rule`]):
//! a scaled cell's network is not scaled with its lease, so its trigger 1 is
//! 30× pessimistic (docs/measurement.md, the time base) and is reported, not imposed; the
//! production projections apply the same measured RTTs to production's
//! budget. A stall condition's p99 is the stall itself.
//!
//! The proposal ([`derive`]): keep ADR-006's (0.30, 3) if every binding
//! condition is satisfied; otherwise keep the margin 0.30 with the smallest
//! divisor that satisfies them (the heartbeat rate is the cheaper knob: the
//! ADR's own action for trigger 1 is "raise the margin or shorten the
//! heartbeat period"); otherwise the grid margin closest to 0.30 (ties to
//! the larger, "we would rather pay throughput") with its smallest divisor;
//! otherwise none, with the conditions that make every pair infeasible.

use serde::Serialize;

/// ADR-006's margin today (D1).
pub const ADR_MARGIN: f64 = 0.30;
/// ADR-006's heartbeat divisor today (T-040: period = U / 3; §6.5: "one third").
pub const ADR_DIVISOR: u32 = 3;
/// The margins the derivation searches: 0.05 … 0.60 in steps of 0.05.
pub fn margin_grid() -> Vec<f64> {
    (1..=12)
        .map(|i| (i as f64 * 0.05 * 100.0).round() / 100.0)
        .collect()
}
/// Corrected samples a binding condition's p99 needs (100 beyond its rank)
/// before the revision is more than provisional.
pub const MIN_SAMPLES_BINDING: u64 = 10_000;
/// Corrected samples a condition whose stall is read at the p99.9 needs
/// (1,000 beyond its rank) before the revision is more than provisional.
pub const MIN_SAMPLES_STALL: u64 = 1_000_000;
/// The divisors it searches.
pub const DIVISORS: std::ops::RangeInclusive<u32> = 2..=8;

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
    /// Their corrected p99, upper end of its 95 % interval ([`bench_analysis::pool`]).
    pub p99_ms: f64,
    /// The p99 itself and the lower end of its interval, for the tables.
    pub p99_point_ms: (f64, f64),
    /// A stall to ride out (corrected p99.9, upper end), for the pause condition.
    pub stall_ms: Option<f64>,
    /// Corrected samples pooled behind its percentiles.
    pub samples: u64,
    /// Of those, heartbeats that timed out: right-censored samples, whose
    /// true RTT is only known to be at least the timeout (the time left
    /// before the session's deadline).
    pub censored: u64,
    /// Sessions lost under the condition (no reply before the deadline).
    pub lost: u64,
    /// Cells pooled.
    pub cells: usize,
    /// Whether the proposal must satisfy it.
    pub binding: bool,
    /// Whether rule 1 (trigger 1) applies: not to a scaled cell, whose
    /// network is 30× harsher relative to its lease than in production (the
    /// production projection applies the same RTTs to production's budget),
    /// nor to a stall condition, whose tail is the fault itself.
    pub rtt_rule: bool,
}

/// Why a (margin, divisor) pair fails a condition, `None` if it satisfies it.
/// A stall whose p99.9 is censored ([`Condition::stall_censored`]) fails
/// every pair: the stall outlasted the heartbeat timeout, so its length is
/// unknown, and what was lost to it is the fault the rule guards against.
pub fn violation(c: &Condition, m: f64, k: u32) -> Option<String> {
    let budget = c.base_ms * m / 3.0;
    if c.rtt_rule && c.p99_ms > budget {
        return Some(format!(
            "trigger 1: p99 {:.1} ms > {:.0} × {m:.2} / 3 = {budget:.1} ms",
            c.p99_ms, c.base_ms
        ));
    }
    let usable = c.base_ms * (1.0 - m);
    let period = usable / f64::from(k);
    let window = usable - period - c.p50_ms;
    if window <= c.hop_ms {
        return Some(format!(
            "D4: {usable:.0} − {period:.0} − {:.1} = {window:.1} ms ≤ hop {:.0} ms",
            c.p50_ms, c.hop_ms
        ));
    }
    if c.stall_censored() {
        return Some(format!(
            "stall: censored: {} of {} heartbeats timed out ({} sessions lost), so more than \
             0.1 % of them waited longer than the time left before their deadline",
            c.censored, c.samples, c.lost
        ));
    }
    if let Some(s) = c.stall_ms
        && s + period >= usable
    {
        return Some(format!(
            "stall: {s:.0} + period {period:.0} ≥ usable {usable:.0} ms"
        ));
    }
    None
}

/// The smallest margin satisfying trigger 1 for a condition: 3 × p99 / base.
pub fn margin_needed(c: &Condition) -> f64 {
    3.0 * c.p99_ms / c.base_ms.max(1e-9)
}

/// The largest margin D4 allows at divisor `k`: U(1 − 1/k) − p50 > hop
/// ⇔ m < 1 − (hop + p50) / (base (1 − 1/k)).
pub fn margin_ceiling(c: &Condition, k: u32) -> f64 {
    1.0 - (c.hop_ms + c.p50_ms) / (c.base_ms * (1.0 - 1.0 / f64::from(k))).max(1e-9)
}

/// What would change the decision for one binding condition at `(m, k)`:
/// each rule's limit, the value it is held against now, and their ratio
/// (limit ÷ now for the RTT and the stall; for D4, the window ÷ the hop).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Slack {
    /// The condition.
    pub condition: String,
    /// `trigger 1`, `D4` or `stall`.
    pub rule: &'static str,
    /// The sentence: what would have to happen for the rule to fail.
    pub text: String,
    /// Limit ÷ now (> 1: room left; the smallest binds first).
    pub ratio: f64,
}

/// The slack of every binding condition's rules at `(m, k)`, tightest first.
pub fn slack(conditions: &[Condition], m: f64, k: u32) -> Vec<Slack> {
    let mut out = Vec::new();
    for c in conditions.iter().filter(|c| c.binding) {
        let usable = c.base_ms * (1.0 - m);
        let period = usable / f64::from(k);
        if c.rtt_rule {
            let budget = c.base_ms * m / 3.0;
            out.push(Slack {
                condition: c.name.clone(),
                rule: "trigger 1",
                text: format!(
                    "the corrected p99 rises above {budget:.0} ms (now ≤ {:.3} ms)",
                    c.p99_ms
                ),
                ratio: budget / c.p99_ms.max(1e-9),
            });
        }
        let room = usable - period;
        out.push(Slack {
            condition: c.name.clone(),
            rule: "D4",
            text: format!(
                "worst-case hop + p50 reaches {room:.0} ms (now {:.0} + {:.3} ms)",
                c.hop_ms, c.p50_ms
            ),
            ratio: room / (c.hop_ms + c.p50_ms).max(1e-9),
        });
        if c.stall_censored() {
            out.push(Slack {
                condition: c.name.clone(),
                rule: "stall",
                text: format!(
                    "at most 0.1 % of the heartbeats timed out, so that the stall's p99.9 is \
                     measured (now {} of {}, and {} sessions lost: the stall outlasts the time \
                     left before the deadline; its p99.9 ≥ {:.0} ms is censored)",
                    c.censored,
                    c.samples,
                    c.lost,
                    c.stall_ms.unwrap_or(0.0)
                ),
                ratio: 0.001 * c.samples as f64 / c.censored.max(1) as f64,
            });
        } else if let Some(st) = c.stall_ms {
            out.push(Slack {
                condition: c.name.clone(),
                rule: "stall",
                text: format!("a stall lasts {room:.0} ms or more (now ≤ {st:.3} ms at the p99.9)"),
                ratio: room / st.max(1e-9),
            });
        }
    }
    out.sort_by(|a, b| a.ratio.total_cmp(&b.ratio));
    out
}

/// The derivation's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Revision {
    /// The proposed margin, if any pair is feasible.
    pub margin: Option<f64>,
    /// The proposed heartbeat divisor.
    pub divisor: Option<u32>,
    /// Whether some binding condition had fewer corrected samples than its
    /// floor ([`Condition::sample_floor`]).
    pub provisional: bool,
    /// For each divisor, the feasible grid margins (binding conditions).
    pub feasible: Vec<(u32, Vec<f64>)>,
    /// Why ADR-006's (0.30, 3) fails, per binding condition that it fails.
    pub adr_failures: Vec<(String, String)>,
    /// The reasoning, sentence by sentence, with the numbers.
    pub reasoning: Vec<String>,
}

impl Condition {
    /// The corrected samples this condition needs behind it: 100 beyond the
    /// p99's rank ([`MIN_SAMPLES_BINDING`]), or 1,000 beyond the p99.9's
    /// when it has a stall ([`MIN_SAMPLES_STALL`]).
    pub fn sample_floor(&self) -> u64 {
        if self.stall_ms.is_some() {
            MIN_SAMPLES_STALL
        } else {
            MIN_SAMPLES_BINDING
        }
    }

    /// Whether its stall's p99.9 is a censored value: more than 0.1 % of its
    /// samples are timeouts (the largest values a heartbeat can record), so
    /// the p99.9's rank falls among them and the stall is only known to be
    /// at least that long.
    pub fn stall_censored(&self) -> bool {
        self.stall_ms.is_some() && self.censored as f64 > 0.001 * self.samples as f64
    }

    /// Whether its samples fall short of [`Condition::sample_floor`].
    pub fn short_of_samples(&self) -> bool {
        self.samples < self.sample_floor()
    }
}

/// Derives the proposal from `conditions` (see the module doc for the rule).
pub fn derive(conditions: &[Condition]) -> Revision {
    let binding: Vec<&Condition> = conditions.iter().filter(|c| c.binding).collect();
    let grid = margin_grid();
    let ok = |m: f64, k: u32| binding.iter().all(|c| violation(c, m, k).is_none());
    let feasible: Vec<(u32, Vec<f64>)> = DIVISORS
        .map(|k| (k, grid.iter().copied().filter(|&m| ok(m, k)).collect()))
        .collect();
    let adr_failures: Vec<(String, String)> = binding
        .iter()
        .filter_map(|c| violation(c, ADR_MARGIN, ADR_DIVISOR).map(|v| (c.name.clone(), v)))
        .collect();
    let provisional = binding.iter().any(|c| c.short_of_samples());
    let mut reasoning = Vec::new();
    if binding.is_empty() {
        reasoning.push(
            "no binding condition was measured in this pack (no sweep results): no revision \
             can be derived"
                .to_string(),
        );
        return Revision {
            margin: None,
            divisor: None,
            provisional: true,
            feasible,
            adr_failures,
            reasoning,
        };
    }
    for c in &binding {
        let ceil3 = margin_ceiling(c, ADR_DIVISOR);
        reasoning.push(format!(
            "{}: trigger 1 needs m ≥ 3 × {:.1} / {:.0} = {:.3}; D4 at divisor 3 allows m < 1 − \
             ({:.0} + {:.1}) / ({:.0} × 2/3) = {:.3}{}{}",
            c.name,
            c.p99_ms,
            c.base_ms,
            margin_needed(c),
            c.hop_ms,
            c.p50_ms,
            c.base_ms,
            ceil3,
            match c.stall_ms {
                Some(s) if c.stall_censored() => format!(
                    "; stall ≥ {s:.0} ms is censored ({} of {} heartbeats timed out, {} \
                     sessions lost): no margin and period are shown to ride it out",
                    c.censored, c.samples, c.lost
                ),
                Some(s) => format!("; stall {s:.0} ms must fit before the deadline"),
                None => String::new(),
            },
            if c.short_of_samples() {
                format!(
                    " (provisional: {} corrected samples of the {} needed)",
                    c.samples,
                    c.sample_floor()
                )
            } else {
                String::new()
            },
        ));
    }
    let close = |m: f64| (m - ADR_MARGIN).abs();
    let pick = if ok(ADR_MARGIN, ADR_DIVISOR) {
        reasoning.push(format!(
            "ADR-006's margin {ADR_MARGIN:.2} with divisor {ADR_DIVISOR} satisfies every binding \
             condition: keep both"
        ));
        Some((ADR_MARGIN, ADR_DIVISOR))
    } else if let Some(k) = DIVISORS.clone().find(|&k| ok(ADR_MARGIN, k)) {
        reasoning.push(format!(
            "ADR-006's (0.30, 3) fails {}; margin 0.30 holds with divisor {k} (heartbeat period \
             U/{k} instead of U/3: {:.0} % more heartbeats), so keep the margin and change the \
             divisor",
            adr_failures
                .iter()
                .map(|(n, v)| format!("{n} ({v})"))
                .collect::<Vec<_>>()
                .join("; "),
            (f64::from(k) / 3.0 - 1.0) * 100.0
        ));
        Some((ADR_MARGIN, k))
    } else {
        let best = feasible
            .iter()
            .flat_map(|(k, ms)| ms.iter().map(move |&m| (m, *k)))
            .min_by(|a, b| {
                close(a.0)
                    .total_cmp(&close(b.0))
                    .then(b.0.total_cmp(&a.0))
                    .then(a.1.cmp(&b.1))
            });
        match best {
            Some((m, k)) => reasoning.push(format!(
                "no divisor in {}–{} makes margin 0.30 satisfy every binding condition; the \
                 feasible margin closest to 0.30 is {m:.2} (with divisor {k})",
                DIVISORS.start(),
                DIVISORS.end()
            )),
            None => {
                let blocking: Vec<&&Condition> = binding
                    .iter()
                    .filter(|c| {
                        DIVISORS
                            .clone()
                            .all(|k| grid.iter().all(|&m| violation(c, m, k).is_some()))
                    })
                    .collect();
                let names = |censored: bool| {
                    blocking
                        .iter()
                        .filter(|c| c.stall_censored() == censored)
                        .map(|c| c.name.clone())
                        .collect::<Vec<_>>()
                };
                let (stalls, others) = (names(true), names(false));
                let mut why = Vec::new();
                if !stalls.is_empty() {
                    why.push(format!(
                        "{} alone admits none: its stall is censored, the lock service did not \
                         answer more than 0.1 % of its heartbeats before their deadlines, so no \
                         margin or period is shown to ride it out — the server's answer after the \
                         fault under that load has to improve, or the condition be measured under \
                         the load production really has",
                        stalls.join(", ")
                    ));
                }
                if !others.is_empty() || stalls.is_empty() {
                    why.push(format!(
                        "{}the TTL is too short for its rail hop and its RTT tail together \
                         (ADR-006 §6.5: a TTL cut can make D4 unsatisfiable) — raise the TTL or \
                         shorten the hop",
                        if others.is_empty() {
                            String::new()
                        } else {
                            format!("{} alone admits none: ", others.join(", "))
                        }
                    ));
                }
                reasoning.push(format!(
                    "no (margin, divisor) in the grid satisfies every binding condition: {}",
                    why.join("; ")
                ));
            }
        }
        best
    };
    if provisional {
        reasoning.push(format!(
            "provisional: at least one binding condition has fewer corrected samples than \
                 its floor ({MIN_SAMPLES_BINDING} behind a p99, {MIN_SAMPLES_STALL} behind the \
                 p99.9 of a stall)"
        ));
    }
    Revision {
        margin: pick.map(|p| p.0),
        divisor: pick.map(|p| p.1),
        provisional,
        feasible,
        adr_failures,
        reasoning,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(base: f64, hop: f64, p50: f64, p99: f64, stall: Option<f64>) -> Condition {
        Condition {
            name: format!("base {base}"),
            source: String::new(),
            base_ms: base,
            hop_ms: hop,
            p50_ms: p50,
            p99_ms: p99,
            p99_point_ms: (p99, p99),
            stall_ms: stall,
            samples: 20_000,
            censored: 0,
            lost: 0,
            cells: 1,
            binding: true,
            rtt_rule: stall.is_none(),
        }
    }

    /// The floors decide "provisional", and they are met only by samples:
    /// 10,000 behind a p99, 10⁶ (1,000 beyond the rank) behind a stall's p99.9.
    #[test]
    fn a_condition_short_of_its_sample_floor_makes_the_revision_provisional() {
        let prod = |n: u64| Condition {
            samples: n,
            ..cond(15_000.0, 3_000.0, 2.0, 40.0, None)
        };
        let stall = |n: u64| Condition {
            samples: n,
            ..cond(15_000.0, 3_000.0, 2.0, 40.0, Some(300.0))
        };
        assert!(derive(&[prod(9_999)]).provisional);
        assert!(!derive(&[prod(10_000)]).provisional);
        assert!(derive(&[prod(10_000), stall(999_999)]).provisional);
        assert!(!derive(&[prod(10_000), stall(1_000_000)]).provisional);
        let r = derive(&[prod(10_000), stall(20_000)]);
        assert!(
            r.reasoning
                .iter()
                .any(|l| l.contains("20000 corrected samples of the 1000000")),
            "{:?}",
            r.reasoning
        );
    }

    #[test]
    fn keeps_the_adr_when_it_holds() {
        // 30 s lease, 15 s session, 7 s hop: U(0.30) = 10.5 s, window 7 s − p50 ≤ 7 s: D4 fails at k = 3.
        let prod = cond(15_000.0, 7_000.0, 2.0, 40.0, None);
        let r = derive(&[prod]);
        assert_eq!(r.margin, Some(0.30));
        assert_eq!(r.divisor, Some(4), "{:?}", r.reasoning);
        assert_eq!(r.adr_failures.len(), 1);
        // A roomy condition keeps both.
        let roomy = cond(15_000.0, 3_000.0, 2.0, 40.0, None);
        let r = derive(&[roomy]);
        assert_eq!((r.margin, r.divisor), (Some(0.30), Some(3)));
        assert!(r.adr_failures.is_empty());
    }

    #[test]
    fn a_fat_tail_moves_the_margin_and_an_impossible_one_says_so() {
        // p99 250 ms on a 1 s base needs m ≥ 0.75: beyond the grid.
        let tail = cond(1_000.0, 233.0, 2.0, 250.0, None);
        let r = derive(&[tail]);
        assert_eq!(r.margin, None);
        assert!(
            r.reasoning.last().unwrap().contains("raise the TTL"),
            "{:?}",
            r.reasoning
        );
        // p99 110 ms needs 0.33: 0.35 is the closest feasible margin.
        let mid = cond(1_000.0, 233.0, 2.0, 110.0, None);
        let r = derive(&[mid]);
        assert_eq!(r.margin, Some(0.35), "{:?}", r.reasoning);
    }

    #[test]
    fn a_stall_longer_than_the_usable_window_fails_the_condition() {
        let c = cond(1_000.0, 100.0, 2.0, 10.0, Some(700.0));
        assert!(violation(&c, 0.30, 3).unwrap().starts_with("stall"));
        assert!(violation(&c, 0.10, 8).is_none());
        let free = Condition {
            binding: false,
            ..c.clone()
        };
        assert_eq!(derive(&[free]).margin, None, "non-binding conditions only");
    }

    /// A stall whose p99.9 falls among timeouts is censored: it fails every
    /// pair, however short its recorded value (the timeout) looks, and the
    /// slack says nothing would change that. At 0.1 % of the samples it
    /// is not censored yet.
    #[test]
    fn a_censored_stall_fails_every_pair() {
        let c = |censored: u64| Condition {
            censored,
            lost: 7,
            ..cond(1_000.0, 100.0, 2.0, 10.0, Some(300.0))
        };
        assert!(
            violation(&c(20), 0.10, 8).is_none(),
            "20 of 20,000 is 0.1 %"
        );
        let v = violation(&c(21), 0.10, 8).expect("censored");
        assert!(
            v.contains("21 of 20000 heartbeats timed out (7 sessions lost)"),
            "{v}"
        );
        let r = derive(&[c(21)]);
        assert_eq!((r.margin, r.divisor), (None, None), "{:?}", r.reasoning);
        let s = slack(&[c(40)], 0.30, 8);
        assert_eq!((s[0].rule, s[0].ratio), ("stall", 0.5), "20 allowed of 40");
    }
}
