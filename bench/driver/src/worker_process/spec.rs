//! What a worker process is asked to do, as one serialised value
//! ([`WorkerSpec`], the JSON of its `--spec` argument): the serialisable part
//! of a [`WorkerEnv`] — the SDK's own [`MarginPolicy`] among it, through a
//! serde mirror the compiler checks against the SDK's type — its index, its
//! [`WorkerMode`], and the chaos experiment's history file and self-freezes
//! ([`Freezes`]).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use bench_core::backend::BackendKind;
use fencepost_api::latency::LatencySpec;
use fencepost_sdk::{MarginPolicy, MarginSummary};
use serde::{Deserialize, Serialize};

use crate::worker::env::{ClaimHook, WorkerEnv};

/// The serde mirror of the SDK's [`MarginPolicy`] (checked field by field
/// against it by serde's `remote` derive).
#[derive(Serialize, Deserialize)]
#[serde(remote = "MarginPolicy", rename_all = "snake_case")]
enum MarginPolicyDef {
    /// [`MarginPolicy::Fixed`].
    Fixed(f64),
    /// [`MarginPolicy::Adaptive`].
    Adaptive {
        /// `k`.
        k: f64,
        /// `floor`.
        floor: f64,
        /// `ceiling`.
        ceiling: f64,
    },
}

/// The serde mirror of the SDK's [`MarginSummary`].
#[derive(Serialize, Deserialize)]
#[serde(remote = "MarginSummary")]
struct MarginSummaryDef {
    count: u64,
    sum_ppm: u64,
    min_ppm: u64,
    max_ppm: u64,
}

/// The SDK's [`MarginSummary`] of a worker process (the margins applied to
/// its lease deadlines, `margin_effective`), as its `done` line carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedMargins(#[serde(with = "MarginSummaryDef")] pub MarginSummary);

/// What a worker process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerMode {
    /// Reads `round FIRST COUNT PAUSE_AT` commands on stdin (the pause experiment).
    Rounds,
    /// Works payouts `first..first + count` until told `stop` (the throttle
    /// and chaos experiments, and every cell whose pool spawns processes).
    Continuous {
        /// The first payout number.
        first: u64,
        /// How many payouts.
        count: u64,
    },
}

/// Where a worker process records its operations (the chaos experiment's
/// history, [`bench_history`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySpec {
    /// The JSON-lines file it appends to.
    pub path: PathBuf,
    /// This process's name in the history (`w0`, …).
    pub proc_name: String,
}

/// Everything a worker process is given, in one value: the parent writes it
/// ([`WorkerSpec::new`] from the cell's [`WorkerEnv`]), the child reads it
/// back ([`WorkerSpec::env`]) — the same environment, nothing re-encoded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The worker's index (owner id, seed offset).
    pub idx: u64,
    /// The lock service `lock_url` points at.
    pub backend: BackendKind,
    /// The lock-server (or the delay proxy, etcd's client URL, or the redis URL(s)).
    pub lock_url: String,
    /// The CA bundle the SDK trusts for an `https://` `lock_url`.
    #[serde(default)]
    pub tls_ca: Option<PathBuf>,
    /// The rail-stub.
    pub rail_url: String,
    /// The lease each acquire asks for.
    pub lease: Duration,
    /// The session TTL.
    pub session_ttl: Duration,
    /// The heartbeat divisor k.
    pub heartbeat_divisor: u32,
    /// The SDK's margin policy, as the SDK's own type.
    #[serde(with = "MarginPolicyDef")]
    pub margin: MarginPolicy,
    /// `rail.read.timeout` (scaled).
    pub rail_read_timeout: Duration,
    /// What D4 requires before a submit (scaled).
    pub worst_case_hop: Duration,
    /// When false, the worker skips its client check (UC-03).
    pub client_check: bool,
    /// How long one acquire may wait for a held key.
    pub acquire_budget: Duration,
    /// R7's id prefix of the backlog.
    pub payout_prefix: String,
    /// The run's seed (the worker seeds its SDK with `seed + idx`).
    pub seed: u64,
    /// Rounds or continuous.
    pub mode: WorkerMode,
    /// Chaos: record every operation here.
    #[serde(default)]
    pub history: Option<HistorySpec>,
    /// Chaos: where the process freezes itself.
    #[serde(default)]
    pub freezes: Freezes,
    /// Chaos: take the backlog in an order shuffled within blocks of this many payouts.
    #[serde(default)]
    pub shuffle_block: Option<u64>,
    /// The payout's work (scaled), as its `--hold` text; `None`: none.
    #[serde(default, with = "opt_latency", skip_serializing_if = "Option::is_none")]
    pub hold: Option<LatencySpec>,
    /// The steps of one logical payout (≥ 1).
    #[serde(default = "one_step")]
    pub steps: u32,
}

