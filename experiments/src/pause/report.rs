//! The pause experiment's words and pictures, as pure functions of its
//! result: the `report.md` section, the summary `main` prints, and the
//! timeline plot's input.

use std::path::Path;

use crate::pause::model::{PAUSED_WORKER, PauseResult};
use crate::plots::TimelineInput;
use crate::timeline::{Event, Freeze};

/// The `report.md` section.
pub fn report_section(r: &PauseResult) -> String {
    let mut s = String::new();
    let check = if r.client_check { "on" } else { "off (UC-03)" };
    s.push_str(&format!(
        "## Pause experiment (T-042) on {}: client check {check}\n\n\
         A worker in its own process was SIGSTOPped {} times inside its critical section \
         (after fence 1, before the D4 check) for at least {} × its {} ms lease, while {} other \
         workers took its payout over. Counts from the rail's ledger (`check_ledger`):\n\n\
         | client_check | pauses | fenced_out | fence 1 | fence 2 | duplicate_attempted | paid | paid_twice | stale_paid | ledger ok |\n\
         |---|---|---|---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} |\n\n",
        r.config.backend,
        r.pauses,
        r.config.pause_factor,
        r.config.ttl_ms,
        r.config.workers,
        r.client_check,
        r.pauses,
        r.fenced_out,
        r.fenced_out_fence1,
        r.fenced_out_fence2,
        r.duplicate_attempted,
        r.paid,
        r.payouts,
        r.paid_twice,
        r.stale_paid,
        r.ledger_ok,
    ));
    s.push_str(&format!(
        "{}Expectation: {} — **{}**.\n\n| round | payout | stale token | paid under | frozen ms | taken over after ms | stale token's fate |\n|---|---|---|---|---|---|---|\n",
        backend_note(r),
        r.expectation,
        if r.expectation_met { "met" } else { "NOT met" }
    ));
    for p in &r.paused {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {} | {} |\n",
            p.round,
            p.payout,
            p.stale_token,
            p.paid_token
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".into()),
            (p.resumed_at_s - p.stopped_at_s) * 1e3,
            p.takeover_after_s
                .map(|t| format!("{:.0}", t * 1e3))
                .unwrap_or_else(|| "-".into()),
            p.outcome
        ));
    }
    s.push_str("\n![timeline](timeline.svg)\n\nSeed ");
    s.push_str(&format!(
        "{} (manifest.json); data: pause.json, events.json, ledger-check.json.\n",
        r.config.seed
    ));
    s
}

/// What differs on etcd, in the report's words (empty on fencepost).
fn backend_note(r: &PauseResult) -> String {
    match r.config.backend {
        bench_driver::backend::BackendKind::Fencepost
        | bench_driver::backend::BackendKind::Redis
        | bench_driver::backend::BackendKind::Redlock => String::new(),
        bench_driver::backend::BackendKind::Etcd => format!(
            "On etcd the key lives on the frozen worker's session lease ({} ms: etcd leases are \
             whole seconds) and etcd has no grace: the key is deleted once etcd's lessor finds the \
             lease expired (it checks every 500 ms), and the next acquire's txn gets it with a \
             higher create revision, the fencing token. The client-side arithmetic is fencepost's \
             (deadline from the send of each keep-alive, `check_still_held`, `ensure_time_for`); the \
             fences are the rail's. \"Taken over after\" is the freeze to the first other \
             worker's claim.\n\n",
            r.config.session_ttl_ms
        ),
    }
}

/// The lines `experiments pause` prints at the end.
pub fn summary(r: &PauseResult, dir: &Path) -> String {
    format!(
        "pause.json: backend={} client_check={} pauses={} fenced_out={} duplicate_attempted={} paid={} paid_twice={} stale_paid={}\n\
         expectation {}: {}\n\
         results: {}\n",
        r.config.backend,
        r.client_check,
        r.pauses,
        r.fenced_out,
        r.duplicate_attempted,
        r.paid,
        r.paid_twice,
        r.stale_paid,
        if r.expectation_met { "met" } else { "NOT met" },
        r.expectation,
        dir.display()
    )
}

/// What the timeline plot draws for `r`: one row per worker (the paused
/// process on top), its freezes, and `events`.
pub fn timeline_input(r: &PauseResult, events: Vec<Event>) -> TimelineInput {
    let mut rows: Vec<(String, String)> = (1..=r.config.workers)
        .rev()
        .map(|i| (format!("w{i}"), format!("w{i}")))
        .collect();
    rows.push((
        PAUSED_WORKER.into(),
        format!("{PAUSED_WORKER} (paused proc)"),
    ));
    TimelineInput {
        title: format!(
            "pause: {} freezes of {PAUSED_WORKER} (own process), client check {} — fenced_out {}, paid_twice {}, stale_paid {}",
            r.pauses,
            if r.client_check { "on" } else { "off" },
            r.fenced_out,
            r.paid_twice,
            r.stale_paid
        ),
        rows,
        frozen_worker: PAUSED_WORKER.into(),
        freezes: r.paused.iter().map(Freeze::from).collect(),
        events,
    }
}
