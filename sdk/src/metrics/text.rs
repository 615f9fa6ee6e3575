//! The Prometheus text exposition of the SDK's metrics (C5 names, dots as
//! underscores): the three heartbeat histograms as summaries, the outcome,
//! tick, session-loss and abandon counters, and the margins applied.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use hdrhistogram::Histogram;

use super::cells::Recorder;
use super::collector::Metrics;
use super::stats::DeadlineKind;
use crate::lease::PPM;

impl Metrics {
    /// The Prometheus text exposition of the C5 SDK metrics.
    pub fn prometheus_text(&self) -> String {
        render(self)
    }
}

/// Renders every SDK metric.
fn render(m: &Metrics) -> String {
    let s = m.stats();
    let mut out = String::with_capacity(4096);
    summary(
        &mut out,
        "lock_heartbeat_rtt_seconds",
        "Round trip of every heartbeat (L2) and renew (L5), send to reply; a timed-out exchange counts at its timeout (>=).",
        &m.rtt,
    );
    summary(
        &mut out,
        "lock_heartbeat_rtt_corrected_seconds",
        "Heartbeat round trip measured from the scheduled send (coordinated-omission corrected), one sample per scheduled tick.",
        &m.corrected,
    );
    summary(
        &mut out,
        "lock_heartbeat_tick_lag_seconds",
        "Lateness of each heartbeat tick: scheduled to actual send.",
        &m.tick_lag,
    );
    counter_family(
        &mut out,
        "lock_heartbeat_outcomes_total",
        "Heartbeat exchanges (L2 and L5) by outcome.",
        "outcome",
        &[
            ("reply", s.hb_replies),
            ("timeout", s.hb_timeouts),
            ("error", s.hb_errors),
        ],
    );
    counter(
        &mut out,
        "lock_heartbeat_ticks_total",
        "Scheduled heartbeat ticks that came due.",
        s.hb_ticks,
    );
    counter(
        &mut out,
        "lock_heartbeat_ticks_missed_total",
        "Scheduled heartbeat ticks that sent no L2 of their own (served late, muted, or after the session was lost).",
        s.hb_ticks_missed,
    );
    counter_family(
        &mut out,
        "lock_session_lost_total",
        "Sessions declared LOST, by reason.",
        "reason",
        &[
            ("expired", s.sessions_lost_expired),
            ("unknown", s.sessions_lost_unknown),
            ("deadline", s.sessions_lost_deadline),
        ],
    );
    counter(
        &mut out,
        "lock_lease_abandoned_total",
        "Steps refused by ensure_time_for (insufficient lease).",
        s.leases_abandoned,
    );
    margins(&mut out, m);
    out
}

/// A histogram (µs) as a summary in seconds.
fn summary(out: &mut String, name: &str, help: &str, r: &Recorder) {
    let h: Histogram<u64> = r.snapshot();
    let sum_us = r.sum_us.load(Ordering::Relaxed);
    // Infallible: writing to a String.
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} summary");
    for q in [0.5, 0.9, 0.99, 0.999] {
        let v = if h.is_empty() {
            0
        } else {
            h.value_at_quantile(q)
        };
        let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {}", v as f64 * 1e-6);
    }
    let _ = writeln!(out, "{name}_sum {}", sum_us as f64 * 1e-6);
    let _ = writeln!(out, "{name}_count {}", h.len());
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    let _ = writeln!(out, "{name} {value}");
}

fn counter_family(out: &mut String, name: &str, help: &str, label: &str, values: &[(&str, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    for (v, n) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{v}\"}} {n}");
    }
}

/// `lock_margin_effective`: the margins applied, per exchange, as a
/// quantile-less summary (`_sum` of the margin fractions, `_count`).
fn margins(out: &mut String, m: &Metrics) {
    let stats = m.margin_stats();
    let name = "lock_margin_effective";
    let _ = writeln!(
        out,
        "# HELP {name} Safety margin applied at each client-deadline computation, by exchange."
    );
    let _ = writeln!(out, "# TYPE {name} summary");
    for kind in DeadlineKind::ALL {
        let s = stats.get(kind);
        let l = kind.label();
        let _ = writeln!(
            out,
            "{name}_sum{{exchange=\"{l}\"}} {}",
            s.sum_ppm as f64 / PPM as f64
        );
        let _ = writeln!(out, "{name}_count{{exchange=\"{l}\"}} {}", s.count);
    }
}
