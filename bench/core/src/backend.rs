//! Which lock service a run measures: the `--backend` flag's values and the
//! results' `backend` column; and whether the rail checked fencing tokens
//! (the results' `rail_fences` column).

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
    /// One Redis instance through the driver's redis adapter (`SET NX PX`,
    /// a per-key `INCR` counter as the fencing token).
    Redis,
    /// Redlock over N independent Redis instances (a majority); no fencing
    /// token, so the rail runs with its fences off.
    Redlock,
}

impl BackendKind {
    /// Every backend, in report order.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Fencepost,
        BackendKind::Etcd,
        BackendKind::Redis,
        BackendKind::Redlock,
    ];

    /// The flag value and results-column value: `fencepost`, `etcd`, `redis`
    /// or `redlock`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Fencepost => "fencepost",
            BackendKind::Etcd => "etcd",
            BackendKind::Redis => "redis",
            BackendKind::Redlock => "redlock",
        }
    }

    /// Whether the backend hands out fencing tokens the rail can check
    /// (every one but redlock).
    pub fn has_fencing_tokens(self) -> bool {
        self != BackendKind::Redlock
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
        let s = s.trim();
        BackendKind::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| {
                format!("unknown backend {s:?}: expected fencepost, etcd, redis or redlock")
            })
    }
}

/// Whether the rail-stub compared fencing tokens (fence 1 on claim, fence 2
/// on submit): the results' `rail_fences` column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RailFences {
    /// Both fences on: the rail refuses a stale token (every backend with tokens).
    #[default]
    On,
    /// Both fences off (`rail-stub --fences off`): no token is compared, a
    /// stale holder pays (redlock, which has no token; the chaos
    /// experiment's sabotage).
    Off,
}

impl RailFences {
    /// The column value: `on` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            RailFences::On => "on",
            RailFences::Off => "off",
        }
    }
}

impl std::fmt::Display for RailFences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_parses_from_its_own_name_in_report_order() {
        let names: Vec<&str> = BackendKind::ALL.iter().map(|b| b.as_str()).collect();
        assert_eq!(names, ["fencepost", "etcd", "redis", "redlock"]);
        for b in BackendKind::ALL {
            assert_eq!(b.as_str().parse::<BackendKind>(), Ok(b));
        }
    }

    #[test]
    fn an_unknown_backend_is_refused_naming_every_choice() {
        let e = "zookeeper".parse::<BackendKind>().unwrap_err();
        assert_eq!(
            e,
            "unknown backend \"zookeeper\": expected fencepost, etcd, redis or redlock"
        );
    }

    #[test]
    fn only_redlock_has_no_fencing_token() {
        let without: Vec<BackendKind> = BackendKind::ALL
            .into_iter()
            .filter(|b| !b.has_fencing_tokens())
            .collect();
        assert_eq!(without, [BackendKind::Redlock]);
    }
}
