//! Where the ledger persists: an SQLite file ([`LedgerStore::Sqlite`],
//! `--ledger sqlite:PATH`; by default one stable file, so PAID payouts and the
//! fences survive a restart) or nowhere ([`LedgerStore::Memory`],
//! `--ledger memory`, which forgets everything on restart and says so).
//!
//! Contract of every store: [`LedgerStore::save`] is called with the payouts a
//! request changed (and the one submission it appended, if any) and the
//! counters after it, *before* the reply is sent and before memory changes;
//! when it fails, nothing changed and the request answers 503.
//! [`LedgerStore::load`] returns payouts in creation order.
//!
//! Saves are incremental: a payout's row holds its scalar fields and the
//! counts of the submissions it does not list; each listed submission is one
//! row of `submissions`, appended when it is decided — a save never rewrites
//! a payout's list. (Files written before this layout kept the list as JSON
//! in `payouts.submissions`; it is still read, and no longer written.)
//!
//! SQLite runs in WAL mode with `synchronous=NORMAL`: a committed change
//! survives the process being killed (what a rail-stub restart needs), though
//! not necessarily a power loss. The file is opened in exclusive locking mode:
//! a second rail-stub on the same file fails to start instead of silently
//! interleaving its writes with the first one's.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use fencepost_api::rail::{
    LedgerCounters, OmittedSubmissions, PayoutState, PayoutView, Submission, SubmissionOutcome,
};
use rusqlite::{Connection, OptionalExtension, params};

/// Where `--ledger` says to keep the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerSpec {
    /// In memory only; gone when the process stops.
    Memory,
    /// An SQLite database file, created if missing, reloaded on start.
    Sqlite(PathBuf),
}

impl LedgerSpec {
    /// The default: SQLite at `$XDG_STATE_HOME/fencepost/rail-ledger.sqlite`,
    /// else `$HOME/.local/state/fencepost/rail-ledger.sqlite`, else
    /// `./fencepost-rail-ledger.sqlite` (also what `sqlite:` alone means).
    pub fn durable_default() -> Self {
        LedgerSpec::Sqlite(fencepost_api::default_state_file("rail-ledger.sqlite"))
    }

    /// True when the ledger survives a restart.
    pub fn is_durable(&self) -> bool {
        matches!(self, LedgerSpec::Sqlite(_))
    }
}

/// A `--ledger` value that is neither `memory` nor `sqlite:PATH`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ledger {0:?} is not understood; expected memory or sqlite:PATH (e.g. sqlite:/tmp/rail.db; sqlite: alone = the default file)"
)]
pub struct LedgerSpecError(String);

