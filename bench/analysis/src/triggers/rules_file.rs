//! `bench rules`'s output: the six checks of [`super::live_checks`] as a
//! Prometheus rules file (YAML): one group, the recording rules
//! (`fencepost:<check>:<term>`, for dashboards and the alerts) first, then
//! the alerting rules. In one group the rules run in order at the same
//! evaluation time, so each alert reads the series recorded for that
//! evaluation, exactly as its self-contained live query would compute them.
//!
//! Per check: `Fencepost<Check>` (the fired condition; severity `page` or
//! `ticket`, [`fired_severity`]),
//! `Fencepost<Check>InsufficientData` (severity `info`: the check cannot say
//! ok; never pages), and for trigger 1 `FencepostRttP99VsMarginMisconfigured`,
//! for trigger 5 `FencepostAutopilotThrottlingNotEvaluated` (severity `info`).
//! Every alert carries `trigger` = the check id and the annotations `summary`,
//! `description` (with `$value`), `action` (the ADR's, verbatim) and `rule`.
//! The alerts' `expr` are the checks' conditions over the recorded names;
//! `bench triggers --prometheus` queries the same conditions with each name
//! expanded into its rule ([`super::recorded`]).
//!
//! The text is deterministic: the header names the `bench rules` command line
//! that regenerates it (without `--out`), so a committed file can be checked
//! by regenerating and comparing.

use std::fmt::Write as _;
use std::time::Duration;

use super::catalog::{CLOCK_OFFSET_BOUND, FENCED_OUT_WITH_CLIENT_CHECK, RTT_P99_VS_MARGIN};
use super::live::{Check, Params, num, prom_duration};
use super::live_checks::checks;

/// The production `for:` of every alert: a condition must hold through ten
/// minutes of evaluations (of a one-hour window) before it pages.
pub const DEFAULT_FOR: Duration = Duration::from_secs(600);

/// Alert label `severity` of a fired check that breaks a safety assumption now.
pub const SEVERITY_PAGE: &str = "page";
/// Alert label `severity` of a fired check that says a design decision is due
/// for revisit while nothing is unsafe (throughput, liveness, a margin that
/// may be reducible).
pub const SEVERITY_TICKET: &str = "ticket";

/// The severity of check `id` when it fires. `page` where a safety
/// assumption is broken now: the margin no longer covers the measured jitter
/// (trigger 1), a fence refused a client that believed it held the lease, so
/// the code violates ADR-006 (trigger 4), or the host cannot vouch for the
/// clock bound the grace assumes (the clock check). `ticket` where the
/// decision is due for revisit but nothing is unsafe: the margin limits
/// throughput (trigger 2), D4 refuses in part of every heartbeat period, a
/// liveness cost (trigger 3), or the margin may be reducible (trigger 5).
pub fn fired_severity(id: &str) -> &'static str {
    match id {
        RTT_P99_VS_MARGIN | FENCED_OUT_WITH_CLIENT_CHECK | CLOCK_OFFSET_BOUND => SEVERITY_PAGE,
        _ => SEVERITY_TICKET,
    }
}
/// Alert label `severity` of the non-paging states.
pub const SEVERITY_INFO: &str = "info";

/// One alerting rule, before rendering.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// `alert:`.
    pub name: String,
    /// `expr:`.
    pub expr: String,
    /// `labels: severity`.
    pub severity: &'static str,
    /// `labels: trigger`.
    pub trigger: &'static str,
    /// `annotations: summary`.
    pub summary: String,
    /// `annotations: description`.
    pub description: String,
    /// `annotations: action`.
    pub action: &'static str,
    /// `annotations: rule`.
    pub rule: String,
}

/// `{{ $value }}` with four significant digits.
const VALUE: &str = "{{ printf \"%.4g\" $value }}";

/// The alerts of one check: fired, insufficient data, and its not-evaluated state if any.
pub fn alerts(c: &Check, p: &Params) -> Vec<Alert> {
    let w = p.range();
    let threshold = num(c.threshold / c.scale);
    let mut out = vec![
        Alert {
            name: c.alert.to_owned(),
            expr: c.fired_rule.clone(),
            severity: fired_severity(c.id()),
            trigger: c.id(),
            summary: format!("{} fired: {}", c.id(), c.trigger.adr_trigger),
            description: format!(
                "{}: {VALUE} (threshold {threshold}) over the last {w} ({}). Take the action.",
                c.value_words, c.source
            ),
            action: c.action(),
            rule: c.rule.clone(),
        },
        Alert {
            name: format!("{}InsufficientData", c.alert),
            expr: c.insufficient_rule.clone(),
            severity: SEVERITY_INFO,
            trigger: c.id(),
            summary: format!("{}: insufficient data", c.id()),
            description: format!(
                "{} cannot say ok over the last {w}: too little data (value {VALUE}: the {}, or \
                 1 when no series is scraped). Not paging: nothing is known to be wrong, and \
                 nothing is known to be right.",
                c.id(),
                c.evidence_unit
            ),
            action: c.action(),
            rule: c.rule.clone(),
        },
    ];
    if let Some(n) = &c.not_evaluated {
        out.push(Alert {
            name: format!("{}{}", c.alert, n.suffix),
            expr: n.rule.clone(),
            severity: SEVERITY_INFO,
            trigger: c.id(),
            summary: format!(
                "{}: {}",
                c.id(),
                n.suffix.to_lowercase().replace("not", "not ")
            ),
            description: format!("{} (value {VALUE}). Not paging.", n.reason),
            action: c.action(),
            rule: c.rule.clone(),
        });
    }
    out
}

