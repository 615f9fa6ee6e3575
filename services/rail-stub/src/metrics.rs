//! `GET /metrics`: the Prometheus text exposition, rendered by hand from the
//! state's atomics (C5 names, dots as underscores, `_total` on counters).
//!
//! The three must-watch series are `lock_fenced_out_total{fence="1"|"2"}` and
//! `rail_duplicate_attempted_total` (healthy value exactly 0) and
//! `payout_backlog_age_seconds` (healthy: bounded).

use std::fmt::Write;

use crate::state::AppState;

/// The `content-type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders every metric the rail-stub exports.
pub fn render(state: &AppState) -> String {
    let c = state.counters();
    let age = state.backlog_age().as_secs_f64();
    let mut out = String::with_capacity(2048);
    // Writes one metric family: HELP, TYPE, then one line per labelled sample.
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(&str, String)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    metric(
        "lock_fenced_out_total",
        "counter",
        "Requests refused for a stale token: fence 1 = claim/release (R2/R4), fence 2 = submit (R3). Healthy value: 0.",
        &[
            ("{fence=\"1\"}", c.fenced_out_fence1.to_string()),
            ("{fence=\"2\"}", c.fenced_out_fence2.to_string()),
        ],
    );
    metric(
        "rail_duplicate_attempted_total",
        "counter",
        "Submissions (R3) for a payout already PAID; nothing was paid. Healthy value: 0.",
        &[("", c.duplicate_attempted.to_string())],
    );
    metric(
        "payout_backlog_age_seconds",
        "gauge",
        "Age of the oldest PENDING or CLAIMED payout; 0 when there is none.",
        &[("", format!("{age:.6}"))],
    );
    metric(
        "rail_payouts_paid_total",
        "counter",
        "Payouts paid.",
        &[("", c.paid.to_string())],
    );
    metric(
        "rail_submit_not_claimed_total",
        "counter",
        "Submissions refused because the token did not hold the claim (NOT_CLAIMED).",
        &[("", c.not_claimed.to_string())],
    );
    metric(
        "rail_already_paid_total",
        "counter",
        "Claims or releases refused because the payout was already PAID.",
        &[("", c.already_paid.to_string())],
    );
    metric(
        "rail_payouts",
        "gauge",
        "Payouts in the ledger, in any state.",
        &[("", state.payout_count().to_string())],
    );
    metric(
        "rail_submissions_in_flight",
        "gauge",
        "Submissions waiting out their simulated rail latency.",
        &[("", state.submissions_in_flight().to_string())],
    );
    out
}
