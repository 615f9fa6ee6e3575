//! The per-TTL margin recommendation that `bench sweep` prints at its end and
//! `report.md` opens with ([`crate::verdict`] puts it in plain words). It
//! follows the data in three steps, per TTL (and per backend when a run has
//! cells on several: fencepost, etcd, redis, redlock), over the fixed-margin points of
//! [`crate::summary`] (each over its `--repeat`s):
//!
//! 1. **Margin needed (trigger 1).** ADR-006's trigger 1 is `p99 RTT >
//!    min(lease, session TTL) × margin / 3`; solved for the margin, `m_min =
//!    3 × p99(corrected RTT) / min(lease, session TTL)` from the TTL's pooled
//!    histogram, with its cluster-bootstrap 95 % interval ([`crate::pool`]).
//!    A margin below the interval's upper end is excluded. With fewer than
//!    10,000 pooled samples the recommendation is *provisional*.
//! 2. **Safety checks on every repeat.** Excluded: a failed ledger check,
//!    trigger 4 (a believed fence-out), trigger 3 (the D4 sawtooth: the
//!    window just before a heartbeat ≤ the worst-case rail hop), trigger 1,
//!    no heartbeat samples, no payouts.
//! 3. **Throughput, only where intervals separate.** Among what is left the
//!    highest median throughput is best; every margin whose 95 % interval
//!    overlaps the best's is tied with it, and the tie goes to the larger
//!    margin (ADR-006: "We would rather pay throughput than debug a
//!    duplicate payment"). A tie of more than one margin is reported as
//!    "not resolved at N repeats, take the larger margin"; with one repeat
//!    there are no intervals and nothing is ever resolved.
//!
//! Trigger 2 is evaluated on the sweep itself: `1 − T(m) / T(best)`, the
//! throughput the chosen margin costs against the best margin tried (any
//! margin with a passing ledger): fired at ≥ [`SWEEP_COST_MIN`] when the two
//! intervals separate, `insufficient_data` when they overlap, ok otherwise.
//! Adaptive points are compared with the best qualifying fixed margin of the
//! same TTL, with intervals, and the line says whether the difference is
//! resolved. Everything here is a pure function of the summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pool::{MissingHistogram, SampleSource};
use crate::results::CellRow;
use crate::stats::{Interval, separate};
use crate::summary::{Floor, MIN_SAMPLES_P999, Summary, SummaryRow, build};
use crate::triggers::Verdict;

/// Trigger 2 on the sweep: the throughput cost `1 − T(m)/T(best)` at or above
/// which the margin is the dominant limiter (the per-cell rule's 5 %).
pub const SWEEP_COST_MIN: f64 = crate::triggers::LOST_WORK_MIN;

/// The recommended margin for one TTL, or why there is none.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The TTL (lease) the recommendation is for, in ms.
    pub lease_ms: u64,
    /// The backend of its cells (`fencepost` or `etcd`).
    #[serde(default = "fencepost")]
    pub backend: String,
    /// The recommended margin, `None` when no margin qualifies.
    pub margin: Option<f64>,
    /// The (policy, TTL, margin) group the recommendation comes from.
    pub cell: Option<String>,
    /// Its median throughput over repeats, payouts/s.
    pub throughput_per_s: Option<f64>,
    /// Fixed margins of this TTL that qualified.
    pub qualifying: usize,
    /// Fixed margins of this TTL in the table.
    pub cells: usize,
    /// Repeats per margin (the fewest of any margin of the TTL).
    pub n_repeats: u32,
    /// Whether the chosen margin's throughput interval separates from every
    /// other qualifying margin's (false: "not resolved at N repeats").
    #[serde(default)]
    pub resolved: bool,
    /// The margin needed (trigger 1), `3 × p99 / min(lease, session TTL)`, and
    /// its 95 % interval; a margin below the upper end does not qualify.
    #[serde(default)]
    pub m_min: Option<(f64, f64, f64)>,
    /// Trigger 2 on the sweep (`1 − T(m)/T(best)`).
    #[serde(default = "not_evaluated")]
    pub trigger2_sweep: Verdict,
    /// Adaptive vs the best fixed margin, one line per adaptive policy.
    #[serde(default)]
    pub adaptive: Vec<String>,
    /// Why this margin, or why none: the numbers behind the choice.
    pub reason: String,
    /// The margin needed rests on fewer than 10,000 pooled samples.
    #[serde(default)]
    pub provisional: bool,
    /// Why the other fixed margins were excluded: each rule that failed,
    /// with the margins it excluded (the verdict's advice follows from it).
    #[serde(default)]
    pub excluded: Vec<(String, Vec<f64>)>,
}

