//! The results table (C4): one [`CellRow`] per grid cell, written as
//! `results.parquet` and `results.csv` and read back for `bench report` and
//! `bench triggers`. With [`crate::frame`] (which writes it),
//! [`crate::summary`] and [`crate::projection`], the only modules that touch
//! polars: the table is a few dozen rows, so the frame is built column by column from the rows and
//! converted straight back; nothing else in the bench sees a `DataFrame`.
//!
//! The column list lives in one place, the `cell_row!` invocation below, which
//! declares the struct, the column order and both conversions, so the parquet,
//! csv and Rust views cannot drift apart. Every column is described in
//! docs/reference/results.md.
//!
//! A row is built in one place too: the driver's `bench_driver::row::cell_row`, from the
//! `Measurement` the cell driver returns — the bench and every experiment go
//! through it. A new column is a field here, a line there, and a line in
//! docs/reference/results.md.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bench_core::error::Chain;
use polars::prelude::{
    Column, CsvReadOptions, DataFrame, DataType, Field, ParquetReader, PolarsError, Schema,
    SerReader,
};
use serde::{Deserialize, Serialize};

use crate::frame::{TableError, write_frame};

/// File name of the parquet copy of the results table.
pub const RESULTS_PARQUET: &str = "results.parquet";
/// File name of the csv copy of the results table.
pub const RESULTS_CSV: &str = "results.csv";

/// Input the output commands cannot work from; the CLI maps it (like every other
/// error of `bench report` / `bench triggers`) to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum BadInput {
    /// The results directory does not exist; check the path given on the command line.
    #[error("results directory {0} does not exist")]
    NoDir(PathBuf),
    /// The directory holds neither `results.parquet` nor `results.csv`; run `bench run|sweep` first.
    #[error("no {RESULTS_PARQUET} or {RESULTS_CSV} in {0}")]
    NoResults(PathBuf),
    /// A results file exists but cannot be read as the C4 table (corrupt, truncated,
    /// or a column missing / of the wrong type); the message says which.
    #[error("cannot read results table {path}: {reason}")]
    Unreadable {
        /// The file that failed.
        path: PathBuf,
        /// What was wrong with it: the read error with every cause, as text.
        reason: String,
    },
    /// The table in this directory has no rows, so there is nothing to evaluate.
    #[error("results table in {0} has no rows")]
    Empty(PathBuf),
}

