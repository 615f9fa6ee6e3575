//! The extrapolation of `bench peer --sessions`: for each system
//! and each count none of whose repeats reached it on schedule, the server's
//! CPU and resident set on the least-squares line through every reached row
//! of that system. On paper, not measured: it assumes cost linear in
//! sessions, and the report labels it so.

use crate::peer_sessions::SessionRow;

/// A straight line `y = intercept + slope × N` fitted by least squares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    /// y at N = 0.
    pub intercept: f64,
    /// y per session.
    pub slope: f64,
    /// The points it was fitted through.
    pub points: usize,
    /// The largest N among them.
    pub max_n: usize,
}

impl Line {
    /// Least squares through `(n, y)`; `None` below two distinct n.
    pub fn fit(points: &[(f64, f64)]) -> Option<Line> {
        let k = points.len() as f64;
        let mx = points.iter().map(|p| p.0).sum::<f64>() / k;
        let my = points.iter().map(|p| p.1).sum::<f64>() / k;
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        if points.len() < 2 || sxx <= 0.0 {
            return None;
        }
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let slope = sxy / sxx;
        Some(Line {
            intercept: my - slope * mx,
            slope,
            points: points.len(),
            max_n: points.iter().map(|p| p.0 as usize).max().unwrap_or(0),
        })
    }

    /// The line's value at `n`.
    pub fn at(&self, n: usize) -> f64 {
        self.intercept + self.slope * n as f64
    }
}

/// One system's cost extrapolated, on paper, to a count it did not reach.
#[derive(Clone, Debug, PartialEq)]
pub struct Extrapolation {
    /// `system/store`.
    pub label: String,
    /// The count extrapolated to.
    pub sessions: usize,
    /// Server CPU, cores, on the line through the reached rows.
    pub cpu_cores: Option<f64>,
    /// The line it came from (CPU-seconds per second against N).
    pub cpu_line: Option<Line>,
    /// Server RSS grown, MiB, on the line through the reached rows.
    pub rss_mib: Option<f64>,
    /// The line it came from (RSS grown, MiB, against N).
    pub rss_line: Option<Line>,
}

/// For each system and each count of the plan none of whose repeats
/// reached it: server CPU (cores) and RSS grown (MiB) on the least-squares
/// line through every reached row of that system (all repeats, all counts).
pub fn extrapolate(rows: &[SessionRow], counts: &[usize]) -> Vec<Extrapolation> {
    let mut labels: Vec<String> = rows.iter().map(SessionRow::label).collect();
    labels.sort();
    labels.dedup();
    let mut out = Vec::new();
    for label in labels {
        let mine: Vec<&SessionRow> = rows.iter().filter(|r| r.label() == label).collect();
        let reached: Vec<&&SessionRow> = mine.iter().filter(|r| r.reached()).collect();
        let cpu: Vec<(f64, f64)> = reached
            .iter()
            .filter_map(|r| {
                let c = r.cpu_server_s? + r.cpu_store_s.unwrap_or(0.0);
                (r.seconds > 0.0).then(|| (r.sessions as f64, c / r.seconds))
            })
            .collect();
        let rss: Vec<(f64, f64)> = reached
            .iter()
            .filter_map(|r| {
                let grown = r.rss_end_kb? as f64 - r.rss_base_kb? as f64;
                Some((r.sessions as f64, grown / 1024.0))
            })
            .collect();
        let (cpu_line, rss_line) = (Line::fit(&cpu), Line::fit(&rss));
        for &n in counts {
            if mine.iter().any(|r| r.sessions == n && r.reached()) {
                continue;
            }
            out.push(Extrapolation {
                label: label.clone(),
                sessions: n,
                cpu_cores: cpu_line.map(|l| l.at(n)),
                cpu_line,
                rss_mib: rss_line.map(|l| l.at(n)),
                rss_line,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer_sessions::test_session_row as row;

    #[test]
    fn a_count_no_repeat_reached_is_extrapolated_on_the_line_through_the_reached_ones() {
        // CPU 1e-4 s per session over 10 s: 1e-5 cores per session, exactly linear.
        let mut rows = vec![
            row("fencepost", 100, 1, 1.0),
            row("fencepost", 1_000, 1, 1.0),
            row("fencepost", 10_000, 1, 1.0),
            row("fencepost", 100_000, 1, 1.0),
        ];
        rows[3].bound_by = "driver_cpu".into();
        // The bounded row's own figures never enter the line.
        rows[3].cpu_server_s = Some(1e9);
        let e = extrapolate(&rows, &[100, 1_000, 10_000, 100_000]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].sessions, 100_000);
        assert!((e[0].cpu_cores.unwrap() - 1.0).abs() < 1e-9, "{e:?}");
        // 1 KiB per session: 100,000 KiB.
        assert!((e[0].rss_mib.unwrap() - 100_000.0 / 1024.0).abs() < 1e-6);
        assert_eq!(e[0].cpu_line.unwrap().max_n, 10_000);
        assert_eq!(Line::fit(&[(1.0, 1.0)]), None, "one point is no line");
    }
}
