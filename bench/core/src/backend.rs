//! Which lock service a run measures: the `--backend` flag's values and the
//! results' `backend` column.

use serde::{Deserialize, Serialize};

/// Which lock service a worker (and a stack) uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// fencepost's lock-server through the SDK (C1/C3).
    #[default]
    Fencepost,
    /// etcd v3 through the driver's etcd adapter.
    Etcd,
}

impl BackendKind {
    /// Both backends, in report order.
    pub const ALL: [BackendKind; 2] = [BackendKind::Fencepost, BackendKind::Etcd];

    /// The flag value and results-column value: `fencepost` or `etcd`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Fencepost => "fencepost",
            BackendKind::Etcd => "etcd",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for BackendKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "fencepost" => Ok(BackendKind::Fencepost),
            "etcd" => Ok(BackendKind::Etcd),
            other => Err(format!(
                "unknown backend {other:?}: expected fencepost or etcd"
            )),
        }
    }
}
