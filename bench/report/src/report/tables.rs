//! The long tables of `report.md`, after its verdict: heartbeat outcomes and
//! RTTs per cell, fences, rail latency and CPU, the summary over repeats and
//! the production projection. Pure functions of the rows they print.

use std::fmt::Write as _;

use bench_analysis::projection::ProjectionRow;
use bench_analysis::results::CellRow;
use bench_analysis::summary::Summary;

/// A number of ms for the tables; `—` when not measured (NaN).
fn ms_or_dash(v: f64) -> String {
    if v.is_nan() {
        "—".to_owned()
    } else {
        format!("{v:.3}")
    }
}

/// A number of CPU seconds for the tables; `—` when not measured (NaN).
fn cpu_or_dash(v: f64) -> String {
    if v.is_nan() {
        "—".to_owned()
    } else {
        format!("{v:.2}")
    }
}

/// The measurement tables: every heartbeat exchange's outcome and the two RTT
/// views; the fences by kind and their trace; the rail's latency configured
/// vs measured; the CPU seconds of every process.
pub(super) fn measurement_tables(rows: &[CellRow]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n### Heartbeats: every exchange and tick\n\n\
         Outcomes of every L2/L5 exchange (attempts = replies + timeouts + errors), scheduled \
         ticks and those that sent no L2 of their own, sessions lost by reason, and the RTT \
         raw vs corrected for coordinated omission (≥: censored samples included).\n"
    );
    let _ = writeln!(
        md,
        "| cell | attempts | replies | timeouts | errors | ticks | ticks missed | sessions lost (expired/unknown/deadline) | raw p99 ≥ (ms) | raw max ≥ (ms) | corrected n | corrected p50 / p99 / p99.9 ≥ (ms) | corrected p99 95 % (ms) | tick lag p99 / max (ms) |\n\
         |---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|---|"
    );
    let ms = |us: u64| us as f64 / 1000.0;
    for r in rows {
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} ({}/{}/{}) | {:.3} | {:.3} | {} | {:.3} / {:.3} / {:.3} | [{:.3}, {:.3}] | {:.3} / {:.3} |",
            r.cell,
            r.hb_attempts,
            r.hb_replies,
            r.hb_timeouts,
            r.hb_errors,
            r.hb_ticks,
            r.hb_ticks_missed,
            r.session_lost,
            r.session_lost_expired,
            r.session_lost_unknown,
            r.session_lost_deadline,
            ms(r.hb_rtt_p99_us),
            ms(r.hb_rtt_max_us),
            r.hb_corrected_count,
            ms(r.hb_rtt_corrected_p50_us),
            ms(r.hb_rtt_corrected_p99_us),
            ms(r.hb_rtt_corrected_p999_us),
            ms(r.hb_rtt_corrected_p99_lo_us),
            ms(r.hb_rtt_corrected_p99_hi_us),
            ms(r.hb_tick_lag_p99_us),
            ms(r.hb_tick_lag_max_us),
        );
    }
    let _ = writeln!(
        md,
        "\n### Fences, rail latency, CPU\n\n\
         Fence-outs by fence and how many hit a `(payout, token)` a worker submitted under \
         after its client check passed (trigger 4's trace); the rail's latency as configured \
         and as the workers measured it (R3 send → reply, timeouts censored); CPU seconds \
         (utime + stime from /proc) of every process over the window — bench, lock-server and \
         rail-stub share the machine's cores, and the RTT includes the bench's own scheduling \
         (— : not a local process).\n"
    );
    let _ = writeln!(
        md,
        "| cell | fence 1 (untraced) | fence 2 (untraced) | believed held | submits after a passed check | rail configured p50 / p99 (ms) | rail measured p50 / p99 ≥ (ms) | rail submits | cpu bench / lock-server / rail-stub / worker procs (s) | window (s) |\n\
         |---|---:|---:|---:|---:|---|---|---:|---|---:|"
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| `{}` | {} ({}) | {} ({}) | {} | {} | {:.3} / {:.3} | {} / {} | {} | {} / {} / {} / {} | {:.2} |",
            r.cell,
            r.fenced_out_fence1,
            r.fenced_out_fence1_untraced,
            r.fenced_out_fence2,
            r.fenced_out_fence2_untraced,
            r.fenced_out_believed_held,
            r.believed_held_submits,
            r.rail_p50_ms,
            r.rail_p99_ms,
            ms_or_dash(r.rail_measured_p50_ms),
            ms_or_dash(r.rail_measured_p99_ms),
            r.rail_measured_count,
            cpu_or_dash(r.cpu_bench_s),
            cpu_or_dash(r.cpu_lock_server_s),
            cpu_or_dash(r.cpu_rail_stub_s),
            cpu_or_dash(r.cpu_workers_s),
            r.duration_s,
        );
    }
    md
}

