//! The report's backend comparison: when a results table holds cells of
//! several lock services (`bench sweep --backend fencepost,etcd,redis`), the
//! same grid cell on each side by side — throughput, heartbeat RTT,
//! abandonment, losses, fences — and the §6.5 triggers on each, with what
//! each service's differences do to them. Pure over the rows and triggers.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bench_analysis::results::CellRow;
use bench_analysis::triggers::{TriggerResult, fmt_value, lost_work};

/// The backends in report order; a backend not listed sorts after them.
const ORDER: [&str; 4] = ["fencepost", "etcd", "redis", "redlock"];

/// What groups cells across backends: every configuration column but the
/// backend (and the session TTL, which etcd rounds to whole seconds).
type GroupKey = (u64, String, String, u32, String, String, String, bool);

fn key(r: &CellRow) -> GroupKey {
    (
        r.lease_ms,
        format!("{:.4}", r.margin),
        r.margin_policy.clone(),
        r.workers,
        r.net_delay.clone(),
        r.server_pause.clone(),
        r.rail_latency.clone(),
        r.client_check,
    )
}

/// A backend's place in report order.
fn rank(backend: &str) -> usize {
    ORDER
        .iter()
        .position(|b| *b == backend)
        .unwrap_or(ORDER.len())
}

/// The cells that ran on two backends or more, one group per grid cell (in
/// key order), each group's cells in report order (one per backend: the
/// first of a backend's repeats).
pub fn groups(rows: &[CellRow]) -> Vec<Vec<&CellRow>> {
    let mut by_key: BTreeMap<GroupKey, BTreeMap<(usize, &str), &CellRow>> = BTreeMap::new();
    for r in rows {
        by_key
            .entry(key(r))
            .or_default()
            .entry((rank(&r.backend), r.backend.as_str()))
            .or_insert(r);
    }
    by_key
        .into_values()
        .filter(|g| g.len() >= 2)
        .map(|g| g.into_values().collect())
        .collect()
}

/// `a / b` as `1.23×`, or `-` when `b` is 0.
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "-".into()
    }
}

/// What a lock service does differently, and what that does to the numbers.
fn backend_note(backend: &str) -> Option<&'static str> {
    Some(match backend {
        "etcd" => {
            "- **etcd** (`bench::backend::etcd`: session = an etcd lease kept alive; acquire = \
             `txn(create_revision == 0 → put with lease)`; token = the key's create revision; \
             release = guarded delete). *No grace*: etcd frees a key once its lease has expired \
             on the leader (checked every 500 ms); fencepost keeps a lapsed grant in GRACE for \
             `offset_max + 2ρ·lease + quantum` first, so only the client margin and the fences \
             protect a slow holder on etcd. *Whole-second TTLs*: the etcd lease (session and \
             every key on it) is min(lease, session TTL) rounded up to whole seconds (`session \
             TTL` below); where it rounds up, etcd cells get more usable lease (fewer D4 \
             abandonments) and trigger 3 is evaluated on that longer session. The keep-alive \
             answers with the lease's TTL; TTL 0 is the 410 analogue. No per-key renewal (L5): \
             `renewals` is 0, and `hb_*` are keep-alive RTTs on a gRPC stream."
        }
        "redis" => {
            "- **redis** (`bench::backend::redis`, one redis-server: acquire = one Lua script, \
             `SET NX PX lease` and `INCR` of the key's fencing counter; token = that counter; \
             renew = compare-value `PEXPIRE` of every held key, sent as the heartbeat; release = \
             compare-value `DEL`). *No session and no grace*: the session is the client's own, \
             lost when its deadline or a grant's passes or a renew is refused; a key expires on \
             the server's clock at its `PX` and is free at once. `hb_*` are the renew script's \
             RTTs (with or without keys), `renewals` count the keys it extended. A restart \
             without persistence forgets keys and counters (tokens start again at 1)."
        }
        "redlock" => {
            "- **redlock** (N independent redis-servers, a majority): no fencing token, so the \
             rail ran with its fences off (`rail_fences` = off): `fenced_out` cannot count \
             anything there, and a stale holder's payment is not refused."
        }
        _ => return None,
    })
}

/// The section's title and introduction for the backends present.
fn intro(md: &mut String, present: &[&str]) {
    let _ = writeln!(md, "\n## {}, cell by cell\n", present.join(" vs "));
    let _ = writeln!(
        md,
        "The same grid cell run on each lock service, one after the other in this run \
         (interleaved). On every service but fencepost the workers use fencepost's client \
         arithmetic (`fencepost_sdk::lease`) through an adapter, recorded in the SDK's own \
         recorder, so trigger 1 compares like with like. Where each differs, and what it does \
         to these numbers:\n"
    );
    for note in present.iter().filter_map(|b| backend_note(b)) {
        let _ = writeln!(md, "{note}");
    }
}

/// One line per (grid cell, backend); throughput relative to the group's first backend.
fn cells_table(md: &mut String, groups: &[Vec<&CellRow>]) {
    let _ = writeln!(
        md,
        "\n| TTL | margin | backend | session TTL ms | payouts/s (× first) | hb p50 ms | hb p99 ms | D4 abandoned | lost work / attempts | lock_lost | fenced_out | duplicates | usable lease | rail fences |\n\
         |---|---:|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|"
    );
    for g in groups {
        let first = g[0];
        for r in g {
            let _ = writeln!(
                md,
                "| {} | {:.2} | {} | {} | {:.1} ({}) | {:.2} | {:.2} | {} | {}/{} | {} | {} | {} | {:.3} | {} |",
                bench_analysis::recommend::human_ms(r.lease_ms),
                r.margin,
                r.backend,
                r.session_ttl_ms,
                r.throughput_per_s,
                ratio(r.throughput_per_s, first.throughput_per_s),
                r.hb_rtt_p50_us as f64 / 1e3,
                r.hb_rtt_p99_us as f64 / 1e3,
                r.abandoned_insufficient_lease,
                lost_work(r),
                r.attempts,
                r.lock_lost,
                r.fenced_out,
                r.duplicate_attempted,
                r.usable_lease_fraction,
                r.rail_fences,
            );
        }
    }
}

