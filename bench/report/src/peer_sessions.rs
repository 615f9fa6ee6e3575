//! `bench peer --sessions`' report: the section of `report.md`, the printed
//! summary and the cost-against-sessions plot (log x axis), pure over the
//! rows of `peer_sessions.csv`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use bench_analysis::peer::{PeerPlan, Spread};
use bench_analysis::peer_sessions::{
    DRIVER_SATURATED_CORES, MIN_P99_SAMPLES, MISSED_TOLERANCE, SCALE_AT, SCALE_BASE, SCALE_TARGET,
    SessionRow, SessionSummary, scale_ratios, summaries,
};
use bench_analysis::peer_sessions_fit::extrapolate;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plots::{self, DrawError, FONT, Plot, PlotError, color};

/// "median (min–max)" with `d` decimals, or `–`.
fn mmm(s: Option<&Spread>, d: usize) -> String {
    s.map_or_else(
        || "–".into(),
        |s| format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max),
    )
}

/// A p99 cell: its spread, or "insufficient data" below the samples a p99 needs.
fn p99_cell(s: &SessionSummary, p: Option<&Spread>) -> String {
    if s.enough_samples() {
        mmm(p, 2)
    } else {
        format!("insufficient data ({} samples)", s.min_samples)
    }
}

/// The report (`report.md` of a `--sessions` run).
pub fn render(plan: &PeerPlan, rows: &[SessionRow]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# bench peer --sessions: live sessions against etcd leases\n"
    );
    if let Some(sp) = &plan.sessions {
        let _ = writeln!(
            t,
            "Seed {} · {} repeat(s) · counts {:?} · session TTL {:.1} s, margin {:.2}: a heartbeat \
             every {:.2} s · {} connections · windows of at least {:.1} s and {} scheduled \
             heartbeats, after at least two periods of warm-up · build {}.\n",
            plan.seed,
            plan.repeats,
            sp.counts,
            sp.ttl_s,
            sp.margin,
            sp.period_s,
            sp.connections,
            plan.duration_s,
            sp.min_heartbeats,
            if cfg!(debug_assertions) {
                "debug (the driver is slower than a release build)"
            } else {
                "release"
            }
        );
    }
    section(&mut t, rows);
    t
}

/// The section: the table, the verdict, the extrapolation, every row.
pub fn section(t: &mut String, rows: &[SessionRow]) {
    per_count_table(t, rows);
    scale_target_section(t, rows);
    extrapolation_section(t, rows);
    every_measurement(t, rows);
}

/// How the sessions are driven, then per (N, system) the summary over repeats.
fn per_count_table(t: &mut String, rows: &[SessionRow]) {
    let _ = writeln!(
        t,
        "Each fencepost session (L1, then L2 at the period) and each etcd lease (LeaseGrant, \
         then LeaseKeepAlive at the period) is on its own phase, open loop: the send time is \
         fixed by the schedule. The sessions are dealt over a bounded set of connections (a \
         real fleet has one per client; 10⁵ sockets from one driver would measure the driver), \
         each one exchange at a time; etcd's leases of one connection share one keep-alive \
         stream. Every tick of the window is answered, an error, a timeout (one period) or \
         missed (the driver was a period behind that session, and served it with a later \
         tick). p99 is the corrected one, from each tick's scheduled send (docs/measurement.md); \
         raw is send → reply. A p99 of fewer than {MIN_P99_SAMPLES} samples is insufficient \
         data. CPU is the server's (plus its PostgreSQL backends), CPU-seconds per second per \
         1,000 sessions; RSS is the server's resident set grown from before the opens to the \
         window's end, per 1,000 sessions. Every measurement runs on freshly started servers. \
         Median (min–max) over repeats.\n"
    );
    let _ = writeln!(
        t,
        "| sessions | system | p99 ms | raw p99 ms | achieved ÷ scheduled | CPU per 1,000 sessions | RSS MiB per 1,000 sessions | driver cores | failed ticks | bound by |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let all = summaries(rows);
    let mut ordered: Vec<&SessionSummary> = all.iter().collect();
    ordered.sort_by(|a, b| (a.sessions, &a.label).cmp(&(b.sessions, &b.label)));
    for s in &ordered {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.sessions,
            s.label,
            p99_cell(s, s.p99_ms.as_ref()),
            p99_cell(s, s.p99_raw_ms.as_ref()),
            mmm(s.achieved.as_ref(), 3),
            mmm(s.cpu_per_1k.as_ref(), 4),
            mmm(s.rss_per_1k_mib.as_ref(), 2),
            mmm(s.driver_cores.as_ref(), 2),
            s.failures,
            if s.bound_by.is_empty() {
                "–"
            } else {
                &s.bound_by
            },
        );
    }
    let _ = writeln!(
        t,
        "\n`bound by`: `schedule_missed` when more than {:.0} % of the window's ticks were \
         missed or timed out, `driver_cpu` when that happened while this driver used {DRIVER_SATURATED_CORES} \
         cores or more (it then measured itself), `errors`, `open_failed`, `fd_limit`.\n",
        MISSED_TOLERANCE * 100.0
    );
}

