//! How a batch of [`Write`]s becomes few PostgreSQL statements: the writes
//! are cut, in order, into *segments* whose writes pairwise commute, and each
//! segment runs as one array-parameter (`unnest`) statement per kind of write.
//! A group-committed batch of 16 clients' grants and releases is then two
//! statements, not 16 — PostgreSQL's cost per statement (bind, plan, execute,
//! one protocol round of messages) was most of its CPU per grant.
//!
//! **Why reordering inside a segment is safe.** Two writes are kept in one
//! segment only if either order of them leaves the same rows and returns the
//! same tokens:
//! - lock writes (`Grant`, `SetLease`, `ClearGrants`) on *different* keys
//!   touch different rows; two on the same key never share a segment;
//! - `DeleteSessions(ids)` clears the grants those sessions hold: it does not
//!   commute with a `Grant` *to* one of them (so they are split), and it does
//!   commute with `SetLease`/`ClearGrants` of such a grant (both orders end
//!   with the holder cleared) and with a `Grant` of that key to another
//!   session (both orders end with the new holder);
//! - `CreateSession(s)` touches only `fp_sessions` (no foreign key): it is
//!   split only from another write naming `s`;
//! - `RecordExpired` touches only `fp_tombstones`, which no other write
//!   touches: it commutes with everything (two of them insert the union of
//!   their ids; the segment prunes by the longest age any of them keeps).
//!
//! Segments run in order, so the batch means exactly what its writes meant
//! one by one. This module is pure (no connection): [`plan`] is unit-tested.

use std::collections::HashSet;

use super::model::Write;

/// Inserts many sessions in one statement.
pub(crate) const INSERT_SESSIONS_SQL: &str = "
INSERT INTO fp_sessions (id, owner_id, ttl_ms, principal)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[])";

/// Issues the next token of each (distinct) key and sets its holder; returns
/// `(key, token)` per key.
pub(crate) const GRANTS_SQL: &str = "
INSERT INTO fp_locks (key, last_token, holder_session, holder_token, lease_ms)
SELECT g.key, 1, g.session, 1, g.lease FROM unnest($1::text[], $2::text[], $3::bigint[]) AS g(key, session, lease)
ON CONFLICT (key) DO UPDATE SET
    last_token     = fp_locks.last_token + 1,
    holder_session = excluded.holder_session,
    holder_token   = fp_locks.last_token + 1,
    lease_ms       = excluded.lease_ms
RETURNING key, last_token";

/// Records the lease of each (distinct) `(key, token)` that still holds.
pub(crate) const SET_LEASES_SQL: &str = "
UPDATE fp_locks SET lease_ms = c.lease
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS c(key, token, lease)
WHERE fp_locks.key = c.key AND fp_locks.holder_token = c.token";

/// Clears each `(key, token)` that is still the holder, in one statement.
/// `holder_session` stays as the key's *last* holder (see
/// [`super::postgres`]: a release changes no indexed column, so it is a HOT
/// update); a row is held exactly when `holder_token` is set.
pub(crate) const CLEAR_GRANTS_SQL: &str = "
UPDATE fp_locks SET holder_token = NULL, lease_ms = NULL
FROM unnest($1::text[], $2::bigint[]) AS c(key, token)
WHERE fp_locks.key = c.key AND fp_locks.holder_token = c.token";

/// L3 and the sweeper's session delete in one statement (found through the
/// `holder_session` index; released rows of those sessions are left alone).
pub(crate) const DELETE_SESSIONS_SQL: &str = "
WITH gone AS (DELETE FROM fp_sessions WHERE id = ANY($1::text[]))
UPDATE fp_locks SET holder_token = NULL, lease_ms = NULL
WHERE holder_session = ANY($1::text[]) AND holder_token IS NOT NULL";

