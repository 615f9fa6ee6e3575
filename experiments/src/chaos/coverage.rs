//! What a chaos run actually exercised, and the replicas' own account of
//! their epochs. A safety rule that held proves little if the situation it
//! guards never arose, so each run counts, from its history, its applied
//! faults and its lock-server logs, how often each guarded situation
//! occurred ([`Situation`]); `chaos.json` sums them as "in how many runs".
//! The same logs give one more rule: **at most one replica took each
//! epoch** ([`epoch_conflicts`]) — two takeovers of one epoch would be two
//! replicas serving at once.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use bench_history::{Op, OpKind, Outcome};
use serde::{Deserialize, Serialize};

use super::drive::Applied;
use super::schedule::FaultKind;

/// A situation a safety rule guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Situation {
    /// A holder submitted after a newer grant of its key had been
    /// acknowledged (the stale write fence 2 and rules 1–2 exist for).
    StaleSubmitAfterNewerGrant,
    /// A key was granted anew while its previous holder had not released
    /// it: a takeover by expiry (rules 4 and 6).
    TakeoverByExpiry,
    /// A key granted before a lock-service fault (restart, freeze, leader
    /// kill, freeze, database cut or delay, PostgreSQL restart) was granted again after it
    /// (rule 3: tokens keep rising across restarts and leaders).
    RegrantAcrossLockFault,
    /// A leader found itself deposed: it stepped down on a renewal or a
    /// write the epoch refused (the replicas' logs).
    DeposedLeaderSteppedDown,
    /// A write the epoch fence refused (a deposed leader's late write).
    DeposedLeaderWriteFenced,
    /// A replica took over from another (takeovers after the run's first).
    LeaderChange,
    /// A stale submit that arrived while a newer holder's claim stood: a
    /// higher token's claim of the payout was acknowledged before the
    /// submit was invoked, and that holder's submit or rail release had not
    /// completed by then (fence 2's case). Counted when the submit got an
    /// answer.
    StaleSubmitWhileNewerClaimStood,
    /// Of those, the ones fence 2 refused. Must equal the count above: a
    /// paid one is rule 2's violation.
    StaleSubmitRefusedByFence2,
    /// A claim invoked after a higher token's claim of the payout had been
    /// acknowledged (fence 1's case). Counted when it got an answer.
    StaleClaimAfterNewerClaim,
    /// Of those, the ones fence 1 refused (all should be).
    StaleClaimRefusedByFence1,
    /// A grant held across a takeover: its holder's belief (extended by its
    /// renewals) began before a lock-service fault that stops the serving
    /// lock-server (a leader's kill -9 or SIGSTOP, a lock-server restart,
    /// a leader cut off from its database: counted from a leader lease
    /// later) and a renewal sent after that was acknowledged within it — by
    /// the lock-server that took over (rules 6 and 7's case).
    GrantHeldAcrossTakeover,
}

impl Situation {
    /// Every situation, in `chaos.json`'s order.
    pub const ALL: [Situation; 11] = [
        Situation::StaleSubmitAfterNewerGrant,
        Situation::TakeoverByExpiry,
        Situation::RegrantAcrossLockFault,
        Situation::DeposedLeaderSteppedDown,
        Situation::DeposedLeaderWriteFenced,
        Situation::LeaderChange,
        Situation::StaleSubmitWhileNewerClaimStood,
        Situation::StaleSubmitRefusedByFence2,
        Situation::StaleClaimAfterNewerClaim,
        Situation::StaleClaimRefusedByFence1,
        Situation::GrantHeldAcrossTakeover,
    ];

    /// The name in `chaos.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Situation::StaleSubmitAfterNewerGrant => "stale_submit_after_newer_grant",
            Situation::TakeoverByExpiry => "takeover_by_expiry",
            Situation::RegrantAcrossLockFault => "regrant_across_lock_fault",
            Situation::DeposedLeaderSteppedDown => "deposed_leader_stepped_down",
            Situation::DeposedLeaderWriteFenced => "deposed_leader_write_fenced",
            Situation::LeaderChange => "leader_change",
            Situation::StaleSubmitWhileNewerClaimStood => "stale_submit_while_newer_claim_stood",
            Situation::StaleSubmitRefusedByFence2 => "stale_submit_refused_by_fence_2",
            Situation::StaleClaimAfterNewerClaim => "stale_claim_after_newer_claim",
            Situation::StaleClaimRefusedByFence1 => "stale_claim_refused_by_fence_1",
            Situation::GrantHeldAcrossTakeover => "grant_held_across_takeover",
        }
    }
}