/// What was wrong with a results file: [`BadInput::Unreadable`]'s reason.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    /// The file could not be opened.
    #[error(transparent)]
    Open(#[from] std::io::Error),
    /// polars could not read it as parquet or csv (corrupt, truncated, a
    /// value not of its column's type).
    #[error(transparent)]
    Polars(#[from] PolarsError),
    /// A column of [`COLUMNS`] is not in the file (a table of an older bench).
    #[error("column {0} is missing")]
    Missing(&'static str),
    /// A column is there but its values cannot be read.
    #[error("column {name}")]
    Column {
        /// The column.
        name: &'static str,
        /// Why.
        #[source]
        source: ColumnError,
    },
}

/// Why one column's values cannot be read.
#[derive(Debug, thiserror::Error)]
enum ColumnError {
    /// The values do not cast to the column's type.
    #[error(transparent)]
    Cast(#[from] PolarsError),
    /// A value is empty where the column allows none.
    #[error("column {column} has a null at row {row}")]
    Null {
        /// The column.
        column: String,
        /// The row, 0-based.
        row: usize,
    },
}

/// A Rust field type that is one column of the table.
trait ColumnType: Sized {
    /// The polars type of the column; a column read back is cast to it first.
    const DTYPE: DataType;
    /// An owned copy of a field, to build the column from borrowed rows.
    fn owned(&self) -> Self;
    /// Reads every value; a null is an error except where noted.
    fn read(col: &Column) -> Result<Vec<Self>, ColumnError>;
}

/// Fails with the column name and row when a value is null.
fn non_null<T>(
    col: &Column,
    values: impl Iterator<Item = Option<T>>,
) -> Result<Vec<T>, ColumnError> {
    values
        .enumerate()
        .map(|(row, v)| {
            v.ok_or_else(|| ColumnError::Null {
                column: col.name().to_string(),
                row,
            })
        })
        .collect()
}

impl ColumnType for String {
    const DTYPE: DataType = DataType::String;
    fn owned(&self) -> Self {
        self.clone()
    }
    fn read(col: &Column) -> Result<Vec<Self>, ColumnError> {
        let col = col.cast(&Self::DTYPE)?;
        // The csv reader turns an empty field into null; for text that is "".
        Ok(col
            .str()?
            .iter()
            .map(|v| v.unwrap_or_default().to_owned())
            .collect())
    }
}

impl ColumnType for f64 {
    const DTYPE: DataType = DataType::Float64;
    fn owned(&self) -> Self {
        *self
    }
    fn read(col: &Column) -> Result<Vec<Self>, ColumnError> {
        let cast = col.strict_cast(&Self::DTYPE)?;
        non_null(col, cast.f64()?.iter())
    }
}

impl ColumnType for u64 {
    const DTYPE: DataType = DataType::UInt64;
    fn owned(&self) -> Self {
        *self
    }
    fn read(col: &Column) -> Result<Vec<Self>, ColumnError> {
        let cast = col.strict_cast(&Self::DTYPE)?;
        non_null(col, cast.u64()?.iter())
    }
}

impl ColumnType for u32 {
    const DTYPE: DataType = DataType::UInt32;
    fn owned(&self) -> Self {
        *self
    }
    fn read(col: &Column) -> Result<Vec<Self>, ColumnError> {
        let cast = col.strict_cast(&Self::DTYPE)?;
        non_null(col, cast.u32()?.iter())
    }
}

impl ColumnType for bool {
    const DTYPE: DataType = DataType::Boolean;
    fn owned(&self) -> Self {
        *self
    }
    fn read(col: &Column) -> Result<Vec<Self>, ColumnError> {
        let cast = col.strict_cast(&Self::DTYPE)?;
        non_null(col, cast.bool()?.iter())
    }
}

/// Declares [`CellRow`], [`COLUMNS`], the csv schema and the row <-> frame
/// conversions from one list of `field: type` lines, in column order.
macro_rules! cell_row {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty, )+) => {
        /// One grid cell's results: a row of `results.parquet` / `results.csv`.
        /// The first 23 fields are the C4 columns in C4 order, the next 17 the
        /// columns C4 adds for honest measurement, in C4 order; the
        /// rest are bench extras. Units are in the names; docs/reference/results.md has
        /// the details. "≥" marks values that include right-censored samples.
        #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
        pub struct CellRow {
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        /// Column names of the results table, in file order.
        pub const COLUMNS: &[&str] = &[$(stringify!($name)),+];

        /// The exact schema of the table, used to read the csv without inference.
        fn schema() -> Schema {
            Schema::from_iter([$( Field::new(stringify!($name).into(), <$ty as ColumnType>::DTYPE) ),+])
        }

        /// Builds the frame column by column, keeping [`COLUMNS`] order.
        fn to_frame(rows: &[CellRow]) -> Result<DataFrame, PolarsError> {
            let columns = vec![$(
                Column::new(
                    stringify!($name).into(),
                    rows.iter().map(|r| r.$name.owned()).collect::<Vec<$ty>>(),
                ),
            )+];
            DataFrame::new(rows.len(), columns)
        }

        /// Converts a frame back to rows; every column must be present
        /// except those [`absent`] fills in.
        fn from_frame(df: &DataFrame) -> Result<Vec<CellRow>, ReadError> {
            $(
                let mut $name = <$ty as ColumnType>::read(
                    &df.column(stringify!($name))
                        .cloned()
                        .ok()
                        .or_else(|| absent(stringify!($name), df.height()))
                        .ok_or(ReadError::Missing(stringify!($name)))?,
                )
                .map_err(|source| ReadError::Column { name: stringify!($name), source })?
                .into_iter();
            )+
            // Every column has `df.height()` values, so no `next()` below runs dry.
            Ok((0..df.height())
                .map(|_| CellRow { $( $name: $name.next().expect("column of frame height"), )+ })
                .collect())
        }
    };
}

/// The value of a column a table written before it existed lacks: `tls`
/// is `none`, as every earlier run was plain HTTP. `None` for
/// every other column (then the table is refused).
fn absent(name: &str, height: usize) -> Option<Column> {
    match name {
        "tls" => Some(Column::new("tls".into(), vec!["none"; height])),
        // Before the divisor was an axis every cell heartbeat at U/3.
        "heartbeat_divisor" => Some(Column::new(name.into(), vec![3u32; height])),
        // Before gaps and freezes were recorded: 0, read as "not recorded"
        // (`hb_gap_count == 0`) by the analysis, never as "none happened".
        "hb_gap_count"
        | "hb_gap_p50_us"
        | "hb_gap_p99_us"
        | "hb_gap_max_us"
        | "hb_gaps_over_window"
        | "server_pauses"
        | "abandoned_mid_payout"
        | "renew_attempts"
        | "renew_timeouts"
        | "renew_refusals"
        | "renew_errors"
        | "renew_count"
        | "renew_rtt_p50_us"
        | "renew_rtt_p99_us"
        | "renew_rtt_corrected_p50_us"
        | "renew_rtt_corrected_p99_us" => Some(Column::new(name.into(), vec![0u64; height])),
        // Renewals were not told apart: not recorded.
        "renewals_per_payout" => Some(Column::new(name.into(), vec![f64::NAN; height])),
        // Before long holds every payout was one step with no work.
        "hold" => Some(Column::new(name.into(), vec!["none"; height])),
        // Every earlier run had both fences on.
        "rail_fences" => Some(Column::new(name.into(), vec!["on"; height])),
        "steps" => Some(Column::new(name.into(), vec![1u32; height])),
        _ => None,
    }
}

cell_row! {
    /// Identifies the sweep/run this cell belongs to (same for every cell of a sweep).
    run_id: String,
    /// Client safety margin configured for the cell (`lock.client.safety-margin`), 0 ≤ m < 1.
    margin: f64,
    /// How the margin was applied: `fixed` (ADR-006 D1) or the name of another policy.
    margin_policy: String,
    /// Lease TTL requested per grant, in ms (`lock.default.ttl`).
    lease_ms: u64,
    /// Session TTL, in ms (`lock.session.ttl`).
    session_ttl_ms: u64,
    /// Number of concurrent payout workers.
    workers: u32,
    /// Measured wall-clock duration of the cell's workload, in s.
    duration_s: f64,
    /// Median of the configured rail latency distribution (`rail_latency`), in ms.
    rail_p50_ms: f64,
    /// 99th percentile of the configured rail latency distribution, in ms.
    rail_p99_ms: f64,
    /// Samples in the raw heartbeat RTT histogram: every L2 that got a reply plus every one that timed out.
    hb_count: u64,
    /// Raw heartbeat RTT median (send → reply; a timeout counts as ≥ its give-up time), in µs.
    hb_rtt_p50_us: u64,
    /// Raw heartbeat RTT 90th percentile (≥: timeouts censored), in µs.
    hb_rtt_p90_us: u64,
    /// Raw heartbeat RTT 99th percentile (≥: timeouts censored), in µs.
    hb_rtt_p99_us: u64,
    /// Raw heartbeat RTT 99.9th percentile (≥: timeouts censored), in µs.
    hb_rtt_p999_us: u64,
    /// Largest raw heartbeat RTT (≥: timeouts censored), in µs.
    hb_rtt_max_us: u64,
    /// Payouts that reached PAID during the cell, read from the rail ledger.
    payouts_paid: u64,
    /// `payouts_paid / duration_s`, in payouts per second.
    throughput_per_s: f64,
    /// Attempts abandoned before the rail call because remaining lease < worst-case hop (D4).
    abandoned_insufficient_lease: u64,
    /// Lock-lost notifications the SDK delivered to the workers during the cell.
    lock_lost: u64,
    /// Lease renewals granted by the lock server.
    renewals: u64,
    /// Submissions the rail refused by a fence (`lock.fenced.out`), read from the rail.
    fenced_out: u64,
    /// Duplicate submissions the rail saw (`rail.duplicate.attempted`), read from the rail.
    duplicate_attempted: u64,
    /// Mean over grants of (client-side lease left at grant) / lease.
    usable_lease_fraction: f64,
    /// Heartbeat exchanges (L2) sent in the window; = replies + timeouts + errors.
    hb_attempts: u64,
    /// Of those, given up at their timeout (each a censored "≥" RTT sample).
    hb_timeouts: u64,
    /// Of those, failed in transport before any answer (no RTT sample).
    hb_errors: u64,
    /// Sessions lost in the window, every reason (the SDK's `lock.session.lost`).
    session_lost: u64,
    /// Heartbeat tick lag (scheduled → actual send) 99th percentile, in µs.
    hb_tick_lag_p99_us: u64,
    /// Heartbeat RTT from the scheduled send (coordinated omission corrected) median, in µs.
    hb_rtt_corrected_p50_us: u64,
    /// Corrected heartbeat RTT 99th percentile (≥: censored samples), in µs; trigger 1 uses it.
    hb_rtt_corrected_p99_us: u64,
    /// Corrected heartbeat RTT 99.9th percentile (≥: censored samples), in µs.
    hb_rtt_corrected_p999_us: u64,
    /// Fence-1 refusals (R2 claim / R4 release) in the window, from the rail's counters.
    fenced_out_fence1: u64,
    /// Fence-2 refusals (R3 submit) in the window, from the rail's counters.
    fenced_out_fence2: u64,
    /// Fence-outs of a `(payout_id, token)` a worker submitted under after its client check passed.
    fenced_out_believed_held: u64,
    /// Median rail submit (R3) latency measured by the workers (≥: timeouts censored), in ms; NaN without submits.
    rail_measured_p50_ms: f64,
    /// 99th percentile of the measured rail submit latency, in ms; NaN without submits.
    rail_measured_p99_ms: f64,
    /// CPU seconds (utime + stime) of the bench process over the window (its in-process workers included).
    cpu_bench_s: f64,
    /// CPU seconds of the lock-server over the window; NaN where it is not a local process.
    cpu_lock_server_s: f64,
    /// CPU seconds of the rail-stub over the window; NaN where it is not a local process.
    cpu_rail_stub_s: f64,
    /// Repeat index of the cell, 0-based (`--repeat N`: 0..N; its seed is the run seed + repeat).
    repeat: u32,
    /// Stable cell id, e.g. `ttl=1s_margin=0.30`; also the histogram file stem under `hgrm/`.
    cell: String,
    /// Seed of the cell's workload and rail latency.
    seed: u64,
    /// Network delay injected between workers and the lock server (spec), or `none`.
    net_delay: String,
    /// Lock-server pause schedule `EVERY:FOR`, or `none`.
    server_pause: String,
    /// Rail latency spec (`rail.latency`).
    rail_latency: String,
    /// Rail read timeout used by workers, in ms (`rail.read.timeout`).
    rail_read_timeout_ms: u64,
    /// Worst-case cost of the irreversible hop (rail read timeout + 2 s, scaled by the time base), in ms.
    worst_case_hop_ms: u64,
    /// Whether workers ran the client-side lease check (`check_still_held` / D4) before acting.
    client_check: bool,
    /// Attempts that gave up because the acquire budget ran out.
    acquire_failed: u64,
    /// Attempts abandoned because the lock was already lost before the irreversible step.
    abandoned_lost: u64,
    /// Payout attempts started by workers.
    attempts: u64,
    /// Payouts paid more than once, from the ledger check (must be 0).
    paid_twice: u64,
    /// Payouts paid under a token older than the highest issued, from the ledger check (must be 0).
    stale_paid: u64,
    /// Whether the ledger invariant check passed after the cell.
    ledger_ok: bool,
    /// Mean of the margins the workers' SDKs applied to lease deadlines (L4, L5) in the
    /// window, warm-up excluded (= `margin` for the fixed policy; see `margin_applied_count`).
    margin_effective: f64,
    /// Mean raw heartbeat RTT (≥: timeouts censored), in µs.
    hb_rtt_mean_us: f64,
    /// Heartbeat exchanges answered by the server (any status).
    hb_replies: u64,
    /// Scheduled heartbeat ticks that came due in the window.
    hb_ticks: u64,
    /// Ticks that sent no L2 of their own (served late by one exchange, or due once the session was lost).
    hb_ticks_missed: u64,
    /// Sessions lost to a 410 (`reason="expired"`).
    session_lost_expired: u64,
    /// Sessions lost to a 404 (`reason="unknown"`).
    session_lost_unknown: u64,
    /// Sessions lost to the client deadline (`reason="deadline"`).
    session_lost_deadline: u64,
    /// Samples in the corrected RTT histogram (one per scheduled tick).
    hb_corrected_count: u64,
    /// Largest corrected heartbeat RTT, in µs.
    hb_rtt_corrected_max_us: u64,
    /// Lower end of a distribution-free 95 % interval of the corrected p99 (independent samples assumed), in µs.
    hb_rtt_corrected_p99_lo_us: u64,
    /// Upper end of that interval, in µs.
    hb_rtt_corrected_p99_hi_us: u64,
    /// Corrected samples above trigger 1's budget min(lease, session TTL) × margin_effective / 3.
    hb_corrected_over_budget: u64,
    /// Largest heartbeat tick lag, in µs.
    hb_tick_lag_max_us: u64,
    /// Rail submits (R3) the workers timed.
    rail_measured_count: u64,
    /// Rail calls the workers saw fail in transport (a read timeout: the outcome is unknown to them).
    rail_transport_errors: u64,
    /// Submits made after a passed client check (the beliefs trigger 4 joins on).
    believed_held_submits: u64,
    /// Fence-1 refusals of the window the rail-stub's log did not show (not traceable).
    fenced_out_fence1_untraced: u64,
    /// Fence-2 refusals of the window the ledger counted but did not list (R5/R6 list a
    /// payout's first attempts only; not traceable).
    fenced_out_fence2_untraced: u64,
    /// CPU seconds of worker processes (experiments) over the window; 0 for in-process workers.
    cpu_workers_s: f64,
    /// Warm-up run before the window opened, excluded from every figure, in s.
    warmup_s: f64,
    /// `release` or `debug`: the build of the bench that measured the cell.
    build_profile: String,
    /// CPU quota of the workers when the cell is one of a throttle pair (`none` = its unthrottled run), else empty.
    cpu_quota: String,
    /// The lock service the workers ran on: `fencepost`, `etcd`, `redis` or `redlock`.
    backend: String,
    /// Lease deadlines (L4 grants, L5 renewals) `margin_effective` is the mean over; 0 when
    /// the window had none (then `margin_effective` is what the policy computes at the end).
    margin_applied_count: u64,
    /// The (policy, TTL, margin) point without the repeat, e.g. `ttl=1s_margin=0.30`: the
    /// key of `summary.csv`.
    group: String,
    /// Idle heartbeating SDK sessions beside the workers (`--sessions`); their heartbeats are
    /// in every `hb_*` column.
    idle_sessions: u32,
    /// Why the window ended: `duration`, `min_samples` (the corrected histogram reached
    /// `--min-samples`), `max_duration` (it did not, in time) or `schedule` (an experiment's).
    stopped_by: String,
    /// The lock-server's peak resident set size (`VmHWM`) at the window's close, in KiB;
    /// NaN where it is not a local process.
    lock_server_rss_peak_kb: f64,
    /// Lost idle sessions the cell replaced by a new one, keeping `idle_sessions` open
    /// (their losses are in `session_lost`).
    idle_reopened: u64,
    /// The transport the workers reached the lock-server over: `none` (plain HTTP) or `tls`
    /// (`--tls`); a table from before the column reads as `none`.
    tls: String,
    /// The heartbeat divisor k of the cell's sessions: the SDK heartbeats every U / k
    /// (ADR-006: 3); a table from before the column reads as 3.
    heartbeat_divisor: u32,
    /// Heartbeat gaps recorded: per session, from the send of the last acknowledged
    /// heartbeat to the receipt of the next acknowledgement (the time its deadline was
    /// exposed), plus one censored gap (≥) per session lost at its deadline; 0 = not recorded.
    hb_gap_count: u64,
    /// Heartbeat gap median (≥: censored gaps of lost sessions), in µs.
    hb_gap_p50_us: u64,
    /// Heartbeat gap 99th percentile (≥), in µs.
    hb_gap_p99_us: u64,
    /// Longest heartbeat gap (≥), in µs.
    hb_gap_max_us: u64,
    /// Gaps longer than the usable window they were exposed to: each one is a session lost
    /// at its deadline.
    hb_gaps_over_window: u64,
    /// Freezes (`--server-pause` SIGSTOPs) applied to the lock-server inside the measured
    /// window; 0 without `--server-pause` (and in a table from before the column).
    server_pauses: u64,
    /// The work a payout does while it holds its lock (`--hold`, scaled by the time base),
    /// a latency spec, or `none`; a table from before the column reads as `none`.
    hold: String,
    /// The steps of one logical payout (`--steps`): each a ledger payout ("leg") of its
    /// own, all under one lock grant; a table from before the column reads as 1.
    steps: u32,
    /// D4 refusals before a leg after the first of a multi-step payout: the lock given up
    /// with some legs paid (also counted in `abandoned_insufficient_lease` or
    /// `abandoned_lost`); 0 with one step.
    abandoned_mid_payout: u64,
    /// Lease renewals (L5) the workers' SDKs sent, every outcome (= `renewals` +
    /// `renew_refusals` + `renew_timeouts` + `renew_errors`); 0 in a table from before it.
    renew_attempts: u64,
    /// Of those, given up at their timeout (each a censored "≥" renewal RTT sample).
    renew_timeouts: u64,
    /// Of those, refused with `LOCK_LOST`: the server no longer held the lease.
    renew_refusals: u64,
    /// Of those, ended any other way: transport failures, other errors, replies not applied.
    renew_errors: u64,
    /// Samples in the raw renewal RTT histogram: replies and timeouts.
    renew_count: u64,
    /// Raw renewal RTT median (≥: timeouts censored), in µs; 0 without renewals.
    renew_rtt_p50_us: u64,
    /// Raw renewal RTT 99th percentile (≥), in µs.
    renew_rtt_p99_us: u64,
    /// Renewal RTT from the scheduled heartbeat tick that sent it, median, in µs.
    renew_rtt_corrected_p50_us: u64,
    /// Corrected renewal RTT 99th percentile, in µs.
    renew_rtt_corrected_p99_us: u64,
    /// `renewals` per payout finished (`payouts_paid / steps`): the renewals a payout needed
    /// to finish; NaN when none was paid.
    renewals_per_payout: f64,
    /// Whether the rail compared fencing tokens: `on` (fence 1 and fence 2 refuse a stale
    /// token) or `off` (`rail-stub --fences off`: redlock, which has no token); a table from
    /// before the column reads as `on`.
    rail_fences: String,
}

/// Writes `results.parquet` and `results.csv` into `dir` (created if missing),
/// columns in [`COLUMNS`] order.
pub fn write_results(dir: &Path, rows: &[CellRow]) -> Result<(), TableError> {
    std::fs::create_dir_all(dir).map_err(|source| TableError::Create {
        path: dir.to_owned(),
        source,
    })?;
    let df = to_frame(rows)?;
    write_frame(dir, "results", df)
}

/// Reads the results table from `dir`: `results.parquet`, or `results.csv` when
/// there is no parquet file; an empty table reads as no rows.
pub fn read_results(dir: &Path) -> Result<Vec<CellRow>, BadInput> {
    if !dir.is_dir() {
        return Err(BadInput::NoDir(dir.to_owned()));
    }
    let parquet = dir.join(RESULTS_PARQUET);
    let csv = dir.join(RESULTS_CSV);
    let (path, frame) = if parquet.is_file() {
        let frame = File::open(&parquet)
            .map_err(ReadError::from)
            .and_then(|f| Ok(ParquetReader::new(f).finish()?));
        (parquet, frame)
    } else if csv.is_file() {
        let frame = CsvReadOptions::default()
            .with_has_header(true)
            .with_schema(Some(Arc::new(csv_schema(&csv))))
            .try_into_reader_with_file_path(Some(csv.clone()))
            .and_then(|r| r.finish())
            .map_err(ReadError::from);
        (csv, frame)
    } else {
        return Err(BadInput::NoResults(dir.to_owned()));
    };
    frame
        .and_then(|df| from_frame(&df))
        .map_err(|e| BadInput::Unreadable {
            reason: Chain(&e).to_string(),
            path,
        })
}

/// The schema of the csv at `path`: [`schema`] without the columns its
/// header lacks that [`absent`] fills in (a table from before `tls`).
fn csv_schema(path: &Path) -> Schema {
    let header = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.lines().next().map(str::to_owned))
        .unwrap_or_default();
    let present: Vec<&str> = header.split(',').map(|c| c.trim_matches('"')).collect();
    let full = schema();
    Schema::from_iter(
        full.iter()
            .filter(|(name, _)| present.contains(&name.as_str()) || absent(name, 0).is_none())
            .map(|(name, dtype)| (name.clone(), dtype.clone())),
    )
}

/// [`read_results`] for the output commands: additionally refuses an empty table.
pub fn read_nonempty_results(dir: &Path) -> Result<Vec<CellRow>, BadInput> {
    let rows = read_results(dir)?;
    if rows.is_empty() {
        return Err(BadInput::Empty(dir.to_owned()));
    }
    Ok(rows)
}
