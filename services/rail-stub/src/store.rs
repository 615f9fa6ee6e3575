//! Where the ledger persists: nowhere ([`LedgerStore::Memory`], the default) or
//! an SQLite file ([`LedgerStore::Sqlite`], `--ledger sqlite:PATH`) so a long
//! experiment survives a rail-stub restart.
//!
//! Contract of every store: [`LedgerStore::save`] is called with the payouts a
//! request changed and the counters after it, *before* the reply is sent and
//! before memory changes; when it fails, nothing changed and the request
//! answers 503. [`LedgerStore::load`] returns payouts in creation order.
//!
//! SQLite runs in WAL mode with `synchronous=NORMAL`: a committed change
//! survives the process being killed (what a rail-stub restart needs), though
//! not necessarily a power loss.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use fencepost_api::rail::{LedgerCounters, PayoutState, PayoutView};
use rusqlite::{Connection, OptionalExtension, params};

/// Where `--ledger` says to keep the ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum LedgerSpec {
    /// In memory only; gone when the process stops.
    #[default]
    Memory,
    /// An SQLite database file, created if missing, reloaded on start.
    Sqlite(PathBuf),
}

/// A `--ledger` value that is neither `memory` nor `sqlite:PATH`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ledger {0:?} is not understood; expected memory or sqlite:PATH (e.g. sqlite:/tmp/rail.db)"
)]
pub struct LedgerSpecError(String);

impl FromStr for LedgerSpec {
    type Err = LedgerSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "memory" | "memory:" => Ok(LedgerSpec::Memory),
            t => match t.strip_prefix("sqlite:") {
                Some(path) if !path.is_empty() => Ok(LedgerSpec::Sqlite(PathBuf::from(path))),
                _ => Err(LedgerSpecError(text.to_string())),
            },
        }
    }
}

impl fmt::Display for LedgerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerSpec::Memory => f.write_str("memory"),
            LedgerSpec::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
        }
    }
}

/// Why the store failed. Callers answer 503 and change nothing; each variant
/// carries its source, and its doc says what the operator can do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused (disk full, locked, unreadable file): free space, wait
    /// for the other writer, or fix the file's permissions, then retry.
    #[error("sqlite ledger: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored payout's state is not PENDING, CLAIMED or PAID: the file was
    /// written by something else; point `--ledger` at another file.
    #[error(
        "sqlite ledger: payout {payout_id:?} has state {state:?}, not PENDING, CLAIMED or PAID"
    )]
    BadState {
        /// The payout.
        payout_id: String,
        /// The stored state.
        state: String,
    },
    /// A stored JSON value does not decode (or a value would not encode): the
    /// file was written by something else; point `--ledger` at another file.
    #[error("sqlite ledger: {what} is not valid JSON: {source}")]
    Json {
        /// Which value, e.g. `counters` or `p-1: submissions`.
        what: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
}

