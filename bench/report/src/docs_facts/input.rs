//! What every section of the facts shares: reading a run's JSON and CSV
//! files, a CSV row by column name, and a spread as the facts write it.

use std::path::{Path, PathBuf};

use bench_analysis::peer::Spread;
use serde_json::Value;

use crate::adr::evidence::Table;

/// Why one section of the facts could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    /// An input file is absent or unreadable.
    #[error("{0} is missing")]
    Missing(String),
    /// An input file does not say what the section needs.
    #[error("{file}: {what}")]
    Bad {
        /// The file, relative to the repository.
        file: String,
        /// What is wrong.
        what: String,
    },
}

/// A spread as the facts give it (`null` for none).
pub(super) fn spread(s: Option<Spread>) -> Value {
    crate::lock_services::spread_json(s)
}

/// The spread of `values` (`null` when empty).
pub(super) fn spread_of(values: &[f64]) -> Value {
    spread(Spread::of(values))
}

/// `data/<rel>`, as a path and as the name a message gives it.
pub(super) fn file(data: &Path, rel: &str) -> (PathBuf, String) {
    (data.join(rel), format!("data/{rel}"))
}

/// The JSON file `data/<rel>`.
pub(super) fn read_json(data: &Path, rel: &str) -> Result<Value, FactsError> {
    let (path, name) = file(data, rel);
    let text = std::fs::read_to_string(&path).map_err(|_| FactsError::Missing(name.clone()))?;
    serde_json::from_str(&text).map_err(|e| FactsError::Bad {
        file: name,
        what: e.to_string(),
    })
}

/// The CSV file `data/<rel>`, its `#` comment lines left out.
pub(super) fn read_table(data: &Path, rel: &str) -> Result<Table, FactsError> {
    let (path, name) = file(data, rel);
    let text = std::fs::read_to_string(&path).map_err(|_| FactsError::Missing(name))?;
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(split_csv);
    Ok(Table {
        header: lines.next().unwrap_or_default(),
        rows: lines.collect(),
    })
}

/// One CSV line's cells: a cell in double quotes may hold commas, `""` in it
/// is one quote (RFC 4180, as Python's `csv` and polars read it).
pub(super) fn split_csv(line: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let cell = cells.last_mut().expect("one cell at least");
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => cells.push(String::new()),
            _ => cell.push(c),
        }
    }
    cells
}

/// One row of a [`Table`] by column name.
pub(super) struct Row<'a> {
    pub(super) table: &'a Table,
    pub(super) cells: &'a [String],
}

impl<'a> Row<'a> {
    /// Every row of `table`.
    pub(super) fn all(table: &'a Table) -> impl Iterator<Item = Row<'a>> {
        table.rows.iter().map(move |cells| Row { table, cells })
    }

    /// The cell of column `col` (empty when absent).
    pub(super) fn text(&self, col: &str) -> &'a str {
        self.table
            .col(col)
            .and_then(|i| self.cells.get(i))
            .map_or("", String::as_str)
    }

    /// The cell as a number (NaN when empty or not a number).
    pub(super) fn num(&self, col: &str) -> f64 {
        self.text(col).parse().unwrap_or(f64::NAN)
    }
}