/// One statement of a batch, with its array parameters.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Statement<'a> {
    /// [`INSERT_SESSIONS_SQL`].
    InsertSessions(Inserts<'a>),
    /// [`GRANTS_SQL`].
    Grants(Grants<'a>),
    /// [`SET_LEASES_SQL`].
    SetLeases(Leases<'a>),
    /// [`CLEAR_GRANTS_SQL`].
    ClearGrants(Clears<'a>),
    /// [`DELETE_SESSIONS_SQL`]: the session ids.
    DeleteSessions(Vec<&'a str>),
    /// [`PG_RECORD_EXPIRED_SQL`]: the tombstones' insert and prune.
    RecordExpired {
        /// The expired sessions' ids.
        ids: Vec<&'a str>,
        /// Each id's principal (NULL: auth off).
        principals: Vec<Option<&'a str>>,
        /// The age kept, ms.
        keep_ms: i64,
    },
}

/// Every tombstone, oldest first: id, age in ms on the database's clock
/// (`now()`: the transaction's start).
pub(crate) const PG_TOMBSTONE_SELECT_SQL: &str = "SELECT id, (extract(epoch from now()) * 1000)::bigint - expired_at_ms, principal FROM fp_tombstones ORDER BY expired_at_ms, id";

/// Records (or refreshes) a tombstone per distinct id of `$1` and forgets
/// the others older than `$2` ms, on the database's clock, in one statement
/// (a batch's statements are pipelined one request each). The prune leaves
/// the ids being inserted alone, so no row is touched twice. `$3` holds
/// each id's principal (an id is expired once, so `DISTINCT ON`
/// keeps one row per id whatever the batch holds).
pub(crate) const PG_RECORD_EXPIRED_SQL: &str = "
WITH pruned AS (
    DELETE FROM fp_tombstones
    WHERE expired_at_ms < (extract(epoch from now()) * 1000)::bigint - $2 AND id <> ALL($1::text[])
)
INSERT INTO fp_tombstones (id, expired_at_ms, principal)
SELECT DISTINCT ON (t.id) t.id, (extract(epoch from now()) * 1000)::bigint, t.principal
FROM unnest($1::text[], $3::text[]) AS t(id, principal)
ON CONFLICT (id) DO UPDATE SET expired_at_ms = excluded.expired_at_ms, principal = excluded.principal";

/// The parameters of [`INSERT_SESSIONS_SQL`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Inserts<'a> {
    pub ids: Vec<&'a str>,
    pub owners: Vec<&'a str>,
    pub ttls: Vec<i64>,
    pub principals: Vec<Option<&'a str>>,
}

/// The parameters of [`GRANTS_SQL`]; `writes[i]` is the index in the batch
/// of `keys[i]`'s grant (where its token goes).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Grants<'a> {
    pub keys: Vec<&'a str>,
    pub sessions: Vec<&'a str>,
    pub leases: Vec<i64>,
    pub writes: Vec<usize>,
}

/// The parameters of [`SET_LEASES_SQL`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Leases<'a> {
    pub keys: Vec<&'a str>,
    pub tokens: Vec<i64>,
    pub leases: Vec<i64>,
}

/// The parameters of [`CLEAR_GRANTS_SQL`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Clears<'a> {
    pub keys: Vec<&'a str>,
    pub tokens: Vec<i64>,
}

/// The writes of one segment, by kind, and what they name.
#[derive(Default)]
struct Segment<'a> {
    /// Keys a lock write of this segment touches.
    keys: HashSet<&'a str>,
    /// Sessions a grant of this segment is to.
    granted_to: HashSet<&'a str>,
    /// Sessions this segment creates or deletes.
    sessions: HashSet<&'a str>,
    inserts: Inserts<'a>,
    grants: Grants<'a>,
    leases: Leases<'a>,
    clears: Clears<'a>,
    deletes: Vec<&'a str>,
    expired: Vec<&'a str>,
    expired_principals: Vec<Option<&'a str>>,
    expired_keep_ms: i64,
}

impl<'a> Segment<'a> {
    /// Whether `w` commutes with every write already in this segment.
    fn admits(&self, w: &'a Write) -> bool {
        match w {
            Write::CreateSession(s) => {
                !self.sessions.contains(s.id.as_str()) && !self.granted_to.contains(s.id.as_str())
            }
            Write::DeleteSessions(ids) => ids.iter().all(|id| {
                !self.sessions.contains(id.as_str()) && !self.granted_to.contains(id.as_str())
            }),
            Write::Grant {
                key, session_id, ..
            } => !self.keys.contains(key.as_str()) && !self.sessions.contains(session_id.as_str()),
            Write::SetLease { key, .. } => !self.keys.contains(key.as_str()),
            Write::ClearGrants(grants) => {
                grants.iter().all(|(k, _)| !self.keys.contains(k.as_str()))
            }
            Write::RecordExpired { .. } => true,
        }
    }

