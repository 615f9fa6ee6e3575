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
        fenced(r, r.fenced_out),
        fenced(r, r.fenced_out_fence1),
        fenced(r, r.fenced_out_fence2),
        r.duplicate_attempted,
        r.paid,
        r.payouts,
        r.paid_twice,
        r.stale_paid,
        ledger_verdict(r),
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
            token(r, Some(p.stale_token)),
            token(r, p.paid_token),
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

/// A fenced count, or "n/a" when the rail's fences were off (a lock
/// without a fencing token: nothing can be fenced, so 0 would read as a
/// success it is not).
fn fenced(r: &PauseResult, n: u64) -> String {
    if r.config.rail_fences {
        n.to_string()
    } else {
        "n/a (fences off)".into()
    }
}

/// A token of the round table; "none" without a fencing token (every
/// token is 0 then, and says nothing).
fn token(r: &PauseResult, t: Option<u64>) -> String {
    match t {
        _ if !r.config.rail_fences => "none".into(),
        Some(t) => t.to_string(),
        None => "-".into(),
    }
}

/// The ledger check's verdict: `ok`, or its violation — without a fencing
/// token and the client check, named as that lock's expected consequence.
fn ledger_verdict(r: &PauseResult) -> String {
    match (r.ledger_ok, r.config.rail_fences, r.client_check) {
        (true, _, _) => "ok".into(),
        (false, false, false) => format!(
            "**violated**: {} paid twice, expected of a lock without a fencing token",
            r.paid_twice
        ),
        (false, _, _) => "**violated**".into(),
    }
}

/// What differs on etcd, Redis and Redlock, in the report's words (empty on fencepost).
fn backend_note(r: &PauseResult) -> String {
    use bench_driver::backend::BackendKind;
    match r.config.backend {
        BackendKind::Fencepost => String::new(),
        BackendKind::Etcd => format!(
            "On etcd the key lives on the frozen worker's session lease ({} ms: etcd leases are \
             whole seconds) and etcd has no grace: the key is deleted once etcd's lessor finds the \
             lease expired (it checks every 500 ms), and the next acquire's txn gets it with a \
             higher create revision, the fencing token. The client-side arithmetic is fencepost's \
             (deadline from the send of each keep-alive, `check_still_held`, `ensure_time_for`); the \
             fences are the rail's. \"Taken over after\" is the freeze to the first other \
             worker's claim.\n\n",
            r.config.session_ttl_ms
        ),
        BackendKind::Redis => "On one redis-server the key is set with `SET NX PX` (the lease) \
             and the fencing token is a per-key counter incremented in the same script; the \
             heartbeat renews with an owner-checked `PEXPIRE`. Redis has no grace: the frozen \
             holder's key expires a lease after its last renewal and the next acquire gets a \
             higher counter value, which the rail's fences compare as on fencepost. \"Taken \
             over after\" is the freeze to the first other worker's claim.\n\n"
            .into(),
        BackendKind::Redlock => "On Redlock the key is set on a majority of independent \
             redis-servers for the lease and expires on each; the lock hands out **no fencing \
             token** (every token is 0), so the rail runs with its fences off: nothing can \
             refuse a holder whose lease ran out. With the client check the resumed worker finds \
             its deadline passed and stops itself; without it, its stale submit pays the payout \
             a second time. That double payment is the expected consequence of a lock without a \
             fencing token, not a defect of the experiment, and the ledger check reports it as \
             the violation it is; the fenced counts are not applicable (n/a), never a 0 that \
             reads as success.\n\n"
            .into(),
    }
}

/// The lines `experiments pause` prints at the end.
pub fn summary(r: &PauseResult, dir: &Path) -> String {
    format!(
        "pause.json: backend={} client_check={} pauses={} fenced_out={} duplicate_attempted={} paid={} paid_twice={} stale_paid={} ledger={}\n\
         expectation {}: {}\n\
         results: {}\n",
        r.config.backend,
        r.client_check,
        r.pauses,
        fenced(r, r.fenced_out),
        r.duplicate_attempted,
        r.paid,
        r.paid_twice,
        r.stale_paid,
        ledger_verdict(r).replace("**", ""),
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
            fenced(r, r.fenced_out),
            r.paid_twice,
            r.stale_paid
        ),
        rows,
        frozen_worker: PAUSED_WORKER.into(),
        freezes: r.paused.iter().map(Freeze::from).collect(),
        events,
    }
}

#[cfg(test)]
mod tests {
    use bench_driver::backend::BackendKind;

    use super::*;
    use crate::pause::model::PauseConfig;

    fn redlock_off() -> PauseResult {
        PauseResult {
            pauses: 5,
            paid: 20,
            payouts: 20,
            paid_twice: 5,
            ledger_ok: false,
            expectation_met: true,
            config: PauseConfig {
                backend: BackendKind::Redlock,
                rail_fences: false,
                ..PauseConfig::default()
            },
            ..PauseResult::default()
        }
    }

    #[test]
    fn without_fences_the_fenced_counts_read_not_applicable_and_the_double_payment_violated() {
        let r = redlock_off();
        let section = report_section(&r);
        assert!(section.contains("| n/a (fences off) | n/a (fences off) | n/a (fences off) |"));
        assert!(
            section
                .contains("**violated**: 5 paid twice, expected of a lock without a fencing token")
        );
        assert!(section.contains("no fencing token"), "{section}");
        let line = summary(&r, Path::new("out"));
        assert!(line.contains("fenced_out=n/a (fences off)"), "{line}");
        assert!(!line.contains("ledger=ok"), "{line}");
    }

    #[test]
    fn with_fences_a_zero_is_a_count_and_a_clean_ledger_reads_ok() {
        let mut r = redlock_off();
        r.config.backend = BackendKind::Redis;
        r.config.rail_fences = true;
        r.paid_twice = 0;
        r.ledger_ok = true;
        let section = report_section(&r);
        assert!(
            section.contains("| false | 5 | 0 | 0 | 0 | 0 | 20/20 | 0 | 0 | ok |"),
            "{section}"
        );
    }

    #[test]
    fn a_pause_json_from_before_the_rail_fences_field_had_its_fences_on() {
        let c: PauseConfig = serde_json::from_str(r#"{"ttl_ms": 1000}"#).unwrap();
        assert!(c.rail_fences);
        assert_eq!(c.backend, BackendKind::Fencepost);
    }
}