/// The scale target: p99 at SCALE_AT ÷ p99 at SCALE_BASE, per system.
fn scale_target_section(t: &mut String, rows: &[SessionRow]) {
    let _ = writeln!(
        t,
        "## The scale target: p99 at {SCALE_AT} sessions ÷ p99 at {SCALE_BASE}\n\n\
         The performance targets ask of fencepost that the heartbeat p99 at {SCALE_AT} live sessions be at \
         most {SCALE_TARGET}× its p99 at {SCALE_BASE}; etcd's figure is beside it. Each ratio \
         is taken within a repeat; the verdict is given only where the 95 % interval (t on the \
         mean of the per-repeat ratios) decides it, and never on a p99 of too few samples.\n"
    );
    let _ = writeln!(
        t,
        "| system | median | min–max | 95 % CI | target | verdict |\n|---|---:|---:|---:|---:|---|"
    );
    for r in scale_ratios(rows, SCALE_BASE, SCALE_AT, SCALE_TARGET) {
        let (med, range, ci) = r.spread.as_ref().map_or_else(
            || ("–".into(), "–".into(), "–".into()),
            |s| {
                (
                    format!("{:.2}×", s.median),
                    format!("{:.2}–{:.2}", s.min, s.max),
                    s.ci95
                        .map_or_else(|| "-".into(), |(lo, hi)| format!("{lo:.2}–{hi:.2}")),
                )
            },
        );
        let target = if r.fencepost {
            format!("≤ {SCALE_TARGET}×")
        } else {
            "–".into()
        };
        let _ = writeln!(
            t,
            "| {} | {med} | {range} | {ci} | {target} | {} |",
            r.label, r.verdict
        );
    }
}

/// CPU and RSS on paper at the counts no repeat reached.
fn extrapolation_section(t: &mut String, rows: &[SessionRow]) {
    let counts: Vec<usize> = {
        let mut c: Vec<usize> = rows.iter().map(|r| r.sessions).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let ex = extrapolate(rows, &counts);
    let _ = writeln!(
        t,
        "\n## Extrapolation to the counts this box did not reach\n\n\
         On paper, not measured: the server's CPU (cores) and resident set grown (MiB) on the \
         least-squares line through every reached row of that system (all repeats). A line \
         assumes cost linear in sessions; it says what the measured slope implies, not what \
         the server would do.\n"
    );
    if ex.is_empty() {
        let _ = writeln!(
            t,
            "Every count was reached on schedule: nothing to extrapolate.\n"
        );
    } else {
        let _ = writeln!(
            t,
            "| system | sessions | server CPU, cores (extrapolated) | CPU slope per 1,000 sessions | RSS MiB (extrapolated) | RSS slope MiB per 1,000 | fitted through |\n|---|---:|---:|---:|---:|---:|---|"
        );
        for e in &ex {
            let f = |v: Option<f64>, d: usize| v.map_or_else(|| "–".into(), |v| format!("{v:.d$}"));
            let through = e.cpu_line.or(e.rss_line).map_or_else(
                || "too few reached counts".into(),
                |l| format!("{} rows up to {} sessions", l.points, l.max_n),
            );
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} | {} | {} | {through} |",
                e.label,
                e.sessions,
                f(e.cpu_cores, 3),
                f(e.cpu_line.map(|l| l.slope * 1e3), 4),
                f(e.rss_mib, 1),
                f(e.rss_line.map(|l| l.slope * 1e3), 2),
            );
        }
        t.push('\n');
    }
}

