//! `bench peer --sessions` (the performance targets' live-sessions dimension), pure over
//! its rows: `peer_sessions.csv` ([`SessionRow`], one row per (repeat, N,
//! system)), what bounded a row ([`bound_by`]), the per-N summaries
//! ([`summaries`]: median (min–max) over repeats), the scale verdict
//! ([`scale_ratios`]: the heartbeat p99 at 10,000 live sessions over the
//! p99 at 100, taken within a repeat) and the extrapolation of cost to the
//! counts this box could not reach ([`extrapolate`]: a least-squares line
//! through the reached rows, labelled as such).
//!
//! Every p99 here is the corrected one (from each tick's scheduled send,
//! docs/measurement.md); a row with fewer than [`MIN_P99_SAMPLES`] samples
//! gives "insufficient data", never a verdict.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use bench_core::peer_sessions::SessionsSample;

use crate::peer::{Spread, label};

/// The `peer_sessions.csv` columns, in file order.
pub const SESSIONS_COLUMNS: [&str; 31] = [
    "system",
    "store",
    "client",
    "sessions",
    "repeat",
    "order",
    "connections",
    "period_ms",
    "ttl_ms",
    "seconds",
    "scheduled",
    "ok",
    "errors",
    "timeouts",
    "missed",
    "open_failed",
    "hb_per_s",
    "scheduled_per_s",
    "p50_us",
    "p99_us",
    "p50_corrected_us",
    "p99_corrected_us",
    "samples",
    "cpu_server_s",
    "cpu_store_s",
    "cpu_bench_s",
    "rss_base_kb",
    "rss_end_kb",
    "rss_peak_kb",
    "fd_limit",
    "bound_by",
];

/// The fewest corrected samples a row needs for its p99 to be read.
pub const MIN_P99_SAMPLES: u64 = 1_000;

/// The live sessions at which the performance targets judge the heartbeat p99 ...
pub const SCALE_AT: usize = 10_000;
/// ... against the p99 at this many ...
pub const SCALE_BASE: usize = 100;
/// ... which it may exceed by at most this factor.
pub const SCALE_TARGET: f64 = 2.0;

/// Share of the window's scheduled ticks that may go missed or time out
/// before a row says the schedule bounded it.
pub const MISSED_TOLERANCE: f64 = 0.01;

/// Driver CPU, in cores, at which the driver counts as saturated (on this
/// 2-core box it then holds one core of the two it shares with the server).
pub const DRIVER_SATURATED_CORES: f64 = 0.9;

/// What bounded a measurement: empty when the row reached its N on
/// schedule, else the first of `fd_limit` (an open ran out of file
/// descriptors), `open_failed` (a session or lease could not be opened),
/// `errors` (a heartbeat was refused or failed), `driver_cpu` (ticks missed
/// or timed out beyond [`MISSED_TOLERANCE`] while the driver held
/// [`DRIVER_SATURATED_CORES`] or more), `schedule_missed` (the same with the
/// driver below that), `no_window` (nothing fell due in the window).
pub fn bound_by(s: &SessionsSample, cpu_bench_s: Option<f64>) -> &'static str {
    let late = (s.missed + s.timeouts) as f64 > MISSED_TOLERANCE * s.scheduled as f64;
    let driver_cores = match cpu_bench_s {
        Some(c) if s.seconds > 0.0 => c / s.seconds,
        _ => 0.0,
    };
    if s.fd_exhausted {
        "fd_limit"
    } else if s.open_failed > 0 {
        "open_failed"
    } else if s.scheduled == 0 {
        "no_window"
    } else if s.errors > 0 {
        "errors"
    } else if late && driver_cores >= DRIVER_SATURATED_CORES {
        "driver_cpu"
    } else if late {
        "schedule_missed"
    } else {
        ""
    }
}

