//! `bench-driver`: runs fencepost's measured cells. A cell is one measured
//! run of the payout workload at one configuration; [`cell::measure`] is the
//! only place that opens and closes a measured window, and returns a
//! [`cell::Measurement`] — what was measured, not yet a results row.
//!
//! - [`cell`]: the cell's plan, its run and window, its pool of workers, its
//!   services ([`cell::Stack`]) and the faults the stack injects;
//! - [`worker`]: the payout worker, generic over the lock service;
//! - [`worker_process`]: the payout worker in its own OS process, both
//!   sides of its protocol (one serialised spec in, JSON lines out);
//! - [`backend`]: the lock services a worker runs on (fencepost's SDK, etcd);
//! - [`rail`]: the rail-stub client a worker pays through;
//! - [`row`]: a cell's measurement becomes its results row;
//! - [`proxy`]: the in-process delay proxy between workers and lock-server;
//! - [`docker`]: the `--runtime docker` services;
//! - [`telemetry`]: `--metrics-listen`, the bench as a Prometheus target
//!   (the running cell's SDK metrics, and its services by HTTP discovery);
//! - [`peer`]: `bench peer`'s closed-loop load, and [`peer_http`]: the HTTP
//!   client it drives the lock-server with (the SDK's, or hyper's pooled one);
//!   [`peer_sessions`]: `bench peer --sessions`, N live sessions or leases
//!   kept alive open loop over [`peer_sessions_conn`]'s connections.
//!
//! Every boundary that fails returns its own `thiserror` enum, whose message
//! is its own context and whose `source()` is the cause; print one with
//! [`bench_core::error::Chain`] to see the causes too.
//!
//! The driver records a history ([`bench_history`]) and reads the shared
//! vocabulary ([`bench_core`]); of the analysis ([`bench_analysis`]) it
//! knows only the results row it fills ([`row`]: a [`cell::Measurement`]
//! becomes a `CellRow`), none of the statistics or reports.

pub mod backend;
pub mod cell;
pub mod docker;
pub mod peer;
pub mod peer_http;
pub mod peer_redis;
pub mod peer_sessions;
pub mod peer_sessions_conn;
pub mod proxy;
pub mod rail;
pub mod row;
pub mod telemetry;
pub mod worker;
pub mod worker_process;