/// The plot, then every row of `peer_sessions.csv`.
fn every_measurement(t: &mut String, rows: &[SessionRow]) {
    let _ = writeln!(
        t,
        "![cost against sessions](peer_sessions.png)\n\n## Every measurement (`peer_sessions.csv`)\n"
    );
    let _ = writeln!(
        t,
        "| repeat | order | sessions | system | s | scheduled | ok | errors | timeouts | missed | open failed | p99 ms | raw p99 ms | server CPU s | driver CPU s | RSS base → end MiB | bound by |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    let mib =
        |k: Option<u64>| k.map_or_else(|| "–".into(), |k| format!("{:.0}", k as f64 / 1024.0));
    let f2 = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}"));
    for r in rows {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} → {} | {} |",
            r.repeat,
            r.order,
            r.sessions,
            r.label(),
            r.seconds,
            r.scheduled,
            r.ok,
            r.errors,
            r.timeouts,
            r.missed,
            r.open_failed,
            r.p99_corrected_us as f64 / 1e3,
            r.p99_us as f64 / 1e3,
            f2(r.cpu_server_s),
            f2(r.cpu_bench_s),
            mib(r.rss_base_kb),
            mib(r.rss_end_kb),
            if r.bound_by.is_empty() {
                "–"
            } else {
                &r.bound_by
            },
        );
    }
}

/// The printed summary: one line per (sessions, system), then the verdicts.
pub fn summary(rows: &[SessionRow]) -> String {
    let mut t = String::new();
    let mut all = summaries(rows);
    all.sort_by(|a, b| (a.sessions, &a.label).cmp(&(b.sessions, &b.label)));
    for s in &all {
        let _ = writeln!(
            t,
            "{:>7} {:<18} p99 {} ms  cpu/1k {}  rss/1k {} MiB  {}",
            s.sessions,
            s.label,
            p99_cell(s, s.p99_ms.as_ref()),
            mmm(s.cpu_per_1k.as_ref(), 4),
            mmm(s.rss_per_1k_mib.as_ref(), 2),
            if s.bound_by.is_empty() {
                "reached"
            } else {
                &s.bound_by
            },
        );
    }
    for r in scale_ratios(rows, SCALE_BASE, SCALE_AT, SCALE_TARGET) {
        let _ = writeln!(
            t,
            "{} p99 at {SCALE_AT} ÷ p99 at {SCALE_BASE}: {}{}",
            r.label,
            r.spread.map_or_else(String::new, |s| format!(
                "{:.2}× ({:.2}–{:.2}); ",
                s.median, s.min, s.max
            )),
            if r.fencepost {
                format!("target ≤ {SCALE_TARGET}×: {}", r.verdict)
            } else {
                r.verdict.clone()
            },
        );
    }
    t
}

/// A point: (sessions, median, min, max).
type Point = (f64, f64, f64, f64);

/// A panel: its title, its y label, and per system its points.
type Panel = (&'static str, &'static str, BTreeMap<String, Vec<Point>>);

/// The plot: three panels against sessions on a log axis.
struct CostPlot {
    /// The panels, left to right.
    panels: Vec<Panel>,
}

impl Plot for CostPlot {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let root = root.titled(
            "bench peer --sessions: cost against live sessions (median, min–max bars; log x)",
            (FONT, 22),
        )?;
        let areas = root.split_evenly((1, self.panels.len().max(1)));
        for (area, (title, ylab, lines)) in areas.iter().zip(&self.panels) {
            let xs = lines.values().flatten().map(|p| p.0);
            let x_lo = xs.clone().fold(f64::INFINITY, f64::min).min(1e6) / 1.5;
            let x_hi = xs.fold(1.0, f64::max) * 1.5;
            let ys = lines.values().flatten();
            let y_hi = ys.clone().map(|p| p.3).fold(0.0, f64::max).max(1e-9) * 1.15;
            let y_lo = ys.map(|p| p.2).fold(0.0, f64::min).min(0.0);
            let mut chart = ChartBuilder::on(area)
                .caption(*title, (FONT, 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d((x_lo.max(1.0)..x_hi).log_scale(), y_lo..y_hi)?;
            chart
                .configure_mesh()
                .x_desc("live sessions (log)")
                .y_desc(*ylab)
                .x_label_formatter(&|v| format!("{v:.0}"))
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 15))
                .draw()?;
            for (i, (label, pts)) in lines.iter().enumerate() {
                let c = color(i);
                let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
                chart
                    .draw_series(LineSeries::new(line.clone(), c.stroke_width(3)))?
                    .label(label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
                chart.draw_series(line.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
                chart.draw_series(
                    pts.iter()
                        .map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], c)),
                )?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font((FONT, 13))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }
        Ok(())
    }
}

