//! The believed holding intervals of one key (rule 4's beliefs, extended by
//! acknowledged renewals) and the rules over them: 6 (grants that overlap),
//! 7 (a renewal acknowledged after a higher token's grant), 8 (a renewal
//! that shortened a promised end) and 9 (a renewal refused while its grant
//! was live). The [module doc](super) states them.

use crate::op::{Op, OpKind, Outcome};

/// Slack for rule 8: a deadline in the history is a reading of the SDK's
/// clock carried onto the history's clock (`now + remaining`), so two
/// promises of one end may differ by the microseconds between two clock
/// reads. A server that shortened a lease moves it by far more.
const RULE_8_SLACK_NS: u64 = 1_000_000;

/// A client's belief that it held a key: grant reply → release sent or the
/// latest deadline its grant, passed checks and acknowledged renewals
/// reported.
#[derive(Clone, Debug)]
pub struct Belief<'a> {
    /// The session that held it.
    pub session: &'a str,
    /// The grant's token.
    pub token: u64,
    /// The grant's invocation.
    pub asked_ns: u64,
    /// The grant's reply.
    pub from_ns: u64,
    /// The end: the release's invocation or the latest deadline, whichever is first.
    pub to_ns: u64,
    /// The invocations of the acknowledged renewals that extended it.
    pub renewed_ns: Vec<u64>,
    /// Whether the grant reported its deadline. One already lost when its
    /// reply came reports none: how long the service owed it is then
    /// unknown (its deadline lies somewhere before the reply), so rule 6
    /// cannot weigh it; rule 4 sees an empty belief.
    pub owed_known: bool,
}

/// Rule 6 over one key's beliefs: each acknowledged grant whose reply came
/// before a lower token's belief ended (module doc). A reply that came
/// before the lower token was even asked for contradicts the tokens' order:
/// that is rule 3's regression, not an overlap.
pub(super) fn grant_overlaps(payout: &str, beliefs: &[Belief<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for early in beliefs.iter().filter(|b| b.owed_known) {
        for late in beliefs.iter().filter(|b| b.token > early.token) {
            if late.from_ns >= early.asked_ns && late.from_ns < early.to_ns {
                out.push(format!(
                    "{payout}: the lock service answered the grant of token {} to {} {} µs \
                     before the grant of token {} to {} could have ended (its holder's \
                     deadline, renewals or release)",
                    late.token,
                    late.session,
                    (early.to_ns - late.from_ns) / 1000,
                    early.token,
                    early.session,
                ));
            }
        }
    }
    out
}

/// The acknowledged renewals among `ops`.
fn acked_renewals<'a, 'b>(ops: &'b [&'a Op]) -> impl Iterator<Item = &'b &'a Op> {
    ops.iter()
        .filter(|o| o.kind == OpKind::Renew && o.is(Outcome::Ok))
}

/// Rule 7 over one key's operations: a renewal acknowledged although it was
/// invoked after a grant of the key to a higher token had completed.
pub(super) fn late_renewals(payout: &str, ops: &[&Op]) -> Vec<String> {
    let mut out = Vec::new();
    for r in acked_renewals(ops) {
        let Some(t) = r.token else { continue };
        if let Some(g) = ops.iter().find(|g| {
            g.kind == OpKind::Grant
                && g.is(Outcome::Ok)
                && g.token > Some(t)
                && g.ok_ns.is_some_and(|ok| ok < r.inv_ns)
        }) {
            out.push(format!(
                "{payout}: a renewal of token {t} by {} was acknowledged, though it was sent \
                 {} µs after the key had been granted to token {} ({})",
                r.session,
                (r.inv_ns - g.ok_ns.unwrap_or_default()) / 1000,
                g.token.unwrap_or_default(),
                g.session,
            ));
        }
    }
    out
}