/// One measurement of N live sessions on one system: a row of `peer_sessions.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRow {
    /// `fencepost` or `etcd`.
    pub system: String,
    /// `sqlite`, `postgres`, or `bbolt` (etcd).
    pub store: String,
    /// The client library: `sdk` (fencepost), `etcd-client` (etcd).
    pub client: String,
    /// Live sessions (fencepost) or leases (etcd).
    pub sessions: usize,
    /// The repeat, from 1.
    pub repeat: u32,
    /// Position of this system within its (repeat, N) group (seeded order).
    pub order: u32,
    /// Connections (fencepost) or keep-alive streams (etcd) the sessions share.
    pub connections: usize,
    /// The heartbeat period, ms.
    pub period_ms: f64,
    /// The session or lease TTL, ms.
    pub ttl_ms: u64,
    /// The measured window, s.
    pub seconds: f64,
    /// Ticks that fell due in the window: `ok + errors + timeouts + missed`.
    pub scheduled: u64,
    /// Ticks answered with success.
    pub ok: u64,
    /// Ticks whose exchange failed.
    pub errors: u64,
    /// Ticks given up at the timeout (one period).
    pub timeouts: u64,
    /// Ticks that sent nothing of their own (the driver was a period behind).
    pub missed: u64,
    /// Sessions or leases that could not be opened.
    pub open_failed: u64,
    /// Answered heartbeats per second.
    pub hb_per_s: f64,
    /// Heartbeats per second the schedule asks for: N ÷ period.
    pub scheduled_per_s: f64,
    /// Raw (send → reply) median, µs.
    pub p50_us: u64,
    /// Raw p99, µs.
    pub p99_us: u64,
    /// Corrected (scheduled send → reply) median, µs.
    pub p50_corrected_us: u64,
    /// Corrected p99, µs.
    pub p99_corrected_us: u64,
    /// Corrected samples (one per answered, timed-out or missed tick).
    pub samples: u64,
    /// CPU seconds of the server process over the window.
    pub cpu_server_s: Option<f64>,
    /// CPU seconds of the PostgreSQL backends serving the lock-server (postgres only).
    pub cpu_store_s: Option<f64>,
    /// CPU seconds of this driver over the window.
    pub cpu_bench_s: Option<f64>,
    /// The server's resident set before the sessions were opened, KiB.
    pub rss_base_kb: Option<u64>,
    /// Its resident set at the window's end, KiB.
    pub rss_end_kb: Option<u64>,
    /// Its peak resident set (VmHWM) at the window's end, KiB.
    pub rss_peak_kb: Option<u64>,
    /// The driver's file-descriptor soft limit (raised to the hard limit at start).
    pub fd_limit: u64,
    /// What bounded the row ([`bound_by`]); empty when it reached its N.
    pub bound_by: String,
}

impl SessionRow {
    /// `system/store` ([`label`]).
    pub fn label(&self) -> String {
        label(&self.system, &self.store, &self.client)
    }

    /// Server CPU (the lock-server and its PostgreSQL backends, or etcd),
    /// CPU-seconds per second per 1,000 live sessions.
    pub fn cpu_per_1k(&self) -> Option<f64> {
        let cpu = self.cpu_server_s? + self.cpu_store_s.unwrap_or(0.0);
        (self.seconds > 0.0 && self.sessions > 0)
            .then(|| cpu / self.seconds / (self.sessions as f64 / 1e3))
    }

    /// The server's resident set grown over the measurement (its end over
    /// its base), KiB per 1,000 live sessions.
    pub fn rss_per_1k_kb(&self) -> Option<f64> {
        let grown = self.rss_end_kb? as f64 - self.rss_base_kb? as f64;
        (self.sessions > 0).then(|| grown / (self.sessions as f64 / 1e3))
    }

    /// The driver's CPU over the window, in cores.
    pub fn driver_cores(&self) -> Option<f64> {
        self.cpu_bench_s
            .filter(|_| self.seconds > 0.0)
            .map(|c| c / self.seconds)
    }

    /// Reached its N on schedule (nothing bounded it).
    pub fn reached(&self) -> bool {
        self.bound_by.is_empty()
    }
}

fn opt_f(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.4}"))
}