/// Draws `peer_sessions.svg` and `.png` into `dir`: heartbeat p99
/// (corrected, only where a p99 has enough samples), server CPU per 1,000
/// sessions and RSS per 1,000 sessions, each against sessions on a log axis.
pub fn plot(dir: &Path, rows: &[SessionRow]) -> Result<(), PlotError> {
    let mut p99: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    let mut cpu: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    let mut rss: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    let mut all = summaries(rows);
    all.sort_by_key(|s| s.sessions);
    for s in &all {
        let n = s.sessions as f64;
        let put = |m: &mut BTreeMap<String, Vec<Point>>, v: Option<&Spread>| {
            if let Some(v) = v {
                m.entry(s.label.clone())
                    .or_default()
                    .push((n, v.median, v.min, v.max));
            }
        };
        if s.enough_samples() {
            put(&mut p99, s.p99_ms.as_ref());
        }
        put(&mut cpu, s.cpu_per_1k.as_ref());
        put(&mut rss, s.rss_per_1k_mib.as_ref());
    }
    let plot = CostPlot {
        panels: vec![
            ("heartbeat p99 (corrected)", "ms", p99),
            ("server CPU per 1,000 sessions", "CPU-s per s", cpu),
            ("server RSS per 1,000 sessions", "MiB", rss),
        ],
    };
    plots::render(dir, "peer_sessions", &plot)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_analysis::peer_sessions::SessionRow;

    fn row(system: &str, n: usize, repeat: u32, p99_ms: f64, samples: u64) -> SessionRow {
        SessionRow {
            system: system.into(),
            store: if system == "etcd" { "bbolt" } else { "sqlite" }.into(),
            client: if system == "etcd" {
                "etcd-client"
            } else {
                "sdk"
            }
            .into(),
            sessions: n,
            repeat,
            order: 0,
            connections: 64,
            period_ms: 3500.0,
            ttl_ms: 15_000,
            seconds: 10.0,
            scheduled: samples,
            ok: samples,
            errors: 0,
            timeouts: 0,
            missed: 0,
            open_failed: 0,
            hb_per_s: samples as f64 / 10.0,
            scheduled_per_s: n as f64 / 3.5,
            p50_us: 400,
            p99_us: (p99_ms * 900.0) as u64,
            p50_corrected_us: 500,
            p99_corrected_us: (p99_ms * 1e3) as u64,
            samples,
            cpu_server_s: Some(n as f64 * 1e-4),
            cpu_store_s: None,
            cpu_bench_s: Some(1.0),
            rss_base_kb: Some(10_000),
            rss_end_kb: Some(10_000 + n as u64 * 2),
            rss_peak_kb: Some(10_000 + n as u64 * 2),
            fd_limit: 1 << 20,
            bound_by: String::new(),
        }
    }

    #[test]
    fn the_report_gives_the_verdict_and_says_insufficient_data_for_a_thin_p99() {
        let mut rows = Vec::new();
        for repeat in 1..=3 {
            rows.push(row("fencepost", 100, repeat, 1.0, 300));
            rows.push(row("fencepost", 10_000, repeat, 1.2, 28_000));
            rows.push(row("etcd", 100, repeat, 1.0, 1_200));
            rows.push(row(
                "etcd",
                10_000,
                repeat,
                3.0 + repeat as f64 * 0.01,
                28_000,
            ));
        }
        let mut big = row("fencepost", 100_000, 1, 50.0, 100_000);
        big.bound_by = "driver_cpu".into();
        rows.push(big);
        let mut t = String::new();
        section(&mut t, &rows);
        assert!(t.contains("insufficient data (300 samples)"), "{t}");
        assert!(
            t.contains("| fencepost/sqlite | 1.20× | 1.20–1.20 | 1.20–1.20 | ≤ 2× | insufficient data (300 samples at 100 sessions"),
            "{t}"
        );
        assert!(t.contains("| etcd/bbolt | 3.02× |"), "{t}");
        assert!(t.contains("| etcd/bbolt | 3.02× | 3.01–3.03 |"), "{t}");
        assert!(
            t.contains("| – | not met |"),
            "etcd has no target of its own\n{t}"
        );
        // 100,000 was not reached: extrapolated on the line through the reached rows.
        assert!(t.contains("| fencepost/sqlite | 100000 | 1.000 |"), "{t}");
        assert!(t.contains("driver_cpu"), "{t}");
        let s = summary(&rows);
        assert!(
            s.contains("fencepost/sqlite p99 at 10000 ÷ p99 at 100"),
            "{s}"
        );
        let dir = std::env::temp_dir().join(format!("peer-sessions-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        plot(&dir, &rows).unwrap();
        assert!(dir.join("peer_sessions.svg").exists() && dir.join("peer_sessions.png").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
