//! The vocabulary of `bench peer`: the operation a measurement loops, the
//! HTTP client that drives the lock-server, and what one measured window
//! counted. The driver produces a [`Sample`], the
//! analysis turns it into a `peer.csv` row.

use hdrhistogram::Histogram;
use serde::Serialize;

/// The operation a measurement loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerOp {
    /// L2 vs LeaseKeepAlive vs Redis's renew script.
    Heartbeat,
    /// L4 + L6 vs the acquire txn + the guarded delete vs Redis's acquire
    /// script + the compare-owner `DEL`.
    Grant,
    /// The floor under the heartbeat: the cheapest request each
    /// server answers through the same client — fencepost's `GET /healthz`,
    /// etcd's serializable `Range` of a missing key, Redis's `PING`. Heartbeat ÷ floor says
    /// how much of a heartbeat's cost is the server's own work.
    Floor,
    /// Not a request: the fsync ceiling of the store's own directory
    /// ([`crate::fsync`]), once per repeat and store, beside the grants.
    Fsync,
}

impl PeerOp {
    /// The `op` column value.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerOp::Heartbeat => "heartbeat",
            PeerOp::Grant => "grant",
            PeerOp::Floor => "floor",
            PeerOp::Fsync => "fsync",
        }
    }
}

impl std::str::FromStr for PeerOp {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "heartbeat" => Ok(PeerOp::Heartbeat),
            "grant" => Ok(PeerOp::Grant),
            "floor" => Ok(PeerOp::Floor),
            "fsync" => Ok(PeerOp::Fsync),
            other => Err(format!(
                "unknown op {other:?}: expected heartbeat, grant, floor or fsync"
            )),
        }
    }
}

/// What one measurement counted.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Successful operations that started in the window.
    pub ops: u64,
    /// Failed or timed-out operations that started in the window.
    pub errors: u64,
    /// From the window's start until the last operation of it ended, s.
    pub seconds: f64,
    /// Latency of every successful operation, µs.
    pub latency: Histogram<u64>,
    /// The first error seen (warm-up included), for the log.
    pub first_error: Option<String>,
}

impl Sample {
    /// Successful operations per second.
    pub fn ops_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ops as f64 / self.seconds
        } else {
            0.0
        }
    }
}

impl Serialize for PeerOp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Which HTTP client drives the lock-server (the `--http-client` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerHttpClient {
    /// The SDK's client (`fencepost_sdk::http`): what an SDK user gets.
    Sdk,
    /// `hyper_util::client::legacy::Client` over an `HttpConnector`.
    HyperLegacy,
}

impl PeerHttpClient {
    /// Both clients, in flag order.
    pub const ALL: [PeerHttpClient; 2] = [PeerHttpClient::Sdk, PeerHttpClient::HyperLegacy];

    /// The flag value and the `client` column of `peer.csv`.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerHttpClient::Sdk => "sdk",
            PeerHttpClient::HyperLegacy => "hyper-legacy",
        }
    }
}

impl std::str::FromStr for PeerHttpClient {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "sdk" => Ok(PeerHttpClient::Sdk),
            "hyper-legacy" => Ok(PeerHttpClient::HyperLegacy),
            other => Err(format!(
                "unknown HTTP client {other:?}: expected sdk or hyper-legacy"
            )),
        }
    }
}

impl Serialize for PeerHttpClient {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Removes the server data a finished `bench peer` run leaves under `dir`
/// (SQLite files, etcd's and redis-server's data directories), keeping the logs. Best effort:
/// what cannot be removed stays.
pub fn remove_server_data(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name()
                .is_some_and(|n| n == "etcd-data" || n == "redis-data")
            {
                let _ = std::fs::remove_dir_all(&p);
            } else {
                remove_server_data(&p);
            }
        } else if p.extension().is_none_or(|x| x != "log") {
            let _ = std::fs::remove_file(&p);
        }
    }
}
