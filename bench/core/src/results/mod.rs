//! The experiments' result files, each declared once, here — the lowest
//! crate both their writer (`experiments`) and their readers (`bench-report`,
//! the experiments' tests) import: [`pause`] (`pause.json`) and [`clock`]
//! (`clock.json`). The other result files have one type already where they
//! are written and read: `chaos.json`, `failover.json` and `throttle.json`
//! in `experiments` (only it and its tests read them), `peer.csv` in
//! `bench-analysis` (`bench_analysis::peer`), and a worker process's final
//! line in `bench-driver` (`bench_driver::worker_process::WorkerLine`).
//!
//! Every field has a default (`#[serde(default)]` on each type): a file that
//! predates a field, or one a reader was given with only the fields it uses,
//! still parses — as it did when each reader declared only its own fields.
//! What is written is unchanged, byte for byte.

pub mod clock;
pub mod pause;
