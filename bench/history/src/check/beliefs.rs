//! The believed holding intervals of one key (rule 4's beliefs) and rule 6
//! over them (the [module doc](super) states both rules).

use crate::op::{Op, OpKind, Outcome};

/// A client's belief that it held a key: grant reply → release sent or deadline.
#[derive(Clone, Debug)]
pub(super) struct Belief<'a> {
    pub(super) session: &'a str,
    pub(super) token: u64,
    /// The grant's invocation.
    pub(super) asked_ns: u64,
    pub(super) from_ns: u64,
    pub(super) to_ns: u64,
}

/// Rule 6 over one key's beliefs: each acknowledged grant whose reply came
/// before a lower token's belief ended (module doc). A reply that came
/// before the lower token was even asked for contradicts the tokens' order:
/// that is rule 3's regression, not an overlap.
pub(super) fn grant_overlaps(payout: &str, beliefs: &[Belief<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for early in beliefs {
        for late in beliefs.iter().filter(|b| b.token > early.token) {
            if late.from_ns >= early.asked_ns && late.from_ns < early.to_ns {
                out.push(format!(
                    "{payout}: the lock service answered the grant of token {} to {} {} µs \
                     before the grant of token {} to {} could have ended (its holder's \
                     deadline or release)",
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

/// The believed holding intervals of one key, in order of their start.
pub(super) fn beliefs<'a>(ops: &[&'a Op]) -> Vec<Belief<'a>> {
    let mut out: Vec<Belief<'a>> = Vec::new();
    for g in ops
        .iter()
        .filter(|o| o.kind == OpKind::Grant && o.is(Outcome::Ok))
    {
        let (Some(token), Some(from_ns)) = (g.token, g.ok_ns) else {
            continue;
        };
        let mine = |o: &&&Op| o.session == g.session && o.token == Some(token);
        let deadline = ops
            .iter()
            .filter(mine)
            .filter(|o| o.kind == OpKind::Check && o.is(Outcome::Ok))
            .filter_map(|o| o.deadline_ns)
            .chain(g.deadline_ns)
            .max()
            .unwrap_or(from_ns);
        let released = ops
            .iter()
            .filter(mine)
            .filter(|o| o.kind == OpKind::Release)
            .map(|o| o.inv_ns)
            .min();
        let to_ns = released.map_or(deadline, |r| r.min(deadline)).max(from_ns);
        out.push(Belief {
            session: &g.session,
            token,
            asked_ns: g.inv_ns,
            from_ns,
            to_ns,
        });
    }
    out.sort_by_key(|b| b.from_ns);
    out
}