/// A shell word: as is when safe, else single-quoted.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/=".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The `bench rules` command line that writes this file (without `--out`).
pub fn command_line(p: &Params, for_: Duration) -> String {
    let mut cmd = format!(
        "bench rules --lease {} --session-ttl {} --margin {} --hop {} --offset-max {} \
         --window {} --for {}",
        prom_duration(p.lease),
        prom_duration(p.session_ttl),
        num(p.margin),
        prom_duration(p.hop),
        prom_duration(p.offset_max),
        p.range(),
        prom_duration(for_),
    );
    if !p.selector.trim().is_empty() {
        let _ = write!(cmd, " --selector {}", shell_word(p.selector.trim()));
    }
    cmd
}

/// A YAML double-quoted scalar (a JSON string is one).
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// `key: |-` and the text indented below it (PromQL has no line that needs escaping).
fn block(out: &mut String, indent: usize, key: &str, text: &str) {
    let pad = " ".repeat(indent);
    let _ = writeln!(out, "{pad}{key}: |-");
    for line in text.lines() {
        let _ = writeln!(out, "{pad}  {line}");
    }
}

/// The rules file for `p` with alerts' `for:` = `for_`.
pub fn render(p: &Params, for_: Duration) -> String {
    let checks = checks(p);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# fencepost's production checks: ADR-006 §6.5's five revisit triggers and the\n\
         # lease-safety essay's clock check, as Prometheus recording and alerting rules.\n\
         # Generated; do not edit. Regenerate (docs/alerts.md) with:\n\
         #   {}\n\
         # severity page: a check fired that breaks a safety assumption now, take its\n\
         # `action`; ticket: a check fired that says the decision is due for revisit\n\
         # (nothing unsafe); info: insufficient data, misconfigured or not evaluated.",
        command_line(p, for_)
    );
    out.push_str("groups:\n  - name: fencepost-checks\n    rules:\n");
    for c in &checks {
        for t in c.terms() {
            let _ = writeln!(out, "      - record: fencepost:{}:{}", c.id(), t.name);
            block(&mut out, 8, "expr", &t.expr);
        }
    }
    for c in &checks {
        for a in alerts(c, p) {
            let _ = writeln!(out, "      - alert: {}", a.name);
            block(&mut out, 8, "expr", &a.expr);
            let _ = writeln!(out, "        for: {}", prom_duration(for_));
            let _ = writeln!(
                out,
                "        labels:\n          severity: {}\n          trigger: {}",
                a.severity, a.trigger
            );
            out.push_str("        annotations:\n");
            for (k, v) in [
                ("summary", a.summary.as_str()),
                ("description", a.description.as_str()),
                ("action", a.action),
                ("rule", a.rule.as_str()),
            ] {
                let _ = writeln!(out, "          {k}: {}", quoted(v));
            }
        }
    }
    out
}

/// The names of every recording rule and alert of `p`'s file, in file order.
pub fn rule_names(p: &Params) -> Vec<String> {
    let checks = checks(p);
    let mut names: Vec<String> = checks
        .iter()
        .flat_map(|c| {
            c.terms()
                .into_iter()
                .map(move |t| format!("fencepost:{}:{}", c.id(), t.name))
        })
        .collect();
    names.extend(
        checks
            .iter()
            .flat_map(|c| alerts(c, p).into_iter().map(|a| a.name)),
    );
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_a_paging_and_an_info_alert_and_trigger1_a_misconfigured_one() {
        let p = Params::default();
        let names = rule_names(&p);
        for n in [
            "FencepostRttP99VsMargin",
            "FencepostRttP99VsMarginInsufficientData",
            "FencepostRttP99VsMarginMisconfigured",
            "FencepostAutopilotThrottlingNotEvaluated",
            "FencepostClockOffsetBound",
            "FencepostClockOffsetBoundInsufficientData",
            "fencepost:rtt_p99_vs_margin:observed",
            "fencepost:rtt_p99_vs_margin:over_budget",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        let text = render(&p, DEFAULT_FOR);
        assert!(text.contains("for: 10m"));
        assert!(text.contains("#   bench rules --lease 30s --session-ttl 15s --margin 0.3"));
        assert_eq!(text.matches("severity: page").count(), 3);
        assert_eq!(text.matches("severity: ticket").count(), 3);
    }

    #[test]
    fn the_selector_is_quoted_for_the_shell() {
        let p = Params {
            selector: "namespace=\"pay\"".to_owned(),
            ..Params::default()
        };
        assert!(command_line(&p, DEFAULT_FOR).ends_with("--selector 'namespace=\"pay\"'"));
    }
}