/// A spec written before multi-step payouts: one step.
fn one_step() -> u32 {
    1
}

/// An optional [`LatencySpec`] as its text (`fixed:…`, `uniform:…`,
/// `lognormal:…`), the form [`LatencySpec`]'s `FromStr` reads back.
mod opt_latency {
    use fencepost_api::latency::LatencySpec;
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<LatencySpec>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(l) => s.serialize_some(&l.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LatencySpec>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

impl WorkerSpec {
    /// Worker `idx` of `env`, in `mode`; no history, no freezes.
    pub fn new(idx: u64, env: &WorkerEnv, mode: WorkerMode) -> Self {
        WorkerSpec {
            idx,
            backend: env.backend,
            lock_url: env.lock_url.clone(),
            tls_ca: env.tls_ca.clone(),
            rail_url: env.rail_url.clone(),
            lease: env.lease,
            session_ttl: env.session_ttl,
            heartbeat_divisor: env.heartbeat_divisor,
            margin: env.margin,
            rail_read_timeout: env.rail_read_timeout,
            worst_case_hop: env.worst_case_hop,
            client_check: env.client_check,
            acquire_budget: env.acquire_budget,
            payout_prefix: env.payout_prefix.clone(),
            seed: env.seed,
            mode,
            history: None,
            freezes: Freezes::default(),
            shuffle_block: None,
            hold: env.hold,
            steps: env.steps,
        }
    }

    /// The worker's environment (the inverse of [`WorkerSpec::new`]), with
    /// the claim `hook`; its history and step hook are the child's to add.
    pub fn env(&self, on_claimed: Option<ClaimHook>) -> WorkerEnv {
        WorkerEnv {
            backend: self.backend,
            lock_url: self.lock_url.clone(),
            tls_ca: self.tls_ca.clone(),
            rail_url: self.rail_url.clone(),
            lease: self.lease,
            session_ttl: self.session_ttl,
            heartbeat_divisor: self.heartbeat_divisor,
            margin: self.margin,
            rail_read_timeout: self.rail_read_timeout,
            worst_case_hop: self.worst_case_hop,
            client_check: self.client_check,
            acquire_budget: self.acquire_budget,
            payout_prefix: self.payout_prefix.clone(),
            seed: self.seed,
            hold: self.hold,
            steps: self.steps.max(1),
            on_claimed,
            on_step: None,
            history: None,
            prometheus: None,
        }
    }

    /// The `--spec` argument: the spec as one line of JSON.
    pub fn to_arg(&self) -> String {
        serde_json::to_string(self).expect("a WorkerSpec serialises")
    }
}

impl FromStr for WorkerSpec {
    type Err = serde_json::Error;

    /// The `--spec` argument back ([`WorkerSpec::to_arg`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        serde_json::from_str(s)
    }
}

/// Where a worker process freezes itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreezeStep {
    /// After its client check passed, before the submit ([`crate::worker::Step::Checked`]).
    Checked,
    /// Between payouts ([`crate::worker::Step::Idle`]).
    Idle,
    /// After a leg of a multi-step payout was paid, before the next leg's
    /// claim ([`crate::worker::Step::LegPaid`]).
    LegPaid,
}

/// One self-freeze: at the `nth` time the worker reaches `step`, for `for_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreezePoint {
    /// The step.
    pub step: FreezeStep,
    /// Which time it reaches it (1-based).
    pub nth: u64,
    /// How long it stays stopped, ms.
    pub for_ms: u64,
}

/// A worker's self-freezes; written `checked@2:800,leg@1:6400,idle@5:300` (ms).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Freezes(pub Vec<FreezePoint>);

