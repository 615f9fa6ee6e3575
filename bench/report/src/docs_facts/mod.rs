//! `data/docs-facts.json` (`bench docs`): every number the generated blocks
//! of README.md and docs/*.md print that is computed or decided rather than
//! read as is — medians, spreads and 95 % intervals over repeats, ratios,
//! the verdicts against the performance targets, the trigger headlines, the
//! least-squares extrapolation — computed from the committed runs under
//! `data/` by the functions that write the runs' own reports
//! ([`bench_analysis::peer`], [`bench_analysis::peer_limits`],
//! [`bench_analysis::peer_sessions`], [`bench_analysis::targets`], the
//! evidence document's trigger tally). `scripts/gen-docs.py` only reads this
//! file and the runs' files and formats them, so a generated table cannot
//! contradict the report it quotes.
//!
//! One section per group of blocks; a section whose input is missing or
//! unreadable is `{"unavailable": "<why>"}` (the blocks that need it say so).
//! Numbers are in the unit their key names; a spread is
//! `{"n", "median", "min", "max", "ci95": [lo, hi] | null}`
//! ([`bench_analysis::peer::Spread`]). The module tree: `input` (reading
//! the runs' files, writing a spread), `pack` (the
//! reference pack: its run, the trigger tally, the adaptive policy, the
//! pauses, the clock), `peer` (`bench peer` runs: ratios, floors, the fsync
//! ceiling, the performance targets, the HTTP clients), `pairs` (the
//! interleaved pairs of the scripts: wrk, pg-floor, the A/B runs), `runs`
//! (the idle-sessions, TLS and live-sessions runs); the per-lock-service
//! table's facts are [`crate::lock_services`]'s.

use std::path::Path;

use serde_json::{Map, Value, json};

mod input;
mod pack;
mod pairs;
mod peer;
mod runs;

pub use input::FactsError;

/// The file `bench docs` writes under the data directory.
pub const FACTS_JSON: &str = "docs-facts.json";

/// One section of the facts, computed from the data directory.
type Section = fn(&Path) -> Result<Value, FactsError>;

/// The facts of the data directory `data` (the repository's `data/`), as
/// the JSON text `bench docs` writes (pretty, one trailing newline).
pub fn render(data: &Path) -> String {
    let mut out = Map::new();
    let sections: [(&str, Section); 18] = [
        ("pack_run", pack::pack_run),
        ("pack_triggers", pack::pack_triggers),
        ("adaptive", pack::adaptive),
        ("pause", pack::pause),
        ("clock", pack::clock),
        ("peer", peer::reference_peer),
        ("peer_floor", peer::peer_floor),
        ("peer_ceiling", peer::peer_ceiling),
        ("peer_targets", peer::peer_targets),
        ("http_client", peer::http_client),
        ("peer_wrk", pairs::peer_wrk),
        ("peer_pg_floor", pairs::pg_floor),
        ("peer_ab", pairs::ab_runs),
        ("sessions", runs::sessions),
        ("tls", runs::tls),
        ("peer_sessions", runs::peer_sessions),
        ("lock_services", |data| {
            Ok(crate::lock_services::lock_services_in(
                &data.join("reference"),
            ))
        }),
        ("about", |_| {
            Ok(json!(
                "Computed by `bench docs` from the runs under data/ for scripts/gen-docs.py, \
                 which only formats it; `bench docs --check` says whether it is current."
            ))
        }),
    ];
    for (name, section) in sections {
        let v = section(data).unwrap_or_else(|e| json!({ "unavailable": e.to_string() }));
        out.insert(name.into(), v);
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests;