/// A [`StoreError::Json`] naming `what`.
fn json_error(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> StoreError {
    let what = what.into();
    move |source| StoreError::Json { what, source }
}

/// The ledger's persistence: none, or one SQLite connection.
#[derive(Debug)]
pub enum LedgerStore {
    /// Nothing is persisted.
    Memory,
    /// Every change is written to this database before the reply.
    Sqlite(Connection),
}

/// Tokens are u64 on the wire and i64 in SQLite; the cast keeps all 64 bits.
fn to_sql(token: u64) -> i64 {
    token as i64
}

/// The inverse of [`to_sql`].
fn from_sql(token: i64) -> u64 {
    token as u64
}

impl LedgerStore {
    /// Opens the store `spec` names, creating the SQLite schema if needed.
    pub fn open(spec: &LedgerSpec) -> Result<Self, StoreError> {
        match spec {
            LedgerSpec::Memory => Ok(LedgerStore::Memory),
            LedgerSpec::Sqlite(path) => Self::open_sqlite(path).map(LedgerStore::Sqlite),
        }
    }

    /// Opens (or creates) the SQLite file in WAL mode with the ledger schema.
    fn open_sqlite(path: &Path) -> Result<Connection, StoreError> {
        let conn = Connection::open(path)?;
        // WAL + NORMAL: a commit is durable against a killed process without an
        // fsync per request; readers never block the single writer.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS payouts (
                 seq           INTEGER PRIMARY KEY,
                 payout_id     TEXT NOT NULL UNIQUE,
                 amount_minor  INTEGER NOT NULL,
                 currency      TEXT NOT NULL,
                 state         TEXT NOT NULL,
                 claim_token   INTEGER,
                 paid_token    INTEGER,
                 highest_token INTEGER NOT NULL,
                 submissions   TEXT NOT NULL
             );
             CREATE TABLE IF NOT EXISTS counters (
                 id    INTEGER PRIMARY KEY CHECK (id = 1),
                 value TEXT NOT NULL
             );",
        )?;
        Ok(conn)
    }

    /// Every stored payout in creation order, and the stored counters.
    pub fn load(&self) -> Result<(Vec<PayoutView>, LedgerCounters), StoreError> {
        // A memory ledger starts empty every time.
        let LedgerStore::Sqlite(conn) = self else {
            return Ok((Vec::new(), LedgerCounters::default()));
        };
        let mut stmt = conn.prepare(
            "SELECT payout_id, amount_minor, currency, state, claim_token, paid_token,
                    highest_token, submissions
             FROM payouts ORDER BY seq",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, String>(7)?,
            ))
        })?;
        let mut payouts = Vec::new();
        for row in rows {
            let (payout_id, amount_minor, currency, state, claim, paid, highest, subs) = row?;
            let state = match state.as_str() {
                "PENDING" => PayoutState::Pending,
                "CLAIMED" => PayoutState::Claimed,
                "PAID" => PayoutState::Paid,
                other => {
                    return Err(StoreError::BadState {
                        payout_id,
                        state: other.to_string(),
                    });
                }
            };
            let submissions = serde_json::from_str(&subs)
                .map_err(json_error(format!("{payout_id}: submissions")))?;
            payouts.push(PayoutView {
                payout_id,
                amount_minor,
                currency,
                state,
                claim_token: claim.map(from_sql),
                paid_token: paid.map(from_sql),
                highest_token: from_sql(highest),
                submissions,
            });
        }
        // The counters are one JSON row; absent in a fresh file, so all zero.
        let counters = conn
            .query_row("SELECT value FROM counters WHERE id = 1", [], |r| {
                r.get::<_, String>(0)
            })
            .optional()?
            .map(|text| serde_json::from_str(&text).map_err(json_error("counters")))
            .transpose()?
            .unwrap_or_default();
        Ok((payouts, counters))
    }

    /// Writes `payouts` (inserted or updated by id) and `counters` in one
    /// transaction. A no-op in memory.
    pub fn save(
        &mut self,
        payouts: &[&PayoutView],
        counters: &LedgerCounters,
    ) -> Result<(), StoreError> {
        let LedgerStore::Sqlite(conn) = self else {
            return Ok(());
        };
        // One transaction per request: the payouts and the counters it moved
        // land together or not at all. Upsert keeps a payout's `seq` (its
        // creation order) and its immutable amount and currency.
        let tx = conn.transaction()?;
        {
            let mut upsert = tx.prepare_cached(
                "INSERT INTO payouts (payout_id, amount_minor, currency, state, claim_token,
                                      paid_token, highest_token, submissions)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (payout_id) DO UPDATE SET
                     state = excluded.state, claim_token = excluded.claim_token,
                     paid_token = excluded.paid_token, highest_token = excluded.highest_token,
                     submissions = excluded.submissions",
            )?;
            for p in payouts {
                let subs = serde_json::to_string(&p.submissions)
                    .map_err(json_error(format!("{}: submissions", p.payout_id)))?;
                upsert.execute(params![
                    p.payout_id,
                    p.amount_minor,
                    p.currency,
                    p.state.as_str(),
                    p.claim_token.map(to_sql),
                    p.paid_token.map(to_sql),
                    to_sql(p.highest_token),
                    subs,
                ])?;
            }
            let counters = serde_json::to_string(counters).map_err(json_error("counters"))?;
            tx.execute(
                "INSERT INTO counters (id, value) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET value = excluded.value",
                params![counters],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::new_payout;

    #[test]
    fn ledger_specs_parse_and_display() {
        assert_eq!("memory".parse(), Ok(LedgerSpec::Memory));
        assert_eq!(
            "sqlite:/tmp/x.db".parse(),
            Ok(LedgerSpec::Sqlite("/tmp/x.db".into()))
        );
        assert_eq!(LedgerSpec::Sqlite("/a/b".into()).to_string(), "sqlite:/a/b");
        let err = "postgres://x"
            .parse::<LedgerSpec>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("postgres://x") && err.contains("sqlite:PATH"),
            "{err}"
        );
        assert!("sqlite:".parse::<LedgerSpec>().is_err());
    }

    #[test]
    fn sqlite_round_trips_payouts_in_order_and_counters() {
        let conn = LedgerStore::open_sqlite(Path::new(":memory:")).unwrap();
        let mut store = LedgerStore::Sqlite(conn);
        let a = new_payout("a".into(), 5, "EUR".into());
        let mut b = new_payout("b".into(), 7, "USD".into());
        store.save(&[&b, &a], &LedgerCounters::default()).unwrap();
        b.state = PayoutState::Paid;
        b.claim_token = Some(u64::MAX);
        b.paid_token = Some(u64::MAX);
        b.highest_token = u64::MAX;
        let counters = LedgerCounters {
            paid: 1,
            fenced_out_fence1: 3,
            ..LedgerCounters::default()
        };
        store.save(&[&b], &counters).unwrap();
        let (payouts, loaded) = store.load().unwrap();
        assert_eq!(payouts, vec![b, a]);
        assert_eq!(loaded, counters);
    }
}