impl fmt::Display for Freezes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|p| {
                let step = match p.step {
                    FreezeStep::Checked => "checked",
                    FreezeStep::Idle => "idle",
                    FreezeStep::LegPaid => "leg",
                };
                format!("{step}@{}:{}", p.nth, p.for_ms)
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl FromStr for Freezes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let bad = || {
                format!("{part:?} is not STEP@N:MS (STEP checked, leg or idle), e.g. checked@2:800")
            };
            let (step, rest) = part.trim().split_once('@').ok_or_else(bad)?;
            let (nth, ms) = rest.split_once(':').ok_or_else(bad)?;
            let step = match step {
                "checked" => FreezeStep::Checked,
                "idle" => FreezeStep::Idle,
                "leg" => FreezeStep::LegPaid,
                _ => return Err(bad()),
            };
            let nth: u64 = nth.parse().map_err(|_| bad())?;
            if nth == 0 {
                return Err(bad());
            }
            out.push(FreezePoint {
                step,
                nth,
                for_ms: ms.parse().map_err(|_| bad())?,
            });
        }
        Ok(Freezes(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(margin: MarginPolicy) -> WorkerSpec {
        WorkerSpec {
            idx: 3,
            backend: BackendKind::Etcd,
            lock_url: "http://127.0.0.1:1".into(),
            tls_ca: None,
            rail_url: "http://127.0.0.1:2".into(),
            lease: Duration::from_micros(1_000_001),
            session_ttl: Duration::from_millis(500),
            heartbeat_divisor: 4,
            margin,
            rail_read_timeout: Duration::from_nanos(166_666_666),
            worst_case_hop: Duration::from_nanos(233_333_333),
            client_check: false,
            acquire_budget: Duration::from_millis(250),
            payout_prefix: "pause".into(),
            seed: u64::MAX,
            mode: WorkerMode::Continuous { first: 7, count: 9 },
            history: Some(HistorySpec {
                path: "h.jsonl".into(),
                proc_name: "w3".into(),
            }),
            freezes: "checked@2:800,idle@5:300".parse().unwrap(),
            shuffle_block: Some(8),
            hold: Some(LatencySpec::LogNormal {
                p50: Duration::from_nanos(666_666_667),
                p99: Duration::from_secs(2),
            }),
            steps: 3,
        }
    }

    /// The child reads back exactly what the parent wrote: the SDK's margin
    /// policy (fixed and adaptive), every duration to the nanosecond.
    #[test]
    fn a_spec_round_trips_through_its_argument() {
        for margin in [
            MarginPolicy::Fixed(0.3),
            MarginPolicy::Adaptive {
                k: 3.0,
                floor: 0.05,
                ceiling: 0.4,
            },
        ] {
            let s = spec(margin);
            let back: WorkerSpec = s.to_arg().parse().unwrap();
            assert_eq!(back, s);
            assert_eq!(back.env(None).margin, margin);
            assert_eq!(back.env(None).hold, s.hold);
            assert_eq!(back.env(None).steps, 3);
        }
    }

    /// A spec written before holds and steps reads as today's payout: no
    /// hold, one step; and a spec without a hold writes no `hold` field.
    #[test]
    fn a_spec_without_hold_or_steps_is_one_step_and_no_hold() {
        let mut s = spec(MarginPolicy::Fixed(0.3));
        s.hold = None;
        s.steps = 1;
        let arg = s.to_arg();
        assert!(!arg.contains("\"hold\""), "{arg}");
        let mut v: serde_json::Value = serde_json::from_str(&arg).unwrap();
        v.as_object_mut().unwrap().remove("steps");
        let back: WorkerSpec = serde_json::from_value(v).unwrap();
        assert_eq!((back.hold, back.steps), (None, 1));
        let bad = arg.replace("\"steps\":1", "\"hold\":\"sometimes\",\"steps\":1");
        assert!(bad.parse::<WorkerSpec>().is_err());
    }

    #[test]
    fn freezes_parse_and_print_back() {
        let f: Freezes = "checked@2:800,leg@1:6400,idle@5:300".parse().unwrap();
        assert_eq!(f.to_string(), "checked@2:800,leg@1:6400,idle@5:300");
        assert!("checked@0:1".parse::<Freezes>().is_err());
        assert!("held@1:1".parse::<Freezes>().is_err());
    }
}