fn not_evaluated() -> Verdict {
    Verdict::NotEvaluated
}

/// The default backend of a recommendation read from before backends were recorded.
fn fencepost() -> String {
    "fencepost".into()
}

/// Why a fixed point does not qualify, `None` if it does.
fn disqualification(r: &SummaryRow, floor: Option<&Floor>) -> Option<&'static str> {
    if !r.ledger_ok {
        Some("ledger check failed")
    } else if r.trigger4_fired > 0 {
        Some("fenced out although the client believed it held the lease (trigger 4)")
    } else if r.trigger3_fired > 0 {
        Some("D4 sawtooth: the window just before a heartbeat ≤ worst-case rail hop (trigger 3)")
    } else if r.hb_corrected_count == 0 {
        Some("no heartbeat samples, trigger 1 unchecked")
    } else if floor.is_some_and(|f| r.margin < f.m_min_hi) {
        Some("below the margin needed (trigger 1): 3 × p99 RTT (95 % upper end) / base")
    } else if r.trigger1_fired > 0 {
        Some("corrected p99 heartbeat RTT > min(lease, session TTL) × margin / 3 (trigger 1)")
    } else if r.payouts_paid == 0 {
        Some("no payouts paid")
    } else {
        None
    }
}

/// The advice for a TTL where no margin qualifies, from what disqualified them.
/// Under time scaling a longer TTL scales the rail hop with it, so the advice
/// for a D4 sawtooth is never "raise the TTL": only the margin and the
/// heartbeat period move the window before a heartbeat against the hop.
pub fn advice(reasons: &BTreeMap<&'static str, usize>) -> &'static str {
    let has = |needle: &str| reasons.keys().any(|k| k.contains(needle));
    let rtt = has("trigger 1");
    if has("ledger") || has("trigger 4") {
        "fix the client or the ledger failure before choosing a margin"
    } else if has("trigger 3") && !rtt {
        "try a smaller margin or a larger heartbeat divisor (a shorter heartbeat period); under \
         time scaling a larger TTL scales the rail hop too and does not help"
    } else if rtt && !has("trigger 3") {
        "on a scaled lease the loopback network is harsher than production: read the production \
         projection (projection.csv); at this lease, a larger margin"
    } else if rtt {
        "small margins miss trigger 1's RTT budget and large ones leave no window for a rail \
         hop: a larger heartbeat divisor widens the window; read the production projection for \
         the RTT side"
    } else {
        "rerun with more load or a longer duration"
    }
}
/// `[lo, hi]` of an interval, or `(no interval: 1 repeat)`.
fn fmt_interval(i: &Interval) -> String {
    if i.known() {
        format!("[{:.2}, {:.2}]", i.lo, i.hi)
    } else {
        format!("(no interval: {} repeat)", i.n)
    }
}

/// The recommended margin per TTL of a results table, its percentiles
/// pooled from the cells' histograms in `src` ([`crate::pool`]; see
/// [`recommendations_from`]), sorted by TTL, then backend. `Err`
/// names the first histogram file that is missing.
pub fn recommendations(
    rows: &[CellRow],
    src: &dyn SampleSource,
) -> Result<Vec<Recommendation>, MissingHistogram> {
    Ok(recommendations_from(&build(rows, src)?))
}

/// A backend's place in report order (fencepost, etcd, redis, redlock);
/// a name none of them has sorts after them.
fn backend_rank(backend: &str) -> usize {
    let all = bench_core::backend::BackendKind::ALL;
    all.iter()
        .position(|b| b.as_str() == backend)
        .unwrap_or(all.len())
}

/// The recommended margin per TTL (module doc), sorted by TTL, then by
/// backend in report order (fencepost, etcd, redis, redlock).
pub fn recommendations_from(summary: &Summary) -> Vec<Recommendation> {
    let mut by_ttl: BTreeMap<(u64, usize, &str), Vec<&SummaryRow>> = BTreeMap::new();
    for r in &summary.rows {
        by_ttl
            .entry((r.lease_ms, backend_rank(&r.backend), r.backend.as_str()))
            .or_default()
            .push(r);
    }
    by_ttl
        .into_iter()
        .map(|((lease_ms, _, _), rows)| {
            let backend = rows[0].backend.clone();
            let floor = summary
                .floors
                .iter()
                .find(|f| f.lease_ms == lease_ms && f.backend == backend);
            recommend(lease_ms, &backend, &rows, floor)
        })
        .collect()
}

/// `TTL 1s`, or `TTL 1s on etcd`.
fn ttl_label(r: &Recommendation) -> String {
    match r.backend.as_str() {
        "fencepost" => format!("TTL {}", human_ms(r.lease_ms)),
        other => format!("TTL {} on {other}", human_ms(r.lease_ms)),
    }
}

/// The fixed-margin points of one TTL sorted into those that qualify and
/// those excluded, with each exclusion's reason.
struct Screened<'a> {
    qualifying: Vec<&'a SummaryRow>,
    /// Exclusion reason → how many points it excluded.
    reasons: BTreeMap<&'static str, usize>,
    /// Exclusion reason → the margins it excluded.
    excluded: Vec<(String, Vec<f64>)>,
}

