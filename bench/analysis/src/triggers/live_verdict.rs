//! `bench triggers --prometheus`'s verdicts from Prometheus's answers: which
//! queries a [`Check`] needs ([`queries`]) and how their answers become a
//! [`TriggerResult`] ([`live_result`]). Pure: the HTTP client is the bench's.
//!
//! A condition holds when its query returned a non-empty vector, exactly as
//! an alerting rule with the same `expr` is active. The verdict is `fired`
//! when the fired query holds, else `not_evaluated` when the check's
//! not-evaluated query holds (trigger 1 misconfigured, trigger 5 without
//! cAdvisor), else `insufficient_data` when its insufficient query holds, else
//! `ok`.

use super::catalog::{TriggerResult, Verdict};
use super::live::Check;
use super::output::fmt_value;

/// Which part of a check a query answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The observed value.
    Observed,
    /// The evidence count.
    Evidence,
    /// The fired condition.
    Fired,
    /// The insufficient-data condition.
    Insufficient,
    /// The not-evaluated condition.
    NotEvaluated,
}

/// The values of the vectors Prometheus returned for one check's queries
/// (one value per series; empty when the vector was empty).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    /// The observed query's values.
    pub observed: Vec<f64>,
    /// The evidence query's values.
    pub evidence: Vec<f64>,
    /// The fired query's values.
    pub fired: Vec<f64>,
    /// The insufficient-data query's values.
    pub insufficient: Vec<f64>,
    /// The not-evaluated query's values.
    pub not_evaluated: Vec<f64>,
}

impl Answer {
    /// Stores `values` as the answer to `part`.
    pub fn set(&mut self, part: Part, values: Vec<f64>) {
        *match part {
            Part::Observed => &mut self.observed,
            Part::Evidence => &mut self.evidence,
            Part::Fired => &mut self.fired,
            Part::Insufficient => &mut self.insufficient,
            Part::NotEvaluated => &mut self.not_evaluated,
        } = values;
    }
}

/// The instant queries a check needs, each with the part it answers.
pub fn queries(check: &Check) -> Vec<(Part, String)> {
    let mut q = vec![
        (Part::Observed, check.observed.clone()),
        (Part::Evidence, check.evidence.clone()),
        (Part::Fired, check.fired.clone()),
        (Part::Insufficient, check.insufficient.clone()),
    ];
    if let Some(n) = &check.not_evaluated {
        q.push((Part::NotEvaluated, n.expr.clone()));
    }
    q
}

/// The first finite value of a vector.
fn first(v: &[f64]) -> Option<f64> {
    v.iter().copied().find(|x| x.is_finite())
}

/// The verdict of `check` on `answer`, as a row of the triggers table for `cell`.
pub fn live_result(check: &Check, cell: &str, answer: &Answer) -> TriggerResult {
    let ne = check
        .not_evaluated
        .as_ref()
        .filter(|_| !answer.not_evaluated.is_empty());
    let verdict = if !answer.fired.is_empty() {
        Verdict::Fired
    } else if ne.is_some() {
        Verdict::NotEvaluated
    } else if !answer.insufficient.is_empty() {
        Verdict::InsufficientData
    } else {
        Verdict::Ok
    };
    let observed = first(&answer.observed).map(|v| v * check.scale);
    let evidence = first(&answer.evidence);
    let mut detail = format!(
        "observed {}; {} {}; threshold {} {}",
        observed.map_or("no value".to_owned(), |v| format!(
            "{} {}",
            fmt_value(v),
            check.unit
        )),
        evidence.map_or("no".to_owned(), fmt_value),
        check.evidence_unit,
        fmt_value(check.threshold),
        check.unit,
    );
    match (verdict, ne) {
        (Verdict::NotEvaluated, Some(n)) => {
            detail = format!("{}; {detail}", n.reason);
        }
        (Verdict::InsufficientData, _) => {
            detail.push_str("; too little data to say ok (see the rule)");
        }
        (_, Some(n)) if !answer.not_evaluated.is_empty() => {
            detail = format!("{detail}; also {}", n.reason);
        }
        _ => {}
    }
    TriggerResult {
        trigger: check.id().to_owned(),
        cell: cell.to_owned(),
        fired: verdict == Verdict::Fired,
        verdict,
        observed: observed.unwrap_or(0.0),
        threshold: check.threshold,
        action: check.action().to_owned(),
        unit: check.unit.to_owned(),
        rule: check.rule.clone(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::triggers::live::Params;
    use crate::triggers::live_checks::checks;

    fn answer(fired: bool, insufficient: bool, not_evaluated: bool) -> Answer {
        let on = |b: bool| if b { vec![1.0] } else { Vec::new() };
        Answer {
            observed: vec![2.0],
            evidence: vec![1200.0],
            fired: on(fired),
            insufficient: on(insufficient),
            not_evaluated: on(not_evaluated),
        }
    }

    #[test]
    fn verdicts_follow_the_queries_that_returned_something() {
        let c = checks(&Params::default());
        let t1 = &c[0];
        let r = live_result(t1, "prometheus:1h", &answer(true, false, false));
        assert_eq!((r.verdict, r.fired), (Verdict::Fired, true));
        assert_eq!(r.observed, 2000.0, "seconds to ms");
        assert_eq!(r.threshold, 1500.0);
        assert_eq!(r.action, t1.action());
        let r = live_result(t1, "c", &answer(false, false, false));
        assert_eq!(r.verdict, Verdict::Ok);
        let r = live_result(t1, "c", &answer(false, true, false));
        assert_eq!(r.verdict, Verdict::InsufficientData);
        let r = live_result(t1, "c", &answer(false, false, true));
        assert_eq!(r.verdict, Verdict::NotEvaluated);
        assert!(r.detail.starts_with("misconfigured"), "{}", r.detail);
        // Fired on the SDKs that carry the budget, misconfigured on others: fired, and said.
        let r = live_result(t1, "c", &answer(true, false, true));
        assert_eq!(r.verdict, Verdict::Fired);
        assert!(r.detail.contains("also misconfigured"), "{}", r.detail);
    }

    #[test]
    fn trigger5_without_cadvisor_is_not_evaluated_and_nan_is_no_value() {
        let c = checks(&Params::default());
        let t5 = &c[4];
        let a = Answer {
            observed: vec![f64::NAN],
            not_evaluated: vec![1.0],
            ..Answer::default()
        };
        let r = live_result(t5, "c", &a);
        assert_eq!(r.verdict, Verdict::NotEvaluated);
        assert_eq!(r.observed, 0.0);
        assert!(r.detail.contains("cAdvisor"), "{}", r.detail);
        // A check without a not-evaluated state ignores that answer.
        let r = live_result(&c[3], "c", &a);
        assert_eq!(r.verdict, Verdict::Ok);
        assert_eq!(queries(&c[3]).len(), 4);
        assert_eq!(queries(t5).len(), 5);
    }
}