/// Rule 8 over one key's operations: an acknowledged renewal whose deadline
/// is earlier than one a grant or an acknowledged renewal of the same
/// session and token had promised before it was sent.
pub(super) fn shortened_renewals(payout: &str, ops: &[&Op]) -> Vec<String> {
    let mut out = Vec::new();
    for r in acked_renewals(ops) {
        let Some(end) = r.deadline_ns else { continue };
        let promised = ops
            .iter()
            .filter(|p| p.session == r.session && p.token == r.token)
            .filter(|p| matches!(p.kind, OpKind::Grant | OpKind::Renew) && p.is(Outcome::Ok))
            .filter(|p| p.ok_ns.is_some_and(|ok| ok < r.inv_ns))
            .filter_map(|p| p.deadline_ns)
            .max();
        if let Some(before) = promised
            && end.saturating_add(RULE_8_SLACK_NS) < before
        {
            out.push(format!(
                "{payout}: a renewal of token {} by {} was acknowledged with a deadline {} µs \
                 earlier than one its grant or an earlier renewal had promised",
                r.token.unwrap_or_default(),
                r.session,
                (before - end) / 1000,
            ));
        }
    }
    out
}

/// Rule 9 over one key's operations and beliefs: a renewal refused with
/// `LOCK_LOST` whose answer came back before the end of its grant's belief
/// (by more than the clock-reading slack): the server had dropped a grant
/// it had promised for longer.
pub(super) fn early_refusals(payout: &str, ops: &[&Op], beliefs: &[Belief<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for r in ops
        .iter()
        .filter(|o| o.kind == OpKind::Renew && o.is(Outcome::Lost))
    {
        let (Some(t), Some(ok)) = (r.token, r.ok_ns) else {
            continue;
        };
        if let Some(b) = beliefs.iter().find(|b| {
            b.session == r.session
                && b.token == t
                && b.from_ns <= r.inv_ns
                && ok.saturating_add(RULE_8_SLACK_NS) < b.to_ns
        }) {
            out.push(format!(
                "{payout}: a renewal of token {t} by {} was refused (LOCK_LOST) {} µs before \
                 the end its grant and renewals had promised",
                r.session,
                (b.to_ns - ok) / 1000,
            ));
        }
    }
    out
}

/// The believed holding intervals of one key, in order of their start.
/// A belief runs from the grant's reply; its end is the latest deadline the
/// grant or a passed check reported, pushed on by each acknowledged renewal
/// sent before the end so far (a renewal sent after it is too late to count,
/// and the SDK sends none), and cut at the release's invocation.
pub fn beliefs<'a>(ops: &[&'a Op]) -> Vec<Belief<'a>> {
    let mut out: Vec<Belief<'a>> = Vec::new();
    for g in ops
        .iter()
        .filter(|o| o.kind == OpKind::Grant && o.is(Outcome::Ok))
    {
        let (Some(token), Some(from_ns)) = (g.token, g.ok_ns) else {
            continue;
        };
        let mine = |o: &&&Op| o.session == g.session && o.token == Some(token);
        let mut deadline = ops
            .iter()
            .filter(mine)
            .filter(|o| o.kind == OpKind::Check && o.is(Outcome::Ok))
            .filter_map(|o| o.deadline_ns)
            .chain(g.deadline_ns)
            .max()
            .unwrap_or(from_ns);
        let mut renewals: Vec<&Op> = acked_renewals(ops)
            .filter(mine)
            .filter(|r| r.inv_ns >= g.inv_ns)
            .copied()
            .collect();
        renewals.sort_by_key(|r| r.inv_ns);
        let mut renewed_ns = Vec::new();
        for r in renewals {
            if r.inv_ns < deadline {
                deadline = deadline.max(r.deadline_ns.unwrap_or(0));
                renewed_ns.push(r.inv_ns);
            }
        }
        let released = ops
            .iter()
            .filter(mine)
            .filter(|o| o.kind == OpKind::Release)
            .map(|o| o.inv_ns)
            .min();
        let to_ns = released.map_or(deadline, |r| r.min(deadline)).max(from_ns);
        renewed_ns.retain(|&t| t < to_ns);
        out.push(Belief {
            session: &g.session,
            token,
            asked_ns: g.inv_ns,
            from_ns,
            to_ns,
            renewed_ns,
            owed_known: g.deadline_ns.is_some(),
        });
    }
    out.sort_by_key(|b| b.from_ns);
    out
}