    /// Adds `w` (the batch's write number `at`); [`Self::admits`] said yes.
    fn push(&mut self, at: usize, w: &'a Write) {
        match w {
            Write::CreateSession(s) => {
                self.sessions.insert(&s.id);
                self.inserts.ids.push(&s.id);
                self.inserts.owners.push(&s.owner_id);
                self.inserts.ttls.push(s.ttl_ms as i64);
                self.inserts.principals.push(s.principal.as_deref());
            }
            Write::DeleteSessions(gone) => {
                self.sessions.extend(gone.iter().map(String::as_str));
                self.deletes.extend(gone.iter().map(String::as_str));
            }
            Write::Grant {
                key,
                session_id,
                lease_ms,
            } => {
                self.keys.insert(key);
                self.granted_to.insert(session_id);
                self.grants.keys.push(key);
                self.grants.sessions.push(session_id);
                self.grants.leases.push(*lease_ms as i64);
                self.grants.writes.push(at);
            }
            Write::SetLease {
                key,
                token,
                lease_ms,
            } => {
                self.keys.insert(key);
                self.leases.keys.push(key);
                self.leases.tokens.push(*token as i64);
                self.leases.leases.push(*lease_ms as i64);
            }
            Write::ClearGrants(grants) => {
                for (k, t) in grants {
                    self.keys.insert(k);
                    self.clears.keys.push(k);
                    self.clears.tokens.push(*t as i64);
                }
            }
            Write::RecordExpired {
                ids,
                principals,
                keep_ms,
            } => {
                self.expired.extend(ids.iter().map(String::as_str));
                self.expired_principals
                    .extend((0..ids.len()).map(|i| principals.get(i).and_then(|p| p.as_deref())));
                let keep = i64::try_from(*keep_ms).unwrap_or(i64::MAX);
                self.expired_keep_ms = self.expired_keep_ms.max(keep);
            }
        }
    }

    /// Its non-empty statements, in a fixed order (any order is the same).
    fn finish(self, out: &mut Vec<Statement<'a>>) {
        if !self.inserts.ids.is_empty() {
            out.push(Statement::InsertSessions(self.inserts));
        }
        if !self.grants.keys.is_empty() {
            out.push(Statement::Grants(self.grants));
        }
        if !self.leases.keys.is_empty() {
            out.push(Statement::SetLeases(self.leases));
        }
        if !self.clears.keys.is_empty() {
            out.push(Statement::ClearGrants(self.clears));
        }
        if !self.deletes.is_empty() {
            out.push(Statement::DeleteSessions(self.deletes));
        }
        if !self.expired.is_empty() {
            out.push(Statement::RecordExpired {
                ids: self.expired,
                principals: self.expired_principals,
                keep_ms: self.expired_keep_ms,
            });
        }
    }
}