/// Occurrences per situation in one run (`chaos.json` keys by name).
pub type Coverage = BTreeMap<String, u64>;

/// The faults that hit the lock service itself.
fn lock_fault(k: FaultKind) -> bool {
    matches!(
        k,
        FaultKind::LockServerRestart
            | FaultKind::LockServerSigstop
            | FaultKind::LeaderKill9
            | FaultKind::LeaderSigstop
            | FaultKind::LeaderDbCut
            | FaultKind::LeaderDbDelay
            | FaultKind::PostgresRestart
    )
}

/// When a fault that stops the serving lock-server began, as far as
/// renewals are concerned: a renewal sent after it and acknowledged was
/// acknowledged by the lock-server that took over (or the same one
/// restarted). A leader cut off from its database still answers from
/// memory until its leader lease runs out, so only a renewal sent a leader
/// lease after the cut counts. `None`: not such a fault.
fn takeover_from(a: &Applied) -> Option<u64> {
    match a.kind {
        FaultKind::LockServerRestart | FaultKind::LeaderKill9 | FaultKind::LeaderSigstop => {
            Some(a.from_ns)
        }
        FaultKind::LeaderDbCut => {
            Some(a.from_ns + bench_driver::cell::stack::REPLICA_LEADER_LEASE.as_nanos() as u64)
        }
        _ => None,
    }
}

/// Counts the situations of one run from its operations and faults
/// ([`from_logs`] adds the replicas' own).
pub fn from_history(ops: &[Op], applied: &[Applied]) -> Coverage {
    let mut n: HashMap<Situation, u64> = HashMap::new();
    let mut by_payout: HashMap<&str, Vec<&Op>> = HashMap::new();
    for op in ops {
        if let Some(p) = op.payout.as_deref() {
            by_payout.entry(p).or_default().push(op);
        }
    }
    let faults: Vec<u64> = applied
        .iter()
        .filter(|a| lock_fault(a.kind))
        .map(|a| a.from_ns)
        .collect();
    let takeovers: Vec<u64> = applied.iter().filter_map(takeover_from).collect();
    for ops in bench_history::check::by_key(ops).values() {
        held_across_takeovers(ops, &takeovers, &mut n);
    }
    for ops in by_payout.values() {
        fence_situations(ops, &mut n);
        let grants: Vec<(&Op, u64, u64)> = ops
            .iter()
            .filter(|o| o.kind == OpKind::Grant && o.is(Outcome::Ok))
            .filter_map(|o| Some((*o, o.token?, o.ok_ns?)))
            .collect();
        for s in ops.iter().filter(|o| o.kind == OpKind::Submit) {
            let Some(t) = s.token else { continue };
            if grants.iter().any(|(_, t2, ok)| *t2 > t && *ok < s.inv_ns) {
                *n.entry(Situation::StaleSubmitAfterNewerGrant).or_default() += 1;
            }
        }
        for (g, t, _) in &grants {
            // The grant just below this one, and whether its holder let go first.
            let Some((prev, pt, _)) = grants
                .iter()
                .filter(|(_, t2, _)| t2 < t)
                .max_by_key(|(_, t2, _)| *t2)
            else {
                continue;
            };
            let released = ops.iter().any(|o| {
                o.kind == OpKind::Release
                    && o.session == prev.session
                    && o.token == Some(*pt)
                    && o.inv_ns < g.inv_ns
            });
            if !released {
                *n.entry(Situation::TakeoverByExpiry).or_default() += 1;
            }
        }
        for f in &faults {
            let before = grants.iter().any(|(_, _, ok)| ok < f);
            let after = grants.iter().any(|(g, _, _)| g.inv_ns > *f);
            if before && after {
                *n.entry(Situation::RegrantAcrossLockFault).or_default() += 1;
            }
        }
    }
    n.into_iter()
        .map(|(s, c)| (s.as_str().to_string(), c))
        .collect()
}