fn opt_u(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// Writes `peer_sessions.csv` (every row so far) into `dir`, through a
/// temporary file renamed into place.
pub fn write_csv(dir: &Path, rows: &[SessionRow]) -> std::io::Result<()> {
    let mut t = SESSIONS_COLUMNS.join(",");
    t.push('\n');
    for r in rows {
        let _ = writeln!(
            t,
            "{},{},{},{},{},{},{},{:.3},{},{:.4},{},{},{},{},{},{},{:.1},{:.1},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.system,
            r.store,
            r.client,
            r.sessions,
            r.repeat,
            r.order,
            r.connections,
            r.period_ms,
            r.ttl_ms,
            r.seconds,
            r.scheduled,
            r.ok,
            r.errors,
            r.timeouts,
            r.missed,
            r.open_failed,
            r.hb_per_s,
            r.scheduled_per_s,
            r.p50_us,
            r.p99_us,
            r.p50_corrected_us,
            r.p99_corrected_us,
            r.samples,
            opt_f(r.cpu_server_s),
            opt_f(r.cpu_store_s),
            opt_f(r.cpu_bench_s),
            opt_u(r.rss_base_kb),
            opt_u(r.rss_end_kb),
            opt_u(r.rss_peak_kb),
            r.fd_limit,
            r.bound_by,
        );
    }
    let tmp = dir.join("peer_sessions.csv.tmp");
    std::fs::write(&tmp, t)?;
    std::fs::rename(&tmp, dir.join("peer_sessions.csv"))?;
    Ok(())
}

/// Why `peer_sessions.csv` could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum SessionsCsvError {
    /// The file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The header is not [`SESSIONS_COLUMNS`]: a file of another version.
    #[error("peer_sessions.csv: the header is not this version's columns")]
    Header,
    /// A line has a cell that does not parse.
    #[error("peer_sessions.csv line {line}: column {column} = {value:?}")]
    Cell {
        /// The line, from 1 (the header).
        line: usize,
        /// The column's name.
        column: &'static str,
        /// The cell.
        value: String,
    },
}

/// Reads `peer_sessions.csv` of `dir` back into rows (what [`write_csv`] wrote).
pub fn read_csv(dir: &Path) -> Result<Vec<SessionRow>, SessionsCsvError> {
    let path = dir.join("peer_sessions.csv");
    let text = std::fs::read_to_string(&path).map_err(|source| SessionsCsvError::Read {
        path: path.clone(),
        source,
    })?;
    let mut lines = text.lines();
    if lines.next() != Some(SESSIONS_COLUMNS.join(",").as_str()) {
        return Err(SessionsCsvError::Header);
    }
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        let cell = |i: usize| cells.get(i).copied().unwrap_or("");
        let bad = |i: usize| SessionsCsvError::Cell {
            line: n + 2,
            column: SESSIONS_COLUMNS[i],
            value: cell(i).to_string(),
        };
        let u = |i: usize| cell(i).parse::<u64>().map_err(|_| bad(i));
        let f = |i: usize| cell(i).parse::<f64>().map_err(|_| bad(i));
        let of = |i: usize| match cell(i) {
            "" => Ok(None),
            v => v.parse::<f64>().map(Some).map_err(|_| bad(i)),
        };
        let ou = |i: usize| match cell(i) {
            "" => Ok(None),
            v => v.parse::<u64>().map(Some).map_err(|_| bad(i)),
        };
        rows.push(SessionRow {
            system: cell(0).into(),
            store: cell(1).into(),
            client: cell(2).into(),
            sessions: u(3)? as usize,
            repeat: u(4)? as u32,
            order: u(5)? as u32,
            connections: u(6)? as usize,
            period_ms: f(7)?,
            ttl_ms: u(8)?,
            seconds: f(9)?,
            scheduled: u(10)?,
            ok: u(11)?,
            errors: u(12)?,
            timeouts: u(13)?,
            missed: u(14)?,
            open_failed: u(15)?,
            hb_per_s: f(16)?,
            scheduled_per_s: f(17)?,
            p50_us: u(18)?,
            p99_us: u(19)?,
            p50_corrected_us: u(20)?,
            p99_corrected_us: u(21)?,
            samples: u(22)?,
            cpu_server_s: of(23)?,
            cpu_store_s: of(24)?,
            cpu_bench_s: of(25)?,
            rss_base_kb: ou(26)?,
            rss_end_kb: ou(27)?,
            rss_peak_kb: ou(28)?,
            fd_limit: u(29)?,
            bound_by: cell(30).into(),
        });
    }
    Ok(rows)
}

/// One (system, N) over its repeats: median (min–max) of each figure.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSummary {
    /// `system/store`.
    pub label: String,
    /// Live sessions.
    pub sessions: usize,
    /// Corrected heartbeat p99, ms.
    pub p99_ms: Option<Spread>,
    /// Raw heartbeat p99, ms.
    pub p99_raw_ms: Option<Spread>,
    /// Answered ÷ scheduled heartbeats per second.
    pub achieved: Option<Spread>,
    /// Server CPU-seconds per second per 1,000 sessions.
    pub cpu_per_1k: Option<Spread>,
    /// Server RSS grown per 1,000 sessions, MiB.
    pub rss_per_1k_mib: Option<Spread>,
    /// Driver CPU, cores.
    pub driver_cores: Option<Spread>,
    /// The fewest corrected samples of any repeat.
    pub min_samples: u64,
    /// Errors + timeouts + missed + open failures over every repeat.
    pub failures: u64,
    /// What bounded its repeats (distinct, `;`-joined); empty when none did.
    pub bound_by: String,
}