/// A trigger's verdict on `cell`, or `-` when it was not evaluated there.
fn verdict(triggers: &[TriggerResult], cell: &str, id: &str) -> String {
    triggers
        .iter()
        .find(|t| t.cell == cell && t.trigger == id)
        .map_or_else(
            || "-".to_string(),
            |t| {
                format!(
                    "{} ({} vs {} {})",
                    if t.fired { "**fired**" } else { "ok" },
                    fmt_value(t.observed),
                    fmt_value(t.threshold),
                    t.unit
                )
            },
        )
}

/// One line per (grid cell, trigger), one column per backend present.
fn triggers_table(
    md: &mut String,
    groups: &[Vec<&CellRow>],
    present: &[&str],
    triggers: &[TriggerResult],
) {
    let _ = writeln!(
        md,
        "\nThe §6.5 triggers on each side (observed vs threshold; `fired` or `ok`):\n"
    );
    let _ = writeln!(
        md,
        "| TTL | margin | trigger | {} |\n|---|---:|---|{}",
        present.join(" | "),
        "---|".repeat(present.len())
    );
    for g in groups {
        let mut ids: Vec<&str> = triggers
            .iter()
            .filter(|t| g.iter().any(|r| r.cell == t.cell))
            .map(|t| t.trigger.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let cols: Vec<String> = present
                .iter()
                .map(|b| match g.iter().find(|r| r.backend == *b) {
                    Some(r) => verdict(triggers, &r.cell, id),
                    None => "-".into(),
                })
                .collect();
            let _ = writeln!(
                md,
                "| {} | {:.2} | `{id}` | {} |",
                bench_analysis::recommend::human_ms(g[0].lease_ms),
                g[0].margin,
                cols.join(" | "),
            );
        }
    }
}

/// The section, or `None` when no cell ran on two backends or more.
pub fn markdown_comparison(rows: &[CellRow], triggers: &[TriggerResult]) -> Option<String> {
    let groups = groups(rows);
    if groups.is_empty() {
        return None;
    }
    let mut present: Vec<&str> = groups
        .iter()
        .flatten()
        .map(|r| r.backend.as_str())
        .collect();
    present.sort_by_key(|b| (rank(b), *b));
    present.dedup();
    let mut md = String::new();
    intro(&mut md, &present);
    cells_table(&mut md, &groups);
    triggers_table(&mut md, &groups, &present, triggers);
    Some(md)
}

#[cfg(test)]
mod tests {
    use bench_analysis::triggers::Verdict;

    use super::*;

    fn row(backend: &str, margin: f64, per_s: f64) -> CellRow {
        CellRow {
            backend: backend.into(),
            cell: format!("backend={backend}_m={margin}"),
            lease_ms: 1_000,
            margin,
            throughput_per_s: per_s,
            rail_fences: "on".into(),
            ..CellRow::default()
        }
    }

    fn trigger(cell: &str, fired: bool) -> TriggerResult {
        TriggerResult {
            cell: cell.into(),
            trigger: "t1_rtt_budget".into(),
            fired,
            verdict: if fired { Verdict::Fired } else { Verdict::Ok },
            observed: 1.0,
            threshold: 2.0,
            action: String::new(),
            unit: "ms".into(),
            rule: String::new(),
            detail: String::new(),
        }
    }

    #[test]
    fn three_backends_are_compared_cell_by_cell_in_report_order() {
        // Table order is not report order; a lone cell has no comparison.
        let rows = vec![
            row("redis", 0.1, 300.0),
            row("fencepost", 0.1, 100.0),
            row("etcd", 0.1, 50.0),
            row("fencepost", 0.3, 100.0),
        ];
        let g = groups(&rows);
        assert_eq!(g.len(), 1, "margin 0.3 ran on one backend only");
        let names: Vec<&str> = g[0].iter().map(|r| r.backend.as_str()).collect();
        assert_eq!(names, ["fencepost", "etcd", "redis"]);
        let triggers = [
            trigger("backend=fencepost_m=0.1", false),
            trigger("backend=redis_m=0.1", true),
        ];
        let md = markdown_comparison(&rows, &triggers).unwrap();
        assert!(
            md.contains("## fencepost vs etcd vs redis, cell by cell"),
            "{md}"
        );
        assert!(
            md.contains("| 1s | 0.10 | redis | 0 | 300.0 (3.00×) |"),
            "{md}"
        );
        assert!(
            md.contains("| 1s | 0.10 | etcd | 0 | 50.0 (0.50×) |"),
            "{md}"
        );
        assert!(
            md.contains("| trigger | fencepost | etcd | redis |"),
            "{md}"
        );
        let line = md.lines().find(|l| l.contains("`t1_rtt_budget`")).unwrap();
        let cols: Vec<&str> = line.split(" | ").collect();
        assert!(cols[3].starts_with("ok"), "{line}");
        assert_eq!(cols[4], "-", "etcd's trigger was not evaluated: {line}");
        assert!(cols[5].starts_with("**fired**"), "{line}");
        assert!(
            md.contains("- **redis**") && !md.contains("- **redlock**"),
            "{md}"
        );
    }

    #[test]
    fn one_backend_has_no_comparison() {
        let rows = vec![row("fencepost", 0.1, 1.0), row("fencepost", 0.3, 1.0)];
        assert!(markdown_comparison(&rows, &[]).is_none());
    }
}