/// Fence 1 and fence 2 under a newer claim, on one payout's operations:
/// stale claims after a higher token's acknowledged claim, and stale
/// submits while a higher token's claim stood, each with how the fence
/// answered (an answer only: a submit without one is not counted).
fn fence_situations(ops: &[&Op], n: &mut HashMap<Situation, u64>) {
    let answered = |o: &&&Op| o.ok_ns.is_some() && !o.is(Outcome::Unknown);
    let claims: Vec<(&Op, u64, u64)> = ops
        .iter()
        .filter(|o| o.kind == OpKind::Claim && o.is(Outcome::Ok))
        .filter_map(|o| Some((*o, o.token?, o.ok_ns?)))
        .collect();
    let mut bump = |s: Situation| *n.entry(s).or_default() += 1;
    for c in ops
        .iter()
        .filter(|o| o.kind == OpKind::Claim)
        .filter(answered)
    {
        let Some(t) = c.token else { continue };
        if claims.iter().any(|&(_, t2, ok)| t2 > t && ok < c.inv_ns) {
            bump(Situation::StaleClaimAfterNewerClaim);
            if !c.is(Outcome::Ok) {
                bump(Situation::StaleClaimRefusedByFence1);
            }
        }
    }
    for s in ops
        .iter()
        .filter(|o| o.kind == OpKind::Submit)
        .filter(answered)
    {
        let Some(t) = s.token else { continue };
        let stood = claims.iter().any(|&(claim, t2, ok)| {
            let ended = ops.iter().any(|o| {
                matches!(o.kind, OpKind::Submit | OpKind::RailRelease)
                    && o.session == claim.session
                    && o.token == Some(t2)
                    && o.ok_ns.is_some_and(|end| end < s.inv_ns)
            });
            t2 > t && ok < s.inv_ns && !ended
        });
        if stood {
            bump(Situation::StaleSubmitWhileNewerClaimStood);
            if !s.is(Outcome::Ok) {
                bump(Situation::StaleSubmitRefusedByFence2);
            }
        }
    }
}

/// Grants held across a takeover, on one lock key's operations: a belief (the
/// checker's, extended by renewals) that began before a fault stopping the
/// serving lock-server ([`takeover_from`]), with a renewal sent after it
/// that was acknowledged and counted in the belief.
fn held_across_takeovers(ops: &[&Op], takeovers: &[u64], n: &mut HashMap<Situation, u64>) {
    for b in bench_history::check::beliefs(ops) {
        let held = takeovers
            .iter()
            .any(|&f| b.from_ns < f && b.renewed_ns.iter().any(|&r| r > f));
        if held {
            *n.entry(Situation::GrantHeldAcrossTakeover).or_default() += 1;
        }
    }
}

/// One `leader_takeover` or `leader_step_down` line of a lock-server log:
/// one flat JSON object (`{"timestamp","level","message","event","epoch",…}`,
/// docs/reference/observability.md), or the older shape with the event's
/// fields nested under `fields`.
#[derive(Debug, Deserialize)]
struct LogLine {
    #[serde(flatten)]
    flat: LogFields,
    #[serde(default)]
    fields: LogFields,
}