impl FromStr for LedgerSpec {
    type Err = LedgerSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "memory" | "memory:" => Ok(LedgerSpec::Memory),
            "sqlite:" => Ok(LedgerSpec::durable_default()),
            t => match t.strip_prefix("sqlite:") {
                Some(path) => Ok(LedgerSpec::Sqlite(PathBuf::from(path))),
                None => Err(LedgerSpecError(text.to_string())),
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
    /// SQLite refused (disk full, unreadable file, or the file is held by
    /// another rail-stub): free space, fix the permissions, or stop the other
    /// process / give this one another `--ledger`, then retry.
    #[error("sqlite ledger: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The directory for the ledger file could not be created: check the path
    /// and its permissions, or give another `--ledger`.
    #[error("cannot create the ledger's directory {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
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
    /// A stored value does not decode (or a value would not encode): the file
    /// was written by something else; point `--ledger` at another file.
    #[error("sqlite ledger: {what} is not valid: {source}")]
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

/// One payout a request changed, as the store writes it.
#[derive(Clone, Copy, Debug)]
pub struct Change<'a> {
    /// The payout after the request (its list is not rewritten).
    pub view: &'a PayoutView,
    /// The submission the request appended to the list, if any: one row.
    pub appended: Option<&'a Submission>,
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

/// The schema; `payouts.submissions` is the legacy JSON list (written `[]`).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS payouts (
    seq           INTEGER PRIMARY KEY,
    payout_id     TEXT NOT NULL UNIQUE,
    amount_minor  INTEGER NOT NULL,
    currency      TEXT NOT NULL,
    state         TEXT NOT NULL,
    claim_token   INTEGER,
    paid_token    INTEGER,
    highest_token INTEGER NOT NULL,
    submissions   TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS submissions (
    payout_seq INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    token      INTEGER NOT NULL,
    outcome    TEXT NOT NULL,
    PRIMARY KEY (payout_seq, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value TEXT NOT NULL
);";

fn outcome_str(o: SubmissionOutcome) -> &'static str {
    match o {
        SubmissionOutcome::Paid => "PAID",
        SubmissionOutcome::FencedOut => "FENCED_OUT",
        SubmissionOutcome::Duplicate => "DUPLICATE",
        SubmissionOutcome::NotClaimed => "NOT_CLAIMED",
    }
}

impl LedgerStore {
    /// Opens the store `spec` names, creating the directory, the file and the
    /// schema if needed.
    pub fn open(spec: &LedgerSpec) -> Result<Self, StoreError> {
        match spec {
            LedgerSpec::Memory => Ok(LedgerStore::Memory),
            LedgerSpec::Sqlite(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                        dir: dir.to_path_buf(),
                        source,
                    })?;
                }
                Self::open_sqlite(path).map(LedgerStore::Sqlite)
            }
        }
    }

    /// Opens (or creates) the SQLite file in WAL mode with the ledger schema,
    /// and takes its lock for as long as the connection lives.
    fn open_sqlite(path: &Path) -> Result<Connection, StoreError> {
        let conn = Connection::open(path)?;
        // Set first: a file held by another process fails within this, not 5 s.
        conn.busy_timeout(std::time::Duration::from_millis(500))?;
        // Exclusive before WAL: no shared-memory index, and the lock taken by
        // the first write below is kept until the connection closes.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        // WAL + NORMAL: a commit is durable against a killed process without an
        // fsync per request.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        // Files from before the incremental layout lack the omitted counts.
        let has_omitted = conn
            .prepare("SELECT 1 FROM pragma_table_info('payouts') WHERE name = 'omitted'")?
            .exists([])?;
        if !has_omitted {
            conn.execute_batch(
                "ALTER TABLE payouts ADD COLUMN omitted TEXT NOT NULL DEFAULT '{}'",
            )?;
        }
        // Take the write lock now, so a second process fails at start.
        conn.execute_batch("BEGIN EXCLUSIVE; COMMIT;")?;
        Ok(conn)
    }

    /// True when what is saved survives a restart.
    pub fn is_durable(&self) -> bool {
        matches!(self, LedgerStore::Sqlite(_))
    }

    /// Every stored payout in creation order, and the stored counters.
    pub fn load(&self) -> Result<(Vec<PayoutView>, LedgerCounters), StoreError> {
        // A memory ledger starts empty every time.
        let LedgerStore::Sqlite(conn) = self else {
            return Ok((Vec::new(), LedgerCounters::default()));
        };
        let mut listed: HashMap<i64, Vec<Submission>> = HashMap::new();
        let mut stmt = conn
            .prepare("SELECT payout_seq, token, outcome FROM submissions ORDER BY payout_seq, n")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        for row in rows {
            let (seq, token, outcome) = row?;
            let outcome = serde_json::from_value(serde_json::Value::String(outcome))
                .map_err(json_error(format!("payout #{seq}: a submission's outcome")))?;
            listed.entry(seq).or_default().push(Submission {
                token: from_sql(token),
                outcome,
            });
        }
        let mut stmt = conn.prepare(
            "SELECT seq, payout_id, amount_minor, currency, state, claim_token, paid_token,
                    highest_token, submissions, omitted
             FROM payouts ORDER BY seq",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<i64>>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, String>(8)?,
                r.get::<_, String>(9)?,
            ))
        })?;
        let mut payouts = Vec::new();
        for row in rows {
            let (
                seq,
                payout_id,
                amount_minor,
                currency,
                state,
                claim,
                paid,
                highest,
                legacy,
                omitted,
            ) = row?;
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
            let mut submissions: Vec<Submission> = serde_json::from_str(&legacy)
                .map_err(json_error(format!("{payout_id}: submissions")))?;
            submissions.extend(listed.remove(&seq).unwrap_or_default());
            let submissions_omitted: OmittedSubmissions = serde_json::from_str(&omitted)
                .map_err(json_error(format!("{payout_id}: submissions_omitted")))?;
            payouts.push(PayoutView {
                payout_id,
                amount_minor,
                currency,
                state,
                claim_token: claim.map(from_sql),
                paid_token: paid.map(from_sql),
                highest_token: from_sql(highest),
                submissions,
                submissions_omitted,
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

    /// Writes `changes` (each payout's row inserted or updated by id, plus the
    /// one submission it appended) and `counters` in one transaction. A no-op
    /// in memory.
    pub fn save(
        &mut self,
        changes: &[Change<'_>],
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
                                      paid_token, highest_token, omitted, submissions)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, '[]')
                 ON CONFLICT (payout_id) DO UPDATE SET
                     state = excluded.state, claim_token = excluded.claim_token,
                     paid_token = excluded.paid_token, highest_token = excluded.highest_token,
                     omitted = excluded.omitted
                 RETURNING seq",
            )?;
            let mut append = tx.prepare_cached(
                "INSERT INTO submissions (payout_seq, n, token, outcome)
                 VALUES (?1, (SELECT COUNT(*) FROM submissions WHERE payout_seq = ?1), ?2, ?3)",
            )?;
            for c in changes {
                let p = c.view;
                let omitted = serde_json::to_string(&p.submissions_omitted)
                    .map_err(json_error(format!("{}: submissions_omitted", p.payout_id)))?;
                let seq: i64 = upsert.query_row(
                    params![
                        p.payout_id,
                        p.amount_minor,
                        p.currency,
                        p.state.as_str(),
                        p.claim_token.map(to_sql),
                        p.paid_token.map(to_sql),
                        to_sql(p.highest_token),
                        omitted,
                    ],
                    |r| r.get(0),
                )?;
                if let Some(s) = c.appended {
                    append.execute(params![seq, to_sql(s.token), outcome_str(s.outcome)])?;
                }
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
    use crate::ledger::{Decision, claim, new_payout, submit};

    #[test]
    fn ledger_specs_parse_and_display() {
        assert_eq!("memory".parse(), Ok(LedgerSpec::Memory));
        assert_eq!(
            "sqlite:/tmp/x.db".parse(),
            Ok(LedgerSpec::Sqlite("/tmp/x.db".into()))
        );
        assert_eq!("sqlite:".parse(), Ok(LedgerSpec::durable_default()));
        assert_eq!(LedgerSpec::Sqlite("/a/b".into()).to_string(), "sqlite:/a/b");
        let err = "postgres://x"
            .parse::<LedgerSpec>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("postgres://x") && err.contains("sqlite:PATH"),
            "{err}"
        );
        assert!(LedgerSpec::durable_default().is_durable());
        assert!(!LedgerSpec::Memory.is_durable());
    }

    /// Saves what `d` changed, as the state layer does; returns the payout after it.
    fn save_decision(
        store: &mut LedgerStore,
        d: &Decision,
        counters: &LedgerCounters,
    ) -> PayoutView {
        let next = d.next.clone().expect("a change");
        let change = Change {
            view: &next,
            appended: d.appended.as_ref(),
        };
        store.save(&[change], counters).unwrap();
        next
    }

    fn temp_file(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "rail-store-{tag}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        dir.join("ledger.sqlite")
    }

    #[test]
    fn sqlite_round_trips_payouts_in_order_submissions_and_counters() {
        let path = temp_file("round-trip");
        let mut store = LedgerStore::open(&LedgerSpec::Sqlite(path.clone())).unwrap();
        let a = new_payout("a".into(), 5, "EUR".into());
        let mut b = new_payout("b".into(), 7, "USD".into());
        fn change(view: &PayoutView) -> Change<'_> {
            Change {
                view,
                appended: None,
            }
        }
        store
            .save(&[change(&b), change(&a)], &LedgerCounters::default())
            .unwrap();
        b.state = PayoutState::Paid;
        b.claim_token = Some(u64::MAX);
        b.paid_token = Some(u64::MAX);
        b.highest_token = u64::MAX;
        let counters = LedgerCounters {
            paid: 1,
            fenced_out_fence1: 3,
            ..LedgerCounters::default()
        };
        store.save(&[change(&b)], &counters).unwrap();
        // Submissions are appended one row each, never rewritten.
        let mut c = new_payout("c".into(), 1, "EUR".into());
        for t in [1, 1, 2] {
            let d = if t == 2 { claim(&c, 2) } else { submit(&c, t) };
            c = save_decision(&mut store, &d, &counters);
        }
        c = save_decision(&mut store, &submit(&c, 2), &counters);
        drop(store);
        let store = LedgerStore::open(&LedgerSpec::Sqlite(path.clone())).unwrap();
        let (payouts, loaded) = store.load().unwrap();
        assert_eq!(payouts, vec![b, a, c.clone()]);
        assert_eq!(c.submissions.len(), 3);
        assert_eq!(loaded, counters);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_second_process_on_the_same_file_is_refused() {
        let path = temp_file("exclusive");
        let first = LedgerStore::open(&LedgerSpec::Sqlite(path.clone())).unwrap();
        let second = LedgerStore::open(&LedgerSpec::Sqlite(path.clone()));
        assert!(
            matches!(&second, Err(StoreError::Sqlite(e)) if e.to_string().contains("locked")),
            "{second:?}"
        );
        drop(first);
        assert!(LedgerStore::open(&LedgerSpec::Sqlite(path.clone())).is_ok());
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_file_in_the_old_layout_is_read_and_extended() {
        let path = temp_file("legacy");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE payouts (seq INTEGER PRIMARY KEY, payout_id TEXT NOT NULL UNIQUE,
                     amount_minor INTEGER NOT NULL, currency TEXT NOT NULL, state TEXT NOT NULL,
                     claim_token INTEGER, paid_token INTEGER, highest_token INTEGER NOT NULL,
                     submissions TEXT NOT NULL);
                 INSERT INTO payouts VALUES (1, 'p', 1, 'EUR', 'CLAIMED', 3, NULL, 3,
                     '[{\"token\":2,\"outcome\":\"NOT_CLAIMED\"}]');",
            )
            .unwrap();
        }
        let mut store = LedgerStore::open(&LedgerSpec::Sqlite(path.clone())).unwrap();
        let (payouts, _) = store.load().unwrap();
        assert_eq!(payouts[0].submissions.len(), 1);
        let next = save_decision(
            &mut store,
            &submit(&payouts[0], 3),
            &LedgerCounters::default(),
        );
        let (payouts, _) = store.load().unwrap();
        assert_eq!(payouts, vec![next]);
        drop(store);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
