//! What `--resume` compares: the expanded grid a manifest records and the
//! flags whose values differ between a recorded run and a resumed one.

use crate::runner::RunConfig;
use bench_analysis::manifest::Manifest;
use bench_core::grid::Cell;

/// The expanded grid of a run as `manifest.json` records it: every cell on
/// every backend, in run order, with its seed.
pub fn grid_of(config: &RunConfig, cells: &[Cell]) -> Vec<bench_analysis::manifest::GridCell> {
    cells
        .iter()
        .flat_map(|c| {
            config.backends.iter().map(move |&b| {
                let plan = config.on_backend(b).plan(*c);
                bench_analysis::manifest::GridCell {
                    cell: plan.id,
                    backend: b.to_string(),
                    policy: c.policy.to_string(),
                    lease_ms: c.lease.as_millis() as u64,
                    margin: c.margin,
                    repeat: c.repeat,
                    seed: plan.seed,
                }
            })
        })
        .collect()
}

/// What a configuration key recorded by a later build means when an
/// earlier manifest lacks it: the value every earlier run had.
fn absent_default(key: &str) -> Option<serde_json::Value> {
    match key {
        // Before the divisor was a flag every session heartbeat at U/3.
        "heartbeat_divisors" => Some(serde_json::json!([3])),
        _ => None,
    }
}

/// The flag a key of the recorded configuration comes from.
fn flag_of_config_key(key: &str) -> String {
    match key {
        "heartbeat_divisors" => "--heartbeat-divisor".into(),
        "runtime" => {
            "--runtime/--store/--pg-url/--lock-url/--rail-url/--lock-image/--rail-image".into()
        }
        "policies" => "--margin-policy".into(),
        "time_scale" => "--no-time-scale".into(),
        "client_check" => "--disable-client-check".into(),
        "backends" => "--backend".into(),
        "projection" => "--projection-*".into(),
        other => format!("--{}", other.replace('_', "-")),
    }
}

/// The flags whose values differ between a recorded run and a resumed one:
/// every configuration key, the grid flags (`--margin`, `--ttl`,
/// `--margin-policy`, `--repeat`), and, should those agree, the expanded
/// grid itself. Empty when the resume may go on.
pub fn changed_flags(
    old: &Manifest,
    config_now: &serde_json::Value,
    grid_flags_now: &serde_json::Value,
    grid_now: &[bench_analysis::manifest::GridCell],
) -> Vec<String> {
    let mut out = Vec::new();
    let (was, now) = (old.config.as_object(), config_now.as_object());
    if let (Some(was), Some(now)) = (was, now) {
        let mut keys: Vec<&String> = was.keys().chain(now.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let was_v = was.get(k).cloned().or_else(|| absent_default(k));
            let now_v = now.get(k).cloned().or_else(|| absent_default(k));
            if k != "seed" && was_v != now_v {
                out.push(flag_of_config_key(k));
            }
        }
    } else if old.config != *config_now {
        out.push("the configuration".into());
    }
    match (&old.grid_flags, grid_flags_now.as_object()) {
        (Some(was), Some(now)) => {
            for (k, v) in now {
                if was.get(k) != Some(v) {
                    out.push(k.clone());
                }
            }
        }
        _ => out.push("--margin/--ttl (the manifest records no grid)".into()),
    }
    if out.is_empty() && !old.grid.is_empty() && old.grid != grid_now {
        out.push("the expanded grid (--margin/--ttl/--margin-policy/--repeat)".into());
    }
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed reference sweep predates `--heartbeat-divisor`: its
    /// manifest has no `heartbeat_divisors`, which reads as `[3]`, so a
    /// resume (or replay) at the default goes on and another divisor is refused.
    #[test]
    fn a_manifest_from_before_the_divisor_reads_as_divisor_3() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../data/reference/sweep/manifest.json"
        );
        let old: Manifest = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert!(old.config.get("heartbeat_divisors").is_none());
        let grid_flags = old.grid_flags.clone().unwrap_or_default();
        let with = |k: serde_json::Value| {
            let mut now = old.config.clone();
            now["heartbeat_divisors"] = k;
            changed_flags(&old, &now, &grid_flags, &old.grid)
        };
        assert_eq!(with(serde_json::json!([3])), Vec::<String>::new());
        assert_eq!(with(serde_json::json!([4])), ["--heartbeat-divisor"]);
    }
}