impl LogLine {
    /// The event's fields, from whichever shape the line has.
    fn event(&self) -> &LogFields {
        if self.flat.event.is_some() {
            &self.flat
        } else {
            &self.fields
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct LogFields {
    event: Option<String>,
    epoch: Option<u64>,
}

/// The leadership events of every lock-server log in `dir`
/// (`lock-server*.log`).
#[derive(Default)]
struct Leadership {
    /// (file, epoch) per `leader_takeover`.
    takeovers: Vec<(String, u64)>,
    /// `leader_step_down` lines.
    step_downs: u64,
    /// `write_fenced` lines: writes the epoch fence refused.
    fenced_writes: u64,
}

/// Reads [`Leadership`] from `dir`. A log that cannot be read is skipped (the
/// run's check does not rest on it; [`epoch_conflicts`] only ever finds more
/// with more logs).
fn leadership(dir: &Path) -> Leadership {
    let mut out = Leadership::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("lock-server") && name.ends_with(".log")) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        for line in text.lines() {
            let Ok(l) = serde_json::from_str::<LogLine>(line) else {
                continue;
            };
            let f = l.event();
            match (f.event.as_deref(), f.epoch) {
                (Some("leader_takeover"), Some(epoch)) => out.takeovers.push((name.clone(), epoch)),
                (Some("leader_step_down"), _) => out.step_downs += 1,
                (Some("write_fenced"), _) => out.fenced_writes += 1,
                _ => {}
            }
        }
    }
    out
}

/// Adds the replicas' situations from their logs in `dir` to `c`.
pub fn from_logs(c: &mut Coverage, dir: &Path) {
    let l = leadership(dir);
    let mut add = |s: Situation, k: u64| {
        if k > 0 {
            *c.entry(s.as_str().to_string()).or_default() += k;
        }
    };
    add(
        Situation::LeaderChange,
        l.takeovers.len().saturating_sub(1) as u64,
    );
    add(Situation::DeposedLeaderSteppedDown, l.step_downs);
    add(Situation::DeposedLeaderWriteFenced, l.fenced_writes);
}

/// Epochs two takeovers claimed (at most one replica may take each).
pub fn epoch_conflicts(dir: &Path) -> Vec<String> {
    let takeovers = leadership(dir).takeovers;
    let mut by_epoch: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (file, epoch) in takeovers {
        by_epoch.entry(epoch).or_default().push(file);
    }
    by_epoch
        .into_iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(epoch, files)| format!("epoch {epoch} was taken by {}", files.join(" and ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OpKind, session: &str, token: u64, inv: u64, ok: u64) -> Op {
        Op {
            proc: session.into(),
            id: inv,
            kind,
            session: session.into(),
            payout: Some("p1".into()),
            token: Some(token),
            inv_ns: inv,
            ok_ns: Some(ok),
            outcome: Some(Outcome::Ok),
            deadline_ns: None,
            client_check: None,
            key: None,
        }
    }

    #[test]
    fn a_frozen_holder_taken_over_and_submitting_late_is_counted() {
        let ops = vec![
            op(OpKind::Grant, "a", 1, 0, 1),
            // a froze; b took the key over without a release by a.
            op(OpKind::Grant, "b", 2, 50, 51),
            op(OpKind::Submit, "b", 2, 52, 53),
            op(OpKind::Release, "b", 2, 54, 55),
            op(OpKind::Submit, "a", 1, 80, 81),
        ];
        let applied = [Applied {
            kind: FaultKind::LeaderKill9,
            from_ns: 10,
            to_ns: 20,
            target: Some("r0".into()),
        }];
        let c = from_history(&ops, &applied);
        assert_eq!(c["stale_submit_after_newer_grant"], 1, "{c:?}");
        assert_eq!(c["takeover_by_expiry"], 1, "{c:?}");
        assert_eq!(c["regrant_across_lock_fault"], 1, "{c:?}");
    }

    fn answered(mut o: Op, outcome: Outcome) -> Op {
        o.outcome = Some(outcome);
        o
    }

    #[test]
    fn a_stale_submit_while_a_newer_claim_stood_is_counted_with_fence_2s_answer() {
        let ops = vec![
            op(OpKind::Grant, "a", 1, 0, 1),
            op(OpKind::Claim, "a", 1, 2, 3),
            // a froze; b was granted and claimed, and has not submitted yet.
            op(OpKind::Grant, "b", 2, 50, 51),
            op(OpKind::Claim, "b", 2, 52, 53),
            answered(op(OpKind::Submit, "a", 1, 60, 61), Outcome::FencedOut),
            // A stale claim after b's: fence 1 refuses it.
            answered(op(OpKind::Claim, "a", 1, 62, 63), Outcome::FencedOut),
            op(OpKind::Submit, "b", 2, 70, 71),
            // After b's submit completed, a's claim no longer stands against it.
            answered(op(OpKind::Submit, "a", 1, 80, 81), Outcome::Duplicate),
        ];
        let c = from_history(&ops, &[]);
        assert_eq!(c["stale_submit_while_newer_claim_stood"], 1, "{c:?}");
        assert_eq!(c["stale_submit_refused_by_fence_2"], 1, "{c:?}");
        assert_eq!(c["stale_claim_after_newer_claim"], 1, "{c:?}");
        assert_eq!(c["stale_claim_refused_by_fence_1"], 1, "{c:?}");
    }

    #[test]
    fn a_paid_stale_submit_is_counted_but_not_as_refused() {
        let ops = vec![
            op(OpKind::Claim, "b", 2, 52, 53),
            op(OpKind::Submit, "a", 1, 60, 61),
        ];
        let c = from_history(&ops, &[]);
        assert_eq!(c["stale_submit_while_newer_claim_stood"], 1, "{c:?}");
        assert!(!c.contains_key("stale_submit_refused_by_fence_2"), "{c:?}");
    }

    #[test]
    fn a_grant_renewed_by_the_server_that_took_over_is_held_across_it() {
        let kill = |at: u64| Applied {
            kind: FaultKind::LeaderKill9,
            from_ns: at,
            to_ns: at + 10,
            target: Some("r0".into()),
        };
        let mut grant = op(OpKind::Grant, "a", 1, 0, 1);
        grant.deadline_ns = Some(100);
        let mut renew = op(OpKind::Renew, "a", 1, 90, 95);
        renew.deadline_ns = Some(190);
        let ops = vec![grant, renew];
        // The leader killed at 50: the renewal sent at 90 was answered by its successor.
        let c = from_history(&ops, &[kill(50)]);
        assert_eq!(c["grant_held_across_takeover"], 1, "{c:?}");
        // Killed at 95, after the renewal was sent: not held across it.
        let c = from_history(&ops, &[kill(95)]);
        assert!(!c.contains_key("grant_held_across_takeover"), "{c:?}");
        // A refused renewal holds nothing.
        let mut refused = ops.clone();
        refused[1].outcome = Some(Outcome::Lost);
        let c = from_history(&refused, &[kill(50)]);
        assert!(!c.contains_key("grant_held_across_takeover"), "{c:?}");
    }

    #[test]
    fn a_release_before_the_next_grant_is_no_takeover() {
        let ops = vec![
            op(OpKind::Grant, "a", 1, 0, 1),
            op(OpKind::Release, "a", 1, 5, 6),
            op(OpKind::Grant, "b", 2, 7, 8),
        ];
        let c = from_history(&ops, &[]);
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn two_takeovers_of_one_epoch_are_a_conflict() {
        let dir = std::env::temp_dir().join(format!("fp-coverage-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = |epoch: u64| {
            format!(
                "{{\"fields\":{{\"event\":\"leader_takeover\",\"epoch\":{epoch}}}}}\n\
                 {{\"fields\":{{\"event\":\"write_fenced\",\"epoch\":{epoch},\"why\":\"epoch {epoch} is over\"}}}}\n\
                 {{\"fields\":{{\"event\":\"leader_step_down\",\"epoch\":{epoch},\"why\":\"epoch {epoch} is over: another replica leads\"}}}}\n"
            )
        };
        std::fs::write(dir.join("lock-server.log"), line(1) + &line(2)).unwrap();
        // The flat shape the lock-server writes now.
        std::fs::write(
            dir.join("lock-server-1.log"),
            "{\"level\":\"INFO\",\"message\":\"took the leader row\",\"event\":\"leader_takeover\",\"epoch\":3}\n\
             {\"event\":\"write_fenced\",\"epoch\":3}\n\
             {\"event\":\"leader_step_down\",\"epoch\":3,\"why\":\"epoch 3 is over\"}\n",
        )
        .unwrap();
        assert!(epoch_conflicts(&dir).is_empty());
        let mut c = Coverage::new();
        from_logs(&mut c, &dir);
        assert_eq!(c["leader_change"], 2);
        assert_eq!(c["deposed_leader_write_fenced"], 3);
        std::fs::write(dir.join("lock-server-2.log"), line(2)).unwrap();
        let conflicts = epoch_conflicts(&dir);
        assert_eq!(conflicts.len(), 1, "{conflicts:?}");
        assert!(conflicts[0].contains("epoch 2"), "{conflicts:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