/// The summary over repeats as a Markdown table.
pub(super) fn summary_table(summary: &Summary) -> String {
    let mut md = String::from(
        "| point | policy | n | median throughput (payouts/s) | 95 % interval | min–max | \
         abandonment median [95 %] | margin used (mean) | pooled corrected p50 / p99 / p99.9 ≥ (ms) | \
         m_min = 3 × p99.9 / base [95 %] | triggers 1 / 3 / 4 fired (repeats) |\n\
         |---|---|---:|---:|---|---|---|---:|---|---|---|\n",
    );
    let pct = |x: f64| {
        if x.is_nan() {
            "—".to_owned()
        } else {
            format!("{:.1} %", x * 100.0)
        }
    };
    let iv = |lo: f64, hi: f64, f: &dyn Fn(f64) -> String| {
        if lo.is_nan() {
            "— (1 repeat)".to_owned()
        } else {
            format!("[{}, {}]", f(lo), f(hi))
        }
    };
    for r in &summary.rows {
        let _ = writeln!(
            md,
            "| `{}` | `{}` | {} | {:.2} | {} | {:.2}–{:.2} | {} {} | {:.3} | {:.3} / {:.3} / {:.3} | {:.3} [{:.3}, {:.3}]{} | {} / {} / {} |",
            r.group,
            r.margin_policy,
            r.n_repeats,
            r.throughput_median,
            iv(r.throughput_ci95_lo, r.throughput_ci95_hi, &|x| format!(
                "{x:.2}"
            )),
            r.throughput_min,
            r.throughput_max,
            pct(r.abandonment_median),
            iv(r.abandonment_ci95_lo, r.abandonment_ci95_hi, &pct),
            r.margin_effective_mean,
            r.hb_rtt_corrected_p50_us as f64 / 1e3,
            r.hb_rtt_corrected_p99_us as f64 / 1e3,
            r.hb_rtt_corrected_p999_us as f64 / 1e3,
            r.m_min,
            r.m_min_ci95_lo,
            r.m_min_ci95_hi,
            if r.m_min_verdict == "ok" {
                ""
            } else {
                " (insufficient_data)"
            },
            r.trigger1_fired,
            r.trigger3_fired,
            r.trigger4_fired,
        );
    }
    md
}

/// The projection as a Markdown section.
pub(super) fn projection_section(rows: &[ProjectionRow]) -> String {
    let mut md = String::from("\n## Projection onto the production configuration\n\n");
    let Some(first) = rows.first() else {
        md.push_str("No corrected RTT histograms (`hgrm/*.corrected.hdr`): nothing to project.\n");
        return md;
    };
    let _ = writeln!(
        md,
        "The measured corrected heartbeat RTT, **unscaled** (the time base never scales the \
         network), pooled over {} cell(s) ({} samples: p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} \
         ms), held against lease {} ms, session TTL {} ms and a worst-case rail hop of {} ms \
         (read timeout {} ms + 2 s). The RTT was measured under the scaled cells' load \
         (heartbeats 30× more frequent at a 1 s lease), which this does not undo. \
         `projection.csv` has every column.\n",
        first.cells_pooled,
        first.rtt_samples,
        first.rtt_corrected_p50_us as f64 / 1e3,
        first.rtt_corrected_p99_us as f64 / 1e3,
        first.rtt_corrected_p999_us as f64 / 1e3,
        first.lease_ms,
        first.session_ttl_ms,
        first.worst_case_hop_ms,
        first.rail_read_timeout_ms,
    );
    md.push_str(
        "| backend | margin | trigger 1 budget (ms) | trigger 1 | trigger 3 window (ms) | trigger 3 | min_margin [95 %] | headroom (ms) [pessimistic] |\n\
         |---|---:|---:|---|---:|---|---|---:|\n",
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} | {:.1} | {} | {:.4} [{:.4}, {:.4}]{} | {:.1} [{:.1}] |",
            r.backend,
            if r.production_margin {
                format!("**{:.2}**", r.margin)
            } else {
                format!("{:.2}", r.margin)
            },
            r.trigger1_budget_ms,
            r.trigger1_verdict,
            r.trigger3_window_ms,
            r.trigger3_verdict,
            r.min_margin,
            r.min_margin_ci95_lo,
            r.min_margin_ci95_hi,
            if r.min_margin_verdict == "ok" {
                ""
            } else {
                " (insufficient_data)"
            },
            r.headroom_ms,
            r.headroom_ci95_lo_ms,
        );
    }
    for r in rows.iter().filter(|r| r.production_margin) {
        let _ = writeln!(
            md,
            "\n**Headroom of {:.2} on {}:** its trigger-1 budget is {:.1} ms; the pooled p99.9 \
         uses {:.3} ms of it, leaving {:.1} ms ({:.1} ms at the interval's pessimistic end); \
         the smallest margin covering the p99.9 is {:.4}.",
            r.margin,
            r.backend,
            r.trigger1_budget_ms,
            r.rtt_corrected_p999_us as f64 / 1e3,
            r.headroom_ms,
            r.headroom_ci95_lo_ms,
            r.min_margin,
        );
    }
    md
}
