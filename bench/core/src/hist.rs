//! Per-cell latency histograms: how they are sized, summarised and stored.
//!
//! A cell has five histograms ([`Series`]), all in µs: the raw heartbeat RTT
//! (stem `<cell>`), the RTT corrected for coordinated omission
//! (`<cell>.corrected`), the heartbeat tick lag (`<cell>.tick_lag`), the
//! rail submit latency measured by the workers (`<cell>.rail`) and the
//! heartbeat gaps (`<cell>.gap`: per session, the send of the last
//! acknowledged heartbeat to the receipt of the next acknowledgement, plus a
//! censored gap per session lost at its deadline). Each is saved
//! twice under `hgrm/`:
//! - `<stem>.hgrm`: the classic HdrHistogram percentile-distribution text
//!   (`Value Percentile TotalCount 1/(1-Percentile)` plus the Mean/StdDeviation/Max
//!   footer), values in µs, for people and for the HdrHistogram plotter;
//! - `<stem>.hdr`: the lossless V2 (deflate) encoding, base64 on one line, which
//!   [`load_series`] reads back and from which any percentile can be recomputed.
//!   It is the same encoding HdrHistogram interval logs use, so Python's `hdrh`
//!   (`HdrHistogram.decode`) and Java's `decodeFromCompressedByteBuffer` read it too.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hdrhistogram::serialization::{
    DeserializeError, Deserializer, Serializer as _, V2DeflateSerializeError, V2DeflateSerializer,
};
use hdrhistogram::{AdditionError, Histogram};

use crate::error::Flat;

/// Subdirectory of a results directory that holds the histograms.
pub const HGRM_DIR: &str = "hgrm";
/// Lowest trackable RTT, in µs.
pub const RTT_LOW_US: u64 = 1;
/// Highest trackable RTT, in µs (one hour).
pub const RTT_HIGH_US: u64 = 3_600_000_000;
/// Significant decimal digits kept by every RTT histogram.
pub const RTT_SIGFIG: u8 = 3;

/// Why a histogram could not be merged, saved or loaded. Each message is its
/// own context ("reading hgrm/x.hdr"); the cause is its `source()`.
#[derive(Debug, thiserror::Error)]
pub enum HistError {
    /// Two histograms could not be merged (a value beyond the other's bounds);
    /// the histograms were not made with [`new_histogram`].
    #[error(transparent)]
    Add(#[from] AdditionError),
    /// The cell id is empty, `.`/`..` or holds a path separator, so it cannot
    /// name a file; give the cell a plain id.
    #[error("cell id {0:?} cannot be used as a file name")]
    BadCellId(String),
    /// `hgrm/` could not be created under the results directory; check the
    /// directory is writable.
    #[error("creating {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `.hgrm` or `.hdr` file could not be written; check space and permissions.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A histogram could not be encoded (see [`EncodeError`]).
    #[error("encoding histogram {stem}")]
    Encode {
        /// The file stem of the series.
        stem: String,
        /// Why.
        #[source]
        source: EncodeError,
    },
    /// A `.hdr` file could not be read: it is absent (the cell saved no
    /// histogram) or unreadable.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `.hdr` file is not what [`encode`] writes (see [`DecodeError`]);
    /// rewrite it from its cell or leave the cell out.
    #[error("decoding {path}")]
    Decode {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: DecodeError,
    },
}

/// Why [`encode`] failed: the V2 deflate serializer refused the histogram (a
/// count too large for the format). The message carries the serializer's own
/// debug text, as the `.hdr` writer always reported it; nothing below it.
#[derive(Debug, thiserror::Error)]
#[error("V2 deflate encoding failed: {0:?}")]
pub struct EncodeError(pub V2DeflateSerializeError);

/// Why [`decode`] failed; the text is not a `.hdr` line.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The text is not padded standard base64; it was cut or edited.
    #[error("not base64")]
    NotBase64(#[source] Base64Error),
    /// The bytes are not a V2 (deflate) histogram; they come from elsewhere
    /// or were cut.
    #[error("not a V2 histogram")]
    NotV2(#[source] Flat<DeserializeError>),
}

/// Why a text is not padded standard base64 (RFC 4648).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Base64Error {
    /// The length is not a multiple of 4: the text was cut.
    #[error("length {0} is not a multiple of 4")]
    Length(usize),
    /// `=` padding before the last group or more than two of it.
    #[error("misplaced padding")]
    MisplacedPadding,
    /// A character outside the standard alphabet.
    #[error("invalid character {0:?}")]
    InvalidCharacter(char),
}

/// A new, empty RTT histogram in µs with the bench's bounds and precision.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(RTT_LOW_US, RTT_HIGH_US, RTT_SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// The numbers of a histogram that go into a results row, all in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RttSummary {
    /// Number of samples.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample (highest equivalent value of its bucket).
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// Summarises `h` (µs); an empty histogram gives all zeros.
pub fn summarize(h: &Histogram<u64>) -> RttSummary {
    if h.is_empty() {
        return RttSummary::default();
    }
    RttSummary {
        count: h.len(),
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        mean: h.mean(),
    }
}

/// The seven histograms a cell saves, and the file stem of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Series {
    /// Raw heartbeat RTT, send → reply; timeouts as censored "≥" samples (`<cell>`).
    Rtt,
    /// Heartbeat RTT from the *scheduled* send, one sample per tick (`<cell>.corrected`).
    Corrected,
    /// Heartbeat tick lag, scheduled → actual send (`<cell>.tick_lag`).
    TickLag,
    /// Rail submit (R3) latency seen by the workers; timeouts censored (`<cell>.rail`).
    Rail,
    /// Heartbeat gaps: last acknowledged send → next acknowledgement's
    /// receipt, plus one censored gap per session lost at its deadline (`<cell>.gap`).
    Gap,
    /// Raw lease renewal (L5) RTT; timeouts censored (`<cell>.renew`).
    Renew,
    /// Renewal RTT from the scheduled heartbeat tick that sent it (`<cell>.renew_corrected`).
    RenewCorrected,
}

