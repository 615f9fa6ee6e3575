//! The measured window of a cell: what is read when it opens (after the
//! warm-up) and how its fence-outs are traced when it closes.
//!
//! Opening (`OpenWindow`) snapshots what the closing compares with: the
//! rail's ledger check and, per payout, how many submissions it already had;
//! the length of the rail-stub's log; the CPU seconds of the bench and the
//! services.
//!
//! Closing joins the window's fence-outs with the workers' beliefs (trigger 4,
//! "any lock.fenced.out > 0 traced to a client that believed it held the
//! lease"): a *belief* is a `(payout_id, token)` a worker submitted under
//! after `check_still_held` and D4 passed. Fence 2's refusals come from the
//! ledger itself (R6 records `{token, outcome}` per submission: the ones after
//! the window's snapshot with outcome `FENCED_OUT`). Fence 1's (R2/R4) leave
//! no per-payout record in the ledger; the rail-stub logs each as a C5
//! `fenced_out` event (`payout_id, fence, token`) on stderr, which the stack
//! keeps in `rail-stub.log`, so they are read from the log lines written in
//! the window. A fence-1 refusal the log does not show (an external rail, or
//! `RUST_LOG` filtering warnings out) is counted as untraced, never as "not
//! believed".

use std::collections::{HashMap, HashSet};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use fencepost_api::ledger_check::LedgerCheck;
use fencepost_api::rail::{LedgerView, SubmissionOutcome};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::worker::Belief;
use bench_core::cpu::CpuMark;

/// What was read when the window opened.
pub(crate) struct OpenWindow {
    /// When it opened (the ledger snapshot was just taken).
    pub(crate) opened: Instant,
    /// The ledger check at the opening.
    pub(crate) ledger: LedgerCheck,
    /// Submissions per payout at the opening (payouts with none are absent).
    pub(crate) submissions: HashMap<String, usize>,
    /// Bytes in the rail-stub's log at the opening, when the stack has one.
    pub(crate) rail_log_len: Option<u64>,
    /// CPU seconds of the bench and the services at the opening.
    pub(crate) cpu: CpuMark,
}

/// Per payout, how many submissions the ledger records (non-zero ones only).
pub(crate) fn submission_counts(view: &LedgerView) -> HashMap<String, usize> {
    view.payouts
        .iter()
        .filter(|p| !p.submissions.is_empty())
        .map(|p| (p.payout_id.clone(), p.submissions.len()))
        .collect()
}

/// The window's fence-outs, by fence, and how many were traced to a belief.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceTrace {
    /// Submits made after a passed client check (the beliefs), whole run.
    pub believed_submits: u64,
    /// Fence-1 refusals (R2/R4) in the window, from the rail's counters.
    pub fence1: u64,
    /// Fence-2 refusals (R3) in the window, from the rail's counters.
    pub fence2: u64,
    /// Fence-1 refusals of the window found in the rail-stub's log.
    pub fence1_traced: u64,
    /// Fence-1 refusals whose `(payout_id, token)` is a belief.
    pub believed_fence1: u64,
    /// Fence-2 refusals of the window listed in the ledger's submissions (R5/R6
    /// list the first attempts of a payout and count the rest in
    /// `submissions_omitted`: an omitted refusal cannot be joined).
    pub fence2_listed: u64,
    /// Fence-2 refusals (from the ledger's submissions) whose `(payout_id, token)` is a belief.
    pub believed_fence2: u64,
}

impl FenceTrace {
    /// Fence-outs, either fence, of a client that believed it held the lease.
    pub fn believed_held(&self) -> u64 {
        self.believed_fence1 + self.believed_fence2
    }

    /// Fence-1 refusals the log did not show (they could not be traced).
    pub fn fence1_untraced(&self) -> u64 {
        self.fence1.saturating_sub(self.fence1_traced)
    }

    /// Fence-2 refusals the ledger counted but did not list (they could not be traced).
    pub fn fence2_untraced(&self) -> u64 {
        self.fence2.saturating_sub(self.fence2_listed)
    }
}

/// Joins the window's fence-outs with `beliefs`: fence 2 from the ledger
/// `after` (submissions beyond the opening's counts `before`), fence 1 from
/// the log's `fence1_events`; `window` holds the counters' differences.
pub fn trace_fences(
    window: &LedgerCheck,
    before: &HashMap<String, usize>,
    after: &LedgerView,
    fence1_events: &[Belief],
    beliefs: &[Belief],
) -> FenceTrace {
    let believed: HashSet<(&str, u64)> = beliefs.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    let is_belief = |p: &str, t: u64| believed.contains(&(p, t));
    let mut trace = FenceTrace {
        believed_submits: beliefs.len() as u64,
        fence1: window.fenced_out_fence1,
        fence2: window.fenced_out_fence2,
        fence1_traced: fence1_events.len() as u64,
        ..FenceTrace::default()
    };
    for p in &after.payouts {
        let skip = before.get(&p.payout_id).copied().unwrap_or(0);
        for s in p.submissions.iter().skip(skip) {
            if s.outcome == SubmissionOutcome::FencedOut {
                trace.fence2_listed += 1;
                if is_belief(&p.payout_id, s.token) {
                    trace.believed_fence2 += 1;
                }
            }
        }
    }
    trace.believed_fence1 = fence1_events
        .iter()
        .filter(|(p, t)| is_belief(p, *t))
        .count() as u64;
    trace
}

