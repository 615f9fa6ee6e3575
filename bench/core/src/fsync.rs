//! The fsync ceiling of a directory's filesystem: how many
//! `fdatasync`s per second a durable store writing there can ever get. A
//! durable grant is acknowledged after its transaction's flush, so grants/s
//! can never beat this rate times the grants each flush carries. The loop
//! writes the way a write-ahead log does in steady state: a file
//! preallocated once, then blocks of one size overwritten in order, each
//! followed by `fdatasync` (no metadata to flush, as in PostgreSQL's and
//! etcd's preallocated segments and SQLite's reused WAL).

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::peer::Sample;

/// The file the loop preallocates: one WAL segment's worth.
const FILE_BYTES: u64 = 16 << 20;

/// The probe file's name in the measured directory (removed afterwards).
pub const PROBE_FILE: &str = "fencepost-fsync-probe";

/// Why the ceiling could not be measured.
#[derive(Debug, thiserror::Error)]
#[error("fsync ceiling in {}: {error}", path.display())]
pub struct FsyncError {
    /// The probe file.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub error: std::io::Error,
}

/// Runs the loop in `dir` for `duration`, writing `block` bytes per flush;
/// the sample's `ops` are the flushes and its latency each `pwrite +
/// fdatasync`, µs. The probe file is removed afterwards.
pub fn ceiling(dir: &Path, block: usize, duration: Duration) -> Result<Sample, FsyncError> {
    let path = dir.join(PROBE_FILE);
    let io = |error| FsyncError {
        path: path.clone(),
        error,
    };
    let result = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)?;
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(FILE_BYTES >> 20) {
            f.write_all(&zeros)?;
        }
        f.sync_all()?;
        let data: Vec<u8> = (0..block).map(|i| (i % 251) as u8).collect();
        let mut latency =
            Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds");
        let blocks = (FILE_BYTES / block.max(1) as u64).max(1);
        let (start, mut ops) = (Instant::now(), 0u64);
        while start.elapsed() < duration {
            let t = Instant::now();
            f.write_all_at(&data, (ops % blocks) * block as u64)?;
            f.sync_data()?;
            let _ = latency.record(t.elapsed().as_micros().max(1) as u64);
            ops += 1;
        }
        Ok(Sample {
            ops,
            errors: 0,
            seconds: start.elapsed().as_secs_f64(),
            latency,
            first_error: None,
        })
    })();
    let _ = std::fs::remove_file(&path);
    result.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_flushes_blocks_and_leaves_no_probe_file() {
        let dir = std::env::temp_dir().join(format!("fsync-ceiling-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = ceiling(&dir, 4096, Duration::from_millis(50)).unwrap();
        assert!(s.ops >= 1, "{}", s.ops);
        assert_eq!(s.latency.len(), s.ops);
        assert!(s.ops_per_s() > 0.0);
        assert!(!dir.join(PROBE_FILE).exists());
        let e = ceiling(&dir.join("missing"), 4096, Duration::from_millis(1)).unwrap_err();
        assert!(e.to_string().contains("fencepost-fsync-probe"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