impl Series {
    /// Every series, in the order they are saved.
    pub const ALL: [Series; 7] = [
        Series::Rtt,
        Series::Corrected,
        Series::TickLag,
        Series::Rail,
        Series::Gap,
        Series::Renew,
        Series::RenewCorrected,
    ];

    /// The file stem of this series of `cell`.
    pub fn stem(self, cell: &str) -> String {
        match self {
            Series::Rtt => cell.to_owned(),
            Series::Corrected => format!("{cell}.corrected"),
            Series::TickLag => format!("{cell}.tick_lag"),
            Series::Rail => format!("{cell}.rail"),
            Series::Gap => format!("{cell}.gap"),
            Series::Renew => format!("{cell}.renew"),
            Series::RenewCorrected => format!("{cell}.renew_corrected"),
        }
    }

    /// What the values are, for the `.hgrm` header.
    pub fn title(self) -> &'static str {
        match self {
            Series::Rtt => "heartbeat RTT (raw; timeouts censored at their give-up time)",
            Series::Corrected => {
                "heartbeat RTT corrected for coordinated omission (from the scheduled send)"
            }
            Series::TickLag => "heartbeat tick lag (scheduled -> actual send)",
            Series::Rail => "rail submit (R3) latency seen by the workers (timeouts censored)",
            Series::Gap => {
                "heartbeat gaps (last acknowledged send -> next acknowledgement; lost sessions censored)"
            }
            Series::Renew => {
                "lease renewal (L5) RTT (raw; timeouts censored at their give-up time)"
            }
            Series::RenewCorrected => {
                "lease renewal (L5) RTT from the scheduled heartbeat tick that sent it"
            }
        }
    }
}

/// The seven histograms of a worker or a cell, one per [`Series`] (µs).
#[derive(Clone, Debug)]
pub struct Histograms {
    /// [`Series::Rtt`].
    pub rtt: Histogram<u64>,
    /// [`Series::Corrected`].
    pub corrected: Histogram<u64>,
    /// [`Series::TickLag`].
    pub tick_lag: Histogram<u64>,
    /// [`Series::Rail`].
    pub rail: Histogram<u64>,
    /// [`Series::Gap`].
    pub gap: Histogram<u64>,
    /// [`Series::Renew`].
    pub renew: Histogram<u64>,
    /// [`Series::RenewCorrected`].
    pub renew_corrected: Histogram<u64>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            rtt: new_histogram(),
            corrected: new_histogram(),
            tick_lag: new_histogram(),
            rail: new_histogram(),
            gap: new_histogram(),
            renew: new_histogram(),
            renew_corrected: new_histogram(),
        }
    }
}

impl Histograms {
    /// One series.
    pub fn get(&self, series: Series) -> &Histogram<u64> {
        match series {
            Series::Rtt => &self.rtt,
            Series::Corrected => &self.corrected,
            Series::TickLag => &self.tick_lag,
            Series::Rail => &self.rail,
            Series::Gap => &self.gap,
            Series::Renew => &self.renew,
            Series::RenewCorrected => &self.renew_corrected,
        }
    }

    /// Merges `other` into `self`, series by series.
    pub fn add(&mut self, other: &Histograms) -> Result<(), HistError> {
        self.rtt.add(&other.rtt)?;
        self.corrected.add(&other.corrected)?;
        self.tick_lag.add(&other.tick_lag)?;
        self.rail.add(&other.rail)?;
        self.gap.add(&other.gap)?;
        self.renew.add(&other.renew)?;
        self.renew_corrected.add(&other.renew_corrected)?;
        Ok(())
    }