/// The length of `path` in bytes, if it exists.
pub(crate) fn file_len(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// The rail-stub log's text from byte `from` on (what the window wrote).
pub(crate) fn log_since(path: &Path, from: u64) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The fence-1 `fenced_out` events (C5: `payout_id, fence, token`) in the
/// rail-stub's JSON log lines; other lines are skipped.
pub fn fence1_events(log: &str) -> Vec<Belief> {
    #[derive(Deserialize)]
    struct Line {
        #[serde(default)]
        message: String,
        #[serde(default)]
        fence: serde_json::Value,
        payout_id: Option<String>,
        token: Option<u64>,
    }
    log.lines()
        .filter(|l| l.contains("fenced_out"))
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .filter(|l| l.message == "fenced_out")
        .filter(|l| l.fence == serde_json::json!(1) || l.fence == serde_json::json!("1"))
        .filter_map(|l| Some((l.payout_id?, l.token?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use fencepost_api::rail::{PayoutState, PayoutView, Submission};

    use super::*;

    fn payout(id: &str, subs: &[(u64, SubmissionOutcome)]) -> PayoutView {
        PayoutView {
            payout_id: id.into(),
            amount_minor: 1,
            currency: "EUR".into(),
            state: PayoutState::Paid,
            claim_token: Some(9),
            paid_token: Some(9),
            highest_token: 9,
            submissions: subs
                .iter()
                .map(|&(token, outcome)| Submission { token, outcome })
                .collect(),
            submissions_omitted: Default::default(),
        }
    }

    fn window(fence1: u64, fence2: u64) -> LedgerCheck {
        LedgerCheck {
            payouts: 0,
            paid: 0,
            paid_twice: 0,
            stale_paid: 0,
            fenced_out_fence1: fence1,
            fenced_out_fence2: fence2,
            fenced_out_total: fence1 + fence2,
            duplicate_attempted: 0,
            not_claimed: 0,
            violations: Vec::new(),
        }
    }

    /// Only a refusal of a believed `(payout, token)` inside the window
    /// counts; one from before the window, or of a token nobody believed
    /// held (a check-off worker), does not.
    #[test]
    fn a_fence_out_is_believed_only_if_its_payout_and_token_were_believed() {
        use SubmissionOutcome::{FencedOut, Paid};
        let after = LedgerView {
            payouts: vec![
                // Fenced before the window (skipped), then a believed refusal in it.
                payout("a", &[(3, FencedOut), (4, FencedOut), (9, Paid)]),
                // A refusal of a token nobody believed held.
                payout("b", &[(5, FencedOut), (9, Paid)]),
            ],
            ..LedgerView::default()
        };
        let before = HashMap::from([("a".to_owned(), 1)]);
        let beliefs = vec![
            ("a".to_owned(), 3),
            ("a".to_owned(), 4),
            ("c".to_owned(), 2),
        ];
        let fence1 = vec![("c".to_owned(), 2), ("d".to_owned(), 1)];
        let t = trace_fences(&window(3, 2), &before, &after, &fence1, &beliefs);
        assert_eq!(
            t.believed_fence2, 1,
            "a/3 is before the window, b/5 not believed"
        );
        assert_eq!(t.believed_fence1, 1, "c/2 was believed, d/1 not");
        assert_eq!(t.believed_held(), 2);
        assert_eq!((t.fence1, t.fence1_traced, t.fence1_untraced()), (3, 2, 1));
        assert_eq!(t.believed_submits, 3);
        assert_eq!((t.fence2_listed, t.fence2_untraced()), (2, 0));
    }

    /// R5/R6 list only a payout's first attempts: a fence-2 refusal the
    /// counters saw but the listing omits cannot be joined, and says so.
    #[test]
    fn a_fence2_refusal_the_ledger_does_not_list_is_untraced() {
        use SubmissionOutcome::{FencedOut, Paid};
        let after = LedgerView {
            payouts: vec![payout("a", &[(4, FencedOut), (9, Paid)])],
            ..LedgerView::default()
        };
        // The counters saw three fence-2 refusals in the window; one is listed.
        let t = trace_fences(&window(0, 3), &HashMap::new(), &after, &[], &[]);
        assert_eq!((t.fence2, t.fence2_listed, t.fence2_untraced()), (3, 1, 2));
        assert_eq!(t.believed_held(), 0);
    }

    #[test]
    fn fence1_events_are_read_from_the_rail_stubs_json_log() {
        let log = r#"{"timestamp":"t","level":"INFO","message":"listening"}
{"timestamp":"t","level":"WARN","message":"fenced_out","payout_id":"bench-000007","fence":1,"token":4,"highest_token":6}
{"timestamp":"t","level":"WARN","message":"fenced_out","payout_id":"bench-000008","fence":2,"token":5,"highest_token":6}
not json at all fenced_out
"#;
        assert_eq!(fence1_events(log), vec![("bench-000007".to_owned(), 4)]);
    }
}