impl SessionSummary {
    /// Whether its p99 may be read (every repeat has enough samples).
    pub fn enough_samples(&self) -> bool {
        self.min_samples >= MIN_P99_SAMPLES
    }
}

/// Rows grouped by (system/store, N), in a stable order.
fn by_label_and_n(rows: &[SessionRow]) -> BTreeMap<(String, usize), Vec<&SessionRow>> {
    let mut g: BTreeMap<(String, usize), Vec<&SessionRow>> = BTreeMap::new();
    for r in rows {
        g.entry((r.label(), r.sessions)).or_default().push(r);
    }
    g
}

/// Per (system, N): the summary over repeats.
pub fn summaries(rows: &[SessionRow]) -> Vec<SessionSummary> {
    by_label_and_n(rows)
        .into_iter()
        .map(|((label, sessions), g)| {
            let spread = |f: &dyn Fn(&SessionRow) -> Option<f64>| {
                Spread::of(&g.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            let mut bounds: Vec<&str> = g
                .iter()
                .map(|r| r.bound_by.as_str())
                .filter(|b| !b.is_empty())
                .collect();
            bounds.sort_unstable();
            bounds.dedup();
            SessionSummary {
                label,
                sessions,
                p99_ms: spread(&|r| (r.samples > 0).then_some(r.p99_corrected_us as f64 / 1e3)),
                p99_raw_ms: spread(&|r| (r.ok > 0).then_some(r.p99_us as f64 / 1e3)),
                achieved: spread(&|r| {
                    (r.scheduled_per_s > 0.0).then_some(r.hb_per_s / r.scheduled_per_s)
                }),
                cpu_per_1k: spread(&SessionRow::cpu_per_1k),
                rss_per_1k_mib: spread(&|r| r.rss_per_1k_kb().map(|k| k / 1024.0)),
                driver_cores: spread(&SessionRow::driver_cores),
                min_samples: g.iter().map(|r| r.samples).min().unwrap_or(0),
                failures: g
                    .iter()
                    .map(|r| r.errors + r.timeouts + r.missed + r.open_failed)
                    .sum(),
                bound_by: bounds.join(";"),
            }
        })
        .collect()
}

/// The verdict of "at most `target`" from a spread's interval: `met` when
/// its high end is at or below, `not met` when its low end is above, else
/// not resolved (docs/measurement.md: a decision only where intervals separate).
pub fn at_most_verdict(s: &Spread, target: f64) -> String {
    match s.ci95 {
        Some((_, hi)) if hi <= target => "met".into(),
        Some((lo, _)) if lo > target => "not met".into(),
        Some(_) => format!("not resolved at {} repeats", s.n),
        None if s.median <= target => "met (1 repeat, no interval)".into(),
        None => "not met (1 repeat, no interval)".into(),
    }
}

/// One system's heartbeat p99 at [`SCALE_AT`] over its p99 at [`SCALE_BASE`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleRatio {
    /// `system/store`.
    pub label: String,
    /// Whether it is a fencepost lock-server (the target is fencepost's).
    pub fencepost: bool,
    /// p99(at) ÷ p99(base), corrected, one per repeat that measured both.
    pub spread: Option<Spread>,
    /// Those ratios, in repeat order.
    pub values: Vec<f64>,
    /// The thinnest (sessions, samples) below [`MIN_P99_SAMPLES`], if any.
    pub thin: Option<(usize, u64)>,
    /// `met`, `not met`, `not resolved at N repeats`, `insufficient data
    /// (...)` or `not measured`.
    pub verdict: String,
}

/// Per system: the corrected heartbeat p99 at `at` sessions over its p99 at
/// `base`, taken within each repeat, judged against "at most `target`".
/// A pair in which either row has fewer than [`MIN_P99_SAMPLES`] samples
/// gives "insufficient data"; a system without both counts, "not measured".
pub fn scale_ratios(rows: &[SessionRow], base: usize, at: usize, target: f64) -> Vec<ScaleRatio> {
    let mut labels: BTreeMap<String, bool> = BTreeMap::new();
    for r in rows {
        labels.insert(r.label(), r.system == "fencepost");
    }
    labels
        .into_iter()
        .map(|(label, fencepost)| {
            let find = |n: usize, repeat: u32| {
                rows.iter()
                    .find(|r| r.label() == label && r.sessions == n && r.repeat == repeat)
            };
            let mut ratios = Vec::new();
            let mut thin: Option<(usize, u64)> = None;
            let repeats: std::collections::BTreeSet<u32> = rows.iter().map(|r| r.repeat).collect();
            for repeat in repeats {
                let (Some(b), Some(a)) = (find(base, repeat), find(at, repeat)) else {
                    continue;
                };
                for r in [b, a] {
                    if r.samples < MIN_P99_SAMPLES && thin.is_none_or(|t| r.samples < t.1) {
                        thin = Some((r.sessions, r.samples));
                    }
                }
                if b.p99_corrected_us > 0 {
                    ratios.push(a.p99_corrected_us as f64 / b.p99_corrected_us as f64);
                }
            }
            let spread = Spread::of(&ratios);
            let verdict = match (&spread, thin) {
                (None, _) => "not measured".to_string(),
                (Some(_), Some((n, samples))) => format!(
                    "insufficient data ({samples} samples at {n} sessions; a p99 needs {MIN_P99_SAMPLES})"
                ),
                (Some(s), None) => at_most_verdict(s, target),
            };
            ScaleRatio {
                label,
                fencepost,
                spread,
                verdict,
                values: ratios,
                thin,
            }
        })
        .collect()
}

/// The analysis tests' row: `n` sessions at a 3.5 s period over 10 s, every
/// tick answered, `p99_ms` corrected p99, 1,000 samples per 100 sessions.
#[cfg(test)]
pub(crate) fn test_session_row(system: &str, n: usize, repeat: u32, p99_ms: f64) -> SessionRow {
    let scheduled = (n as f64 * 10.0 / 3.5) as u64;
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
        scheduled,
        ok: scheduled,
        errors: 0,
        timeouts: 0,
        missed: 0,
        open_failed: 0,
        hb_per_s: scheduled as f64 / 10.0,
        // As the CSV keeps it (one decimal), so a row round-trips.
        scheduled_per_s: (n as f64 / 3.5 * 10.0).round() / 10.0,
        p50_us: 500,
        p99_us: (p99_ms * 1e3) as u64,
        p50_corrected_us: 600,
        p99_corrected_us: (p99_ms * 1e3) as u64,
        samples: (n as u64 * 10).max(scheduled),
        cpu_server_s: Some(n as f64 * 1e-4),
        cpu_store_s: None,
        cpu_bench_s: Some(1.0),
        rss_base_kb: Some(10_000),
        rss_end_kb: Some(10_000 + n as u64),
        rss_peak_kb: Some(10_000 + n as u64),
        fd_limit: 1_048_576,
        bound_by: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::test_session_row as row;
    use super::*;

    #[test]
    fn a_timeout_and_a_missed_tick_each_bound_a_row_and_a_saturated_driver_is_named() {
        let mut s = SessionsSample::empty();
        s.scheduled = 1_000;
        s.ok = 1_000;
        s.seconds = 10.0;
        assert_eq!(bound_by(&s, Some(2.0)), "", "on schedule: reached");
        // 11 of 1,000 ticks timed out: beyond the 1 % tolerance.
        s.ok = 989;
        s.timeouts = 11;
        assert_eq!(bound_by(&s, Some(2.0)), "schedule_missed");
        // The same, with the driver holding a core of its own: it bounded itself.
        assert_eq!(bound_by(&s, Some(9.5)), "driver_cpu");
        s.timeouts = 0;
        s.missed = 11;
        assert_eq!(bound_by(&s, None), "schedule_missed");
        s.errors = 1;
        assert_eq!(bound_by(&s, None), "errors");
        s.open_failed = 3;
        assert_eq!(bound_by(&s, None), "open_failed");
        s.fd_exhausted = true;
        assert_eq!(bound_by(&s, None), "fd_limit");
        assert_eq!(bound_by(&SessionsSample::empty(), None), "no_window");
    }

    #[test]
    fn the_csv_round_trips_every_column_including_empty_cells() {
        let dir = std::env::temp_dir().join(format!("peer-sessions-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = row("fencepost", 10_000, 1, 4.5);
        a.bound_by = "schedule_missed".into();
        a.cpu_store_s = Some(0.25);
        let mut b = row("etcd", 100, 2, 1.25);
        (b.cpu_server_s, b.rss_end_kb) = (None, None);
        write_csv(&dir, &[a.clone(), b.clone()]).unwrap();
        let text = std::fs::read_to_string(dir.join("peer_sessions.csv")).unwrap();
        assert_eq!(text.lines().next().unwrap(), SESSIONS_COLUMNS.join(","));
        let back = read_csv(&dir).unwrap();
        assert_eq!(back, vec![a, b]);
        std::fs::write(dir.join("peer_sessions.csv"), "system,store\n").unwrap();
        assert!(matches!(read_csv(&dir), Err(SessionsCsvError::Header)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_scale_verdict_needs_enough_samples_and_an_interval_that_decides() {
        // fencepost: p99 1 ms at 100, 1.5 ms at 10,000 in every repeat: 1.5× ≤ 2×.
        // etcd: 1 ms → 3 ms: 3× > 2×.
        let mut rows = Vec::new();
        for repeat in 1..=3 {
            rows.push(row("fencepost", 100, repeat, 1.0));
            rows.push(row("fencepost", 10_000, repeat, 1.5 + 0.01 * repeat as f64));
            rows.push(row("etcd", 100, repeat, 1.0));
            rows.push(row("etcd", 10_000, repeat, 3.0 + 0.01 * repeat as f64));
        }
        let r = scale_ratios(&rows, SCALE_BASE, SCALE_AT, SCALE_TARGET);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].label.as_str(), r[0].verdict.as_str()),
            ("etcd/bbolt", "not met")
        );
        assert_eq!(r[1].label, "fencepost/sqlite");
        assert!(r[1].fencepost);
        assert_eq!(r[1].verdict, "met");
        assert_eq!(r[1].spread.unwrap().n, 3);

        // A thin row at 100 sessions: no verdict, whatever the ratio.
        rows[0].samples = 285;
        let r = scale_ratios(&rows, SCALE_BASE, SCALE_AT, SCALE_TARGET);
        assert!(
            r[1].verdict
                .starts_with("insufficient data (285 samples at 100 sessions"),
            "{}",
            r[1].verdict
        );
        // Repeats that straddle the target: not resolved.
        let mut wide = Vec::new();
        for (repeat, p99) in [(1, 1.5), (2, 2.5), (3, 2.0)] {
            wide.push(row("fencepost", 100, repeat, 1.0));
            wide.push(row("fencepost", 10_000, repeat, p99));
        }
        let r = scale_ratios(&wide, SCALE_BASE, SCALE_AT, SCALE_TARGET);
        assert_eq!(r[0].verdict, "not resolved at 3 repeats");
        // Without the 10,000 row: not measured.
        let r = scale_ratios(&wide[..1], SCALE_BASE, SCALE_AT, SCALE_TARGET);
        assert_eq!(r[0].verdict, "not measured");
    }

    #[test]
    fn summaries_give_cost_per_thousand_sessions_and_name_what_bounded_a_count() {
        let mut rows = vec![
            row("fencepost", 1_000, 1, 1.0),
            row("fencepost", 1_000, 2, 2.0),
            row("fencepost", 1_000, 3, 3.0),
        ];
        rows[1].bound_by = "schedule_missed".into();
        rows[1].missed = 7;
        let s = summaries(&rows);
        assert_eq!(s.len(), 1);
        let s = &s[0];
        assert_eq!(s.sessions, 1_000);
        // 0.1 CPU-s over 10 s for 1,000 sessions: 0.01 cores per 1,000.
        assert!((s.cpu_per_1k.unwrap().median - 0.01).abs() < 1e-12);
        // 1,000 KiB grown for 1,000 sessions: 1,000 KiB per 1,000.
        assert!((s.rss_per_1k_mib.unwrap().median - 1000.0 / 1024.0).abs() < 1e-12);
        assert_eq!(s.p99_ms.unwrap().median, 2.0);
        assert_eq!((s.failures, s.bound_by.as_str()), (7, "schedule_missed"));
        assert!(s.enough_samples());
    }

    #[test]
    fn at_most_is_decided_only_by_the_interval() {
        let tight = Spread::of(&[1.4, 1.5, 1.6]).unwrap();
        assert_eq!(at_most_verdict(&tight, 2.0), "met");
        let high = Spread::of(&[3.0, 3.1, 2.9]).unwrap();
        assert_eq!(at_most_verdict(&high, 2.0), "not met");
        let one = Spread::of(&[2.5]).unwrap();
        assert_eq!(
            at_most_verdict(&one, 2.0),
            "not met (1 repeat, no interval)"
        );
    }
}