    /// Writes every series of `cell` under `dir` ([`save_series`]).
    pub fn save(&self, dir: &Path, cell: &str) -> Result<(), HistError> {
        for series in Series::ALL {
            save_series(dir, cell, series, self.get(series))?;
        }
        Ok(())
    }
}

/// Path of the text percentile distribution of `cell`'s raw RTT.
pub fn hgrm_path(dir: &Path, cell: &str) -> PathBuf {
    dir.join(HGRM_DIR).join(format!("{cell}.hgrm"))
}

/// Path of the lossless encoding of `cell`'s raw RTT.
pub fn hdr_path(dir: &Path, cell: &str) -> PathBuf {
    series_hdr_path(dir, cell, Series::Rtt)
}

/// Path of the lossless encoding of one series of `cell`.
pub fn series_hdr_path(dir: &Path, cell: &str, series: Series) -> PathBuf {
    dir.join(HGRM_DIR)
        .join(format!("{}.hdr", series.stem(cell)))
}

/// Writes `hgrm/<cell>.hgrm` and `hgrm/<cell>.hdr` (the raw RTT) under `dir`.
pub fn save_histogram(dir: &Path, cell: &str, h: &Histogram<u64>) -> Result<(), HistError> {
    save_series(dir, cell, Series::Rtt, h)
}

/// `dir/hgrm/`, created, for the files of `cell`: refused when the cell id
/// cannot name a file.
pub fn hgrm_dir_for(dir: &Path, cell: &str) -> Result<PathBuf, HistError> {
    if cell.is_empty() || cell.contains(['/', '\\']) || cell == "." || cell == ".." {
        return Err(HistError::BadCellId(cell.to_owned()));
    }
    let hgrm_dir = dir.join(HGRM_DIR);
    std::fs::create_dir_all(&hgrm_dir).map_err(|source| HistError::CreateDir {
        path: hgrm_dir.clone(),
        source,
    })?;
    Ok(hgrm_dir)
}

/// Writes `hgrm/<stem>.hgrm` and `hgrm/<stem>.hdr` of one series of `cell` under `dir`.
pub fn save_series(
    dir: &Path,
    cell: &str,
    series: Series,
    h: &Histogram<u64>,
) -> Result<(), HistError> {
    let hgrm_dir = hgrm_dir_for(dir, cell)?;
    let stem = series.stem(cell);
    let write = |path: PathBuf, text: String| {
        std::fs::write(&path, text).map_err(|source| HistError::Write { path, source })
    };

    let text = percentile_distribution(&format!("{} of cell {cell}", series.title()), h);
    write(hgrm_dir.join(format!("{stem}.hgrm")), text)?;

    let text = encode(h).map_err(|source| HistError::Encode { stem, source })?;
    write(series_hdr_path(dir, cell, series), format!("{text}\n"))
}

/// The lossless one-line form of `h`: V2 deflate encoding, base64 (the `.hdr`
/// file's content; also how a worker process hands its histogram over).
pub fn encode(h: &Histogram<u64>) -> Result<String, EncodeError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(EncodeError)?;
    Ok(base64::encode(&bytes))
}

/// Reads back what [`encode`] wrote.
pub fn decode(text: &str) -> Result<Histogram<u64>, DecodeError> {
    let bytes = base64::decode(text.trim()).map_err(DecodeError::NotBase64)?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| DecodeError::NotV2(Flat(e)))
}

/// Reads `hgrm/<cell>.hdr` (the raw RTT) under `dir` back into a histogram (µs).
pub fn load_histogram(dir: &Path, cell: &str) -> Result<Histogram<u64>, HistError> {
    load_series(dir, cell, Series::Rtt)
}

/// Reads one series of `cell` back into a histogram (µs).
pub fn load_series(dir: &Path, cell: &str, series: Series) -> Result<Histogram<u64>, HistError> {
    let path = series_hdr_path(dir, cell, series);
    match std::fs::read_to_string(&path) {
        Ok(text) => decode(&text).map_err(|source| HistError::Decode { path, source }),
        Err(source) => Err(HistError::Read { path, source }),
    }
}

/// The CDF of `h` (µs) as `(RTT ms, cumulative fraction)` points, starting at
/// the lowest sample with fraction 0; empty for an empty histogram.
pub fn cdf_points_ms(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points = vec![(h.lowest_equivalent(h.min()) as f64 / 1000.0, 0.0)];
    points.extend(h.iter_recorded().map(|v| {
        (
            h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0,
            v.quantile(),
        )
    }));
    points
}

