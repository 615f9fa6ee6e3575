//! The two shapes numbers come in from a pack: a csv file as text cells
//! ([`Table`], shown as a Markdown table) and one histogram's percentiles in
//! ms ([`Pct`]).

use std::fmt::Write as _;

use bench_analysis::pool::Pooled;
use hdrhistogram::Histogram;

/// A CSV file as text cells (header, rows).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows, each as long as the header or shorter.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses simple CSV (no quoted commas), as the bench writes it.
    pub fn parse(text: &str) -> Table {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let split = |l: &str| {
            l.split(',')
                .map(|c| c.trim().trim_matches('"').to_string())
                .collect()
        };
        let header = lines.next().map(split).unwrap_or_default();
        Table {
            header,
            rows: lines.map(split).collect(),
        }
    }

    /// The index of column `name`.
    pub fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// As a Markdown table, at most `max_rows` rows (the rest counted).
    pub fn markdown(&self, max_rows: usize) -> String {
        let mut md = format!("| {} |\n|", self.header.join(" | "));
        for _ in &self.header {
            md.push_str("---|");
        }
        md.push('\n');
        for r in self.rows.iter().take(max_rows) {
            let _ = writeln!(md, "| {} |", r.join(" | "));
        }
        if self.rows.len() > max_rows {
            let _ = writeln!(
                md,
                "\n({} more rows in the file)",
                self.rows.len() - max_rows
            );
        }
        md
    }
}

/// Percentiles of one histogram, in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pct {
    /// Samples.
    pub n: u64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 95 % interval of the p99 (cluster bootstrap, [`bench_analysis::pool`]).
    pub p99_ci: (f64, f64),
    /// 99.9th percentile.
    pub p999: f64,
    /// Its 95 % interval.
    pub p999_ci: (f64, f64),
    /// Largest.
    pub max: f64,
}

impl Pct {
    /// Of a pool's corrected histogram, with its intervals.
    pub fn of(p: &Pooled) -> Pct {
        let ms = |us: u64| us as f64 / 1000.0;
        let ci = |q: f64| {
            p.quantile(q)
                .map_or((0.0, 0.0), |c| (ms(c.lo_us), ms(c.hi_us)))
        };
        Pct {
            p99_ci: ci(0.99),
            p999_ci: ci(0.999),
            ..Pct::raw(&p.corrected)
        }
    }

    /// Of a histogram in µs, without intervals.
    pub fn raw(h: &Histogram<u64>) -> Pct {
        let ms = |us: u64| us as f64 / 1000.0;
        Pct {
            n: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p99_ci: (0.0, 0.0),
            p999: ms(h.value_at_quantile(0.999)),
            p999_ci: (0.0, 0.0),
            max: ms(h.max()),
        }
    }
}
