//! `peer.csv` read back into [`PeerRow`]s, so that a committed `bench peer`
//! run can be analysed again (`bench docs`) by the functions that wrote its
//! report. Files of earlier versions, whose header is a shorter prefix of
//! [`PEER_COLUMNS`] (without `store_tx`, `store_writes`), read with those
//! columns absent.

use std::path::{Path, PathBuf};

use crate::peer::{PEER_COLUMNS, PeerRow};

/// The columns every version of `peer.csv` has (up to `client`).
const REQUIRED: usize = 16;

/// Why `peer.csv` could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum PeerCsvError {
    /// The file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The header is not a prefix of [`PEER_COLUMNS`] down to `client`.
    #[error("{path}: the header is not peer.csv's columns")]
    Header {
        /// The file.
        path: PathBuf,
    },
    /// A line has a cell that does not parse.
    #[error("{path} line {line}: column {column} = {value:?}")]
    Cell {
        /// The file.
        path: PathBuf,
        /// The line, from 1 (the header).
        line: usize,
        /// The column's name.
        column: &'static str,
        /// The cell.
        value: String,
    },
}

/// Reads the `peer.csv` at `path` (what [`crate::peer::write_csv`] wrote).
pub fn read_peer_csv(path: &Path) -> Result<Vec<PeerRow>, PeerCsvError> {
    let text = std::fs::read_to_string(path).map_err(|source| PeerCsvError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text).map_err(|e| match e {
        Bad::Header => PeerCsvError::Header {
            path: path.to_owned(),
        },
        Bad::Cell(line, column, value) => PeerCsvError::Cell {
            path: path.to_owned(),
            line,
            column,
            value,
        },
    })
}

/// What is wrong with a text, before it is named by its file.
enum Bad {
    Header,
    Cell(usize, &'static str, String),
}

fn parse(text: &str) -> Result<Vec<PeerRow>, Bad> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().ok_or(Bad::Header)?.split(',').collect();
    if header.len() < REQUIRED
        || header.len() > PEER_COLUMNS.len()
        || header.iter().zip(PEER_COLUMNS).any(|(a, b)| *a != b)
    {
        return Err(Bad::Header);
    }
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        let cell = |i: usize| cells.get(i).copied().unwrap_or("");
        let bad = |i: usize| Bad::Cell(n + 2, PEER_COLUMNS[i], cell(i).to_string());
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
        rows.push(PeerRow {
            system: cell(0).into(),
            store: cell(1).into(),
            op: cell(2).parse().map_err(|_| bad(2))?,
            conc: u(3)? as usize,
            ops_per_s: f(4)?,
            p50_us: u(5)?,
            p99_us: u(6)?,
            repeat: u(7)? as u32,
            order: u(8)? as u32,
            ops: u(9)?,
            errors: u(10)?,
            seconds: f(11)?,
            cpu_server_s: of(12)?,
            cpu_store_s: of(13)?,
            cpu_bench_s: of(14)?,
            client: cell(15).into(),
            store_tx: ou(16)?,
            store_writes: ou(17)?,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_core::peer::PeerOp;

    #[test]
    fn what_write_csv_writes_reads_back() {
        let mut g = crate::peer::test_row("fencepost", "sqlite", PeerOp::Grant, 64, 2, 4_000.0);
        (g.store_tx, g.store_writes) = (Some(1_000), Some(32_000));
        let e = crate::peer::test_row("etcd", "bbolt", PeerOp::Heartbeat, 16, 1, 900.0);
        let dir = std::env::temp_dir().join(format!("peer-csv-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        crate::peer::write_csv(&dir, &[g.clone(), e.clone()]).unwrap();
        let back = read_peer_csv(&dir.join("peer.csv")).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(back.len(), 2);
        assert_eq!(
            (back[0].op, back[0].conc, back[0].repeat),
            (PeerOp::Grant, 64, 2)
        );
        assert_eq!(
            (back[0].store_tx, back[0].store_writes),
            (Some(1_000), Some(32_000))
        );
        assert_eq!(
            (back[1].system.as_str(), back[1].client.as_str()),
            ("etcd", "etcd-client")
        );
    }

    #[test]
    fn an_older_header_reads_without_the_flush_columns_and_a_foreign_one_is_refused() {
        let old = format!(
            "{}\nfencepost,sqlite,heartbeat,1,100.5,78,126,1,0,400,0,4.0,1.3,,1.28,sdk\n",
            PEER_COLUMNS[..REQUIRED].join(",")
        );
        let rows = parse(&old).ok().unwrap();
        assert_eq!((rows[0].ops_per_s, rows[0].store_tx), (100.5, None));
        assert!(matches!(parse("system,op\n"), Err(Bad::Header)));
        let bad = old.replace("heartbeat", "dance");
        assert!(matches!(parse(&bad), Err(Bad::Cell(2, "op", _))));
    }
}