/// The percentile spectrum of `h` (µs) as `(1 / (1 − q), value ms)` points,
/// q < 1 (5 ticks per half distance, as the `.hgrm` text): on a log x axis
/// p90, p99, p99.9 and p99.99 sit at 10, 100, 1,000 and 10,000, so the tail
/// is as visible as the median. Empty for an empty histogram.
pub fn spectrum_points_ms(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(5)
        .map(|v| (v.quantile_iterated_to(), v.value_iterated_to()))
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, v)| (1.0 / (1.0 - q), h.highest_equivalent(v) as f64 / 1000.0))
        .collect()
}

/// A distribution-free 95 % interval of the `q` quantile of `h` (µs): the
/// values at ranks `n·q ± 1.96·√(n·q·(1 − q))` (the binomial order-statistic
/// interval). It assumes independent samples; heartbeats within one stall are
/// not, so the interval is too narrow when stalls dominate the tail. `None`
/// without samples.
pub fn quantile_ci95(h: &Histogram<u64>, q: f64) -> Option<(u64, u64)> {
    if h.is_empty() {
        return None;
    }
    let n = h.len() as f64;
    let half = 1.96 * (n * q * (1.0 - q)).sqrt();
    let rank = |r: f64| (r.clamp(1.0, n) / n).clamp(0.0, 1.0);
    Some((
        h.value_at_quantile(rank((n * q - half).floor())),
        h.value_at_quantile(rank((n * q + half).ceil() + 1.0)),
    ))
}

/// The classic HdrHistogram `outputPercentileDistribution` text (5 ticks per
/// half distance, value unit ratio 1), preceded by `#` comment lines naming
/// what is measured (`what`) and the unit.
pub fn percentile_distribution(what: &str, h: &Histogram<u64>) -> String {
    let mut out = String::new();
    // `write!` into a String cannot fail.
    let _ = writeln!(out, "# {what}; values in microseconds (us)");
    let _ = writeln!(
        out,
        "# HdrHistogram bounds [{}, {}], {} significant digits",
        h.low(),
        h.high(),
        h.sigfig()
    );
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let value = h.highest_equivalent(v.value_iterated_to()) as f64;
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:12.3} {q:2.12} {total:10} {:14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:12.3} {q:2.12} {total:10}");
            }
        }
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean(), h.stdev(), h.max() as f64)
    };
    let _ = writeln!(
        out,
        "#[Mean    = {mean:12.3}, StdDeviation   = {stdev:12.3}]"
    );
    let _ = writeln!(
        out,
        "#[Max     = {max:12.3}, Total count    = {:12}]",
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        sub_bucket_count(h)
    );
    out
}

/// Sub-buckets per bucket, as HdrHistogram derives it from the precision:
/// the next power of two ≥ 2 × 10^sigfig.
fn sub_bucket_count(h: &Histogram<u64>) -> u64 {
    (2 * 10u64.pow(u32::from(h.sigfig()))).next_power_of_two()
}

/// Standard base64 (RFC 4648, with padding); the bench has no base64 dependency
/// and the `.hdr` files are small.
mod base64 {
    use super::Base64Error;

    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    /// Encodes `bytes` with padding.
    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                chunk.get(1).copied().unwrap_or(0),
                chunk.get(2).copied().unwrap_or(0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    /// Decodes padded standard base64; rejects any other character.
    pub fn decode(text: &str) -> Result<Vec<u8>, Base64Error> {
        let text = text.as_bytes();
        if !text.len().is_multiple_of(4) {
            return Err(Base64Error::Length(text.len()));
        }
        let mut out = Vec::with_capacity(text.len() / 4 * 3);
        for (index, quad) in text.chunks(4).enumerate() {
            let last = index + 1 == text.len() / 4;
            let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
            if pad > 2 || (pad > 0 && !last) {
                return Err(Base64Error::MisplacedPadding);
            }
            let mut n = 0u32;
            for &c in &quad[..4 - pad] {
                let v = ALPHABET
                    .iter()
                    .position(|&a| a == c)
                    .ok_or(Base64Error::InvalidCharacter(c as char))?;
                n = (n << 6) | v as u32;
            }
            n <<= 6 * pad as u32;
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        Ok(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn rfc4648_vectors_round_trip() {
            for (plain, coded) in [
                ("", ""),
                ("f", "Zg=="),
                ("fo", "Zm8="),
                ("foo", "Zm9v"),
                ("foob", "Zm9vYg=="),
                ("fooba", "Zm9vYmE="),
                ("foobar", "Zm9vYmFy"),
            ] {
                assert_eq!(encode(plain.as_bytes()), coded);
                assert_eq!(decode(coded).unwrap(), plain.as_bytes());
            }
            assert!(decode("Zm9=v").is_err());
            assert_eq!(decode("Zm9"), Err(Base64Error::Length(3)));
            assert_eq!(decode("Zm9*"), Err(Base64Error::InvalidCharacter('*')));
            assert_eq!(decode("Zg==Zg=="), Err(Base64Error::MisplacedPadding));
        }
    }
}
