//! The chaos experiment's words: one progress line per run, the printed
//! summary table and the `report.md` section (docs/experiments.md generates its table from the same `chaos.json`).

use std::fmt::Write as _;
use std::path::Path;

use crate::chaos::model::{ChaosResult, RunResult};

/// `run 3/20 seed 4: 4 faults (2 overlapping), 812 ops, paid 57, fenced 1 — ok`.
pub fn progress_line(n: usize, total: usize, r: &RunResult) -> String {
    // The history's violations, the replicas' epoch conflicts and the store's breaches.
    let found = r.check.violations.len() + r.epoch_conflicts.len() + r.epoch_breaches.len();
    let verdict = if found == 0 {
        "ok".to_string()
    } else {
        format!("{found} VIOLATION(S)")
    };
    let kinds: Vec<&str> = r.applied.iter().map(|a| a.kind.as_str()).collect();
    format!(
        "run {n}/{total} (#{} seed {}): {} faults [{}], {} overlapping; {} ops, paid {}, fenced {}, trigger-4 {}; {:.1} s — {verdict}",
        r.run,
        r.seed,
        r.applied.len(),
        kinds.join(" "),
        r.overlaps,
        r.check.operations_checked,
        r.paid,
        r.fenced_out,
        r.check.believed_fence_outs,
        r.elapsed_s,
    )
}

/// The counters and fault counts as a Markdown table.
pub fn table(r: &ChaosResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| counter | value |\n|---|---|");
    let rows: [(&str, String); 19] = [
        ("runs", r.runs.to_string()),
        ("operations_checked", r.operations_checked.to_string()),
        (
            "indeterminate (killed mid-operation)",
            r.indeterminate.to_string(),
        ),
        ("paid_twice", r.paid_twice.to_string()),
        ("stale_paid", r.stale_paid.to_string()),
        ("token_regressions", r.token_regressions.to_string()),
        ("history_violations", r.history_violations.to_string()),
        (
            "of which grant_overlaps (lock-level)",
            r.grant_overlaps.to_string(),
        ),
        (
            "of which late_renewals (acknowledged after a higher grant)",
            r.late_renewals.to_string(),
        ),
        (
            "of which shortened_renewals (a promised end moved back)",
            r.shortened_renewals.to_string(),
        ),
        (
            "of which early_refusals (a renewal refused while its grant was live)",
            r.early_refusals.to_string(),
        ),
        ("renewals acknowledged", r.renewals_acknowledged.to_string()),
        (
            "epoch_conflicts (two replicas took one epoch)",
            r.epoch_conflicts.to_string(),
        ),
        (
            "epoch_breaches (a deposed leader's write committed)",
            r.epoch_breaches.to_string(),
        ),
        (
            "trigger-4 events (believed-held fence-outs)",
            r.trigger4_events.to_string(),
        ),
        ("payouts paid", r.paid.to_string()),
        ("fence refusals", r.fenced_out.to_string()),
        ("fault kinds exercised", r.fault_kinds_exercised.to_string()),
        ("overlapping fault pairs", r.overlaps.to_string()),
    ];
    for (k, v) in rows {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    let _ = writeln!(s, "\n| fault | applied |\n|---|---|");
    for (k, n) in &r.faults {
        let _ = writeln!(s, "| {k} | {n} |");
    }
    let _ = writeln!(
        s,
        "\n| guarded situation | runs with it (of {}) | occurrences |\n|---|---|---|",
        r.runs
    );
    for (k, c) in &r.coverage {
        let _ = writeln!(s, "| {k} | {} | {} |", c.runs, c.occurrences);
    }
    s
}

/// The printed summary.
pub fn summary(r: &ChaosResult, dir: &Path) -> String {
    let verdict = if r.violations() == 0 {
        "no violation".to_string()
    } else {
        format!("{} VIOLATION(S) — exit 1", r.violations())
    };
    format!(
        "\nexperiments chaos: {} run(s), seed {}, {:.0} s: {verdict}\n\n{}\nresults: {}/chaos.json\n",
        r.runs,
        r.config.seed,
        r.elapsed_s,
        table(r),
        dir.display()
    )
}

/// The `report.md` section.
pub fn report_section(r: &ChaosResult) -> String {
    let sabotage = r
        .config
        .sabotage
        .as_deref()
        .map(|s| {
            let who = if s != "no-fences" {
                "lock-server"
            } else {
                "rail-stub"
            };
            format!(" **SABOTAGED: {who} --sabotage {s}.**")
        })
        .unwrap_or_default();
    format!(
        "## Chaos: {} seeded fault schedules, history checked\n\n\
         Seed {}, {}, lease {} ms, {} worker processes, {} ms per run, {:.0} s in all.{sabotage}\n\n{}",
        r.runs,
        r.config.seed,
        if let Some(p) = r.config.redis_persistence {
            format!(
                "one redis-server behind the delay proxy (persistence {p}; a per-key counter as \
                 the fencing token, the rail's fences on; its SIGSTOP, and its kill -9 with a \
                 restart on the same port and directory, as the lock-service faults)"
            )
        } else if r.config.replicas > 1 {
            format!(
                "{} lock-server replicas on PostgreSQL (leader lease {} ms{})",
                r.config.replicas,
                r.config.leader_lease_ms,
                if r.config.pg_restart {
                    ", PostgreSQL crash restarts drawn"
                } else {
                    ", no PostgreSQL restart: no --pg-dir"
                }
            )
        } else {
            "one lock-server on SQLite behind the delay proxy".to_string()
        },
        r.config.ttl_ms,
        r.config.workers,
        r.config.duration_ms,
        r.elapsed_s,
        table(r)
    )
}