impl<'a> Screened<'a> {
    fn of(fixed: &[&'a SummaryRow], floor: Option<&Floor>) -> Self {
        let mut qualifying = Vec::new();
        let mut reasons: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut excluded: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
        for &r in fixed {
            match disqualification(r, floor) {
                None => qualifying.push(r),
                Some(why) => {
                    *reasons.entry(why).or_default() += 1;
                    excluded.entry(why).or_default().push(r.margin);
                }
            }
        }
        let excluded = excluded
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        Self {
            qualifying,
            reasons,
            excluded,
        }
    }

    /// `n × reason` per exclusion reason.
    fn counted(&self) -> Vec<String> {
        self.reasons
            .iter()
            .map(|(k, n)| format!("{n} × {k}"))
            .collect()
    }
}

/// The recommendation's first sentence: trigger 1's margin floor.
fn floor_sentence(f: &Floor) -> String {
    format!(
        "margin needed (trigger 1) = 3 × p99 {:.3} ms / {} ms = {:.3} (95 % [{:.3}, {:.3}]; \
         the upper end is the floor; {} pooled samples of {} cell(s); {}){}",
        f.p99.value_us as f64 / 1e3,
        f.lease_ms.min(f.session_ttl_ms),
        f.m_min,
        f.m_min_lo,
        f.m_min_hi,
        f.p99.n,
        f.cells,
        f.quantile_ci_method,
        if f.enough {
            String::new()
        } else {
            format!(
                "; provisional: fewer than {MIN_SAMPLES_P999} samples (rerun with more \
                 --repeat, --sessions or --duration)"
            )
        }
    )
}

/// Among the qualifying points, the one with the highest throughput; when
/// its interval does not separate from others', the largest margin of the
/// tied ones. Returns the chosen point, whether the choice is resolved, and
/// the sentence that explains it.
fn choose<'a>(
    qualifying: &[&'a SummaryRow],
    best: &'a SummaryRow,
    n_repeats: u32,
) -> (&'a SummaryRow, bool, String) {
    let best_tp = best.throughput();
    let tied: Vec<&SummaryRow> = qualifying
        .iter()
        .copied()
        .filter(|r| std::ptr::eq(*r, best) || !separate(&r.throughput(), &best_tp))
        .collect();
    let chosen = tied
        .iter()
        .copied()
        .max_by(|a, b| a.margin.total_cmp(&b.margin))
        .expect("the best point is tied with itself");
    let resolved = tied.len() == 1;
    let tp = chosen.throughput();
    let sentence = if resolved {
        format!(
            "; highest throughput {:.2}/s {} of {} qualifying margin(s), its interval separates \
             from every other",
            tp.median,
            fmt_interval(&tp),
            qualifying.len()
        )
    } else {
        let others: Vec<String> = tied.iter().map(|r| format!("{:.2}", r.margin)).collect();
        format!(
            "; not resolved at {n_repeats} repeat(s): margins {} have overlapping 95 % throughput \
             intervals (best {:.2}/s {} at {:.2}), take the larger margin; {:.2}/s {} at {:.2}",
            others.join(", "),
            best_tp.median,
            fmt_interval(&best_tp),
            best.margin,
            tp.median,
            fmt_interval(&tp),
            chosen.margin,
        )
    };
    (chosen, resolved, sentence)
}

/// The recommendation for the points of one TTL on one backend.
fn recommend(
    lease_ms: u64,
    backend: &str,
    rows: &[&SummaryRow],
    floor: Option<&Floor>,
) -> Recommendation {
    let fixed: Vec<&SummaryRow> = rows.iter().copied().filter(|r| r.is_fixed()).collect();
    let n_repeats = rows.iter().map(|r| r.n_repeats).min().unwrap_or(0);
    let screened = Screened::of(&fixed, floor);
    let mut reason = floor.map(floor_sentence).unwrap_or_default();
    let best_any = fixed
        .iter()
        .filter(|r| r.ledger_ok && r.payouts_paid > 0)
        .max_by(|a, b| a.throughput_median.total_cmp(&b.throughput_median))
        .copied();
    let adaptive = adaptive_lines(rows, &screened.qualifying, best_any);
    let m_min = floor.map(|f| (f.m_min, f.m_min_lo, f.m_min_hi));
    let Some(best) = screened
        .qualifying
        .iter()
        .max_by(|a, b| a.throughput_median.total_cmp(&b.throughput_median))
        .copied()
    else {
        let _ = write!(
            reason,
            "; no margin qualifies ({}); {}",
            screened.counted().join("; "),
            advice(&screened.reasons)
        );
        return Recommendation {
            lease_ms,
            backend: backend.to_owned(),
            margin: None,
            cell: None,
            throughput_per_s: None,
            qualifying: 0,
            cells: fixed.len(),
            n_repeats,
            resolved: false,
            m_min,
            trigger2_sweep: Verdict::NotEvaluated,
            adaptive,
            reason: reason.trim_start_matches("; ").to_owned(),
            provisional: false,
            excluded: screened.excluded,
        };
    };
    let (chosen, resolved, sentence) = choose(&screened.qualifying, best, n_repeats);
    reason.push_str(&sentence);
    reason.push_str(
        "; window before a heartbeat > hop and no believed fence-outs on every repeat; ledger ok",
    );
    if !screened.reasons.is_empty() {
        let _ = write!(reason, "; excluded: {}", screened.counted().join(", "));
    }
    let trigger2 = trigger2_on_sweep(chosen, best_any, &mut reason);
    Recommendation {
        lease_ms,
        backend: backend.to_owned(),
        margin: Some(chosen.margin),
        cell: Some(chosen.group.clone()),
        throughput_per_s: Some(chosen.throughput_median),
        qualifying: screened.qualifying.len(),
        cells: fixed.len(),
        n_repeats,
        resolved,
        m_min,
        trigger2_sweep: trigger2,
        adaptive,
        reason: reason.trim_start_matches("; ").to_owned(),
        provisional: floor.is_some_and(|f| !f.enough),
        excluded: screened.excluded,
    }
}

/// Trigger 2 from the sweep: `1 − T(chosen) / T(best)` (module doc); appends the numbers to `reason`.
fn trigger2_on_sweep(
    chosen: &SummaryRow,
    best: Option<&SummaryRow>,
    reason: &mut String,
) -> Verdict {
    let Some(best) = best else {
        return Verdict::NotEvaluated;
    };
    if best.throughput_median <= 0.0 {
        return Verdict::InsufficientData;
    }
    let cost = 1.0 - chosen.throughput_median / best.throughput_median;
    let verdict = if std::ptr::eq(chosen, best) || cost <= 0.0 {
        Verdict::Ok
    } else if !separate(&chosen.throughput(), &best.throughput()) {
        Verdict::InsufficientData
    } else if cost >= SWEEP_COST_MIN {
        Verdict::Fired
    } else {
        Verdict::Ok
    };
    let _ = write!(
        reason,
        "; trigger 2 on the sweep: 1 − T({:.2}) / T({:.2}) = {:.1} % (threshold {:.0} %): {}",
        chosen.margin,
        best.margin,
        cost.max(0.0) * 100.0,
        SWEEP_COST_MIN * 100.0,
        verdict.as_str()
    );
    match verdict {
        Verdict::Fired => reason.push_str(
            " — the margin is the dominant throughput limiter (ADR: consider the adaptive margin \
             (V2), not a smaller fixed one)",
        ),
        Verdict::InsufficientData => reason.push_str(" (intervals overlap: not resolved)"),
        _ => {}
    }
    verdict
}

/// One line per adaptive point: its throughput against the best qualifying
/// fixed margin (or, with none, the best fixed margin tried), with intervals.
fn adaptive_lines(
    rows: &[&SummaryRow],
    qualifying: &[&SummaryRow],
    best_any: Option<&SummaryRow>,
) -> Vec<String> {
    let best_fixed = qualifying
        .iter()
        .copied()
        .max_by(|a, b| a.throughput_median.total_cmp(&b.throughput_median))
        .or(best_any);
    rows.iter()
        .filter(|r| !r.is_fixed())
        .map(|a| {
            let at = a.throughput();
            let Some(f) = best_fixed else {
                return format!(
                    "{}: {:.2}/s {} (mean margin used {:.3}); no fixed margin to compare with",
                    a.margin_policy,
                    at.median,
                    fmt_interval(&at),
                    a.margin_effective_mean
                );
            };
            let ft = f.throughput();
            let diff = if ft.median > 0.0 {
                (at.median / ft.median - 1.0) * 100.0
            } else {
                f64::NAN
            };
            let verdict = if separate(&at, &ft) {
                format!(
                    "resolved: adaptive is {}",
                    if at.median > ft.median {
                        "higher"
                    } else {
                        "lower"
                    }
                )
            } else {
                format!("not resolved at {} repeat(s)", a.n_repeats.min(f.n_repeats))
            };
            format!(
                "{} {:.2}/s {} (mean margin used {:.3}) vs fixed {:.2} {:.2}/s {}: {:+.1} %, {}",
                a.margin_policy,
                at.median,
                fmt_interval(&at),
                a.margin_effective_mean,
                f.margin,
                ft.median,
                fmt_interval(&ft),
                diff,
                verdict
            )
        })
        .collect()
}

impl std::fmt::Display for Recommendation {
    /// One line: `TTL 1s: recommended margin 0.30 (…): why`, then one line per adaptive comparison.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.margin, &self.cell) {
            (Some(m), Some(cell)) => write!(
                f,
                "{}: recommended margin {m:.2}{}{} ({cell}, {}/{} margins qualify, {} repeat(s)): {}",
                ttl_label(self),
                if self.resolved {
                    ""
                } else {
                    " (not resolved, the larger margin)"
                },
                if self.provisional {
                    " (provisional)"
                } else {
                    ""
                },
                self.qualifying,
                self.cells,
                self.n_repeats,
                self.reason
            )?,
            _ => write!(
                f,
                "{}: no recommended margin (0/{} margins qualify): {}",
                ttl_label(self),
                self.cells,
                self.reason
            )?,
        }
        for line in &self.adaptive {
            write!(f, "\n    {}: {line}", ttl_label(self))?;
        }
        Ok(())
    }
}