/// The statements that run `writes`, in order: the fewest a greedy cut into
/// commuting segments gives (one per kind per segment).
pub(crate) fn plan(writes: &[Write]) -> Vec<Statement<'_>> {
    let mut out = Vec::new();
    let mut segment = Segment::default();
    for (at, w) in writes.iter().enumerate() {
        if !segment.admits(w) {
            std::mem::take(&mut segment).finish(&mut out);
        }
        segment.push(at, w);
    }
    segment.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::model::SessionRecord;

    fn grant(key: &str, session: &str) -> Write {
        Write::Grant {
            key: key.into(),
            session_id: session.into(),
            lease_ms: 1000,
        }
    }

    fn clear(key: &str, token: u64) -> Write {
        Write::ClearGrants(vec![(key.into(), token)])
    }

    fn kinds(p: &[Statement]) -> Vec<&'static str> {
        p.iter()
            .map(|s| match s {
                Statement::InsertSessions(_) => "insert",
                Statement::Grants(_) => "grants",
                Statement::SetLeases(_) => "leases",
                Statement::ClearGrants(_) => "clears",
                Statement::DeleteSessions(_) => "deletes",
                Statement::RecordExpired { .. } => "expired",
            })
            .collect()
    }

    /// The sweeper's expiry (delete, then tombstones) is one segment even
    /// behind grants to other sessions; the prune keeps the longest age asked.
    #[test]
    fn an_expiry_and_its_tombstones_share_a_segment() {
        let expire = |ids: &[&str], keep_ms| {
            [
                Write::DeleteSessions(ids.iter().map(|s| s.to_string()).collect()),
                Write::RecordExpired {
                    ids: ids.iter().map(|s| s.to_string()).collect(),
                    principals: ids
                        .iter()
                        .map(|s| (*s != "s2").then(|| format!("p-{s}")))
                        .collect(),
                    keep_ms,
                },
            ]
        };
        let mut writes = vec![grant("k1", "s9")];
        writes.extend(expire(&["s1", "s2"], 1_000));
        writes.extend(expire(&["s3"], 5_000));
        let p = plan(&writes);
        assert_eq!(kinds(&p), ["grants", "deletes", "expired"]);
        assert_eq!(
            p[2],
            Statement::RecordExpired {
                ids: vec!["s1", "s2", "s3"],
                principals: vec![Some("p-s1"), None, Some("p-s3")],
                keep_ms: 5_000
            }
        );
    }

    #[test]
    fn grants_and_releases_of_distinct_keys_are_two_statements() {
        let writes: Vec<Write> = (0..16)
            .map(|i| {
                if i % 2 == 0 {
                    grant(&format!("k{i}"), &format!("s{i}"))
                } else {
                    clear(&format!("k{i}"), 7)
                }
            })
            .collect();
        let p = plan(&writes);
        assert_eq!(kinds(&p), ["grants", "clears"]);
        let Statement::Grants(Grants { keys, writes, .. }) = &p[0] else {
            panic!("{p:?}")
        };
        assert_eq!(keys.len(), 8);
        assert_eq!(
            writes,
            &[0, 2, 4, 6, 8, 10, 12, 14],
            "token slots in batch order"
        );
    }

    #[test]
    fn two_writes_of_one_key_keep_their_order() {
        let writes = [grant("k", "s1"), clear("k", 1), grant("k", "s2")];
        assert_eq!(kinds(&plan(&writes)), ["grants", "clears", "grants"]);
        let writes = [
            Write::SetLease {
                key: "k".into(),
                token: 1,
                lease_ms: 5,
            },
            Write::SetLease {
                key: "k".into(),
                token: 1,
                lease_ms: 9,
            },
        ];
        assert_eq!(
            kinds(&plan(&writes)),
            ["leases", "leases"],
            "last lease wins"
        );
    }

    #[test]
    fn a_session_delete_is_cut_from_a_grant_to_that_session_only() {
        let writes = [
            grant("a", "s1"),
            Write::DeleteSessions(vec!["s1".into()]),
            grant("b", "s1"),
        ];
        assert_eq!(kinds(&plan(&writes)), ["grants", "deletes", "grants"]);
        // A delete of another session, and a release of s1's grant, commute.
        let writes = [
            grant("a", "s2"),
            clear("c", 3),
            Write::DeleteSessions(vec!["s1".into()]),
            grant("b", "s3"),
        ];
        assert_eq!(kinds(&plan(&writes)), ["grants", "clears", "deletes"]);
    }

    #[test]
    fn create_session_then_a_grant_to_it_are_split() {
        let s = SessionRecord {
            id: "s1".into(),
            owner_id: "o".into(),
            ttl_ms: 1000,
            principal: None,
        };
        // Within a segment inserts run first: a grant before the session's
        // insert is cut off, one to another session is not.
        let writes = [grant("a", "s1"), Write::CreateSession(s.clone())];
        assert_eq!(kinds(&plan(&writes)), ["grants", "insert"]);
        let writes = [grant("a", "s2"), Write::CreateSession(s)];
        assert_eq!(kinds(&plan(&writes)), ["insert", "grants"]);
        assert!(plan(&[]).is_empty());
    }
}
