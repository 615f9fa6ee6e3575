//! `experiments`: fencepost's fault experiments. Each one runs the
//! real code — the lock-server and rail-stub as child processes, the SDK
//! payout worker of `bench-driver`, or the server's pure lock table and the SDK's
//! deadline arithmetic over fake clocks — and writes the bench's results
//! layout: `manifest.json` (with the seed), a JSON/CSV of the numbers, plots
//! as SVG and PNG, and a `report.md` section.
//!
//! - [`pause`]: a worker in its own OS process is SIGSTOPped inside its
//!   critical section for longer than its lease (T-042, UC-03);
//! - [`clock`]: a deterministic simulation of client and server clocks with
//!   offset, drift, quantisation and steps against the server's grace (T-043);
//! - [`throttle`]: worker processes under a cgroup CPU quota vs unthrottled;
//! - [`chaos`]: seeded fault schedules over live cells, every client
//!   operation recorded and the history checked.
//!
//! Pause and throttle run their cells through the bench's one cell driver
//! (`bench_driver::cell`: stack, pool, measured window); what is theirs — the pause
//! rounds, the cgroup, the claim hook — plugs into it as hooks.
//!
//! Shared modules: [`timeline`] the events a run records; [`output`] and
//! [`plots`] the results plumbing; [`cgroup`] the CPU quota; [`cli`] the
//! flags. Worker processes (the hidden `experiments worker` subcommand, and
//! the parent side that starts them) are `bench_driver::worker_process`.
//!
//! Every experiment's `run` returns its own `thiserror` error
//! (`pause::PauseError`, `clock::ClockError`, `throttle::ThrottleError`,
//! `chaos::ChaosError`, `failover::FailoverError`), whose message is its own
//! context and whose `source()` is the cause; [`output::exit_code`] prints it
//! with its causes (`bench_core::error::Chain`) and exits 1.

pub mod cgroup;
pub mod chaos;
pub mod cli;
pub mod clock;
pub mod failover;
pub mod output;
pub mod pause;
pub mod plots;
pub mod throttle;
pub mod timeline;