/// `1500` → `1s 500ms`.
pub fn human_ms(ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

/// The recommendations as plain text, one [`Recommendation`] line per TTL.
pub fn format_recommendations(recs: &[Recommendation]) -> String {
    let mut out = String::from("Recommended client safety margin per TTL:\n");
    for r in recs {
        let _ = writeln!(out, "  {r}");
    }
    out
}

/// The recommendations as a Markdown table, then the adaptive comparisons.
pub fn markdown_recommendations(recs: &[Recommendation]) -> String {
    let mut out = String::from(
        "| TTL | recommended margin | resolved | point | median throughput (payouts/s) | margin needed (trigger 1) [95 %] | qualifying | trigger 2 (sweep) | why |\n\
         |---|---:|---|---|---:|---|---:|---|---|\n",
    );
    for r in recs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {}/{} | {} | {} |",
            ttl_label(r).trim_start_matches("TTL "),
            r.margin.map_or_else(
                || "**none**".to_owned(),
                |m| if r.provisional {
                    format!("**{m:.2}** (provisional)")
                } else {
                    format!("**{m:.2}**")
                }
            ),
            match (r.margin, r.resolved) {
                (None, _) => "—".to_owned(),
                (Some(_), true) => "yes".to_owned(),
                (Some(_), false) => format!("no, at {} repeat(s)", r.n_repeats),
            },
            r.cell
                .as_deref()
                .map_or_else(|| "—".to_owned(), |c| format!("`{c}`")),
            r.throughput_per_s
                .map_or_else(|| "—".to_owned(), |t| format!("{t:.2}")),
            r.m_min.map_or_else(
                || "—".to_owned(),
                |(m, lo, hi)| format!("{m:.3} [{lo:.3}, {hi:.3}]")
            ),
            r.qualifying,
            r.cells,
            r.trigger2_sweep.as_str(),
            r.reason.replace('|', "\\|"),
        );
    }
    let adaptive: Vec<String> = recs
        .iter()
        .flat_map(|r| {
            r.adaptive
                .iter()
                .map(move |l| format!("- {}: {}", ttl_label(r), l.replace('|', "\\|")))
        })
        .collect();
    if !adaptive.is_empty() {
        out.push_str(
            "\nAdaptive vs the best qualifying fixed margin (95 % intervals over repeats):\n\n",
        );
        for l in adaptive {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

#[cfg(test)]
mod tests;
