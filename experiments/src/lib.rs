//! `experiments`: fencepost's fault experiments (issue 6). Each one runs the
//! real code — the lock-server and rail-stub as child processes, the SDK
//! payout worker from `bench`, or the server's pure lock table and the SDK's
//! deadline arithmetic over fake clocks — and writes the bench's results
//! layout: `manifest.json` (with the seed), a JSON/CSV of the numbers, plots
//! as SVG and PNG, and a `report.md` section.
//!
//! - [`pause`]: a worker in its own OS process is SIGSTOPped inside its
//!   critical section for longer than its lease (T-042, UC-03);
//! - [`clock`]: a deterministic simulation of client and server clocks with
//!   offset, drift, quantisation and steps against the server's grace (T-043);
//! - [`throttle`]: worker processes under a cgroup CPU quota vs unthrottled.
//!
//! [`worker_proc`] is the hidden `experiments worker` subcommand those
//! experiments start as child processes; [`output`] and [`plots`] are the
//! shared results plumbing.

pub mod cgroup;
pub mod cli;
pub mod clock;
pub mod output;
pub mod pause;
pub mod plots;
pub mod throttle;
pub mod worker_proc;
