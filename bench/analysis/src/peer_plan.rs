//! The plan of a `bench peer` run ([`PeerPlan`]): what `bench peer`
//! checked from its flags and records in `manifest.json`, including the
//! live-sessions dimension ([`SessionsPlan`]).

use std::path::PathBuf;

use bench_core::peer::{PeerHttpClient, PeerOp};
use serde::Serialize;

/// A checked `bench peer`.
#[derive(Clone, Debug, Serialize)]
pub struct PeerPlan {
    /// The command line, as given.
    pub argv: Vec<String>,
    /// Measured window per measurement, s.
    pub duration_s: f64,
    /// Unmeasured warm-up before each window, s.
    pub warmup_s: f64,
    /// Concurrency levels (clients, each its own connection and session).
    pub concurrency: Vec<usize>,
    /// Repeats of the whole interleaved sequence.
    pub repeats: u32,
    /// Operations, in run order.
    pub ops: Vec<PeerOp>,
    /// fencepost stores: `sqlite`, `postgres`.
    pub stores: Vec<String>,
    /// Why a default store was left out (no PostgreSQL given), if one was.
    pub skipped: Vec<String>,
    /// The PostgreSQL for the postgres store (password redacted in the manifest).
    #[serde(skip)]
    pub pg_url: Option<String>,
    /// An etcd to measure instead of starting one.
    pub etcd_url: Option<String>,
    /// The redis-servers started beside them, one system each, by the
    /// store they run on: `memory` (no persistence), `aof-everysec`,
    /// `aof-always` (`--redis`); empty when Redis is not measured.
    #[serde(default)]
    pub redis_stores: Vec<String>,
    /// A Redis to measure instead of starting one (`--redis-url`; its rows'
    /// store is `external`).
    #[serde(default)]
    pub redis_url: Option<String>,
    /// The PostgreSQL cluster's directory (`--pg-dir`), where the postgres
    /// store's fsync ceiling is measured; without it that ceiling is not.
    /// Not written to the manifest: it is a scratch path of the machine that
    /// ran (the rows say whether the ceiling was measured).
    #[serde(default, skip_serializing)]
    pub pg_dir: Option<PathBuf>,
    /// The HTTP clients that drive the lock-server (`--http-client`), in order.
    pub http_clients: Vec<PeerHttpClient>,
    /// Orders the systems within each (repeat, op, concurrency).
    pub seed: u64,
    /// The output directory.
    pub out: PathBuf,
    /// The live-sessions dimension (`--sessions`): when given, the run
    /// measures it instead of the ops × concurrency grid.
    #[serde(default)]
    pub sessions: Option<SessionsPlan>,
}

/// `bench peer --sessions`: N live sessions (fencepost) and N leases (etcd)
/// kept alive on the SDK's schedule, for each N.
#[derive(Clone, Debug, Serialize)]
pub struct SessionsPlan {
    /// The live-session counts, in run order (`--sessions`).
    pub counts: Vec<usize>,
    /// The session TTL (fencepost) and lease TTL (etcd, rounded up to whole
    /// seconds), s (`--session-ttl`).
    pub ttl_s: f64,
    /// The SDK's safety margin (`--margin`): the heartbeat period is
    /// `ttl × (1 − margin) / 3`.
    pub margin: f64,
    /// The heartbeat period that follows, s.
    pub period_s: f64,
    /// Connections (fencepost) / keep-alive streams, each on its own
    /// connection (etcd) the sessions are spread over (`--connections`).
    pub connections: usize,
    /// Each window is at least long enough for this many scheduled
    /// heartbeats (a p99 needs about 1,000).
    pub min_heartbeats: u64,
}
