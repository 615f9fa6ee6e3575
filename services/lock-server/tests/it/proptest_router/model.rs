//! [`Model`]: what a run has seen on the wire (sessions opened, the latest
//! grant per key, the largest token per key), which resolves the symbolic
//! references of a step and is what the token checks compare with.

use std::collections::HashMap;

use fencepost_api::clock::MonoTime;

use super::vocabulary::{KeyCase, ODD_SESSIONS, Sess, TOKEN_RAW, Tok, WRONG_TYPE};

/// A grant as the run saw it.
pub(super) struct Held {
    pub(super) session_id: String,
    pub(super) token: u64,
    /// The fake clock at the L4/L5 that set the lease.
    pub(super) started: MonoTime,
    pub(super) lease_ms: u64,
}

/// What the run has seen, to resolve symbolic references and check tokens.
#[derive(Default)]
pub(super) struct Model {
    pub(super) keys: Vec<KeyCase>,
    /// Every session id L1 returned, in order (deleted ones stay: they are useful 404s).
    pub(super) sessions: Vec<String>,
    /// Per key: the latest grant L4 returned, until released.
    pub(super) holder: HashMap<String, Held>,
    /// Per key: the largest token seen on the wire.
    pub(super) max_token: HashMap<String, u64>,
}

impl Model {
    /// Resolves a session reference to `(path segment, JSON value, path reaches the handler)`.
    pub(super) fn session(&self, s: &Sess, key: Option<&str>) -> (String, String, bool) {
        let real = |id: &String| (id.clone(), format!("\"{id}\""), true);
        let unknown = || {
            let id = "0".repeat(32);
            (id.clone(), format!("\"{id}\""), true)
        };
        match s {
            Sess::Pool(i) if !self.sessions.is_empty() => {
                real(&self.sessions[i % self.sessions.len()])
            }
            Sess::Holder => match key.and_then(|k| self.holder.get(k)) {
                Some(h) => real(&h.session_id),
                None => self.session(&Sess::Latest, None),
            },
            Sess::Pool(_) | Sess::Latest => self.sessions.last().map(real).unwrap_or_else(unknown),
            Sess::Unknown(n) => {
                let id = format!("{n:032x}");
                (id.clone(), format!("\"{id}\""), true)
            }
            Sess::Odd(i) => {
                let (p, j, ok) = ODD_SESSIONS[*i];
                (p.to_string(), j.to_string(), ok)
            }
            Sess::WrongType(i) => ("5".into(), WRONG_TYPE[*i].to_string(), true),
        }
    }

    /// Resolves a token to its raw JSON and, when it is a u64, its value.
    pub(super) fn token(&self, t: &Tok, key: Option<&str>) -> (String, Option<u64>) {
        let right = key
            .and_then(|k| {
                self.holder
                    .get(k)
                    .map(|h| h.token)
                    .or(self.max_token.get(k).copied())
            })
            .unwrap_or(1);
        let n = match t {
            Tok::Right => right,
            Tok::Prev => right.saturating_sub(1),
            Tok::Next => right.saturating_add(1),
            Tok::Zero => 0,
            Tok::Max => u64::MAX,
            Tok::Small(n) => *n,
            Tok::Raw(i) => return (TOKEN_RAW[*i].to_string(), None),
        };
        (n.to_string(), Some(n))
    }
}
