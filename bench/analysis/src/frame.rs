//! A table's files: [`write_frame`] writes a polars frame as `<stem>.parquet`
//! and `<stem>.csv`, [`write_csv`] as the csv alone. The results table, the
//! summary and the projection are all written here, so every table file
//! fails the same way, with a [`TableError`] naming the file.

use std::fs::File;
use std::path::{Path, PathBuf};

use polars::prelude::{CsvWriter, DataFrame, ParquetWriter, PolarsError, SerWriter};

/// Why a table could not be built or written. Each message is its own context
/// ("writing /x/summary.csv"); the cause is its `source()`.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The rows could not be turned into a frame (columns of unequal length);
    /// a bug in the table's declaration, not in the data.
    #[error(transparent)]
    Build(#[from] PolarsError),
    /// A directory or file could not be created; check the results directory
    /// is writable and no directory is in the file's place.
    #[error("creating {path}")]
    Create {
        /// The directory or file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file was created but polars could not write the frame into it
    /// (disk full, I/O error).
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// polars' error.
        #[source]
        source: PolarsError,
    },
}

/// Creates `path` for writing.
fn create(path: &Path) -> Result<File, TableError> {
    File::create(path).map_err(|source| TableError::Create {
        path: path.to_owned(),
        source,
    })
}

/// Writes `df` as `<stem>.parquet` and `<stem>.csv` into `dir`.
pub(crate) fn write_frame(dir: &Path, stem: &str, mut df: DataFrame) -> Result<(), TableError> {
    let parquet = dir.join(format!("{stem}.parquet"));
    ParquetWriter::new(create(&parquet)?)
        .finish(&mut df)
        .map_err(|source| TableError::Write {
            path: parquet,
            source,
        })?;
    write_csv(dir, stem, df)
}

/// Writes `df` as `<stem>.csv` into `dir`.
pub(crate) fn write_csv(dir: &Path, stem: &str, mut df: DataFrame) -> Result<(), TableError> {
    let csv = dir.join(format!("{stem}.csv"));
    let mut file = create(&csv)?;
    CsvWriter::new(&mut file)
        .include_header(true)
        .finish(&mut df)
        .map_err(|source| TableError::Write { path: csv, source })
}
